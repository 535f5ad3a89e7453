"""The paper's mathematics, one module per idea, each function next to the equation it implements.

Holds: the one-block toy and its training (:mod:`.block`, :mod:`.block_engines`, :mod:`.attention_kinds`,
:mod:`.bags`, :mod:`.embeddings`), Theorem 1's invariants (:mod:`.invariants`), saliency (:mod:`.saliency`), the
modified-MLP dynamics of Theorems 2 and 4 (:mod:`.dynamics`) and the paper's Fig. 4 toy (:mod:`.softmax_dynamics`),
Theorem 3's ReLU node (:mod:`.nonlinear`),
Theorem 5's latent tree (:mod:`.latent_tree`), and Table 1 (:mod:`.table1`: the multilayer model on the
combination hierarchy (:mod:`.combination_hierarchy`), its runs, its configuration search and its command line,
``python -m joma_lib table1``).

May import: :mod:`joma_lib.base`, and its own modules (no circles). Nothing here draws a figure or knows a page.
"""
