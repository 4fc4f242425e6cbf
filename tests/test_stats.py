"""Known-answer tests for gpubench.stats.epoch_times: hand-worked examples, scipy/numpy recomputations and a seeded
AR(1) coverage simulation."""

import json
import math
from dataclasses import fields

import numpy as np
import pytest
from scipy import stats as sps

from gpubench.results import EpochTimeStatistics
from gpubench.stats.epoch_times import (
    adjusted_autocorrelation,
    flag_outliers,
    lag1_autocorrelation,
    median_interval,
    percentile_min_epochs,
    sigma_rule_can_flag,
    summarize_epoch_times,
    t_interval,
)
from gpubench.stats.intervals import (
    MIN_EPOCHS,
    decision_interval,
    long_run_variance,
    precision_epochs,
    two_stage_interval,
    two_stage_required_epochs,
)
from gpubench.stats.rounds import (
    METHOD_DRIFT_AR1_BOUND,
    METHOD_DRIFT_ROUND_MEANS,
    METHOD_ROUND_MEANS_AR1,
    drift_test,
    halfwidth_after,
    split_rounds,
    two_level_interval,
    variance_components,
)

# The issue's worked example: 20 epochs around 10.3 ms with one stall (12.9 ms) at position 8.
X_MS = [10.2, 10.4, 10.1, 10.3, 10.6, 10.2, 10.5, 10.3, 12.9, 10.4, 10.2, 10.3, 10.4, 10.1, 10.5, 10.3, 10.2, 10.6]
X_MS += [10.4, 10.3]


def ar1_series(rho: float, n: int, replications: int, seed: int) -> np.ndarray:
    """Stationary AR(1) series around 100 with unit innovations, one replication per row."""
    rng = np.random.default_rng(seed)
    innovations = rng.standard_normal((replications, n))
    series = np.empty_like(innovations)
    series[:, 0] = innovations[:, 0] / math.sqrt(1.0 - rho**2)
    for t in range(1, n):
        series[:, t] = rho * series[:, t - 1] + innovations[:, t]
    return 100.0 + series


# ------------------------------------------------------------------------------------------ the known answer


def test_worked_example_matches_the_issue_known_answers() -> None:
    summary = summarize_epoch_times(X_MS)
    assert summary.n == 20
    assert summary.mean_ms == pytest.approx(10.46, abs=1e-9)
    assert summary.confidence_interval_ms[0] == pytest.approx(10.1827445, abs=1e-6)
    assert summary.confidence_interval_ms[1] == pytest.approx(10.7372555, abs=1e-6)
    # Type 7 by hand: P95 sits at 0-based rank 19·0.95 = 18.05 of the sorted sample, between 10.6 and 12.9.
    assert summary.p95_ms == pytest.approx(10.6 + 0.05 * 2.3, abs=1e-9)
    assert summary.p95_ms == pytest.approx(10.715, abs=1e-9)
    assert summary.p99_ms == pytest.approx(12.463, abs=1e-9)
    assert summary.median_ms == pytest.approx(10.3)
    assert summary.median_interval_ms == pytest.approx((10.2, 10.4))
    # Modified z of 12.9: median 10.3, MAD 0.1, so 0.6745·2.6/0.1 = 17.5; the next largest (10.6) scores 2.0.
    assert summary.outlier_indices == (8,)
    assert summary.coefficient_of_variation == pytest.approx(0.5924081096854 / 10.46, rel=1e-9)
    assert summary.cv_ok
    assert not summary.p95_reliable and not summary.p99_reliable


def test_worked_example_agrees_with_scipy_and_numpy() -> None:
    x = np.array(X_MS)
    summary = summarize_epoch_times(x, confidence_level=0.95)
    expected = sps.t.interval(0.95, len(x) - 1, loc=x.mean(), scale=sps.sem(x))
    assert summary.confidence_interval_ms == pytest.approx(expected, abs=1e-12)
    assert summary.std_ms == pytest.approx(x.std(ddof=1), rel=1e-12)
    assert summary.p95_ms == pytest.approx(np.percentile(x, 95, method="linear"), abs=1e-12)
    assert summary.p99_ms == pytest.approx(np.percentile(x, 99, method="linear"), abs=1e-12)
    drift = drift_test(x, 0.95)
    assert summary.drift_slope_ms_per_epoch == pytest.approx(drift.slope_ms_per_epoch, abs=1e-12)
    assert summary.drift_p_value == pytest.approx(drift.p_value, abs=1e-12)
    assert summary.drift_method == METHOD_DRIFT_AR1_BOUND
    assert summary.drift_kendall_tau is None
    assert not summary.drift_detected


