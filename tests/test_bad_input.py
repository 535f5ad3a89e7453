"""Bad input to the public API: a ValueError naming the argument, never garbage.

The cases found by probing by hand; ``tests/test_fuzz.py`` searches for more.
"""

from __future__ import annotations

import importlib

import numpy as np
import pytest
import torch

from joma_lib.theory import bags, block, dynamics, embeddings, invariants, latent_tree, softmax_dynamics
from joma_lib.base import ode
from joma_lib.lm import data as lm_data
from joma_lib.theory.table1 import model as table1_model
from joma_lib.lm import metrics as lm_metrics
from joma_lib.lm import runs as lm_runs
from joma_lib.lm.config import RunConfig
from joma_lib.lm.model import TransformerLM
from joma_lib.base.startup import ENV_VARS


def test_alignment_score_refuses_nan_instead_of_scoring_zero():
    active = np.array([[1, 0], [0, 1], [1, 1]], dtype=float)
    hidden = np.array([[0.5, np.nan], [0.1, 0.2], [0.9, 0.3]])
    with pytest.raises(ValueError, match="hidden must contain only finite numbers"):
        table1_model.alignment_score(active, hidden)
    with pytest.raises(ValueError, match="active must contain only finite numbers"):
        table1_model.alignment_score(np.where(active == 1, np.inf, 0.0), np.ones((3, 2)))


def test_softmax_terms_refuses_mismatched_shapes():
    V = np.ones((4, 3))  # M_C = 4 tokens, K = 3 hidden units
    with pytest.raises(ValueError, match="b_bar .* must broadcast to .*4"):
        invariants.softmax_terms(V, np.full(5, 0.25))
    with pytest.raises(ValueError, match="b_bar must contain only finite numbers"):
        invariants.softmax_terms(V, np.full(4, np.nan))
    a, b = invariants.softmax_terms(V, np.full(4, 0.25))
    assert a.shape == b.shape == (4,)


def test_softmax_dynamics_refuse_a_step_or_temperature_that_cannot_work():
    """eta > 2 overshoots the target (refused at once, not later blaming ``v``); T below 1e-3 overflows."""
    with pytest.raises(ValueError, match=r"eta must be in \(0, 2\], got 1000000.0"):
        softmax_dynamics.simulate_softmax_attention(softmax_dynamics.fig4_mu(), eta=1e6, n_steps=300_000)
    with pytest.raises(ValueError, match=r"temperature must be in \[0.001, inf\), got 1e-12"):
        softmax_dynamics.simulate_softmax_attention(softmax_dynamics.fig4_mu(), temperature=1e-12, n_steps=10)
    with pytest.raises(ValueError, match=r"temperature must be in \[0.001, inf\), got 1e-300"):
        softmax_dynamics.softmax_attention(np.ones((2, 3)), 1e-300)


@pytest.mark.parametrize("n_steps", [64, 100])
def test_diverging_softmax_dynamics_name_the_parameters_to_reduce(n_steps):
    """Huge saliencies in the linear update overflow within any step count (checked at the last step too)."""
    with pytest.raises(ValueError, match="diverged at step .*eta"):
        softmax_dynamics.simulate_softmax_attention(np.array([1e153, 2e153]), eta=2.0, n_steps=n_steps, nonlinear=False)


@pytest.mark.parametrize("fractions, message", [
    ((1.5, 0.5), "fractions"), ((0.5, 0.6), "fractions"), ((-0.1, 0.5), "fractions"), ((0.9,), "fractions"),
    ((np.nan, 0.1), "fractions"),
])
def test_split_documents_refuses_impossible_fractions(fractions, message):
    with pytest.raises(ValueError, match=message):
        lm_data.split_documents([f"doc {i}" for i in range(20)], 0, fractions)


