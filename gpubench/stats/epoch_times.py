"""Statistics of measured epoch times (milliseconds): the seed's figures, kept, plus robust and honest ones.

Benchmark epochs are not independent draws: consecutive epochs share thermal state, clocks and caches, so their
times correlate, and a stall is real time the training run will also pay. This module therefore

* keeps the seed tool's figures exactly (mean, sample standard deviation, the plain Student-t interval on all
  epochs, the coefficient of variation with its gate, P95/P99 by Hyndman-Fan type 7 = numpy ``linear``);
* flags outliers by a robust rule but keeps them in every estimate (a stall is part of the cost);
* adds the median with a distribution-free order-statistic interval;
* adds an autocorrelation-aware interval for the mean -- batch means from 20 epochs on, an effective-sample-size
  correction below -- which is the interval decisions should use, and says how many epochs would reach a
  relative precision target (and when adaptive measuring may stop);
* checks for drift (Kendall's tau of time against epoch index).

Every input is a 1-D sequence of epoch times in milliseconds, in the order they were measured (warmup already
removed). Pure numpy/scipy: nothing here imports torch.
"""

import math
from collections.abc import Callable, Sequence

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats as sps

from gpubench.results import EpochTimeStatistics

OUTLIER_RULES: tuple[str, ...] = ("mad", "sigma", "iqr", "none")
#: Below this many epochs the summary still works but warns: the lag-1 autocorrelation has no bias correction
#: (it needs n > 4), a 95% order-statistic interval for the median does not exist (it needs n >= 6), and the
#: t quantile with <= 3 degrees of freedom makes any interval very wide.
MIN_RECOMMENDED_EPOCHS = 5
#: From this many epochs on the decision interval uses batch means; below, the effective-sample-size correction.
BATCH_MEANS_MIN_EPOCHS = 20
#: Modified z-score rule (Iglewicz & Hoaglin 1993): flag when 0.6745 * |x - median| / MAD > 3.5.
_MODIFIED_Z_SCALE = 0.6745
_MODIFIED_Z_THRESHOLD = 3.5
#: sqrt(pi/2): mean absolute deviation * this estimates sigma for normal data, as MAD / 0.6745 does.
_MEAN_ABSOLUTE_DEVIATION_SCALE = 1.253314
_SIGMA_RULE_THRESHOLD = 3.0
_TUKEY_FENCE_IQRS = 1.5
#: rho = 1 would make the effective sample size zero; the clip keeps the correction finite.
_MAX_AUTOCORRELATION = 0.99
#: P95/P99 are "reliable" once a distribution-free interval for them at this confidence exists.
_PERCENTILE_RELIABILITY_CONFIDENCE = 0.95

STOP_PRECISION_TARGET_MET = "precision_target_met"
STOP_MAX_EPOCHS_REACHED = "max_epochs_reached"
STOP_CONTINUE = "continue"
METHOD_BATCH_MEANS = "batch_means"
METHOD_EFFECTIVE_SAMPLE_SIZE = "effective_sample_size"


# ----------------------------------------------------------------------------------------------- validation


def _epoch_times(times_ms: ArrayLike, *, min_epochs: int = 2) -> np.ndarray:
    """``times_ms`` as a 1-D float array, checked: finite, positive, at least ``min_epochs`` long."""
    values = np.asarray(times_ms, dtype=float)
    if values.ndim != 1:
        raise ValueError(f"epoch times must be a 1-D sequence, got an array of shape {values.shape}")
    if values.size < min_epochs:
        raise ValueError(f"need at least {min_epochs} epoch times, got {values.size}")
    if not np.all(np.isfinite(values)):
        raise ValueError("epoch times must be finite; got NaN or infinity")
    if np.any(values <= 0):
        raise ValueError(f"epoch times must be positive milliseconds; got minimum {values.min()!r}")
    return values


def _check_level(confidence_level: float) -> None:
    if not 0.0 < confidence_level < 1.0:
        raise ValueError(f"confidence_level must be strictly between 0 and 1, got {confidence_level!r}")


def _check_positive(name: str, value: float) -> None:
    if not value > 0:
        raise ValueError(f"{name} must be greater than 0, got {value!r}")


