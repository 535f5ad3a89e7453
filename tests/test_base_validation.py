import pytest

from joma_lib.base.validation import check_choice, check_float, check_int


def test_check_int_accepts_in_range_and_names_parameter_otherwise():
    assert check_int("K", 3, 1) == 3
    with pytest.raises(ValueError, match=r"K must be an integer in \[1, inf\), got 0"):
        check_int("K", 0, 1)
    with pytest.raises(ValueError, match="K must be an integer"):
        check_int("K", 2.5, 1)
    with pytest.raises(ValueError, match="K must be an integer"):
        check_int("K", True, 1)


def test_check_float_open_and_closed_ends():
    assert check_float("T", 0.5, 0, low_open=True) == 0.5
    with pytest.raises(ValueError, match=r"T must be in \(0, inf\), got 0"):
        check_float("T", 0.0, 0, low_open=True)
    assert check_float("p", 1.0, 0, 1) == 1.0
    with pytest.raises(ValueError, match=r"p must be in \[0, 1\)"):
        check_float("p", 1.0, 0, 1, high_open=True)
    with pytest.raises(ValueError, match="finite"):
        check_float("lr", float("nan"), 0)


def test_check_choice_lists_options():
    assert check_choice("phi", "relu", ["relu", "tanh"]) == "relu"
    with pytest.raises(ValueError, match=r"phi must be one of \['relu', 'tanh'\], got 'gelu'"):
        check_choice("phi", "gelu", ["relu", "tanh"])
