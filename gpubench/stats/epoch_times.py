"""Statistics of measured epoch times (ms, in measurement order, warmup removed). A stall is time the training pays
too, so outliers are flagged but kept in every estimate; epochs correlate, so the decision interval and the drift
test allow for it (:mod:`gpubench.stats.intervals`, :mod:`gpubench.stats.rounds`)."""

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats as sps

from gpubench.results import EpochTimeStatistics, RoundStatistics
from gpubench.stats import intervals
from gpubench.stats import rounds as two_level
from gpubench.stats.config import OUTLIER_RULES

_BIAS_CORRECTION_MIN_EPOCHS = 5
#: Modified z-score rule (Iglewicz & Hoaglin 1993): flag when 0.6745 * |x - median| / MAD > 3.5.
_MODIFIED_Z_SCALE = 0.6745
_MODIFIED_Z_THRESHOLD = 3.5
#: sqrt(pi/2): mean absolute deviation * this estimates sigma for normal data, as MAD / 0.6745 does.
_MEAN_ABSOLUTE_DEVIATION_SCALE = 1.253314
_SIGMA_RULE_THRESHOLD = 3.0
_TUKEY_FENCE_IQRS = 1.5
#: rho = 1 would make an effective sample size infinite.
_MAX_AUTOCORRELATION = 0.99
_PERCENTILE_RELIABILITY_CONFIDENCE = 0.95
METHOD_TOO_FEW_EPOCHS = "too_few_epochs_plain_t"


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


def _check_positive(name: str, value: float) -> None:
    if not value > 0:
        raise ValueError(f"{name} must be greater than 0, got {value!r}")


def flag_outliers(times_ms: ArrayLike, rule: str) -> np.ndarray:
    """Positions (ascending) of the epochs ``rule`` flags: ``mad`` the modified z-score (scale: the mean absolute
    deviation where MAD is 0), ``sigma`` |x − mean| > 3·s, ``iqr`` outside Tukey's fences, ``none`` nothing."""
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
    """Whether |x − mean| > 3·s can hold in a sample of ``n``: |x − mean|/s <= (n−1)/sqrt(n) (Shiffler 1988)."""
    return (n - 1) / math.sqrt(n) > _SIGMA_RULE_THRESHOLD


def t_interval(times_ms: ArrayLike, confidence_level: float) -> tuple[float, float]:
    """The plain Student-t interval (ms) mean ± t_{n−1}·s/sqrt(n), for independent epochs."""
    values = _epoch_times(times_ms)
    intervals.check_level(confidence_level)
    n = values.size
    mean_ms = float(values.mean())
    halfwidth_ms = intervals.t_quantile(confidence_level, n - 1) * float(values.std(ddof=1)) / math.sqrt(n)
    return float(mean_ms - halfwidth_ms), float(mean_ms + halfwidth_ms)


def percentiles(times_ms: ArrayLike, percents: Sequence[float]) -> np.ndarray:
    """Percentiles (ms) by Hyndman-Fan type 7 (numpy ``linear``)."""
    return np.percentile(_epoch_times(times_ms), percents, method="linear")


def percentile_min_epochs(percent: float, confidence_level: float = _PERCENTILE_RELIABILITY_CONFIDENCE) -> int:
    """Fewest epochs with a distribution-free, equal-tailed interval for the ``percent``-th percentile:
    ceil(log((1 − level)/2) / log p)."""
    p = percent / 100.0
    return math.ceil(math.log((1.0 - confidence_level) / 2.0) / math.log(p))


