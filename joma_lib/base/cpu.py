"""What this CPU can run: bf16 matrix products probed in a child process before they are trusted.

A CPU flag is a promise, not a proof. Some virtual machines advertise Intel AMX (``amx_bf16 amx_tile``) but
cannot execute it: oneDNN, which PyTorch calls for bf16 matrix products on the CPU, picks its AMX kernels and
the process dies by ``SIGILL`` (or oneDNN reports ``could not create a primitive``). So before the first bf16
operation :func:`bf16_support` runs the bf16 operations the language model uses (matmul, ``linear`` under
autocast with its backward pass, ``addmm(out=)`` and ``softmax(out=)`` of the read-out) in a child process,
where a ``SIGILL`` kills only the child. It tries oneDNN's full instruction set first and then lower ceilings
(:data:`ISA_LEVELS`, set through ``ONEDNN_MAX_CPU_ISA``); the first one that runs and gives correct numbers
wins and is applied to this process (and inherited by its children) before oneDNN is first used. If none runs,
bf16 is reported unusable, and the language model trains in fp32 instead, with a one-line notice.

The verdict is cached per machine in the user cache (``$JOMA_CACHE``, default ``~/.cache/joma_companion``),
keyed by the CPU model, the flags that matter here, the torch version and any ``ONEDNN_MAX_CPU_ISA`` the user
set. Test hook: ``JOMA_PROBE_INJECT=sigill`` makes every probe child kill itself with ``SIGILL``;
``JOMA_PROBE_INJECT=sigill-above:<LEVEL>`` does so unless oneDNN is limited to ``<LEVEL>`` or a lower level of
:data:`ISA_LEVELS` (the behaviour of the AMX machines above). Both are part of the cache key.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import signal
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from joma_lib.base.io import atomic_path, cache_dir
from joma_lib.base.startup import declare_env

ISA_ENV = "ONEDNN_MAX_CPU_ISA"
INJECT_ENV = "JOMA_PROBE_INJECT"
#: oneDNN instruction-set ceilings tried in turn: none (``DEFAULT``: AMX where the CPU says so), AVX-512 with
#: bf16 instructions, plain AVX-512, AVX2.
ISA_LEVELS = ("DEFAULT", "AVX512_CORE_BF16", "AVX512_CORE", "AVX2")
#: every value oneDNN takes for ``ONEDNN_MAX_CPU_ISA`` (any case; aliases included): anything else is refused, since
#: oneDNN would ignore it while the verdict and the results recorded it as the ceiling in force
ONEDNN_ISA_VALUES = ("DEFAULT", "ALL", "SSE41", "AVX", "AVX2", "AVX2_VNNI", "AVX2_VNNI_2", "AVX512_CORE",
                     "AVX512_CORE_VNNI", "AVX512_CORE_BF16", "AVX512_CORE_FP16", "AVX512_CORE_AMX",
                     "AVX512_CORE_AMX_FP16", "AVX10_1_512", "AVX10_1_512_AMX", "AVX10_1_512_AMX_FP16", "AVX10_2_512",
                     "AVX10_2_512_AMX_2")
ONEDNN_ISA_ALLOWED = ", ".join(ONEDNN_ISA_VALUES) + " (any case)"
#: The CPU flags that decide which kernels oneDNN and ATen pick for bf16 (part of the cache key).
RELEVANT_FLAGS = ("avx2", "avx512f", "avx512_bf16", "avx512_vnni", "avx_vnni", "amx_bf16", "amx_tile", "amx_int8")
PROBE_TIMEOUT_S = 300
#: how the probe child reports :attr:`Bf16Support.accelerated` (``True`` or ``False`` follows)
ACCELERATED_LINE = "onednn bf16: "
_PROBE_VERSION = 2  # bump when the probe's operations change: old cache entries are then ignored


@dataclass(frozen=True)
class CpuIdentity:
    """The CPU as the cache key sees it: its model name and the :data:`RELEVANT_FLAGS` it advertises."""

    model: str
    flags: tuple[str, ...]


@functools.cache
def cpu_identity() -> CpuIdentity:
    """Model name and relevant flags from ``/proc/cpuinfo`` (Linux), else :func:`platform.processor`."""
    model, flags = platform.processor() or platform.machine(), set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name":
                model = value.strip()
            elif key.strip() == "flags":
                flags = set(value.split())
                break
    except OSError:
        pass
    return CpuIdentity(model, tuple(f for f in RELEVANT_FLAGS if f in flags))


@dataclass(frozen=True)
class Bf16Support:
    """The probe's verdict.

    Attributes:
        usable: bf16 matrix products run here and give correct numbers.
        isa_limit: the ``ONEDNN_MAX_CPU_ISA`` level under which they do (``"DEFAULT"``: no limit).
        onednn_isa: the instruction set oneDNN reported using (``""`` when it was not called).
        attempts: one line per level tried, e.g. ``"DEFAULT: killed by SIGILL"``.
        accelerated: PyTorch hands bf16 matrix products to oneDNN here (its own check,
            ``torch.ops.mkldnn._is_mkldnn_bf16_supported``, asked in the probe child under the winning level). Where it
            does not (a CPU with AVX2 but no AVX-512, such as AMD EPYC before Zen 4), they run on PyTorch's
            reference kernels: correct, but far slower than fp32 (2 against 58 GFLOP/s on one such core).
    """

    usable: bool
    isa_limit: str
    onednn_isa: str
    attempts: tuple[str, ...]
    accelerated: bool

    def summary(self) -> str:
        """One line: the verdict and the ceiling it needs."""
        if not self.usable:
            return "bf16 unusable here (" + "; ".join(self.attempts) + "): bf16 runs fall back to fp32"
        limit = "no limit" if self.isa_limit == "DEFAULT" else f"{ISA_ENV}={self.isa_limit}"
        slow = "" if self.accelerated else ", but only on PyTorch's reference kernels: far slower than fp32"
        return f"bf16 usable ({limit}; oneDNN ISA: {self.onednn_isa or 'not called'}){slow}"


def _cache_key() -> str:
    import torch

    ident = cpu_identity()
    parts = [str(_PROBE_VERSION), ident.model, ",".join(ident.flags), torch.__version__,
             os.environ.get(ISA_ENV, ""), os.environ.get(INJECT_ENV, "")]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def cache_file() -> Path:
    """The cached verdict of this machine (:func:`_cache_key`)."""
    return cache_dir() / f"bf16-probe-{_cache_key()}.json"


def user_isa_limit() -> str | None:
    """The ceiling the user set in ``ONEDNN_MAX_CPU_ISA`` (upper case), None when unset; a value oneDNN does not
    know (:data:`ONEDNN_ISA_VALUES`) raises a ValueError naming the variable and the valid values."""
    user = os.environ.get(ISA_ENV)
    if not user:
        return None
    if user.upper() not in ONEDNN_ISA_VALUES:
        raise ValueError(f"{ISA_ENV} must be one of oneDNN's levels {ONEDNN_ISA_ALLOWED}, got {user!r}; "
                         "fix or unset it")
    return user.upper()


def _levels_to_try() -> tuple[str, ...]:
    """A ceiling the user set is respected (only it is tried); otherwise every level of :data:`ISA_LEVELS`."""
    user = user_isa_limit()
    return (user,) if user else ISA_LEVELS


def _probe_level(level: str) -> tuple[bool, str, str, bool]:
    """Run the probe child under ``level``: (passed, what happened, oneDNN's ISA line, accelerated)."""
    env = {k: v for k, v in os.environ.items() if k != ISA_ENV}
    if level != "DEFAULT":
        env[ISA_ENV] = level
    env["ONEDNN_VERBOSE"] = "1"
    try:
        proc = subprocess.run([sys.executable, "-m", "joma_lib.base.cpu", "--child"], env=env, capture_output=True,
                              text=True, timeout=PROBE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return False, f"{level}: no answer in {PROBE_TIMEOUT_S} s", "", False
    isa = next((line.split("isa:", 1)[1].strip() for line in proc.stdout.splitlines()
                if line.startswith("onednn_verbose") and ",cpu,isa:" in line), "")
    if proc.returncode < 0:
        return False, f"{level}: killed by {signal.Signals(-proc.returncode).name}", isa, False
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["exit code " + str(proc.returncode)])[-1]
        return False, f"{level}: {last[:160]}", isa, False
    return True, f"{level}: ok", isa, f"{ACCELERATED_LINE}True" in proc.stdout.splitlines()


def run_probe() -> Bf16Support:
    """Probe every level of :func:`_levels_to_try` in turn (no cache); the first that passes wins."""
    attempts = []
    for level in _levels_to_try():
        passed, what, isa, accelerated = _probe_level(level)
        attempts.append(what)
        if passed:
            return Bf16Support(True, level, isa, tuple(attempts), accelerated)
    return Bf16Support(False, "", "", tuple(attempts), False)


_applied: Bf16Support | None = None
declare_env(ISA_ENV, ONEDNN_ISA_ALLOWED, lambda _: user_isa_limit())
declare_env(INJECT_ENV, f"sigill or sigill-above:<{'|'.join(ISA_LEVELS)}> (a test hook)", lambda _: inject_kind())


def bf16_support(refresh: bool = False) -> Bf16Support:
    """The verdict for this machine (cached on disk), applied to this process.

    Applying means: when bf16 needs a ceiling (``isa_limit`` not ``DEFAULT``), ``ONEDNN_MAX_CPU_ISA`` is set in
    this process's environment, which oneDNN reads when it is first used (call this before any bf16 operation),
    and the change is announced in one line on stderr; an unusable bf16 is announced the same way.
    ``refresh=True`` probes again instead of reading the cache.
    """
    global _applied
    user_isa_limit()  # a ceiling oneDNN does not know is refused before anything is probed or recorded
    if _applied is not None and not refresh:
        return _applied
    path = cache_file()
    verdict = None
    if path.exists() and not refresh:
        try:
            stored = json.loads(path.read_text())
            verdict = Bf16Support(bool(stored["usable"]), str(stored["isa_limit"]), str(stored["onednn_isa"]),
                                  tuple(stored["attempts"]), bool(stored["accelerated"]))
        except (OSError, ValueError, TypeError, KeyError):
            verdict = None  # an unreadable cache entry is probed again
    if verdict is None:
        verdict = run_probe()
        try:
            with atomic_path(path) as tmp:
                tmp.write_text(json.dumps({**asdict(verdict), "cpu": asdict(cpu_identity())}, indent=2) + "\n")
        except OSError:
            pass  # a read-only cache costs a probe per process, nothing else
    if verdict.usable and verdict.isa_limit != "DEFAULT" and os.environ.get(ISA_ENV) != verdict.isa_limit:
        os.environ[ISA_ENV] = verdict.isa_limit
        print(f"joma_lib: oneDNN limited to {verdict.isa_limit} ({ISA_ENV}): its default bf16 kernels fail on "
              f"this CPU ({verdict.attempts[0]})", file=sys.stderr)
    elif not verdict.usable:
        print(f"joma_lib: {verdict.summary()}; `python -m joma_lib doctor` shows more", file=sys.stderr)
    _applied = verdict
    return verdict


def onednn_isa_limit() -> str:
    """The oneDNN ceiling in force in this process: ``ONEDNN_MAX_CPU_ISA`` (checked, :func:`user_isa_limit`) or
    ``"DEFAULT"``."""
    return user_isa_limit() or "DEFAULT"


def default_numerics_are_avx2_fp32() -> bool:
    """This machine trains by default as under ``ONEDNN_MAX_CPU_ISA=AVX2`` in fp32 (CI's numerics-matrix variant,
    which would then repeat the default): PyTorch's best CPU kernels here are AVX2 ones (no AVX-512, so oneDNN's are
    at most AVX2 too), no ceiling is set, and bf16 is not :attr:`~Bf16Support.accelerated`, so ``auto`` takes fp32."""
    import torch

    return (torch.backends.cpu.get_cpu_capability() == "AVX2" and user_isa_limit() is None
            and not bf16_support().accelerated)


def inject_kind() -> tuple[str, str]:
    """The test hook of :data:`INJECT_ENV`: ``("", "")`` when unset, ``("sigill", "")`` or
    ``("sigill-above", level)``; anything else is a ValueError naming the variable."""
    inject = os.environ.get(INJECT_ENV, "")
    if inject in ("", "sigill"):
        return inject, ""
    kind, _, floor = inject.partition(":")
    if kind != "sigill-above" or floor not in ISA_LEVELS:
        raise ValueError(f"{INJECT_ENV} must be 'sigill' or 'sigill-above:<{'|'.join(ISA_LEVELS)}>', got {inject!r}")
    return kind, floor


def _inject() -> None:
    """The test hook of :data:`INJECT_ENV` (see the module docstring), run first in the probe child."""
    try:
        kind, floor = inject_kind()
    except ValueError as err:
        raise SystemExit(str(err)) from None
    if kind == "sigill":
        os.kill(os.getpid(), signal.SIGILL)
    if not kind:
        return
    level = os.environ.get(ISA_ENV, "DEFAULT").upper()
    if level not in ISA_LEVELS or ISA_LEVELS.index(level) < ISA_LEVELS.index(floor):
        os.kill(os.getpid(), signal.SIGILL)


def _child() -> None:
    """The probe: the language model's bf16 operations at its shapes, checked against fp32."""
    _inject()
    import torch

    torch.manual_seed(0)
    rows, d, vocab = 700, 200, 2048  # 20 x 35 tokens, width 200, a vocabulary of the CPU presets' size
    h, w, b = torch.randn(rows, d), torch.randn(vocab, d) / d**0.5, torch.zeros(vocab)
    layer = torch.nn.Linear(d, 3 * d)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = layer(h)
    out.float().square().mean().backward()
    ref = torch.nn.functional.linear(h, layer.weight, layer.bias)
    block = torch.empty(256, vocab, dtype=torch.bfloat16)
    torch.addmm(b.bfloat16(), h[:256].bfloat16(), w.bfloat16().t(), out=block)
    torch.softmax(block, 1, out=block)
    product = h.bfloat16() @ w.bfloat16().t()
    errors = [float((out.float() - ref).norm() / ref.norm()),
              float((product.float() - h @ w.t()).norm() / (h @ w.t()).norm()),
              float((block.float().sum(1) - 1).abs().max())]
    if not all(e < 0.02 for e in errors) or layer.weight.grad is None:
        raise SystemExit(f"bf16 results are wrong (relative errors {errors})")
    print("probe ok")
    print(f"{ACCELERATED_LINE}{torch.ops.mkldnn._is_mkldnn_bf16_supported()}")


def main(argv: list[str] | None = None) -> int:
    """``python -m joma_lib.base.cpu --child``: the probe's child process, which :func:`bf16_support` starts. The
    verdict is for readers in ``python -m joma_lib doctor`` (``--refresh``: probe again)."""
    args = sys.argv[1:] if argv is None else argv
    if args != ["--child"]:
        print(f"usage: python -m joma_lib.base.cpu --child (the bf16 probe's child process; got {args}); whether "
              "bf16 runs here: python -m joma_lib doctor [--refresh]", file=sys.stderr)
        return 2
    _child()
    return 0


if __name__ == "__main__":
    sys.exit(main())
