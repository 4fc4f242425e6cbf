"""The decision interval (overlapping batch means) and the two-stage stopping rule: known answers computed by hand,
and coverage on seeded AR(1) epoch times with enough runs to be decisive."""

import math
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as sps

import gpubench.stats
from gpubench.stats.intervals import (
    MIN_EPOCHS,
    batch_size,
    decision_interval,
    degrees_of_freedom,
    long_run_variance,
    precision_epochs,
    two_stage_epochs,
    two_stage_interval,
    two_stage_required_epochs,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from statistics_coverage import MEAN_MS, ar1_epochs, fixed_n_cell, two_stage_cell


@pytest.mark.parametrize(("n", "m"), [(10, 5), (15, 5), (20, 7), (40, 13), (100, 20), (400, 40)])
def test_batch_size_is_max_5_min_a_third_and_two_root_n(n: int, m: int) -> None:
    assert batch_size(n) == m


def test_long_run_variance_is_the_overlapping_batch_means_formula_written_out() -> None:
    times = [10.0, 12.0, 11.0, 15.0, 9.0, 13.0, 14.0, 10.0, 16.0, 8.0, 12.0, 11.0]
    n, m = len(times), 3
    grand = sum(times) / n
    batch_means = [sum(times[j : j + m]) / m for j in range(n - m + 1)]
    expected = n * m / ((n - m + 1) * (n - m)) * sum((b - grand) ** 2 for b in batch_means)
    variance, dof = long_run_variance(times, batch_epochs=m)
    assert variance == pytest.approx(expected, rel=1e-12)
    assert dof == pytest.approx(1.5 * (n / m - 1))


def test_interval_is_the_mean_plus_minus_t_times_the_standard_error() -> None:
    times = np.array([101.0, 99.0, 103.0, 98.0, 100.0, 102.0, 97.0, 104.0, 100.0, 99.0])
    variance, dof = long_run_variance(times)
    half = sps.t.ppf(0.975, dof) * math.sqrt(variance / times.size)
    low, high = decision_interval(times, 0.95)
    assert (low, high) == pytest.approx((times.mean() - half, times.mean() + half), rel=1e-12)


def test_the_package_exposes_the_decision_interval() -> None:
    assert gpubench.stats.decision_interval is decision_interval


@pytest.mark.parametrize(("n", "dof"), [(10, 1.5), (20, 1.5 * (20 / 7 - 1)), (100, 1.5 * (100 / 20 - 1))])
def test_degrees_of_freedom_are_one_and_a_half_times_batches_less_one(n: int, dof: float) -> None:
    assert degrees_of_freedom(n) == pytest.approx(dof)
    assert degrees_of_freedom(n, 4) == pytest.approx(1.5 * (n / 4 - 1))


def test_the_lower_end_is_never_below_zero() -> None:
    low, high = decision_interval([1.0, 1.0, 1.0, 1.0, 1.0, 100.0, 1.0, 1.0, 1.0, 1.0], 0.99)
    assert low == 0.0 and high > 1.0


@pytest.mark.parametrize(
    "bad",
    [[1.0] * (MIN_EPOCHS - 1), [1.0, 2.0, float("nan")] + [1.0] * (MIN_EPOCHS - 3), [1.0, -1.0] * (MIN_EPOCHS // 2)],
)
def test_too_few_or_invalid_epochs_are_refused(bad: list[float]) -> None:
    with pytest.raises(ValueError):
        decision_interval(bad, 0.95)


def test_two_stage_extends_to_the_n_that_meets_the_target_and_keeps_the_first_stage_variance() -> None:
    first = np.array([100.0, 104.0, 98.0, 103.0, 97.0, 101.0, 99.0, 102.0, 100.0, 96.0])
    variance, dof = long_run_variance(first)
    quantile = sps.t.ppf(0.975, dof)
    needed = math.ceil(quantile**2 * variance / (0.01 * first.mean()) ** 2)
    assert two_stage_epochs(first, 0.01, 0.95, max_epochs=10_000) == needed
    assert two_stage_epochs(first, 0.01, 0.95, max_epochs=20) == 20
    more = np.concatenate([first, np.full(needed - first.size, 100.0)])
    low, high = two_stage_interval(first, more, 0.95)
    assert (high - low) / 2 == pytest.approx(quantile * math.sqrt(variance / needed), rel=1e-12)
    assert (high - low) / 2 <= 0.01 * first.mean() * 1.01


def test_the_uncapped_two_stage_total_is_what_the_cap_cuts() -> None:
    first = np.array([100.0, 104.0, 98.0, 103.0, 97.0, 101.0, 99.0, 102.0, 100.0, 96.0])
    required = two_stage_required_epochs(first, 0.01, 0.95)
    assert required == two_stage_epochs(first, 0.01, 0.95, max_epochs=10_000) > 20
    # No variance: the first stage is enough.
    assert two_stage_required_epochs(np.full(MIN_EPOCHS + 2, 50.0), 0.01, 0.95) == MIN_EPOCHS + 2


def _precision_epochs_by_scan(variance_ms2: float, mean_ms: float, target: float, level: float) -> int:
    """The first n from which on t(ν(n))·σ/√n <= target·mean, by checking every n up to far past the answer."""
    n = np.arange(MIN_EPOCHS, 20_000)
    m = np.array([batch_size(int(k)) for k in n])
    halfwidth_ms = sps.t.ppf(0.5 + level / 2, 1.5 * (n / m - 1)) * np.sqrt(variance_ms2 / n)
    misses = n[halfwidth_ms > target * mean_ms]
    assert misses.size == 0 or misses[-1] < n[-1] / 4  # the scan reaches far past the last miss
    return int(misses[-1]) + 1 if misses.size else MIN_EPOCHS


@pytest.mark.parametrize(
    ("sd_ms", "target", "level"),
    [(50.0, 0.02, 0.95), (20.0, 0.02, 0.95), (30.0, 0.05, 0.9), (100.0, 0.01, 0.99), (8.0, 0.02, 0.95)],
)
def test_precision_epochs_is_the_first_n_from_which_the_target_holds(sd_ms: float, target: float, level: float) -> None:
    required = precision_epochs(sd_ms**2, 1000.0, target, level)
    assert required == _precision_epochs_by_scan(sd_ms**2, 1000.0, target, level)


def test_precision_epochs_skips_an_n_that_meets_the_target_just_before_the_batch_grows() -> None:
    # t(ν)/√n is 0.8217 at n = 15 (batches of 5) and 0.8937 at n = 16 (batches of 6): a ratio between the two meets
    # the target at 15, misses it at 16 and meets it again from 17 on (0.813).
    sd_ms = 1000.0 * 0.02 / 0.85
    assert precision_epochs(sd_ms**2, 1000.0, 0.02, 0.95) == 17


def test_precision_epochs_with_no_variance_is_the_minimum_and_bad_inputs_are_refused() -> None:
    assert precision_epochs(0.0, 1000.0, 0.02, 0.95) == MIN_EPOCHS
    for args in [(-1.0, 1000.0, 0.02, 0.95), (1.0, 0.0, 0.02, 0.95), (1.0, 1000.0, 0.0, 0.95), (1.0, 1.0, 0.02, 1.0)]:
        with pytest.raises(ValueError):
            precision_epochs(*args)


# --------------------------------------------------------------------------------------------------- coverage

#: 4,000 runs a cell: the coverage estimate's standard error is about 0.0035 near 0.95.
RUNS = 4000


@pytest.mark.parametrize("rho", [0.0, 0.3, 0.5])
def test_decision_interval_covers_at_least_093_on_ar1_epochs(rho: float) -> None:
    rng = np.random.default_rng(11)
    for n in (10, 20, 40):
        coverage, _ = fixed_n_cell(rng, decision_interval, RUNS, n, rho, 0.05, 0.95)
        assert coverage >= 0.93, f"rho={rho}, n={n}: coverage {coverage:.3f}"


def test_decision_interval_half_width_meets_the_precision_goals_at_rho_05() -> None:
    rng = np.random.default_rng(12)
    _, width_20 = fixed_n_cell(rng, decision_interval, RUNS, 20, 0.5, 0.05, 0.95)
    _, width_40 = fixed_n_cell(rng, decision_interval, RUNS, 40, 0.5, 0.05, 0.95)
    assert width_20 <= 0.08 and width_40 <= 0.05, (width_20, width_40)


@pytest.mark.parametrize("rho", [0.0, 0.5])
def test_two_stage_stopping_keeps_its_level(rho: float) -> None:
    rng = np.random.default_rng(13)
    for first_stage in (10, 20):
        coverage, _, _ = two_stage_cell(rng, 2000, first_stage, rho, 0.05, 0.95, 0.02, 50)
        assert coverage >= 0.92, f"rho={rho}, first stage {first_stage}: coverage {coverage:.3f}"


def test_the_simulated_epochs_have_the_stated_mean_cv_and_correlation() -> None:
    epochs = ar1_epochs(np.random.default_rng(14), 2000, 200, 0.5, 0.05)
    x = epochs / MEAN_MS - 1.0
    assert x.mean() == pytest.approx(0.0, abs=1e-3)
    assert x.std() == pytest.approx(0.05, rel=0.02)
    lag1 = np.mean(x[:, 1:] * x[:, :-1]) / np.mean(x * x)
    assert lag1 == pytest.approx(0.5, abs=0.01)