@pytest.mark.parametrize("level", [0.8, 0.9, 0.99])
def test_t_interval_matches_scipy_at_other_levels(level: float) -> None:
    x = np.array(X_MS)
    expected = sps.t.interval(level, len(x) - 1, loc=x.mean(), scale=sps.sem(x))
    assert t_interval(x, level) == pytest.approx(expected, abs=1e-12)


def test_higher_level_gives_wider_intervals() -> None:
    narrow = summarize_epoch_times(X_MS, confidence_level=0.9)
    wide = summarize_epoch_times(X_MS, confidence_level=0.99)
    assert wide.confidence_interval_ms[0] < narrow.confidence_interval_ms[0]
    assert wide.confidence_interval_ms[1] > narrow.confidence_interval_ms[1]
    assert wide.decision_interval_ms[1] - wide.decision_interval_ms[0] > (
        narrow.decision_interval_ms[1] - narrow.decision_interval_ms[0]
    )


# ----------------------------------------------------------------------------------------------- the median


def test_median_interval_coverage_is_the_binomial_probability_and_the_narrowest_meeting_the_level() -> None:
    lo_ms, hi_ms, coverage = median_interval(X_MS, 0.95)
    # Order statistics 6 and 15 of 20: P(6 <= B <= 14) for B ~ Binomial(20, 1/2) = 0.9586.
    assert (lo_ms, hi_ms) == (10.2, 10.4)
    assert coverage == pytest.approx(sps.binom.cdf(14, 20, 0.5) - sps.binom.cdf(5, 20, 0.5), abs=1e-12)
    assert coverage == pytest.approx(0.95861053, abs=1e-8)
    # One rank narrower (7 and 14) would fall below the level.
    assert sps.binom.cdf(13, 20, 0.5) - sps.binom.cdf(6, 20, 0.5) < 0.95


def test_median_interval_falls_back_to_min_max_with_its_true_coverage_when_n_is_too_small() -> None:
    lo_ms, hi_ms, coverage = median_interval([5.0, 1.0, 4.0, 2.0, 3.0], 0.95)
    assert (lo_ms, hi_ms) == (1.0, 5.0)
    assert coverage == pytest.approx(1 - 2 / 2**5)
    summary = summarize_epoch_times([5.0, 1.0, 4.0, 2.0, 3.0])
    assert summary.median_interval_coverage < 0.95
    assert any("median interval" in w for w in summary.warnings)
    # At n = 6 the (min, max) pair already reaches 1 - 2/64 = 0.969 >= 0.95.
    assert median_interval([6.0, 5.0, 1.0, 4.0, 2.0, 3.0], 0.95) == pytest.approx((1.0, 6.0, 1 - 2 / 64))


# --------------------------------------------------------------------------------------------- percentiles


def test_percentile_reliability_thresholds_are_72_and_368() -> None:
    assert percentile_min_epochs(95.0) == 72
    assert percentile_min_epochs(99.0) == 368
    # The sample maximum exceeds the true quantile with probability 1 - p^n; equal tails need p^n <= 0.025.
    assert 0.95**72 <= 0.025 < 0.95**71
    assert 0.99**368 <= 0.025 < 0.99**367


def test_percentiles_are_flagged_reliable_exactly_from_their_thresholds() -> None:
    times_ms = 100.0 + np.random.default_rng(3).random(368)
    assert not summarize_epoch_times(times_ms[:71]).p95_reliable
    assert summarize_epoch_times(times_ms[:72]).p95_reliable
    assert not summarize_epoch_times(times_ms[:367]).p99_reliable
    at_368 = summarize_epoch_times(times_ms)
    assert at_368.p99_reliable
    assert not any("P99" in w for w in at_368.warnings)


# ------------------------------------------------------------------------------------------------- outliers


