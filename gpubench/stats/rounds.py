"""Replicated rounds: the mean epoch time's bound from two variance levels, a prediction for one new training, and a
drift test that knows autocorrelation.

The host's speed moves between states within seconds, so one block of epochs sees one or two of them. Each model is
measured in R rounds of m epochs and its epoch times modelled as a one-way random-effects layout (Kalibera & Jones
2013, ISMM): y_ij = μ + a_i + e_ij, a_i ~ N(0, σ_a²) the round's host level, e_ij stationary within the round.
Coverage evidence: ``benchmarks/statistics_coverage.py --two-level``. Pure numpy/scipy.
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import special
from scipy import stats as sps

from gpubench.stats import intervals
from gpubench.stats.config import MIN_EPOCHS
from gpubench.stats.correlated import (
    CorrelatedEstimate,
    ar1_timeline_correlation,
    balanced_mean_shape,
    correlated_estimate,
    round_means_correlation,
    with_round_correlation,
)
from gpubench.stats.run_level import MIN_EARLIER_RUNS, combined, run_level
from gpubench.stats.serial import carried_round_correlation, rho_upper_bound

#: The two-level interval's method: Student-t on the round means, their correlation under AR(1) epochs at the run's
#: upper bound on ρ carried through the gaps between rounds (and between successive rounds, where they correlate).
METHOD_ROUND_MEANS_AR1 = "round_means_t_ar1_bound"
#: Drift, three rounds or more: OLS slope of the round means on the rounds' centre epochs, under that correlation.
METHOD_DRIFT_ROUND_MEANS = "round_means_slope_ar1_bound"
#: Drift, one or two rounds: OLS slope on the epoch index, its variance under AR(1) epochs at the bound on ρ.
METHOD_DRIFT_AR1_BOUND = "ols_slope_ar1_bound"
#: Drift with too few epochs to estimate a slope's standard error.
METHOD_DRIFT_TOO_FEW = "too_few_epochs"
#: The lag-1 autocorrelation of epochs assumed where the run gives no bound of its own (planning without rounds).
DRIFT_AR1_BOUND = 0.8

BETWEEN = "between"
WITHIN = "within"


def _rounds(rounds_ms: Sequence[Sequence[float]], *, min_epochs: int = 1) -> list[np.ndarray]:
    """``rounds_ms`` as a list of 1-D float arrays, checked: at least one round, each of at least ``min_epochs``
    finite, positive epoch times."""
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


def _check_level(confidence_level: float) -> None:
    if not 0.0 < confidence_level < 1.0:
        raise ValueError(f"confidence_level must be strictly between 0 and 1, got {confidence_level!r}")


def split_rounds(times_ms: Sequence[float], epochs_per_round: Sequence[int]) -> list[np.ndarray]:
    """``times_ms`` (in measurement order) cut into consecutive rounds of ``epochs_per_round`` epochs each."""
    counts = [int(c) for c in epochs_per_round]
    values = np.asarray(times_ms, dtype=float)
    if any(c < 1 for c in counts) or sum(counts) != values.size:
        raise ValueError(
            f"rounds {counts} must be positive epoch counts that sum to the {values.size} epoch times given"
        )
    return np.split(values, np.cumsum(counts)[:-1])


@dataclass(frozen=True)
class VarianceComponents:
    """One-way random-effects ANOVA of epoch times (ms) in rounds, by the method of moments (variances in ms²).

    σ̂_e² = MS_within; σ̂_a² = (MS_between − MS_within) / n0, truncated at 0, n0 the effective epochs per round.
    The F test of σ_a² = 0 takes epochs within a round as independent (autocorrelation makes it reject too often).
    ``dominant``: the level contributing more to the grand mean's variance.
    """

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
    """The ANOVA variance components of epoch times (ms) in rounds: at least two rounds, one more epoch than rounds.
    MS_within = 0 gives F = inf, p = 0 when the round means differ, else F = 0, p = 1."""
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
    """The epochs of round ``index`` (from 0) :func:`steady_rounds` keeps."""
    return epochs - 1 if index > 0 and epochs > 2 else epochs


def steady_rounds(
    rounds: Sequence[np.ndarray], gaps_epochs: Sequence[float] | None
) -> tuple[list[np.ndarray], list[float], float]:
    """The rounds with the first epoch after each gap left out (rounds 2 on, where 3 epochs or more leave the within
    level two), the gaps grown by it, and the mean excess (ms) of the left-out epochs over their rounds' others,
    which a training pays once (0 where none is left out)."""
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
    """The interval (ms) for the long-run mean epoch time from epochs measured in rounds.

    ``interval_ms`` = ``mean_ms`` ± ``halfwidth_ms`` (lower end cut at zero), ``mean_ms`` over the steady epochs
    (:func:`steady_rounds`; ``first_epoch_excess_ms`` the left-out epochs' mean excess). ``within_variance_ms2``:
    σ̂²∞ per epoch (ms², by ``within_method``); ``between_variance_ms2``: σ̂_a² (ms², truncated at 0);
    ``between_share``: the between level's fraction of the in-run ``variance_of_mean_ms2``. ``rho``: the bound on
    the epochs' ρ; ``round_correlation``: φ carried between successive rounds; ``run_level_variance_ms2`` the
    machine's run-to-run level (ms², on ``run_level_dof``, from ``history_runs`` runs; 0 without a history).
    ``degrees_of_freedom`` is the in-run variance's; ``total_dof`` the interval's. ``gaps_epochs``: the measured
    gaps between rounds (model epochs), None back to back. ``earlier_runs``: the history's (mean ms, relative
    variance) of this config on this machine, given.
    """

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
        """``between`` when the host level contributes more than half the mean's variance, else ``within``."""
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
    """The within level's long-run variance per epoch (ms²), its degrees of freedom and method: OBM pooled over the
    rounds when each is long enough, else the ANOVA within mean square on N − R degrees of freedom."""
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
    """The round means' regression for the mean of all epochs: design 1 (R × 1), weights w_i = n_i / N, and the
    round means' correlation (:func:`~gpubench.stats.correlated.round_means_correlation` at ``rho``, with φ =
    ``phi`` between successive rounds)."""
    r = len(counts)
    gaps = [0.0] * (r - 1) if gaps_epochs is None else list(gaps_epochs)
    weights = np.array(counts, dtype=float) / sum(counts)
    correlation = with_round_correlation(round_means_correlation(counts, gaps, rho), phi)
    return np.ones((r, 1)), weights[None, :], correlation


