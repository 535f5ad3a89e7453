"""The performance chapter (joma_lib.chapters.performance): the bf16-against-fp32 re-run and its measure; the GPU
section's step table, goals and what says the step is bound by its kernels."""

from __future__ import annotations

import numpy as np
import pytest

from joma_lib.kit.benchmarks import table1_steps
from joma_lib.lm.stack_plan import StackCost

from joma_lib.chapters.performance import gpu, presentation
from joma_lib.kit import paper_runs_waiting
from joma_lib.base import precision
from joma_lib.base.cpu import Bf16Support
from joma_lib.base.precision import PrecisionUnavailableError
from joma_lib.chapters.performance import figures
from joma_lib.chapters.performance.figures import bf16_inside_fp32_band, make_precision, plot_precision


def _data() -> dict[str, np.ndarray]:
    """Three fp32 seeds and three bf16 seeds over 5 checkpoints, the bf16 mean outside the fp32 range at two."""
    fp32 = np.array([[5.0, 3.0, 2.0, 2.5, 2.8], [5.0, 3.2, 2.2, 2.6, 3.0], [5.0, 3.4, 2.4, 2.7, 3.2]])
    bf16 = np.array([[5.0, 3.1, 2.5, 2.55, 3.3], [5.0, 3.3, 2.7, 2.65, 3.5], [5.0, 3.2, 2.6, 2.6, 3.4]])
    return {"minibatch": np.arange(5) * 20, "attn_entropy": np.stack([fp32, bf16]),
            "val_loss": np.stack([fp32 + 1, bf16 + 1]), "seeds": np.array([1, 2, 3])}


def test_the_band_measure_counts_checkpoints_after_the_first():
    # bf16 means after step 0: 3.2 (inside 3.0-3.4), 2.6 (outside 2.0-2.4), 2.6 (inside 2.5-2.7), 3.4 (outside)
    assert bf16_inside_fp32_band(_data()) == pytest.approx(0.5)
    data = _data()
    data["attn_entropy"][1] = data["attn_entropy"][0]  # identical runs lie inside their own range everywhere
    assert bf16_inside_fp32_band(data) == 1.0


def test_the_band_measure_reads_the_bf16_seed_mean_against_both_ends_of_the_band():
    data = _data()
    data["attn_entropy"][1][:, 2] = [2.5, 2.5, 1.9]  # mean 2.3, inside 2.0-2.4; the median and the first seed are not
    assert bf16_inside_fp32_band(data) == pytest.approx(0.75)
    below = _data()
    below["attn_entropy"][1][:, 1:] = below["attn_entropy"][0][:, 1:] - 1.0  # each bf16 seed a nat under its fp32 one
    assert bf16_inside_fp32_band(below) == 0.0


def test_the_claim_is_the_band_measure_unless_bf16_changed_nothing_or_the_band_closes():
    """Step 0 is the same in every run and is not read. One entry that bf16 left alone among moved ones is no sign
    that bf16 changed nothing; fp32 seeds that meet at one checkpoint leave no spread to lie inside."""
    data = _data()
    assert figures.bf16_matches_fp32(data) == pytest.approx(0.5)
    data["attn_entropy"][1][0, 1] = data["attn_entropy"][0][0, 1]
    assert figures.bf16_matches_fp32(data) == pytest.approx(bf16_inside_fp32_band(data))
    data["attn_entropy"][0][:, 3] = 2.6
    assert np.isnan(figures.bf16_matches_fp32(data))


def test_the_figure_draws_entropy_and_loss_with_the_fp32_band():
    fig = plot_precision(_data())
    assert [ax.get_ylabel() for ax in fig.axes] == ["attention entropy (nats)", "validation loss (nats)"]
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert labels == ["fp32, range of 3 seeds", "fp32, seed mean", "bf16, seed mean"]


def _lm_stack(one_ms: list[float], stack_ms: list[float], sweep_s: float) -> dict:
    """A stored ``lm_stack`` benchmark at depths 1, 2 and 5 (authors' step 10 ms per layer), stacks of 3."""
    rows = []
    for n, one, stack in zip((1, 2, 5), one_ms, stack_ms):
        authors = 10.0 * n
        rows.append({"layers": n, "stack": 3, "best_one": "one bf16", "best_stack": "stack tf32",
                     "median_ms": {"authors": authors, "one bf16": one, "one fp32": 2 * one, "stack tf32": stack},
                     "stack_ms_per_run": stack / 3, "authors_over_one": authors / one,
                     "authors_over_stacked": authors / (stack / 3)})
    return {"results": {"rows": rows, "projected_paper_sweep_s": sweep_s}}