def test_block_train_refuses_nan_weights_and_reports_divergence():
    spec = block.BlockSpec(n_context=4, n_classes=3, d=8, n_hidden=2)
    X, y = bags.dirichlet_bags(4, 3, 12, seed=0)
    state = block.init_state(spec, [0])
    bad = block.BlockState(np.full_like(state.W, np.nan), state.z, state.W_out)
    with pytest.raises(ValueError, match="state.W must contain only finite numbers"):
        block.train(spec, X, y, bad, steps=3)
    with pytest.raises(ValueError, match="diverged.*lr"):
        block.train(spec, X, y, state, steps=50, lr_w=1e12, lr_z=1e12)


@pytest.mark.parametrize("call, message", [
    (lambda: softmax_dynamics.simulate_softmax_attention(softmax_dynamics.fig4_mu(), eta=float("nan"), n_steps=10),
     "eta"),
    (lambda: softmax_dynamics.simulate_softmax_attention(softmax_dynamics.fig4_mu(), temperature=0.0, n_steps=10),
     "temperature"),
    (lambda: softmax_dynamics.saliency_profile("linear", 5, low=3.0, high=1.0), "high"),
    (lambda: __import__("joma_lib.theory.latent_tree").theory.latent_tree.HBLT(tree_height=0), "tree_height"),
])
def test_what_the_widgets_call_refuses_values_it_cannot_honour(call, message):
    """The widgets' computations raise instead of silently changing a value (the widgets show the message)."""
    with pytest.raises(ValueError, match=message):
        call()



def _tiny_lm() -> TransformerLM:
    return TransformerLM(vocab_size=7, n_layers=1, d=8, d_ff=8, dropout=0.0, max_len=6)


