"""Replicated rounds (the host's speed moves within seconds, so one block sees few of its states): epoch times as
y_ij = μ + a_i + e_ij, a_i ~ N(0, σ_a²) the round's host level, e_ij stationary (Kalibera & Jones 2013). The mean's
bound, a prediction for a new training and a drift test. Coverage: ``benchmarks/statistics_coverage.py``."""

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import special
from scipy import stats as sps

from gpubench.stats import intervals
from gpubench.stats.config import MIN_EPOCHS
from gpubench.stats.correlated import (
    ar1_timeline_correlation,
    balanced_mean_shape,
    correlated_estimate,
    round_means_correlation,
    with_round_correlation,
)
from gpubench.stats.intervals import check_level, t_quantile
from gpubench.stats.run_level import MIN_EARLIER_RUNS, combined, run_level
from gpubench.stats.serial import carried_round_correlation, rho_upper_bound

METHOD_ROUND_MEANS_AR1 = "round_means_t_ar1_bound"
METHOD_DRIFT_ROUND_MEANS = "round_means_slope_ar1_bound"
METHOD_DRIFT_AR1_BOUND = "ols_slope_ar1_bound"
METHOD_DRIFT_TOO_FEW = "too_few_epochs"
#: The epochs' lag-1 autocorrelation assumed where the run gives no bound of its own.
DRIFT_AR1_BOUND = 0.8
#: The share γ / α of the drift test's level spent on ρ's confidence set (:func:`drift_test`).
RHO_SET_SHARE = 0.1

BETWEEN = "between"
WITHIN = "within"


def _rounds(rounds_ms: Sequence[Sequence[float]], *, min_epochs: int = 1) -> list[np.ndarray]:
    """``rounds_ms`` as 1-D float arrays, checked: one round or more, each of ``min_epochs`` positive times."""
    rounds = [np.asarray(r, dtype=float) for r in rounds_ms]
    if not rounds:
        raise ValueError("need at least one round of epoch times, got none")
    for i, values in enumerate(rounds):
        if values.ndim != 1:
            raise ValueError(f"round {i} must be a 1-D sequence of epoch times, got shape {values.shape}")
        if values.size < min_epochs:
            raise ValueError(f"round {i} has {values.size} epoch(s); every round needs at least {min_epochs}")
        if not np.all(np.isfinite(values)) or np.any(values <= 0):
            raise ValueError(f"round {i}: epoch times must be finite, positive milliseconds")
    return rounds


def split_rounds(times_ms: Sequence[float], epochs_per_round: Sequence[int]) -> list[np.ndarray]:
    """``times_ms`` cut into consecutive rounds of ``epochs_per_round`` epochs."""
    counts = [int(c) for c in epochs_per_round]
    values = np.asarray(times_ms, dtype=float)
    if any(c < 1 for c in counts) or sum(counts) != values.size:
        raise ValueError(
            f"rounds {counts} must be positive epoch counts that sum to the {values.size} epoch times given"
        )
    return np.split(values, np.cumsum(counts)[:-1])


@dataclass(frozen=True)
class VarianceComponents:
    """One-way random-effects ANOVA of epoch times (ms) in rounds by moments: σ̂_e² = MS_within, σ̂_a² =
    max(0, (MS_between − MS_within) / n0); the F test of σ_a² = 0 takes epochs as independent."""

    rounds: int
    epochs_per_round: tuple[int, ...]
    grand_mean_ms: float
    round_means_ms: tuple[float, ...]
    ms_between: float
    ms_within: float
    effective_epochs_per_round: float
    within_variance_ms2: float
    between_variance_ms2: float
    f_statistic: float
    f_p_value: float
    intraclass_correlation: float
    dominant: str


