"""The decision interval for the long-run mean epoch time of autocorrelated epochs: Ȳ ± t(ν) · σ̂∞ / √n, σ̂²∞ by
overlapping batch means (Meketon & Schmeiser 1984), ν = 1.5 (n/m − 1), batch m = ⌈max(5, min(n/3, 2√n))⌉ (Flegal &
Jones 2010), cut at zero. Coverage: benchmarks/results/2026-12-03-single-model-coverage.md."""

import math

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats as sps

from gpubench.stats.config import MIN_BATCH_EPOCHS, MIN_EPOCHS

METHOD_OVERLAPPING_BATCH_MEANS = "overlapping_batch_means"
METHOD_TWO_STAGE = "two_stage_overlapping_batch_means"


def batch_size(n: int) -> int:
    """Epochs per overlapping batch of a run of ``n`` epochs, capped at n − 1."""
    if n < MIN_EPOCHS:
        raise ValueError(f"the decision interval needs at least {MIN_EPOCHS} epochs, got {n}")
    return min(n - 1, math.ceil(max(MIN_BATCH_EPOCHS, min(n / 3.0, 2.0 * math.sqrt(n)))))


def degrees_of_freedom(n: int, batch_epochs: int | None = None) -> float:
    """Degrees of freedom of the OBM variance of ``n`` epochs, ν = 1.5 (n/m − 1)."""
    m = batch_size(n) if batch_epochs is None else batch_epochs
    return 1.5 * (n / m - 1.0)


def check_level(confidence_level: float) -> None:
    if not 0.0 < confidence_level < 1.0:
        raise ValueError(f"confidence_level must be strictly between 0 and 1, got {confidence_level!r}")


def t_quantile(confidence_level: float, dof: float) -> float:
    """The two-sided Student-t quantile at ``confidence_level`` on ``dof`` degrees of freedom."""
    return float(sps.t.ppf(0.5 + confidence_level / 2.0, dof))


def _times(times_ms: ArrayLike) -> np.ndarray:
    values = np.asarray(times_ms, dtype=float)
    if values.ndim != 1:
        raise ValueError(f"epoch times must be a 1-D sequence, got shape {values.shape}")
    if values.size < MIN_EPOCHS:
        raise ValueError(f"the decision interval needs at least {MIN_EPOCHS} epochs, got {values.size}")
    if not np.all(np.isfinite(values)) or np.any(values <= 0):
        raise ValueError("epoch times must be finite and positive")
    return values


def long_run_variance(times_ms: ArrayLike, batch_epochs: int | None = None) -> tuple[float, float]:
    """OBM estimate of the long-run variance σ²∞ (ms², Var(mean) ≈ σ²∞ / n) and its degrees of freedom."""
    values = _times(times_ms)
    n = values.size
    m = batch_size(n) if batch_epochs is None else batch_epochs
    if not 1 <= m < n:
        raise ValueError(f"batch size must be in [1, {n - 1}] for {n} epochs, got {m}")
    cumulative = np.concatenate(([0.0], np.cumsum(values)))
    batch_means = (cumulative[m:] - cumulative[:-m]) / m
    deviations = batch_means - values.mean()
    variance = n * m / ((n - m + 1) * (n - m)) * float(deviations @ deviations)
    return variance, degrees_of_freedom(n, m)


def decision_interval(times_ms: ArrayLike, confidence_level: float) -> tuple[float, float]:
    """The decision interval (ms) from :data:`MIN_EPOCHS` epochs or more."""
    check_level(confidence_level)
    values = _times(times_ms)
    return _mean_interval(values, *long_run_variance(values), confidence_level)


def _mean_interval(values: np.ndarray, variance: float, dof: float, confidence_level: float) -> tuple[float, float]:
    """The mean of ``values`` ± t(``dof``) · √(``variance`` / n), cut at zero."""
    mean_ms = float(values.mean())
    halfwidth_ms = t_quantile(confidence_level, dof) * math.sqrt(variance / values.size)
    return max(mean_ms - halfwidth_ms, 0.0), mean_ms + halfwidth_ms


