"""The command line of the figures, ``python -m joma_lib.figures``, and their committed reference data.

The command is :mod:`joma_lib.kit.cli` (this package is its short alias); ``reference/`` holds each figure's
reference data (``<id>.npz``) and manifest (``<id>.json``), read by :mod:`joma_lib.kit.harness`.

The top layer, beside ``joma_lib/__main__.py``: it may import every layer below.
"""
