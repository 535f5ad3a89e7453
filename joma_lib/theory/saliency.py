"""Saliency of a contextual token: ``Delta_lm = E[g | l, m] P[l | m]`` (paper, Theorem 2).

For a query token ``m`` the linear modified MLP (Theorem 2) grows ``v_l`` at the rate
``Delta_lm = E_{q=m}[g_h x_l]``. When ``x_l`` is the indicator "token ``l`` is in the
context", this expectation factorises exactly into

* **discriminancy** ``E[g | l, m]``: the mean back-propagated gradient over the sequences
  that contain ``l`` (near 0 for a token spread evenly over the targets, of consistent sign
  for a token specific to one target), times
* **co-occurrence** ``P[l | m]``: how often ``l`` appears with the query.

This module builds a small explicit token distribution, computes the three quantities
exactly, estimates each of them by Monte Carlo from its own independent samples (so the factorisation is
tested, not assumed: :func:`monte_carlo_factors`), and feeds the saliencies to Theorem 2's closed
form to show that the most salient token takes the attention.

The token model (targets, presence probabilities, gradient ``g = 1[y = target] - 1/N_cls`` of a
cross-entropy output at a uniform prediction) is this companion's illustration, not a model
from the paper.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import softmax
from scipy.stats import sem

from joma_lib.theory.dynamics import linear_closed_form, SQRT_PI_OVER_2
from joma_lib.theory.softmax_dynamics import row_entropy
from joma_lib.base.validation import as_finite_array, check_float, check_int


@dataclass(frozen=True)
class TokenModel:
    """A query ``m`` with ``N_cls`` possible targets (classes) ``y`` and ``M_C`` contextual tokens.

    Attributes:
        class_prob: ``P[y | m]``, shape ``(N_cls,)``, sums to 1.
        presence: ``P[x_l = 1 | y, m]``, shape ``(N_cls, M_C)``; tokens appear independently given ``y``.
        grad: ``E[g | y, m]``, shape ``(N_cls,)``: the back-propagated gradient at the hidden node
            for each target (stationary, Assumption 1).
        names: one label per contextual token.
    """

    class_prob: np.ndarray
    presence: np.ndarray
    grad: np.ndarray
    names: tuple[str, ...]

    def __post_init__(self) -> None:
        p = as_finite_array("class_prob", self.class_prob, min_ndim=1)
        x = as_finite_array("presence", self.presence, min_ndim=2)
        g = as_finite_array("grad", self.grad, min_ndim=1)
        if p.ndim != 1 or np.any(p < 0) or abs(p.sum() - 1) > 1e-12:
            raise ValueError(f"class_prob must be a probability vector, got {self.class_prob!r}")
        if x.ndim != 2 or x.shape[0] != p.size or np.any(x < 0) or np.any(x > 1):
            raise ValueError(f"presence must be an (N_cls, M_C) array of probabilities with N_cls = {p.size}, "
                             f"got shape {x.shape}")
        if g.shape != p.shape:
            raise ValueError(f"grad must have shape {p.shape}, got {g.shape}")
        if len(self.names) != x.shape[1]:
            raise ValueError(f"names must have {x.shape[1]} entries, got {len(self.names)}")
        if np.any(p @ x == 0):
            raise ValueError("every contextual token must have P[l | m] > 0")
        for name, value in (("class_prob", p), ("presence", x), ("grad", g), ("names", tuple(self.names))):
            object.__setattr__(self, name, value)  # the checked float arrays, not what was passed (e.g. lists)


def toy_token_model(n_classes: int = 4) -> TokenModel:
    """A hand-made vocabulary of 8 contextual tokens for a query whose hidden node serves target 0.

    Distinct tokens of target 0 (frequent, rare, leaky), distinct tokens of other targets,
    and common tokens of different frequencies; ``P[y|m]`` uniform and
    ``g = 1[y = 0] - 1/N_cls``, so that ``E[g | m] = 0`` and common tokens get zero saliency.
    """
    n_cls = check_int("n_classes", n_classes, 3, 50)
    presence = np.zeros((n_cls, 8))
    presence[0, 0] = 0.9                      # distinct to target 0, frequent
    presence[0, 1] = 0.3                      # distinct to target 0, rare
    presence[:, 2] = 0.1
    presence[0, 2] = 0.7                      # mostly with target 0, leaks to the others
    presence[1, 3] = 0.8                      # distinct to target 1
    presence[2, 4] = 0.5                      # distinct to target 2
    presence[:, 5] = 0.95                     # common, almost always there
    presence[:, 6] = 0.5                      # common, half of the time
    presence[:, 7] = 0.2                      # common, rare
    names = ("dist-0 freq", "dist-0 rare", "mostly-0", "dist-1", "dist-2", "common 95%", "common 50%", "common 20%")
    grad = -np.full(n_cls, 1.0 / n_cls)
    grad[0] += 1.0
    return TokenModel(np.full(n_cls, 1.0 / n_cls), presence, grad, names)


def cooccurrence(model: TokenModel) -> np.ndarray:
    """``P[l | m] = sum_y P[y|m] P[x_l = 1 | y, m]``, shape ``(M_C,)``."""
    return model.class_prob @ model.presence


def discriminancy(model: TokenModel) -> np.ndarray:
    """``E[g | l, m] = sum_y P[y | l, m] E[g | y, m]`` (Bayes: ``P[y|l] = P[y] P[l|y] / P[l]``)."""
    return (model.class_prob * model.grad) @ model.presence / cooccurrence(model)


def saliency(model: TokenModel) -> np.ndarray:
    """``Delta_lm = E_{q=m}[g x_l]``, computed directly from the joint distribution, shape ``(M_C,)``.

    Algebraically equal to ``discriminancy(model) * cooccurrence(model)`` (the exact forms share the joint
    distribution, so comparing them checks arithmetic only); the factorisation itself is checked against
    independent Monte-Carlo estimates of the three quantities (:func:`monte_carlo_factors`).
    """
    return np.einsum("y,y,yl->l", model.class_prob, model.grad, model.presence)


def sample_tokens(model: TokenModel, n_samples: int, grad_noise: float = 0.5,
                  seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Draw ``n_samples`` sequences: target ``y``, presence indicators ``x`` (n_samples, M_C), gradient ``g``.

    ``g = E[g | y] + grad_noise * N(0, 1)``: the per-sample gradient fluctuates around its
    class mean, as it would with a trained readout.
    """
    n = check_int("n_samples", n_samples, 1, 10**8)
    noise = check_float("grad_noise", grad_noise, 0, 1e6)  # beyond, the noise alone overflows float64's sums
    rng = np.random.default_rng(check_int("seed", seed, 0))
    y = rng.choice(model.class_prob.size, size=n, p=model.class_prob)
    x = (rng.random((n, model.presence.shape[1])) < model.presence[y]).astype(np.float64)
    g = model.grad[y] + noise * rng.standard_normal(n)
    return y, x, g


