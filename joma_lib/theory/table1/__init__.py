"""Paper Table 1, all of it below the page: the multilayer model on the combination hierarchy and its training
(:mod:`.model`), the named configurations and the whole table (:mod:`.runs`), the same table trained as one
stacked model (:mod:`.stacked`, :mod:`.stacked_run`), the configuration search (:mod:`.exploration`), the command
line (:mod:`.cli`, ``python -m joma_lib table1``) and the stored runs (``results/``). The figures are drawn by
the Table 1 chapter (:mod:`joma_lib.chapters.table1`)."""