def _table1(stacked_s: float) -> dict:
    """A stored ``table1_bench``: one run alone, the stack in TF32 and, 1.5x as fast, in bf16 (not compiled)."""
    rows = {"unstacked, tf32": 4 * stacked_s, "stacked (bmm), tf32": 1.5 * stacked_s, "stacked (bmm), bf16": stacked_s,
            "stacked (vmap), tf32": stacked_s / 2}
    return {"results": {"rows": {name: {"whole_table_s": s, "per_run_step_ms": s / 1000, "compiled": False,
                                        "precision": name.rpartition(", ")[2]} for name, s in rows.items()}}}


def test_the_bf16_figure_is_not_made_where_bf16_runs_only_on_reference_kernels(monkeypatch):
    """Its bf16 half would take some 15 minutes there: the figure raises before any training (the page then draws
    its reference data and says why)."""
    monkeypatch.setattr(precision, "bf16_support", lambda: Bf16Support(True, "DEFAULT", "", ("DEFAULT: ok",), False))
    monkeypatch.setattr(figures, "train_on_cpu", lambda configs: pytest.fail("trained"))
    with pytest.raises(PrecisionUnavailableError, match=r"^figure c-rerun-precision .* needs bf16 at speed"):
        make_precision()


def test_the_step_table_names_each_steps_precision_and_the_two_ratios():
    rows = gpu.step_rows(_lm_stack([2.5, 4.0, 8.0], [6.0, 9.0, 15.0], 3000))
    assert rows[1] == {"layers": 2, "authors (ms)": 20.0, "ours, one run (ms)": "4.00 (bf16)",
                       "ours, stack of R, per run (ms)": "3.00 (tf32, R = 3)", "authors / one run": "5.0x",
                       "authors / stacked, per run": "6.7x"}


def test_each_goal_is_met_or_not_by_the_stored_numbers():
    # one run 4.0-6.2x (below 5x at 1 layer), stacked 5.0-10.0x; sweep 50 minutes; Table 1 stacked 20 minutes
    goals = gpu.paper_scale_goals(_lm_stack([2.5, 4.0, 8.0], [6.0, 9.0, 15.0], 3000), _table1(1200))
    assert [g.met for g in goals] == [False, True, False, False]
    assert [g.measured for g in goals] == ["4.0–6.2x, by depth", "5.0–10.0x, by depth",
                                           "50 minutes projected (stacks, training only)",
                                           "20 minutes projected stacked in bf16 (80 run by run)"]
    assert "30-run" in goals[2].goal and "all 40 runs" in goals[3].goal and "at least 5x" in goals[0].goal
    # every bar cleared: one run 5.0x and more, the sweep in 10 minutes, Table 1 in 5
    goals = gpu.paper_scale_goals(_lm_stack([2.0, 4.0, 10.0], [5.0, 9.0, 15.0], 600), _table1(300))
    assert all(g.met for g in goals)
    # the Table 1 goal reads the stack the command line trains (not vmap), in its fastest precision
    assert table1_steps(_table1(300))[0]["precision"] == "bf16"
    # a depth whose step was not measured (NaN) after the first: the goals it enters are not met, the range says so
    lost = _lm_stack([2.0, float("nan"), 10.0], [5.0, float("nan"), 15.0], 600)
    assert [g.met for g in gpu.paper_scale_goals(lost, _table1(300))[:2]] == [False, False]
    assert gpu.ratio_range(lost, "authors_over_one").startswith("nan")
    assert all(np.isnan(gpu.launch_bound(lost)["stack_over_one"]))
    with pytest.raises(ValueError, match=r"rows 'stacked \(bmm\), <precision>'.*got \['stacked \(bmm\)'"):
        table1_steps({"results": {"rows": {"stacked (bmm)": {}}}})


def test_a_step_bound_by_its_kernels_shows_in_the_stack_cost_and_the_layer_cost():
    # one run: 2 ms + 1 ms per layer; the stack of 3: 3 ms + 1.1 ms per layer (arithmetic x3, time far less)
    bound = gpu.launch_bound(_lm_stack([3.0, 4.0, 7.0], [4.1, 5.2, 8.5], 0))
    assert bound["layer_ms_one"] == pytest.approx(1.0) and bound["layer_ms_stack"] == pytest.approx(1.1)
    assert bound["stack_over_one"] == pytest.approx((8.5 / 7.0, 4.1 / 3.0)) and bound["stacks"] == (3, 3)


