"""Table 1: the combination hierarchy, the multilayer Transformer and the alignment score."""

from __future__ import annotations

import math
from dataclasses import replace
from math import prod

import numpy as np
import pytest
import torch
from torch import nn

from joma_lib.theory.combination_hierarchy import CombinationHierarchy
from joma_lib.chapters.table1.table1 import (
    KINDS,
    change_alignment_margin,
    layer0_learning_margin,
    level_specificity,
)
from joma_lib.kit.registry import get_spec
from joma_lib.base.precision import PrecisionUnavailableError, precisions_used
from joma_lib.theory.table1.model import (alignment_score, change_alignment_matrix, HierarchyTransformer, numerics,
                                          score_at_init, step_flops, TABLE1_SETTINGS, Table1Config, train_and_score,
                                          token_memberships, training_precision)
from joma_lib.theory.table1.runs import CONFIGS


@pytest.fixture(scope="module")
def table1(figure_data) -> dict[str, np.ndarray]:
    """The quick configuration of Table 1, trained once for every test here (the book's data, when kept)."""
    return figure_data("table1")


def test_table1_quick_shapes_and_range(table1: dict[str, np.ndarray]) -> None:
    quick = CONFIGS["quick"]
    shape = (len(TABLE1_SETTINGS), len(quick.seeds), quick.n_layers, 3)  # levels 0, 1 and the classes
    for kind in KINDS:
        assert table1[kind].shape == shape
        assert np.all((table1[kind] >= 0) & (table1[kind] <= 1))
        assert np.allclose(table1[f"{kind}_mean"], table1[kind].mean(axis=1))
        assert np.allclose(table1[f"{kind}_std"], table1[kind].std(axis=1, ddof=1))


def test_table1_quick_claims_have_the_verdicts_the_page_states(table1: dict[str, np.ndarray]) -> None:
    for claim in get_spec("table1").claims:
        value, verdict = claim.evaluate(table1)
        assert verdict == claim.book_says, (claim.claim_id, value)


def test_table1_quick_learns_the_task_and_the_control_cannot(table1: dict[str, np.ndarray]) -> None:
    chance = math.log(CONFIGS["quick"].n_class)
    assert np.all(table1["final_loss"] < 0.25 * chance)
    assert np.all(table1["final_loss_control"] > 0.8 * chance)  # shuffled labels carry no information


def test_control_starts_from_the_same_network() -> None:
    tiny = replace(CONFIGS["quick"], steps=3, n_test=64)
    real = train_and_score(tiny, 2, (10, 20), seed=5, device="cpu")
    shuffled = train_and_score(tiny, 2, (10, 20), seed=5, device="cpu", shuffle_labels=True)
    assert np.array_equal(real.scores_init, shuffled.scores_init)
    assert np.array_equal(real.scores_init, score_at_init(tiny, 2, (10, 20), seed=5, device="cpu"))
    assert not np.array_equal(real.losses, shuffled.losses)


def test_claim_measures_on_constructed_data() -> None:
    rng = np.random.default_rng(0)
    base = 0.4 + rng.normal(0, 0.01, size=(2, 4, 3, 3))
    data = {"init": base, "control": base + rng.normal(0, 0.01, base.shape), "trained": base.copy()}
    data["trained"][:, :, 0, 0] += 0.2  # layer 0 learns level 0 far beyond the seed spread
    data["trained_mean"] = data["trained"].mean(axis=1)
    assert layer0_learning_margin(data) > 5
    data["trained"][:, :, 0, 0] = data["control"][:, :, 0, 0]
    assert abs(layer0_learning_margin(data)) < 1e-9
    mean = np.full((2, 3, 3), 0.2)
    mean[:, 0, 0], mean[:, 1, 1], mean[:, 2, 1] = 0.9, 0.7, 0.6
    assert level_specificity({"trained_mean": mean}) == pytest.approx(0.1)
    mean[1, 2, 1] = 0.8  # in one setting layer 2 beats layer 1 on level 1
    assert level_specificity({"trained_mean": mean}) == pytest.approx(-0.1)


