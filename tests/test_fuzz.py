"""Property-based fuzz of the public API (issue 13): hostile arguments give a clear error, never garbage.

For each public function of the theory modules and of ``lm.data``/``lm.metrics`` every argument is drawn either
from its valid range or from a list of hostile values (NaN, inf, negative or zero sizes, empty or wrongly shaped
arrays, wrong types). Every call must either return finite numbers or raise ``ValueError``/``TypeError`` whose
message names one of the function's arguments. Anything else (another exception from deep inside numpy or torch,
a NaN or inf in the result) fails the test, with the arguments hypothesis found.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from joma_lib import dynamics, embeddings, invariants, latent_tree, multilayer
from joma_lib.lm import data as lm_data
from joma_lib.lm import metrics as lm_metrics

HOSTILE_NUMBERS = [math.nan, math.inf, -math.inf, -1.0, 0.0, -1e308, 1e308]
HOSTILE_ARRAYS = [np.array([]), np.zeros((0, 3)), np.array([math.nan, 1.0]), np.array([[math.inf]]), np.ones((2, 3, 4)),
                  np.array(["a", "b"]), None, "text"]


def _num(low: float, high: float) -> st.SearchStrategy[Any]:
    """A valid float in [low, high], or a hostile number."""
    return st.one_of(st.floats(low, high, allow_nan=False), st.sampled_from(HOSTILE_NUMBERS))


def _int(low: int, high: int) -> st.SearchStrategy[Any]:
    return st.one_of(st.integers(low, high), st.sampled_from([-1, 0, 2.5, math.nan, True, "3"]))


def _arr(shape: tuple[int, ...], low: float = -3.0, high: float = 3.0) -> st.SearchStrategy[Any]:
    """A valid array of ``shape`` with entries in [low, high], or a hostile array."""
    valid = st.lists(st.floats(low, high, allow_nan=False), min_size=int(np.prod(shape)),
                     max_size=int(np.prod(shape))).map(lambda xs: np.asarray(xs, dtype=float).reshape(shape))
    return st.one_of(valid, valid, st.sampled_from(HOSTILE_ARRAYS))


def _tensor(shape: tuple[int, ...], low: float = -3.0, high: float = 3.0) -> st.SearchStrategy[Any]:
    return _arr(shape, low, high).map(lambda a: torch.as_tensor(a) if isinstance(a, np.ndarray) and a.dtype.kind == "f"
                                      else a)


def _attn() -> st.SearchStrategy[Any]:
    return st.sampled_from(["linear", "exp", "softmax", "Softmax", "", None])


#: function -> strategies of its arguments (by name)
CASES: dict[str, tuple[Callable[..., Any], dict[str, st.SearchStrategy[Any]]]] = {
    "dynamics.linear_closed_form": (dynamics.linear_closed_form, {"delta": _arr((4,)), "t": _arr((3,), 0, 2)}),
    "dynamics.linear_limits": (dynamics.linear_limits, {"delta": _arr((4,))}),
    "dynamics.blowup_time": (dynamics.blowup_time, {"delta": _arr((4,))}),
    "dynamics.erf_ratio": (dynamics.erf_ratio, {"v": _arr((4,)), "delta": _arr((4,))}),
    "dynamics.softmax_attention": (dynamics.softmax_attention, {"v": _arr((2, 5)), "temperature": _num(0.1, 10)}),
    "dynamics.row_entropy": (dynamics.row_entropy, {"a": _arr((2, 5), 0.0, 1.0)}),
    "dynamics.simulate_softmax_attention": (dynamics.simulate_softmax_attention, {
        "mu": _arr((5,), 0.5, 4), "v0": _num(0, 1), "eta": _num(1e-3, 2.0), "n_steps": _int(0, 200),
        "temperature": _num(0.1, 10)}),
    "dynamics.saliency_profile": (dynamics.saliency_profile, {
        "kind": st.sampled_from(["fig4", "linear", "geometric", "cubic"]), "n": _int(1, 50), "low": _num(0.1, 2),
        "high": _num(2, 5)}),
    "invariants.softmax_terms": (invariants.softmax_terms, {
        "V": _arr((4, 3)), "b_bar": _arr((4,), 0, 1), "temperature": _num(0.1, 5), "lr_ratio": _num(0.1, 5)}),
    "invariants.mlp_potential": (invariants.mlp_potential, {
        "V": _arr((4, 3)), "attention": _attn(), "temperature": _num(0.1, 5), "lr_ratio": _num(0.1, 5),
        "b_bar": _arr((4,), 0, 1)}),
    "invariants.attention_potential": (invariants.attention_potential, {"z": _arr((4,)), "attention": _attn()}),
    "invariants.normalized_correlation": (invariants.normalized_correlation, {"a": _arr((2, 4)), "b": _arr((2, 4))}),
    "multilayer.alignment_score": (multilayer.alignment_score, {
        "active": _arr((6, 2), 0, 1), "hidden": _arr((6, 3)), "min_corr": _num(-1, 1)}),
    "embeddings.orthonormal_embeddings": (embeddings.orthonormal_embeddings, {"d": _int(1, 12), "n_tokens": _int(1, 12)}),
    "embeddings.cosine_matrix": (embeddings.cosine_matrix, {"E": _arr((4, 3))}),
    "embeddings.jl_epsilon": (embeddings.jl_epsilon, {"d_values": _arr((3,), 1, 500), "n_tokens": _int(2, 100)}),
    "latent_tree.cooccurrence_closed_form": (latent_tree.cooccurrence_closed_form, {
        "rho": _num(0, 1), "H": _int(1, 6), "marginal": _num(0, 1)}),
    "latent_tree.cooccurrence_approx": (latent_tree.cooccurrence_approx, {"H": _int(1, 6), "L": _int(1, 6)}),
    "latent_tree.association_dynamics": (latent_tree.association_dynamics, {
        "mu": _arr((3,), 0.1, 3), "times": _arr((4,), 0, 5)}),
    "latent_tree.association_time": (latent_tree.association_time, {"mu": _num(0.1, 3), "fraction": _num(0.1, 0.99)}),
    "lm.data.split_documents": (lm_data.split_documents, {
        "docs": st.lists(st.text(max_size=5), max_size=8), "seed": _int(0, 5),
        "fractions": st.one_of(st.tuples(_num(0, 0.5), _num(0, 0.5)), st.sampled_from([(1.5, 0.5), (0.9,), None]))}),
    "lm.metrics.uniform_causal_entropy": (lm_metrics.uniform_causal_entropy, {"t": _int(1, 50)}),
    "lm.metrics.stable_rank": (lm_metrics.stable_rank, {"w": _tensor((4, 3))}),
    "lm.metrics.mean_attention_entropy": (lm_metrics.mean_attention_entropy, {"attn": _tensor((2, 4, 4), 0, 1)}),
}


def _finite(result: Any) -> bool:
    """Whether every number in ``result`` (arrays, tensors, tuples, named tuples, strings aside) is finite."""
    if isinstance(result, torch.Tensor):
        return bool(torch.isfinite(result).all()) if result.is_floating_point() else True
    if isinstance(result, (tuple, list)):
        return all(_finite(r) for r in result)
    if isinstance(result, str):
        return True
    arr = np.asarray(result)
    return bool(np.all(np.isfinite(arr))) if arr.dtype.kind in "fc" else True


#: functions whose results may be infinite or NaN by design (checked here: their errors still name an argument)
NONFINITE_BY_DESIGN = {
    "dynamics.linear_closed_form": "Theorem 2: v blows up at a finite time, after which it is inf",
    "dynamics.linear_limits": "Theorem 2: the limit of the most salient component is infinite",
    "dynamics.erf_ratio": "a NaN component of v marks a problem without a solution and is passed through",
}
@pytest.mark.parametrize("name", sorted(CASES))
def test_hostile_arguments_give_a_clear_error_or_a_finite_result(name):
    func, strategies = CASES[name]
    params = list(inspect.signature(func).parameters)

    @settings(max_examples=60, deadline=None, database=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
    @given(st.fixed_dictionaries(strategies))
    def check(kwargs: dict[str, Any]) -> None:
        try:
            with np.errstate(all="ignore"):
                result = func(**kwargs)
        except (ValueError, TypeError) as err:
            message = str(err)
            assert any(p in message for p in params), f"{name}: the message {message!r} names no argument of {params}"
            return
        assert name in NONFINITE_BY_DESIGN or _finite(result), f"{name}{kwargs} returned non-finite numbers: {result!r}"

    check()
