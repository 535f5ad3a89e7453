"""Faults and bad input at the edges: a damaged file, a stalled server, a bad output folder.

Each test pins one fault: the failure is reported for the figure (or call) it concerns, with a message
that says what is wrong and how to repair it, and nothing else is lost.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import numpy as np
import pytest

from joma_lib.kit import harness
from joma_lib.kit.cli import main
from joma_lib.kit.registry import FigureSpec
from joma_lib.lm.authors import ChecksumError

registry_module = importlib.import_module("joma_lib.kit.registry")

def _make_bad_authors_file(**_: object) -> dict[str, np.ndarray]:
    raise ChecksumError("/data/wikitext2_multilayer_lr.pt has sha256 0000, expected 1111: the file is corrupted")


@pytest.fixture
def refs(monkeypatch, tmp_path, toy_spec):
    """Three toy figures with references in a temporary folder."""
    toy2 = FigureSpec(fig_id="c-toy2", title="second toy", paper_ref="companion", chapter="book/none.md",
                      make=toy_spec.make, plot=toy_spec.plot, params={"scale": 3.0})
    bad_input = FigureSpec(fig_id="c-bad-input", title="a truncated third-party file", paper_ref="companion",
                           chapter="book/none.md", make=_make_bad_authors_file, plot=toy_spec.plot)
    specs = {"c-toy": toy_spec, "c-toy2": toy2, "c-bad-input": bad_input}
    monkeypatch.setattr(registry_module, "registry", lambda: specs)
    monkeypatch.setattr(harness, "REFERENCE_DIR", tmp_path)
    harness.update_reference("c-toy")
    harness.update_reference("c-toy2")
    harness.write_reference("c-bad-input", toy_spec.make(scale=5.0))
    return tmp_path


def _verdicts(out: str) -> dict[str, str]:
    """The verify table as ``{fig_id: rest of its line}``."""
    return {line.split()[0]: line for line in out.splitlines() if line.startswith("c-")}


def _refresh_sha(folder, fig_id: str) -> None:
    """Make the manifest agree with whatever bytes the npz now holds (to reach the checks after the sha256)."""
    import hashlib

    manifest_path = folder / f"{fig_id}.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["sha256"] = hashlib.sha256((folder / f"{fig_id}.npz").read_bytes()).hexdigest()
    manifest_path.write_text(json.dumps(manifest))


# ------------------------------------------------------------------ a damaged reference file


@pytest.mark.parametrize("damage", ["truncate", "text"])
def test_corrupt_reference_is_a_per_figure_error_and_later_figures_are_checked(refs, capsys, damage):
    path = refs / "c-toy.npz"
    path.write_bytes(path.read_bytes()[:100] if damage == "truncate" else b"x,y\n1,2\n")
    _refresh_sha(refs, "c-toy")  # the archive itself is unreadable, not only its checksum
    with pytest.raises(harness.CorruptReferenceError, match="c-toy.npz") as err:
        harness.load_reference("c-toy")
    assert "corrupt reference" in str(err.value) and "update c-toy" in str(err.value)
    assert "pickle" not in str(err.value)
    assert main(["verify", "c-toy", "c-toy2"]) == 1
    lines = _verdicts(capsys.readouterr().out)
    assert "ERROR" in lines["c-toy"] and "corrupt reference" in lines["c-toy"]
    assert lines["c-toy2"].rstrip().endswith("ok")  # the figure after the broken one is still checked


# ------------------------------------------------------------------ a missing or unreadable manifest


def test_missing_manifest_is_an_error(refs, capsys):
    (refs / "c-toy.json").unlink()
    with pytest.raises(harness.CorruptReferenceError, match="c-toy.json"):
        harness.load_reference("c-toy")
    assert main(["verify", "c-toy", "c-toy2"]) == 1
    lines = _verdicts(capsys.readouterr().out)
    assert "ERROR" in lines["c-toy"] and "manifest" in lines["c-toy"] and lines["c-toy2"].rstrip().endswith("ok")


def test_unreadable_manifest_is_an_error(refs):
    (refs / "c-toy.json").write_text("{ not json")
    with pytest.raises(harness.CorruptReferenceError, match="c-toy.json"):
        harness.load_reference("c-toy")


def test_sha256_mismatch_is_an_error(refs, capsys):
    ref = harness.load_reference("c-toy")
    harness.write_npz(refs / "c-toy.npz", {"x": ref["x"], "y": ref["y"] + 1e-12})  # edited without `update`
    with pytest.raises(harness.CorruptReferenceError, match="sha256"):
        harness.load_reference("c-toy")
    assert main(["verify", "c-toy"]) == 1
    assert "sha256" in capsys.readouterr().out


@pytest.mark.parametrize("edit", ["name", "shape", "dtype"])
def test_arrays_must_match_the_manifest(refs, edit):
    manifest_path = refs / "c-toy.json"
    manifest = json.loads(manifest_path.read_text())
    if edit == "name":
        manifest["arrays"]["z"] = manifest["arrays"].pop("y")
    elif edit == "shape":
        manifest["arrays"]["y"]["shape"] = [6]
    else:
        manifest["arrays"]["y"]["dtype"] = "float32"
    manifest_path.write_text(json.dumps(manifest))
    with pytest.raises(harness.CorruptReferenceError, match=edit):
        harness.load_reference("c-toy")


# ------------------------------------------------------------------ a damaged third-party input


def test_bad_external_input_is_a_per_figure_error(refs, capsys):
    assert main(["verify", "c-bad-input", "c-toy"]) == 1
    lines = _verdicts(capsys.readouterr().out)
    assert "ERROR" in lines["c-bad-input"] and "corrupted" in lines["c-bad-input"]
    assert lines["c-toy"].rstrip().endswith("ok")


def test_show_falls_back_to_the_reference_when_the_input_is_corrupt(refs, tmp_path, capsys, toy_spec):
    data = harness.show("c-bad-input", out_dir=tmp_path / "gen")
    np.testing.assert_array_equal(data["y"], toy_spec.make(scale=5.0)["y"])
    out = capsys.readouterr().out
    assert "corrupted" in out and "drawn from the reference data" in out


@pytest.mark.parametrize("error", [OSError(28, "No space left on device"), RuntimeError("CUDA out of memory")])
def test_main_turns_os_and_runtime_errors_into_one_line(refs, monkeypatch, capsys, error):
    def boom(*_: object, **__: object) -> None:
        raise error

    monkeypatch.setattr("joma_lib.kit.cli.update_reference", boom)
    assert main(["update", "c-toy"]) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith("error: ") and len(captured.err.strip().splitlines()) == 1
    assert "Traceback" not in captured.err


# ------------------------------------------------------------------ a malformed calibration block


@pytest.mark.parametrize("calibration, problem", [
    ({"arrays": {"y": {"atol": 1e-9}}}, "the field 'calibration.arrays.y.rtol' is missing"),
    ({"arrays": {"y": {"rtol": "1e-6", "atol": 1e-9}}},
     "the field 'calibration.arrays.y.rtol' must be a finite number >= 0, got '1e-6'"),
    ({"arrays": {"y": {"rtol": 1e-6, "atol": -1.0}}}, "the field 'calibration.arrays.y.atol' must be a finite"),
    ({"arrays": {"y": {"rtol": 1e-6, "atol": 0.0, "gpu_atol": [1]}}}, "'calibration.arrays.y.gpu_atol' must be"),
    ({"arrays": {"y": 0.1}}, "the field 'calibration.arrays.y' must be an object"),
    ({"arrays": [1, 2]}, "the field 'calibration.arrays' must be an object"),
    ("fast", "the field 'calibration.arrays' must be an object"),
])
def test_malformed_calibration_is_one_error_line_and_later_figures_are_checked(refs, capsys, calibration, problem):
    manifest_path = refs / "c-toy.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["calibration"] = calibration
    manifest_path.write_text(json.dumps(manifest))
    with pytest.raises(harness.CorruptReferenceError, match="c-toy.json") as err:
        harness.calibrated_tolerances("c-toy")
    assert problem in str(err.value) and "calibrate c-toy" in str(err.value)
    assert main(["verify", "c-toy", "c-toy2"]) == 1
    captured = capsys.readouterr()
    lines = _verdicts(captured.out)
    assert "ERROR" in lines["c-toy"] and problem in lines["c-toy"]
    assert lines["c-toy2"].rstrip().endswith("ok")  # the figure after the broken one is still checked
    assert "Traceback" not in captured.out + captured.err


def test_a_wellformed_calibration_sets_the_tolerances(refs):
    manifest_path = refs / "c-toy.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["calibration"] = {"arrays": {"y": {"rtol": 0, "atol": 1e-9, "gpu_atol": None, "seed_spread": None}}}
    manifest_path.write_text(json.dumps(manifest))
    assert harness.calibrated_tolerances("c-toy") == {"y": harness.Tolerance(rtol=0.0, atol=1e-9, gpu_atol=None)}


# ------------------------------------------------------------------ a disk that fills up


def _disk_fills_up_while_writing(monkeypatch, victim: str, fig_id: str = "c-toy") -> None:
    """Fault injection: writing ``fig_id``'s ``victim`` output (png, npz or csv) stops half-way with ENOSPC."""
    import errno

    from matplotlib.figure import Figure

    def failing(real):
        def write(*args: object, **kwargs: object) -> object:
            path = Path(args[1] if victim == "png" else args[0])  # savefig(self, path) or write_x(path, data)
            if path.name.startswith(f".{fig_id}.{victim}"):  # the temporary file of that output
                path.write_bytes(b"half a file")
                raise OSError(errno.ENOSPC, "No space left on device")
            return real(*args, **kwargs)
        return write

    owner, name = (Figure, "savefig") if victim == "png" else (harness, f"write_{victim}")
    monkeypatch.setattr(owner, name, failing(getattr(owner, name)))


