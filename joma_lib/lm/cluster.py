"""The Slurm engine of the language-model runner: a sweep submitted as one job array through submitit.

Each run of a sweep is one task of a Slurm job array. The task trains into the run's folder exactly as the
local engine does (same layout, checkpoints and results; :func:`joma_lib.lm.step.train_run`), so a task
that is requeued, preempted or timed out resumes from the run's last checkpoint and ends with the numbers of
an uninterrupted run. Beside each run, ``<out>/<run>/slurm/`` holds ``job.json`` (the job id and the resources)
and the links ``log.out``/``log.err`` to the task's logs; submitit's own files live in ``<out>/.submitit/``.
Each task carries its run's name as job name.

Nothing here knows the run's settings: the command line (:func:`joma_lib.lm.cli.main`) decides which runs
to submit and hands over the function that trains one (the layers forbid this module to import the runner).
Slurm is reached through its commands (``sbatch`` via submitit, ``squeue``, ``sacct``, ``scontrol``).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from joma_lib.base.validation import check_int

ENGINES = ("local", "slurm")
#: submitit's pickles and logs of every submission, below the sweep's folder
SUBMITIT_DIR = ".submitit"
#: how often a task may be requeued at its time limit before it is given up (submitit's ``max_num_timeout``)
MAX_REQUEUES = 50
SLURM_HELP = ("start a one-node test cluster with `bash .ci/slurm_up.sh` (as root), or run this on a Slurm "
              "cluster's login node")
#: Slurm job states in which a task is still going to train (it is not resubmitted)
ACTIVE_STATES = frozenset({"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED", "REQUEUE_HOLD",
                           "REQUEUE_FED", "RESIZING", "SUSPENDED", "SIGNALING", "STAGE_OUT", "PREEMPTED"})
_TIME = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$")


class SlurmUnavailable(RuntimeError):
    """No Slurm can be reached from here (no ``sbatch``, or its controller does not answer)."""


class SubmissionFailed(RuntimeError):
    """``sbatch`` refused the job array; the message is sbatch's own, on one line."""


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _slurm_command(*args: str, timeout: float = 20.0) -> subprocess.CompletedProcess[str] | None:
    """Run a Slurm client command; None when it is not installed or does not answer in time."""
    if shutil.which(args[0]) is None:
        return None
    try:
        return subprocess.run(args, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return None


def slurm_problem() -> str | None:
    """Why Slurm cannot be used from here, in a few words; None when ``sbatch`` exists and the controller answers."""
    if shutil.which("sbatch") is None:
        return "no Slurm here (sbatch is not on PATH)"
    ping = _slurm_command("sinfo", "-h", "-o", "%P")
    if ping is None:
        return "Slurm's controller does not answer (sinfo timed out)"
    if ping.returncode != 0:
        return f"Slurm's controller does not answer ({_one_line(ping.stderr) or 'sinfo failed'})"
    return None


def require_slurm() -> None:
    """Raise :class:`SlurmUnavailable` (one line: the engine, the reason, how to get a Slurm) if none is reachable."""
    problem = slurm_problem()
    if problem is not None:
        raise SlurmUnavailable(f"--engine slurm: {problem}; {SLURM_HELP}")


def parse_time(text: str) -> int:
    """Minutes of a Slurm time limit: ``M``, ``M:S``, ``H:M:S``, ``D-H``, ``D-H:M`` or ``D-H:M:S`` (seconds round
    up)."""
    match = _TIME.match(str(text).strip())
    if match is None:
        raise ValueError(f"time must be a Slurm time limit (minutes, H:MM:SS or D-HH:MM:SS), got {text!r}")
    days, first, second, third = match.groups()
    if days is not None:  # D-H[:M[:S]]
        hours, minutes, seconds = int(first), int(second or 0), int(third or 0)
        total = (int(days) * 24 + hours) * 60 + minutes + (seconds > 0)
    elif third is not None:  # H:M:S
        total = int(first) * 60 + int(second) + (int(third) > 0)
    else:  # M or M:S
        total = int(first) + (second is not None and int(second) > 0)
    if total < 1:
        raise ValueError(f"time must be at least one minute, got {text!r}")
    return total


@dataclass(frozen=True)
class SlurmResources:
    """What each task of the array asks Slurm for: one node, one task, ``cpus`` CPUs and ``gpus`` GPUs, ``time``
    (a Slurm time limit), in ``partition`` (None: the cluster's default)."""

    partition: str | None = None
    gpus: int = 0
    time: str = "4:00:00"
    cpus: int = 1

    def validated(self) -> SlurmResources:
        """Self, after checking every field (ValueError naming the field otherwise)."""
        if self.partition is not None and (not isinstance(self.partition, str) or not self.partition.strip()):
            raise ValueError(f"partition must be a non-empty partition name or None, got {self.partition!r}")
        check_int("gpus_per_run", self.gpus, 0, 64)
        check_int("cpus", self.cpus, 1, 1024)
        parse_time(self.time)
        return self

    def executor_parameters(self) -> dict[str, Any]:
        """The parameters of ``submitit.SlurmExecutor.update_parameters`` for one task per run."""
        params: dict[str, Any] = {"nodes": 1, "ntasks_per_node": 1, "cpus_per_task": self.cpus,
                                  "time": parse_time(self.time)}
        if self.partition is not None:
            params["partition"] = self.partition
        if self.gpus:
            params["gpus_per_node"] = self.gpus
        return params


class Resumable:
    """A task function as a submitit ``Checkpointable``: at its time limit (or on preemption) the task is
    requeued with the same arguments, and the run resumes from its own checkpoint."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn

    def __call__(self, *args: Any) -> Any:
        return self.fn(*args)

    def checkpoint(self, *args: Any) -> Any:
        """submitit's hook, called on the signal before the time limit: requeue the same call."""
        from submitit.helpers import DelayedSubmission

        return DelayedSubmission(self, *args)


@dataclass(frozen=True)
class Submitted:
    """One run as submitted: its name and its Slurm job id (``<array>_<task>``, or a plain id for one run)."""

    name: str
    job_id: str


@contextlib.contextmanager
def _cleaned_on_failure(out_dir: Path) -> Iterator[None]:
    """Remove what the block wrote below ``out_dir`` if it raises (submitit writes pickles before calling sbatch)."""
    existed = out_dir.exists()
    folder = out_dir / SUBMITIT_DIR
    before = set(folder.iterdir()) if folder.exists() else None
    try:
        yield
    except BaseException:
        if not existed:
            shutil.rmtree(out_dir, ignore_errors=True)
        elif before is None:
            shutil.rmtree(folder, ignore_errors=True)
        else:
            for path in set(folder.iterdir()) - before:
                path.unlink(missing_ok=True)
        raise


def submit_missing(out_dir: str | Path, runs: Sequence[tuple[str, tuple[Any, ...]]], finished: Callable[[str], bool],
                   fn: Callable[..., Any], resources: SlurmResources, array_name: str,
                   log: Callable[[str], None] = print,
                   members: Callable[[str], Sequence[str]] | None = None) -> list[Submitted]:
    """Submit ``fn(*args)`` for every ``(run name, args)`` of ``runs`` that is neither ``finished`` nor queued or
    running in Slurm already, as one job array (:func:`submit_array`); log what is skipped and what is submitted.
    ``members(name)``: the run folders one task trains (a stack of runs; default: the run's own)."""
    resources = resources.validated()
    require_slurm()
    out_dir = Path(out_dir).absolute()
    jobs = {name: recorded_job(out_dir / (members(name)[0] if members else name)) for name, _ in runs}
    states = job_states([j for j in jobs.values() if j is not None])
    if states is None:  # not knowing which runs are still queued, submitting could train a run twice at once
        raise SlurmUnavailable(f"--engine slurm: squeue does not answer, so the runs already queued are unknown; "
                               f"try again; {SLURM_HELP}")
    todo = []
    for name, args in runs:
        job = jobs[name]
        if finished(name):
            log(f"{name}: finished, not submitted again")
        elif job is not None and states.get(job) in ACTIVE_STATES:
            log(f"{name}: already in Slurm as job {job} ({states[job].lower()}), not submitted again")
        else:
            todo.append((name, args))
    submitted = submit_array(out_dir, todo, fn, resources, array_name, members)
    for sub in submitted:
        log(f"{sub.name}: submitted as job {sub.job_id} (log: {out_dir / sub.name / 'slurm' / 'log.err'})")
    return submitted


def submit_array(out_dir: str | Path, tasks: Sequence[tuple[str, tuple[Any, ...]]], fn: Callable[..., Any],
                 resources: SlurmResources, array_name: str,
                 members: Callable[[str], Sequence[str]] | None = None) -> list[Submitted]:
    """Submit ``fn(*args)`` for every ``(run name, args)`` of ``tasks`` as one Slurm job array.

    The array is named ``array_name`` and each task is then renamed after its run. Only once sbatch has accepted
    the array are the ``slurm/`` folders of the runs it trains (``members(name)``, default the run's own) written
    (``job.json``, log links); if sbatch refuses it,
    :class:`SubmissionFailed` carries sbatch's message on one line and nothing is left below ``out_dir``.
    """
    import submitit
    from submitit.core.utils import FailedJobError

    resources = resources.validated()
    out_dir = Path(out_dir).absolute()
    if not tasks:
        return []
    require_slurm()
    executor = submitit.SlurmExecutor(folder=out_dir / SUBMITIT_DIR, max_num_timeout=MAX_REQUEUES)
    executor.update_parameters(job_name=array_name, array_parallelism=len(tasks), **resources.executor_parameters())
    with _cleaned_on_failure(out_dir):
        try:
            # submitit prints sbatch's error to stderr before raising it: keep it for the one-line message only
            with contextlib.redirect_stderr(io.StringIO()):
                jobs = executor.map_array(Resumable(fn), *zip(*(args for _, args in tasks)))
        except FailedJobError as err:
            raise SubmissionFailed(f"sbatch refused the job array: {_one_line(str(err))}") from None
    submitted = [Submitted(name, job.job_id) for (name, _), job in zip(tasks, jobs, strict=True)]
    for (name, _), job, sub in zip(tasks, jobs, submitted, strict=True):
        for member in members(name) if members else [name]:
            _record(out_dir / member / "slurm", sub, resources, job.paths.stdout, job.paths.stderr)
        _slurm_command("scontrol", "update", f"JobId={sub.job_id}", f"JobName={name}")
    return submitted


def _record(folder: Path, sub: Submitted, resources: SlurmResources, stdout: Path, stderr: Path) -> None:
    """Write ``job.json`` and the links ``log.out``/``log.err`` of one submitted run."""
    folder.mkdir(parents=True, exist_ok=True)
    for link, target in (("log.out", stdout), ("log.err", stderr)):
        path = folder / link
        path.unlink(missing_ok=True)
        path.symlink_to(os.path.relpath(target, folder))
    info = {"job_id": sub.job_id, "submitted": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "resources": asdict(resources),
            "stdout": str(stdout), "stderr": str(stderr)}
    (folder / "job.json").write_text(json.dumps(info, indent=2) + "\n")


def recorded_job(run_dir: Path) -> str | None:
    """The Slurm job id last submitted for the run in ``run_dir`` (None if it was never submitted)."""
    try:
        return str(json.loads((run_dir / "slurm" / "job.json").read_text())["job_id"])
    except (OSError, ValueError, KeyError):
        return None


def job_states(job_ids: Sequence[str]) -> dict[str, str] | None:
    """Slurm's state of each job id it still knows (``squeue``, then ``sacct`` for those squeue has forgotten);
    None when Slurm cannot be reached."""
    ids = sorted(set(job_ids))
    if not ids:
        return {}
    queue = _slurm_command("squeue", "-h", "-r", "--states=all", "-o", "%i %T", "-j", ",".join(ids))
    if queue is None or queue.returncode != 0 and "Invalid job id" not in queue.stderr:
        return None
    states = dict(line.split()[:2] for line in queue.stdout.splitlines() if len(line.split()) >= 2)
    missing = [i for i in ids if i not in states]
    if missing:  # the job left squeue's memory; the accounting (if the cluster keeps one) still knows it
        acct = _slurm_command("sacct", "-n", "-X", "-P", "-o", "JobID,State", "-j", ",".join(missing))
        if acct is not None and acct.returncode == 0:
            for line in acct.stdout.splitlines():
                job, _, state = line.partition("|")
                if job in missing and state:
                    states[job] = state.split()[0]
    return {i: s for i, s in states.items() if i in ids}


@dataclass(frozen=True)
class RunState:
    """Where one run stands: ``state`` (``done``, a Slurm state in lower case, ``incomplete`` or ``not started``),
    the last checkpointed ``step`` of ``total`` and its Slurm job (if submitted)."""

    name: str
    state: str
    step: int | None
    total: int | None
    job_id: str | None
    log: Path | None


def _progress(run_dir: Path) -> tuple[bool, int | None, int | None]:
    """(finished, last checkpointed step, total steps) from the files of a run folder."""
    try:
        meta = json.loads((run_dir / "result.json").read_text())
        steps = int(meta["config"]["steps"])
        return True, steps, steps
    except (OSError, ValueError, KeyError):
        pass
    try:  # memory-mapped: only the small entries are read, not the weights
        ckpt = torch.load(run_dir / "checkpoint.pt", map_location="cpu", weights_only=True, mmap=True)
        return False, int(ckpt["step"]), int(ckpt["config"]["steps"])
    except Exception:  # no checkpoint yet, or one being replaced right now
        return False, None, None


def run_states(out_dir: str | Path) -> tuple[list[RunState], bool]:
    """The state of every run folder below ``out_dir`` and whether Slurm was reachable for it."""
    out_dir = Path(out_dir)
    run_dirs = sorted(p for p in out_dir.iterdir() if p.is_dir() and not p.name.startswith(".")) \
        if out_dir.is_dir() else []
    jobs = {d.name: recorded_job(d) for d in run_dirs}
    states = job_states([j for j in jobs.values() if j is not None])
    found = []
    for run_dir in run_dirs:
        finished, step, total = _progress(run_dir)
        job = jobs[run_dir.name]
        if finished:
            state = "done"
        elif job is not None and states is not None and job in states:
            state = states[job].lower()
        else:
            state = "incomplete" if step is not None else "not started"
        log = run_dir / "slurm" / "log.err" if job is not None else None
        found.append(RunState(run_dir.name, state, step, total, job, log))
    return found, states is not None


def format_states(states: Sequence[RunState], slurm_reachable: bool) -> str:
    """A table of :func:`run_states`, one run per line, and a summary line."""
    if not states:
        return "no runs here"
    width = max(len(s.name) for s in states)
    lines = [f"{'run':<{width}}  {'state':<12} {'step':>13}  job"]
    for s in states:
        step = f"{s.step if s.step is not None else '-'}/{s.total if s.total is not None else '?'}"
        note = f"  (see {s.log})" if s.state in ("failed", "cancelled", "timeout", "out_of_memory", "node_fail") \
            else ""
        lines.append(f"{s.name:<{width}}  {s.state:<12} {step:>13}  {s.job_id or '-'}{note}")
    counts: dict[str, int] = {}
    for s in states:
        counts[s.state] = counts.get(s.state, 0) + 1
    lines.append(", ".join(f"{n} {state}" for state, n in sorted(counts.items())))
    if not slurm_reachable and any(s.job_id for s in states):
        lines.append("Slurm is not reachable from here: the states come from the run folders only")
    return "\n".join(lines)


def wait_for(out_dir: str | Path, names: Sequence[str], poll: float = 5.0, log: Callable[[str], None] = print
             ) -> None:
    """Wait until every run of ``names`` below ``out_dir`` is finished; a RuntimeError names the runs whose job
    ended without a result (and their logs)."""
    out_dir = Path(out_dir)

    def finished(name: str) -> bool:
        return (out_dir / name / "result.json").exists()  # the runner's completion mark, written last

    pending = list(names)
    while pending:
        jobs = {n: recorded_job(out_dir / n) for n in pending}
        states = job_states([j for j in jobs.values() if j is not None])
        if states is None:
            raise SlurmUnavailable(f"--engine slurm: lost contact with Slurm while waiting; {SLURM_HELP}")
        going, ended = [], []
        for name in pending:
            job = jobs[name]
            if finished(name):
                log(f"{name}: done")
            elif job is not None and states.get(job) in ACTIVE_STATES:
                going.append(name)
            else:
                ended.append(name)
        if ended:  # a task writes its result just before its job ends: look once more
            time.sleep(2.0)
            ended = [n for n in ended if not finished(n)]
        if ended:
            raise RuntimeError("runs ended without a result: " + "; ".join(
                f"{n} (job {jobs[n]}, {states.get(jobs[n] or '', 'unknown').lower()}; see {out_dir / n / 'slurm'})"
                for n in ended))
        pending = going
        if pending:
            time.sleep(poll)
