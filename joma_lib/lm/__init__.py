"""Language models on real text: the authors' WikiText-2 runs and our own re-run (paper Figs. 6 and 8), and Pythia
(paper Fig. 7).

Holds the model and its training step (runs one at a time or stacked as one model), the sweeps, their presets,
command line (``python -m joma_lib.lm``) and Slurm runner, the data, the metrics, the precision choice and the
stored runs (``results/``).

May import: :mod:`joma_lib.theory` and :mod:`joma_lib.base`.
"""
