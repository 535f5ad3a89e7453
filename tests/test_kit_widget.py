"""The one widget API (joma_lib.kit.widget): every widget reports values it cannot honour in its status line and
recovers on the next valid input."""

from __future__ import annotations

import math

import pytest
import torch

from joma_lib.chapters.hierarchy.widget import CooccurrenceWidget
from joma_lib.kit.widget import LiveWidget
from joma_lib.chapters.theorem1.widget import theorem1_live_widget
from joma_lib.chapters.theorem3.widget import RestingPointWidget
from joma_lib.chapters.theorem4.widget import ModifiedMLPWidget, simulate_profile

torch.set_num_threads(1)

WIDGETS = {
    "theorem1": lambda: theorem1_live_widget(attention="linear", phi="identity"),
    "theorem3": lambda: RestingPointWidget(n_starts=3, t_max=20.0),
    "theorem4": lambda: ModifiedMLPWidget(n_steps=200),
    "hierarchy": lambda: CooccurrenceWidget(tree_height=6),
}

# (widget, bad values, words the message must contain, good values that must redraw afterwards)
CASES = [
    ("theorem4", {"eta": math.nan}, ["eta", "finite"], {"eta": 0.05}),
    ("theorem4", {"temperature": 0.0}, ["temperature", "0.25"], {"temperature": 1.0}),
    ("theorem4", {"n_steps": 0}, ["n_steps", "100"], {"n_steps": 300}),
    ("theorem4", {"low": 3.0, "high": 2.0}, ["high", "3"], {"high": 5.0}),  # refused by the computation
    ("theorem4", {"profile": "cubic"}, ["profile", "geometric"], {"profile": "linear"}),
    ("hierarchy", {"tree_height": 0}, ["tree_height", "[2, 20]"], {"tree_height": 5}),
    ("hierarchy", {"rho": -0.5}, ["rho"], {"tie_rho": False, "rho": 0.5}),
    ("theorem1", {"seed": -1}, ["seed", "[0, 9]"], {"seed": 3}),
    ("theorem1", {"lr_ratio": 3.0}, ["lr_ratio", "one of"], {"lr_ratio": 2.0}),
    ("theorem3", {"weight_decay": 0.0}, ["weight_decay", "[0.1, 1.5]"], {"weight_decay": 0.4}),
    ("theorem3", {"bias": math.nan}, ["bias", "finite"], {"bias": -0.5}),
]


@pytest.fixture(scope="module")
def live_widgets() -> dict[str, LiveWidget]:
    return {name: build() for name, build in WIDGETS.items()}


@pytest.mark.parametrize("name", WIDGETS)
def test_every_widget_draws_on_creation(live_widgets, name):
    widget = live_widgets[name]
    assert isinstance(widget, LiveWidget) and widget.error is None
    assert widget.image.value[:8] == b"\x89PNG\r\n\x1a\n"
    assert widget.widget.children and widget.status.value


@pytest.mark.parametrize(("name", "bad", "words", "good"), CASES)
def test_bad_values_are_reported_in_the_widget_and_it_recovers(live_widgets, name, bad, words, good):
    widget = live_widgets[name]
    before_image, before_values = widget.image.value, widget.values
    assert widget.update(**bad) == 0.0
    assert widget.error is not None and all(word in widget.status.value for word in words), widget.status.value
    assert widget.image.value == before_image  # the last good drawing stays
    if name != "theorem4" or "low" not in bad:  # the low/high pair is settable; the computation refuses it
        assert widget.values == before_values
    assert widget.update(**good) > 0.0
    assert widget.error is None and "color:#b00" not in widget.status.value
    assert all(widget.values[k] == v for k, v in good.items())


def test_a_control_change_the_computation_refuses_does_not_raise(live_widgets):
    widget = live_widgets["theorem4"]
    widget.update(low=1.0, high=4.0)
    widget.controls["low"].value = 4.0
    widget.controls["high"].value = 2.0  # observed change: low > high
    assert widget.error is not None and "high" in widget.status.value
    widget.controls["high"].value = 5.0
    assert widget.error is None


def test_unknown_control_names_are_a_programming_error(live_widgets):
    with pytest.raises(ValueError, match="unknown controls"):
        live_widgets["hierarchy"].update(colour="red")


def test_compute_functions_raise_value_errors_naming_the_parameter():
    with pytest.raises(ValueError, match="high"):
        simulate_profile(low=3.0, high=2.0, n_steps=100)
    with pytest.raises(ValueError, match="eta"):
        simulate_profile(eta=math.nan, n_steps=100)
