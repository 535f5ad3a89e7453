"""The Slurm engine of the LM runner, against a real Slurm (no mocks of Slurm or submitit).

The tests marked ``slurm`` need a reachable cluster: ``bash .ci/slurm_up.sh`` (as root) installs and starts a
one-node one here; where none answers they are skipped, with the reason. They submit a small sweep of two runs,
kill one mid-way and requeue the other mid-way, stop the killed one's new task with the time-limit signal (submitit
checkpoints and requeues it), and compare the collected results with a local run of the same settings, bitwise.
"""

import json
import subprocess
import time

import numpy as np
import pytest

from joma_lib.lm.cluster import job_states, parse_time, run_states, slurm_problem
from joma_lib.lm.cli import main

# two tiny runs (1 and 2 layers) of the CPU re-run's settings; a checkpoint every EVERY steps
STEPS, EVERY = 40, 10
ARGS = ["--preset", "rerun-quick", "--layers", "1", "2", "--steps", str(STEPS), "--eval-interval", str(EVERY),
        "--eval-chunks",
        "4", "--device", "cpu", "--threads", "1", "--no-progress"]


@pytest.fixture(scope="module")
def slurm():
    problem = slurm_problem()
    if problem is not None:
        pytest.skip(f"{problem}; start a one-node cluster with `bash .ci/slurm_up.sh` (as root)")
    pytest.importorskip("submitit")


def _wait(condition, what, timeout=240.0):
    end = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.2)


class _Deadline(BaseException):
    """Raised by the time limit of a wait on Slurm (a BaseException, so that the command line does not turn it into an
    exit code)."""


def _start_now(job):
    """Start a requeued job now (Slurm delays one by default); no error if it started already. Not within the
    second of the requeue: slurmd refuses a launch whose credential dates from the second its last one was revoked
    in ("Job credential revoked"), and the job then fails."""
    time.sleep(2.0)
    subprocess.run(["scontrol", "update", f"JobId={job}", "StartTime=now"], capture_output=True, timeout=30)


def _job(run_dir):
    return json.loads((run_dir / "slurm" / "job.json").read_text())["job_id"]


def _step(out, name):
    return {s.name: s.step for s in run_states(out)[0]}.get(name)


def _scontrol(*args):
    subprocess.run(["scontrol", *args], check=True, capture_output=True, text=True, timeout=30)


