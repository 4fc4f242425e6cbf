"""The decision interval: a confidence interval for the long-run mean epoch time that survives correlated epochs.

Consecutive benchmark epochs share thermal state, clocks and caches, so their times are autocorrelated and the
plain Student-t interval, which assumes independent epochs, is too narrow. Plugging an estimated lag-1
autocorrelation into an effective sample size does not rescue it at the sample sizes a benchmark has: at ten epochs
the bias-corrected estimate has a standard deviation near 0.45, so the interval is alternately far too narrow and
far too wide.

The interval here uses **overlapping batch means** (OBM; Meketon & Schmeiser 1984, "Overlapping batch means:
something for nothing?", Proc. Winter Simulation Conference): the long-run variance
σ²∞ = lim n·Var(mean) is estimated from the means of every run of ``m`` consecutive epochs,

    σ̂²  =  n·m / ((n − m + 1)(n − m)) · Σ_j (Ȳ_j(m) − Ȳ)²,     j = 1 … n − m + 1,

and the interval is Ȳ ± t(ν) · σ̂ / √n with ν = 1.5 (n/m − 1) degrees of freedom (the χ² approximation of OBM's
variance, Meketon & Schmeiser; Welch 1987). The batch size grows like √n, as Flegal & Jones (2010, "Batch means and
spectral variance estimators in Markov chain Monte Carlo", Ann. Statist.) recommend for consistency, and is at
least a third of the run and at least :data:`MIN_BATCH_EPOCHS` epochs, because a short batch mean is itself
correlated with its neighbour and the variance estimate is then biased low: m = ⌈max(5, min(n/3, 2√n))⌉.

On AR(1) epoch times at a coefficient of variation of 5% (``benchmarks/statistics_coverage.py``, 6,000 runs a cell)
the 95% interval covers 0.975 / 0.938 / 0.949 at n = 10 / 20 / 40 for lag-1 correlation 0.5 and 0.94-0.997 for
0.0 and 0.3, with a median half-width of 4.6% (n = 20) and 3.4% (n = 40) of the mean at ρ = 0.5; an interval that
knew the true long-run variance would be 3.7% and 2.6% wide. Epoch times are positive, so the lower end is cut at
zero (which keeps the coverage).

Pure numpy/scipy: nothing here imports torch.
"""

import math

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats as sps

from gpubench.stats.config import MIN_BATCH_EPOCHS, MIN_EPOCHS

METHOD_OVERLAPPING_BATCH_MEANS = "overlapping_batch_means"
METHOD_TWO_STAGE = "two_stage_overlapping_batch_means"


def batch_size(n: int) -> int:
    """Epochs per overlapping batch for a run of ``n`` epochs: ⌈max(5, min(n/3, 2√n))⌉, capped at n − 1."""
    if n < MIN_EPOCHS:
        raise ValueError(f"the decision interval needs at least {MIN_EPOCHS} epochs, got {n}")
    return min(n - 1, math.ceil(max(MIN_BATCH_EPOCHS, min(n / 3.0, 2.0 * math.sqrt(n)))))


def degrees_of_freedom(n: int, batch_epochs: int | None = None) -> float:
    """Degrees of freedom of the OBM variance of ``n`` epochs in batches of ``batch_epochs`` (default
    :func:`batch_size`): ν = 1.5 (n/m − 1)."""
    m = batch_size(n) if batch_epochs is None else batch_epochs
    return 1.5 * (n / m - 1.0)


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
    """OBM estimate of the long-run variance σ²∞ (ms², so that Var(mean) ≈ σ²∞ / n) and its degrees of freedom.

    ``batch_epochs`` defaults to :func:`batch_size` of the run's length.
    """
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
    """The interval (ms) for the long-run mean epoch time that decisions use: overlapping batch means, t quantile
    with ν = 1.5 (n/m − 1) degrees of freedom, lower end cut at zero. Needs :data:`MIN_EPOCHS` epochs."""
    if not 0.0 < confidence_level < 1.0:
        raise ValueError(f"confidence level must be strictly between 0 and 1, got {confidence_level}")
    values = _times(times_ms)
    variance, dof = long_run_variance(values)
    mean_ms = float(values.mean())
    halfwidth_ms = float(sps.t.ppf(0.5 + confidence_level / 2.0, dof)) * math.sqrt(variance / values.size)
    return max(mean_ms - halfwidth_ms, 0.0), mean_ms + halfwidth_ms