def test_sigma_rule_misses_an_extreme_outlier_among_ten_that_mad_flags_and_warns() -> None:
    times_ms = [10.1, 10.3, 10.2, 10.4, 10.2, 10.3, 10.1, 10.2, 10.3, 50.0]
    assert flag_outliers(times_ms, "sigma").tolist() == []
    assert flag_outliers(times_ms, "mad").tolist() == [9]
    summary = summarize_epoch_times(times_ms, outlier_rule="sigma")
    assert summary.outlier_indices == ()
    assert any("3-sigma" in w and "cannot flag" in w for w in summary.warnings)
    assert not any("3-sigma" in w for w in summarize_epoch_times(times_ms, outlier_rule="mad").warnings)


def test_sigma_rule_bound_is_tight_so_it_first_flags_at_n_11() -> None:
    assert not sigma_rule_can_flag(10)
    assert sigma_rule_can_flag(11)
    # The extremal configuration (one value a above the mean, the rest equal) reaches |z| = (n-1)/sqrt(n):
    # at n = 11 that is 10/sqrt(11) = 3.015 > 3, so the legacy rule flags it.
    times_ms = [20.0] + [9.0] * 10
    z = (20.0 - np.mean(times_ms)) / np.std(times_ms, ddof=1)
    assert z == pytest.approx(10 / math.sqrt(11))
    assert flag_outliers(times_ms, "sigma").tolist() == [0]
    # The 20-value example's stall has z = 2.44/0.592 = 4.1, so sigma flags it too.
    assert flag_outliers(X_MS, "sigma").tolist() == [8]


def test_iqr_rule_uses_tukey_fences_on_type_7_quartiles() -> None:
    # Q1 = 10.2 and Q3 = 10.4 + 0.25·0.1 = 10.425, so the fences are 9.8625 and 10.7625: only 12.9 is outside.
    q1, q3 = np.percentile(X_MS, [25, 75], method="linear")
    assert (q1, q3) == pytest.approx((10.2, 10.425))
    assert flag_outliers(X_MS, "iqr").tolist() == [8]
    # Replacing the stall keeps the quartiles (it stays the maximum): just inside the upper fence, then outside.
    assert flag_outliers([*X_MS[:8], 10.76, *X_MS[9:]], "iqr").tolist() == []
    assert flag_outliers([*X_MS[:8], 10.77, *X_MS[9:]], "iqr").tolist() == [8]


def test_mad_of_zero_falls_back_to_the_scaled_mean_absolute_deviation() -> None:
    # Median 10, MAD 0; mean absolute deviation 0.1, so 11 scores 1/(1.253314·0.1) = 7.98 > 3.5.
    assert flag_outliers([10.0] * 9 + [11.0], "mad").tolist() == [9]
    # Mean absolute deviation 0.05: 10.2 scores 0.2/(1.253314·0.05) = 3.19, below 3.5 (unscaled it would be 4).
    assert flag_outliers([10.0] * 6 + [10.1, 9.9, 10.1, 10.2], "mad").tolist() == []
    # Mean absolute deviation 0.06: 10.3 scores 0.3/(1.253314·0.06) = 3.99, above 3.5.
    assert flag_outliers([10.0] * 6 + [10.1, 9.9, 10.1, 10.3], "mad").tolist() == [9]


@pytest.mark.parametrize("rule", ["mad", "sigma", "iqr", "none"])
def test_identical_epochs_flag_nothing(rule: str) -> None:
    assert flag_outliers([7.0] * 12, rule).tolist() == []


def test_none_rule_flags_nothing_and_unknown_rule_is_rejected() -> None:
    assert flag_outliers(X_MS, "none").tolist() == []
    with pytest.raises(ValueError, match="mad, sigma, iqr, none"):
        flag_outliers(X_MS, "grubbs")
    with pytest.raises(ValueError, match="mad, sigma, iqr, none"):
        summarize_epoch_times(X_MS, outlier_rule="grubbs")


def test_outliers_are_kept_in_every_estimate() -> None:
    summary = summarize_epoch_times(X_MS)
    assert summary.outlier_indices == (8,)
    assert summary.mean_ms == pytest.approx(np.mean(X_MS))
    assert summary.mean_ms > np.mean(np.delete(X_MS, 8))


# ---------------------------------------------------------------------------------------------- autocorrelation


