"""joma_lib.kit.glue: in the book build glue is myst_nb's; in a plain notebook (no myst_nb) it shows in place."""

from __future__ import annotations

import sys

import pytest
from IPython.display import Image

from joma_lib.kit.glue import and_list, glue

PNG_1PX = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000"
                        "1f15c4890000000d49444154789c6360000002000100ff03000600000000"
                        "49454e44ae426082")


def test_without_myst_nb_a_number_is_printed_only_when_displayed(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "myst_nb", None)  # `import myst_nb` now raises ImportError
    glue("a-number", 1.5, display=True)
    glue("hidden-number", 2.5)
    out = capsys.readouterr().out
    assert "a-number = 1.5" in out and "hidden-number" not in out


def test_without_myst_nb_a_figure_is_shown_in_place(monkeypatch):
    monkeypatch.setitem(sys.modules, "myst_nb", None)
    shown: list[object] = []
    monkeypatch.setattr("IPython.display.display", lambda obj: shown.append(obj))
    glue("a-figure", Image(data=PNG_1PX, format="png"))
    assert len(shown) == 1 and isinstance(shown[0], Image)


def test_with_myst_nb_the_value_goes_to_myst_nb(monkeypatch):
    import myst_nb

    pasted: list[tuple[str, object, bool]] = []
    monkeypatch.setattr(myst_nb, "glue", lambda name, value, display=True: pasted.append((name, value, display)))
    glue("a-number", 1.5)
    assert pasted == [("a-number", 1.5, False)]


def test_and_list_writes_a_list_as_prose():
    assert and_list([10]) == "10"
    assert and_list(["1-", 2]) == "1- and 2"
    assert and_list((1, 2, 5, 10)) == "1, 2, 5 and 10"
    with pytest.raises(ValueError, match="at least one item"):
        and_list([])
