"""Least-squares slope of a series with its t interval and p-value; ``scipy.stats.linregress`` gives NaN for a flat
series (a clean loop's memory), here slope 0, standard error 0 and p-value 1."""

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats


@dataclass(frozen=True)
class SlopeFit:
    """The least-squares slope (y-units per x-unit); ``slope_stderr`` None under three points."""

    slope: float
    slope_stderr: float | None
    n: int

    @property
    def degrees_of_freedom(self) -> int:
        return self.n - 2

    def interval(self, confidence_level: float) -> tuple[float, float]:
        """Slope ± t(n − 2) × standard error."""
        if self.slope_stderr is None:
            raise ValueError(f"a slope interval needs at least 3 points, got {self.n}")
        half_width = float(stats.t.ppf(0.5 + confidence_level / 2.0, self.degrees_of_freedom)) * self.slope_stderr
        return self.slope - half_width, self.slope + half_width

    @property
    def p_value(self) -> float | None:
        """Two-sided t test p-value of slope = 0; on an exact line 0.0 (sloped) or 1.0 (flat)."""
        if self.slope_stderr is None:
            return None
        if self.slope_stderr == 0.0:
            return 0.0 if self.slope != 0.0 else 1.0
        t_statistic = self.slope / self.slope_stderr
        return float(2.0 * stats.t.sf(abs(t_statistic), self.degrees_of_freedom))


def fit_slope(y: Sequence[float] | np.ndarray, x: Sequence[float] | np.ndarray | None = None) -> SlopeFit:
    """Fit ``y`` against ``x`` (default the index); ValueError under two points or a constant x."""
    values = np.asarray(y, dtype=float)
    n = values.size
    if n < 2:
        raise ValueError(f"a slope needs at least 2 points, got {n}")
    positions = np.arange(n, dtype=float) if x is None else np.asarray(x, dtype=float)
    if positions.shape != values.shape:
        raise ValueError(f"x and y differ in length: {positions.size} and {n}")
    positions_centred = positions - positions.mean()
    sxx = float(positions_centred @ positions_centred)
    if sxx == 0.0:
        raise ValueError("a slope needs at least two distinct x values")
    values_centred = values - values.mean()
    slope = float(positions_centred @ values_centred / sxx)
    if n < 3:
        return SlopeFit(slope=slope, slope_stderr=None, n=n)
    residuals = values_centred - slope * positions_centred
    slope_stderr = math.sqrt(float(residuals @ residuals) / (n - 2) / sxx)
    return SlopeFit(slope=slope, slope_stderr=slope_stderr, n=n)
