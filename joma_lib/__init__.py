"""joma_lib: the library behind the JoMA interactive companion.

Each module holds one piece of the paper's mathematics or experiments
(Tian, Wang, Zhang, Chen, Du, *JoMA: Demystifying Multilayer Transformers via
JOint Dynamics of MLP and Attention*, ICLR 2024, arXiv:2310.00535).
Figures live in :mod:`joma_lib.figures`; ``python -m joma_lib.figures`` regenerates
and verifies them.
"""

__version__ = "0.1.0"
