"""The stacked model (joma_lib.lm.stacked): each run of a stack computes what its own TransformerLM computes."""

from __future__ import annotations

import operator

import pytest
import torch
import torch.nn.functional as F

from joma_lib.lm.metrics import evaluate, stable_rank
from joma_lib.lm.model import TransformerLM
from joma_lib.lm.stacked import CounterMasks, GeneratorMasks, StackedLM, evaluate_stack, mix64, stable_ranks

VOCAB, LAYERS = 60, 2


def _runs(seeds: tuple[int, ...], dropout: float, dtype: torch.dtype = torch.float32
          ) -> tuple[list[TransformerLM], list[torch.Generator]]:
    """Each seed's model and the random stream its unstacked run continues with after building it."""
    models, generators = [], []
    for seed in seeds:
        torch.manual_seed(seed)
        models.append(TransformerLM(VOCAB, LAYERS, d=16, d_ff=24, dropout=dropout).to(dtype))
        generators.append(torch.Generator())
        generators[-1].set_state(torch.get_rng_state())
    return models, generators


@pytest.mark.parametrize("batched_read_out", [False, True])
def test_each_run_of_the_stack_has_its_unstacked_loss_and_gradient_with_its_own_dropout_masks(batched_read_out):
    """float64, dropout 0.2: the stack draws each run's masks from that run's generator in the unstacked order,
    so the losses and every gradient agree to float64 rounding, the runs read out one by one (as on a CPU) or all
    at once (as on a GPU)."""
    seeds = (1, 2, 3)
    models, generators = _runs(seeds, 0.2, torch.float64)
    stack = StackedLM.from_models(models, GeneratorMasks(generators, torch.device("cpu")), torch.device("cpu"))
    assert not stack.batched_read_out  # the CPU's default
    stack.batched_read_out = batched_read_out
    x, y = torch.randint(0, VOCAB, (4, 10)), torch.randint(0, VOCAB, (4, 10))
    losses = stack.losses(x, y)
    grads = torch.autograd.grad(losses.sum(), list(stack.params.values()))
    for r, seed in enumerate(seeds):
        torch.manual_seed(seed)
        model = TransformerLM(VOCAB, LAYERS, d=16, d_ff=24, dropout=0.2).to(torch.float64)
        logits, _ = model(x)
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), y.reshape(-1))
        loss.backward()
        assert abs(float(loss.detach()) - float(losses[r].detach())) < 1e-12
        for (name, p), g in zip(model.named_parameters(), grads, strict=True):
            assert p.grad is not None
            torch.testing.assert_close(g[r], p.grad, rtol=0, atol=1e-12, msg=name)


def test_evaluation_and_stable_ranks_match_the_unstacked_measurements():
    models, generators = _runs((4, 5), 0.2)
    stack = StackedLM.from_models(models, GeneratorMasks(generators, torch.device("cpu")), torch.device("cpu"))
    streams = torch.randint(0, VOCAB, (3, 67))  # 7 chunks of 10 tokens, the last one shorter (6)
    val, entropy = evaluate_stack(stack, streams, 10)
    ranks = stable_ranks(stack)
    for r, model in enumerate(models):
        val_r, entropy_r = evaluate(model, streams, 10)
        assert val[r].item() == pytest.approx(val_r, rel=1e-6)
        assert entropy[r].tolist() == pytest.approx(entropy_r, rel=1e-6)
        assert ranks[r].tolist() == pytest.approx([stable_rank(w) for w in model.lower_mlp_weights()], rel=1e-9)


def test_a_runs_counter_masks_do_not_depend_on_the_runs_beside_it_and_change_with_step_and_site():
    together = CounterMasks([7, 8, 9], step=5, device=torch.device("cpu"))
    alone = CounterMasks([8], step=5, device=torch.device("cpu"))
    first, second = together.multipliers(100, torch.float32, 0.5), together.multipliers(100, torch.float32, 0.5)
    assert first.shape == (3, 100) and torch.equal(first[1], alone.multipliers(100, torch.float32, 0.5)[0])
    assert not torch.equal(first[1], second[1])  # next site
    together.start_step()
    together.advance()
    assert not torch.equal(together.multipliers(100, torch.float32, 0.5)[1], first[1])  # next step, same site
    assert set(first.unique().tolist()) == {0.0, 2.0}  # kept entries scaled by 1 / (1 - p)
    # the bits are uniform: each of the 16 bits of a word is set about half the time
    words = CounterMasks([1], 0, torch.device("cpu")).words(0, 40_000).to(torch.int32) & 0xFFFF
    ones = torch.stack([(words >> b) & 1 for b in range(16)]).float().mean(dim=(1, 2))
    assert torch.all((ones - 0.5).abs() < 0.01)