@pytest.mark.slurm
def test_a_sweep_killed_and_requeued_on_slurm_ends_bitwise_equal_to_a_local_run(slurm, tmp_path, capsys,
                                                                                time_limit):
    out = tmp_path / "slurm"
    assert main(["run", *ARGS, "--engine", "slurm", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    runs = sorted(p.name for p in out.iterdir() if not p.name.startswith("."))
    assert len(runs) == 2 and printed.count("submitted as job") == 2
    first_jobs = {r: _job(out / r) for r in runs}
    # each task carries its run's name; its logs are linked beside the run
    names = subprocess.run(["squeue", "-h", "--states=all", "-o", "%i %j", "-j", ",".join(first_jobs.values())],
                           capture_output=True, text=True, check=True).stdout.split()
    assert dict(zip(names[::2], names[1::2], strict=True)) == {j: r for r, j in first_jobs.items()}
    assert all((out / r / "slurm" / "log.out").is_symlink() for r in runs)

    # each run is frozen (scontrol suspend) once past its first checkpoint, so that neither can finish before it is
    # interrupted; then the first is killed (scancel) and the second requeued, held until we release it
    # (scontrol requeuehold), so that the next submission deterministically finds it pending
    killed, requeued = runs
    frozen: set[str] = set()

    def freeze_checkpointed() -> bool:
        for run in set(runs) - frozen:
            if (_step(out, run) or 0) >= EVERY:
                _scontrol("suspend", first_jobs[run])
                frozen.add(run)
        return frozen == set(runs)

    _wait(freeze_checkpointed, "the first checkpoint of both runs")
    assert not any((out / r / "result.json").exists() for r in runs), "the runs finished before the interruption"
    subprocess.run(["scancel", first_jobs[killed]], check=True, timeout=30)
    _scontrol("requeuehold", first_jobs[requeued])
    _wait(lambda: job_states(list(first_jobs.values())) == {first_jobs[killed]: "CANCELLED",
                                                             first_jobs[requeued]: "PENDING"},
          "the cancellation and the requeue")
    capsys.readouterr()
    assert main(["status", "--out", str(out)]) == 0
    rows = {line.split()[0]: line.split()[1:] for line in capsys.readouterr().out.splitlines()}
    assert rows[killed][0] == "cancelled" and int(rows[killed][1].split("/")[0]) >= EVERY, rows
    assert rows[requeued][0] == "pending" and int(rows[requeued][1].split("/")[0]) >= EVERY, rows

    # submitting again: only the killed run goes to Slurm again
    assert main(["run", *ARGS, "--engine", "slurm", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"{requeued}: already in Slurm as job {first_jobs[requeued]} (pending)" in printed, printed
    assert f"{killed}: submitted as job" in printed and _job(out / killed) != first_jobs[killed]
    # the resubmitted run is then stopped as Slurm stops a task near its time limit: submitit catches the warning
    # signal (USR2), asks the task for its checkpoint (Resumable.checkpoint: the same call again) and requeues it.
    # The signal goes out as soon as the task says it resumes, before it has loaded its corpus: it cannot finish
    # first. (A frozen task cannot be signalled, and once thawed it no longer gets step signals here.)
    again, killed_log = _job(out / killed), out / killed / "slurm" / "log.out"
    _wait(lambda: killed_log.exists() and "resuming at step" in killed_log.read_text(), "the resubmitted run")
    subprocess.run(["scancel", "--signal=USR2", again], check=True, timeout=30)
    _wait(lambda: job_states([again]).get(again) == "PENDING", "submitit's requeue")
    _start_now(again)
    # the requeued task may start again (at once: Slurm delays a requeued job by default); this call waits and collects
    _scontrol("release", first_jobs[requeued])
    _start_now(first_jobs[requeued])
    # `--results` waits as long as Slurm keeps the runs queued: bound it here
    with time_limit(300, _Deadline("still waiting after 300 s; see `squeue` and /var/log/slurm/")):
        assert main(["run", *ARGS, "--engine", "slurm", "--out", str(out), "--results",
                     str(tmp_path / "slurm.npz")]) == 0
    assert "submitted as job" not in capsys.readouterr().out
    for run in runs:  # each resumed from its checkpoint (the task's log says where it started again)
        log = (out / run / "slurm" / "log.out").read_text()
        assert "resuming at step" in log, log
    log = killed_log.read_text()  # killed, then requeued by submitit from its checkpoint hook
    assert log.count("resuming at step") == 2 and "Calling checkpoint method" in log and "Requeued job" in log, log
    assert "Restarts=1" in subprocess.run(["scontrol", "show", "job", first_jobs[requeued]], capture_output=True,
                                          text=True).stdout

    assert main(["run", *ARGS, "--out", str(tmp_path / "local"), "--results", str(tmp_path / "local.npz")]) == 0
    # the sweep as the Slurm run wrote it, and as `collect` reads it from the run folders, is the local one, bitwise
    assert main(["collect", str(out), "--results", str(tmp_path / "collected.npz")]) == 0
    with np.load(tmp_path / "local.npz") as local:
        for name in ("slurm.npz", "collected.npz"):
            with np.load(tmp_path / name) as on_slurm:
                assert sorted(on_slurm.files) == sorted(local.files), name
                for key in local.files:
                    assert np.array_equal(on_slurm[key], local[key], equal_nan=True), (name, key)
    # each run records the precision it trained in, as the local one does (the preset's `auto`: decided once)
    used = {folder: {r: json.loads((tmp_path / folder / r / "result.json").read_text())["precision_used"]
                     for r in runs} for folder in ("slurm", "local")}
    assert used["slurm"] == used["local"] and len(set(used["local"].values())) == 1, used

    # everything finished: nothing is submitted again; status shows each run at its last step
    capsys.readouterr()
    assert main(["run", *ARGS, "--engine", "slurm", "--out", str(out)]) == 0
    assert capsys.readouterr().out.count("finished, not submitted again") == 2
    assert main(["status", "--out", str(out)]) == 0
    table = capsys.readouterr().out
    assert table.count("done") == 3 and table.count(f"{STEPS}/{STEPS}") == 2, table


@pytest.mark.slurm
@pytest.mark.parametrize("request_, message", [(["--partition", "no-such-partition"], "invalid partition"),
                                               (["--gpus-per-run", "1"], "gres")])
def test_a_request_sbatch_refuses_gives_its_message_on_one_line_and_leaves_nothing(slurm, tmp_path, capsys,
                                                                                  request_, message):
    out = tmp_path / "runs"
    assert main(["run", *ARGS, "--engine", "slurm", "--out", str(out), *request_]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: sbatch refused the job array:") and message in err.lower(), err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert not out.exists()
    out.mkdir()  # an existing folder keeps what it had, and gains nothing
    (out / "notes.txt").write_text("mine")
    assert main(["run", *ARGS, "--engine", "slurm", "--out", str(out), *request_]) == 2
    assert [p.name for p in out.iterdir()] == ["notes.txt"]


def test_without_slurm_the_engine_says_how_to_start_one(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # no sbatch, squeue, ... on PATH
    assert main(["run", *ARGS, "--engine", "slurm", "--out", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--engine slurm" in err and "sbatch" in err and ".ci/slurm_up.sh" in err, err
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("text, minutes", [("90", 90), ("4:00:00", 240), ("1-00", 1440), ("0-1:30", 90),
                                           ("2:30", 3), ("1-2:3:4", 1564)])
def test_slurm_time_limits_are_read_as_minutes(text, minutes):
    assert parse_time(text) == minutes


@pytest.mark.parametrize("text", ["", "4h", "0", "1:2:3:4", "-5"])
def test_a_bad_time_limit_is_refused_before_anything_is_submitted(tmp_path, capsys, text):
    with pytest.raises(ValueError, match="time"):
        parse_time(text)
    assert main(["run", *ARGS, "--engine", "slurm", "--time", text, "--out", str(tmp_path / "runs")]) == 2
    assert "time" in capsys.readouterr().err and not (tmp_path / "runs").exists()


def test_a_stacked_sweep_is_one_task_per_stack_and_ends_as_the_local_stack(slurm, tmp_path, capsys):
    stacked = [*ARGS[:4], *ARGS[5:], "--seeds", "1", "2", "--stack"]  # one layer, two seeds: one stack
    out = tmp_path / "slurm"
    assert main(["run", *stacked, "--engine", "slurm", "--out", str(out), "--results", str(tmp_path / "s.npz")]) == 0
    printed = capsys.readouterr().out
    runs = sorted(p.name for p in out.iterdir() if not p.name.startswith("."))
    assert len(runs) == 2 and printed.count("submitted as job") == 1
    assert _job(out / runs[0]) == _job(out / runs[1])  # both runs' folders record the one task
    assert main(["run", *stacked, "--out", str(tmp_path / "local"), "--results", str(tmp_path / "l.npz")]) == 0
    with np.load(tmp_path / "s.npz") as on_slurm, np.load(tmp_path / "l.npz") as local:
        for key in ("val_loss", "attn_entropy", "stable_rank"):
            np.testing.assert_array_equal(on_slurm[key], local[key])