def test_the_layer_cost_is_taken_at_the_stack_size_most_depths_were_timed_at():
    # depth 5 timed with a stack of 7 (as the paper's 5-layer runs are stacked): its step is left out of the slopes
    stored = _lm_stack([3.0, 4.0, 7.0], [4.1, 5.2, 8.5], 0)
    stored["results"]["rows"][2] |= {"stack": 7, "median_ms": {"one bf16": 7.0, "stack tf32": 30.0}}
    bound = gpu.launch_bound(stored)
    assert bound["layer_stack"] == 3 and bound["stacks"] == (3, 7)
    assert bound["layer_ms_one"] == pytest.approx(1.0) and bound["layer_ms_stack"] == pytest.approx(1.1)
    assert bound["stack_over_one"][1] == pytest.approx(30.0 / 7.0)
    stored["results"]["rows"][1]["stack"] = 5
    with pytest.raises(ValueError, match="two depths timed at one stack size"):
        gpu.launch_bound(stored)


def test_the_run_counts_are_the_papers():
    assert gpu.PAPER_SWEEP_RUNS == 30 and gpu.TABLE1_RUNS == 40  # 4 depths + 7 rates, 3 seeds (one shared); 20 x 2


def _ops(rows: list[tuple[int, dict[str, int]]]) -> dict:
    return {"results": {"rows": [{"layers": n, "ops": ops} for n, ops in rows]}}


def test_operation_counts_compare_depth_by_depth_and_give_a_layers_and_a_runs_cost():
    before = _ops([(1, {"1": 500, "3": 600}), (2, {"1": 900, "3": 1000}), (5, {"1": 2100, "3": 2200})])
    after = _ops([(1, {"1": 200, "3": 300}), (2, {"1": 300, "3": 400}), (5, {"1": 600, "3": 700})])
    rows = gpu.op_count_rows(before, after)
    assert rows[0] == {"layers": 1, "R = 1": "500 → 200 (2.5x fewer)", "R = 3": "600 → 300 (2.0x fewer)"}
    middle = _ops([(1, {"1": 400, "3": 450}), (2, {"1": 600, "3": 700}), (5, {"1": 900, "3": 1000})])
    assert gpu.op_count_rows(before, middle, after)[2]["R = 3"] == "2200 → 1000 → 700 (3.1x fewer)"
    with pytest.raises(ValueError, match="at least two stored counts, got 1"):
        gpu.op_count_rows(before)
    assert gpu.ops_per_layer(before) == pytest.approx(400) and gpu.ops_per_layer(after, "3") == pytest.approx(100)
    assert gpu.ops_per_run(before) == pytest.approx(50) and gpu.ops_per_run(after, 5) == pytest.approx(50)
    with pytest.raises(ValueError, match="different depths or stack sizes"):
        gpu.op_count_rows(before, _ops([(1, {"1": 1}), (3, {"1": 1}), (5, {"1": 1})]))


def test_the_stack_costs_come_from_the_stored_step_and_extend_to_every_waiting_run():
    # 5 layers: one run 8 ms, a stack of 3 15 ms: 3.5 ms more per run, extended to the 21 waiting runs
    costs = gpu.stack_costs(_lm_stack([2.5, 4.0, 8.0], [6.0, 9.0, 15.0], 3000), {5: 21, 1: 2}, steps=1000)
    assert costs[5].seconds(1) == pytest.approx(8.0) and costs[5].seconds(21) == pytest.approx(8.0 + 20 * 3.5)
    assert costs[1].runs == 2 and costs[1].seconds(2) == pytest.approx(2.5 + 1.75)
    with pytest.raises(ValueError, match=r"no row for \[10\] layers"):
        gpu.stack_costs(_lm_stack([2.5, 4.0, 8.0], [6.0, 9.0, 15.0], 3000), {10: 3})


def test_a_loan_finishes_the_stacks_that_fit_and_sizing_them_saves_loans():
    """Runs of one shape whose stack of R takes 100 + 100 R s (R <= 6), occupying 1/PLAN_SHARE of that in a loan."""
    from joma_lib.base.stack_time import PLAN_SHARE

    costs = {5: StackCost(6, 5, 1, 0, (200.0, 700.0), (0.0, 0.0))}
    loan = 500 / PLAN_SHARE  # a stack of 4 (500 s) fills a loan
    assert gpu.loans_needed(costs, loan) == 2  # 4 runs, then the other 2
    assert gpu.loans_needed(costs, loan, fixed=2) == 3  # one stack of 2 (300 s) a loan: a second does not fit
    assert gpu.loans_needed(costs, 2 * loan, fixed=2) == 1  # three of them (900 s) do in a loan twice as long
    with pytest.raises(ValueError, match="no stack of the waiting runs finishes in a loan of"):
        gpu.loans_needed(costs, 150 / PLAN_SHARE)
    # the sweep's runs still missing, from the committed runs so far: the 5- and 10-layer models
    assert paper_runs_waiting() == {5: 21, 10: 3}


