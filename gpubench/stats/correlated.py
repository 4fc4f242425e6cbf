"""Linear estimates under AR(1) correlation: of a model's epochs and round means on its timeline (rounds
``gaps_epochs`` apart in model epochs; 0: back to back, ``math.inf``: independent), with their variance and degrees
of freedom up to a scale."""

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


def _check_rho(rho: float) -> None:
    if not 0.0 <= rho < 1.0:
        raise ValueError(f"the AR(1) correlation must be in [0, 1), got {rho!r}")


def _check_gaps(counts: Sequence[int], gaps_epochs: Sequence[float]) -> list[float]:
    gaps = [float(g) for g in gaps_epochs]
    if len(gaps) != len(counts) - 1 or any(not g >= 0 for g in gaps):
        raise ValueError(f"need {len(counts) - 1} gap(s) of at least 0 epochs between {len(counts)} rounds, got {gaps}")
    return gaps


def ar1_timeline_correlation(counts: Sequence[int], gaps_epochs: Sequence[float], rho: float) -> np.ndarray:
    """Correlation matrix of a model's epochs in rounds of ``counts`` epochs: ρ^|distance| on the timeline, where an
    AR(1) process at ``rho`` per epoch runs on through the R − 1 ``gaps_epochs`` (none across an infinite gap)."""
    gaps = _check_gaps(counts, gaps_epochs)
    n = sum(counts)
    matrix = np.zeros((n, n))
    # An infinite gap starts a new, independent segment.
    first_epoch, position, positions = 0, 0.0, []
    for i, count in enumerate(counts):
        positions.extend(position + np.arange(count))
        position += count
        if i == len(counts) - 1 or math.isinf(gaps[i]):
            block = np.array(positions)
            size = block.size
            matrix[first_epoch : first_epoch + size, first_epoch : first_epoch + size] = rho ** np.abs(
                np.subtract.outer(block, block)
            )
            first_epoch, position, positions = first_epoch + size, 0.0, []
        else:
            position += gaps[i]
    return matrix


def _mean_variance(counts: np.ndarray, rho: float) -> np.ndarray:
    """Var of the mean of n consecutive AR(1) epochs of unit variance, (1/n²) Σ_jk ρ^|j−k|, in closed form."""
    return (counts * (1 + rho) / (1 - rho) - 2 * rho * (1 - rho**counts) / (1 - rho) ** 2) / counts**2


def round_means_correlation(counts: Sequence[int], gaps_epochs: Sequence[float], rho: float) -> np.ndarray:
    """The R × R covariance A Σ A' of the round means of :func:`ar1_timeline_correlation`'s epochs (A averages each
    round), in closed form: off the diagonal ρ^d · G(n_i) G(n_j) / (n_i n_j), G(n) = (1 − ρⁿ)/(1 − ρ), d from round
    i's last epoch to round j's first."""
    _check_rho(rho)
    gaps = np.array(_check_gaps(counts, gaps_epochs))
    n = np.array(counts, dtype=float)
    if n.size == 0 or np.any(n < 1):
        raise ValueError(f"rounds need at least one epoch each, got {list(counts)}")
    infinite = np.isinf(gaps)
    segment = np.concatenate(([0], np.cumsum(infinite)))
    steps = n[:-1] + np.where(infinite, 0.0, gaps)
    start = np.concatenate(([0.0], np.cumsum(steps)))
    last = start + n - 1
    distance = np.maximum(np.subtract.outer(start, last).T, 1.0)
    geometric = (1 - rho**n) / (1 - rho) / n
    upper = np.triu(rho**distance * np.outer(geometric, geometric), 1)
    upper = np.where(np.equal.outer(segment, segment), upper, 0.0)
    return upper + upper.T + np.diag(_mean_variance(n, rho))


def with_round_correlation(covariance: np.ndarray, phi: float) -> np.ndarray:
    """C + D^½ Φ D^½: ``covariance`` C of round means plus a host level drifting across rounds, Φ_ij = φ^|i−j|, D
    the diagonal of C."""
    if phi == 0:
        return covariance
    _check_rho(phi)
    index = np.arange(covariance.shape[0])
    scale = np.sqrt(np.diag(covariance))
    return covariance + np.outer(scale, scale) * phi ** np.abs(np.subtract.outer(index, index))


@dataclass(frozen=True)
class CorrelatedEstimate:
    """A linear estimate ℓ'y, its estimated variance and that variance's Satterthwaite degrees of freedom."""

    estimate: float
    variance: float
    degrees_of_freedom: float


def variance_shape(design: np.ndarray, estimator: np.ndarray, correlation: np.ndarray) -> tuple[float, float, float]:
    """(ℓ'Cℓ, tr(BC), tr(BC)² / tr((BC)²)): the parts of :func:`correlated_estimate` free of y."""
    annihilator = np.eye(design.shape[0]) - design @ estimator
    b_c = annihilator.T @ annihilator @ correlation
    trace = float(np.trace(b_c))
    row = estimator[-1]
    return float(row @ correlation @ row), trace, trace**2 / float(np.sum(b_c * b_c.T))


def correlated_estimate(
    y: np.ndarray, design: np.ndarray, estimator: np.ndarray, correlation: np.ndarray
) -> CorrelatedEstimate:
    """ℓ'y, the last coefficient of y = Xβ + ε, ε ~ σ² C (C known), ``estimator`` L a left inverse of X: σ̂² =
    r'r / tr(BC) (r = M y, M = I − X L, B = M'M), Var = σ̂² ℓ'Cℓ on tr(BC)² / tr((BC)²) degrees of freedom."""
    l_c_l, trace, dof = variance_shape(design, estimator, correlation)
    residuals = y - design @ (estimator @ y)
    scale = float(residuals @ residuals) / trace
    return CorrelatedEstimate(float(estimator[-1] @ y), scale * l_c_l, dof)


def balanced_mean_shape(
    rounds: int, epochs_per_round: int, gap_epochs: float, rho: float, phi: float = 0.0
) -> tuple[float, float]:
    """(w'Cw, degrees of freedom) of the mean of ``rounds`` balanced round means ``gap_epochs`` apart, C as in
    :func:`with_round_correlation`, in O(R) (C is Toeplitz)."""
    _check_rho(rho)
    _check_rho(phi)
    if rounds < 2 or epochs_per_round < 1 or not gap_epochs >= 0:
        raise ValueError(
            f"need at least 2 rounds of at least 1 epoch, a gap of at least 0; got {rounds} x {epochs_per_round}, "
            f"gap {gap_epochs}"
        )
    m = float(epochs_per_round)
    t0 = float(_mean_variance(np.array([m]), rho)[0])
    lags = np.arange(1, rounds, dtype=float)
    if math.isinf(gap_epochs):
        diagonals = np.zeros(rounds - 1)
    else:
        geometric = (1 - rho**m) / (1 - rho) / m
        diagonals = rho ** (gap_epochs + 1 + (lags - 1) * (m + gap_epochs)) * geometric**2
    if phi > 0:
        diagonals = diagonals + t0 * phi**lags
        t0 *= 2.0
    total = rounds * t0 + 2.0 * float((rounds - lags) @ diagonals)
    squares = rounds * t0**2 + 2.0 * float((rounds - lags) @ diagonals**2)
    partial = np.concatenate(([0.0], np.cumsum(diagonals)))  # partial[k] = t_1 + ... + t_k
    row_sums = t0 + partial + partial[::-1]
    trace = rounds * t0 - total / rounds
    trace_squared = squares - 2.0 * float(row_sums @ row_sums) / rounds + total**2 / rounds**2
    return total / rounds**2, trace**2 / trace_squared
