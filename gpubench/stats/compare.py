"""Is run B's mean time per unit of work shorter, longer or the same as A's? Fieller's interval of the ratio B / A
of the runs' two-level means and a threshold ``d``: FASTER if ``high < 1 − d``, SLOWER if ``low > 1 + d``, SAME
inside ``[1 − d, 1 + d]``, else AMBIGUOUS. Coverage: ``benchmarks/compare_coverage.py``."""

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats as sps

from gpubench.stats.correlated import balanced_mean_shape
from gpubench.stats.intervals import MIN_EPOCHS, degrees_of_freedom
from gpubench.stats.rounds import DRIFT_AR1_BOUND, planning_gap_epochs, round_means_design, two_level_interval

FASTER = "FASTER"
SLOWER = "SLOWER"
SAME = "SAME"
AMBIGUOUS = "AMBIGUOUS"

#: The difference (a fraction of A's time) and the power that the rounds printed beside AMBIGUOUS plan for.
PLANNED_DIFFERENCE = 0.10
PLANNED_POWER = 0.8
MAX_PLANNED_EPOCHS = 100_000
#: Equal-probability points of the measured variance's uncertainty that the power is averaged over.
_VARIANCE_QUANTILES = (np.arange(64) + 0.5) / 64


@dataclass(frozen=True)
class RunMean:
    """One run's mean time (ms), its variance (ms²) and degrees of freedom; ``variance_scale_ms2``: the σ̂² that
    variance is a multiple of (for planning); ``gap_epochs``: the gap planned between rounds."""

    epochs_per_round: tuple[int, ...]
    gap_epochs: float
    mean_ms: float
    variance_of_mean_ms2: float
    dof: float
    variance_scale_ms2: float

    @classmethod
    def of(cls, rounds_ms: Sequence[ArrayLike], gaps_epochs: Sequence[float] | None = None) -> "RunMean":
        """The two-level mean of ``rounds_ms`` (ms, in order, ``gaps_epochs`` apart; None: back to back)."""
        parts = [np.asarray(r, dtype=float) for r in rounds_ms]
        problem = rounds_problem([p.size for p in parts])
        if problem:
            raise ValueError(problem)
        interval = two_level_interval(parts, 0.95, gaps_epochs)
        counts = interval.epochs_per_round
        if len(counts) == 1:
            shape = 1.0 / counts[0]
        else:
            _, estimator, correlation = round_means_design(counts, interval.gaps_epochs)
            shape = float(estimator[0] @ correlation @ estimator[0])
        values = np.concatenate(parts)
        # Constant times have no variance, not the estimates' rounding noise.
        variance = 0.0 if np.all(values == values[0]) else interval.variance_of_mean_ms2
        return cls(
            counts,
            planning_gap_epochs(interval.gaps_epochs),
            interval.mean_ms,
            variance,
            interval.degrees_of_freedom,
            variance / shape,
        )

    @property
    def epochs(self) -> int:
        return sum(self.epochs_per_round)

    @property
    def round_epochs(self) -> int:
        """The epochs of one planned round at most: the measured rounds' mean length."""
        return max(1, round(self.epochs / len(self.epochs_per_round)))

    def planned_rounds(self, epochs: int) -> int:
        """The rounds ``epochs`` epochs are measured in: as few as keep rounds at most :attr:`round_epochs` long
        (at least 2; 1 for a run measured in one block)."""
        if len(self.epochs_per_round) == 1:
            return 1
        return max(2, math.ceil(epochs / self.round_epochs))

    def planned(self, epochs: int) -> tuple[float, float]:
        """(variance of the mean ms², dof) after ``epochs`` epochs in :meth:`planned_rounds` evenly spaced rounds
        of epochs / rounds epochs on average (``statistics.rounds`` splits them within one epoch), scale held."""
        if len(self.epochs_per_round) == 1:
            return self.variance_scale_ms2 / epochs, degrees_of_freedom(epochs)
        rounds = self.planned_rounds(epochs)
        shape, dof = balanced_mean_shape(rounds, epochs / rounds, self.gap_epochs, DRIFT_AR1_BOUND)
        return self.variance_scale_ms2 * shape, dof


def rounds_problem(epochs_per_round: Sequence[int]) -> str | None:
    """Why epochs in rounds of these sizes give no two-level mean, or None when they do."""
    counts = list(epochs_per_round)
    if len(counts) == 1 and counts[0] < MIN_EPOCHS:
        return f"one block of {counts[0]} epoch(s); a comparison needs {MIN_EPOCHS}, or rounds"
    if len(counts) > 1 and min(counts) < 2:
        return f"rounds of {counts} epochs; a comparison needs at least 2 epochs in every round"
    return None