def test_lag1_autocorrelation_and_its_bias_correction_by_hand() -> None:
    # Deviations (-2, -2, 2, 2, -2, -2, 2, 2): lag products sum to 4, squares to 32, so r1 = 0.125;
    # corrected (8·0.125 + 1)/(8 - 4) = 0.5.
    times_ms = [2.0, 2.0, 6.0, 6.0, 2.0, 2.0, 6.0, 6.0]
    assert lag1_autocorrelation(times_ms) == pytest.approx(0.125)
    assert adjusted_autocorrelation(times_ms) == pytest.approx(0.5)
    assert summarize_epoch_times(times_ms).lag1_autocorrelation_adjusted == pytest.approx(0.5)
    assert lag1_autocorrelation([3.0] * 6) == 0.0


def test_the_adjusted_autocorrelation_is_clipped_to_zero_and_099() -> None:
    # Alternating: r1 = -28/32, corrected -1.5, clipped to 0.
    assert lag1_autocorrelation([2.0, 6.0] * 4) == pytest.approx(-0.875)
    assert adjusted_autocorrelation([2.0, 6.0] * 4) == 0.0
    # A ramp of 6: r1 = 8.75/17.5 = 0.5, corrected (6·0.5 + 1)/2 = 2, clipped to 0.99.
    assert adjusted_autocorrelation([1.0, 2.0, 3.0, 4.0, 5.0, 6.0]) == pytest.approx(0.99)


def test_below_five_epochs_the_autocorrelation_is_reported_uncorrected() -> None:
    # Deviations (-2, -2, 2, 2): r1 = 4/16 = 0.25, no correction.
    assert adjusted_autocorrelation([2.0, 2.0, 6.0, 6.0]) == pytest.approx(0.25)


# ------------------------------------------------------------------------------------ the decision interval


def test_the_decision_interval_is_overlapping_batch_means_with_its_figures() -> None:
    summary = summarize_epoch_times(X_MS, target_rel_halfwidth=0.02)
    variance_ms2, _ = long_run_variance(X_MS)
    assert summary.decision_interval_method == "overlapping_batch_means"
    assert summary.decision_interval_ms == pytest.approx(decision_interval(X_MS, 0.95), abs=1e-12)
    low_ms, high_ms = summary.decision_interval_ms
    assert summary.relative_halfwidth == pytest.approx((high_ms - low_ms) / 2 / 10.46, rel=1e-12)
    # The stall makes the epochs' variance s² larger than the long-run one of the batch means: ESS n·s²/σ̂² capped at n.
    ess = 20 * np.var(X_MS, ddof=1) / variance_ms2
    assert summary.effective_sample_size == pytest.approx(min(20.0, ess), rel=1e-12)
    assert summary.required_epochs == precision_epochs(variance_ms2, 10.46, 0.02, 0.95)
    assert summary.meets_precision_target == (summary.relative_halfwidth <= 0.02)


def test_the_effective_sample_size_is_n_times_the_variance_ratio_and_at_most_n() -> None:
    # A slow cycle of 20 epochs: the means of 10 consecutive epochs swing with it, so the ESS is well below n.
    cycle_ms = [100.0 + 10.0 * math.sin(2 * math.pi * t / 20) for t in range(30)]
    variance_ms2, _ = long_run_variance(cycle_ms)
    summary = summarize_epoch_times(cycle_ms)
    assert summary.effective_sample_size == pytest.approx(30 * np.var(cycle_ms, ddof=1) / variance_ms2, rel=1e-12)
    assert summary.effective_sample_size < 5
    # Alternating epochs: the batch means hardly vary, so n·s²/σ̂² is far above n and the ESS is n.
    assert summarize_epoch_times([2.0, 6.0] * 5).effective_sample_size == 10.0


def test_identical_epochs_give_a_zero_width_interval_of_n_effective_epochs() -> None:
    summary = summarize_epoch_times([4.0] * MIN_EPOCHS)
    assert summary.decision_interval_method == "overlapping_batch_means"
    assert summary.decision_interval_ms == (4.0, 4.0)
    assert summary.effective_sample_size == MIN_EPOCHS
    assert summary.required_epochs == MIN_EPOCHS and summary.meets_precision_target