# ------------------------------------------------------------------------------------------- building blocks


def flag_outliers(times_ms: ArrayLike, rule: str) -> np.ndarray:
    """Positions (ascending int array) of the epochs that ``rule`` flags as outliers. Flagging only: callers keep
    the flagged epochs in every estimate, because a stall is time the real training run pays too.

    * ``mad``: modified z-score 0.6745·|x − median| / MAD > 3.5 (Iglewicz & Hoaglin). When MAD is 0 (more than
      half the epochs equal the median) the scale falls back to the mean absolute deviation about the median
      times 1.253314 (= sqrt(pi/2), which like MAD/0.6745 estimates sigma for normal data), so a lone slow epoch
      among identical ones is still flagged; when that is 0 too, every epoch is identical and none is flagged.
    * ``sigma``: the seed's legacy rule |x − mean| > 3·s (s with ddof=1). It cannot flag anything at n <= 10,
      see :func:`sigma_rule_can_flag`.
    * ``iqr``: outside Tukey's fences [Q1 − 1.5·IQR, Q3 + 1.5·IQR], quartiles by numpy ``linear``.
    * ``none``: nothing.
    """
    values = _epoch_times(times_ms)
    if rule == "none":
        return np.array([], dtype=int)
    if rule == "mad":
        median_ms = np.median(values)
        deviation_ms = np.abs(values - median_ms)
        mad_ms = np.median(deviation_ms)
        if mad_ms > 0:
            score = _MODIFIED_Z_SCALE * deviation_ms / mad_ms
        else:
            mean_abs_dev_ms = deviation_ms.mean()
            if mean_abs_dev_ms == 0:
                return np.array([], dtype=int)
            score = deviation_ms / (_MEAN_ABSOLUTE_DEVIATION_SCALE * mean_abs_dev_ms)
        return np.flatnonzero(score > _MODIFIED_Z_THRESHOLD)
    if rule == "sigma":
        std_ms = values.std(ddof=1)
        return np.flatnonzero(np.abs(values - values.mean()) > _SIGMA_RULE_THRESHOLD * std_ms)
    if rule == "iqr":
        q1_ms, q3_ms = np.percentile(values, [25.0, 75.0], method="linear")
        fence_ms = _TUKEY_FENCE_IQRS * (q3_ms - q1_ms)
        return np.flatnonzero((values < q1_ms - fence_ms) | (values > q3_ms + fence_ms))
    raise ValueError(f"outlier rule {rule!r} is not valid: it must be one of {', '.join(OUTLIER_RULES)}")


def sigma_rule_can_flag(n: int) -> bool:
    """Whether |x − mean| > 3·s (s with ddof=1) can hold for any sample of ``n`` values.

    Why n <= 10 cannot: shift so the mean is 0 and let one value be a. The other n−1 values sum to −a, and their
    sum of squares is smallest when they are all −a/(n−1), giving sum of squares >= a² + a²/(n−1) = a²·n/(n−1).
    So s² = (sum of squares)/(n−1) >= a²·n/(n−1)², i.e. |a|/s <= (n−1)/sqrt(n) (Shiffler 1988), with equality
    at that configuration. (n−1)/sqrt(n) is 9/sqrt(10) ≈ 2.85 at n = 10 and 10/sqrt(11) ≈ 3.02 at n = 11.
    """
    return (n - 1) / math.sqrt(n) > _SIGMA_RULE_THRESHOLD


def t_interval(times_ms: ArrayLike, confidence_level: float) -> tuple[float, float]:
    """The seed's plain Student-t interval (ms) for the mean: mean ± t_{n−1}·s/sqrt(n), s with ddof=1.

    Assumes independent epochs, which they are not; kept as the legacy ``confidence_interval_ms`` figure.
    """
    values = _epoch_times(times_ms)
    _check_level(confidence_level)
    return _t_interval(float(values.mean()), float(values.std(ddof=1)), float(values.size), confidence_level)


