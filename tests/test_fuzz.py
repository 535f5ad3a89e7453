"""Property-based fuzz of the public API: hostile arguments give a clear error, never garbage.

For each public function family (the theory modules, ``lm.data``/``lm.metrics``/``lm.runs``, the language
model's ``forward``/``loss``, the widgets) every argument is drawn either from its valid range or from a
list of hostile values (NaN, inf, tiny and huge numbers, numbers given as text, negative, zero or huge sizes, empty
or wrongly shaped arrays, token ids outside the vocabulary, wrong dtypes and types, callbacks that return NaN or the
wrong shape). Every call must either return finite numbers or raise
``ValueError``/``TypeError`` whose message names one of the function's arguments and says what was given
(``got ...``). Anything else (another exception from deep inside numpy, torch or ipywidgets, a NaN or inf in the
result) fails the test, with the arguments hypothesis found; so does a call that runs past CALL_LIMIT_S seconds (work
that would not finish must be refused up front). A run's files get hostile bytes instead: any change must be refused,
naming the file.

The suite draws a fixed sample (derandomized, a few dozen cases a function). ``make fuzz`` draws fresh ones, many more
(``JOMA_FUZZ_EXAMPLES`` a function): a longer search that found cases the fixed sample never drew.
"""

from __future__ import annotations

import importlib
import inspect
import math
import os
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from joma_lib.theory import (attention_kinds, bags, block, combination_hierarchy, dynamics, embeddings, invariants,
                             latent_tree, nonlinear)
from joma_lib.base import io
from joma_lib.base import ode
from joma_lib.theory import saliency, softmax_dynamics
from joma_lib.base import device as device_module
from joma_lib.lm import config as lm_config
from joma_lib.lm import data as lm_data
from joma_lib.theory.table1 import model as table1_model
from joma_lib.lm import metrics as lm_metrics
from joma_lib.lm import model as lm_model
from joma_lib.lm import runs as lm_runs
from joma_lib.lm import presets
from joma_lib.lm.config import RunConfig
from joma_lib.theory.table1 import runs as table1_runs

#: examples a function for ``make fuzz`` (fresh draws each run); unset or empty: the suite's fixed sample
_FUZZ_ENV = os.environ.get("JOMA_FUZZ_EXAMPLES", "")
if _FUZZ_ENV and not (_FUZZ_ENV.isdigit() and int(_FUZZ_ENV) >= 1):
    raise ValueError(f"environment variable JOMA_FUZZ_EXAMPLES must be a positive integer, got {_FUZZ_ENV!r}")
FUZZ_EXAMPLES = int(_FUZZ_ENV or 0)
#: seconds one call may take before the test fails it
CALL_LIMIT_S = 60

HOSTILE_NUMBERS = [math.nan, math.inf, -math.inf, -1.0, 0.0, -1e308, 1e308, 1e-300, 1e9, "3", None]
HOSTILE_ARRAYS = [np.array([]), np.zeros((0, 3)), np.array([math.nan, 1.0]), np.array([[math.inf]]), np.ones((2, 3, 4)),
                  np.array(["a", "b"]), None, "text"]


def _num(low: float, high: float) -> st.SearchStrategy[Any]:
    """A valid float in [low, high], or a hostile number."""
    return st.one_of(st.floats(low, high, allow_nan=False), st.sampled_from(HOSTILE_NUMBERS))


def _int(low: int, high: int) -> st.SearchStrategy[Any]:
    return st.one_of(st.integers(low, high), st.sampled_from([-1, 0, 2.5, math.nan, True, "3", 10**12]))


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


