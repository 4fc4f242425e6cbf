"""Is run B's epoch time shorter, longer or the same as run A's, beyond the noise? Pure numpy/scipy.

Everything reads "B against A": the ratio is ``mean epoch time of B / mean epoch time of A`` (dimensionless), so a
ratio below 1 means B's epochs are shorter (B trains faster) and above 1 that they are longer. Inputs are the
measured epoch times of one model in each run, in milliseconds, warmup excluded.

**Ratio interval.** Fieller's interval for the ratio of two independent means: the set of ratios R for which
``mean_B - R * mean_A = 0`` is not rejected by a Welch-type t test, i.e. the R solving
``(mean_B - R mean_A)^2 <= t^2 (se_B^2 + R^2 se_A^2)`` with ``se = sd / sqrt(n)``. Its degrees of freedom are
Welch-Satterthwaite's for ``mean_B - R mean_A`` evaluated at the estimated ratio,
``(se_B^2 + R^2 se_A^2)^2 / (se_B^4 / (n_B - 1) + R^4 se_A^4 / (n_A - 1))``. Unlike a delta-method interval it
needs no small-noise approximation and is asymmetric where the ratio's distribution is; it is unbounded when A's
mean itself is not distinguishable from zero (then the verdict is AMBIGUOUS).

**Verdict** of B against A with noise threshold ``d`` (default 0.05) and the interval ``[low, high]``:

* FASTER    -- ``high < 1 - d``: B's epochs are shorter by more than ``d``, with the stated confidence;
* SLOWER    -- ``low > 1 + d``: B's epochs are longer by more than ``d``;
* SAME      -- ``1 - d <= low`` and ``high <= 1 + d``: any difference is within the noise threshold
  (an equivalence claim, like two one-sided tests at level ``(1 - confidence) / 2`` each);
* AMBIGUOUS -- anything else: the interval reaches across ``1 - d`` or ``1 + d``, so these epochs cannot tell.
  A noisy run compared with itself is AMBIGUOUS too: identical data do not show that a rerun lands within ``d``.
  For AMBIGUOUS the comparison says how many epochs per run would decide, if means and spreads stayed as measured.

The verdict rests on the interval only. Welch's t test (``scipy.stats.ttest_ind(equal_var=False)``), the
Mann-Whitney U test (``scipy.stats.mannwhitneyu``, two-sided) and Yuen's 20%-trimmed Welch test
(``scipy.stats.ttest_ind(equal_var=False, trim=0.2)``, robust to stalls) give two-sided p-values for "any
difference at all"; when they disagree with each other, outliers or skew are at work. Epochs within a run are
treated as independent here; consecutive epochs often correlate, which makes every figure somewhat optimistic.
"""

import math
import warnings
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats as sps

from gpubench.stats.epoch_times import smallest_satisfying

FASTER = "FASTER"
SLOWER = "SLOWER"
SAME = "SAME"
AMBIGUOUS = "AMBIGUOUS"

#: Fraction trimmed from each tail for Yuen's test; 20% is Yuen's and Wilcox's usual choice.
YUEN_TRIM = 0.2
#: A variance needs two epochs.
MIN_EPOCHS = 2
#: The search for the epochs that would decide an AMBIGUOUS comparison gives up beyond this many per run.
_MAX_EPOCHS_TO_DECIDE = 1_000_000


@dataclass(frozen=True)
class RatioInterval:
    """Fieller's interval for ``mean_B / mean_A`` (dimensionless); ``(-inf, inf)`` when unbounded."""

    ratio: float
    low: float
    high: float
    welch_df: float
    confidence_level: float


