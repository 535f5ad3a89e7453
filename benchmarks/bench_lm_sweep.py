"""A sweep on the CPU trained stacked and not: ``run --stack --jobs N`` against ``run --jobs N``, whole sweeps.

The goal it measures: on a CPU, stacked runs are at least as fast per run as ``--jobs N`` (N processes, one run
each). Both train the same runs of a preset (default ``rerun-quick`` with 4 seeds: 8 runs, stacks of 4 at each
depth, cut into N shares) from scratch into a temporary folder, through :func:`joma_lib.lm.sweep.run_sweep`
(data loading, training, evaluation at every checkpoint, writing the results: what the command line does).
The two alternate, ``--repeats`` times each, on the wall clock; the ratio is of the medians::

    python benchmarks/bench_lm_sweep.py                      # rerun-quick, 4 seeds, --jobs 2, 2 repeats
    python benchmarks/bench_lm_sweep.py --seeds 1 2 --repeats 3
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

from joma_lib.kit.benchmarks import results_path, save_results
from joma_lib.lm.presets import PRESETS, preset_configs
from joma_lib.lm.sweep import run_sweep


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--preset", choices=sorted(PRESETS), default="rerun-quick")
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4])
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--results-name", default="lm_sweep", help="store as joma_lib/kit/benchmark_results/<this>.json")
    p.add_argument("--no-write", action="store_true")
    args = p.parse_args()
    results_path(args.results_name)  # a bad name fails now, not after the measurements
    configs = preset_configs(args.preset, args.seeds)
    print(f"{args.preset}, {len(configs)} runs, --jobs {args.jobs}, wall clock, {args.repeats} alternating repeats")
    seconds: dict[str, list[float]] = {"jobs": [], "stack": []}
    for _ in range(args.repeats):
        for mode in seconds:
            with tempfile.TemporaryDirectory() as out:
                start = time.perf_counter()
                run_sweep(configs, out, device="cpu", progress=False, log=lambda _: None, jobs=args.jobs,
                          stack=mode == "stack")
                seconds[mode].append(time.perf_counter() - start)
            print(f"  {mode:>5}: {seconds[mode][-1]:.1f} s", flush=True)
    median = {mode: statistics.median(v) for mode, v in seconds.items()}
    ratio = median["jobs"] / median["stack"]
    print(f"median: --jobs {args.jobs} {median['jobs']:.1f} s, --stack --jobs {args.jobs} {median['stack']:.1f} s; "
          f"stacked is {ratio:.3f}x as fast per run ({'meets' if ratio >= 1 else 'misses'} the goal >= 1)")
    if not args.no_write:
        save_results(args.results_name, {"settings": {k: v for k, v in vars(args).items() if k != "no_write"} |
                                         {"runs": len(configs)}, "seconds": seconds, "median_s": median,
                                         "jobs_over_stack": ratio})


if __name__ == "__main__":
    main()