def _ids(shape: tuple[int, ...], vocab: int) -> st.SearchStrategy[Any]:
    """Valid int64 token ids in ``[0, vocab)`` of ``shape``, or hostile ones: out of the vocabulary, negative, of a
    float or bool dtype, of another shape (also too long), empty, not a tensor."""
    n = int(np.prod(shape))
    valid = st.lists(st.integers(0, vocab - 1), min_size=n, max_size=n).map(
        lambda xs: torch.tensor(xs, dtype=torch.int64).reshape(shape))
    hostile = st.sampled_from([torch.full(shape, vocab), torch.full(shape, -1), torch.zeros(shape),
                               torch.zeros(shape, dtype=torch.bool), torch.zeros((2, 40), dtype=torch.int64),
                               torch.zeros((3,), dtype=torch.int64), torch.zeros((2, 0), dtype=torch.int64),
                               np.zeros(shape, dtype=np.int64), [1, 2, 3], None])
    return st.one_of(valid, valid, hostile)


SPEC = block.BlockSpec(n_context=4, n_classes=3, d=8, n_hidden=2, attention="softmax")
BAGS = bags.dirichlet_bags(4, 3, 6, seed=0)[0]
TINY_LM = lm_model.TransformerLM(vocab_size=7, n_layers=1, d=8, d_ff=8, dropout=0.0, max_len=6).eval()
RUN = {"minibatch": np.arange(3), "val_loss": np.ones(3), "train_loss": np.ones(3), "attn_entropy": np.ones((3, 1)),
       "stable_rank": np.ones((3, 1))}
RUN_CONFIG = RunConfig(n_layers=1)
MIXTURE = nonlinear.toy_mixture()
LABELS = bags.dirichlet_bags(4, 3, 6, seed=0)[1]
STATE = block.init_state(SPEC, [0])
HIERARCHY = combination_hierarchy.CombinationHierarchy(n_vocab=20, seq_len=8, level_sizes=(4,), n_class=4)
#: derivatives for the ODE solver: a good one, one that is NaN at t = 0, one of the wrong shape, one that is not an
#: array
RHS: dict[str, Callable[..., Any]] = {"decay": lambda y, rows: -y, "nan": lambda y, rows: np.full_like(y, np.nan),
                                     "shape": lambda y, rows: y[:, :1], "none": lambda y, rows: None}


def _widget(make: Callable[..., Any]) -> Callable[..., Any]:
    """A widget built with ``kwargs`` as its initial values (the result: its current control values)."""
    return lambda **kwargs: make(**kwargs).values