def test_change_alignment_drops_what_the_untrained_network_computed() -> None:
    data = CombinationHierarchy(100, 30, (10, 20), 20, 2, seed=0)
    test = data.sample(256, np.random.default_rng(1))
    rng = np.random.default_rng(2)
    before = [rng.normal(size=(256, 12)), rng.normal(size=(256, 12))]
    assert np.array_equal(change_alignment_matrix(before, before, test, 0.01), np.zeros((2, 3)))  # no change
    learned = [b.copy() for b in before]
    learned[0][:, :10] += 5 * test.active[0]  # training adds a detector of every level-0 latent to layer 0
    change = change_alignment_matrix(before, learned, test, 0.01)
    assert change[0, 0] > 0.9 and change[1, 0] == 0.0
    with pytest.raises(ValueError, match="same number of layers"):
        change_alignment_matrix(before, learned[:1], test, 0.01)


def test_change_claim_measure_on_constructed_data() -> None:
    rng = np.random.default_rng(0)
    control = 0.3 + rng.normal(0, 0.02, size=(4, 3, 3, 3))
    data = {"change_control": control, "change": control + rng.normal(0, 0.02, control.shape)}
    data["change"][:, :, 0, 0] += 0.3
    assert change_alignment_margin(data) > 5
    data["change"][2, :, 0, 0] = control[2, :, 0, 0] - 0.1  # one setting where the real labels change less
    assert change_alignment_margin(data) < 0


def test_combination_hierarchy_structure() -> None:
    data = CombinationHierarchy(n_vocab=100, seq_len=30, level_sizes=(20, 30), n_class=20, n_combinations=3, seed=4)
    assert [c.shape for c in data.children] == [(20, 3), (30, 3), (20, 3)]
    for k, children in enumerate(data.children):
        below = 99 if k == 0 else data.level_sizes[k - 1]
        assert np.all(np.diff(children, axis=1) > 0) and children.max() < below  # distinct, sorted children
        assert len({tuple(row) for row in children}) == len(children)  # distinct sets within a level


def test_combination_hierarchy_sample_is_consistent() -> None:
    data = CombinationHierarchy(n_vocab=50, seq_len=10, level_sizes=(6, 8), n_class=5, n_combinations=(2, 2, 2))
    sample = data.sample(200, np.random.default_rng(0))
    assert sample.tokens.shape == (200, 10) and sample.tokens.dtype == np.int64
    assert np.array_equal(sample.active[-1], np.eye(5, dtype=bool)[sample.labels])
    for i in range(200):
        real = sample.tokens[i][sample.tokens[i] != data.pad]
        n_pad = 10 - real.size
        assert np.all(sample.tokens[i, :n_pad] == data.pad) and np.all(np.diff(real) > 0)  # left-padded, sorted
        expected = set(np.unique(data.children[0][sample.active[0][i]]).tolist())
        assert set(real.tolist()) == expected
        for k in (1, 2):  # a symbol is on exactly when one of its parents is
            below = set(np.unique(data.children[k][sample.active[k][i]]).tolist())
            assert below == set(np.flatnonzero(sample.active[k - 1][i]).tolist())
    assert (sample.tokens != data.pad).sum(axis=1).max() <= prod(data.n_combinations)


def test_alignment_score() -> None:
    rng = np.random.default_rng(0)
    active = rng.random((500, 6)) < 0.3
    noise = rng.random((500, 10))
    assert alignment_score(active, np.concatenate([active * 2.0, noise], axis=1)) == pytest.approx(1.0)
    assert alignment_score(active, noise) < 0.2
    assert alignment_score(np.zeros((500, 3)), noise) == 0.0  # latents never on
    assert alignment_score(active, np.ones((500, 4))) == 0.0  # dead neurons
    half = np.concatenate([active[:, :3] * 1.0, np.zeros((500, 1))], axis=1)
    assert alignment_score(active, half, min_corr=0.5) == pytest.approx(1.0)  # poorly matched latents left out


