"""Paper Table 1 beyond one run (:mod:`joma_lib.multilayer`): the named configurations and the whole table
(:mod:`~joma_lib.table1.runs`), the configuration search (:mod:`~joma_lib.table1.exploration`) and the command line
(:mod:`~joma_lib.table1.cli`, ``python -m joma_lib.table1``)."""
