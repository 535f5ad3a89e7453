"""``python -m joma_lib table1``: train and print Table 1 (:mod:`joma_lib.theory.table1.runs`), or search the
configurations (:mod:`joma_lib.theory.table1.exploration`).

``--config quick`` takes a few CPU-minutes (130 s on one core of a 2-core AMD EPYC); ``full`` is the paper's
configuration, meant for a GPU::

    python -m joma_lib table1 --config quick|full --device auto|cpu|cuda --seeds 1 2 3
    python -m joma_lib table1 --explore [NAME ...]        # the configuration search (resumable)
    python -m joma_lib table1 --config full --seeds 1 --init-only FILE   # untrained scores at any width
    python -m joma_lib table1 --config full --stack --device cuda --out DIR [--every 1000] [--stack-size K]
                              [--stop-after N] [--finish-within SECONDS] [--precision fp32|tf32|bf16|auto]
                              [--compile] [--save FILE]

``--stack`` trains the runs stacked (:mod:`joma_lib.theory.table1.stacked_run`), ``--stack-size`` runs to a stack
(default all of them in one); with ``--out DIR`` each stack checkpoints every ``--every`` steps into DIR, a second call
resumes there (a finished stack is kept as a small file, so another machine goes on with the next), and a finished DIR
is read back. ``--stop-after N`` stops once the call has trained N steps (checkpointed), to be resumed.
``--finish-within SECONDS`` sizes the stacks to the time left instead (:mod:`joma_lib.theory.table1.stack_plan`, at most
``--stack-size`` runs each): it times the step here, starts only stacks that finish within that time, and ends with exit
75 when runs are left that no stack finishes in time (a later call trains them). ``--precision`` is the training's
(:func:`~joma_lib.theory.table1.stacked_run.resolve_precision`): ``auto`` times a step of the stack in each precision
this machine runs and keeps the fastest; ``--compile`` sends the training loss through ``torch.compile``
(``benchmarks/bench_table1_stack.py --compile`` measures whether that pays).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from joma_lib.base.device import DEVICE_CHOICES, resolve_device
from joma_lib.base.io import atomic_path, writable_dir
from joma_lib.base.precision import PRECISION_CHOICES
from joma_lib.base.stack_time import CHECKPOINT_SHARE, DeadlineReached
from joma_lib.theory.table1.model import score_at_init
from joma_lib.base.startup import command
from joma_lib.theory.table1.exploration import EXPLORATION_FILE, EXPLORED, explore, select_configuration
from joma_lib.theory.table1.runs import CONFIGS, run_table1, save_result
from joma_lib.theory.table1.stack_plan import FittedSizes
from joma_lib.theory.table1.stacked_run import resolve_precision, run_table1_stacked
from joma_lib.base.validation import check_choice, check_float, check_int

EVERY = 1000
"""Default steps between two checkpoints of a stacked run (``--every``)."""

DESCRIPTION = "Paper Table 1: do the hidden MLP neurons of layer i of a Transformer align with latents of level i?"


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: train and print Table 1 for the chosen configuration (Ctrl-C: one line, exit code 130)."""
    return command(lambda: _main(argv), interrupted="what was saved before it is kept")


