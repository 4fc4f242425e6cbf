"""Is run B's mean time per unit of work shorter, longer or the same as run A's, beyond the noise? Pure numpy/scipy.

The ratio is B / A (below 1: B faster), on per-sample times (ms) in measurement order. Each mean's variance is the
long-run one, overlapping batch means (:func:`gpubench.stats.intervals.long_run_variance`), v = σ̂²∞ / n. The ratio
interval is Fieller's (1954): the R solving (mean_B − R mean_A)² ≤ t²(df) · (v_B + R² v_A), df Satterthwaite's at
the estimated ratio; unbounded when A's mean is not distinguishable from zero.

Verdict with threshold ``d``: FASTER if ``high < 1 − d``, SLOWER if ``low > 1 + d``, SAME if the interval lies
within ``[1 − d, 1 + d]`` (an equivalence claim), else AMBIGUOUS, with the epochs per run that would decide. The
p-value reported is the long-run t test of equal means; tests that take epochs as independent reject identical
AR(1) processes far too often. Coverage: ``benchmarks/statistics_coverage.py``.
"""

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats as sps

from gpubench.stats.intervals import MIN_EPOCHS as _OBM_MIN_EPOCHS
from gpubench.stats.intervals import degrees_of_freedom, long_run_variance

FASTER = "FASTER"
SLOWER = "SLOWER"
SAME = "SAME"
AMBIGUOUS = "AMBIGUOUS"

#: The long-run variance needs batches shorter than the run, so a comparison needs this many epochs per run.
MIN_EPOCHS = _OBM_MIN_EPOCHS
#: The search for the epochs that would decide an AMBIGUOUS comparison gives up beyond this many per run.
_MAX_EPOCHS_TO_DECIDE = 100_000


@dataclass(frozen=True)
class LongRunMean:
    """One run's mean time (ms) with the overlapping-batch-means long-run variance of its times (ms²) and the
    estimate's degrees of freedom; the variance of the mean is ``long_run_variance_ms2 / n``."""

    n: int
    mean_ms: float
    long_run_variance_ms2: float
    dof: float

    @classmethod
    def of(cls, times_ms: ArrayLike) -> "LongRunMean":
        """The mean and OBM long-run variance of ``times_ms`` (finite, positive, at least :data:`MIN_EPOCHS`)."""
        values = np.asarray(times_ms, dtype=float)
        variance_ms2, dof = long_run_variance(values)
        if np.all(values == values[0]):
            # Constant times have no variance; the batch means, taken from cumulative sums, would leave rounding
            # noise where the times are not exact binary fractions (a per-sample time 110 / 800 ms).
            variance_ms2 = 0.0
        return cls(n=values.size, mean_ms=float(values.mean()), long_run_variance_ms2=variance_ms2, dof=dof)

    @property
    def variance_of_mean_ms2(self) -> float:
        return self.long_run_variance_ms2 / self.n


@dataclass(frozen=True)
class RatioInterval:
    """Fieller's interval for ``mean_B / mean_A`` (dimensionless); ``(-inf, inf)`` when unbounded. ``df`` is
    Satterthwaite's at the estimated ratio (inf when neither mean varies)."""

    ratio: float
    low: float
    high: float
    df: float
    confidence_level: float


@dataclass(frozen=True)
class MeanTimeComparison:
    """B's times against A's; ``a`` and ``b`` carry each run's mean (ms) and long-run variance, ratios are B / A.
    ``p_value`` is NaN when neither run's times vary; ``epochs_to_decide`` (AMBIGUOUS only) is None when no count up
    to 100,000 would decide; ``identical_measurements``: B's times are A's, SAME by definition.
    """

    a: LongRunMean
    b: LongRunMean
    ratio_b_over_a: float
    ratio_interval: tuple[float, float]
    ratio_interval_df: float
    confidence_level: float
    threshold: float
    p_value: float
    verdict: str
    epochs_to_decide: int | None
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
    """(ratio, low, high, df) of Fieller's interval for ``mean_b / mean_a``, elementwise over arrays of means (ms),
    variances of the means (ms²) and degrees of freedom; ends ±inf where unbounded (:func:`fieller_interval`'s core)."""
    mean_a, mean_b = np.asarray(mean_a_ms, dtype=float), np.asarray(mean_b_ms, dtype=float)
    var_a, var_b = np.asarray(variance_of_mean_a_ms2, dtype=float), np.asarray(variance_of_mean_b_ms2, dtype=float)
    ratio = mean_b / mean_a
    dof = _satterthwaite_dof(var_b, dof_b, ratio**2 * var_a, dof_a)
    t = sps.t.ppf((1 + confidence_level) / 2, dof)
    leading = mean_a**2 - t**2 * var_a
    # The discriminant is positive wherever ``leading`` is; elsewhere the set of ratios is not an interval.
    with np.errstate(invalid="ignore", divide="ignore"):
        half = t * np.sqrt(mean_a**2 * var_b + mean_b**2 * var_a - t**2 * var_a * var_b)
        centre = mean_a * mean_b
        low = np.where(leading > 0, (centre - half) / leading, -np.inf)
        high = np.where(leading > 0, (centre + half) / leading, np.inf)
    # Neither mean varies: the ratio is known exactly (and not one rounding step off it).
    exact = (var_a == 0) & (var_b == 0)
    return ratio, np.where(exact, ratio, low), np.where(exact, ratio, high), dof