def test_model_is_causal_and_shapes() -> None:
    torch.manual_seed(0)
    model = HierarchyTransformer(n_vocab=20, n_class=4, n_layers=2, d_model=8, d_hidden=12)
    tokens = torch.randint(0, 20, (3, 7))
    hiddens = model.hidden_activations(tokens)
    assert model(tokens).shape == (3, 4) and [h.shape for h in hiddens] == [(3, 7, 12)] * 2
    changed = tokens.clone()
    changed[:, -1] = (changed[:, -1] + 1) % 20
    hiddens2 = model.hidden_activations(changed)
    assert torch.allclose(hiddens[1][:, :-1], hiddens2[1][:, :-1])  # earlier positions do not see the last token
    assert not torch.allclose(hiddens[1][:, -1], hiddens2[1][:, -1])


def test_the_logits_of_the_last_position_alone_are_those_of_every_position() -> None:
    """The training's logits compute the last block at the last position only; in float64 they and every gradient
    are those of the network computed at every position, to rounding (1e-12), and the last block's MLP did see
    one position per sequence."""
    torch.manual_seed(1)
    model = HierarchyTransformer(n_vocab=20, n_class=4, n_layers=3, d_model=8, d_hidden=12).double()
    tokens, labels = torch.randint(0, 20, (5, 9)), torch.randint(0, 4, (5,))
    seen = []
    model.blocks[-1].up.register_forward_hook(lambda _module, args, _out: seen.append(args[0].shape))
    nn.functional.cross_entropy(model(tokens), labels).backward()
    fast = {name: p.grad.clone() for name, p in model.named_parameters()}
    model.zero_grad()
    x, mask = model.embedding(tokens), torch.ones(9, 9, dtype=torch.bool).triu(1)
    for block in model.blocks:
        x, _ = block(x, mask)
    full = model.classifier(x[:, -1])
    nn.functional.cross_entropy(full, labels).backward()
    assert seen[0] == (5, 1, 8) and seen[-1] == (5, 9, 8)
    torch.testing.assert_close(model(tokens), full, rtol=0, atol=1e-12)
    for name, p in model.named_parameters():
        torch.testing.assert_close(fast[name], p.grad, rtol=0, atol=1e-12, msg=name)
    assert fast["blocks.2.up.weight"].abs().max() > 1e-3  # the last block does learn


def test_training_is_deterministic_on_cpu() -> None:
    tiny = replace(CONFIGS["quick"], steps=5, n_test=64)
    first = train_and_score(tiny, 2, (10, 20), seed=7, device="cpu")
    second = train_and_score(tiny, 2, (10, 20), seed=7, device="cpu")
    assert all(np.array_equal(a, b) for a, b in zip(first, second))
    assert not np.array_equal(first.scores, first.scores_init)  # five Adam steps move the neurons
    assert first.scores.shape == (tiny.n_layers, 3)


def test_adam_over_all_tensors_at_once_is_the_per_tensor_loop_bit_for_bit(monkeypatch) -> None:
    """train_and_score asks Adam for its foreach update (one call for every tensor; torch loops over the tensors
    by default on a CPU): 30 steps give the default loop's losses and scores exactly."""
    tiny = replace(CONFIGS["quick"], steps=30, n_test=64)
    foreach = train_and_score(tiny, 2, (10, 20), seed=3, device="cpu")
    adam = torch.optim.Adam
    monkeypatch.setattr(torch.optim, "Adam", lambda params, foreach, **kw: adam(params, **kw, foreach=False))
    loop = train_and_score(tiny, 2, (10, 20), seed=3, device="cpu")
    assert all(np.array_equal(a, b) for a, b in zip(foreach, loop))