#: function -> strategies of its arguments (by name)
CASES: dict[str, tuple[Callable[..., Any], dict[str, st.SearchStrategy[Any]]]] = {
    "dynamics.linear_closed_form": (dynamics.linear_closed_form, {"saliency": _arr((4,)), "t": _arr((3,), 0, 2)}),
    "dynamics.linear_limits": (dynamics.linear_limits, {"saliency": _arr((4,))}),
    "dynamics.blowup_time": (dynamics.blowup_time, {"saliency": _arr((4,))}),
    "dynamics.erf_ratio": (dynamics.erf_ratio, {"v": _arr((4,)), "saliency": _arr((4,))}),
    "softmax_dynamics.softmax_attention": (softmax_dynamics.softmax_attention, {
        "v": _arr((2, 5)), "temperature": _num(0.1, 10)}),
    "softmax_dynamics.row_entropy": (softmax_dynamics.row_entropy, {"b": _arr((2, 5), 0.0, 1.0)}),
    "softmax_dynamics.simulate_softmax_attention": (softmax_dynamics.simulate_softmax_attention, {
        "mu": _arr((5,), 0.5, 4), "v0": _num(0, 1), "eta": _num(1e-3, 2.0), "n_steps": _int(0, 200),
        "temperature": _num(0.1, 10)}),
    "softmax_dynamics.saliency_profile": (softmax_dynamics.saliency_profile, {
        "kind": st.sampled_from(["fig4", "linear", "geometric", "cubic"]), "n": _int(1, 50), "low": _num(0.1, 2),
        "high": _num(2, 5)}),
    "invariants.softmax_terms": (invariants.softmax_terms, {
        "V": _arr((4, 3)), "b_bar": _arr((4,), 0, 1), "temperature": _num(0.1, 5), "lr_ratio": _num(0.1, 5)}),
    "invariants.mlp_potential": (invariants.mlp_potential, {
        "V": _arr((4, 3)), "attention": _attn(), "temperature": _num(0.1, 5), "lr_ratio": _num(0.1, 5),
        "b_bar": _arr((4,), 0, 1)}),
    "invariants.attention_potential": (invariants.attention_potential, {"z": _arr((4,)), "attention": _attn()}),
    "invariants.normalized_correlation": (invariants.normalized_correlation, {"a": _arr((2, 4)), "b": _arr((2, 4))}),
    "table1_model.alignment_score": (table1_model.alignment_score, {
        "active": _arr((6, 2), 0, 1), "hidden": _arr((6, 3)), "min_corr": _num(0, 1)}),
    "embeddings.orthonormal_embeddings": (embeddings.orthonormal_embeddings, {
        "d": _int(1, 12), "n_tokens": _int(1, 12)}),
    "embeddings.cosine_matrix": (embeddings.cosine_matrix, {"E": _arr((4, 3))}),
    "embeddings.jl_epsilon": (embeddings.jl_epsilon, {"d_values": _arr((3,), 1, 500), "n_tokens": _int(2, 100)}),
    "latent_tree.cooccurrence_closed_form": (latent_tree.cooccurrence_closed_form, {
        "rho": _num(0, 1), "H": _int(1, 6), "marginal": _num(0, 1)}),
    "latent_tree.cooccurrence_approx": (latent_tree.cooccurrence_approx, {"H": _int(1, 6), "L": _int(1, 6)}),
    "latent_tree.approximation_error_bound": (latent_tree.approximation_error_bound, {
        "H": st.one_of(_int(0, 6), _arr((3,), 0, 6)), "L": _int(1, 6)}),
    "latent_tree.association_dynamics": (latent_tree.association_dynamics, {
        "mu": _arr((3,), 0.1, 3), "times": _arr((4,), 0, 5)}),
    "latent_tree.association_time": (latent_tree.association_time, {"mu": _num(0.1, 3), "fraction": _num(0.1, 0.99)}),
    "lm.data.split_documents": (lm_data.split_documents, {
        "docs": st.lists(st.text(max_size=5), max_size=8), "seed": _int(0, 5),
        "fractions": st.one_of(st.tuples(_num(0, 0.5), _num(0, 0.5)), st.sampled_from([(1.5, 0.5), (0.9,), None]))}),
    "lm.metrics.uniform_causal_entropy": (lm_metrics.uniform_causal_entropy, {"t": _int(1, 50)}),
    "lm.metrics.stable_rank": (lm_metrics.stable_rank, {"w": _tensor((4, 3))}),
    "lm.metrics.mean_attention_entropy": (lm_metrics.mean_attention_entropy, {"attn": _tensor((2, 4, 4), 0, 1)}),
    # the families of the second hostile probe (tests/test_bad_input.py)
    "invariants.mean_attention": (lambda z, X: invariants.mean_attention(SPEC, z, X), {
        "z": _arr((2, 4)), "X": _arr((4, 6), 0, 1)}),
    "dynamics.integrate_nonlinear": (dynamics.integrate_nonlinear, {
        "mu": _arr((3,), 0.5, 4), "t_eval": st.one_of(_arr((3,), 0, 5), st.sampled_from([[0, 1e9], [0, 1e307]])),
        "v0": _num(0, 0.4)}),
    "dynamics.nonlinear_by_quadrature": (dynamics.nonlinear_by_quadrature, {
        "mu": st.one_of(_arr((3,), 0.5, 4), _arr((3,), 30, 45)),
        "t_eval": st.one_of(_arr((3,), 0, 5), st.sampled_from([[0, 1e9], [0, 1e307]])), "v0": _num(0, 0.4)}),
    "combination_hierarchy.of_labels": (HIERARCHY.of_labels, {
        "labels": st.one_of(st.lists(st.integers(0, 3), min_size=1, max_size=5).map(np.array),
                            st.sampled_from([np.array([-1]), np.array([4]), np.array([1.5]), [[0]], "0", None]))}),
    "invariants.invariant_constant": (invariants.invariant_constant, {
        "z": st.one_of(_arr((4,)), _arr((5,))), "V": st.one_of(_arr((4, 3)), _arr((5, 3))), "attention": _attn(),
        "temperature": _num(0.1, 5), "lr_ratio": _num(0.1, 5)}),
    "latent_tree.attention_from_association": (latent_tree.attention_from_association, {
        "mu": _arr((4,), 0, 3), "v": st.one_of(_arr((4,)), _arr((2, 4)))}),
    "embeddings.random_embedding_coherence": (embeddings.random_embedding_coherence, {
        "d_values": st.one_of(_arr((2,), 1, 40), st.sampled_from([[4, 2.5], [np.nan], [3, 0]])), "n_tokens": _int(2, 8),
        "n_draws": _int(1, 3)}),
    "lm.data.batchify": (lm_data.batchify, {"ids": _ids((12,), 50), "n_streams": _int(1, 5)}),
    "lm.runs.collect": (lm_runs.collect, {
        "runs": st.sampled_from([[RUN], [], [RUN, RUN], [{"minibatch": np.arange(3)}], [None], None]),
        "configs": st.sampled_from([[RUN_CONFIG], [], [RUN_CONFIG, RUN_CONFIG], ["config"], None])}),
    "lm.model.TransformerLM.forward": (lambda tokens: TINY_LM(tokens)[0], {"tokens": _ids((2, 5), 7)}),
    "lm.model.TransformerLM.loss": (TINY_LM.loss, {"tokens": _ids((2, 5), 7), "targets": _ids((2, 5), 7)}),
    # the families of the third hostile probe (tests/test_bad_input.py): sizes, empty inputs, text, callbacks
    "block.train": (lambda steps, record_every: block.train(SPEC, BAGS, LABELS, STATE, steps=steps,
                                                            record_every=record_every).loss,
                    {"steps": _int(1, 5), "record_every": _int(1, 3)}),
    "ode.integrate_autonomous": (lambda rhs, y0, t_eval: ode.integrate_autonomous(RHS[rhs], y0, t_eval), {
        "rhs": st.sampled_from(sorted(RHS)), "y0": _arr((2, 3), 0.1, 1), "t_eval": _arr((3,), 0, 1)}),
    "dynamics.convergence_rate_ratio": (lambda mu, j, k: dynamics.convergence_rate_ratio(mu, [0.5, 1.0], j, k)[0], {
        "mu": _arr((3,), 0.5, 2), "j": _int(0, 2), "k": _int(0, 2)}),
    "lm.data.tokenize": (lm_data.tokenize, {"line": st.one_of(st.text(max_size=20), st.sampled_from([None, 3, b"x"]))}),
    "lm.data.Vocab.build": (lambda lines: lm_data.Vocab.build(lines).itos, {
        "lines": st.one_of(st.lists(st.text(max_size=8), max_size=4), st.sampled_from([[None], [3]]))}),
    "lm.model.causal_mask": (lambda t: lm_model.causal_mask(t).nan_to_num(neginf=0.0), {"t": _int(1, 8)}),
    "lm.config.sweep_configs": (lambda layers, lrs, seeds: len(lm_config.sweep_configs(RUN_CONFIG, layers, lrs, seeds)),
                                {"layers": st.sampled_from([[1, 2], [], [0], "1", None]),
                                 "lrs": st.sampled_from([[1e-3], [], [-1.0], [math.nan]]),
                                 "seeds": st.sampled_from([[1], [], [-1]])}),
    "table1.runs.seed_std": (table1_runs.seed_std, {"values": st.one_of(_arr((3,), 0, 1), _arr((1,), 0, 1))}),
    "io.fetch_url": (lambda url, timeout, deadline: io.fetch_url(url, io.Path("/nonexistent/f"), timeout, deadline), {
        "url": st.sampled_from(["file:///etc/passwd", "ftp://x/y", "", None, "/etc/passwd"]),
        "timeout": _num(0.1, 5), "deadline": _num(0.1, 5)}),
    "bags.dirichlet_bags": (lambda **kw: bags.dirichlet_bags(**kw)[0], {
        "n_context": _int(1, 6), "n_classes": _int(1, 4), "n_samples": _int(1, 8), "concentration": _num(0.1, 5),
        "signal": _num(0, 5), "seed": _int(0, 5)}),
    "bags.gaussian_or_random_bags": (lambda **kw: bags.gaussian_or_random_bags(**kw)[0], {
        "variant": st.sampled_from(["gaussian", "random", "", None]), "n_distinct": _int(1, 6), "n_common": _int(1, 6),
        "n_classes": _int(1, 6), "width": _num(1, 40), "seed": _int(0, 5)}),
    "nonlinear.toy_mixture": (lambda d, nu: nonlinear.toy_mixture(d, nu).centres, {
        "d": _int(3, 12), "nu": _num(0.01, 1)}),
    "saliency.sample_tokens": (lambda n_samples, grad_noise: saliency.sample_tokens(
        saliency.toy_token_model(), n_samples, grad_noise)[2], {"n_samples": _int(1, 50), "grad_noise": _num(0, 2)}),
    "attention_kinds.attention_kind": (lambda attention: attention_kinds.attention_kind(attention).name,
                                       {"attention": _attn()}),
    "device.resolve_device": (lambda device: str(device_module.resolve_device(device)), {
        "device": st.sampled_from(["cpu", "auto", "tpu", "", 3, "CPU"])}),
    "device.pinned_threads": (lambda threads: _pinned(threads), {"threads": _int(1, 4)}),
    "nonlinear.expected_relu_update": (lambda v, bias: nonlinear.expected_relu_update(v, bias, MIXTURE), {
        "v": st.one_of(_arr((8,)), _arr((2, 8)), _arr((5,))), "bias": _num(-1, 1)}),
    "nonlinear.sphere_trajectories": (lambda v0, t_eval, bias: nonlinear.sphere_trajectories(MIXTURE, v0, t_eval, bias),
                                      {"v0": st.one_of(_arr((1, 8), 0.1, 1), _arr((3,))), "t_eval": _arr((3,), 0, 1),
                                       "bias": _num(-1, 0)}),
    "saliency.salient_token_dynamics": (lambda n_times, min_time_left: saliency.salient_token_dynamics(
        saliency.toy_token_model(), n_times, min_time_left).attention,
        {"n_times": _int(2, 50), "min_time_left": _num(1e-6, 1e-2)}),
    "lm.presets.preset_configs": (lambda preset, seeds: len(presets.preset_configs(preset, seeds)), {
        "preset": st.sampled_from(["rerun-full", "paper", "nope", "", None]),
        "seeds": st.sampled_from([None, [1], [], [-1], "1"])}),
}


