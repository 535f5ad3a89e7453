"""Every figure of the paper (and of the companion), regenerable and checkable.

``registry()`` lists them; ``compute``/``draw``/``show`` make them; ``verify``
compares them with committed reference data. Command line:
``python -m joma_lib.figures list | make [ids] | verify [ids] | update [ids]``.
"""

from joma_lib.kit.harness import (
    MissingReferenceError,
    compare,
    compute,
    draw,
    load_reference,
    save_outputs,
    show,
    update_reference,
    verify,
)
from joma_lib.kit.registry import Claim, FigureSpec, Tolerance, get_spec, registry

__all__ = [
    "Claim", "FigureSpec", "MissingReferenceError", "Tolerance", "compare", "compute", "draw", "get_spec",
    "load_reference", "registry", "save_outputs", "show", "update_reference", "verify",
]