@pytest.mark.parametrize("call, match", [
    (lambda: Table1Config(steps=0), "steps"),
    (lambda: Table1Config(lr=0.0), "lr"),
    (lambda: Table1Config(seeds=()), "seeds"),
    (lambda: Table1Config(n_layers=1), "n_layers"),
    (lambda: CombinationHierarchy(n_vocab=10, level_sizes=(50, 20), n_combinations=2), "level 0"),
    (lambda: CombinationHierarchy(seq_len=20, n_combinations=3), "seq_len"),
    (lambda: CombinationHierarchy(n_combinations=(2, 2)), "n_combinations"),
    (lambda: CombinationHierarchy(level_sizes=()), "level_sizes"),
    (lambda: alignment_score(np.zeros((5, 2)), np.zeros((4, 3))), "same number"),
    (lambda: train_and_score(CONFIGS["quick"], 2, (10, 20), seed=-1), "seed"),
])
def test_bad_inputs_raise_clear_errors(call, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        call()


def test_numerics_set_the_configurations_threads_and_full_fp32_products_and_restore_them() -> None:
    """The scores' numerics: the configuration's threads, full float32 products whatever was set; the training
    inside them in the configuration's precision (TF32 products only there)."""
    torch.backends.cuda.matmul.allow_tf32 = True
    try:
        before = torch.get_num_threads()
        with numerics(replace(CONFIGS["check"], cpu_threads=1), torch.device("cpu")):
            assert (torch.backends.cuda.matmul.allow_tf32, torch.get_num_threads()) == (False, 1)
            with training_precision(replace(CONFIGS["check"], precision="tf32"), torch.device("cpu")):
                assert torch.backends.cuda.matmul.allow_tf32
            assert not torch.backends.cuda.matmul.allow_tf32
        assert torch.backends.cuda.matmul.allow_tf32 and torch.get_num_threads() == before
    finally:
        torch.backends.cuda.matmul.allow_tf32 = False
    with pytest.raises(ValueError, match=r"precision must be one of \['fp32', 'bf16', 'tf32'\], got 'fp16'"):
        Table1Config(precision="fp16")


def test_the_training_precision_is_noted_for_the_manifests_of_the_figures_being_made() -> None:
    """Table 1's figures record the precision they were trained in, as the language models' do (their receipts
    said "no model trained")."""
    with precisions_used() as used:
        with training_precision(CONFIGS["check"], torch.device("cpu")):
            pass
    assert used == {CONFIGS["check"].precision} == {"fp32"}


def test_a_precision_the_device_cannot_run_is_refused_before_any_work() -> None:
    """TF32 on a CPU (no TF32 products there): refused by name at the entry, nothing trained."""
    with pytest.raises(PrecisionUnavailableError, match=r"precision tf32 needs tf32.*TF32 products need a CUDA GPU"):
        train_and_score(replace(CONFIGS["check"], precision="tf32"), 2, (10, 20), seed=1, device="cpu")


def test_step_flops_counts_the_products_of_a_training_step() -> None:
    """step_flops against torch's own count of a real step's matrix products (forward and backward)."""
    from torch.utils.flop_counter import FlopCounterMode

    config = replace(CONFIGS["check"], n_layers=3, seq_len=6, batch_size=4)
    torch.manual_seed(0)
    model = HierarchyTransformer(config.n_vocab, config.n_class, config.n_layers, config.d_model, config.d_hidden)
    tokens = torch.randint(0, config.n_vocab, (config.batch_size, config.seq_len))
    labels = torch.randint(0, config.n_class, (config.batch_size,))
    with FlopCounterMode(display=False) as counter:
        nn.functional.cross_entropy(model(tokens), labels).backward()
    assert step_flops(config) == counter.get_total_flops()


def test_token_memberships_count_the_used_symbols_of_each_token_and_zero_for_tokens_that_never_occur():
    config = CONFIGS["quick"]
    for n, sizes in [(2, (20, 30)), (3, (20, 30))]:
        counts = token_memberships(config, n, sizes, seed=2)
        data = CombinationHierarchy(config.n_vocab, config.seq_len, sizes, config.n_class, n, seed=2)
        sample = data.of_labels(np.arange(config.n_class))
        occurring = np.isin(np.arange(config.n_vocab - 1), sample.tokens)
        assert counts.shape == (config.n_vocab - 1,)
        assert np.array_equal(counts > 0, occurring)  # a token occurs exactly when a used symbol holds it
        assert counts.sum() == n * sample.active[0].any(axis=0).sum()  # each used symbol holds n tokens
        assert 0 < (counts == 1).sum() < (counts > 0).sum()  # shared tokens exist in these settings
