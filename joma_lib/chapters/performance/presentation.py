"""How the Performance page writes its numbers: a range of measured values as the prose prints it, and the sentence
comparing the GPU loans of the sweep and Table 1 planned together or one after the other (no equation: these only
format stored measurements)."""

from __future__ import annotations




def span(low: float, high: float, fmt: str = ".1f") -> str:
    """``low–high`` as the prose prints a range of measured values, or one value where both ends print alike."""
    low_text, high_text = format(low, fmt), format(high, fmt)
    return low_text if low_text == high_text else f"{low_text}–{high_text}"


def joint_loans(together: int, apart: int) -> str:
    """What planning the sweep and Table 1 into the same loans does, from the loans it takes (``together``) and the
    loans of the two one after the other (``apart``)."""
    if together > apart:
        raise ValueError(f"planned together the runs take {together} loans, more than the {apart} one after the other")
    loans = f"{together} loan{'s' if together > 1 else ''}"
    if together == apart:
        return (f"the sweep and Table 1 together take {loans}, as many as one after the other: planning them "
                "jointly saves no loan here")
    return f"the sweep and Table 1 together take {loans}, against {apart} one after the other"


def fixed_stack_loans(fitted: int, fixed: int, size: int) -> str:
    """What sizing the stacks to the time left does, from the loans the sweep takes so (``fitted``) and in fixed
    stacks of ``size`` runs (``fixed``)."""
    if fitted > fixed:
        raise ValueError(f"stacks sized to the time take {fitted} loans, more than the {fixed} of fixed stacks")
    if fitted == fixed:
        return (f"cut into fixed stacks of {size} they take as many: at this step, sizing the stacks to the time "
                "saves no loan")
    return f"cut into fixed stacks of {size} they would take {fixed}"
