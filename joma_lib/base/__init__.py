"""The machinery every other layer stands on; nothing here knows the paper.

Holds: :mod:`.startup` (the environment variables the project reads, checked by every command line, and Ctrl-C
as one line), :mod:`.validation` (argument checks that name the parameter and its range), :mod:`.io` (atomic,
checksummed files), :mod:`.ode` (the integrators), :mod:`.device` (device choice, thread pinning), :mod:`.cpu`
(the bf16 probe) and :mod:`.memory` (the C library's allocator, kept for training loops).

May import: nothing of ``joma_lib`` outside ``base``; inside it, every module may use :mod:`.startup`, which uses
none of the others.
"""
