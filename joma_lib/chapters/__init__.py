"""One package per chapter of the book (``book/<page>.md`` -> ``chapters/<page>/``): its figures (``figures.py``),
and its kernel-free explorer (``explorer.py``) and live widget (``widget.py``) where the page has them.

May import: :mod:`joma_lib.kit`, :mod:`joma_lib.lm`, :mod:`joma_lib.theory`, :mod:`joma_lib.base`; never another
chapter (drawing two chapters share lives in the kit, e.g. :mod:`joma_lib.kit.sweeps`).
"""