@dataclass(frozen=True)
class EpochTimeComparison:
    """B's epoch times against A's; times in milliseconds, ratios are B / A.

    ``ratio_b_over_a`` below 1 means B's epochs are shorter. The p-values are two-sided and NaN where a test is
    undefined (both samples constant). ``epochs_to_decide`` is set for AMBIGUOUS only: the epochs per run that
    would make the verdict decisive if the means and standard deviations stayed as measured (None when no count
    would, e.g. when the ratio sits on a threshold edge). ``identical_measurements`` is true when B's epoch times
    are exactly A's (a report compared with itself): SAME by definition.
    """

    n_a: int
    n_b: int
    mean_a_ms: float
    mean_b_ms: float
    std_a_ms: float
    std_b_ms: float
    ratio_b_over_a: float
    ratio_interval: tuple[float, float]
    ratio_interval_df: float
    confidence_level: float
    threshold: float
    welch_p_value: float
    mann_whitney_p_value: float
    yuen_p_value: float
    verdict: str
    epochs_to_decide: int | None
    identical_measurements: bool


def check_settings(threshold: float, confidence_level: float) -> None:
    """Raise ValueError unless the noise threshold and the interval's level both lie strictly in (0, 1)."""
    if not 0 < threshold < 1:
        raise ValueError(f"threshold must lie in (0, 1), got {threshold}")
    if not 0 < confidence_level < 1:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence_level}")


def _fieller(
    mean_a_ms: float,
    std_a_ms: float,
    n_a: int,
    mean_b_ms: float,
    std_b_ms: float,
    n_b: int,
    confidence_level: float,
) -> RatioInterval:
    """Fieller's interval for mean_B / mean_A from summary statistics (see the module docstring)."""
    ratio = mean_b_ms / mean_a_ms
    var_mean_a = std_a_ms**2 / n_a
    var_mean_b = std_b_ms**2 / n_b
    if var_mean_a == 0 and var_mean_b == 0:
        # No spread in either sample: the ratio is known exactly.
        return RatioInterval(ratio, ratio, ratio, math.inf, confidence_level)
    welch_df = (var_mean_b + ratio**2 * var_mean_a) ** 2 / (
        var_mean_b**2 / (n_b - 1) + ratio**4 * var_mean_a**2 / (n_a - 1)
    )
    t = float(sps.t.ppf((1 + confidence_level) / 2, welch_df))
    leading = mean_a_ms**2 - t**2 * var_mean_a
    if leading <= 0:
        # A's mean is not distinguishable from zero, so the set of plausible ratios is not an interval.
        return RatioInterval(ratio, -math.inf, math.inf, welch_df, confidence_level)
    # The roots of (mean_b - R mean_a)^2 = t^2 (var_mean_b + R^2 var_mean_a); the discriminant is positive here.
    half = t * math.sqrt(mean_a_ms**2 * var_mean_b + mean_b_ms**2 * var_mean_a - t**2 * var_mean_a * var_mean_b)
    centre = mean_a_ms * mean_b_ms
    return RatioInterval(ratio, (centre - half) / leading, (centre + half) / leading, welch_df, confidence_level)


def ratio_interval(times_a_ms: ArrayLike, times_b_ms: ArrayLike, confidence_level: float) -> RatioInterval:
    """Fieller's interval for mean(times_b_ms) / mean(times_a_ms) with Welch degrees of freedom at the estimate."""
    a = np.asarray(times_a_ms, dtype=float)
    b = np.asarray(times_b_ms, dtype=float)
    return _fieller(
        float(a.mean()), float(a.std(ddof=1)), a.size, float(b.mean()), float(b.std(ddof=1)), b.size, confidence_level
    )


def verdict(interval: tuple[float, float], threshold: float) -> str:
    """FASTER / SLOWER / SAME / AMBIGUOUS for B against A from the interval of the ratio B / A."""
    low, high = interval
    if high < 1 - threshold:
        return FASTER
    if low > 1 + threshold:
        return SLOWER
    if 1 - threshold <= low and high <= 1 + threshold:
        return SAME
    return AMBIGUOUS