def _t_interval(mean_ms: float, std_ms: float, n_eff: float, confidence_level: float) -> tuple[float, float]:
    """mean ± t_{n_eff−1}·std/sqrt(n_eff); ``n_eff`` may be fractional (scipy's t takes real df)."""
    halfwidth_ms = sps.t.ppf(0.5 + confidence_level / 2, n_eff - 1) * std_ms / math.sqrt(n_eff)
    return float(mean_ms - halfwidth_ms), float(mean_ms + halfwidth_ms)


def percentiles(times_ms: ArrayLike, percents: Sequence[float]) -> np.ndarray:
    """Percentiles (ms) by Hyndman-Fan type 7, i.e. numpy ``method="linear"``, the seed's definition."""
    return np.percentile(_epoch_times(times_ms), percents, method="linear")


def percentile_min_epochs(percent: float, confidence_level: float = _PERCENTILE_RELIABILITY_CONFIDENCE) -> int:
    """Fewest epochs for which a distribution-free, equal-tailed ``confidence_level`` interval for the
    ``percent``-th percentile exists.

    The upper end must be an order statistic, at best the sample maximum, which lies above the true p-quantile
    with probability 1 − p^n; equal tails need that to be at least 1 − (1 − level)/2. So n = ceil(log((1 −
    level)/2) / log p): 72 for P95 and 368 for P99 at 95%. Below that the reported percentile is an
    interpolation near the top of the sample, not a bound one can trust.
    """
    p = percent / 100.0
    return math.ceil(math.log((1.0 - confidence_level) / 2.0) / math.log(p))


