"""The C library's allocator, set for training loops: freed memory is kept for the next step instead of being given
back to the kernel.

A training step allocates and frees the same large buffers at every step (gradients, activations, the logits of
the read-out). glibc's ``malloc`` serves blocks above its mmap threshold (at most 32 MiB) from fresh ``mmap``
pages and unmaps them when freed, and gives the top of its heap back once more than the trim threshold is free.
Either way the next step's buffer is new memory: every 4 KiB page faults and is zeroed by the kernel again. A
stack of runs (:mod:`joma_lib.lm.stacked`) meets this at every step, since its decoder gradient alone is
``R x 28,782 x 200`` floats (46 MiB for two runs); measured on 2 cores at the paper's shapes, ~26,000 page faults
per run and step made a stack of two ~18% slower per run than one unstacked run, and with the allocator kept
(:func:`keep_freed_memory`) the faults drop to ~0 and the two run equally fast.

This is what ``MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=...`` in the environment would do, set from inside the
process so that every way of training (command line, worker processes, a notebook, a cluster node) gets it.
The cost: the process keeps its peak heap, which it has already used once.
"""

from __future__ import annotations

import ctypes
import functools

#: ``mallopt`` parameters (glibc's ``malloc.h``)
M_TRIM_THRESHOLD, M_MMAP_MAX = -1, -4
#: free memory at the top of the heap above this much (2 GiB, the largest value ``mallopt`` takes) is given back
KEPT_BYTES = 2**31 - 1


@functools.cache
def keep_freed_memory() -> bool:
    """Make glibc's ``malloc`` serve every block from its heap (``M_MMAP_MAX = 0``) and trim it only
    above :data:`KEPT_BYTES` free (``M_TRIM_THRESHOLD``), for the rest of the process; once per process.

    Returns whether the setting took: False, with nothing changed, where the C library is not glibc (probed: it
    must export ``gnu_get_libc_version`` and accept both settings)."""
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # noqa: B018 -- the probe: only glibc exports it
        mallopt = libc.mallopt
    except (OSError, AttributeError, TypeError):  # TypeError: Windows has no process-wide CDLL(None)
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    # the trim threshold first: without it, a heap that serves the large blocks would be trimmed after each step
    return bool(mallopt(M_TRIM_THRESHOLD, KEPT_BYTES) and mallopt(M_MMAP_MAX, 0))