@dataclass(frozen=True)
class SaliencyEstimate:
    """Monte-Carlo estimates from ``n`` samples, each of shape ``(M_C,)``.

    * ``indicator``: mean of ``g x_l`` with ``x_l`` the presence indicator; estimates
      ``Delta_lm`` (and so ``E[g|l,m] P[l|m]``), with standard error ``stderr``;
    * ``frequency``: mean of ``g x_l`` with ``x_l`` the *normalised* bag of words
      (``x_l / sum_l' x_l'``, each context summing to 1, as in the authors' toy code); the
      factorisation does not hold for it, which shows that it needs indicator inputs.
    """

    indicator: np.ndarray
    stderr: np.ndarray
    frequency: np.ndarray


def monte_carlo_saliency(model: TokenModel, n_samples: int = 200_000, grad_noise: float = 0.5,
                         seed: int = 0) -> SaliencyEstimate:
    """Estimate ``E[g x_l | m]`` from samples of :func:`sample_tokens` (indicator and normalised ``x``)."""
    _, x, g = sample_tokens(model, n_samples, grad_noise, seed)
    gx = g[:, None] * x
    bag = x / np.maximum(x.sum(axis=1, keepdims=True), 1.0)
    return SaliencyEstimate(gx.mean(axis=0), sem(gx, axis=0),
                            (g[:, None] * bag).mean(axis=0))


