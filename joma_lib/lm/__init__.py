"""Language models on real text: the authors' WikiText-2 runs and our own re-run (paper Figs. 6 and 8)."""