def fieller_interval(a: LongRunMean, b: LongRunMean, confidence_level: float) -> RatioInterval:
    """Fieller's interval for ``b.mean_ms / a.mean_ms`` with Satterthwaite degrees of freedom from the two runs'."""
    ratio, low, high, dof = fieller_bounds(
        a.mean_ms, a.variance_of_mean_ms2, a.dof, b.mean_ms, b.variance_of_mean_ms2, b.dof, confidence_level
    )
    return RatioInterval(float(ratio), float(low), float(high), float(dof), confidence_level)


def ratio_interval(times_a_ms: ArrayLike, times_b_ms: ArrayLike, confidence_level: float) -> RatioInterval:
    """Fieller's interval for mean(times_b_ms) / mean(times_a_ms) with each run's OBM long-run variance."""
    return fieller_interval(LongRunMean.of(times_a_ms), LongRunMean.of(times_b_ms), confidence_level)


def difference_p_values(
    mean_a_ms: ArrayLike,
    variance_of_mean_a_ms2: ArrayLike,
    dof_a: ArrayLike,
    mean_b_ms: ArrayLike,
    variance_of_mean_b_ms2: ArrayLike,
    dof_b: ArrayLike,
) -> np.ndarray:
    """Two-sided p-values of the long-run t test of equal means, elementwise over arrays; NaN where neither mean
    varies (:func:`difference_p_value`'s core)."""
    var_a, var_b = np.asarray(variance_of_mean_a_ms2, dtype=float), np.asarray(variance_of_mean_b_ms2, dtype=float)
    variance = var_a + var_b
    dof = _satterthwaite_dof(var_a, dof_a, var_b, dof_b)
    with np.errstate(invalid="ignore", divide="ignore"):
        statistic = (np.asarray(mean_b_ms, dtype=float) - np.asarray(mean_a_ms, dtype=float)) / np.sqrt(variance)
    return np.where(variance > 0, 2 * sps.t.sf(np.abs(statistic), dof), np.nan)


def difference_p_value(a: LongRunMean, b: LongRunMean) -> float:
    """Two-sided p-value of the t test of equal means with long-run standard errors and Satterthwaite's df; NaN
    when neither run's times vary."""
    return float(
        difference_p_values(a.mean_ms, a.variance_of_mean_ms2, a.dof, b.mean_ms, b.variance_of_mean_ms2, b.dof)
    )


def verdicts(low: ArrayLike, high: ArrayLike, threshold: float) -> np.ndarray:
    """The verdict of each interval ``[low, high]`` of the ratio B / A, elementwise (see the module docstring)."""
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


def epochs_to_decide(
    a: LongRunMean, b: LongRunMean, threshold: float, confidence_level: float, start_epochs: int = MIN_EPOCHS
) -> int | None:
    """The fewest epochs per run (>= ``start_epochs``) whose interval gives a decisive verdict, if both runs kept
    these means and long-run variances; None when none up to 100,000 would (the ratio on an edge).
    """
    # The batch size is rounded up, so ν (and with it the t quantile) does not move monotonically with n: a run one
    # epoch longer can be undecided where a shorter one decides. Scan every n, in doubling blocks so that the usual
    # small answer costs little.
    first = max(start_epochs, MIN_EPOCHS)
    while first <= _MAX_EPOCHS_TO_DECIDE:
        epochs = np.arange(first, min(2 * first, _MAX_EPOCHS_TO_DECIDE) + 1)
        dof = np.array([degrees_of_freedom(int(n)) for n in epochs])
        _, low, high, _ = fieller_bounds(
            a.mean_ms,
            a.long_run_variance_ms2 / epochs,
            dof,
            b.mean_ms,
            b.long_run_variance_ms2 / epochs,
            dof,
            confidence_level,
        )
        decisive = verdicts(low, high, threshold) != AMBIGUOUS
        if decisive.any():
            return int(epochs[np.argmax(decisive)])
        first = int(epochs[-1]) + 1
    return None


def compare_mean_times(
    times_a_ms: ArrayLike, times_b_ms: ArrayLike, *, threshold: float, confidence_level: float
) -> MeanTimeComparison:
    """B's times (ms, in measurement order) against A's: the ratio of means with its Fieller interval at
    ``confidence_level``, the long-run t test's p-value and the verdict with noise ``threshold`` (a fraction of A's
    mean). ValueError under :data:`MIN_EPOCHS` times a side, for non-positive times or settings outside (0, 1).
    """
    check_settings(threshold, confidence_level)
    a_ms = np.asarray(times_a_ms, dtype=float)
    b_ms = np.asarray(times_b_ms, dtype=float)
    if min(a_ms.size, b_ms.size) < MIN_EPOCHS:
        raise ValueError(f"a comparison needs at least {MIN_EPOCHS} times per run, got {a_ms.size} and {b_ms.size}")
    a, b = LongRunMean.of(a_ms), LongRunMean.of(b_ms)
    interval = fieller_interval(a, b, confidence_level)
    # The same times on both sides are one measurement compared with itself: nothing differs, whatever the noise,
    # so it is SAME by definition (the interval still reports what these epochs could resolve).
    identical = a_ms.shape == b_ms.shape and bool(np.array_equal(a_ms, b_ms))
    outcome = SAME if identical else verdict((interval.low, interval.high), threshold)
    return MeanTimeComparison(
        a=a,
        b=b,
        ratio_b_over_a=interval.ratio,
        ratio_interval=(interval.low, interval.high),
        ratio_interval_df=interval.df,
        confidence_level=confidence_level,
        threshold=threshold,
        p_value=difference_p_value(a, b),
        verdict=outcome,
        epochs_to_decide=(
            epochs_to_decide(a, b, threshold, confidence_level, max(a.n, b.n)) if outcome == AMBIGUOUS else None
        ),
        identical_measurements=identical,
    )
