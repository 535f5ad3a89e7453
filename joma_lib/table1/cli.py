"""``python -m joma_lib.table1``: train and print Table 1 (:mod:`joma_lib.table1.runs`), or search the configurations
(:mod:`joma_lib.table1.exploration`).

``--config quick`` runs on 2 CPU cores in about a minute; ``full`` is the paper's configuration, meant for a GPU::

    python -m joma_lib.table1 --config quick|full --device auto|cpu|cuda --seeds 1 2 3
    python -m joma_lib.table1 --explore [NAME ...]        # the configuration search (resumable)
    python -m joma_lib.table1 --config full --seeds 1 --init-only FILE   # untrained scores at any width
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from joma_lib.device import DEVICE_CHOICES, resolve_device
from joma_lib.io import atomic_path
from joma_lib.multilayer import score_at_init
from joma_lib.startup import command
from joma_lib.table1.exploration import EXPLORATION_FILE, EXPLORED, explore, select_configuration
from joma_lib.table1.runs import CONFIGS, run_table1, save_result
from joma_lib.validation import check_choice

DESCRIPTION = "Paper Table 1: do the hidden MLP neurons of layer k of a Transformer align with latents of level k?"


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: train and print Table 1 for the chosen configuration (Ctrl-C: one line, exit code 130)."""
    return command(lambda: _main(argv), interrupted="what was saved before it is kept")


def _main(argv: Sequence[str] | None) -> int:
    parser = argparse.ArgumentParser(prog="python -m joma_lib.table1", description=DESCRIPTION)
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
        if args.save is not None and not args.save.endswith(".npz"):
            raise ValueError(f"--save must name an .npz file, got {args.save!r}")
    except ValueError as err:
        parser.error(str(err))
    if args.init_only is not None:
        cells = {f"{n} {list(sizes)} {seed}": score_at_init(config, n, sizes, seed, device.type).round(4).tolist()
                 for n, sizes in config.settings for seed in config.seeds}
        with atomic_path(Path(args.init_only)) as tmp:
            tmp.write_text(json.dumps({"config": args.config, "matrices": cells}, indent=1) + "\n")
        print(json.dumps(cells))
        return 0
    print(f"Table 1, {args.config} configuration on {device}: {config}", flush=True)
    result = run_table1(config, device=device.type, progress=not args.no_progress)
    print(result.format())
    if args.save is not None:
        save_result(result, Path(args.save))
    return 0


def _parse_int(name: str, text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{name} must be integers, got {text!r}") from None
