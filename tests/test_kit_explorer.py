"""The kernel-free explorer (joma_lib.kit.explorer): the grid payload, its checks and the HTML fragment; the
chapters' explorers are tested with their chapters."""

from __future__ import annotations

import re

import numpy as np
import pytest

from joma_lib.kit.explorer import Control, Explorer, Trace, sample_steps

# --- the generic machinery -------------------------------------------------------------------------


def test_payload_indexes_cells_in_c_order_and_hides_all_nan_traces(toy_explorer, payload, cell_data):
    ex = toy_explorer()
    p = payload(ex.html("toy"))
    assert p["shape"] == [2, 3] and p["controls"] == [{"kind": "buttons", "index": 0}, {"kind": "slider", "index": 0}]
    assert cell_data(p, (1, 2))[0] == [20.0, 21.0, 22.0, 23.0]
    assert cell_data(p, (1, 2))[1] == [None] * 4 and cell_data(p, (0, 1))[1] == [4.0, 5.0, 6.0, 7.0]
    assert p["traces"][0]["names"][5] == "n5" and p["titles"][4] == "b1"
    assert len(p["xs"]) == 2  # two x arrays (distinct objects), each stored once
    fig = ex.figure({"kind": "b", "k": 3.0})
    assert fig.data[1].visible is False and list(fig.data[0].y) == [20.0, 21.0, 22.0, 23.0]
    assert fig.layout.updatemenus[0].active == 1 and fig.layout.sliders[0].active == 2


@pytest.mark.parametrize("build, match", [
    (lambda t: {"titles": t.titles[:1]}, "titles must have the grid's shape"),
    (lambda t: {"traces": (Trace(y=np.zeros((2, 2, 4)), x=np.arange(4.0)),)}, r"traces\[0\].y must have shape"),
    (lambda t: {"traces": (Trace(y=np.zeros((2, 3, 4)), x=np.arange(5.0)),)}, r"traces\[0\].x must have shape"),
    (lambda t: {"traces": (Trace(y=np.zeros((2, 3, 4)), x=np.arange(4.0), name=np.array(["a"])),)}, "name must be"),
    (lambda t: {"traces": (Trace(y=np.zeros((2, 3, 4)), x=np.arange(4.0), panel=1),)}, "panel"),
    (lambda t: {"traces": ()}, "at least one panel and one trace"),
    (lambda t: {"digits": 1}, "digits"),
])
def test_explorer_rejects_inconsistent_parts(toy_explorer, build, match):
    toy = toy_explorer()
    parts = {"controls": toy.controls, "panels": toy.panels, "traces": toy.traces, "titles": toy.titles,
             **build(toy)}
    with pytest.raises(ValueError, match=match):
        Explorer(**parts)


def test_controls_and_html_reject_bad_input(toy_explorer):
    with pytest.raises(ValueError, match="kind"):
        Control("k", "k", (1.0,), kind="dropdown")
    with pytest.raises(ValueError, match="at least one value"):
        Control("k", "k", ())
    with pytest.raises(ValueError, match="labels"):
        Control("k", "k", (1.0, 2.0), labels=("one",))
    ex = toy_explorer()
    with pytest.raises(ValueError, match="k must be one of the grid's values"):
        ex.figure({"k": 2.5})
    with pytest.raises(ValueError, match="unknown controls"):
        ex.figure({"spread": 1.0})
    with pytest.raises(ValueError, match="div_id"):
        ex.html("bad id\"")
    with pytest.raises(ValueError, match="include_plotlyjs"):
        ex.html("ok", include_plotlyjs="cdn")


def test_html_fragment_loads_nothing_remote_and_notebooks_can_inline_plotly(toy_explorer):
    ex = toy_explorer()
    html = ex.html("ex-1")
    assert "<script src" not in html and not re.search(r"https?://[^\"' ]+\.js", html)
    assert 'id="ex-1"' in html and 'id="ex-1-fallback"' in html and "plotly_sliderchange" in html
    inlined = ex.html("ex-2", include_plotlyjs=True)
    assert len(inlined) > 3_000_000 and "<script src" not in inlined


# --- Fig. 4 grid (page explore) -------------------------------------------------------------------


def test_sample_steps_are_dense_early_and_cover_the_run():
    steps = sample_steps(5000, 80)
    assert steps[0] == 0 and steps[-1] == 5000 and steps.size <= 80
    gaps = np.diff(steps)
    assert np.all(gaps > 0) and gaps[:5].max() < gaps[-5:].min() / 10  # quadratic spacing


# --- Theorem 1, Theorem 5 and WikiText grids -----------------------------------------------------------


# --- Sphinx hooks ------------------------------------------------------------------------------------