#: a second, hostile probe: each call that was silent (garbage out) or deep (an error from inside numpy, torch
#: or ipywidgets) and the message it gets now, naming the argument, what it must be and what it was
SECOND_PROBE = {
    "mean_attention(z=inf)": (lambda: invariants.mean_attention(
        block.BlockSpec(n_context=4, n_classes=3, d=8, n_hidden=2), np.full((2, 4), np.inf),
        bags.dirichlet_bags(4, 3, 5, seed=0)[0]), "z must contain only finite numbers, got"),
    "erf_ratio(v=nan)": (lambda: dynamics.erf_ratio([np.nan, 1.0], [1.0, 2.0]), "v must contain no NaN.*got"),
    "erf_ratio(saliency=5e-324)": (lambda: dynamics.erf_ratio([0.0, 1.0], [1.0, 5e-324]),
                                   "saliency is too small .*got a smallest |saliency| of 4.94066e-324"),
    "batchify(too few ids)": (lambda: lm_data.batchify(torch.zeros(3, dtype=torch.int64), 2),
                              r"ids must hold at least 2 tokens per stream \(2 \* n_streams = 4\), got 3 tokens"),
    "softmax_attention(T=1e-300)": (lambda: softmax_dynamics.softmax_attention(np.ones((2, 3)), 1e-300),
                                    r"temperature must be in \[0.001, inf\), got 1e-300"),
    "integrate_nonlinear(t=1e307)": (lambda: dynamics.integrate_nonlinear([1.0, 3.0], [0.0, 1e307], v0=0.05),
                                     r"leaves float64 by t = 1e\+307.*t_eval or \|mu\| must be smaller, "
                                     r"got t_eval up to 1e\+307"),
    "integrate_nonlinear(mu=40)": (lambda: dynamics.integrate_nonlinear([40.0], [0.0, 1.0]),
                                   r"mu must lie in \[-37.68, 37.68\] .*got \|mu\| up to 40"),
    "nonlinear_by_quadrature(mu=38)": (lambda: dynamics.nonlinear_by_quadrature([38.0, 1.0], [0.0, 1.0]),
                                       r"mu must lie in \[-37.68, 37.68\] .*got \|mu\| up to 38"),
    "simulate_softmax_attention(v0 of another shape)": (lambda: softmax_dynamics.simulate_softmax_attention(
        np.ones((2, 3)), v0=np.zeros(2), n_steps=1), r"v0 must broadcast to mu's shape \(2, 3\), got shape \(2,\)"),
    "approximation_error_bound(H=0.25)": (lambda: latent_tree.approximation_error_bound(0.25, 4),
                                          r"H must be an integer .* in \[0, L\] = \[0, 4\], got 0.25"),
    "approximation_error_bound(H=nan)": (lambda: latent_tree.approximation_error_bound(np.array([1, np.nan]), 4),
                                         r"H must be an integer .*got array\(\[ 1., nan\]\)"),
    "cooccurrence_approx(H=1.5)": (lambda: latent_tree.cooccurrence_approx([1, 1.5], 4), "H must be an integer .*got"),
    "alignment_score(min_corr<0)": (lambda: table1_model.alignment_score(np.eye(3), np.eye(3), min_corr=-0.5),
                                    r"min_corr must be in \[0, 1\], got -0.5"),
    "batchify(float ids)": (lambda: lm_data.batchify(torch.ones(12), 2),
                            "ids must be an integer torch.Tensor .*got dtype torch.float32"),
    "mean_attention_entropy(negative)": (lambda: lm_metrics.mean_attention_entropy(-torch.ones(2, 3, 3)),
                                         r"attn must hold attention weights in \[0, 1\], got values in \[-1"),
    "invariant_constant(shapes)": (lambda: invariants.invariant_constant(np.ones(4), np.ones((5, 3)), "exp"),
                              r"V must have shape z.shape \+ \(K,\), got z of shape \(4,\) and V of shape \(5, 3\)"),
    "simulate_softmax_attention(eta=1e6)": (lambda: softmax_dynamics.simulate_softmax_attention(
        softmax_dynamics.fig4_mu(), eta=1e6, n_steps=10), r"eta must be in \(0, 2\], got 1000000.0"),
    "attention_from_association(empty)": (lambda: latent_tree.attention_from_association(np.array([]), np.array([])),
                                          "mu must have at least one entry > 0.*got"),
    "random_embedding_coherence(d=nan)": (lambda: embeddings.random_embedding_coherence(np.array([np.nan]), 5),
                                          r"d_values\[0\] must be an integer in \[1, inf\), got nan"),
    "forward(id >= vocab)": (lambda: _tiny_lm()(torch.tensor([[1, 7]])),
                             r"tokens must hold token ids in \[0, 6\] \(vocab_size=7\), got ids in \[1, 7\]"),
    "loss(target < 0)": (lambda: _tiny_lm().loss(torch.tensor([[1, 2]]), torch.tensor([[-1, 2]])),
                         r"targets .*got ids in \[-1, 2\]"),
    "forward(seq > max_len)": (lambda: _tiny_lm()(torch.zeros((1, 7), dtype=torch.int64)),
                               r"tokens must have a sequence length \(dim 1\) in \[1, max_len=6\], got 7"),
    "collect([], [])": (lambda: lm_runs.collect([], []), "runs and configs must be non-empty .*got 0 runs and 0"),
    "collect(run without arrays)": (lambda: lm_runs.collect([{"minibatch": np.arange(2)}], [RunConfig()]),
                                    r"runs\[0\] must be a run's result .*missing"),
}


@pytest.mark.parametrize("case", sorted(SECOND_PROBE))
def test_the_second_probe_gets_clear_errors(case):
    call, message = SECOND_PROBE[case]
    with pytest.raises((ValueError, TypeError), match=message):
        call()


