"""Serial correlation from the run: an upper bound on the epochs' AR(1) ρ, and a test of correlation between
successive round means (a host level drifting across rounds)."""

import functools
import itertools
import math
from collections.abc import Sequence

import numpy as np

#: Beyond it 20 epochs carry almost no information about the mean.
MAX_RHO = 0.9
_RHO_GRID = np.linspace(0.0, MAX_RHO, 37)
#: A measured gap (epochs) is floored to one of these, conservatively: shorter gaps raise the bound.
_GAP_CLASSES = (0, 1, 2, 4, 8, 16, 32, math.inf)
_DRAWS = 4000
_EXACT_PERMUTATION_ROUNDS = 7
_RANDOM_PERMUTATIONS = 5000


def lag1_within_rounds(parts: Sequence[np.ndarray]) -> np.ndarray:
    """Σ (y_t − ȳ)(y_{t+1} − ȳ) over neighbours within rounds ÷ Σ (y_t − ȳ)², over the last axis of ``parts``."""
    values = np.concatenate(parts, axis=-1)
    mean = values.mean(axis=-1, keepdims=True)
    products = sum(((p[..., 1:] - mean) * (p[..., :-1] - mean)).sum(axis=-1) for p in parts)
    squares = ((values - mean) ** 2).sum(axis=-1)
    return np.divide(products, squares, out=np.zeros_like(squares), where=squares > 0)


def _gap_class(gaps_epochs: Sequence[float] | None, rounds: int) -> float:
    if rounds < 2:
        return math.inf
    smallest = min(gaps_epochs) if gaps_epochs else 0.0
    return max(g for g in _GAP_CLASSES if g <= smallest)


@functools.lru_cache(maxsize=256)
def _null_quantiles(counts: tuple[int, ...], gap: float, alpha: float) -> np.ndarray:
    """The ``alpha`` quantile of :func:`lag1_within_rounds` under AR(1) at each ρ of the grid (seeded Monte Carlo)."""
    rng = np.random.default_rng(0)
    shocks = rng.standard_normal((_DRAWS, sum(counts)))
    starts = set(np.cumsum(counts)[:-1].tolist())
    quantiles = []
    for rho in _RHO_GRID:
        x = np.empty_like(shocks)
        x[:, 0] = shocks[:, 0]
        for t in range(1, x.shape[1]):
            # Through a gap of g epochs: g + 1 steps at once.
            decay = rho ** (gap + 1) if t in starts else rho
            x[:, t] = decay * x[:, t - 1] + math.sqrt(1.0 - decay**2) * shocks[:, t]
        parts = np.split(x, np.cumsum(counts)[:-1], axis=1)
        quantiles.append(np.quantile(lag1_within_rounds(parts), alpha))
    return np.maximum.accumulate(np.array(quantiles))


def rho_upper_bound(parts: Sequence[np.ndarray], gaps_epochs: Sequence[float] | None, confidence_level: float) -> float:
    """A one-sided (1 + ``confidence_level``) / 2 upper bound on the epochs' ρ in [0, :data:`MAX_RHO`], inverting
    the test of :func:`lag1_within_rounds` (a host level per round or a drift only raise it)."""
    counts = tuple(int(p.size) for p in parts)
    if sum(counts) - len(counts) < 2:
        return MAX_RHO
    alpha = round((1.0 - confidence_level) / 2.0, 6)
    quantiles = _null_quantiles(counts, _gap_class(gaps_epochs, len(counts)), alpha)
    return float(np.interp(float(lag1_within_rounds(list(parts))), quantiles, _RHO_GRID))


def round_means_lag1(round_means: np.ndarray) -> np.ndarray:
    """The lag-1 autocorrelation of each row of ``round_means``."""
    centred = round_means - round_means.mean(axis=-1, keepdims=True)
    squares = (centred**2).sum(axis=-1)
    products = (centred[..., 1:] * centred[..., :-1]).sum(axis=-1)
    return np.divide(products, squares, out=np.zeros_like(squares), where=squares > 0)


def round_serial_test(round_means: Sequence[float]) -> tuple[float, float]:
    """(r₁, one-sided p) of the permutation test for positive lag-1 correlation of round means (exact up to
    :data:`_EXACT_PERMUTATION_ROUNDS` rounds, else seeded orders); under three rounds (0, 1)."""
    values = np.asarray(round_means, dtype=float)
    if values.size < 3:
        return 0.0, 1.0
    observed = float(round_means_lag1(values))
    if values.size <= _EXACT_PERMUTATION_ROUNDS:
        orders = np.array(list(itertools.permutations(range(values.size))))
    else:
        rng = np.random.default_rng(0)
        orders = np.array([rng.permutation(values.size) for _ in range(_RANDOM_PERMUTATIONS)])
    null = round_means_lag1(values[orders])
    return observed, float(np.mean(null >= observed - 1e-12))


def carried_round_correlation(round_means: Sequence[float], confidence_level: float) -> float:
    """φ between successive round means: 0 unless :func:`round_serial_test` rejects, then r₁ + (1 + 4 r₁)/R (bias
    corrected, Kendall 1954), clipped to :data:`MAX_RHO`."""
    r1, p_value = round_serial_test(round_means)
    if p_value >= 1.0 - confidence_level:
        return 0.0
    return float(np.clip(r1 + (1.0 + 4.0 * r1) / len(round_means), 0.0, MAX_RHO))