def test_counter_masks_made_all_at_once_are_the_masks_made_site_by_site():
    """After the first step of a shape (site by site, its sites recorded), later steps of that shape hash every
    site's words at once and make the masks of each dtype and rate at once: the same bits, step after step, with
    sites of two dtypes and two rates interleaved; a step of another shape is drawn site by site again."""
    sites = [(100, torch.float32, 0.2), (37, torch.bfloat16, 0.2), (250, torch.float32, 0.2), (1, torch.bfloat16, 0.2),
             (64, torch.float32, 0.5)]
    batched = CounterMasks([7, 8, 9], step=5, device=torch.device("cpu"))
    for step in range(5, 8):
        by_site = CounterMasks([7, 8, 9], step=step, device=torch.device("cpu"))  # never plans: no key
        batched.start_step(("B", "T"))
        assert (batched._masks is not None) == (step > 5)
        for n, dtype, p in sites:
            mask = batched.multipliers(n, dtype, p)
            assert mask.dtype == dtype and torch.equal(mask, by_site.multipliers(n, dtype, p))
        batched.advance()
    batched.start_step(("other",))
    assert batched._masks is None
    batched.start_step(("B", "T"))
    with pytest.raises(ValueError, match=r"site 0 .* draws _Site\(n=99.*where the first such step drew _Site\(n=100"):
        batched.multipliers(99, torch.float32, 0.2)


@pytest.mark.bf16  # traced under bf16 autocast, as a GPU trains
@pytest.mark.parametrize("batched_read_out", [False, True])
def test_a_stacks_training_loss_traces_as_one_graph_for_torch_compile(batched_read_out):
    """Nothing in the stacked forward (the counter masks included, drawn site by site or all at once; the runs read
    out one by one or all at once) reads a value back from a tensor, so torch.compile sees each step's loss as one
    graph, without a break."""
    import torch._dynamo as dynamo

    from joma_lib.lm.model import trace_mask_constants_as_constant
    from joma_lib.base.precision import numerics

    trace_mask_constants_as_constant()
    models, _ = _runs((1, 2), 0.2)
    cpu = torch.device("cpu")
    stack = StackedLM.from_models(models, CounterMasks([1, 2], 0, cpu), cpu)
    stack.batched_read_out = batched_read_out
    x, y = torch.randint(0, VOCAB, (3, 10)), torch.randint(0, VOCAB, (3, 10))
    explain = dynamo.explain(stack.losses)
    for _ in range(2):  # the first step of a shape draws site by site, the next all at once
        stack.masks.start_step(tuple(x.shape))
        with numerics("bf16", cpu):
            found = explain(x, y)
        stack.masks.advance()
        assert (found.graph_count, found.graph_break_count) == (1, 0), [b.reason for b in found.break_reasons]
        # no word index (an arange) is multiplied by a Python number: Triton refuses the 64-bit literal that
        # torch.compile then writes into the GPU kernel's index arithmetic (the H200 loan of 2026-11-27)
        nodes = list(found.graphs[0].graph.nodes)
        aranges = {n for n in nodes if n.target is torch.arange}
        assert not [n for n in nodes if n.target in (operator.mul, torch.mul) and set(n.args) & aranges
                    and any(isinstance(a, int) for a in n.args)]


def test_mix64_is_splitmix64_modulo_2_to_the_64():
    def reference(z: int) -> int:
        z &= 2**64 - 1
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & (2**64 - 1)
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & (2**64 - 1)
        return z ^ (z >> 31)

    values = [0, 1, 12345, 2**63 - 1, -1, -(2**63), 0x9E3779B97F4A7C15 - 2**64]
    got = mix64(torch.tensor(values, dtype=torch.int64)).tolist()
    assert [g % 2**64 for g in got] == [reference(v) for v in values]