@dataclass(frozen=True)
class FactorEstimate:
    """Independent Monte-Carlo estimates of the two factors of the saliency, each of shape ``(M_C,)``.

    ``discriminancy``: mean of ``g`` over the sampled sequences that contain ``l`` (``E[g | l, m]``);
    ``cooccurrence``: fraction of sequences that contain ``l`` (``P[l | m]``), from a second, independent
    sample; each with its standard error.
    """

    discriminancy: np.ndarray
    discriminancy_stderr: np.ndarray
    cooccurrence: np.ndarray
    cooccurrence_stderr: np.ndarray

    def factorisation_z(self, saliency_estimate: SaliencyEstimate) -> np.ndarray:
        """``(E[g x_l] - E[g|l] P[l]) / s.e.`` per token, all three from independent samples.

        The product's variance is taken to first order (``P^2 var(E) + E^2 var(P)``); under the
        factorisation the scores are approximately standard normal.
        """
        product = self.discriminancy * self.cooccurrence
        var = ((self.cooccurrence * self.discriminancy_stderr) ** 2
               + (self.discriminancy * self.cooccurrence_stderr) ** 2)
        return (saliency_estimate.indicator - product) / np.sqrt(var + saliency_estimate.stderr ** 2)


def monte_carlo_factors(model: TokenModel, n_samples: int = 200_000, grad_noise: float = 0.5,
                        seed: int = 0) -> FactorEstimate:
    """Estimate ``E[g | l, m]`` and ``P[l | m]`` by Monte Carlo, each from its own sample (seeds ``seed + 1``
    and ``seed + 2``, independent of :func:`monte_carlo_saliency` with ``seed``)."""
    seed = check_int("seed", seed, 0)
    _, x, g = sample_tokens(model, n_samples, grad_noise, seed + 1)
    count = x.sum(axis=0)
    if np.any(count < 2):
        raise ValueError(f"n_samples={n_samples} is too small: some token appears fewer than twice")
    mean = (g[:, None] * x).sum(axis=0) / count
    var = ((g[:, None] - mean) ** 2 * x).sum(axis=0) / (count - 1)
    _, x2, _ = sample_tokens(model, n_samples, grad_noise, seed + 2)
    p = x2.mean(axis=0)
    return FactorEstimate(mean, np.sqrt(var / count), p, np.sqrt(p * (1 - p) / x2.shape[0]))


@dataclass(frozen=True)
class SalientWins:
    """Theorem 2 run on a token model.

    ``t`` (n_times,) and ``time_left`` = 1 - t/t* (n_times,), the time left before the blow-up; ``v`` (n_times, M_C);
    expected ``attention`` (n_times, M_C); its ``entropy`` (n_times,).
    """

    t: np.ndarray
    time_left: np.ndarray
    v: np.ndarray
    attention: np.ndarray
    entropy: np.ndarray


def salient_token_dynamics(model: TokenModel, n_times: int = 200, min_time_left: float = 1e-4) -> SalientWins:
    """Theorem 2 with the model's saliencies: ``v(t)`` in closed form and the resulting attention.

    With exp attention and zero initialisation, Theorem 1 gives logits ``z = v^2/2``, so the
    expected attention on token ``l`` is ``P[l|m] exp(v_l^2/2)``, normalised here to a
    distribution. Since everything decisive happens just before the blow-up time ``t*``,
    the times are spaced geometrically in the time left ``1 - t/t*``, from 1 down to ``min_time_left`` (at least
    1e-15: below that ``1 - time_left`` rounds to 1 in float64, ``t`` reaches ``t*`` and ``v`` is infinite).
    """
    n_times = check_int("n_times", n_times, 2, 100_000)
    min_time_left = check_float("min_time_left", min_time_left, 1e-15, 1, high_open=True)
    saliencies = saliency(model)
    time_left = np.geomspace(1.0, min_time_left, n_times)
    t = (1.0 - time_left) * SQRT_PI_OVER_2 / np.max(np.abs(saliencies))
    v = linear_closed_form(saliencies, t)
    logits = np.log(cooccurrence(model)) + 0.5 * v * v
    b = softmax(logits, axis=1)
    return SalientWins(t, time_left, v, b, np.asarray(row_entropy(b)))