def variance_components(rounds_ms: Sequence[Sequence[float]]) -> VarianceComponents:
    """The ANOVA of at least two rounds; MS_within = 0 gives F = inf, p = 0 if the means differ, else F = 0, p = 1."""
    rounds = _rounds(rounds_ms)
    r = len(rounds)
    counts = np.array([v.size for v in rounds], dtype=float)
    n_total = float(counts.sum())
    if r < 2 or n_total - r < 1:
        raise ValueError(
            f"variance components need at least 2 rounds and more epochs than rounds; got {r} round(s) of "
            f"{[int(c) for c in counts]} epochs"
        )
    means = np.array([v.mean() for v in rounds])
    grand = float(np.concatenate(rounds).mean())
    ms_between = float(counts @ (means - grand) ** 2) / (r - 1)
    ms_within = sum(float(((v - v.mean()) ** 2).sum()) for v in rounds) / (n_total - r)
    n0 = (n_total - float(counts @ counts) / n_total) / (r - 1)
    between = max((ms_between - ms_within) / n0, 0.0)
    if ms_within > 0:
        f_statistic = ms_between / ms_within
        f_p_value = float(sps.f.sf(f_statistic, r - 1, n_total - r))
    else:
        f_statistic, f_p_value = (math.inf, 0.0) if ms_between > 0 else (0.0, 1.0)
    total = between + ms_within
    between_part = between * float(counts @ counts) / n_total**2
    return VarianceComponents(
        rounds=r,
        epochs_per_round=tuple(int(c) for c in counts),
        grand_mean_ms=grand,
        round_means_ms=tuple(float(m) for m in means),
        ms_between=ms_between,
        ms_within=ms_within,
        effective_epochs_per_round=n0,
        within_variance_ms2=ms_within,
        between_variance_ms2=between,
        f_statistic=f_statistic,
        f_p_value=f_p_value,
        intraclass_correlation=between / total if total > 0 else 0.0,
        dominant=BETWEEN if between_part > ms_within / n_total else WITHIN,
    )


def steady_count(epochs: int, index: int) -> int:
    """The epochs of round ``index`` that :func:`steady_rounds` keeps."""
    return epochs - 1 if index > 0 and epochs > 2 else epochs


def steady_rounds(
    rounds: Sequence[np.ndarray], gaps_epochs: Sequence[float] | None
) -> tuple[list[np.ndarray], list[float], float]:
    """The rounds without the first epoch after each gap (where 3 or more), the gaps grown by it, and the left-out
    epochs' mean excess (ms) over their rounds, which a training pays once."""
    gaps = [0.0] * (len(rounds) - 1) if gaps_epochs is None else [float(g) for g in gaps_epochs]
    kept, excesses = [rounds[0]], []
    for i, values in enumerate(rounds[1:]):
        if steady_count(values.size, i + 1) < values.size:
            excesses.append(float(values[0] - values[1:].mean()))
            values, gaps[i] = values[1:], gaps[i] + 1.0
        kept.append(values)
    return kept, gaps, float(np.mean(excesses)) if excesses else 0.0


@dataclass(frozen=True)
class TwoLevelInterval:
    """The interval (ms) for the long-run mean epoch time from rounds: ``mean_ms`` over the steady epochs ±
    ``halfwidth_ms``. ``within_variance_ms2``: σ̂²∞ per epoch; ``between_variance_ms2``: σ̂_a²; ``between_share``:
    its fraction of ``variance_of_mean_ms2`` (in-run, on ``degrees_of_freedom``); ``rho``: the bound on the epochs'
    ρ; ``round_correlation``: φ; ``run_level_variance_ms2``: the run-to-run level (0 without a history)."""

    rounds: int
    epochs_per_round: tuple[int, ...]
    mean_ms: float
    interval_ms: tuple[float, float]
    halfwidth_ms: float
    degrees_of_freedom: float
    variance_of_mean_ms2: float
    within_variance_ms2: float
    within_degrees_of_freedom: float
    within_method: str
    between_variance_ms2: float
    between_share: float
    method: str
    gaps_epochs: tuple[float, ...] | None = None
    rho: float = DRIFT_AR1_BOUND
    round_correlation: float = 0.0
    first_epoch_excess_ms: float = 0.0
    run_level_variance_ms2: float = 0.0
    run_level_dof: float = math.inf
    history_runs: int = 0
    earlier_runs: tuple[tuple[float, float], ...] = ()
    from_run: bool = False

    @property
    def dominant(self) -> str:
        return BETWEEN if self.between_share > 0.5 else WITHIN

    @property
    def total_dof(self) -> float:
        return combined(self._pieces)[1]

    @property
    def _pieces(self) -> list[tuple[float, float]]:
        return [(self.variance_of_mean_ms2, self.degrees_of_freedom), (self.run_level_variance_ms2, self.run_level_dof)]


