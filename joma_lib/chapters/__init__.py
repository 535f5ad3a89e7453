"""One package per chapter of the book: its figures (``figures.py``), and its kernel-free explorer
(``explorer.py``) and live widget (``widget.py``) where the page has them. Chapters import the kit and the
layers below, never each other; drawing shared by the WikiText chapters is :mod:`joma_lib.chapters.sweeps`.
"""