def _variance(fit: CorrelatedEstimate) -> float:
    return fit.variance


def _quantile(confidence_level: float, dof: float) -> float:
    return float(sps.t.ppf(0.5 + confidence_level / 2.0, dof))


def two_level_interval(
    rounds_ms: Sequence[Sequence[float]],
    confidence_level: float,
    gaps_epochs: Sequence[float] | None = None,
    *,
    from_run: bool = False,
    rho: float | None = None,
    earlier_runs: Sequence[tuple[float, float]] = (),
) -> TwoLevelInterval:
    """The interval (ms) for the long-run mean epoch time from R rounds: Student-t on the round means, their
    correlation counted. ``gaps_epochs``: between consecutive rounds, model epochs (None: back to back);
    ``from_run`` (the decision's interval): the first epoch after each gap left out (:func:`steady_rounds`), ρ the
    run's upper bound (:func:`rho_upper_bound`) unless ``rho`` is given, and φ carried; else ρ =
    :data:`DRIFT_AR1_BOUND` and every epoch. ``earlier_runs``: (mean epoch ms, relative variance of that mean) of
    earlier runs of this config on this machine; from :data:`MIN_EARLIER_RUNS` of them the run-to-run level
    (:func:`run_level`, this run included) is added as a variance piece.

    ȳ = Σ w_i ȳ_i (w_i = n_i / N); the round means' errors have covariance σ² C, C = A Σ A', Σ the AR(1)
    correlation at ρ carried through the gaps (A averages each round), and (``from_run``) successive rounds
    correlated φ where their means' permutation test says so (:func:`carried_round_correlation`; the larger
    variance of with and without); σ̂² = RSS / tr(BC), V = σ̂² w'Cw, on Satterthwaite's ν = tr(BC)² / tr((BC)²). One
    round: the decision interval on it. Coverage: benchmarks/results/2026-12-03-single-model-coverage.md.
    """
    _check_level(confidence_level)
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
    fit = max((correlated_estimate(means, *round_means_design(counts, gaps, rho, p)) for p in phis), key=_variance)
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
    halfwidth_ms = _quantile(confidence_level, dof) * math.sqrt(variance)
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
    """The gap (model epochs) planned between a model's rounds: the smallest measured, 0 when unknown."""
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
    """(w'C'w' / w'Cw, ν, ν'): how many times the measured in-run variance of the mean ``rounds`` rounds of
    ``round_epochs`` epochs would have, σ̂² held, and the degrees of freedom before and after (Satterthwaite's), both
    designs balanced in steady epochs (:func:`steady_rounds`), evenly spaced at :func:`planning_gap_epochs`."""
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
    """The half-width (ms) with the in-run variance scaled by ``variance_ratio`` on ``dof_after`` degrees of
    freedom, and the run-to-run piece, which more rounds of this run cannot shrink, kept."""
    _check_level(confidence_level)
    pieces = [(variance_of_mean_ms2 * variance_ratio, dof_after), (run_level_variance_ms2, run_level_dof)]
    variance, dof = combined(pieces)
    return _quantile(confidence_level, dof) * math.sqrt(variance)


