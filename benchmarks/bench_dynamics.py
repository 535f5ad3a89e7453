"""Speed of the Theorem 2/4 closed forms and vectorised integrators against scipy's solve_ivp.

Each comparison solves the *same* problems (a batch of random saliency / target vectors,
outputs at the same times) and reports time and accuracy side by side:

* Theorem 2: ``linear_closed_form`` and the batched Dormand-Prince ``integrate_linear`` vs
  ``solve_ivp`` (RK45 and DOP853, one call per problem, same rtol/atol as ours) on
  ``dv/dt = Delta o exp(v^2/2)`` up to 0.999 t*; errors against the closed form (whose own
  error is shown as the relative residual of ``sqrt(pi/2) erf(v/sqrt 2) = Delta t``). Every
  integrator is less accurate than the closed form, so the speed ratio is at *better* accuracy.
* Theorem 4: ``nonlinear_by_quadrature`` (time as an integral of the state, inverted) and the
  batched ``integrate_nonlinear`` (``omega = ln 1/delta`` form) vs ``solve_ivp`` on the same ``omega`` ODE;
  errors against a DOP853 run at rtol 1e-13 (the quadrature is the more accurate, so its speed-up
  is at better than equal accuracy).
* Figure 4: one batched ``simulate_softmax_attention`` call vs a loop of single runs.
* The live widget: redraw time per control change (wall clock and CPU time).

Run: ``python benchmarks/bench_dynamics.py [--batch 40] [--repeats 3]``. CPU only, one thread
is enough (``OMP_NUM_THREADS=1``). The numbers are also stored in ``joma_lib/kit/benchmark_results/dynamics.json``
(the Performance page).
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from collections.abc import Callable

import numpy as np
from scipy.integrate import solve_ivp
from scipy.special import erf

from joma_lib.theory.dynamics import (blowup_time, integrate_linear, integrate_nonlinear, linear_closed_form,
                                      nonlinear_by_quadrature)
from joma_lib.kit.benchmarks import save_results
from joma_lib.theory.softmax_dynamics import fig4_mu, simulate_softmax_attention

RTOL, ATOL = 1e-10, 1e-12


def best_time(fn: Callable[[], object], repeats: int) -> float:
    """Best CPU time of ``repeats`` calls, in seconds (the process's CPU time: robust on a shared machine)."""
    times = []
    for _ in range(repeats):
        start = time.process_time()
        fn()
        times.append(time.process_time() - start)
    return min(times)


def max_rel_err(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.max(np.abs(a - b) / np.maximum(np.abs(b), 1e-12)))


def scipy_batch(rhs: Callable[[np.ndarray, np.ndarray], np.ndarray], y0: np.ndarray, params: np.ndarray,
                t_eval: np.ndarray, method: str, rtol: float = RTOL, atol: float = ATOL) -> np.ndarray:
    """One solve_ivp call per problem (row of ``params``); result ``(T, B, n)``."""
    out = np.empty((t_eval.size,) + params.shape)
    for i, p in enumerate(params):
        sol = solve_ivp(lambda _, y, p=p: rhs(y, p), (0.0, t_eval[-1]), y0[i], method=method, t_eval=t_eval,
                        rtol=rtol, atol=atol)
        out[:, i] = sol.y.T
    return out


def bench_theorem2(batch: int, repeats: int) -> dict[str, float]:
    rng = np.random.default_rng(0)
    delta = rng.uniform(-1, 1, (batch, 5))
    delta[:, 0] = 1.0  # common blow-up time sqrt(pi/2), so every problem shares t_eval
    t = np.linspace(0, 0.999, 50) * blowup_time(delta[0])
    exact = linear_closed_form(delta, t)
    t_closed = best_time(lambda: linear_closed_form(delta, t), max(repeats, 20))
    t_ours = best_time(lambda: integrate_linear(delta, t), repeats)
    err_ours = max_rel_err(integrate_linear(delta, t), exact)
    print(f"\nTheorem 2: {batch} problems x 5 components, 50 output times up to 0.999 t*, rtol={RTOL:g}, atol={ATOL:g}")
    print(f"  {'method':<34}{'time [ms]':>11}{'max rel err':>13}{'closed form faster by':>24}")
    # the closed form's own error: residual of sqrt(pi/2) erf(v/sqrt2) = Delta t (it is the reference for the rest)
    dt = delta * t[:, None, None]
    resid = np.abs(np.sqrt(np.pi / 2) * erf(exact / np.sqrt(2)) - dt)[1:] / np.abs(dt[1:])
    print(f"  {'closed form (erfinv)':<34}{t_closed * 1e3:>11.3f}{resid.max():>13.1e}{'':>24}")
    print(f"  {'integrate_linear (batched DP5)':<34}{t_ours * 1e3:>11.1f}{err_ours:>13.1e}{t_ours / t_closed:>23.0f}x")
    out = {"closed_form_ms": t_closed * 1e3, "batched_ms": t_ours * 1e3, "batched_err": err_ours}
    for method in ("RK45", "DOP853"):
        def run(method: str = method) -> np.ndarray:
            return scipy_batch(lambda y, p: p * np.exp(0.5 * y * y), np.zeros_like(delta), delta, t, method)
        elapsed = best_time(run, repeats)
        out[f"solve_ivp_{method}_ms"] = elapsed * 1e3
        out[f"solve_ivp_{method}_err"] = max_rel_err(run(), exact)
        print(f"  {'solve_ivp ' + method + ' (loop)':<34}{elapsed * 1e3:>11.1f}{out[f'solve_ivp_{method}_err']:>13.1e}"
              f"{elapsed / t_closed:>23.0f}x   (batched DP5 faster by {elapsed / t_ours:.1f}x)")
    return out


def bench_theorem4(batch: int, repeats: int) -> dict[str, float]:
    rng = np.random.default_rng(1)
    mu = rng.uniform(1, 4, (batch, 5))
    t = np.linspace(0, 50, 40)

    def omega_rate(omega: np.ndarray, m: np.ndarray) -> np.ndarray:
        return np.exp(0.5 * (m * (1.0 - np.exp(-omega))) ** 2)

    ref = scipy_batch(omega_rate, np.zeros_like(mu), mu, t, "DOP853", rtol=1e-13, atol=1e-14)
    t_ours = best_time(lambda: integrate_nonlinear(mu, t), repeats)
    err_ours = max_rel_err(integrate_nonlinear(mu, t).omega[1:], ref[1:])
    print(f"\nTheorem 4: {batch} problems x 5 components (mu ~ U[1,4]), omega = ln 1/delta up to t = 50, rtol={RTOL:g}")
    print(f"  {'method':<34}{'time [ms]':>11}{'max rel err':>13}{'batched DP5 faster by':>24}")
    print(f"  {'integrate_nonlinear (batched DP5)':<34}{t_ours * 1e3:>11.1f}{err_ours:>13.1e}{'':>24}")
    t_quad = best_time(lambda: nonlinear_by_quadrature(mu, t), max(repeats, 20))
    err_quad = max_rel_err(nonlinear_by_quadrature(mu, t).omega[1:], ref[1:])
    print(f"  {'nonlinear_by_quadrature':<34}{t_quad * 1e3:>11.1f}{err_quad:>13.1e}"
          f"   (stepper / quadrature: {t_ours / t_quad:.0f}x)")
    out = {"batched_ms": t_ours * 1e3, "batched_err": err_ours, "quadrature_ms": t_quad * 1e3,
           "quadrature_err": err_quad}
    for method in ("RK45", "DOP853"):
        def run(method: str = method) -> np.ndarray:
            return scipy_batch(omega_rate, np.zeros_like(mu), mu, t, method)
        elapsed = best_time(run, repeats)
        out[f"solve_ivp_{method}_ms"] = elapsed * 1e3
        out[f"solve_ivp_{method}_err"] = max_rel_err(run()[1:], ref[1:])
        print(f"  {'solve_ivp ' + method + ' (loop)':<34}{elapsed * 1e3:>11.1f}{out[f'solve_ivp_{method}_err']:>13.1e}"
              f"{elapsed / t_ours:>23.1f}x   (quadrature faster by {elapsed / t_quad:.0f}x)")
    return out


def bench_fig4(batch: int, repeats: int) -> dict[str, float]:
    mus = np.stack([fig4_mu(s) for s in range(batch)])
    t_batch = best_time(lambda: simulate_softmax_attention(mus, record_every=50), repeats)
    t_loop = best_time(lambda: [simulate_softmax_attention(m, record_every=50) for m in mus], 1)
    print(f"\nFigure 4 dynamics: {batch} settings x 5000 steps")
    print(f"  one batched call {t_batch * 1e3:.0f} ms, loop of single runs {t_loop * 1e3:.0f} ms "
          f"-> batching faster by {t_loop / t_batch:.1f}x")
    return {"batched_ms": t_batch * 1e3, "loop_ms": t_loop * 1e3}


def bench_widget(n_changes: int) -> dict[str, float]:
    from joma_lib.chapters.theorem4.widget import ModifiedMLPWidget

    explorer = ModifiedMLPWidget()
    changes = [dict(temperature=2.0), dict(nonlinear=False), dict(n=20), dict(profile="geometric"),
               dict(high=5.0), dict(nonlinear=True), dict(eta=0.05), dict(profile="fig4", n=10, high=4.0,
                                                                          eta=0.02, temperature=3.0)]
    wall, cpu = [], []
    for i in range(n_changes):
        c0 = time.process_time()
        wall.append(explorer.update(**changes[i % len(changes)]))
        cpu.append((time.process_time() - c0) * 1e3)
    print(f"\nWidget redraw (5000 steps by default; {n_changes} control changes)")
    print(f"  wall clock: median {np.median(wall):.0f} ms, 90th percentile {np.percentile(wall, 90):.0f} ms")
    print(f"  CPU time:   median {np.median(cpu):.0f} ms, 90th percentile {np.percentile(cpu, 90):.0f} ms")
    return {"wall_median_ms": float(np.median(wall)), "wall_p90_ms": float(np.percentile(wall, 90)),
            "cpu_median_ms": float(np.median(cpu)), "cpu_p90_ms": float(np.percentile(cpu, 90))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=40, help="problems per comparison")
    parser.add_argument("--repeats", type=int, default=3, help="timing repeats (best is kept)")
    parser.add_argument("--widget-changes", type=int, default=24)
    parser.add_argument("--no-write", action="store_true",
                        help="print only; do not update joma_lib/kit/benchmark_results/")
    args = parser.parse_args()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, load average {load:.1f}; "
          f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}")
    results = {"settings": vars(args), "theorem2": bench_theorem2(args.batch, args.repeats),
               "theorem4": bench_theorem4(args.batch, args.repeats), "fig4": bench_fig4(args.batch, args.repeats),
               "modified_mlp_widget": bench_widget(args.widget_changes)}
    if not args.no_write:
        save_results("dynamics", results)


if __name__ == "__main__":
    main()