def test_the_reported_decision_interval_is_cut_at_zero() -> None:
    # A ramp of 10 (mean 5.5): batches of 5 have means 3 … 8, off the mean by ±0.5, ±1.5, ±2.5 (squares sum to
    # 17.5), so σ̂² = 10·5 / (6·5) · 17.5 and ν = 1.5; the t quantile is 6.0, the half-width about 10.3 ms and the
    # interval reaches far below zero.
    times_ms = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0]
    variance_ms2, dof = long_run_variance(times_ms)
    assert (variance_ms2, dof) == pytest.approx((10 * 5 / (6 * 5) * 17.5, 1.5))
    halfwidth_ms = sps.t.ppf(0.975, dof) * math.sqrt(variance_ms2 / 10)
    assert halfwidth_ms > 5.5
    summary = summarize_epoch_times(times_ms, confidence_level=0.95)
    assert summary.decision_interval_ms == (0.0, pytest.approx(5.5 + halfwidth_ms, rel=1e-12))
    assert summary.relative_halfwidth == pytest.approx(halfwidth_ms / 5.5, rel=1e-12)


@pytest.mark.parametrize("n", [2, 3, 4, 5, MIN_EPOCHS - 1])
def test_below_the_minimum_of_epochs_the_decision_interval_is_the_plain_t_one_and_says_no_decision(n: int) -> None:
    summary = summarize_epoch_times(X_MS[:n])
    assert summary.decision_interval_method == "too_few_epochs_plain_t"
    assert summary.decision_interval_ms == pytest.approx(t_interval(X_MS[:n], 0.95), abs=1e-12)
    assert summary.effective_sample_size == n
    variance_ms2 = float(np.var(X_MS[:n], ddof=1))
    assert summary.required_epochs == precision_epochs(variance_ms2, float(np.mean(X_MS[:n])), 0.02, 0.95)
    assert any(f"fewer than the {MIN_EPOCHS}" in w and "no decision will be made" in w for w in summary.warnings)


def test_the_minimum_of_epochs_uses_batch_means_and_does_not_warn_of_too_few() -> None:
    summary = summarize_epoch_times(X_MS[:MIN_EPOCHS])
    assert summary.decision_interval_method == "overlapping_batch_means"
    assert not any("no decision will be made" in w for w in summary.warnings)


def test_the_plain_t_interval_of_too_few_epochs_is_cut_at_zero() -> None:
    times_ms = [1.0, 1.0, 1.0, 1.0, 30.0]
    assert t_interval(times_ms, 0.95)[0] < 0
    summary = summarize_epoch_times(times_ms)
    assert summary.decision_interval_ms == (0.0, pytest.approx(t_interval(times_ms, 0.95)[1], abs=1e-12))


def test_after_two_stage_measuring_the_interval_keeps_the_first_stage_variance() -> None:
    times_ms = (100.0 + 3.0 * np.random.default_rng(8).standard_normal(30)).tolist()
    summary = summarize_epoch_times(times_ms, first_stage_epochs=12, target_rel_halfwidth=0.02)
    first_variance_ms2, _ = long_run_variance(times_ms[:12])
    assert summary.decision_interval_method == "two_stage_overlapping_batch_means"
    assert summary.decision_interval_ms == pytest.approx(two_stage_interval(times_ms[:12], times_ms, 0.95), abs=1e-12)
    assert summary.required_epochs == two_stage_required_epochs(times_ms[:12], 0.02, 0.95)
    ess = 30 * np.var(times_ms, ddof=1) / first_variance_ms2
    assert summary.effective_sample_size == pytest.approx(min(30.0, ess), rel=1e-12)
    assert summarize_epoch_times(times_ms).decision_interval_ms != summary.decision_interval_ms


@pytest.mark.parametrize("first_stage", [MIN_EPOCHS - 1, 31])
def test_a_first_stage_outside_the_run_is_refused(first_stage: int) -> None:
    with pytest.raises(ValueError, match="first_stage_epochs"):
        summarize_epoch_times([100.0 + (t % 3) for t in range(30)], first_stage_epochs=first_stage)


def test_the_precision_warning_names_the_epochs_that_would_reach_the_target() -> None:
    times_ms = (100.0 + 5.0 * np.random.default_rng(9).standard_normal(20)).tolist()
    summary = summarize_epoch_times(times_ms, target_rel_halfwidth=0.01)
    assert not summary.meets_precision_target and summary.required_epochs > 20
    assert any(f"about {summary.required_epochs} epochs would reach it" in w for w in summary.warnings)