def median_interval(times_ms: ArrayLike, confidence_level: float) -> tuple[float, float, float]:
    """Distribution-free interval (ms) for the median: (x_(k), x_(n−k+1), coverage), the narrowest order-statistic
    pair covering ``confidence_level`` by Binomial(n, 1/2); (min, max) with its lower coverage when none does."""
    values = np.sort(_epoch_times(times_ms))
    intervals.check_level(confidence_level)
    n = values.size
    ranks = np.arange(1, n // 2 + 1)
    coverages = 1.0 - 2.0 * sps.binom.cdf(ranks - 1, n, 0.5)
    meets = np.flatnonzero(coverages >= confidence_level)
    index = int(meets[-1]) if meets.size else 0
    k = int(ranks[index])
    return float(values[k - 1]), float(values[n - k]), float(coverages[index])


def lag1_autocorrelation(times_ms: ArrayLike) -> float:
    """The sample lag-1 autocorrelation r1; 0 when all times are equal."""
    values = _epoch_times(times_ms)
    deviation_ms = values - values.mean()
    total = float(np.dot(deviation_ms, deviation_ms))
    if total == 0:
        return 0.0
    return float(np.dot(deviation_ms[:-1], deviation_ms[1:]) / total)


def adjusted_autocorrelation(times_ms: ArrayLike) -> float:
    """(n·r1 + 1)/(n − 4) from n = 5 (Marriott & Pope 1954), clipped to [0, 0.99]: reported, too noisy to use."""
    values = _epoch_times(times_ms)
    n = values.size
    r1 = lag1_autocorrelation(values)
    rho = (n * r1 + 1.0) / (n - 4.0) if n >= _BIAS_CORRECTION_MIN_EPOCHS else r1
    return float(np.clip(rho, 0.0, _MAX_AUTOCORRELATION))


@dataclass(frozen=True)
class _DecisionFigures:
    """The decision interval (ms), its long-run variance (ms²) and the epochs that would reach the target."""

    interval_ms: tuple[float, float]
    method: str
    long_run_variance_ms2: float
    required_epochs: int
    rounds: RoundStatistics | None = None


_MAX_PLANNED_ROUNDS = 10_000


def _rounds_required_epochs(
    interval: two_level.TwoLevelInterval, target_rel_halfwidth: float, confidence_level: float
) -> int:
    """Epochs (whole rounds) that would bring the two-level interval within the target, its scale held; never fewer
    than measured."""
    epochs_per_round = max(1, round(sum(interval.epochs_per_round) / interval.rounds))
    target_ms = target_rel_halfwidth * interval.mean_ms
    low, high = interval.rounds, _MAX_PLANNED_ROUNDS
    if two_level.halfwidth_after(interval, high, epochs_per_round, confidence_level) > target_ms:
        return high * epochs_per_round
    while low < high:
        middle = (low + high) // 2
        if two_level.halfwidth_after(interval, middle, epochs_per_round, confidence_level) <= target_ms:
            high = middle
        else:
            low = middle + 1
    return max(low * epochs_per_round, sum(interval.epochs_per_round))


def _round_figures(
    values: np.ndarray,
    epochs_per_round: Sequence[int],
    gaps_epochs: Sequence[float] | None,
    confidence_level: float,
    target_rel_halfwidth: float,
    earlier_runs: Sequence[tuple[float, float]],
) -> _DecisionFigures:
    """The two-level interval of epochs in two rounds or more, and its round statistics."""
    parts = two_level.split_rounds(values, epochs_per_round)
    interval = two_level.two_level_interval(
        parts, confidence_level, gaps_epochs, from_run=True, earlier_runs=earlier_runs
    )
    components = two_level.variance_components(parts)
    return _DecisionFigures(
        interval_ms=interval.interval_ms,
        method=interval.method,
        # N · Var(mean), so that n·s²/σ̂²∞ is an effective sample size.
        long_run_variance_ms2=interval.variance_of_mean_ms2 * values.size,
        required_epochs=_rounds_required_epochs(interval, target_rel_halfwidth, confidence_level),
        rounds=RoundStatistics(
            epochs_per_round=interval.epochs_per_round,
            round_means_ms=components.round_means_ms,
            within_variance_ms2=interval.within_variance_ms2,
            within_method=interval.within_method,
            between_variance_ms2=interval.between_variance_ms2,
            between_p_value=components.f_p_value,
            between_share=interval.between_share,
            dominant=interval.dominant,
            degrees_of_freedom=interval.degrees_of_freedom,
            gaps_epochs=interval.gaps_epochs,
            rho=interval.rho,
            round_correlation=interval.round_correlation,
            steady_mean_ms=interval.mean_ms,
            first_epoch_excess_ms=interval.first_epoch_excess_ms,
            variance_of_mean_ms2=interval.variance_of_mean_ms2,
            run_level_variance_ms2=interval.run_level_variance_ms2,
            run_level_dof=interval.run_level_dof if interval.history_runs else None,
            earlier_runs=interval.earlier_runs,
        ),
    )


def _decision_figures(
    values: np.ndarray,
    confidence_level: float,
    target_rel_halfwidth: float,
    first_stage_epochs: int | None,
    epochs_per_round: Sequence[int] | None,
    gaps_epochs: Sequence[float] | None,
    earlier_runs: Sequence[tuple[float, float]] = (),
) -> _DecisionFigures:
    """The decision interval by the method the run allows: two-level (rounds), two-stage (adaptive), overlapping
    batch means, else (too few epochs) the plain t interval cut at zero."""
    mean_ms = float(values.mean())
    if epochs_per_round is not None and len(epochs_per_round) >= 2:
        return _round_figures(
            values, epochs_per_round, gaps_epochs, confidence_level, target_rel_halfwidth, earlier_runs
        )
    if first_stage_epochs is not None:
        first_ms = values[:first_stage_epochs]
        variance_ms2, _ = intervals.long_run_variance(first_ms)
        return _DecisionFigures(
            interval_ms=intervals.two_stage_interval(first_ms, values, confidence_level),
            method=intervals.METHOD_TWO_STAGE,
            long_run_variance_ms2=variance_ms2,
            required_epochs=intervals.two_stage_required_epochs(first_ms, target_rel_halfwidth, confidence_level),
        )
    if values.size < intervals.MIN_EPOCHS:
        variance_ms2 = float(values.var(ddof=1))
        low_ms, high_ms = t_interval(values, confidence_level)
        method = METHOD_TOO_FEW_EPOCHS
        interval_ms = (max(low_ms, 0.0), high_ms)
    else:
        variance_ms2, _ = intervals.long_run_variance(values)
        method = intervals.METHOD_OVERLAPPING_BATCH_MEANS
        interval_ms = intervals.decision_interval(values, confidence_level)
    return _DecisionFigures(
        interval_ms=interval_ms,
        method=method,
        long_run_variance_ms2=variance_ms2,
        required_epochs=intervals.precision_epochs(variance_ms2, mean_ms, target_rel_halfwidth, confidence_level),
    )


def summarize_epoch_times(
    times_ms: ArrayLike,
    *,
    confidence_level: float = 0.95,
    cv_threshold: float = 0.15,
    outlier_rule: str = "mad",
    target_rel_halfwidth: float = 0.02,
    first_stage_epochs: int | None = None,
    rounds: Sequence[int] | None = None,
    round_gaps_epochs: Sequence[float] | None = None,
    earlier_runs: Sequence[tuple[float, float]] = (),
) -> EpochTimeStatistics:
    """The report's statistics of epoch times (ms). ``first_stage_epochs``: an adaptive run's first stage;
    ``rounds``: epochs per round, ``round_gaps_epochs`` between them; ``earlier_runs``: the config's history
    (:func:`~gpubench.stats.rounds.two_level_interval`). ValueError for bad times, settings, stages or rounds."""
    values = _epoch_times(times_ms)
    intervals.check_level(confidence_level)
    _check_positive("cv_threshold", cv_threshold)
    _check_positive("target_rel_halfwidth", target_rel_halfwidth)
    if outlier_rule not in OUTLIER_RULES:
        raise ValueError(f"outlier rule {outlier_rule!r} is not valid: it must be one of {', '.join(OUTLIER_RULES)}")
    n = values.size
    if first_stage_epochs is not None and not intervals.MIN_EPOCHS <= first_stage_epochs <= n:
        raise ValueError(
            f"first_stage_epochs must be in [{intervals.MIN_EPOCHS}, {n}] for {n} epochs, got {first_stage_epochs}"
        )
    if rounds is not None:
        two_level.split_rounds(values, rounds)
        if first_stage_epochs is not None:
            raise ValueError("rounds and first_stage_epochs cannot both be given: a two-stage run is one block")
    mean_ms = float(values.mean())
    std_ms = float(values.std(ddof=1))
    cv = std_ms / mean_ms
    p95_ms, p99_ms = (float(p) for p in percentiles(values, [95.0, 99.0]))
    p95_min_epochs, p99_min_epochs = percentile_min_epochs(95.0), percentile_min_epochs(99.0)
    median_lo_ms, median_hi_ms, median_coverage = median_interval(values, confidence_level)
    outliers = tuple(int(i) for i in flag_outliers(values, outlier_rule))
    decision = _decision_figures(
        values, confidence_level, target_rel_halfwidth, first_stage_epochs, rounds, round_gaps_epochs, earlier_runs
    )
    centre_ms = mean_ms if decision.rounds is None else decision.rounds.steady_mean_ms or mean_ms
    # The lower end may be cut at zero.
    relative_halfwidth = (decision.interval_ms[1] - centre_ms) / centre_ms
    meets_target = relative_halfwidth <= target_rel_halfwidth
    variance_ms2 = decision.long_run_variance_ms2
    ess = min(float(n), n * float(values.var(ddof=1)) / variance_ms2) if variance_ms2 > 0 else float(n)
    drift = two_level.drift_test(values, confidence_level, rounds, round_gaps_epochs)

    warnings: list[str] = []
    if n < intervals.MIN_EPOCHS:
        warnings.append(
            f"only {n} epochs, fewer than the {intervals.MIN_EPOCHS} the decision interval needs: it is the plain "
            "Student-t interval, which takes the epochs as independent, and no decision will be made from it"
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
            f"{target_rel_halfwidth:.1%}; about {decision.required_epochs} epochs would reach it"
        )
    if drift.detected:
        trend = "slowing down (throttling?)" if drift.slope_ms_per_epoch > 0 else "speeding up (still warming up?)"
        warnings.append(
            f"epoch times drift: {drift.slope_ms_per_epoch:+.3g} ms/epoch ({drift.shift_ms:+.3g} ms over the run), "
            f"p = {drift.p_value:.2g} by {drift.method}; {trend}"
        )

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
        decision_interval_ms=decision.interval_ms,
        decision_interval_method=decision.method,
        effective_sample_size=ess,
        relative_halfwidth=relative_halfwidth,
        target_rel_halfwidth=float(target_rel_halfwidth),
        meets_precision_target=meets_target,
        required_epochs=decision.required_epochs,
        drift_p_value=drift.p_value,
        drift_detected=drift.detected,
        warnings=tuple(warnings),
        drift_slope_ms_per_epoch=drift.slope_ms_per_epoch,
        drift_shift_ms=drift.shift_ms,
        drift_method=drift.method,
        first_stage_epochs=first_stage_epochs,
        rounds=decision.rounds,
    )