@pytest.mark.parametrize("widget, bad, message, good", [
    ("theorem4.ModifiedMLPWidget", {"temperature": 0}, r"temperature must be in \[0.25, 10\], got 0",
     {"temperature": 2.0}),
    ("theorem4.ModifiedMLPWidget", {"n": -3}, r"n must be in \[2, 30\], got -3", {"n": 12}),
    ("hierarchy.CooccurrenceWidget", {"tree_height": 0}, r"tree_height must be in \[2, 20\], got 0",
     {"tree_height": 5}),
    ("hierarchy.CooccurrenceWidget", {"tree_height": 5, "height": 7},
     r"height must be an integer in \[1, tree_height=5\], got 7",
     {"tree_height": 5, "height": 4}),
    ("theorem1.theorem1_live_widget", {"lr_ratio": 3.0}, r"lr_ratio must be one of \[0.25, .*\], got 3.0",
     {"lr_ratio": 2.0}),
    ("theorem3.RestingPointWidget", {"nu": 0}, r"nu must be in \[0.05, 0.5\], got 0",
     {"nu": 0.3, "n_starts": 2, "t_max": 10.0}),
])
def test_widgets_refuse_initial_values_instead_of_clamping_them(widget, bad, message, good):
    """ipywidgets would clamp ``temperature=0`` to the slider's 0.25 (silent) or raise a TraitError (deep)."""
    module, name = widget.split(".")
    make = getattr(importlib.import_module(f"joma_lib.chapters.{module}.widget"), name)
    with pytest.raises(ValueError, match=message):
        make(**bad)
    values = make(**good).values
    assert {k: values[k] for k in good} == good


#: a third hostile probe (deep: an error from inside numpy, torch or pathlib, or a huge allocation; silent: garbage
#: or nothing) and the message each call gets now
def _spec_and_state():
    spec = block.BlockSpec(n_context=4, n_classes=3, d=8, n_hidden=2, attention="softmax")
    X, y = bags.dirichlet_bags(4, 3, 6, seed=0)
    return spec, X, y, block.init_state(spec, [0])


def _ode(rhs):
    from joma_lib.base.ode import integrate_autonomous

    return lambda: integrate_autonomous(rhs, np.ones((2, 3)), [0.0, 1.0])


THIRD_PROBE = {
    "block.train(steps=1e9)": (lambda: block.train(*_spec_and_state(), steps=10**9),
                               r"steps must be an integer in \[1, 1e\+07\], got 1000000000"),
    "block.train(steps=1e7, every step)": (lambda: block.train(*_spec_and_state(), steps=10**7),
                                           r"the recorded trajectory would hold .* GiB.*"
                                           r"got steps=10000000, record_every=1"),
    "integrate_autonomous(NaN at t=0)": (_ode(lambda y, rows: np.full_like(y, np.nan)),
                                         r"rhs must be finite at y0, got a NaN or inf derivative at t = 0 in rows"),
    "integrate_autonomous(wrong shape)": (_ode(lambda y, rows: y[:, :2]),
                                          r"rhs must return one derivative per entry of y0, shape \(2, 3\), got shape"),
    "simulate_softmax_attention(1000x1000, 1e7 steps)": (lambda: softmax_dynamics.simulate_softmax_attention(
        np.ones((1000, 1000)), n_steps=10**7), r"recorded states .* GiB .*got n_steps=10000000, record_every=1, mu of"),
    "simulate_softmax_attention(work)": (lambda: softmax_dynamics.simulate_softmax_attention(
        np.ones((1000, 1000)), n_steps=10**6, record_every=10**6), r"10\^11|1e\+11 that finish.*got n_steps=1000000"),
    "orthonormal_embeddings(d=1e12)": (lambda: embeddings.orthonormal_embeddings(10**12, 3),
                                       r"the embedding matrix would hold 3e\+12 values .*got d=1000000000000"),
    "tokenize(None)": (lambda: lm_data.tokenize(None), "line must be a str, got NoneType"),
    "collect(mis-shaped)": (lambda: lm_runs.collect([{"minibatch": np.arange(3), "val_loss": np.ones(2),
                                                      "train_loss": np.ones(3), "attn_entropy": np.ones((3, 1)),
                                                      "stable_rank": np.ones((3, 1))}], [RunConfig(n_layers=1)]),
                            r"runs\[0\] must hold one row per checkpoint .*got .*'val_loss': \(2,\)"),
    "smallest_nc({})": (lambda: importlib.import_module("joma_lib.chapters.figs2_3.grid").smallest_nc({}),
                        "data must be the grid figure's data, with the arrays 'nc' and 'steps', got"),
    "fetch_url(timeout=-1)": (lambda: _fetch(timeout=-1.0), r"timeout must be in \(0, inf\), got -1.0"),
    "fetch_url(deadline=nan)": (lambda: _fetch(deadline=float("nan")), "deadline must be a finite number .*got nan"),
    "fetch_url(file://)": (lambda: _fetch(url="file:///etc/passwd"), "url must be an http:// or https:// address, got"),
    "softmax_attention(temperature='3')": (lambda: softmax_dynamics.softmax_attention(np.ones((2, 3)), "3"),
                                          "temperature must be an array of finite numbers, got '3'"),
    "convergence_rate_ratio(j == j_prime)": (
        lambda: dynamics.convergence_rate_ratio([1.0, 2.0], [0.0, 1.0], j=1, j_prime=1),
        "j and j_prime must name two different components .*got j=1, j_prime=1"),
    "Vocab.build([])": (lambda: lm_data.Vocab.build([]), "lines must hold at least one token .*got"),
    "causal_mask(0)": (lambda: importlib.import_module("joma_lib.lm.model").causal_mask(0),
                       r"t must be an integer in \[1, 1.04858e\+06\], got 0"),
    "sweep_configs(layers=[])": (lambda: importlib.import_module("joma_lib.lm.config").sweep_configs(
        RunConfig(), [], [1e-3], [1]), r"layers must be a non-empty list, got \[\]"),
    "seed_std([])": (lambda: importlib.import_module("joma_lib.theory.table1.runs").seed_std(np.array([])),
                     "values must hold at least one seed's value, got"),
}