def median_interval(times_ms: ArrayLike, confidence_level: float) -> tuple[float, float, float]:
    """Distribution-free interval (ms) for the median: (x_(k), x_(n−k+1), coverage), order statistics 1-based.

    The number of epochs below the true median is Binomial(n, 1/2) whatever the distribution, so
    P(x_(k) <= median <= x_(n−k+1)) = 1 − 2·P(B <= k−1). The narrowest symmetric pair whose coverage is at least
    ``confidence_level`` is chosen; when even (min, max) falls short (n <= 5 at 95%), (min, max) is returned with
    its actual coverage, which is then below the level.
    """
    values = np.sort(_epoch_times(times_ms))
    _check_level(confidence_level)
    n = values.size
    ranks = np.arange(1, n // 2 + 1)
    coverages = 1.0 - 2.0 * sps.binom.cdf(ranks - 1, n, 0.5)
    meets = np.flatnonzero(coverages >= confidence_level)
    # coverage falls as k grows, so the last k that meets the level is the narrowest interval that does.
    index = int(meets[-1]) if meets.size else 0
    k = int(ranks[index])
    return float(values[k - 1]), float(values[n - k]), float(coverages[index])


# --------------------------------------------------------------------------------------- autocorrelation


def lag1_autocorrelation(times_ms: ArrayLike) -> float:
    """The usual sample lag-1 autocorrelation r1 = Σ(x_t − x̄)(x_{t+1} − x̄) / Σ(x_t − x̄)²; 0 when all equal."""
    values = _epoch_times(times_ms)
    deviation_ms = values - values.mean()
    total = float(np.dot(deviation_ms, deviation_ms))
    if total == 0:
        return 0.0
    return float(np.dot(deviation_ms[:-1], deviation_ms[1:]) / total)


def adjusted_autocorrelation(times_ms: ArrayLike) -> float:
    """The lag-1 autocorrelation used to correct for dependence: bias-corrected, then clipped to [0, 0.99].

    r1 is biased low in short series: for AR(1) data E[r1] ≈ ρ − (1 + 4ρ)/n (Marriott & Pope 1954). Solving for
    ρ gives ρ̂ = (n·r1 + 1)/(n − 4), used from n = 5 on (below, r1 as is). Without it, on AR(1) data with ρ = 0.5
    and n = 10 the effective-sample-size interval covered the mean 86% of the time at 95%; with it, 91%.
    The clip at 0 means negative correlation never narrows an interval; the clip at 0.99 keeps the
    effective sample size above zero.
    """
    values = _epoch_times(times_ms)
    n = values.size
    r1 = lag1_autocorrelation(values)
    rho = (n * r1 + 1.0) / (n - 4.0) if n >= MIN_RECOMMENDED_EPOCHS else r1
    return float(np.clip(rho, 0.0, _MAX_AUTOCORRELATION))


def _variance_inflation(rho: float) -> float:
    """(1 + ρ)/(1 − ρ): how much AR(1) correlation inflates the variance of a mean, relative to independence."""
    return (1.0 + rho) / (1.0 - rho)


def autocorrelation_interval(times_ms: ArrayLike, confidence_level: float) -> tuple[float, float, str, float]:
    """The interval (ms) for the mean that decisions use: (lo, hi, method, effective sample size).

    * n >= 20, ``batch_means``: b = floor(sqrt(n)) contiguous batches of m = floor(n/b) epochs; the remainder is
      dropped from the start (the oldest epochs, nearest the warmup). The batch means give the asymptotic
      per-epoch variance σ²_BM = m·S²_batch (S² with ddof=1 over the b batch means), and the interval is
      mean ± t_{b−1}·sqrt(σ²_BM/n), centred on the mean of *all* n epochs so it always brackets ``mean_ms``
      (with n = b·m this is exactly the textbook batch-means interval). The effective sample size is
      n·s²/σ²_BM, capped at n.
    * n < 20, ``effective_sample_size``: n_eff = n·(1 − ρ)/(1 + ρ) with ρ from :func:`adjusted_autocorrelation`,
      floored at 2 so a t quantile exists, and the interval is mean ± t_{n_eff−1}·s/sqrt(n_eff).
    """
    values = _epoch_times(times_ms)
    _check_level(confidence_level)
    n = values.size
    mean_ms = float(values.mean())
    std_ms = float(values.std(ddof=1))
    if n >= BATCH_MEANS_MIN_EPOCHS:
        n_batches = math.isqrt(n)
        batch_size = n // n_batches
        batch_means_ms = values[n - n_batches * batch_size :].reshape(n_batches, batch_size).mean(axis=1)
        per_epoch_variance_ms2 = batch_size * float(batch_means_ms.var(ddof=1))
        halfwidth_ms = sps.t.ppf(0.5 + confidence_level / 2, n_batches - 1) * math.sqrt(per_epoch_variance_ms2 / n)
        # Identical batch means show no dependence to correct for, so every epoch counts.
        ess = min(float(n), n * std_ms**2 / per_epoch_variance_ms2) if per_epoch_variance_ms2 > 0 else float(n)
        return float(mean_ms - halfwidth_ms), float(mean_ms + halfwidth_ms), METHOD_BATCH_MEANS, ess
    rho = adjusted_autocorrelation(values)
    ess = max(2.0, n / _variance_inflation(rho))
    lo_ms, hi_ms = _t_interval(mean_ms, std_ms, ess, confidence_level)
    return lo_ms, hi_ms, METHOD_EFFECTIVE_SAMPLE_SIZE, ess


def _relative_halfwidth(times_ms: np.ndarray, confidence_level: float) -> float:
    lo_ms, hi_ms, _, _ = autocorrelation_interval(times_ms, confidence_level)
    return (hi_ms - lo_ms) / 2.0 / float(times_ms.mean())


def smallest_satisfying(predicate: Callable[[int], bool], low: int, high: int) -> int:
    """The smallest n in (low, high] with ``predicate(n)`` true, for a predicate that is false up to some n and
    true from there on, given that ``predicate(high)`` is true (bisection: log2(high − low) calls)."""
    while high - low > 1:
        middle = (low + high) // 2
        if predicate(middle):
            high = middle
        else:
            low = middle
    return high


def required_sample_size(times_ms: ArrayLike, target_rel_halfwidth: float, confidence_level: float) -> int:
    """Epochs needed for the interval half-width to be within ``target_rel_halfwidth`` of the mean.

    A planning figure: the smallest integer n >= 2 with t_{n_eff−1}·s/sqrt(n_eff)/mean <= target, where
    n_eff = max(2, n/inflation), inflation = (1 + ρ)/(1 − ρ) with ρ from :func:`adjusted_autocorrelation`, and
    s, mean from the epochs measured so far. It models the dependence as AR(1) whatever n is, so near the
    target it can disagree by an epoch or a few with the batch-means interval the decision uses.
    """
    values = _epoch_times(times_ms)
    _check_level(confidence_level)
    _check_positive("target_rel_halfwidth", target_rel_halfwidth)
    relative_std = float(values.std(ddof=1) / values.mean())
    inflation = _variance_inflation(adjusted_autocorrelation(values))
    quantile_level = 0.5 + confidence_level / 2

    def meets(n: int) -> bool:
        n_eff = max(2.0, n / inflation)
        return sps.t.ppf(quantile_level, n_eff - 1) * relative_std / math.sqrt(n_eff) <= target_rel_halfwidth

    # The half-width shrinks monotonically with n: double until the target is met, then bisect.
    low, high = 1, 2
    while not meets(high):
        low, high = high, high * 2
    return smallest_satisfying(meets, low, high)


def should_stop_adaptive(
    times_ms: ArrayLike,
    *,
    min_epochs: int,
    max_epochs: int,
    confidence_level: float,
    target_rel_halfwidth: float,
) -> tuple[bool, str]:
    """Whether adaptive measuring may stop after the epochs measured so far, and why.

    Never before ``min_epochs`` (nor before 2, the fewest an interval needs). Then ``precision_target_met`` when
    the decision interval's half-width is within ``target_rel_halfwidth`` of the mean (this wins when both hold),
    else ``max_epochs_reached`` at ``max_epochs``, else ``continue``.
    """
    if min_epochs < 1 or max_epochs < min_epochs:
        raise ValueError(f"need 1 <= min_epochs <= max_epochs, got min_epochs={min_epochs}, max_epochs={max_epochs}")
    _check_level(confidence_level)
    _check_positive("target_rel_halfwidth", target_rel_halfwidth)
    values = _epoch_times(times_ms, min_epochs=0)
    n = values.size
    if n < min_epochs:
        return False, STOP_CONTINUE
    if n >= 2 and _relative_halfwidth(values, confidence_level) <= target_rel_halfwidth:
        return True, STOP_PRECISION_TARGET_MET
    if n >= max_epochs:
        return True, STOP_MAX_EPOCHS_REACHED
    return False, STOP_CONTINUE


def drift_test(times_ms: ArrayLike) -> tuple[float, float]:
    """Kendall's tau-b of epoch time against epoch index and its two-sided p-value (scipy: exact for small n
    without ties, normal approximation otherwise). (0, 1) when all times are equal, where tau is undefined."""
    values = _epoch_times(times_ms)
    if np.all(values == values[0]):
        return 0.0, 1.0
    result = sps.kendalltau(np.arange(values.size), values)
    return float(result.statistic), float(result.pvalue)


# ---------------------------------------------------------------------------------------------- the summary


def summarize_epoch_times(
    times_ms: ArrayLike,
    *,
    confidence_level: float = 0.95,
    cv_threshold: float = 0.15,
    outlier_rule: str = "mad",
    target_rel_halfwidth: float = 0.02,
) -> EpochTimeStatistics:
    """Summarise measured epoch times (ms, in measurement order, warmup removed) for the benchmark report.

    Raises ValueError for fewer than 2 epochs, non-finite or non-positive times, a level outside (0, 1), an
    unknown outlier rule or non-positive thresholds. Works from 2 epochs on but warns below
    :data:`MIN_RECOMMENDED_EPOCHS`. Drift is flagged when Kendall's p-value < 1 − ``confidence_level``.
    """
    values = _epoch_times(times_ms)
    _check_level(confidence_level)
    _check_positive("cv_threshold", cv_threshold)
    _check_positive("target_rel_halfwidth", target_rel_halfwidth)
    if outlier_rule not in OUTLIER_RULES:
        raise ValueError(f"outlier rule {outlier_rule!r} is not valid: it must be one of {', '.join(OUTLIER_RULES)}")
    n = values.size
    mean_ms = float(values.mean())
    std_ms = float(values.std(ddof=1))
    cv = std_ms / mean_ms
    p95_ms, p99_ms = (float(p) for p in percentiles(values, [95.0, 99.0]))
    p95_min_epochs, p99_min_epochs = percentile_min_epochs(95.0), percentile_min_epochs(99.0)
    median_lo_ms, median_hi_ms, median_coverage = median_interval(values, confidence_level)
    outliers = tuple(int(i) for i in flag_outliers(values, outlier_rule))
    decision_lo_ms, decision_hi_ms, method, ess = autocorrelation_interval(values, confidence_level)
    relative_halfwidth = (decision_hi_ms - decision_lo_ms) / 2.0 / mean_ms
    meets_target = relative_halfwidth <= target_rel_halfwidth
    required = required_sample_size(values, target_rel_halfwidth, confidence_level)
    tau, p_value = drift_test(values)
    drift = p_value < 1.0 - confidence_level

    warnings: list[str] = []
    if n < MIN_RECOMMENDED_EPOCHS:
        warnings.append(
            f"only {n} epochs, below the recommended minimum of {MIN_RECOMMENDED_EPOCHS}: intervals are very wide "
            "and the autocorrelation estimate is unreliable"
        )
    if outlier_rule == "sigma" and not sigma_rule_can_flag(n):
        warnings.append(
            f"the 3-sigma outlier rule cannot flag any epoch at n = {n} <= 10 (the largest possible |z| is "
            f"(n-1)/sqrt(n) = {(n - 1) / math.sqrt(n):.2f}); use outlier_rule=mad"
        )
    if outliers:
        warnings.append(
            f"{len(outliers)} epoch(s) flagged as outliers by the {outlier_rule} rule at positions "
            f"{list(outliers)}; kept in every estimate"
        )
    if not cv <= cv_threshold:
        warnings.append(f"coefficient of variation {cv:.3f} exceeds the threshold {cv_threshold}")
    if median_coverage < confidence_level:
        warnings.append(
            f"the median interval (min, max) covers only {median_coverage:.3f} < {confidence_level}: too few epochs"
        )
    if n < p95_min_epochs:
        warnings.append(f"P95 is unreliable below {p95_min_epochs} epochs (n = {n})")
    if n < p99_min_epochs:
        warnings.append(f"P99 is unreliable below {p99_min_epochs} epochs (n = {n})")
    if not meets_target:
        warnings.append(
            f"the decision interval's half-width is {relative_halfwidth:.1%} of the mean, above the target "
            f"{target_rel_halfwidth:.1%}; about {required} epochs would reach it"
        )
    if drift:
        trend = "slowing down (throttling?)" if tau > 0 else "speeding up (still warming up?)"
        warnings.append(f"epoch times drift: Kendall tau = {tau:.2f}, p = {p_value:.2g}; {trend}")

    return EpochTimeStatistics(
        n=n,
        mean_ms=mean_ms,
        std_ms=std_ms,
        confidence_level=float(confidence_level),
        confidence_interval_ms=t_interval(values, confidence_level),
        coefficient_of_variation=cv,
        cv_threshold=float(cv_threshold),
        cv_ok=cv <= cv_threshold,
        p95_ms=p95_ms,
        p99_ms=p99_ms,
        p95_reliable=n >= p95_min_epochs,
        p99_reliable=n >= p99_min_epochs,
        median_ms=float(np.median(values)),
        median_interval_ms=(median_lo_ms, median_hi_ms),
        median_interval_coverage=median_coverage,
        outlier_rule=outlier_rule,
        outlier_indices=outliers,
        lag1_autocorrelation=lag1_autocorrelation(values),
        lag1_autocorrelation_adjusted=adjusted_autocorrelation(values),
        # Epoch times are positive: cutting the interval at zero keeps its coverage. A negative lower end shows up
        # with strongly autocorrelated epochs (effective sample size near 2, a t quantile with one degree of freedom).
        decision_interval_ms=(max(decision_lo_ms, 0.0), decision_hi_ms),
        decision_interval_method=method,
        effective_sample_size=ess,
        relative_halfwidth=relative_halfwidth,
        target_rel_halfwidth=float(target_rel_halfwidth),
        meets_precision_target=meets_target,
        required_epochs=required,
        drift_kendall_tau=tau,
        drift_p_value=p_value,
        drift_detected=drift,
        warnings=tuple(warnings),
    )