def halfwidth_after(
    interval: TwoLevelInterval,
    rounds: int,
    epochs_per_round: int,
    confidence_level: float,
    *,
    degrees_of_freedom: float | None = None,
) -> float:
    """The half-width (ms) the two-level ``interval`` would have after ``rounds`` rounds of ``epochs_per_round``
    epochs, its scale held (:func:`planned_halfwidth`). ``degrees_of_freedom``: the in-run ν' (a two-stage rule keeps
    the first stage's); else Satterthwaite's. Needs at least two rounds."""
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
    """A prediction interval (ms) for the mean epoch time of one new, independent training of ``epochs`` epochs,
    from rounds ``gaps_epochs`` apart (None: back to back).

    Variance V (1 + 1/Σ w_i²) + σ̂²∞ max(0, 1/e − 1/(N Σ w_i²)) + 2 σ̂_b², V the two-level interval's in-run part:
    the round means' spread stands for σ_a² plus a round's epochs (balanced, e = m: the classical s² (1 + 1/R));
    σ̂_b² the run-to-run level, this run's and the new one's. Degrees of freedom: Satterthwaite's, never more than
    V's. Needs two rounds. Coverage: benchmarks/results/2026-12-03-single-model-coverage.md.
    """
    _check_level(confidence_level)
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
    # Neither σ̂_a² truncated at 0 nor the negative within part: both undercover (the coverage page).
    pieces = [
        (v * (1.0 + 1.0 / sum_w2), interval.degrees_of_freedom),
        (max(1.0 / epochs - 1.0 / (n_total * sum_w2), 0.0) * w, interval.within_degrees_of_freedom),
        (2.0 * interval.run_level_variance_ms2, interval.run_level_dof),
    ]
    variance, dof = combined(pieces)
    halfwidth = _quantile(confidence_level, min(dof, interval.total_dof)) * math.sqrt(variance)
    return max(interval.mean_ms - halfwidth, 0.0), interval.mean_ms + halfwidth


