"""The setting chapter (joma_lib.chapters.setting): orthonormal embeddings against random ones, and its claims."""

from __future__ import annotations

import numpy as np
import pytest

from joma_lib.chapters.setting.figures import SETTING_CLAIMS, make_embeddings, plot_embeddings


@pytest.fixture(scope="module")
def data() -> dict[str, np.ndarray]:
    return make_embeddings(d=12, n_tokens=7, n_vocab=200, d_values=(16, 64, 256), n_draws=3)


def test_the_orthonormal_gram_is_the_identity_and_the_random_one_is_a_cosine_matrix(data):
    np.testing.assert_allclose(data["gram_orthonormal"], np.eye(7), atol=1e-12)
    random = data["gram_random"]
    np.testing.assert_allclose(np.diag(random), 1.0, rtol=1e-12)
    np.testing.assert_allclose(random, random.T)
    assert np.abs(random - np.eye(7)).max() > 0.05  # random vectors in R^12 are not orthogonal


def test_coherence_falls_with_the_dimension_below_the_jl_scale(data):
    np.testing.assert_allclose(data["jl_eps"], np.sqrt(8 * np.log(200) / data["d_values"]), rtol=1e-12)
    assert np.all(np.diff(data["coherence"]) < 0) and np.all(data["coherence"] < data["jl_eps"])


def test_both_claims_hold_and_the_first_fails_on_a_sheared_basis(data):
    assert [claim.evaluate(data)[1] for claim in SETTING_CLAIMS] == ["holds", "holds"]
    sheared = dict(data, gram_orthonormal=data["gram_orthonormal"] + 1e-6 * np.ones((7, 7)))
    assert SETTING_CLAIMS[0].evaluate(sheared)[1] == "fails"


def test_the_orthonormality_claim_is_the_largest_entry_off_the_identity_either_way(data):
    for sign in (1.0, -1.0):  # one off-diagonal entry moved, up or down: the value is its move
        gram = data["gram_orthonormal"].copy()
        gram[2, 5] += sign * 1e-6
        assert SETTING_CLAIMS[0].evaluate({**data, "gram_orthonormal": gram})[0] == pytest.approx(1e-6, rel=1e-6)


def test_the_coherence_claim_is_its_worst_dimension_and_needs_a_fall_at_every_step():
    ratio = SETTING_CLAIMS[1].measure
    falling = {"coherence": np.array([0.5, 0.3, 0.2]), "jl_eps": np.array([1.0, 1.0, 0.25])}
    assert ratio(falling) == pytest.approx(0.8)  # the last dimension's 0.2 / 0.25
    for coherence in ([0.3, 0.5, 0.2], [0.5, 0.3, 0.4]):  # rises first, or last
        assert np.isnan(ratio({**falling, "coherence": np.array(coherence)})), coherence
    assert np.isnan(ratio({**falling, "jl_eps": np.array([1.0, np.nan, 0.25])}))  # a bound lost after the first


def test_the_figure_draws_and_bad_sizes_name_the_argument(data):
    assert len(plot_embeddings(data).axes) >= 3
    with pytest.raises(ValueError, match="n_tokens"):
        make_embeddings(d=4, n_tokens=5)