def _pinned(threads: Any) -> int:
    with device_module.pinned_threads(threads):
        return torch.get_num_threads()

#: the widgets, built with hostile initial values (needs ipywidgets: imported lazily)
WIDGETS: dict[str, tuple[str, str, dict[str, st.SearchStrategy[Any]]]] = {
    "widgets.theorem4.ModifiedMLPWidget": ("joma_lib.chapters.theorem4.widget", "ModifiedMLPWidget", {
        "n": _int(2, 30), "temperature": _num(0.25, 10), "eta": _num(0.005, 0.1), "n_steps": _int(100, 300),
        "profile": st.sampled_from(["fig4", "linear", "cubic", None])}),
    "widgets.hierarchy.CooccurrenceWidget": ("joma_lib.chapters.hierarchy.widget", "CooccurrenceWidget", {
        "tree_height": _int(2, 20), "height": _int(1, 20), "rho": _num(0.05, 1),
        "tie_rho": st.sampled_from([True, 1, "x"])}),
    "widgets.theorem1.theorem1_live_widget": ("joma_lib.chapters.theorem1.widget", "theorem1_live_widget", {
        "attention": _attn(), "lr_ratio": st.sampled_from([0.25, 1.0, 3.0, math.nan]), "seed": _int(0, 9)}),
    "widgets.theorem3.RestingPointWidget": ("joma_lib.chapters.theorem3.widget", "RestingPointWidget", {
        "bias": _num(-1.2, 0.4), "weight_decay": _num(0.1, 1.5), "nu": _num(0.05, 0.5), "n_starts": _int(2, 4),
        "t_max": _num(10, 30)}),
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
}
def _params(func: Callable[..., Any], strategies: dict[str, Any]) -> list[str]:
    """The argument names an error message may name (a lambda wrapper has those of its strategies)."""
    return list(inspect.signature(func).parameters) + list(strategies)