@pytest.mark.parametrize("n", [30, 10])
def test_decision_interval_keeps_near_nominal_coverage_on_ar1_data_where_the_t_interval_fails(n: int) -> None:
    series = ar1_series(rho=0.5, n=n, replications=400, seed=20240 + n)
    decision_hits = plain_hits = 0
    for times_ms in series:
        summary = summarize_epoch_times(times_ms, confidence_level=0.95)
        lo_ms, hi_ms = summary.decision_interval_ms
        decision_hits += lo_ms <= 100.0 <= hi_ms
        t_lo_ms, t_hi_ms = summary.confidence_interval_ms
        plain_hits += t_lo_ms <= 100.0 <= t_hi_ms
    decision_coverage, plain_coverage = decision_hits / 400, plain_hits / 400
    assert 0.92 <= decision_coverage <= 0.995
    # Variance of an AR(1) mean is ~(1+rho)/(1-rho) = 3 times the i.i.d. one: the t-interval covers ~76%.
    assert plain_coverage < 0.85
    assert decision_coverage - plain_coverage > 0.08


# ------------------------------------------------------------------------------------------------------ drift


def test_linear_increase_is_flagged_and_the_shuffled_series_is_not() -> None:
    rng = np.random.default_rng(7)
    rising_ms = 100.0 + 0.5 * np.arange(30) + rng.standard_normal(30)
    summary = summarize_epoch_times(rising_ms)
    assert summary.drift_detected and summary.drift_slope_ms_per_epoch == pytest.approx(0.5, abs=0.1)
    assert summary.drift_shift_ms == pytest.approx(29 * summary.drift_slope_ms_per_epoch)
    assert any("drift" in w and "slowing down" in w for w in summary.warnings)
    shuffled = summarize_epoch_times(rng.permutation(rising_ms))
    assert not shuffled.drift_detected
    assert shuffled.drift_p_value >= 0.05


def test_drift_uses_the_rounds_when_given() -> None:
    # Four rounds of five whose means climb 10 ms a round (2 ms an epoch), 15 epochs apart: the round means' slope.
    times = [100.0 + 10.0 * r + d for r in range(4) for d in (-1.0, 1.0, 0.0, 0.5, -0.5)]
    summary = summarize_epoch_times(times, rounds=[5, 5, 5, 5], round_gaps_epochs=[15.0] * 3)
    assert summary.drift_method == METHOD_DRIFT_ROUND_MEANS
    # Each later round's first epoch (its -1 ms) is left out: its mean and centre move a little.
    assert summary.drift_slope_ms_per_epoch == pytest.approx(2.0, rel=0.03)
    assert summary.drift_detected


# ------------------------------------------------------------------------------------------------------ rounds


def _rounds_times() -> tuple[list[float], list[int]]:
    """Four rounds of five epochs around 1000 ms, each with its own host level (seeded)."""
    rng = np.random.default_rng(12)
    levels = rng.normal(0.0, 30.0, 4)
    return [1000.0 + level + e for level in levels for e in rng.normal(0.0, 10.0, 5)], [5, 5, 5, 5]


