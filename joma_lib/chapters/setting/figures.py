"""Figures of "The setting" page: orthonormal embeddings (checked on pretrained models in the audit appendix,
:mod:`joma_lib.chapters.audit.figures`)."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from joma_lib.theory.embeddings import cosine_matrix, jl_epsilon, orthonormal_embeddings, random_embedding_coherence
from joma_lib.kit.registry import Claim, FigureData, FigureSpec, Tolerance
from joma_lib.base.validation import check_int


def make_embeddings(d: int = 30, n_tokens: int = 21, n_vocab: int = 1000,
                    d_values: tuple[int, ...] = (16, 32, 64, 128, 256, 512, 1024, 2048),
                    n_draws: int = 10, seed: int = 0) -> FigureData:
    """Data of the embedding figure.

    * ``gram_orthonormal``: ``E^T E`` for orthonormal ``[U_C, u_q]`` (``n_tokens`` = M_C + 1 columns in R^d);
      it is the identity, which is all the assumption says.
    * ``gram_random``: the cosine matrix of Gaussian embeddings of the same size, for contrast.
    * ``coherence``: mean max off-diagonal |cos| of ``n_vocab`` Gaussian embeddings vs ``d``,
      and ``jl_eps`` the Johnson-Lindenstrauss scale ``sqrt(8 log n / d)``.
    """
    d = check_int("d", d, 1)
    n_tokens = check_int("n_tokens", n_tokens, 1, d)
    rng = np.random.default_rng(check_int("seed", seed, 0))
    E = orthonormal_embeddings(d, n_tokens, seed=seed)
    dv = np.asarray(d_values, dtype=int)
    return {
        "gram_orthonormal": E.T @ E,
        "gram_random": cosine_matrix(rng.standard_normal((d, n_tokens))),
        "d_values": dv,
        "coherence": random_embedding_coherence(dv, n_vocab, n_draws=n_draws, seed=seed + 1),
        "jl_eps": jl_epsilon(dv, n_vocab),
        "n_vocab": np.asarray(n_vocab),
    }


def plot_embeddings(data: FigureData) -> Figure:
    """Left/middle: Gram matrices (orthonormal vs random); right: coherence of random embeddings vs d."""
    fig = Figure(figsize=(8.8, 3.2), layout="constrained")
    axes = fig.subplots(1, 3)
    for ax, key, title in [(axes[0], "gram_orthonormal", r"orthonormal $[U_C, u_q]$: $E^\top E = I$"),
                           (axes[1], "gram_random", "Gaussian embeddings: cosine matrix")]:
        im = ax.imshow(data[key], cmap="RdBu_r", vmin=-1, vmax=1)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("token")
        ax.set_ylabel("token")
        ax.grid(False)
    fig.colorbar(im, ax=axes[:2], shrink=0.8, label="cosine similarity")
    ax = axes[2]
    ax.loglog(data["d_values"], data["coherence"], "o-", label=r"max$_{i\neq j}|\cos|$, Gaussian")
    ax.loglog(data["d_values"], data["jl_eps"], "k--", label=r"JL scale $\sqrt{8\ln n/d}$")
    ax.set_xlabel("embedding dimension $d$")
    ax.set_ylabel("coherence")
    ax.set_title(f"{int(data['n_vocab'])} random tokens", fontsize=10)
    ax.legend(fontsize=9)
    return fig


SETTING_CLAIMS = (
    Claim("setting-orthonormal-embeddings", "the setting (orthonormal-embeddings assumption)",
          r"The embeddings the analysis assumes are orthonormal: $\max|U^\top U - I|$",
          lambda d: float(np.abs(d["gram_orthonormal"] - np.eye(len(d["gram_orthonormal"]))).max()), "<", 1e-12,
          kind="sanity", threshold_set="before-data"),
    Claim("setting-random-near-orthogonal", "the setting (orthonormal-embeddings assumption)",
          "Random embeddings approach it as the dimension grows: coherence / Johnson-Lindenstrauss bound, worst d "
          "(and the coherence must fall with d)",
          lambda d: float(np.max(d["coherence"] / d["jl_eps"])) if np.all(np.diff(d["coherence"]) < 0)
          else float("nan"), "<", 1.0,
          kind="sanity", threshold_set="before-data"),
)


FIGURES = [
    FigureSpec(
        fig_id="c-setting-embeddings",
        title="Orthonormal embeddings, and how far random embeddings are from them",
        paper_ref="companion (the setting's orthonormal-embeddings assumption)",
        chapter="book/setting.md",
        make=make_embeddings,
        plot=plot_embeddings,
        default_tol=Tolerance(rtol=1e-9, atol=1e-12),
        claims=SETTING_CLAIMS,
    ),
]