@pytest.mark.parametrize("victim", ["png", "npz", "csv"])
def test_a_full_disk_leaves_all_four_outputs_or_none_and_names_the_file(refs, tmp_path, monkeypatch, victim):
    out = tmp_path / "out"
    data = harness.compute("c-toy")
    _disk_fills_up_while_writing(monkeypatch, victim)
    with pytest.raises(OSError, match="No space left") as err:
        harness.save_outputs("c-toy", harness.draw("c-toy", data), data, out)
    assert err.value.errno == 28
    assert f"c-toy.{victim}" in str(err.value) and "figure 'c-toy'" in str(err.value)
    assert sorted(p.name for p in out.iterdir()) == []  # no partial set, no temporary files


def test_make_goes_on_after_a_full_disk_and_names_the_file_and_figure(refs, tmp_path, monkeypatch, capsys):
    out = tmp_path / "out"
    _disk_fills_up_while_writing(monkeypatch, "csv")  # the last output fails: PNG, SVG and npz written, then the CSV
    assert main(["make", "c-toy", "c-toy2", "--out", str(out)]) == 1
    lines = capsys.readouterr().out.splitlines()
    error = next(line for line in lines if line.startswith("c-toy ERROR"))
    assert "No space left" in error and str(out / "c-toy.csv") in error and "figure 'c-toy'" in error
    assert sorted(p.name for p in out.iterdir()) == ["c-toy2.csv", "c-toy2.npz", "c-toy2.phone.png", "c-toy2.png",
                                                     "c-toy2.svg"]