def test_table1_takes_the_loans_its_stacks_fit_into_and_fills_what_the_sweep_leaves():
    """Table 1's 40 runs at 10,000 steps: one run alone 9 ms a step, a stack of 10 20 ms (90 s and 200 s of
    training). Sized to the time left, a loan of 800 s for runs trains three stacks of 10 (3 x 200 / PLAN_SHARE =
    706 s) and nothing more fits in the 94 s left, so two loans. Beside a sweep whose stack of one run (500 s) takes
    588 s of each loan, Table 1 fills the 212 s left with a stack of 8: five loans where the sweep alone takes four."""
    stored = _table1(300)
    stored["results"]["rows"]["stacked (bmm), bf16"] |= {"step_ms": 20.0, "runs": 10}
    stored["results"]["rows"]["unstacked, tf32"] |= {"step_ms": 9.0, "runs": 1}
    cost = gpu.table1_cost(stored)
    assert cost.seconds(1) == pytest.approx(90) and cost.seconds(10) == pytest.approx(200)
    assert gpu.loans_needed({}, 800, table1=cost) == 2
    assert gpu.loans_needed({}, 3 * 200 / gpu.PLAN_SHARE - 1, table1=cost) == 2  # two stacks of 10, one of 9, ...
    sweep = {5: StackCost(4, 5, 1, 0, (500.0, 2000.0), (0.0, 0.0))}  # one run a loan: two take 1000 s
    assert gpu.loans_needed(sweep, 800) == 4
    assert gpu.loans_needed(sweep, 800, table1=cost) == 5  # 4 x 8 runs beside the sweep, the last 8 in a fifth
    with pytest.raises(ValueError, match="no stack of the waiting runs finishes in a loan of 90 s"):
        gpu.loans_needed({}, 90, table1=cost)



def test_a_range_prints_one_value_where_both_ends_print_alike():
    assert presentation.span(1.12, 1.14) == "1.1" and presentation.span(1.12, 1.16) == "1.1–1.2"
    assert presentation.span(1.124, 1.126, ".2f") == "1.12–1.13" and presentation.span(3, 3, "d") == "3"
    stored = _lm_stack([2.5, 4.0, 8.0], [6.0, 9.0, 15.0], 3000)  # stacked 5.0-10.0x by depth
    for r in stored["results"]["rows"]:
        r["authors_over_one"] = 4.06 + r["layers"] / 100  # 4.07-4.11x: one value at the printed precision
    assert gpu.ratio_range(stored, "authors_over_one") == "4.1"
    assert gpu.ratio_range(stored, "authors_over_stacked") == "5.0–10.0"


def test_the_loans_sentence_says_when_planning_together_saves_none():
    assert presentation.joint_loans(4, 5) == ("the sweep and Table 1 together take 4 loans, "
                                              "against 5 one after the other")
    assert "as many as one after the other: planning them jointly saves no loan here" in presentation.joint_loans(5, 5)
    assert presentation.fixed_stack_loans(3, 4, 7) == "cut into fixed stacks of 7 they would take 4"
    assert presentation.fixed_stack_loans(4, 4, 7).endswith("sizing the stacks to the time saves no loan")
    with pytest.raises(ValueError, match="take 5 loans, more than the 4 of fixed stacks"):
        presentation.fixed_stack_loans(5, 4, 7)
    assert presentation.joint_loans(1, 2).startswith("the sweep and Table 1 together take 1 loan, against 2")
    with pytest.raises(ValueError, match="more than the 4 one after the other"):
        presentation.joint_loans(5, 4)


def test_a_layers_cost_is_read_against_the_authors_layer_timed_beside_it():
    # one run: 3, 5, 11 ms at 1, 2, 5 layers (2 ms a layer); the authors' step 10 ms a layer
    assert gpu.layer_cost_over_authors(_lm_stack([3.0, 5.0, 11.0], [6.0, 9.0, 15.0], 0)) == pytest.approx(0.2)
    # the same code on a machine twice as slow for both: the same measure
    slow = _lm_stack([6.0, 10.0, 22.0], [12.0, 18.0, 30.0], 0)
    for row in slow["results"]["rows"]:
        row["median_ms"]["authors"] *= 2
    assert gpu.layer_cost_over_authors(slow) == pytest.approx(0.2)