def _halfwidth_factor_bound(n: int, quantile_level: float) -> float:
    """An upper bound on t(ν(n)) / √n that falls as n grows (n >= 7): ν(n) with the batch size plus one."""
    batch_bound = max(MIN_BATCH_EPOCHS, min(n / 3.0, 2.0 * math.sqrt(n))) + 1.0
    return float(sps.t.ppf(quantile_level, 1.5 * (n / batch_bound - 1.0))) / math.sqrt(n)


def precision_epochs(
    long_run_variance_ms2: float, mean_ms: float, target_rel_halfwidth: float, confidence_level: float
) -> int:
    """The smallest n >= :data:`MIN_EPOCHS` from which on the decision interval stays within
    ``target_rel_halfwidth`` of ``mean_ms``, variance and mean held (exact: below (z / r)² none meets it, past the
    falling bound all do, and those between are checked)."""
    check_level(confidence_level)
    if not (target_rel_halfwidth > 0 and mean_ms > 0 and long_run_variance_ms2 >= 0):
        raise ValueError(
            "need a positive target, a positive mean and a non-negative variance; got "
            f"{target_rel_halfwidth}, {mean_ms} ms, {long_run_variance_ms2} ms²"
        )
    if long_run_variance_ms2 == 0:
        return MIN_EPOCHS
    ratio = target_rel_halfwidth * mean_ms / math.sqrt(long_run_variance_ms2)
    quantile_level = 0.5 + confidence_level / 2.0
    first = max(MIN_EPOCHS, math.floor((float(sps.norm.ppf(quantile_level)) / ratio) ** 2))
    low = last = max(first, MIN_EPOCHS + 1)
    while _halfwidth_factor_bound(last, quantile_level) > ratio:
        low, last = last, 2 * last
    while last - low > 1:
        middle = (low + last) // 2
        if _halfwidth_factor_bound(middle, quantile_level) <= ratio:
            last = middle
        else:
            low = middle
    epochs = np.arange(first, last + 1)
    dofs = np.array([degrees_of_freedom(int(n)) for n in epochs])
    misses = np.flatnonzero(sps.t.ppf(quantile_level, dofs) / np.sqrt(epochs) > ratio)
    return int(epochs[misses[-1]] + 1) if misses.size else int(first)


def two_stage_required_epochs(first_stage_ms: ArrayLike, target_rel_halfwidth: float, confidence_level: float) -> int:
    """Stein's n with t(ν₁) · σ̂₁ / √n within the target of the first stage's mean, never under the first stage."""
    values = _times(first_stage_ms)
    variance, dof = long_run_variance(values)
    quantile = t_quantile(confidence_level, dof)
    target_ms = target_rel_halfwidth * float(values.mean())
    return max(math.ceil(quantile**2 * variance / target_ms**2), values.size)


def two_stage_epochs(
    first_stage_ms: ArrayLike, target_rel_halfwidth: float, confidence_level: float, max_epochs: int
) -> int:
    """Total epochs of Stein's two-stage rule (Stein 1945), at most ``max_epochs``; the final interval keeps the
    first stage's variance, so stopping never selects an optimistic one."""
    return min(two_stage_required_epochs(first_stage_ms, target_rel_halfwidth, confidence_level), max_epochs)


def two_stage_interval(
    first_stage_ms: ArrayLike, all_epochs_ms: ArrayLike, confidence_level: float
) -> tuple[float, float]:
    """The two-stage interval (ms): the mean of every epoch ± t(ν₁) · σ̂₁ / √n, σ̂₁ and ν₁ from the first stage."""
    variance, dof = long_run_variance(first_stage_ms)
    return _mean_interval(_times(all_epochs_ms), variance, dof, confidence_level)