# ------------------------------------------------------------------ a bad output folder


def _bad_out_dirs(tmp_path):
    a_file = tmp_path / "a-file.txt"
    a_file.write_text("not a folder")
    return {"empty": "", "file": str(a_file), "under-a-file": str(a_file / "sub"), "system": "/proc/joma-figures"}


@pytest.mark.parametrize("kind", ["empty", "file", "under-a-file", "system", "read-only"])
def test_make_checks_the_output_folder_before_computing(refs, tmp_path, monkeypatch, capsys, kind):
    if kind == "read-only":
        import os

        if os.geteuid() == 0:
            pytest.skip("root may write into a read-only folder")
        out = tmp_path / "ro"
        out.mkdir(mode=0o500)
        out = str(out)
    else:
        out = _bad_out_dirs(tmp_path)[kind]
    computed: list[str] = []
    monkeypatch.setattr("joma_lib.kit.cli.compute", lambda fig_id, **_: computed.append(fig_id))
    assert main(["make", "c-toy", "--out", out]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --out") and "Traceback" not in err
    assert computed == []  # nothing was computed


# ------------------------------------------------------------------ a stalled or slow download


@pytest.fixture
def server(local_http):
    from joma_lib.lm import authors

    authors.forget_failed_downloads()
    local_http.files["/ok"] = b"the published file"
    yield local_http
    authors.forget_failed_downloads()


@pytest.mark.parametrize("path, why", [("/stall", "timed out"), ("/trickle", "deadline of 1.5 s")])
def test_download_has_a_total_deadline_and_remembers_the_failure(server, tmp_path, path, why):
    import time

    from joma_lib.lm.authors import OfficialDataMissing, download

    start = time.monotonic()
    with pytest.raises(OfficialDataMissing, match=f"could not download .*{why}"):
        download(server.url + path, tmp_path / "f.pt", "0" * 64, timeout=0.5, deadline=1.5)
    assert time.monotonic() - start < 1.5 + 0.5 + 1.0  # deadline + at most one timeout, plus slack
    assert list(tmp_path.iterdir()) == []  # nothing half-written, no .part left
    start = time.monotonic()
    with pytest.raises(OfficialDataMissing, match="earlier in this process"):
        download(server.url + path, tmp_path / "f.pt", "0" * 64, timeout=0.5, deadline=1.5)
    # not retried: a second try would have waited at least its timeout (0.5 s); below that, slack for a busy machine
    assert time.monotonic() - start < 0.5 and server.hits == [path]


def test_slow_headers_are_cut_off_by_the_deadline(server, tmp_path):
    """The deadline covers connect and headers too: each header byte comes well within ``timeout``."""
    import time

    from joma_lib.lm.authors import OfficialDataMissing, download

    start = time.monotonic()
    with pytest.raises(OfficialDataMissing, match="deadline of 2 s"):
        download(server.url + "/slow-headers", tmp_path / "f.pt", "0" * 64, timeout=1.0, deadline=2.0)
    assert time.monotonic() - start < 2.0 + 1.0 + 1.0  # deadline + at most one timeout, plus slack (it hung forever)
    assert list(tmp_path.iterdir()) == []  # no .part: the file is created only once the headers have arrived


def test_a_good_download_still_works(server, tmp_path):
    import hashlib

    from joma_lib.lm.authors import download

    dest = download(server.url + "/ok", tmp_path / "f.pt", hashlib.sha256(server.files["/ok"]).hexdigest(),
                    timeout=2.0, deadline=5.0)
    assert dest.read_bytes() == server.files["/ok"] and sorted(p.name for p in tmp_path.iterdir()) == ["f.pt"]


def test_a_killed_download_leaves_no_file_and_its_part_is_cleaned(server, tmp_path):
    import hashlib
    import os
    import subprocess
    import sys
    import time

    code = ("import sys; from joma_lib.lm.authors import download; "
            "download(sys.argv[1], __import__('pathlib').Path(sys.argv[2]), '0' * 64, timeout=30, deadline=60)")
    proc = subprocess.Popen([sys.executable, "-c", code, server.url + "/trickle", str(tmp_path / "f.pt")])
    for _ in range(200):  # wait until the transfer has begun
        if list(tmp_path.glob("*.part")) and list(tmp_path.glob("*.part"))[0].stat().st_size > 0:
            break
        time.sleep(0.05)
    proc.kill()
    proc.wait()
    parts = list(tmp_path.glob("*.part"))
    assert len(parts) == 1 and not (tmp_path / "f.pt").exists()  # a kill skips every cleanup, never half a file
    os.utime(parts[0], (time.time() - 3600, time.time() - 3600))  # an hour later
    from joma_lib.lm.authors import download

    download(server.url + "/ok", tmp_path / "f.pt", hashlib.sha256(server.files["/ok"]).hexdigest(), timeout=2.0,
             deadline=5.0)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.pt"]  # the stale part is gone


# ------------------------------------------------------------------ killed workers and runs


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie awaiting its reaper counts as dead)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not __import__("sys").platform.startswith("linux"), reason="reads /proc")
def test_workers_die_with_their_parent():
    import signal
    import subprocess
    import sys
    import time

    code = ("import os, time; from joma_lib.lm.sweep import worker_pool; pool = worker_pool(2); "
            "print(*[pool.submit(os.getpid).result() for _ in range(4)], flush=True); time.sleep(120)")
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    workers = {int(pid) for pid in parent.stdout.readline().split()}
    assert workers and all(_alive(pid) for pid in workers)
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 10
    while any(_alive(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_alive(pid) for pid in workers)


@pytest.fixture
def tiny_lm(tiny_run, tiny_run_data):
    return tiny_run, tiny_run_data


def _train(tiny_lm, out, **kwargs):
    from joma_lib.lm.step import train_run

    cfg, data = tiny_lm
    return train_run(cfg, out, device="cpu", progress=False, data=data, **kwargs)


def test_a_second_runner_on_the_same_run_is_refused(tiny_lm, tmp_path):
    import fcntl

    from joma_lib.lm.runs import RunLockedError

    run_dir = tmp_path / tiny_lm[0].name
    run_dir.mkdir()
    with open(run_dir / ".lock", "w") as fh:  # as another process training this run holds it
        fh.write("4242")
        fh.flush()
        fcntl.flock(fh, fcntl.LOCK_EX)
        with pytest.raises(RunLockedError, match="pid 4242"):
            _train(tiny_lm, tmp_path)
    assert not (run_dir / "checkpoint.pt").exists()
    assert _train(tiny_lm, tmp_path) is not None  # free again once the other process let go


def test_thread_count_is_recorded_and_a_resume_with_another_is_refused(tiny_lm, tmp_path):
    import json

    import torch

    before = torch.get_num_threads()
    assert _train(tiny_lm, tmp_path, stop_at=4, threads=2) is None
    assert torch.get_num_threads() == before  # the caller's setting is restored
    run_dir = tmp_path / tiny_lm[0].name
    assert torch.load(run_dir / "checkpoint.pt", weights_only=True)["threads"] == 2
    with pytest.raises(ValueError, match="threads=2.*--threads 2"):
        _train(tiny_lm, tmp_path, threads=1)
    _train(tiny_lm, tmp_path, threads=2)
    assert json.loads((run_dir / "result.json").read_text())["threads"] == 2


@pytest.mark.slow
def test_results_do_not_depend_on_jobs(tmp_path, tiny_run):
    """Two tiny runs, one after the other in this process vs. two worker processes: identical numbers."""
    import torch

    from joma_lib.lm.sweep import run_sweep

    cfgs = [replace_cfg(tiny_run, seed=1, d=64, d_ff=64), replace_cfg(tiny_run, seed=2, d=64, d_ff=64)]
    before = torch.get_num_threads()
    torch.set_num_threads(2)  # what a 2-core machine gives the main process by default
    try:
        one, _ = run_sweep(cfgs, tmp_path / "one", device="cpu", progress=False, log=lambda _: None, jobs=1)
    finally:
        torch.set_num_threads(before)
    two, _ = run_sweep(cfgs, tmp_path / "two", device="cpu", progress=False, log=lambda _: None, jobs=2)
    for key in one:
        np.testing.assert_array_equal(one[key], two[key], err_msg=key)


def replace_cfg(cfg, **changes):
    from dataclasses import replace

    return replace(cfg, **changes)


def test_a_kill_between_npz_and_json_is_completed_on_resume(tiny_lm, tmp_path):
    from joma_lib.lm.runs import load_sweep

    whole = _train(tiny_lm, tmp_path)
    run_dir = tmp_path / tiny_lm[0].name
    (run_dir / "result.json").unlink()  # as if killed after the npz was written
    with pytest.raises(ValueError, match="stopped while finishing.*again"):
        load_sweep(tmp_path)
    again = _train(tiny_lm, tmp_path)  # completes from the final checkpoint
    for key in whole:
        np.testing.assert_array_equal(whole[key], again[key])
    assert (run_dir / "result.json").exists() and load_sweep(tmp_path)[1][0].seed == tiny_lm[0].seed


def test_a_truncated_checkpoint_says_how_to_recover(tiny_lm, tmp_path):
    _train(tiny_lm, tmp_path, stop_at=4)
    ckpt = tmp_path / tiny_lm[0].name / "checkpoint.pt"
    ckpt.write_bytes(ckpt.read_bytes()[:500])
    with pytest.raises(ValueError, match="checkpoint.pt is damaged.*delete it"):
        _train(tiny_lm, tmp_path)


def test_ctrl_c_says_where_the_run_stopped_and_how_to_resume(tiny_lm, tmp_path, monkeypatch, capsys):
    import joma_lib.lm.step as step_module
    import joma_lib.lm.sweep as sweep_module

    real_step, calls = step_module.train_step, []

    def interrupted_step(*args, **kwargs):
        calls.append(1)
        if len(calls) == 6:
            raise KeyboardInterrupt
        return real_step(*args, **kwargs)

    monkeypatch.setattr(step_module, "train_step", interrupted_step)
    with pytest.raises(step_module.RunInterrupted, match="stopped at step 5 of 12; its last checkpoint \\(step 4\\)"):
        _train(tiny_lm, tmp_path)
    monkeypatch.setattr(sweep_module, "load_lm_data", lambda *args: tiny_lm[1])
    calls.clear()
    cfg = tiny_lm[0]
    args = ["run", "--data", "ptb", "--layers", str(cfg.n_layers), "--lr", str(cfg.lr), "--seeds", str(cfg.seed),
            "--steps", str(cfg.steps), "--eval-interval", str(cfg.eval_interval), "--eval-chunks", "2",
            "--seq-len", "10", "--batch-size", "4", "--eval-batch-size", "3", "--max-vocab", "200", "--d", "16",
            "--d-ff", "16", "--device", "cpu", "--no-progress", "--out", str(tmp_path)]
    calls.append(1)  # the resumed run (from step 4) is interrupted after 4 more steps
    assert main_lm(args) == 130
    err = capsys.readouterr().err
    assert "interrupted:" in err and "stopped at step 8 of 12" in err and "run the same command again" in err
    assert "Traceback" not in err
    monkeypatch.setattr(step_module, "train_step", real_step)
    assert main_lm(args) == 0  # and it does resume


def main_lm(args):
    from joma_lib.lm.cli import main as lm_main

    return lm_main(args)


# ------------------------------------------------------------------ a run's files damaged, half written or planted


def _flip(path: Path, at: float, n: int = 8) -> None:
    """Fault injection: flip ``n`` bytes of ``path`` starting at the fraction ``at`` of its length."""
    data = bytearray(path.read_bytes())
    start = min(int(len(data) * at), len(data) - n)
    data[start:start + n] = bytes(b ^ 0xFF for b in data[start:start + n])
    path.write_bytes(bytes(data))


def _lm_args(cfg, out) -> list[str]:
    return ["run", "--data", "ptb", "--layers", str(cfg.n_layers), "--lr", str(cfg.lr), "--seeds", str(cfg.seed),
            "--steps", str(cfg.steps), "--eval-interval", str(cfg.eval_interval), "--eval-chunks", "2",
            "--seq-len", "10", "--batch-size", "4", "--eval-batch-size", "3", "--max-vocab", "200", "--d", "16",
            "--d-ff", "16", "--device", "cpu", "--no-progress", "--out", str(out)]


@pytest.fixture
def lm_cli(tiny_lm, monkeypatch):
    """``python -m joma_lib.lm run`` of the tiny run into a folder: ``(exit code, stderr)``."""
    import joma_lib.lm.sweep as sweep_module

    monkeypatch.setattr(sweep_module, "load_lm_data", lambda *args: tiny_lm[1])

    def run(out, capsys):
        code = main_lm(_lm_args(tiny_lm[0], out))
        return code, capsys.readouterr().err
    return run


@pytest.mark.parametrize("at", [0.25, 0.5, 0.75, 0.98])
def test_a_damaged_checkpoint_is_refused_naming_the_file_and_the_way_out(tiny_lm, tmp_path, lm_cli, capsys, at):
    _train(tiny_lm, tmp_path, stop_at=4)
    ckpt = tmp_path / tiny_lm[0].name / "checkpoint.pt"
    _flip(ckpt, at)
    with pytest.raises(ValueError, match=r"checkpoint.pt is damaged: its sha256 .*delete it and checkpoint.pt.sha256 "
                                         "to train the run again from step 0"):
        _train(tiny_lm, tmp_path)
    code, err = lm_cli(tmp_path, capsys)
    assert code == 2 and err.startswith("error: ") and str(ckpt) in err and len(err.strip().splitlines()) == 1
    assert not (ckpt.parent / "result.npz").exists()  # nothing was resumed from it
    for name in ("checkpoint.pt", "checkpoint.pt.sha256"):
        (ckpt.parent / name).unlink()  # the way out the message gives
    np.testing.assert_array_equal(_train(tiny_lm, tmp_path)["val_loss"],
                                  _train(tiny_lm, tmp_path / "clean")["val_loss"])


@pytest.mark.parametrize("victim", ["result.npz", "result.json"])
def test_a_damaged_result_is_completed_again_from_the_checkpoint_with_one_line(tiny_lm, tmp_path, capsys, victim):
    from joma_lib.lm.runs import load_sweep

    whole = _train(tiny_lm, tmp_path)
    run_dir = tmp_path / tiny_lm[0].name
    _flip(run_dir / victim, 0.5, n=2)
    with pytest.raises(ValueError, match=f"{victim} is damaged.*run its .* command again"):
        load_sweep(tmp_path)  # collect never stacks it
    again = _train(tiny_lm, tmp_path)
    assert capsys.readouterr().err.count(f"{victim} is damaged") == 1  # one line
    for key in whole:
        np.testing.assert_array_equal(whole[key], again[key])
    assert load_sweep(tmp_path)[1][0].seed == tiny_lm[0].seed  # rewritten whole


_KILLED_WRITER = """
import os, sys, pathlib
import numpy as np
import joma_lib.base.io as jio

def half_then_killed(tmp, data, dest):
    if dest.name == sys.argv[2]:
        tmp.write_bytes(bytes(data)[: len(data) // 2])
        os._exit(9)  # as kill -9 would: no finally, no cleanup
    real(tmp, data, dest)

real, jio._write_bytes = jio._write_bytes, half_then_killed
if sys.argv[2].endswith(".pt"):
    jio.save_torch_checked(pathlib.Path(sys.argv[1]) / sys.argv[2], {"step": 0, "w": np.ones(4096)})
else:
    jio.write_npz(pathlib.Path(sys.argv[1]) / sys.argv[2], {"w": np.ones(4096)})
"""


def _killed_while_writing(folder: Path, name: str) -> list[Path]:
    """Fault injection: a process killed half-way through writing ``folder/name``; the temporary files it left."""
    import subprocess
    import sys

    folder.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run([sys.executable, "-c", _KILLED_WRITER, str(folder), name], capture_output=True, text=True)
    assert proc.returncode == 9, proc.stderr[-2000:]
    left = [p for p in folder.iterdir() if p.name.startswith(f".{name}.")]
    assert left and not (folder / name).exists()
    return left


def test_a_kill_inside_a_checkpoint_write_leaves_a_temporary_file_that_the_next_start_removes(tiny_lm, tmp_path):
    run_dir = tmp_path / tiny_lm[0].name
    left = _killed_while_writing(run_dir, "checkpoint.pt")
    _train(tiny_lm, tmp_path, stop_at=4)
    assert not any(p.exists() for p in left)
    assert sorted(p.name for p in run_dir.iterdir()) == [".lock", "checkpoint.pt", "checkpoint.pt.sha256"]


def test_a_kill_inside_a_store_write_leaves_a_temporary_file_that_opening_the_store_removes(refs, tmp_path):
    import os
    import time

    store = tmp_path / "store"
    left = _killed_while_writing(store, "c-toy.npz")
    harness.stored_or_computed("c-toy", store, keep=True)
    assert all(p.exists() for p in left)  # a fresh one may belong to a notebook writing beside this one
    for path in left:
        os.utime(path, (time.time() - 3600, time.time() - 3600))  # an hour later
    harness.stored_or_computed("c-toy", store, keep=True)
    assert not any(p.exists() for p in left)
    assert sorted(p.name for p in store.iterdir()) == ["c-toy.json", "c-toy.npz"]


def _disk_full_on(monkeypatch, victim: str) -> None:
    """Fault injection: writing a file named ``victim`` fails half-way with ENOSPC, as a full disk does."""
    import builtins
    import errno

    import joma_lib.base.io as jio

    class FullDisk:
        def __init__(self, fh):
            self.fh = fh

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.fh.close()

        def write(self, data):
            self.fh.write(bytes(data)[: len(data) // 2])
            raise OSError(errno.ENOSPC, "No space left on device")

    def open_(path, mode="r", *args, **kwargs):
        fh = builtins.open(path, mode, *args, **kwargs)
        return FullDisk(fh) if "w" in mode and Path(path).name.startswith(f".{victim}.") else fh

    monkeypatch.setattr(jio, "open", open_, raising=False)


def test_a_full_disk_during_a_run_names_the_file_and_the_disk_and_keeps_the_last_checkpoint(
        tiny_lm, tmp_path, lm_cli, monkeypatch, capsys):
    from joma_lib.lm.runs import load_checkpoint

    _train(tiny_lm, tmp_path, stop_at=4)
    _disk_full_on(monkeypatch, "checkpoint.pt")
    code, err = lm_cli(tmp_path, capsys)
    ckpt = tmp_path / tiny_lm[0].name / "checkpoint.pt"
    assert code == 2 and len(err.strip().splitlines()) == 1 and "enforce fail" not in err
    assert f"No space left on device while writing {ckpt}" in err and "MiB free" in err and "make room" in err
    monkeypatch.undo()
    assert load_checkpoint(ckpt)["step"] == 4  # the last one, intact
    assert sorted(p.name for p in ckpt.parent.iterdir()) == [".lock", "checkpoint.pt", "checkpoint.pt.sha256"]
    np.testing.assert_array_equal(_train(tiny_lm, tmp_path)["val_loss"],
                                  _train(tiny_lm, tmp_path / "clean")["val_loss"])


def test_a_lock_that_is_a_symlink_is_refused_and_its_target_untouched(tiny_lm, tmp_path, lm_cli, capsys):
    run_dir = tmp_path / "shared" / tiny_lm[0].name
    run_dir.mkdir(parents=True)
    target = tmp_path / "precious.txt"
    target.write_text("do not overwrite")
    (run_dir / ".lock").symlink_to(target)
    with pytest.raises(ValueError, match=r"\.lock is a symbolic link.*remove the link"):
        _train(tiny_lm, tmp_path / "shared")
    code, err = lm_cli(tmp_path / "shared", capsys)
    assert code == 2 and "symbolic link" in err
    assert target.read_text() == "do not overwrite" and not (run_dir / "checkpoint.pt").exists()


def test_a_finished_run_is_read_without_a_lock(tiny_lm, tmp_path, lm_cli, capsys):
    import os
    import stat

    whole = _train(tiny_lm, tmp_path)
    run_dir = tmp_path / tiny_lm[0].name
    (run_dir / ".lock").unlink()
    for path in [*run_dir.iterdir(), run_dir, tmp_path]:  # read-only media
        path.chmod(path.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    try:
        np.testing.assert_array_equal(_train(tiny_lm, tmp_path)["val_loss"], whole["val_loss"])
        assert lm_cli(tmp_path, capsys)[0] == 0
        assert not (run_dir / ".lock").exists()  # no lock taken (root could have created one)
    finally:
        for path in [tmp_path, run_dir, *run_dir.iterdir()]:
            path.chmod(path.stat().st_mode | stat.S_IWUSR)
    assert os.access(run_dir, os.W_OK)


def test_an_unknown_onednn_ceiling_is_refused_with_the_valid_ones(tiny_lm, tmp_path, lm_cli, monkeypatch, capsys):
    from joma_lib.base import cpu

    monkeypatch.setattr(cpu, "_applied", None)
    monkeypatch.setenv(cpu.ISA_ENV, "bogus")
    with pytest.raises(ValueError, match=r"ONEDNN_MAX_CPU_ISA must be one of .* AVX2, .*got 'bogus'"):
        cpu.bf16_support()
    code, err = lm_cli(tmp_path, capsys)
    assert code == 2 and "ONEDNN_MAX_CPU_ISA must be one of" in err and "BOGUS" not in err
    assert not (tmp_path / tiny_lm[0].name).exists()  # refused before any training
    monkeypatch.setenv(cpu.ISA_ENV, "avx2")  # any case, as oneDNN reads it
    assert cpu.onednn_isa_limit() == "AVX2"


# ------------------------------------------------------------------ a damaged figure-store entry


@pytest.mark.parametrize("damage", ["truncate", "missing"])
@pytest.mark.parametrize("keep", [False, True])
def test_a_damaged_store_entry_is_computed_again_with_one_line_and_replaced_with_keep(refs, tmp_path, capsys, damage,
                                                                                        keep):
    store = tmp_path / "store"
    store.mkdir()
    assert main(["verify", "--from", str(store), "--keep", "c-toy"]) == 0
    npz = store / "c-toy.npz"
    if damage == "truncate":
        npz.write_bytes(npz.read_bytes()[:100])
    else:
        npz.unlink()
    capsys.readouterr()
    assert main(["verify", "--from", str(store), *(["--keep"] if keep else []), "c-toy"]) == 0
    captured = capsys.readouterr()
    assert "ok (computed)" in captured.out and "ERROR" not in captured.out and "figures update" not in captured.err
    notes = [line for line in captured.err.splitlines() if "figure store" in line]
    assert len(notes) == 1 and str(npz) in notes[0] and "computing it again" in notes[0]
    assert ("replacing it" in notes[0]) == keep
    if keep:
        assert harness.load_stored("c-toy", store) is not None  # the entry is whole again
    else:
        with pytest.raises(harness.MissingReferenceError):  # left as it was: verify without --keep writes nothing
            harness.load_stored("c-toy", store)


# ------------------------------------------------------------------ Ctrl-C in every command line


def _ctrl_c(*_: object, **__: object) -> None:
    raise KeyboardInterrupt


@pytest.mark.parametrize("command", ["figures verify", "figures make", "figures sweep", "table1", "doctor",
                                     "doctor --refresh"])
def test_ctrl_c_is_one_line_and_exit_code_130_in_every_command_line(refs, tmp_path, monkeypatch, capsys, command):
    import joma_lib.__main__ as doctor_cli
    import joma_lib.kit.cli as figures_cli
    import joma_lib.theory.table1.cli as table1_cli
    from joma_lib.kit import doctor

    run = {"figures verify": (harness, "compute", lambda: main(["verify", "c-toy", "c-toy2"])),
           "figures make": (harness, "compute", lambda: main(["make", "c-toy", "--out", str(tmp_path / "out")])),
           "table1": (table1_cli, "run_table1", lambda: table1_cli.main(["--config", "quick", "--no-progress"])),
           "doctor": (doctor, "report", lambda: doctor_cli.main(["doctor"])),
           "doctor --refresh": (doctor, "bf16_support", lambda: doctor_cli.main(["doctor", "--refresh"])),
           "figures sweep": (figures_cli, "plot_sweep",
                             lambda: main(["sweep", str(tmp_path), "-o", str(tmp_path / "f.png")]))}
    owner, name, call = run[command]
    monkeypatch.setattr(owner, name, _ctrl_c)
    if command.startswith("figures"):
        monkeypatch.setattr("joma_lib.kit.cli.compute", _ctrl_c)
    assert call() == 130
    err = capsys.readouterr().err
    assert err.startswith("interrupted: ") and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert "run the same command again" in err