@dataclass(frozen=True)
class DriftTest:
    """A test for a linear trend in epoch times (ms) against the epoch index: slope and standard error (ms per
    epoch), two-sided ``p_value``, ``detected`` when p < 1 − level, ``shift_ms`` = slope × (n − 1)."""

    slope_ms_per_epoch: float
    slope_standard_error_ms: float
    degrees_of_freedom: float
    p_value: float
    detected: bool
    method: str
    shift_ms: float


def ols_slope_test(y: np.ndarray, design: np.ndarray, covariance: np.ndarray) -> tuple[float, float, float, float]:
    """OLS of ``y`` on ``design`` (last column tested), the slope's variance under errors of correlation
    ``covariance`` × σ²: σ̂² = RSS / tr(MΣ), Satterthwaite's degrees of freedom. Returns (slope, standard error,
    degrees of freedom, two-sided p-value)."""
    fit = correlated_estimate(y, design, np.linalg.pinv(design), covariance)
    standard_error = math.sqrt(fit.variance)
    slope, dof = fit.estimate, fit.degrees_of_freedom
    if standard_error > 0:
        # Student-t's tail straight from scipy.special: sps.t.sf's argument checks cost 20x the tail itself, and
        # the simulations call this test a million times.
        p_value = float(2.0 * special.stdtr(dof, -abs(slope) / standard_error))
    else:
        p_value = 0.0 if slope != 0 else 1.0
    return slope, standard_error, dof, p_value


def round_gaps_epochs(started_s: Sequence[float], epochs: Sequence[int], mean_epoch_ms: Sequence[float]) -> list[float]:
    """The gaps between consecutive rounds of one model, in that model's mean epochs (negative gaps count as 0)."""
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
    """Test epoch times (ms, in measurement order) for a linear drift, the false-positive rate at or under
    1 − ``confidence_level`` on AR(1) epochs up to ``rho`` (None: the run's upper bound, :func:`rho_upper_bound`).
    ``rounds``: epochs per round; ``gaps_epochs``: between rounds (:func:`round_gaps_epochs`; None: back to back).
    The first epoch after each gap is left out (:func:`steady_rounds`).

    Three rounds or more: the slope of the round means on the rounds' centre epochs under their correlation A Σ A'.
    Otherwise the slope on the epoch index under Σ, an intercept per round. Fewer than four epochs: no test (p = 1).
    Evidence: benchmarks/results/2026-12-03-drift-false-positives.md.
    """
    _check_level(confidence_level)
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
        rho = rho_upper_bound(parts, gaps, confidence_level)
    if len(counts) >= 3:
        # Centres on the model's own epoch index, the left-out first epochs counted in it.
        starts = np.concatenate(([0], np.cumsum(original)[:-1])) + np.subtract(original, counts)
        y = np.array([p.mean() for p in parts])
        design = np.column_stack([np.ones(len(counts)), starts + (np.array(counts) - 1) / 2.0])
        correlation, method = round_means_correlation(counts, gaps, rho), METHOD_DRIFT_ROUND_MEANS
    else:
        y = values
        design = np.column_stack([np.repeat(np.eye(len(counts)), counts, axis=0), np.arange(n, dtype=float)])
        correlation, method = ar1_timeline_correlation(counts, gaps, rho), METHOD_DRIFT_AR1_BOUND
    if np.ptp(values) == 0:
        # No variation at all: the slope is 0 and rounding must not turn it into a "significant" one.
        return DriftTest(0.0, 0.0, float(design.shape[0] - design.shape[1]), 1.0, False, method, 0.0)
    slope, se, dof, p_value = ols_slope_test(y, design, correlation)
    return DriftTest(
        slope_ms_per_epoch=slope,
        slope_standard_error_ms=se,
        degrees_of_freedom=dof,
        p_value=p_value,
        detected=p_value < 1.0 - confidence_level,
        method=method,
        shift_ms=slope * (n - 1),
    )