def _halfwidth_factor_bound(n: int, quantile_level: float) -> float:
    """An upper bound on t(ν(n)) / √n that falls as n grows (n >= 7), for :func:`precision_epochs`.

    ⌈x⌉ < x + 1, so the batch size is under max(5, min(n/3, 2√n)) + 1 and ν(n) is at least
    ν₋(n) = 1.5 (n / (max(5, min(n/3, 2√n)) + 1) − 1), which rises with n (on each of the three pieces and across
    their joins, where it is continuous) and is positive from n = 7 on; the t quantile falls as ν rises.
    """
    batch_bound = max(MIN_BATCH_EPOCHS, min(n / 3.0, 2.0 * math.sqrt(n))) + 1.0
    return float(sps.t.ppf(quantile_level, 1.5 * (n / batch_bound - 1.0))) / math.sqrt(n)


def precision_epochs(
    long_run_variance_ms2: float, mean_ms: float, target_rel_halfwidth: float, confidence_level: float
) -> int:
    """Epochs from which on the decision interval would be within ``target_rel_halfwidth`` of ``mean_ms``, were the
    long-run variance (ms²) and the mean to stay as measured: the smallest n >= :data:`MIN_EPOCHS` such that
    t(ν(n')) · σ̂∞ / √n' <= target · mean for every n' >= n, ν from :func:`degrees_of_freedom`.

    A planning figure: a longer run estimates σ̂∞ anew. "From there on" because t(ν(n)) / √n steps up by a few
    percent where the batch size grows, so the first n that meets the target can be followed by one that does not.
    The search is exact: below (z / r)² epochs, r = target · mean / σ̂∞ and z the normal quantile, nothing meets the
    target (t > z); from the n at which the falling bound of :func:`_halfwidth_factor_bound` meets it, everything
    does; the n in between are checked one by one (about 3√n of them).
    """
    if not 0.0 < confidence_level < 1.0:
        raise ValueError(f"confidence level must be strictly between 0 and 1, got {confidence_level}")
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
    # The falling bound meets the target at `last`: double until it does, then bisect.
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
    """Total epochs Stein's two-stage rule asks for to reach ``target_rel_halfwidth`` (a fraction of the mean), with
    no cap: the n at which t(ν₁) · σ̂₁ / √n is within the target of the first stage's mean, never fewer than the
    first stage. See :func:`two_stage_epochs`."""
    values = _times(first_stage_ms)
    variance, dof = long_run_variance(values)
    quantile = float(sps.t.ppf(0.5 + confidence_level / 2.0, dof))
    target_ms = target_rel_halfwidth * float(values.mean())
    return max(math.ceil(quantile**2 * variance / target_ms**2), values.size)


def two_stage_epochs(
    first_stage_ms: ArrayLike, target_rel_halfwidth: float, confidence_level: float, max_epochs: int
) -> int:
    """Total epochs a two-stage procedure measures to reach ``target_rel_halfwidth`` (a fraction of the mean).

    Stein's two-stage rule (Stein 1945, "A two-sample test for a linear hypothesis whose power is independent of
    the variance", Ann. Math. Statist.): the first stage's long-run variance and degrees of freedom fix the t
    quantile and the variance; the run is extended to the n at which t · σ̂ / √n is within the target of the
    first stage's mean (:func:`two_stage_required_epochs`), never beyond ``max_epochs``. The final interval
    (:func:`two_stage_interval`) keeps the first stage's variance, so stopping never selects an optimistic
    variance, which is what breaks the coverage of "measure until the interval is narrow".
    """
    return min(two_stage_required_epochs(first_stage_ms, target_rel_halfwidth, confidence_level), max_epochs)


def two_stage_interval(
    first_stage_ms: ArrayLike, all_epochs_ms: ArrayLike, confidence_level: float
) -> tuple[float, float]:
    """The two-stage interval (ms): the mean of every epoch ± t(ν₁) · σ̂₁ / √n, σ̂₁ and ν₁ from the first stage."""
    variance, dof = long_run_variance(first_stage_ms)
    values = _times(all_epochs_ms)
    mean_ms = float(values.mean())
    halfwidth_ms = float(sps.t.ppf(0.5 + confidence_level / 2.0, dof)) * math.sqrt(variance / values.size)
    return max(mean_ms - halfwidth_ms, 0.0), mean_ms + halfwidth_ms