@dataclass(frozen=True)
class RatioInterval:
    """Fieller's interval for ``mean_B / mean_A`` (ends in [0, inf]) on Satterthwaite's ``df`` at the ratio."""

    ratio: float
    low: float
    high: float
    df: float
    confidence_level: float


@dataclass(frozen=True)
class MeanTimeComparison:
    """B's times against A's, ratios B / A; ``p_value`` NaN when neither varies; ``epochs_for_power``: AMBIGUOUS
    only (:func:`epochs_for_power` given that verdict); ``identical_measurements``: B's times are A's, SAME by
    definition."""

    a: RunMean
    b: RunMean
    ratio_b_over_a: float
    ratio_interval: tuple[float, float]
    ratio_interval_df: float
    confidence_level: float
    threshold: float
    p_value: float
    verdict: str
    epochs_for_power: int | None
    identical_measurements: bool


def check_settings(threshold: float, confidence_level: float) -> None:
    """Raise ValueError unless the noise threshold and the interval's level both lie strictly in (0, 1)."""
    if not 0 < threshold < 1:
        raise ValueError(f"threshold must lie in (0, 1), got {threshold}")
    if not 0 < confidence_level < 1:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence_level}")


def _satterthwaite_dof(variance_1: ArrayLike, dof_1: ArrayLike, variance_2: ArrayLike, dof_2: ArrayLike) -> np.ndarray:
    """Satterthwaite's degrees of freedom of ``variance_1 + variance_2`` (inf where both are zero)."""
    v1, v2 = np.asarray(variance_1, dtype=float), np.asarray(variance_2, dtype=float)
    total = v1 + v2
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(total > 0, total**2 / (v1**2 / dof_1 + v2**2 / dof_2), np.inf)