def _fetch(url: str = "http://127.0.0.1:9/x", timeout: float = 1.0, deadline: float = 1.0) -> None:
    from pathlib import Path

    from joma_lib.base.io import fetch_url

    fetch_url(url, Path("/nonexistent/never-written"), timeout=timeout, deadline=deadline)


@pytest.mark.parametrize("case", sorted(THIRD_PROBE))
def test_the_third_probe_gets_clear_errors_before_any_work(case):
    import time

    call, message = THIRD_PROBE[case]
    start = time.monotonic()
    with pytest.raises((ValueError, TypeError), match=message):
        call()
    assert time.monotonic() - start < 5.0  # refused at the entry point, not after the work


# ------------------------------------------------------------------ bad command lines and environments


def _lm(args: list[str]) -> int:
    from joma_lib.lm.cli import main

    return main(args)


@pytest.fixture
def no_corpus(monkeypatch):
    """The corpus loader of ``lm run``: it must never be reached by a command refused at its start."""
    import joma_lib.lm.sweep as sweep_module

    def refuse(*_: object, **__: object) -> None:
        raise AssertionError("the corpus was loaded before the bad argument was refused")

    monkeypatch.setattr(sweep_module, "load_lm_data", refuse)


def _tiny_run_args(out: str, *extra: str) -> list[str]:
    return ["run", "--data", "ptb", "--steps", "4", "--eval-interval", "2", "--d", "16", "--d-ff", "16",
            "--max-vocab", "200", "--device", "cpu", "--no-progress", "--out", out, *extra]