def epochs_to_decide(
    mean_a_ms: float,
    std_a_ms: float,
    mean_b_ms: float,
    std_b_ms: float,
    threshold: float,
    confidence_level: float,
    start_epochs: int = MIN_EPOCHS,
) -> int | None:
    """The fewest epochs per run (>= ``start_epochs``) whose interval gives a decisive verdict, if both runs kept
    these means and standard deviations (ms); None when none up to a million would (the ratio on an edge).
    """

    def decides(n: int) -> bool:
        interval = _fieller(mean_a_ms, std_a_ms, n, mean_b_ms, std_b_ms, n, confidence_level)
        return verdict((interval.low, interval.high), threshold) != AMBIGUOUS

    if not decides(_MAX_EPOCHS_TO_DECIDE):
        return None
    # The interval narrows as n grows, so "decides" flips from False to True once: bisect for the flip.
    return smallest_satisfying(decides, start_epochs - 1, _MAX_EPOCHS_TO_DECIDE)


def difference_p_values(times_a_ms: ArrayLike, times_b_ms: ArrayLike) -> tuple[float, float, float]:
    """Two-sided Welch, Mann-Whitney U and Yuen (20% trimmed, Welch) p-values for a difference of B and A."""
    a = np.asarray(times_a_ms, dtype=float)
    b = np.asarray(times_b_ms, dtype=float)
    with warnings.catch_warnings():
        # Constant samples make the t tests undefined: scipy warns and returns NaN, which a table shows as "-".
        warnings.simplefilter("ignore", RuntimeWarning)
        welch = sps.ttest_ind(b, a, equal_var=False).pvalue
        mann_whitney = sps.mannwhitneyu(b, a, alternative="two-sided").pvalue
        yuen = sps.ttest_ind(b, a, equal_var=False, trim=YUEN_TRIM).pvalue
    return float(welch), float(mann_whitney), float(yuen)


def compare_epoch_times(
    times_a_ms: ArrayLike, times_b_ms: ArrayLike, *, threshold: float, confidence_level: float
) -> EpochTimeComparison:
    """B's epoch times (ms) against A's: the ratio of means with its Fieller interval at ``confidence_level``, the
    three p-values and the verdict with noise threshold ``threshold`` (a fraction of A's mean: 0.05 = ±5%).

    Raises ValueError for fewer than :data:`MIN_EPOCHS` times on either side or settings outside (0, 1).
    """
    check_settings(threshold, confidence_level)
    a = np.asarray(times_a_ms, dtype=float)
    b = np.asarray(times_b_ms, dtype=float)
    if min(a.size, b.size) < MIN_EPOCHS:
        raise ValueError(f"a comparison needs at least {MIN_EPOCHS} epoch times per run, got {a.size} and {b.size}")
    interval = ratio_interval(a, b, confidence_level)
    welch, mann_whitney, yuen = difference_p_values(a, b)
    # The same epoch times on both sides are one measurement compared with itself: nothing differs, whatever the
    # noise, so it is SAME by definition (the interval still reports what these epochs could resolve).
    identical = a.shape == b.shape and bool(np.array_equal(a, b))
    outcome = SAME if identical else verdict((interval.low, interval.high), threshold)
    mean_a, std_a, mean_b, std_b = float(a.mean()), float(a.std(ddof=1)), float(b.mean()), float(b.std(ddof=1))
    return EpochTimeComparison(
        n_a=a.size,
        n_b=b.size,
        mean_a_ms=mean_a,
        mean_b_ms=mean_b,
        std_a_ms=std_a,
        std_b_ms=std_b,
        ratio_b_over_a=interval.ratio,
        ratio_interval=(interval.low, interval.high),
        ratio_interval_df=interval.welch_df,
        confidence_level=confidence_level,
        threshold=threshold,
        welch_p_value=welch,
        mann_whitney_p_value=mann_whitney,
        yuen_p_value=yuen,
        verdict=outcome,
        epochs_to_decide=(
            epochs_to_decide(mean_a, std_a, mean_b, std_b, threshold, confidence_level, max(a.size, b.size))
            if outcome == AMBIGUOUS
            else None
        ),
        identical_measurements=identical,
    )