def fieller_bounds(
    mean_a_ms: ArrayLike,
    variance_of_mean_a_ms2: ArrayLike,
    dof_a: ArrayLike,
    mean_b_ms: ArrayLike,
    variance_of_mean_b_ms2: ArrayLike,
    dof_b: ArrayLike,
    confidence_level: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(ratio, low, high, df) of Fieller's interval for ``mean_b / mean_a``, elementwise; (0, inf) where A's mean
    is within t·se of zero."""
    mean_a, mean_b = np.asarray(mean_a_ms, dtype=float), np.asarray(mean_b_ms, dtype=float)
    var_a, var_b = np.asarray(variance_of_mean_a_ms2, dtype=float), np.asarray(variance_of_mean_b_ms2, dtype=float)
    ratio = mean_b / mean_a
    dof = _satterthwaite_dof(var_b, dof_b, ratio**2 * var_a, dof_a)
    t = sps.t.ppf((1 + confidence_level) / 2, dof)
    leading = mean_a**2 - t**2 * var_a
    # Where ``leading`` <= 0 the ratios form no interval; a negative low root (B's mean within t·se of 0) becomes 0.
    with np.errstate(invalid="ignore", divide="ignore"):
        half = t * np.sqrt(mean_a**2 * var_b + mean_b**2 * var_a - t**2 * var_a * var_b)
        centre = mean_a * mean_b
        low = np.where(leading > 0, np.maximum((centre - half) / leading, 0.0), 0.0)
        high = np.where(leading > 0, (centre + half) / leading, np.inf)
    # Neither mean varies: the ratio is known exactly (and not one rounding step off it).
    exact = (var_a == 0) & (var_b == 0)
    return ratio, np.where(exact, ratio, low), np.where(exact, ratio, high), dof


def fieller_interval(a: RunMean, b: RunMean, confidence_level: float) -> RatioInterval:
    """Fieller's interval for ``b.mean_ms / a.mean_ms`` with Satterthwaite degrees of freedom from the two runs'."""
    ratio, low, high, dof = fieller_bounds(
        a.mean_ms, a.variance_of_mean_ms2, a.dof, b.mean_ms, b.variance_of_mean_ms2, b.dof, confidence_level
    )
    return RatioInterval(float(ratio), float(low), float(high), float(dof), confidence_level)


def difference_p_values(
    mean_a_ms: ArrayLike,
    variance_of_mean_a_ms2: ArrayLike,
    dof_a: ArrayLike,
    mean_b_ms: ArrayLike,
    variance_of_mean_b_ms2: ArrayLike,
    dof_b: ArrayLike,
) -> np.ndarray:
    """Two-sided p-values of Welch's t test of equal means, elementwise; NaN where neither mean varies."""
    var_a, var_b = np.asarray(variance_of_mean_a_ms2, dtype=float), np.asarray(variance_of_mean_b_ms2, dtype=float)
    variance = var_a + var_b
    dof = _satterthwaite_dof(var_a, dof_a, var_b, dof_b)
    with np.errstate(invalid="ignore", divide="ignore"):
        statistic = (np.asarray(mean_b_ms, dtype=float) - np.asarray(mean_a_ms, dtype=float)) / np.sqrt(variance)
    return np.where(variance > 0, 2 * sps.t.sf(np.abs(statistic), dof), np.nan)


def verdicts(low: ArrayLike, high: ArrayLike, threshold: float) -> np.ndarray:
    """The verdict of each interval ``[low, high]`` of the ratio B / A, elementwise."""
    low, high = np.asarray(low, dtype=float), np.asarray(high, dtype=float)
    return np.select(
        [high < 1 - threshold, low > 1 + threshold, (1 - threshold <= low) & (high <= 1 + threshold)],
        [FASTER, SLOWER, SAME],
        default=AMBIGUOUS,
    )


def verdict(interval: tuple[float, float], threshold: float) -> str:
    """FASTER / SLOWER / SAME / AMBIGUOUS for B against A from the interval of the ratio B / A."""
    low, high = interval
    return str(verdicts(low, high, threshold))


def power_at(log_distance: float, standard_error: ArrayLike, dof: float, confidence_level: float) -> np.ndarray:
    """P(an interval on the log ratio clears a band edge ``log_distance`` from the truth): the noncentral t tail
    P(T(dof, log_distance / standard_error) > t quantile), elementwise; 1 where the error is 0."""
    error = np.asarray(standard_error, dtype=float)
    noncentrality = log_distance / np.where(error > 0, error, 1.0)
    return np.where(error > 0, sps.nct.sf(sps.t.ppf((1 + confidence_level) / 2, dof), dof, noncentrality), 1.0)


def ambiguous_probability(
    log_ratio: float, relative_variance: ArrayLike, dof: float, threshold: float, confidence_level: float
) -> np.ndarray:
    """P(a comparison reads AMBIGUOUS) when the log ratio's estimate is N(``log_ratio``, V) and its variance
    estimate V·χ²_ν/ν (ν = ``dof``), for each true relative variance V: the interval log ratio ± t·se on the log
    scale against the band log(1 ± ``threshold``), averaged over equal-probability points of the variance estimate."""
    variance = np.asarray(relative_variance, dtype=float)[:, None]
    t = sps.t.ppf((1 + confidence_level) / 2, dof)
    half_width = t * np.sqrt(variance * sps.chi2.ppf(_VARIANCE_QUANTILES, dof) / dof)
    low_edge, high_edge = np.log1p(-threshold), np.log1p(threshold)
    spread = np.sqrt(variance)

    def below(edge: np.ndarray) -> np.ndarray:
        return sps.norm.cdf((edge - log_ratio) / spread)

    faster = below(low_edge - half_width)
    slower = 1.0 - below(high_edge + half_width)
    same = np.clip(below(high_edge - half_width) - below(low_edge + half_width), 0.0, None)
    return 1.0 - np.mean(faster + slower + same, axis=1)


def expected_power(
    a: RunMean, b: RunMean, epochs: int, threshold: float, confidence_level: float, *, given_ambiguous: bool = False
) -> float:
    """P(``epochs`` epochs per run give FASTER or SLOWER) when B differs by :data:`PLANNED_DIFFERENCE` (the harder
    direction): :func:`power_at` averaged over σ² = s² ν/χ²_ν, the measured variance's uncertainty.
    ``given_ambiguous``: the measured pair read AMBIGUOUS, which happens more often where its variance came out high;
    each σ² is then weighted by 1 / :func:`ambiguous_probability` at it (the likelihood conditional on the verdict,
    as in inference after selection: Fithian, Sun & Taylor 2014)."""
    distance = min(
        np.log1p(-threshold) - np.log1p(-PLANNED_DIFFERENCE), np.log1p(PLANNED_DIFFERENCE) - np.log1p(threshold)
    )
    (var_a, dof_a), (var_b, dof_b) = a.planned(epochs), b.planned(epochs)
    relative_a, relative_b = var_a / a.mean_ms**2, var_b / b.mean_ms**2
    if relative_a + relative_b == 0:
        return 1.0
    dof = float(_satterthwaite_dof(relative_a, dof_a, relative_b, dof_b))
    measured_a, measured_b = a.variance_of_mean_ms2 / a.mean_ms**2, b.variance_of_mean_ms2 / b.mean_ms**2
    measured_dof = float(_satterthwaite_dof(measured_a, a.dof, measured_b, b.dof))
    if not np.isfinite(measured_dof):
        return float(power_at(distance, np.sqrt(relative_a + relative_b), dof, confidence_level))
    scales = measured_dof / sps.chi2.ppf(_VARIANCE_QUANTILES, measured_dof)
    power = power_at(distance, np.sqrt((relative_a + relative_b) * scales), dof, confidence_level)
    if not given_ambiguous:
        return float(np.mean(power))
    log_ratio = math.log(b.mean_ms / a.mean_ms)
    chance = ambiguous_probability(
        log_ratio, (measured_a + measured_b) * scales, measured_dof, threshold, confidence_level
    )
    weights = 1.0 / np.maximum(chance, np.finfo(float).tiny)
    return float(np.sum(weights * power) / np.sum(weights))


def epochs_for_power(
    a: RunMean, b: RunMean, threshold: float, confidence_level: float, *, given_ambiguous: bool = False
) -> int | None:
    """The fewest epochs per run (in :meth:`RunMean.planned_rounds` rounds) whose :func:`expected_power` (with
    ``given_ambiguous``) reaches :data:`PLANNED_POWER`; None within the threshold or beyond
    :data:`MAX_PLANNED_EPOCHS`."""
    if threshold >= PLANNED_DIFFERENCE:
        return None

    def enough(epochs: int) -> bool:
        power = expected_power(a, b, epochs, threshold, confidence_level, given_ambiguous=given_ambiguous)
        return power >= PLANNED_POWER

    # Whole epochs, not whole rounds: near the need one round moves the power by 5-10 points.
    low = MIN_EPOCHS if 1 in (len(a.epochs_per_round), len(b.epochs_per_round)) else 4
    high = low
    while not enough(high):
        if high >= MAX_PLANNED_EPOCHS:
            return None
        low, high = high + 1, min(2 * high, MAX_PLANNED_EPOCHS)
    while low < high:
        middle = (low + high) // 2
        low, high = (low, middle) if enough(middle) else (middle + 1, high)
    return high


def compare_mean_times(
    rounds_a_ms: Sequence[ArrayLike],
    rounds_b_ms: Sequence[ArrayLike],
    *,
    threshold: float,
    confidence_level: float,
    gaps_a_epochs: Sequence[float] | None = None,
    gaps_b_epochs: Sequence[float] | None = None,
) -> MeanTimeComparison:
    """B's times (ms, rounds in order, ``gaps_*_epochs`` apart) against A's, ``threshold`` a fraction of A's mean;
    ValueError for rounds :func:`rounds_problem` refuses, non-positive times or settings outside (0, 1)."""
    check_settings(threshold, confidence_level)
    a, b = RunMean.of(rounds_a_ms, gaps_a_epochs), RunMean.of(rounds_b_ms, gaps_b_epochs)
    interval = fieller_interval(a, b, confidence_level)
    # One measurement compared with itself differs in nothing, whatever the noise.
    a_ms, b_ms = np.concatenate(rounds_a_ms), np.concatenate(rounds_b_ms)
    identical = a.epochs_per_round == b.epochs_per_round and bool(np.array_equal(a_ms, b_ms))
    outcome = SAME if identical else verdict((interval.low, interval.high), threshold)
    p_value = difference_p_values(a.mean_ms, a.variance_of_mean_ms2, a.dof, b.mean_ms, b.variance_of_mean_ms2, b.dof)
    return MeanTimeComparison(
        a=a,
        b=b,
        ratio_b_over_a=interval.ratio,
        ratio_interval=(interval.low, interval.high),
        ratio_interval_df=interval.df,
        confidence_level=confidence_level,
        threshold=threshold,
        p_value=float(p_value),
        verdict=outcome,
        epochs_for_power=(
            epochs_for_power(a, b, threshold, confidence_level, given_ambiguous=True) if outcome == AMBIGUOUS else None
        ),
        identical_measurements=identical,
    )