def test_rounds_make_the_decision_interval_two_level_and_fill_the_round_statistics() -> None:
    times, counts = _rounds_times()
    summary = summarize_epoch_times(times, rounds=counts, target_rel_halfwidth=0.01)
    parts = split_rounds(times, counts)
    interval = two_level_interval(parts, 0.95, from_run=True)
    assert summary.decision_interval_ms == pytest.approx(interval.interval_ms, rel=1e-12)
    assert summary.decision_interval_method == METHOD_ROUND_MEANS_AR1
    # Everything else stays computed over all epochs as they come.
    assert summary.confidence_interval_ms == pytest.approx(t_interval(times, 0.95), rel=1e-12)
    assert summary.mean_ms == pytest.approx(np.mean(times))
    rounds = summary.rounds
    assert rounds is not None
    assert rounds.epochs_per_round == (5, 5, 5, 5)
    assert rounds.round_means_ms == pytest.approx([p.mean() for p in parts])
    assert rounds.between_p_value == pytest.approx(variance_components(parts).f_p_value)
    assert rounds.between_variance_ms2 == pytest.approx(interval.between_variance_ms2)
    assert rounds.within_variance_ms2 == pytest.approx(interval.within_variance_ms2)
    assert rounds.between_share == pytest.approx(interval.between_share) and rounds.dominant == interval.dominant
    # No gaps given: the rounds were back to back, and the interval counts their correlation (Satterthwaite's
    # degrees of freedom, fewer than R − 1).
    assert rounds.gaps_epochs is None and interval.gaps_epochs is None
    assert rounds.degrees_of_freedom == pytest.approx(interval.degrees_of_freedom) and rounds.degrees_of_freedom < 3
    # The epochs that would reach ±1%: whole rounds of five, the first round count whose half-width meets it.
    required_rounds = summary.required_epochs // 5
    assert summary.required_epochs % 5 == 0 and summary.required_epochs >= 20
    target_ms = 0.01 * interval.mean_ms
    assert halfwidth_after(interval, required_rounds, 5, 0.95) <= target_ms
    assert halfwidth_after(interval, required_rounds - 1, 5, 0.95) > target_ms
    assert summary.effective_sample_size == pytest.approx(
        min(20.0, np.var(times, ddof=1) / interval.variance_of_mean_ms2), rel=1e-12
    )
    payload = summary.to_dict()
    assert json.loads(json.dumps(payload, allow_nan=False)) == payload
    assert EpochTimeStatistics.from_dict(payload) == summary


def test_one_round_keeps_the_one_block_interval() -> None:
    summary = summarize_epoch_times(X_MS, rounds=[len(X_MS)])
    assert summary.rounds is None
    assert summary.decision_interval_ms == pytest.approx(decision_interval(X_MS, 0.95), rel=1e-12)
    assert summary.drift_method == METHOD_DRIFT_AR1_BOUND


def test_bad_rounds_are_refused() -> None:
    with pytest.raises(ValueError, match="sum to the 20"):
        summarize_epoch_times(X_MS, rounds=[5, 5, 5])
    with pytest.raises(ValueError, match="first_stage_epochs"):
        summarize_epoch_times(X_MS, rounds=[10, 10], first_stage_epochs=10)


# ------------------------------------------------------------------------------------ validation and output


def test_fewer_than_two_epochs_is_rejected() -> None:
    with pytest.raises(ValueError, match="at least 2 epoch times"):
        summarize_epoch_times([10.0])
    with pytest.raises(ValueError, match="at least 2 epoch times"):
        summarize_epoch_times([])


@pytest.mark.parametrize(
    ("times_ms", "message"),
    [([1.0, float("nan")], "finite"), ([1.0, -2.0], "positive"), ([[1.0, 2.0]], "1-D")],
)
def test_bad_epoch_times_are_rejected(times_ms: list, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        summarize_epoch_times(times_ms)


@pytest.mark.parametrize("level", [0.0, 1.0, 95.0])
def test_confidence_level_outside_zero_one_is_rejected(level: float) -> None:
    with pytest.raises(ValueError, match="confidence_level"):
        summarize_epoch_times(X_MS, confidence_level=level)


@pytest.mark.parametrize("n", [2, 3, 4])
def test_two_to_four_epochs_work(n: int) -> None:
    summary = summarize_epoch_times(X_MS[:n])
    assert summary.n == n
    assert summary.confidence_interval_ms[0] < summary.mean_ms < summary.confidence_interval_ms[1]


def test_cv_gate() -> None:
    assert not summarize_epoch_times(X_MS, cv_threshold=0.05).cv_ok
    assert summarize_epoch_times(X_MS, cv_threshold=0.06).cv_ok


def test_to_dict_is_strict_json_with_lists_for_intervals() -> None:
    for times_ms in (X_MS, [4.0] * MIN_EPOCHS):
        payload = summarize_epoch_times(times_ms).to_dict()
        # A fixed count of epochs in one block has no first stage and no rounds, and today's drift test no
        # Kendall's tau: the report leaves those keys out.
        absent = {"first_stage_epochs", "rounds", "drift_kendall_tau"}
        assert set(payload) == {f.name for f in fields(EpochTimeStatistics)} - absent
        assert json.loads(json.dumps(payload, allow_nan=False)) == payload
    payload = summarize_epoch_times(X_MS).to_dict()
    assert payload["confidence_interval_ms"] == pytest.approx([10.1827445, 10.7372555], abs=1e-6)
    assert payload["outlier_indices"] == [8]
