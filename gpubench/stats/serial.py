"""Serial correlation estimated from the run: an upper confidence bound on the epochs' AR(1) coefficient ρ, and a
test of correlation between successive round means (a host level that drifts across rounds). Pure numpy.
Coverage: ``benchmarks/statistics_coverage.py --only-history``.
"""

import functools
import itertools
import math
from collections.abc import Sequence

import numpy as np

#: The largest ρ the bound reports: beyond it 20 epochs carry almost no information about the mean.
MAX_RHO = 0.9
_RHO_GRID = np.linspace(0.0, MAX_RHO, 37)
#: Gaps (epochs) the null distribution is tabulated at; a measured gap is floored to one of them, which is
#: conservative (shorter gaps make rounds alike, the statistic smaller, the bound higher).
_GAP_CLASSES = (0, 1, 2, 4, 8, 16, 32, math.inf)
_DRAWS = 4000
#: Round orders enumerated exactly up to this many rounds; beyond, this many seeded random orders.
_EXACT_PERMUTATION_ROUNDS = 7
_RANDOM_PERMUTATIONS = 5000


def lag1_within_rounds(parts: Sequence[np.ndarray]) -> np.ndarray:
    """Σ (y_t − ȳ)(y_{t+1} − ȳ) over neighbours inside each round ÷ Σ (y_t − ȳ)², ȳ the mean of every epoch;
    ``parts`` are rounds of shape (..., n_i), the statistic is taken over the last axis."""
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
    """The ``alpha`` quantile of :func:`lag1_within_rounds` under AR(1) epochs at each ρ of the grid, rounds ``gap``
    epochs apart (seeded Monte Carlo, the same draws at every ρ)."""
    rng = np.random.default_rng(0)
    shocks = rng.standard_normal((_DRAWS, sum(counts)))
    starts = set(np.cumsum(counts)[:-1].tolist())
    quantiles = []
    for rho in _RHO_GRID:
        x = np.empty_like(shocks)
        x[:, 0] = shocks[:, 0]
        for t in range(1, x.shape[1]):
            # The process runs on through a gap of g epochs: g + 1 steps of the AR(1) recursion at once.
            decay = rho ** (gap + 1) if t in starts else rho
            x[:, t] = decay * x[:, t - 1] + math.sqrt(1.0 - decay**2) * shocks[:, t]
        parts = np.split(x, np.cumsum(counts)[:-1], axis=1)
        quantiles.append(np.quantile(lag1_within_rounds(parts), alpha))
    return np.maximum.accumulate(np.array(quantiles))


def rho_upper_bound(parts: Sequence[np.ndarray], gaps_epochs: Sequence[float] | None, confidence_level: float) -> float:
    """A one-sided (1 + ``confidence_level``) / 2 upper bound on the epochs' lag-1 autocorrelation ρ, in
    [0, :data:`MAX_RHO`]: the largest ρ under which the run's :func:`lag1_within_rounds` is not in the lower
    (1 − level) / 2 tail (test inversion). A host level per round or a drift only raise the statistic."""
    counts = tuple(int(p.size) for p in parts)
    if sum(counts) - len(counts) < 2:
        return MAX_RHO
    alpha = round((1.0 - confidence_level) / 2.0, 6)
    quantiles = _null_quantiles(counts, _gap_class(gaps_epochs, len(counts)), alpha)
    return float(np.interp(float(lag1_within_rounds(list(parts))), quantiles, _RHO_GRID))


def round_means_lag1(round_means: np.ndarray) -> np.ndarray:
    """The lag-1 autocorrelation of round means (rows of ``round_means``, centred on their own mean)."""
    centred = round_means - round_means.mean(axis=-1, keepdims=True)
    squares = (centred**2).sum(axis=-1)
    products = (centred[..., 1:] * centred[..., :-1]).sum(axis=-1)
    return np.divide(products, squares, out=np.zeros_like(squares), where=squares > 0)


def round_serial_test(round_means: Sequence[float]) -> tuple[float, float]:
    """(r₁, one-sided p) for positive correlation between successive round means: the permutation test of their
    lag-1 autocorrelation (exact over every order up to 7 rounds, else 5,000 seeded orders), valid whatever the
    host level's size when the rounds' levels are exchangeable. Fewer than three rounds: (0, 1)."""
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
    """The correlation φ between successive round means the interval carries: 0 unless :func:`round_serial_test`
    rejects at 1 − ``confidence_level``, then r₁ + (1 + 4 r₁)/R (its first-order bias corrected, Kendall 1954) in
    (0, :data:`MAX_RHO`]."""
    r1, p_value = round_serial_test(round_means)
    if p_value >= 1.0 - confidence_level:
        return 0.0
    return float(np.clip(r1 + (1.0 + 4.0 * r1) / len(round_means), 0.0, MAX_RHO))
