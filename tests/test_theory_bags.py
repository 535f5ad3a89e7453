"""The block's inputs: the bags of Figs. 2-3 and the Dirichlet bags."""

from __future__ import annotations

import numpy as np
import pytest

from joma_lib.theory.bags import dirichlet_bags, gaussian_or_random_bags


def test_bag_generators_reject_bad_arguments():
    with pytest.raises(ValueError, match="concentration"):
        dirichlet_bags(8, 4, 10, concentration=0.0)
    with pytest.raises(ValueError, match="variant"):
        gaussian_or_random_bags("uniform")


def test_fig2_inputs():
    for variant in ("gaussian", "random"):
        X, y = gaussian_or_random_bags(variant, seed=1)
        assert X.shape == (20, 20) and np.all(X > 0)
        np.testing.assert_allclose(X.sum(axis=0), 1.0, rtol=1e-12)
        np.testing.assert_array_equal(y, np.arange(20))
    X, _ = gaussian_or_random_bags("gaussian", seed=1)
    # the bump over the distinct tokens moves with the class: its peak is at token round(c * 10 / 20)
    assert np.all(np.abs(X[:10].argmax(axis=0) - np.arange(20) / 2) <= 0.5)