@pytest.mark.parametrize("case", ["out is a file", "results is a folder", "status of a missing folder"])
def test_lm_paths_are_checked_before_any_work(tmp_path, capsys, no_corpus, case):
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    args = {"out is a file": _tiny_run_args(str(a_file)),
            "results is a folder": _tiny_run_args(str(tmp_path / "runs"), "--results", str(tmp_path)),
            "status of a missing folder": ["status", "--out", str(tmp_path / "missing")]}[case]
    assert _lm(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and len(err.strip().splitlines()) == 1
    assert {"out is a file": "--out must be a folder of runs, but", "results is a folder": "--results must name a file",
            "status of a missing folder": "--out must be an existing folder of runs"}[case] in err


def test_the_probe_child_entry_point_refuses_anything_else_and_names_the_readers_command(capsys):
    from joma_lib.base import cpu

    assert cpu.main(["--bogus"]) == 2 and cpu.main([]) == 2
    assert "got ['--bogus']" in capsys.readouterr().err.splitlines()[0]


@pytest.mark.parametrize("name, value", [("JOMA_DEVICE", "tpu"), ("JOMA_CACHE", "<file>"), ("OMP_NUM_THREADS", "abc")])
def test_every_command_line_refuses_a_bad_environment_before_any_work(tmp_path, monkeypatch, capsys, no_corpus,
                                                                      name, value):
    import joma_lib.theory.table1.cli as table1_cli
    from joma_lib.kit.cli import main as figures

    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    monkeypatch.setenv(name, str(a_file) if value == "<file>" else value)
    work: list[str] = []
    monkeypatch.setattr("joma_lib.kit.cli.stored_or_computed", lambda *args, **kwargs: work.append("figure"))
    monkeypatch.setattr(table1_cli, "run_table1", lambda *args, **kwargs: work.append("table1"))
    for call in (lambda: figures(["verify", "fig4"]), lambda: _lm(_tiny_run_args(str(tmp_path / "runs"))),
                 lambda: table1_cli.main(["--config", "quick"])):
        assert call() == 2
        err = capsys.readouterr().err
        assert err.startswith(f"error: environment variable {name} ") and ENV_VARS[name].allowed in err, err
    assert work == [] and not (tmp_path / "runs").exists()


@pytest.mark.parametrize("name, value", [("JOMA_FIGURE_STORE", "<file>"), ("JOMA_OFFICIAL_DIR", "<file>"),
                                         ("JOMA_PRECISION", "fp16"), ("ONEDNN_MAX_CPU_ISA", "bogus")])
def test_figures_refuse_the_variables_they_read_before_any_figure(tmp_path, monkeypatch, capsys, name, value):
    from joma_lib.kit.cli import main as figures

    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    monkeypatch.setenv(name, str(a_file) if value == "<file>" else value)
    work: list[str] = []
    monkeypatch.setattr("joma_lib.kit.cli.stored_or_computed", lambda *args, **kwargs: work.append("figure"))
    assert figures(["verify", "fig6"]) == 2 and work == []
    err = capsys.readouterr().err
    assert err.startswith(f"error: environment variable {name} ") and ENV_VARS[name].allowed in err, err


def test_a_fresh_figures_process_refuses_a_file_as_the_authors_folder(tmp_path):
    """In a process of its own (only the modules the command imports have declared their variables)."""
    import os
    import subprocess
    import sys

    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    proc = subprocess.run([sys.executable, "-m", "joma_lib.figures", "verify", "fig6"], capture_output=True, text=True,
                          env={**os.environ, "JOMA_OFFICIAL_DIR": str(a_file)}, timeout=120)
    assert proc.returncode == 2 and "SKIPPED" not in proc.stdout
    assert proc.stderr.startswith("error: environment variable JOMA_OFFICIAL_DIR must name an existing folder")


def test_bags_without_any_token_say_what_was_given():
    """Figs. 2-3's bags need M_C = n_distinct + n_common >= 1 tokens; the error gives both counts (found by a long
    fuzz run: the message said what was needed, not what was given)."""
    with pytest.raises(ValueError, match=r"n_distinct \+ n_common \(M_C\) must be >= 1, got n_distinct=0, n_common=0"):
        bags.gaussian_or_random_bags("gaussian", n_distinct=0, n_common=0)


@pytest.mark.parametrize("kwargs, message", [
    (dict(n_draws=10**12), r"the computation would take .* got d_values up to 4, n_tokens=5, n_draws=1000000000000"),
    (dict(n_tokens=10**12), r"a draw's vectors or cosines would hold .* got d_values up to 4, n_tokens=1000000000000"),
    (dict(d_values=[4, 10**12]), r"a draw's vectors or cosines would hold .* got d_values up to 1000000000000"),
])
def test_random_embedding_coherence_refuses_work_that_would_not_finish(kwargs, message):
    """The JL check's sizes are refused up front, naming them, where a draw count of 10**12 ran for ever (found by a
    longer fuzz run) and a huge d or n would have asked for the memory first."""
    args = {"d_values": [4], "n_tokens": 5, **kwargs}
    with pytest.raises(ValueError, match=message):
        embeddings.random_embedding_coherence(**args)


def test_theorem4_by_quadrature_takes_an_empty_batch_as_the_stepper_does():
    """An empty batch of targets gives the stepper's empty result, where the quadrature's degree took the maximum of
    nothing inside numpy (found by a longer fuzz run)."""
    for mu in (np.zeros((0, 3)), np.zeros((2, 0, 3))):
        by_quadrature = dynamics.nonlinear_by_quadrature(mu, [0.0, 1.0])
        stepped = dynamics.integrate_nonlinear(mu, [0.0, 1.0])
        assert by_quadrature.v.shape == stepped.v.shape == (2, *mu.shape)
        assert by_quadrature.omega.shape == stepped.omega.shape


@pytest.mark.parametrize("scale", [1e-268, 1e-160, 1.0, 1e160, 1e300])
def test_stable_rank_of_a_tiny_or_huge_matrix_is_its_scale_free_value(scale):
    """The stable rank does not depend on the scale of W; its squares underflowed to 0/0 = NaN for entries near 1e-268
    and overflowed for huge ones (found by a longer fuzz run)."""
    w = torch.diag(torch.tensor([2.0, 1.0, 1.0], dtype=torch.float64)) * scale
    assert lm_metrics.stable_rank(w) == pytest.approx(1.5, rel=1e-12)


def test_the_ode_stepper_refuses_text_as_its_initial_state_naming_it():
    with pytest.raises(ValueError, match=r"y0 must be an array of finite numbers, got array\(\[\['a', 'b'\]\]"):
        ode.integrate_autonomous(lambda y, rows: -y, np.array([["a", "b"]]), [0.0, 1.0])
    with pytest.raises(ValueError, match="y0 must contain only finite numbers"):
        ode.integrate_autonomous(lambda y, rows: -y, np.array([[np.inf, 1.0]]), [0.0, 1.0])


def test_a_diverging_softmax_run_says_what_was_given_including_v0():
    """A start at |v0| = 1e308 overflows at the first step; the error names v0 among what to reduce and gives the
    values (found by a longer fuzz run: it named eta and mu only, with no 'got')."""
    with pytest.raises(ValueError, match=r"reduce eta .*, \|mu\| or \|v0\|, or raise temperature; got eta up to 1, "
                                         r"\|mu\| up to 1, \|v0\| up to 1e\+308, temperature down to 1"):
        softmax_dynamics.simulate_softmax_attention(np.ones(5), v0=-1e308, eta=1.0, n_steps=1, temperature=1.0)


def test_a_saliency_whose_blow_up_time_leaves_float64_is_refused_naming_it():
    """t* = sqrt(pi/2) / max|saliency| overflowed to inf for a subnormal largest saliency (found by a longer fuzz run);
    the smallest allowed one still gives a finite t*."""
    with pytest.raises(ValueError, match=r"saliency must have max\|saliency\| >= 6.97e-309 per problem .* got"):
        dynamics.blowup_time(np.array([0.0, 2.2e-311]))
    assert np.isfinite(dynamics.blowup_time(np.array([0.0, 7e-309])))
