import numpy as np
import pytest

from joma_lib.theory.embeddings import (
    cosine_matrix,
    jl_epsilon,
    max_offdiagonal_cosine,
    orthonormal_embeddings,
    random_embedding_coherence,
)


@pytest.mark.parametrize("seed", [None, 0, 7])
def test_orthonormal_embeddings_have_identity_gram(seed):
    E = orthonormal_embeddings(30, 21, seed=seed)
    assert E.shape == (30, 21)
    np.testing.assert_allclose(E.T @ E, np.eye(21), atol=1e-12)
    assert max_offdiagonal_cosine(E) < 1e-12


def test_coordinate_embeddings_match_authors_toy():
    np.testing.assert_array_equal(orthonormal_embeddings(30, 21, seed=None), np.eye(30, 21))


def test_too_many_tokens_for_dimension_is_rejected():
    with pytest.raises(ValueError, match=r"d must be an integer in \[21, inf\)"):
        orthonormal_embeddings(20, 21)


def test_cosine_matrix_diagonal_and_symmetry():
    rng = np.random.default_rng(1)
    C = cosine_matrix(rng.standard_normal((8, 5)))
    np.testing.assert_allclose(np.diag(C), 1.0)
    np.testing.assert_allclose(C, C.T)


def test_random_coherence_shrinks_with_dimension_and_stays_under_jl_scale():
    d = np.array([32, 128, 512, 2048])
    coh = random_embedding_coherence(d, 200, n_draws=3, seed=0)
    assert np.all(np.diff(coh) < 0)
    assert np.all(coh < jl_epsilon(d, 200))


def test_jl_scale_is_its_formula():
    """eps(d) = sqrt(8 log(n) / d): the bound above holds for any larger constant, so the value is checked too."""
    np.testing.assert_allclose(jl_epsilon(np.array([8.0, 32.0]), 100), np.sqrt(np.log(100.0)) * np.array([1.0, 0.5]),
                               rtol=1e-12)
