"""The least-squares slope against scipy.stats.linregress, and on the series linregress cannot handle."""

import numpy as np
import pytest
from scipy import stats

from gpubench.stats.regression import fit_slope


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_slope_stderr_interval_and_p_value_equal_linregress(seed: int) -> None:
    rng = np.random.default_rng(seed)
    y = 3.0 - 0.4 * np.arange(9) + rng.normal(0.0, 0.5, 9)
    fit = fit_slope(y)
    expected = stats.linregress(np.arange(9), y)
    assert fit.n == 9 and fit.degrees_of_freedom == 7
    assert fit.slope == pytest.approx(expected.slope, rel=1e-12)
    assert fit.slope_stderr == pytest.approx(expected.stderr, rel=1e-10)
    assert fit.p_value == pytest.approx(expected.pvalue, rel=1e-9)
    half_width = stats.t.ppf(0.95, 7) * expected.stderr
    assert fit.interval(0.90) == pytest.approx((expected.slope - half_width, expected.slope + half_width), rel=1e-10)


def test_a_given_x_is_fitted_as_linregress_fits_it() -> None:
    x = np.array([0.5, 1.0, 3.0, 4.5, 7.0])
    y = np.array([2.0, 2.9, 7.2, 9.8, 15.1])
    fit = fit_slope(y, x)
    expected = stats.linregress(x, y)
    assert (fit.slope, fit.slope_stderr, fit.p_value) == pytest.approx(
        (expected.slope, expected.stderr, expected.pvalue), rel=1e-9
    )


def test_a_flat_series_has_zero_slope_and_error_where_linregress_gives_nan() -> None:
    flat = [512.0] * 8
    assert np.isnan(stats.linregress(np.arange(8), flat).stderr)
    fit = fit_slope(flat)
    assert (fit.slope, fit.slope_stderr) == (0.0, 0.0)
    assert fit.interval(0.95) == (0.0, 0.0)
    assert fit.p_value == 1.0  # no slope at all: nothing to reject


def test_points_exactly_on_a_sloped_line_have_p_value_zero() -> None:
    fit = fit_slope([1.0, 2.0, 3.0])
    assert (fit.slope, fit.slope_stderr, fit.p_value) == (1.0, 0.0, 0.0)


def test_two_points_have_a_slope_but_no_error() -> None:
    fit = fit_slope([1.0, 4.0])
    assert fit.slope == 3.0
    assert fit.slope_stderr is None and fit.p_value is None
    with pytest.raises(ValueError, match="at least 3 points, got 2"):
        fit.interval(0.95)


def test_too_few_points_or_a_constant_x_are_refused() -> None:
    with pytest.raises(ValueError, match="at least 2 points, got 1"):
        fit_slope([1.0])
    with pytest.raises(ValueError, match="two distinct x values"):
        fit_slope([1.0, 2.0, 3.0], [2.0, 2.0, 2.0])
    with pytest.raises(ValueError, match="differ in length"):
        fit_slope([1.0, 2.0, 3.0], [0.0, 1.0])