WITHIN_OBM = "overlapping_batch_means_pooled"
WITHIN_ANOVA = "anova_within"


def _within_level(rounds: list[np.ndarray]) -> tuple[float, float, str]:
    """(σ̂²∞ per epoch ms², dof, method): OBM pooled over long enough rounds, else the ANOVA's MS_within."""
    if all(v.size >= MIN_EPOCHS for v in rounds):
        pieces = [intervals.long_run_variance(v) for v in rounds]
        dof = sum(d for _, d in pieces)
        return sum(var * d for var, d in pieces) / dof, dof, WITHIN_OBM
    n_total = sum(v.size for v in rounds)
    if n_total - len(rounds) < 1:
        raise ValueError("the within level needs a round of at least 2 epochs")
    ss = sum(float(((v - v.mean()) ** 2).sum()) for v in rounds)
    return ss / (n_total - len(rounds)), float(n_total - len(rounds)), WITHIN_ANOVA


def round_means_design(
    counts: Sequence[int], gaps_epochs: Sequence[float] | None, rho: float = DRIFT_AR1_BOUND, phi: float = 0.0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(design 1, weights n_i / N, correlation) of the round means' regression for the mean of all epochs."""
    r = len(counts)
    gaps = [0.0] * (r - 1) if gaps_epochs is None else list(gaps_epochs)
    weights = np.array(counts, dtype=float) / sum(counts)
    correlation = with_round_correlation(round_means_correlation(counts, gaps, rho), phi)
    return np.ones((r, 1)), weights[None, :], correlation


def two_level_interval(
    rounds_ms: Sequence[Sequence[float]],
    confidence_level: float,
    gaps_epochs: Sequence[float] | None = None,
    *,
    from_run: bool = False,
    rho: float | None = None,
    earlier_runs: Sequence[tuple[float, float]] = (),
) -> TwoLevelInterval:
    """Student-t interval (ms) on ȳ = Σ w_i ȳ_i (w_i = n_i / N), the round means' errors σ² C, C = A Σ A' (AR(1) Σ
    at ρ through the gaps; :func:`~gpubench.stats.correlated.correlated_estimate`); one round: the decision interval.
    ``from_run``: steady epochs, ρ from :func:`rho_upper_bound` unless given, φ from
    :func:`carried_round_correlation` (the larger variance); else ρ = :data:`DRIFT_AR1_BOUND`. ``earlier_runs``:
    (mean ms, relative variance) of earlier runs, whose :func:`run_level` adds a variance piece."""
    check_level(confidence_level)
    rounds = _rounds(rounds_ms, min_epochs=2)
    r = len(rounds)
    measured_gaps = None if gaps_epochs is None else tuple(float(g) for g in gaps_epochs)
    if r == 1:
        (values,) = rounds
        low, high = intervals.decision_interval(values, confidence_level)
        variance, dof = intervals.long_run_variance(values)
        mean_ms = float(values.mean())
        return TwoLevelInterval(
            rounds=1,
            epochs_per_round=(values.size,),
            mean_ms=mean_ms,
            interval_ms=(low, high),
            halfwidth_ms=high - mean_ms,
            degrees_of_freedom=dof,
            variance_of_mean_ms2=variance / values.size,
            within_variance_ms2=variance,
            within_degrees_of_freedom=dof,
            within_method=WITHIN_OBM,
            between_variance_ms2=0.0,
            between_share=0.0,
            method=intervals.METHOD_OVERLAPPING_BATCH_MEANS,
            gaps_epochs=measured_gaps,
        )
    measured_counts = tuple(int(v.size) for v in rounds)
    rounds, gaps, excess_ms = steady_rounds(rounds, measured_gaps) if from_run else (rounds, measured_gaps, 0.0)
    counts = tuple(int(v.size) for v in rounds)
    if rho is None:
        rho = rho_upper_bound(rounds, gaps, confidence_level) if from_run else DRIFT_AR1_BOUND
    means = np.array([v.mean() for v in rounds])
    phi = carried_round_correlation(means, confidence_level) if from_run else 0.0
    phis = (0.0, phi) if phi else (0.0,)
    fits = (correlated_estimate(means, *round_means_design(counts, gaps, rho, p)) for p in phis)
    fit = max(fits, key=lambda candidate: candidate.variance)
    mean_ms, variance_of_mean = fit.estimate, fit.variance
    within, within_dof, within_method = _within_level(rounds)
    between_part = max(variance_of_mean - within / sum(counts), 0.0)
    earlier = tuple((float(m), float(v)) for m, v in earlier_runs)
    run_variance, run_dof, runs = 0.0, math.inf, 0
    if len(earlier) >= MIN_EARLIER_RUNS:
        level = run_level(
            [*(m for m, _ in earlier), mean_ms], [*(v for _, v in earlier), variance_of_mean / mean_ms**2]
        )
        run_variance, run_dof, runs = level.relative_variance * mean_ms**2, level.degrees_of_freedom, level.runs
    variance, dof = combined([(variance_of_mean, fit.degrees_of_freedom), (run_variance, run_dof)])
    halfwidth_ms = t_quantile(confidence_level, dof) * math.sqrt(variance)
    weights = np.array(counts, dtype=float) / sum(counts)
    return TwoLevelInterval(
        rounds=r,
        epochs_per_round=measured_counts,
        mean_ms=mean_ms,
        interval_ms=(max(mean_ms - halfwidth_ms, 0.0), mean_ms + halfwidth_ms),
        halfwidth_ms=halfwidth_ms,
        degrees_of_freedom=fit.degrees_of_freedom,
        variance_of_mean_ms2=variance_of_mean,
        within_variance_ms2=within,
        within_degrees_of_freedom=within_dof,
        within_method=within_method,
        between_variance_ms2=between_part / float(weights @ weights),
        between_share=between_part / variance_of_mean if variance_of_mean > 0 else 0.0,
        method=METHOD_ROUND_MEANS_AR1,
        gaps_epochs=measured_gaps,
        rho=rho,
        round_correlation=phi,
        first_epoch_excess_ms=excess_ms,
        run_level_variance_ms2=run_variance,
        run_level_dof=run_dof,
        history_runs=runs,
        earlier_runs=earlier,
        from_run=from_run,
    )


def planning_gap_epochs(gaps_epochs: Sequence[float] | None) -> float:
    """The gap (model epochs) planned between rounds: the smallest measured, 0 when unknown."""
    return min(gaps_epochs) if gaps_epochs else 0.0


def variance_ratio_after(
    epochs_per_round: Sequence[int],
    gaps_epochs: Sequence[float] | None,
    rounds: int,
    round_epochs: int,
    *,
    rho: float = DRIFT_AR1_BOUND,
    phi: float = 0.0,
    steady: bool = False,
) -> tuple[float, float, float]:
    """(w'C'w' / w'Cw, ν, ν'): the in-run variance of the mean after ``rounds`` rounds of ``round_epochs`` over the
    measured, σ̂² held, and the dof before and after; both designs balanced, evenly spaced."""
    measured = len(epochs_per_round)
    if measured < 2 or rounds < 2 or round_epochs < 1:
        raise ValueError(
            f"need at least 2 rounds measured and planned, of at least 1 epoch; got {measured} measured, "
            f"{rounds} round(s) of {round_epochs} planned"
        )
    counts = [steady_count(c, int(steady)) for c in (*epochs_per_round, round_epochs)]
    gap = planning_gap_epochs(gaps_epochs) + (counts[-1] < round_epochs)
    w_c_w, dof = balanced_mean_shape(measured, max(1, round(sum(counts[:-1]) / measured)), gap, rho, phi)
    after, dof_after = balanced_mean_shape(rounds, counts[-1], gap, rho, phi)
    return after / w_c_w, dof, dof_after


def planned_halfwidth(
    variance_of_mean_ms2: float,
    variance_ratio: float,
    dof_after: float,
    run_level_variance_ms2: float,
    run_level_dof: float,
    confidence_level: float,
) -> float:
    """The half-width (ms) with the in-run variance scaled by ``variance_ratio``, the run-to-run piece kept."""
    check_level(confidence_level)
    pieces = [(variance_of_mean_ms2 * variance_ratio, dof_after), (run_level_variance_ms2, run_level_dof)]
    variance, dof = combined(pieces)
    return t_quantile(confidence_level, dof) * math.sqrt(variance)


def halfwidth_after(
    interval: TwoLevelInterval,
    rounds: int,
    epochs_per_round: int,
    confidence_level: float,
    *,
    degrees_of_freedom: float | None = None,
) -> float:
    """The half-width (ms) of ``interval`` after ``rounds`` rounds of ``epochs_per_round``, its scale held;
    ``degrees_of_freedom``: the in-run ν' (a two-stage rule keeps the first stage's), else Satterthwaite's."""
    ratio, _, dof_after = variance_ratio_after(
        interval.epochs_per_round,
        interval.gaps_epochs,
        rounds,
        epochs_per_round,
        rho=interval.rho,
        phi=interval.round_correlation,
        steady=interval.from_run,
    )
    if degrees_of_freedom is not None:
        if not degrees_of_freedom > 0:
            raise ValueError(f"degrees_of_freedom must be positive, got {degrees_of_freedom!r}")
        dof_after = degrees_of_freedom
    return planned_halfwidth(
        interval.variance_of_mean_ms2,
        ratio,
        dof_after,
        interval.run_level_variance_ms2,
        interval.run_level_dof,
        confidence_level,
    )


def new_run_interval(
    rounds_ms: Sequence[Sequence[float]],
    epochs: int,
    confidence_level: float,
    gaps_epochs: Sequence[float] | None = None,
    *,
    from_run: bool = False,
    earlier_runs: Sequence[tuple[float, float]] = (),
) -> tuple[float, float]:
    """A prediction interval (ms) for the mean epoch time of one new training of ``epochs`` epochs, from two rounds
    or more: variance V (1 + 1/Σ w_i²) + σ̂²∞ max(0, 1/e − 1/(N Σ w_i²)) + 2 σ̂_b² (balanced, e = m: s² (1 + 1/R)),
    on Satterthwaite's degrees of freedom, at most V's."""
    check_level(confidence_level)
    if epochs < 1:
        raise ValueError(f"epochs must be at least 1, got {epochs}")
    interval = two_level_interval(
        rounds_ms, confidence_level, gaps_epochs, from_run=from_run, earlier_runs=earlier_runs
    )
    if interval.rounds < 2:
        raise ValueError("a prediction for a new training needs at least 2 rounds: one round shows no host level")
    counts = np.array([steady_count(c, i * from_run) for i, c in enumerate(interval.epochs_per_round)], dtype=float)
    n_total = float(counts.sum())
    sum_w2 = float((counts / n_total) @ (counts / n_total))
    v, w = interval.variance_of_mean_ms2, interval.within_variance_ms2
    # Neither σ̂_a² truncated at 0 nor the negative within part: both undercover.
    pieces = [
        (v * (1.0 + 1.0 / sum_w2), interval.degrees_of_freedom),
        (max(1.0 / epochs - 1.0 / (n_total * sum_w2), 0.0) * w, interval.within_degrees_of_freedom),
        (2.0 * interval.run_level_variance_ms2, interval.run_level_dof),
    ]
    variance, dof = combined(pieces)
    halfwidth = t_quantile(confidence_level, min(dof, interval.total_dof)) * math.sqrt(variance)
    return max(interval.mean_ms - halfwidth, 0.0), interval.mean_ms + halfwidth


@dataclass(frozen=True)
class DriftTest:
    """A linear trend of epoch times (ms per epoch), its two-sided ``p_value``; ``shift_ms`` = slope × (n − 1)."""

    slope_ms_per_epoch: float
    slope_standard_error_ms: float
    degrees_of_freedom: float
    p_value: float
    detected: bool
    method: str
    shift_ms: float


def ols_slope_test(y: np.ndarray, design: np.ndarray, covariance: np.ndarray) -> tuple[float, float, float, float]:
    """(slope, standard error, dof, two-sided p) of the OLS slope (last column) under errors σ² ``covariance``."""
    fit = correlated_estimate(y, design, np.linalg.pinv(design), covariance)
    standard_error = math.sqrt(fit.variance)
    slope, dof = fit.estimate, fit.degrees_of_freedom
    if standard_error > 0:
        # scipy.special: sps.t.sf's argument checks cost 20x the tail, and simulations call this a million times.
        p_value = float(2.0 * special.stdtr(dof, -abs(slope) / standard_error))
    else:
        p_value = 0.0 if slope != 0 else 1.0
    return slope, standard_error, dof, p_value


def round_gaps_epochs(started_s: Sequence[float], epochs: Sequence[int], mean_epoch_ms: Sequence[float]) -> list[float]:
    """The gaps between a model's consecutive rounds, in its mean epochs (at least 0)."""
    if not len(started_s) == len(epochs) == len(mean_epoch_ms):
        raise ValueError("started_s, epochs and mean_epoch_ms must have one value per round")
    total_ms = sum(e * m for e, m in zip(epochs, mean_epoch_ms, strict=True))
    if sum(epochs) < 1 or not total_ms > 0:
        raise ValueError("the rounds must hold at least one epoch of positive duration")
    epoch_s = total_ms / sum(epochs) / 1000.0
    ends = [s + e * m / 1000.0 for s, e, m in zip(started_s, epochs, mean_epoch_ms, strict=True)]
    return [max(0.0, (later - end) / epoch_s) for end, later in zip(ends[:-1], started_s[1:], strict=True)]


def drift_test(
    times_ms: Sequence[float],
    confidence_level: float = 0.95,
    rounds: Sequence[int] | None = None,
    gaps_epochs: Sequence[float] | None = None,
    *,
    rho: float | None = None,
) -> DriftTest:
    """Test steady epoch times (ms, in order) for a linear drift, under AR(1) epochs at ``rho`` (None: the largest
    p over ρ up to :func:`rho_upper_bound` at 1 − γ, plus γ = :data:`RHO_SET_SHARE` × the test's level): three
    rounds or more, the slope of the round means on their centre epochs; else the slope on the epoch index with an
    intercept per round. Fewer than four epochs: no test (p = 1)."""
    check_level(confidence_level)
    values = np.asarray(times_ms, dtype=float)
    if values.ndim != 1 or not np.all(np.isfinite(values)):
        raise ValueError("epoch times must be a 1-D sequence of finite milliseconds")
    original = [values.size] if rounds is None else [int(c) for c in rounds]
    parts, gaps, _ = steady_rounds(split_rounds(values, original), gaps_epochs)
    counts = [p.size for p in parts]
    values = np.concatenate(parts)
    n = values.size
    if n - len(counts) - 1 < 2:
        return DriftTest(0.0, 0.0, 0.0, 1.0, False, METHOD_DRIFT_TOO_FEW, 0.0)
    if rho is None:
        # Berger & Boos (1994): the largest p over a 1 − γ confidence set for ρ, plus γ, is a valid p-value whatever
        # the true ρ, where a test at the bound alone runs at its full level whenever the bound is the truth.
        miss = (1.0 - confidence_level) * RHO_SET_SHARE
        rhos, added = np.linspace(0.0, rho_upper_bound(parts, gaps, 1.0 - 2.0 * miss), 5), miss
    else:
        rhos, added = np.array([rho]), 0.0
    if len(counts) >= 3:
        # Centres on the model's epoch index, left-out first epochs counted.
        starts = np.concatenate(([0], np.cumsum(original)[:-1])) + np.subtract(original, counts)
        y = np.array([p.mean() for p in parts])
        design = np.column_stack([np.ones(len(counts)), starts + (np.array(counts) - 1) / 2.0])
        correlation, method = round_means_correlation, METHOD_DRIFT_ROUND_MEANS
    else:
        y = values
        design = np.column_stack([np.repeat(np.eye(len(counts)), counts, axis=0), np.arange(n, dtype=float)])
        correlation, method = ar1_timeline_correlation, METHOD_DRIFT_AR1_BOUND
    if np.ptp(values) == 0:
        # Rounding must not turn a slope of 0 into a "significant" one.
        return DriftTest(0.0, 0.0, float(design.shape[0] - design.shape[1]), 1.0, False, method, 0.0)
    fits = (ols_slope_test(y, design, correlation(counts, gaps, float(r))) for r in rhos)
    slope, se, dof, p_value = max(fits, key=lambda fit: fit[3])
    p_value = min(1.0, p_value + added)
    return DriftTest(
        slope_ms_per_epoch=slope,
        slope_standard_error_ms=se,
        degrees_of_freedom=dof,
        p_value=p_value,
        detected=p_value < 1.0 - confidence_level,
        method=method,
        shift_ms=slope * (n - 1),
    )