@pytest.mark.parametrize("name", sorted(CASES) + sorted(WIDGETS))
def test_hostile_arguments_give_a_clear_error_or_a_finite_result(name, time_limit):
    if name in WIDGETS:
        module, attr, strategies = WIDGETS[name]
        func = _widget(getattr(importlib.import_module(module), attr))
    else:
        func, strategies = CASES[name]
    params = _params(func, strategies)

    @settings(max_examples=FUZZ_EXAMPLES or (25 if name in WIDGETS else 60), deadline=None, database=None,
              derandomize=not FUZZ_EXAMPLES, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
    @given(st.fixed_dictionaries(strategies))
    def check(kwargs: dict[str, Any]) -> None:
        try:
            with np.errstate(all="ignore"), time_limit(CALL_LIMIT_S, TimeoutError(f"ran past {CALL_LIMIT_S} s")):
                result = func(**kwargs)
        except (ValueError, TypeError) as err:
            message = str(err)
            assert any(p in message for p in params), f"{name}: the message {message!r} names no argument of {params}"
            assert "got" in message, f"{name}: the message {message!r} does not say what was given"
            return
        assert name in NONFINITE_BY_DESIGN or _finite(result), f"{name}{kwargs} returned non-finite numbers: {result!r}"

    check()


@settings(max_examples=FUZZ_EXAMPLES or 40, deadline=None, database=None, derandomize=not FUZZ_EXAMPLES)
@given(st.lists(st.tuples(st.floats(0, 1, exclude_max=True), st.integers(1, 255)), min_size=1, max_size=8),
       st.sampled_from(["checkpoint", "result"]))
def test_any_damage_to_a_run_file_is_refused_naming_it(tmp_path_factory, flips, kind):
    """Hostile bytes: any change of a checkpoint or a result (bytes XOR-ed anywhere) is refused, naming the file;
    never resumed or collected as if it were fine."""
    from joma_lib.base.io import DamagedFileError

    folder = tmp_path_factory.mktemp("run")
    if kind == "checkpoint":
        path = folder / "checkpoint.pt"
        lm_runs.save_checkpoint(path, {"config": {}, "model": {"w": torch.arange(64.0)}, "optimizer": {}, "rng": {},
                                       "history": {}, "step": 4})
    else:
        path = folder / "result.npz"
        lm_runs.write_results(path, RUN, {"config": {}})
    original = path.read_bytes()
    data = bytearray(original)
    for at, mask in flips:
        data[int(at * len(data))] ^= mask
    assume(bytes(data) != original)  # two flips of one byte may cancel
    path.write_bytes(bytes(data))
    with pytest.raises((ValueError, DamagedFileError), match=f"{path.name} is damaged"):
        if kind == "checkpoint":
            lm_runs.load_checkpoint(path)
        else:
            lm_runs.read_result(path)