def _main(argv: Sequence[str] | None) -> int:
    parser = argparse.ArgumentParser(prog="python -m joma_lib table1", description=DESCRIPTION)
    parser.add_argument("--config", default="quick", help=f"one of {sorted(CONFIGS)} (default quick)")
    parser.add_argument("--device", default=None, help=f"one of {list(DEVICE_CHOICES)} (default $JOMA_DEVICE or auto)")
    parser.add_argument("--seeds", nargs="+", default=None, help="seeds (default: the configuration's)")
    parser.add_argument("--steps", default=None, help="override the number of Adam steps")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    parser.add_argument("--explore", nargs="*", default=None, metavar="NAME",
                        help=f"explore configurations (default all of {sorted(EXPLORED)}; resumes from "
                             f"{EXPLORATION_FILE.name}) and print the one the selection rule picks")
    parser.add_argument("--init-only", metavar="FILE", default=None,
                        help="only score the untrained networks (any width, no training) and save the "
                             "alignment matrices to FILE (json)")
    parser.add_argument("--save", metavar="FILE", default=None,
                        help="also save the whole result (Table1Result.arrays) to FILE (npz), written atomically")
    parser.add_argument("--stack", action="store_true", help="train every run as one stacked model")
    parser.add_argument("--out", metavar="DIR", default=None,
                        help="with --stack: checkpoint into DIR, resume from it, read a finished DIR back")
    parser.add_argument("--every", default=None,
                        help=f"with --out: steps between checkpoints (default {EVERY}; fewer where writing them would "
                             f"take over {100 * CHECKPOINT_SHARE:.0f}%% of the time)")
    parser.add_argument("--stop-after", default=None, metavar="N",
                        help="with --out: stop once this call has trained N steps (checkpointed), to resume later")
    parser.add_argument("--precision", default="fp32",
                        help=f"the training's precision, one of {list(PRECISION_CHOICES)} (default fp32; tf32: a GPU's "
                             "float32 products in TF32; bf16: autocast, fp32 weights; auto: the fastest step here; "
                             "recorded with the result; the scores are computed in fp32)")
    parser.add_argument("--compile", action="store_true",
                        help="with --stack: the training loss through torch.compile (fused kernels; only the rounding "
                             "changes)")
    parser.add_argument("--stack-size", default=None, metavar="K",
                        help="with --stack: runs per stack, trained one stack after the other (default all); with "
                             "--finish-within, the most")
    parser.add_argument("--finish-within", default=None, metavar="SECONDS",
                        help="with --out: stacks sized to finish within SECONDS (the step timed here first); runs "
                             "that no stack finishes in time end the call with exit 75")
    args = parser.parse_args(argv)
    if args.explore is not None:
        try:
            found = explore(args.explore or sorted(EXPLORED))
        except ValueError as err:
            parser.error(str(err))
        print(f"selected: {select_configuration(found)}")
        return 0
    try:
        config = CONFIGS[check_choice("config", args.config, sorted(CONFIGS))]
        if args.seeds is not None:
            config = replace(config, seeds=tuple(_parse_int("seeds", s) for s in args.seeds))
        if args.steps is not None:
            config = replace(config, steps=_parse_int("steps", args.steps))
        device = resolve_device(args.device)
        check_choice("--precision", args.precision, PRECISION_CHOICES)
        if args.save is not None and not args.save.endswith(".npz"):
            raise ValueError(f"--save must name an .npz file, got {args.save!r}")
        every = EVERY if args.every is None else check_int("--every", _int_or_text(args.every), 1, 10**7)
        n_runs = 2 * len(config.settings) * len(config.seeds)
        stop_after = None if args.stop_after is None else check_int("--stop-after", _int_or_text(args.stop_after), 1,
                                                                    config.steps * n_runs)
        stack_size = None if args.stack_size is None else check_int("--stack-size", _int_or_text(args.stack_size),
                                                                    1, n_runs)
        finish_within = None if args.finish_within is None else check_float(
            "--finish-within", _float_or_text(args.finish_within), 0, low_open=True)
        for flag, value in (("--out", args.out), ("--every", args.every), ("--stop-after", stop_after),
                            ("--stack-size", stack_size), ("--compile", args.compile or None),
                            ("--finish-within", finish_within)):
            if value is not None and not args.stack:
                raise ValueError(f"{flag} needs --stack")
        for flag, value in (("--stop-after", stop_after), ("--every", args.every), ("--finish-within", finish_within)):
            if value is not None and args.out is None:
                raise ValueError(f"{flag} needs --out: the folder of the checkpoints")
        if args.stack and args.init_only is not None:
            raise ValueError("--stack trains; --init-only does not: give one of them")
        out = None if args.out is None else writable_dir(args.out, "--out")
    except ValueError as err:
        parser.error(str(err))
    if args.init_only is not None:
        cells = {f"{n} {list(sizes)} {seed}": score_at_init(config, n, sizes, seed, device.type).round(4).tolist()
                 for n, sizes in config.settings for seed in config.seeds}
        with atomic_path(Path(args.init_only)) as tmp:
            tmp.write_text(json.dumps({"config": args.config, "matrices": cells}, indent=1) + "\n")
        print(json.dumps(cells))
        return 0
    config = resolve_precision(config, args.precision, device, (stack_size or n_runs) if args.stack else 1)
    print(f"Table 1, {args.config} configuration on {device}: {config}", flush=True)
    if args.stack:
        sizes = None if finish_within is None or out is None else FittedSizes(
            config, device, out, finish_within, stack_size, log=lambda line: print(line, flush=True))
        try:
            outcome = run_table1_stacked(config, device.type, out, every, stop_after, not args.no_progress,
                                         stack_size, args.compile, sizes)
        except DeadlineReached as err:
            print(f"stopped: {err}; finished runs are kept; run the same command again to continue", file=sys.stderr)
            return 75
        if outcome is not None and sizes is not None:
            sizes.report()
        if outcome is None:
            print(f"stopped after {stop_after} steps; the checkpoint is in {out}: run again to resume")
            return 0
        result = outcome.result
    else:
        result = run_table1(config, device=device.type, progress=not args.no_progress)
    print(result.format())
    if args.save is not None:
        save_result(result, Path(args.save), config)
    return 0


def _parse_int(name: str, text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{name} must be integers, got {text!r}") from None


def _float_or_text(text: str) -> float | str:
    """``text`` as a float where it is one, else unchanged (for a range check that names the flag)."""
    try:
        return float(text)
    except ValueError:
        return text


def _int_or_text(text: str) -> int | str:
    """``text`` as an int where it is one, else unchanged (for a range check that names the flag)."""
    try:
        return int(text)
    except ValueError:
        return text
