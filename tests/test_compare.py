"""``gpubench compare``: the two-level means, Fieller's interval and the t test against hand-computed values and
scipy, the power figure against statsmodels and a direct integral, verdicts for planted changes and on seeded runs in
rounds (``gpubench.stats.compare``), and the reports, the per-sample conversion, the rendering and the command line
on report files and MLflow run ids (``gpubench.output.compare``)."""

import argparse
import json
import math
import subprocess
import sys
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from report_factory import model_section
from report_factory import report as factory_report
from scipy import integrate
from scipy import stats as sps
from statsmodels.stats.power import ttest_power

from gpubench.cli.compare import main
from gpubench.output.compare import CompareError, compare_reports, render_markdown, unmatched_models
from gpubench.output.report_file import read_report
from gpubench.results import HardwareReport, ModelResult, RunInfo, RunReport
from gpubench.stats.compare import (
    AMBIGUOUS,
    FASTER,
    PLANNED_POWER,
    SAME,
    SLOWER,
    RunMean,
    ambiguous_probability,
    compare_mean_times,
    difference_p_values,
    epochs_for_power,
    expected_power,
    fieller_bounds,
    fieller_interval,
    power_at,
    verdict,
    verdicts,
)
from gpubench.stats.intervals import MIN_EPOCHS, batch_size, degrees_of_freedom, long_run_variance
from gpubench.stats.rounds import round_means_design, two_level_interval

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from compare_coverage import pair
from statistics_coverage import ar1_epochs

#: Every test report's models run 100 steps of 8 windows an epoch unless a test says otherwise.
STEPS_PER_EPOCH = 100
SAMPLES_PER_STEP = 8.0


def epoch_times_ms(mean_ms: float, cv: float, n: int, seed: int, stall_at: int | None = None) -> np.ndarray:
    """GPU-like epoch times: Gaussian jitter of relative size ``cv``, and optionally one 15% stall."""
    times = mean_ms * (1 + cv * np.random.default_rng(seed).standard_normal(n))
    if stall_at is not None:
        times[stall_at] *= 1.15
    return times


def make_report(
    times_by_model: dict[str, np.ndarray | list[float]],
    device: str = "Test GPU",
    steps_per_epoch: int = STEPS_PER_EPOCH,
    sample_unit: str = "window",
) -> RunReport:
    """A complete report whose models measured the given epoch times (ms), ``steps_per_epoch`` steps of
    :data:`SAMPLES_PER_STEP` ``sample_unit`` samples each."""
    run = RunInfo(
        device="cuda",
        models=list(times_by_model),
        epochs=10,
        warmup_epochs=2,
        precision="fp32",
        compile="false",
        seed=0,
    )
    return RunReport(
        timestamp="2026-01-01T00:00:00+00:00",
        benchmark_version="0.1.0",
        report_schema_version=1,
        status="complete",
        run=run,
        hardware=HardwareReport(measured_on="cuda", device_name=device),
        data=None,
        models={
            name: ModelResult(
                raw_epoch_times_ms=[float(t) for t in times],
                steps_per_epoch=steps_per_epoch,
                samples_per_step=SAMPLES_PER_STEP,
                sample_unit=sample_unit,
            )
            for name, times in times_by_model.items()
        },
    )


def scaled(report: RunReport, factor: float) -> RunReport:
    """``report`` with every model's epoch times multiplied by ``factor`` (epochs of the same size)."""
    return make_report({name: np.array(r.raw_epoch_times_ms) * factor for name, r in report.models.items()})


def per_sample(times_ms: np.ndarray | list[float], steps_per_epoch: int = STEPS_PER_EPOCH) -> np.ndarray:
    """Epoch times (ms) as times per sample (ms) for epochs of ``steps_per_epoch`` × :data:`SAMPLES_PER_STEP`."""
    return np.asarray(times_ms, dtype=float) / (steps_per_epoch * SAMPLES_PER_STEP)


def with_exact_long_run_moments(mean_ms: float, long_run_std_ms: float, n: int, seed: int) -> np.ndarray:
    """n epoch times whose mean and OBM long-run standard deviation are exactly the given ones (the OBM variance is
    quadratic in the deviations from the mean, so scaling them scales it)."""
    z = np.random.default_rng(seed).standard_normal(n)
    z_variance, _ = long_run_variance(z - z.min() + 1.0)
    return mean_ms + long_run_std_ms * (z - z.mean()) / math.sqrt(z_variance)


def make_gpu_report() -> RunReport:
    return make_report(
        {
            "dqn": epoch_times_ms(1200.0, 0.015, 15, seed=1, stall_at=7),
            "ppo": epoch_times_ms(800.0, 0.01, 12, seed=2),
            "mlp": epoch_times_ms(95.0, 0.02, 20, seed=3, stall_at=0),
        }
    )


@pytest.fixture
def gpu_report() -> RunReport:
    return make_gpu_report()


# --------------------------------------------------------------------------------------------------- verdicts


def test_a_report_against_itself_is_same_for_every_model_with_ratio_one_and_p_value_one(gpu_report):
    comparisons = compare_reports(gpu_report, gpu_report)
    assert [c.model for c in comparisons] == ["dqn", "ppo", "mlp"]
    for comparison in comparisons:
        assert comparison.result.verdict == SAME, comparison
        assert comparison.result.ratio_b_over_a == pytest.approx(1.0, abs=1e-12)
        low, high = comparison.result.ratio_interval
        assert 0.95 <= low < 1 < high <= 1.05
        assert comparison.result.p_value == pytest.approx(1.0, abs=1e-12)
        assert comparison.result.epochs_for_power is None
    assert unmatched_models(gpu_report, gpu_report) == []


def test_a_noisy_report_against_itself_is_same_but_a_noisy_rerun_is_ambiguous():
    # Like a CPU run: 10 epochs with a 12% coefficient of variation.
    report = make_report({"mlp": epoch_times_ms(100.0, 0.12, 10, seed=4)})
    (itself,) = compare_reports(report, report)
    assert itself.result.verdict == SAME and itself.result.identical_measurements
    assert (
        itself.result.ratio_interval[0] < 0.95 and itself.result.ratio_interval[1] > 1.05
    )  # the interval is still honest
    assert "compared with itself" in itself.explanation
    # A rerun drawn from the same distribution cannot show agreement within 5% with so few epochs.
    rerun = make_report({"mlp": epoch_times_ms(100.0, 0.12, 10, seed=5)})
    (comparison,) = compare_reports(report, rerun)
    assert comparison.result.verdict == AMBIGUOUS and not comparison.result.identical_measurements
    assert comparison.result.ratio_interval[0] < 0.95 and comparison.result.ratio_interval[1] > 1.05
    needed = comparison.result.epochs_for_power
    assert needed is not None and needed > 10
    assert f"a 10% difference would be seen with 80% power from {needed:,} epochs per run in one block" in (
        comparison.explanation
    )


@pytest.mark.parametrize(("factor", "expected"), [(1.2, SLOWER), (0.8, FASTER)])
def test_a_planted_20_percent_change_is_slower_or_faster(gpu_report, factor, expected):
    candidate = make_report(
        {
            name: np.array(result.raw_epoch_times_ms)
            * factor
            * (1 + 0.01 * np.random.default_rng(9).standard_normal(len(result.raw_epoch_times_ms)))
            for name, result in gpu_report.models.items()
        }
    )
    for comparison in compare_reports(gpu_report, candidate):
        assert comparison.result.verdict == expected, comparison
        assert comparison.result.ratio_b_over_a == pytest.approx(factor, abs=0.02)
        low, high = comparison.result.ratio_interval
        assert low < comparison.result.ratio_b_over_a < high
        assert (low > 1.05) if expected == SLOWER else (high < 0.95)
        assert comparison.result.p_value < 1e-3
        direction = "more" if expected == SLOWER else "less"
        assert comparison.explanation.startswith(
            f"B takes {abs(comparison.result.ratio_b_over_a - 1):.1%} {direction} time per window than A"
        )


def test_a_small_noisy_difference_with_few_epochs_is_ambiguous():
    baseline = make_report({"tft": epoch_times_ms(500.0, 0.05, MIN_EPOCHS, seed=5)})
    candidate = make_report({"tft": epoch_times_ms(530.0, 0.05, MIN_EPOCHS, seed=6)})
    (comparison,) = compare_reports(baseline, candidate)
    assert comparison.result.verdict == AMBIGUOUS
    low, high = comparison.result.ratio_interval
    assert low < 1.05 < high


@pytest.mark.parametrize(
    ("interval", "expected"),
    [
        ((0.80, 0.949), FASTER),
        ((0.951, 1.049), SAME),
        ((0.97, 1.0), SAME),
        ((1.051, 1.3), SLOWER),
        ((0.90, 0.97), AMBIGUOUS),  # faster, but perhaps by less than the threshold
        ((1.02, 1.08), AMBIGUOUS),  # significantly slower, perhaps within the noise
        ((0.90, 1.10), AMBIGUOUS),
        ((-math.inf, math.inf), AMBIGUOUS),
    ],
)
def test_verdict_compares_the_whole_interval_with_the_threshold_band(interval, expected):
    assert verdict(interval, 0.05) == expected


def test_a_wider_threshold_turns_a_slowdown_into_same(gpu_report):
    candidate = scaled(gpu_report, 1.1)
    assert {c.result.verdict for c in compare_reports(gpu_report, candidate, threshold=0.05)} == {SLOWER}
    assert {c.result.verdict for c in compare_reports(gpu_report, candidate, threshold=0.15)} == {SAME}


def test_b_twice_as_fast_per_step_with_auto_sized_epochs_reads_faster_where_epoch_times_read_same(tmp_path):
    # The runner sizes every epoch to about epoch.min_seconds: B's steps take half as long, so its epochs hold twice
    # the steps and last as long as A's. Epoch times at lag-1 correlation 0.5, 5% CV, 20 epochs a run.
    epochs_a, epochs_b = ar1_epochs(np.random.default_rng(31), 2, 20, 0.5, 0.05)
    work = {"steps_per_epoch_a": 75, "steps_per_epoch_b": 150, "samples_per_step": 8.0, "sample_unit": "env_step"}

    def run(times_ms: np.ndarray, steps_per_epoch: int) -> RunReport:
        result = model_section(
            list(times_ms), steps_per_epoch=steps_per_epoch, samples_per_step=8.0, sample_unit="env_step"
        )
        return factory_report({"dqn": result})

    report_a, report_b = run(epochs_a, work["steps_per_epoch_a"]), run(epochs_b, work["steps_per_epoch_b"])
    assert report_b.models["dqn"].step_time_ms == pytest.approx(report_a.models["dqn"].step_time_ms / 2, rel=0.1)
    # What comparing epoch times would see: the same epochs, SAME within the noise or undecided, never FASTER.
    on_epochs = compare_mean_times([epochs_a], [epochs_b], threshold=0.05, confidence_level=0.95)
    assert on_epochs.verdict in (SAME, AMBIGUOUS) and on_epochs.ratio_b_over_a == pytest.approx(1.0, abs=0.05)

    a = write_report(tmp_path / "a.json", report_a)
    b = write_report(tmp_path / "b.json", report_b)
    markdown = tmp_path / "out.md"
    assert main([a, b, "--markdown", str(markdown)]) == 0
    (comparison,) = compare_reports(report_a, report_b)
    assert comparison.result.verdict == FASTER
    assert comparison.result.ratio_b_over_a == pytest.approx(on_epochs.ratio_b_over_a / 2, rel=1e-12)
    assert comparison.result.ratio_interval[1] < 0.95
    (row,) = [line for line in markdown.read_text().splitlines() if line.startswith("| dqn |")]
    assert row.startswith("| dqn | env_step | 20 | 20 | 600 | 1,200 |") and row.endswith("| FASTER |")
    assert "B's epochs hold 1,200 env_steps, A's 600." in comparison.explanation


# --------------------------------------------------------------------------------------------------- statistics


def block(times_ms: np.ndarray | list[float]) -> RunMean:
    """A run measured in one block."""
    return RunMean.of([np.asarray(times_ms, dtype=float)])


def test_fieller_interval_on_long_run_variances_matches_a_hand_computed_example():
    # A = 10..21 ms (n = 12): mean 15.5, batches of m = 5 (batch_size(12)), batch means 12..19, squared deviations
    # from 15.5 sum to 42, so sigma^2 = n m / ((n - m + 1)(n - m)) * 42 = 60 / 56 * 42 = 45 and nu = 1.5 (12/5 - 1)
    # = 2.1; v_A = 45 / 12 = 3.75. B = A + 2 ms: mean 17.5, the same deviations, v_B = 3.75. R = 35/31.
    # Satterthwaite at R: (3.75 + R^2 3.75)^2 / (3.75^2 / 2.1 + R^4 3.75^2 / 2.1) = 2.1 (1 + R^2)^2 / (1 + R^4).
    # Roots of (17.5 - 15.5 R)^2 = t^2 3.75 (1 + R^2):
    # R = (15.5 * 17.5 -+ t sqrt(3.75 (15.5^2 + 17.5^2) - t^2 3.75^2)) / (15.5^2 - 3.75 t^2).
    times_a = np.arange(10.0, 22.0)
    assert batch_size(12) == 5
    a, b = block(times_a), block(times_a + 2.0)
    assert (a.mean_ms, a.variance_scale_ms2, a.dof) == pytest.approx((15.5, 45.0, 2.1), rel=1e-12)
    assert (b.mean_ms, b.variance_of_mean_ms2) == pytest.approx((17.5, 3.75), rel=1e-12)
    interval = fieller_interval(a, b, 0.95)
    ratio = 35 / 31
    assert interval.ratio == pytest.approx(ratio, rel=1e-15)
    dof = 2.1 * (1 + ratio**2) ** 2 / (1 + ratio**4)
    assert interval.df == pytest.approx(dof, rel=1e-12)
    t = sps.t.ppf(0.975, dof)
    half = t * math.sqrt(3.75 * (15.5**2 + 17.5**2) - t**2 * 3.75**2)
    leading = 15.5**2 - 3.75 * t**2
    assert interval.low == pytest.approx((15.5 * 17.5 - half) / leading, rel=1e-12)
    assert interval.high == pytest.approx((15.5 * 17.5 + half) / leading, rel=1e-12)
    # Each end is where a t test of "mean_B = R mean_A" sits exactly at the critical value.
    for end in (interval.low, interval.high):
        assert abs(17.5 - 15.5 * end) / math.sqrt(3.75 + 3.75 * end**2) == pytest.approx(t, rel=1e-12)


def test_a_run_in_rounds_takes_the_two_level_variance_of_the_decision_interval():
    rng = np.random.default_rng(21)
    rounds = [1000.0 * (1 + level + 0.03 * rng.standard_normal(4)) for level in (0.0, 0.08, -0.05, 0.02, 0.1)]
    gaps = [15.0] * 4
    run = RunMean.of(rounds, gaps)
    interval = two_level_interval(rounds, 0.95, gaps)
    assert (run.mean_ms, run.variance_of_mean_ms2, run.dof) == (
        interval.mean_ms,
        interval.variance_of_mean_ms2,
        interval.degrees_of_freedom,
    )
    # Planning the measured design again (20 epochs: 5 rounds of 4) gives the measured variance and dof.
    assert run.planned_rounds(20) == 5
    assert run.planned(20) == pytest.approx((run.variance_of_mean_ms2, run.dof), rel=1e-9)
    # 22 epochs: 6 rounds of 4 or 3 (3.67 on average), within 1% of the exact unbalanced variance.
    assert run.planned_rounds(22) == 6
    _, estimator, correlation = round_means_design([4, 4, 4, 4, 3, 3], [15.0] * 5)
    exact = run.variance_scale_ms2 * float(estimator[0] @ correlation @ estimator[0])
    assert run.planned(22)[0] == pytest.approx(exact, rel=0.01)
    # One block of n epochs planned as 60: sigma^2_inf / 60 on that length's degrees of freedom.
    one = block(np.concatenate(rounds))
    assert one.planned_rounds(60) == 1
    assert one.planned(60) == pytest.approx((one.variance_scale_ms2 / 60, degrees_of_freedom(60)), rel=1e-12)


def test_fieller_agrees_with_the_delta_method_on_log_means_when_noise_is_small():
    a_ms = epoch_times_ms(1000.0, 0.005, 20, seed=7)
    b_ms = epoch_times_ms(900.0, 0.005, 20, seed=8)
    a, b = block(a_ms), block(b_ms)
    interval = fieller_interval(a, b, 0.95)
    # Delta method: log(mean_B / mean_A) has standard error sqrt(v_A / mean_A^2 + v_B / mean_B^2).
    se_log = math.sqrt(a.variance_of_mean_ms2 / a.mean_ms**2 + b.variance_of_mean_ms2 / b.mean_ms**2)
    t = sps.t.ppf(0.975, interval.df)
    ratio = b.mean_ms / a.mean_ms
    delta = (ratio * math.exp(-t * se_log), ratio * math.exp(t * se_log))
    assert (interval.low, interval.high) == pytest.approx(delta, abs=2e-5)
    # Fieller is not symmetric about the estimate: its upper arm is the longer one.
    assert interval.high - interval.ratio > interval.ratio - interval.low


def test_the_t_test_is_welchs_test_on_the_runs_standard_errors_and_degrees_of_freedom():
    a_ms = epoch_times_ms(400.0, 0.03, 11, seed=12, stall_at=3)
    b_ms = epoch_times_ms(410.0, 0.03, 16, seed=13)
    a, b = block(a_ms), block(b_ms)
    # scipy's Welch test from summary statistics, fed a "sample" of nu + 1 observations whose standard deviation
    # gives the variance of the mean: its standard error and Welch-Satterthwaite df are then the runs' own.
    expected = sps.ttest_ind_from_stats(
        b.mean_ms,
        math.sqrt(b.variance_of_mean_ms2 * (b.dof + 1)),
        b.dof + 1,
        a.mean_ms,
        math.sqrt(a.variance_of_mean_ms2 * (a.dof + 1)),
        a.dof + 1,
        equal_var=False,
    )
    (comparison,) = compare_reports(make_report({"ppo": a_ms}), make_report({"ppo": b_ms}))
    assert comparison.result.p_value == pytest.approx(expected.pvalue, rel=1e-12)
    # At a ratio of one Fieller's df is the test's: Welch-Satterthwaite on the two variances and their nu.
    welch_df = (a.variance_of_mean_ms2 + b.variance_of_mean_ms2) ** 2 / (
        a.variance_of_mean_ms2**2 / a.dof + b.variance_of_mean_ms2**2 / b.dof
    )
    same_mean = replace(b, mean_ms=a.mean_ms)
    assert fieller_interval(a, same_mean, 0.95).df == pytest.approx(welch_df, rel=1e-12)


def test_the_vectorised_cores_give_what_the_per_comparison_functions_give():
    pairs = [(epoch_times_ms(1000.0, 0.05, 20, seed=s), epoch_times_ms(950.0, 0.05, 14, seed=s + 50)) for s in range(8)]
    pairs.append((np.full(MIN_EPOCHS, 100.0), np.full(MIN_EPOCHS, 100.0)))
    means = [(block(a_ms), block(b_ms)) for a_ms, b_ms in pairs]
    keys = ("mean_ms", "variance_of_mean_ms2", "dof")
    columns = [np.array([getattr(pair[side], key) for pair in means]) for side in (0, 1) for key in keys]
    ratio, low, high, dof = fieller_bounds(*columns, 0.9)
    p_values = difference_p_values(*columns)
    outcomes = verdicts(low, high, 0.05)
    for k, (a_ms, b_ms) in enumerate(pairs):
        comparison = compare_mean_times([a_ms], [b_ms], threshold=0.05, confidence_level=0.9)
        assert (ratio[k], (low[k], high[k]), dof[k]) == (
            comparison.ratio_b_over_a,
            comparison.ratio_interval,
            comparison.ratio_interval_df,
        )
        assert p_values[k] == comparison.p_value or (math.isnan(p_values[k]) and math.isnan(comparison.p_value))
        assert outcomes[k] == verdict(comparison.ratio_interval, 0.05)


def test_a_hypothetical_run_gets_the_degrees_of_freedom_a_measured_one_would():
    # A block planned longer needs nu for run lengths not measured; it must be long_run_variance's for every n.
    for n in range(MIN_EPOCHS, 400):
        assert degrees_of_freedom(n) == long_run_variance(np.arange(1.0, n + 1.0))[1]


def test_fieller_interval_is_unbounded_when_a_mean_is_indistinguishable_from_zero():
    # Ten epochs, five of 10 ms then five of 30 ms: batches of 5 have means 10, 14, ..., 30, off A's mean (20 ms) by
    # +-2, +-6, +-10 (squares sum to 280), so sigma^2 = 10 * 5 / (6 * 5) * 280 = 467 and se = sqrt(467 / 10) = 6.8 ms.
    # Satterthwaite's nu is at most nu_A + nu_B = 3, so t >= 3.18 and A's mean is within t * se (>= 21.7 ms) of zero.
    report_a = make_report({"dqn": [10.0] * 5 + [30.0] * 5})
    report_b = make_report({"dqn": [20.0, 21.0] * 5})
    a = block(report_a.models["dqn"].raw_epoch_times_ms)
    assert (a.mean_ms, a.variance_scale_ms2, a.dof) == pytest.approx((20.0, 50 / 30 * 280, 1.5), rel=1e-12)
    assert sps.t.ppf(0.975, 3.0) * math.sqrt(a.variance_of_mean_ms2) > a.mean_ms
    (comparison,) = compare_reports(report_a, report_b)
    assert comparison.result.ratio_interval == (0.0, math.inf)
    assert comparison.result.verdict == AMBIGUOUS and comparison.result.epochs_for_power is not None
    assert "A's mean is too uncertain for a bounded ratio interval" in comparison.explanation
    text = render_markdown([comparison], [], label_a="a", label_b="b", threshold=0.05, confidence=0.95)
    assert "| unbounded |" in text


def test_a_ratio_whose_numerator_is_indistinguishable_from_zero_is_bounded_above_only_never_negative():
    # The issue's case: a 95% interval of -0.630 to 12.484. B in two rounds of 2 and 60 ms: the round means' t
    # interval on about 1 degree of freedom reaches below zero, so Fieller's lower root is negative; the ratio of
    # two positive times is then bounded above only.
    a, b = RunMean.of([[10.0, 10.2], [10.1, 9.9]]), RunMean.of([[2.0, 2.1], [60.0, 61.0]])
    t = sps.t.ppf(0.975, b.dof)
    assert b.mean_ms < t * math.sqrt(b.variance_of_mean_ms2)
    interval = fieller_interval(a, b, 0.95)
    va, vb, ma, mb = a.variance_of_mean_ms2, b.variance_of_mean_ms2, a.mean_ms, b.mean_ms
    t = sps.t.ppf(0.975, interval.df)
    roots = np.roots([ma**2 - t**2 * va, -2 * ma * mb, mb**2 - t**2 * vb])
    assert min(roots) < 0 and interval.low == 0.0
    assert interval.high == pytest.approx(max(roots), rel=1e-12)
    comparison = compare_mean_times(
        [[10.0, 10.2], [10.1, 9.9]], [[2.0, 2.1], [60.0, 61.0]], threshold=0.05, confidence_level=0.95
    )
    assert comparison.verdict == AMBIGUOUS and comparison.ratio_interval == (0.0, interval.high)

    def two_rounds(times_ms: list[float]) -> RunReport:
        section = model_section(times_ms, steps_per_epoch=1, samples_per_step=1.0, sample_unit="window", rounds=[2, 2])
        return factory_report({"tft": section})

    (reported,) = compare_reports(two_rounds([10.0, 10.2, 10.1, 9.9]), two_rounds([2.0, 2.1, 60.0, 61.0]))
    assert reported.result.ratio_interval == pytest.approx((0.0, interval.high), rel=1e-12)
    assert f"B's mean is too uncertain for a lower bound on the ratio (≤ {interval.high:.3f})" in reported.explanation
    text = render_markdown([reported], [], label_a="a", label_b="b", threshold=0.05, confidence=0.95)
    assert f"| ≤ {interval.high:.3f} |" in text and "| -" not in text


def test_constant_epoch_times_give_an_exact_ratio_and_an_undefined_t_test():
    constant_a, constant_b = [100.0] * MIN_EPOCHS, [110.0] * MIN_EPOCHS
    (slower,) = compare_reports(make_report({"mlp": constant_a}), make_report({"mlp": constant_b}))
    assert slower.result.ratio_interval == pytest.approx((1.1, 1.1), rel=1e-12) and slower.result.verdict == SLOWER
    (same,) = compare_reports(make_report({"mlp": constant_a}), make_report({"mlp": constant_a}))
    assert same.result.ratio_interval == (1.0, 1.0) and same.result.verdict == SAME
    # The t statistic is zero over zero here.
    assert math.isnan(same.result.p_value) and math.isnan(slower.result.p_value)
    text = render_markdown([same], [], label_a="a", label_b="b", threshold=0.05, confidence=0.95)
    assert "| 1.000–1.000 | – | – | SAME |" in text


def test_power_is_statsmodels_one_sided_t_test_power_at_the_log_distance_to_the_band():
    # statsmodels' noncentral-t power of a one-sided test at alpha = (1 - level) / 2, noncentrality
    # effect_size * sqrt(nobs), on the given degrees of freedom.
    for distance, error, dof, level in [(0.0465, 0.02, 6.3, 0.95), (0.0541, 0.01, 2.5, 0.9), (0.03, 0.05, 40.0, 0.95)]:
        expected = ttest_power(distance / error, nobs=1, alpha=(1 - level) / 2, df=dof, alternative="larger")
        assert power_at(distance, error, dof, level) == pytest.approx(expected, rel=1e-9)


def test_expected_power_averages_the_power_over_the_measured_variances_uncertainty():
    rng = np.random.default_rng(22)
    a = RunMean.of([1000.0 * (1 + h + 0.04 * rng.standard_normal(4)) for h in rng.normal(0, 0.05, 5)], [15.0] * 4)
    b = RunMean.of([950.0 * (1 + h + 0.04 * rng.standard_normal(4)) for h in rng.normal(0, 0.05, 5)], [15.0] * 4)
    rounds = 30 * 4
    # The harder direction with a +-5% band: a 10% slow-down, log(1.1 / 1.05) from the upper edge.
    distance = math.log(1.1 / 1.05)
    (var_a, dof_a), (var_b, dof_b) = a.planned(rounds), b.planned(rounds)
    rel_a, rel_b = var_a / a.mean_ms**2, var_b / b.mean_ms**2
    dof = (rel_a + rel_b) ** 2 / (rel_a**2 / dof_a + rel_b**2 / dof_b)
    measured = (rel_a + rel_b) ** 2 / (rel_a**2 / a.dof + rel_b**2 / b.dof)

    def power(chi2: float) -> float:
        error = math.sqrt((rel_a + rel_b) * measured / chi2)
        return float(sps.nct.sf(sps.t.ppf(0.975, dof), dof, distance / error)) * sps.chi2.pdf(chi2, measured)

    expected, _ = integrate.quad(power, 0, np.inf, limit=200)
    assert expected_power(a, b, rounds, 0.05, 0.95) == pytest.approx(expected, abs=0.01)
    # Averaged over the variance's uncertainty the power is below the power at the measured variance when that is
    # high: the uncertain variance's heavy upper tail costs more than its lower one gains.
    at_measured = float(power_at(distance, math.sqrt(rel_a + rel_b), dof, 0.95))
    assert at_measured > 0.8 and expected < at_measured


def test_epochs_for_power_is_the_fewest_epochs_whose_expected_power_reaches_80_percent():
    rng = np.random.default_rng(23)
    a = RunMean.of([1000.0 * (1 + h + 0.04 * rng.standard_normal(4)) for h in rng.normal(0, 0.05, 5)], [15.0] * 4)
    b = RunMean.of([1000.0 * (1 + h + 0.04 * rng.standard_normal(4)) for h in rng.normal(0, 0.05, 5)], [15.0] * 4)
    epochs = epochs_for_power(a, b, 0.05, 0.95)
    assert epochs is not None and epochs > 20
    assert expected_power(a, b, epochs, 0.05, 0.95) >= PLANNED_POWER > expected_power(a, b, epochs - 1, 0.05, 0.95)
    # A 10% difference inside a +-10% band is never seen.
    assert epochs_for_power(a, b, 0.1, 0.95) is None


def test_ambiguous_probability_is_the_share_of_simulated_comparisons_that_read_ambiguous():
    # The plain way: draw the log ratio's estimate and its variance estimate, build the interval, read the verdict.
    rng = np.random.default_rng(31)
    draws = 200_000
    for log_ratio, variance, dof in [(0.0, 0.02**2, 8.0), (0.03, 0.015**2, 5.5), (-0.08, 0.03**2, 12.0)]:
        t = sps.t.ppf(0.975, dof)
        estimate = rng.normal(log_ratio, math.sqrt(variance), draws)
        half_width = t * np.sqrt(variance * rng.chisquare(dof, draws) / dof)
        read = verdicts(np.exp(estimate - half_width), np.exp(estimate + half_width), 0.05)
        simulated = float(np.mean(read == AMBIGUOUS))
        computed = float(ambiguous_probability(log_ratio, [variance], dof, 0.05, 0.95)[0])
        # 64 equal-probability points of the variance estimate: within 0.005 of the integral here.
        assert computed == pytest.approx(simulated, abs=4 * math.sqrt(simulated * (1 - simulated) / draws) + 0.005)


def test_the_plan_given_ambiguous_weights_each_variance_by_one_over_the_chance_of_that_verdict():
    # Two runs of one process (CV 5%, 5 rounds of 4) that read AMBIGUOUS: their interval just crosses 0.95.
    rng = np.random.default_rng(25)
    rounds_a = [1000.0 * (1 + 0.05 * rng.standard_normal(4)) for _ in range(5)]
    rounds_b = [1000.0 * (1 + 0.05 * rng.standard_normal(4)) for _ in range(5)]
    gaps = [15.0] * 4
    comparison = compare_mean_times(
        rounds_a, rounds_b, threshold=0.05, confidence_level=0.95, gaps_a_epochs=gaps, gaps_b_epochs=gaps
    )
    assert comparison.verdict == AMBIGUOUS
    a, b = comparison.a, comparison.b
    epochs = 24
    distance = math.log(1.1 / 1.05)
    (var_a, dof_a), (var_b, dof_b) = a.planned(epochs), b.planned(epochs)
    rel_a, rel_b = var_a / a.mean_ms**2, var_b / b.mean_ms**2
    dof = (rel_a + rel_b) ** 2 / (rel_a**2 / dof_a + rel_b**2 / dof_b)
    m_a, m_b = a.variance_of_mean_ms2 / a.mean_ms**2, b.variance_of_mean_ms2 / b.mean_ms**2
    measured = (m_a + m_b) ** 2 / (m_a**2 / a.dof + m_b**2 / b.dof)
    log_ratio = math.log(b.mean_ms / a.mean_ms)
    t_measured = sps.t.ppf(0.975, measured)
    edges = math.log(0.95), math.log(1.05)

    # The variance estimate's chi-square on a fine grid (the trapezoid rule; the product takes 64 quantiles).
    grid = np.linspace(0.0, sps.chi2.ppf(1 - 1e-12, measured), 20_001)
    grid_density = sps.chi2.pdf(grid, measured)

    def ambiguous(scale: float) -> float:
        # P(AMBIGUOUS) at the true relative variance (m_a + m_b) * scale, integrated over the variance estimate.
        variance = (m_a + m_b) * scale
        half = t_measured * np.sqrt(variance * grid / measured)

        def below(edge: np.ndarray) -> np.ndarray:
            return sps.norm.cdf((edge - log_ratio) / math.sqrt(variance))

        same = np.clip(below(edges[1] - half) - below(edges[0] + half), 0.0, None)
        decided = below(edges[0] - half) + 1 - below(edges[1] + half) + same
        return 1 - float(integrate.trapezoid(decided * grid_density, grid))

    def weighted(chi2: float, with_power: bool) -> float:
        scale = measured / chi2
        density = sps.chi2.pdf(chi2, measured)
        if density < 1e-12:
            return 0.0
        power = sps.nct.sf(sps.t.ppf(0.975, dof), dof, distance / math.sqrt((rel_a + rel_b) * scale))
        return (power if with_power else 1.0) * density / ambiguous(scale)

    numerator = integrate.quad(weighted, 0, np.inf, args=(True,), limit=100)[0]
    expected = numerator / integrate.quad(weighted, 0, np.inf, args=(False,), limit=100)[0]
    given = expected_power(a, b, epochs, 0.05, 0.95, given_ambiguous=True)
    assert given == pytest.approx(expected, abs=0.01)
    # Two runs of one process with CV 5% read AMBIGUOUS mostly where their variance came out high: given that verdict
    # the variance is smaller than its measurement says, so the plan given AMBIGUOUS (the one printed) is shorter.
    assert given > expected_power(a, b, epochs, 0.05, 0.95) + 0.05
    assert comparison.epochs_for_power == epochs_for_power(a, b, 0.05, 0.95, given_ambiguous=True)
    assert comparison.epochs_for_power < epochs_for_power(a, b, 0.05, 0.95)


def test_the_plan_given_ambiguous_is_the_plain_plan_where_every_pilot_reads_ambiguous():
    # A host level of 10% between rounds: an interval far wider than the +-5% band is AMBIGUOUS at any variance.
    rng = np.random.default_rng(25)
    a = RunMean.of([1000.0 * (1 + h + 0.05 * rng.standard_normal(4)) for h in rng.normal(0, 0.1, 5)], [15.0] * 4)
    b = RunMean.of([1000.0 * (1 + h + 0.05 * rng.standard_normal(4)) for h in rng.normal(0, 0.1, 5)], [15.0] * 4)
    plain = epochs_for_power(a, b, 0.05, 0.95)
    assert plain is not None
    assert abs(epochs_for_power(a, b, 0.05, 0.95, given_ambiguous=True) - plain) <= 0.02 * plain


def test_compare_mean_times_needs_enough_positive_times_per_run_and_settings_inside_zero_to_one():
    enough = [float(t) for t in range(1, MIN_EPOCHS + 1)]
    with pytest.raises(ValueError, match=f"one block of {MIN_EPOCHS - 1} epoch"):
        compare_mean_times([enough[:-1]], [enough], threshold=0.05, confidence_level=0.95)
    with pytest.raises(ValueError, match=r"rounds of \[3, 1\] epochs"):
        compare_mean_times([enough], [[1.0, 2.0, 3.0], [4.0]], threshold=0.05, confidence_level=0.95)
    with pytest.raises(ValueError, match="finite, positive"):
        compare_mean_times([enough], [[0.0, *enough[1:]]], threshold=0.05, confidence_level=0.95)
    with pytest.raises(ValueError, match="threshold must lie in"):
        compare_mean_times([enough], [enough], threshold=1.0, confidence_level=0.95)
    with pytest.raises(ValueError, match="confidence must lie in"):
        compare_mean_times([enough], [enough], threshold=0.05, confidence_level=0.0)


def test_a_report_comparison_is_the_comparison_of_its_models_times_per_sample(gpu_report):
    candidate = make_report(
        {name: np.array(r.raw_epoch_times_ms) * 1.03 for name, r in gpu_report.models.items()}, steps_per_epoch=120
    )
    for comparison in compare_reports(gpu_report, candidate, threshold=0.1, confidence=0.9):
        times_a = per_sample(gpu_report.models[comparison.model].raw_epoch_times_ms)
        times_b = per_sample(candidate.models[comparison.model].raw_epoch_times_ms, steps_per_epoch=120)
        assert comparison.result == compare_mean_times([times_a], [times_b], threshold=0.1, confidence_level=0.9)
        assert comparison.result.ratio_b_over_a == pytest.approx(1.03 * 100 / 120, rel=1e-12)
        assert (comparison.samples_per_epoch_a, comparison.samples_per_epoch_b) == (800.0, 960.0)


def test_a_report_in_rounds_is_compared_on_its_rounds_and_their_gaps():
    rng = np.random.default_rng(24)
    times = {
        name: 1000.0 * (1 + np.repeat(rng.normal(0, 0.05, 5), 4) + 0.03 * rng.standard_normal(20)) for name in "ab"
    }

    def in_rounds(values: np.ndarray) -> RunReport:
        section = model_section(
            list(values),
            steps_per_epoch=100,
            samples_per_step=8.0,
            sample_unit="window",
            rounds=[4] * 5,
            round_gaps_epochs=[15.0] * 4,
        )
        return factory_report({"tft": section})

    (comparison,) = compare_reports(in_rounds(times["a"]), in_rounds(times["b"]))
    expected = compare_mean_times(
        np.split(per_sample(times["a"]), 5),
        np.split(per_sample(times["b"]), 5),
        threshold=0.05,
        confidence_level=0.95,
        gaps_a_epochs=[15.0] * 4,
        gaps_b_epochs=[15.0] * 4,
    )
    assert comparison.result == expected and comparison.result.a.epochs_per_round == (4,) * 5
    (row,) = [
        line
        for line in render_markdown(
            [comparison], [], label_a="a", label_b="b", threshold=0.05, confidence=0.95
        ).splitlines()
        if line.startswith("| tft |")
    ]
    assert row.startswith("| tft | window | 20 (5) | 20 (5) |")


# --------------------------------------------------------------------------------------------------- simulation
# Seeded pairs of runs in 5 rounds of 4 epochs through benchmarks/compare_coverage.py's pair (the product's
# compare_mean_times); the full table is benchmarks/results/2026-12-06-compare-simulation.md.

_PAIRS = 300


@pytest.mark.parametrize(("rho", "host_sigma"), [(0.8, 0.0), (0.5, 0.1)])
def test_runs_of_one_process_rarely_read_faster_or_slower_and_the_interval_covers_one(rho, host_sigma):
    rng = np.random.default_rng(101)
    settings = argparse.Namespace(threshold=0.05, level=0.95)
    results = [pair(rng, [4] * 5, rho, 0.05, host_sigma, 15, 1.0, settings) for _ in range(_PAIRS)]
    # Binomial standard errors at 300 pairs: 1.3 points at a 5% rate, 1.4 at a coverage of 0.93.
    assert np.mean([r.verdict in (FASTER, SLOWER) for r in results]) <= 0.05
    assert np.mean([r.ratio_interval[0] <= 1.0 <= r.ratio_interval[1] for r in results]) >= 0.92
    assert all(r.ratio_interval[0] >= 0 for r in results)


# --------------------------------------------------------------------------------------------------- reports


def test_models_in_only_one_report_or_without_epoch_times_are_listed_with_the_reason():
    report_a = make_report(
        {"mlp": epoch_times_ms(95.0, 0.02, 10, 1), "dqn": [], "ppo": epoch_times_ms(800, 0.01, 10, 2)}
    )
    oom = ModelResult(status="oom", error="CUDA out of memory at batch 32")
    report_a = replace(report_a, models={**report_a.models, "dqn": oom})
    report_b = make_report(
        {
            "mlp": epoch_times_ms(95.0, 0.02, 10, 3),
            "dqn": epoch_times_ms(1200, 0.01, 10, 4),
            "tft": [500.0, math.nan, 510.0],
        }
    )
    assert [c.model for c in compare_reports(report_a, report_b)] == ["mlp"]
    reasons = {u.model: u.reason for u in unmatched_models(report_a, report_b)}
    assert reasons == {
        "dqn": "A: 0 measured epoch time(s), status oom: CUDA out of memory at batch 32",
        "ppo": "only in A",
        "tft": "only in B",
    }


def test_a_model_whose_sample_unit_differs_or_lacks_samples_per_epoch_is_refused_naming_unit_and_file(tmp_path, capsys):
    times = {"dqn": epoch_times_ms(1200, 0.01, 10, 4), "tft": epoch_times_ms(500, 0.01, 10, 5)}
    report_a = make_report(times, sample_unit="env_step")
    report_b = make_report({name: t * 0.5 for name, t in times.items()}, sample_unit="window")
    tft_b = replace(report_b.models["tft"], sample_unit="env_step", samples_per_step=None)
    report_b = replace(report_b, models={**report_b.models, "tft": tft_b})
    assert compare_reports(report_a, report_b) == []
    reasons = {u.model: u.reason for u in unmatched_models(report_a, report_b, ("A 'a.json'", "B 'b.json'"))}
    assert reasons == {
        "dqn": "refused: A 'a.json' counts its samples in 'env_step', B 'b.json' in 'window'; times per sample in "
        "different units are not comparable",
        "tft": "B 'b.json': no samples per epoch recorded (steps_per_epoch, samples_per_step, sample_unit), so no "
        "time per sample",
    }
    # The command refuses with the same reasons, naming the files, and compares nothing.
    a = write_report(tmp_path / "a.json", report_a)
    b = write_report(tmp_path / "b.json", report_b)
    assert main([a, b]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"no model can be compared between A '{a}' and B '{b}'" in err
    assert f"dqn: refused: A '{a}' counts its samples in 'env_step', B '{b}' in 'window'" in err
    assert f"tft: B '{b}': no samples per epoch recorded" in err


def test_a_report_without_epoch_times_is_an_error_naming_the_report(tmp_path, gpu_report, capsys):
    short = make_report({"dqn": [1.0] * (MIN_EPOCHS - 1)})
    failed = replace(short, models={"dqn": replace(short.models["dqn"], status="failed")})
    with pytest.raises(
        CompareError,
        match=rf"report B: .*enough measured epoch times.*dqn: {MIN_EPOCHS - 1} .*needs {MIN_EPOCHS}.*failed",
    ):
        compare_reports(gpu_report, failed)
    # A file that is JSON but not a report is refused when it is read, naming the argument and the file.
    not_a_report = write_json(tmp_path / "a.json", {"timestamp": "x"})
    assert main([not_a_report, write_report(tmp_path / "b.json", gpu_report)]) == 2
    assert f"argument A '{not_a_report}': {not_a_report} is not a gpubench report" in capsys.readouterr().err


def test_render_markdown_has_a_header_a_row_per_model_the_method_and_the_notes(gpu_report):
    slower = scaled(gpu_report, 1.2)
    slower = replace(slower, models={name: result for name, result in slower.models.items() if name != "mlp"})
    comparisons = compare_reports(gpu_report, slower)
    text = render_markdown(
        comparisons,
        unmatched_models(gpu_report, slower),
        label_a="a.json",
        label_b="b.json",
        threshold=0.05,
        confidence=0.9,
    )
    lines = text.splitlines()
    header = next(line for line in lines if line.startswith("| model |"))
    assert header.startswith(
        "| model | unit | epochs (rounds) A | epochs (rounds) B | samples/epoch A | samples/epoch B |"
    )
    assert "| µs/sample A | µs/sample B | ratio B/A | 90% interval B/A | p (t test) |" in header
    assert header.endswith("| verdict: B vs A |")
    rows = [line.split(" | ") for line in lines if line.startswith(("| dqn ", "| ppo "))]
    assert [row[0] for row in rows] == ["| dqn", "| ppo"] and all(row[-1] == "SLOWER |" for row in rows)
    assert all(len(row) == header.count(" | ") + 1 for row in rows)
    # dqn's mean epoch of about 1.2 s over 800 windows: 1.5 ms a window.
    assert float(rows[0][6]) == pytest.approx(comparisons[0].result.a.mean_ms * 1000, rel=1e-3)
    assert 1400 < float(rows[0][6]) < 1600
    assert "epoch time / samples per epoch" in text and "overlapping batch means" in text
    assert "- **mlp**: only in A" in lines and "- **A**: a.json" in lines


def test_compare_reports_rejects_a_threshold_or_confidence_outside_zero_to_one(gpu_report):
    with pytest.raises(CompareError, match="threshold must lie in"):
        compare_reports(gpu_report, gpu_report, threshold=0.0)
    with pytest.raises(CompareError, match="confidence must lie in"):
        compare_reports(gpu_report, gpu_report, confidence=1.0)


# --------------------------------------------------------------------------------------------------- command line


def write_json(path: Path, content: Any) -> str:
    path.write_text(json.dumps(content))
    return str(path)


def write_report(path: Path, report: RunReport) -> str:
    return write_json(path, report.to_dict())


def test_cli_compares_two_report_files_and_writes_markdown(tmp_path, gpu_report, capsys):
    slower = scaled(gpu_report, 1.2)
    a = write_report(tmp_path / "a.json", gpu_report)
    b = write_report(tmp_path / "b.json", slower)
    markdown = tmp_path / "out.md"
    assert main([a, b, "--markdown", str(markdown)]) == 0
    rows = [line for line in markdown.read_text().splitlines() if line.startswith("| ") and "---" not in line]
    assert [row.split(" | ")[0] for row in rows] == ["| model", "| dqn", "| ppo", "| mlp"]
    assert all(row.endswith("| SLOWER |") for row in rows[1:])
    terminal = capsys.readouterr().out
    assert "gpubench compare: B against A" in terminal and terminal.count("SLOWER") >= 3


def test_gpubench_compare_on_a_stored_report_in_rounds_and_a_noisy_rerun_plans_rounds(tmp_path):
    # The stored CPU quick report: 10 epochs a model in 4 rounds (3, 3, 2, 2), gaps from the round records. B is a
    # rerun 5% faster with 5% more noise per epoch: the round means cannot tell, and the advice is in rounds.
    data = json.loads((Path(__file__).parent / "fixtures" / "report_main_bf189fb_cpu_quick_dqn_ppo.json").read_text())
    a = write_json(tmp_path / "a.json", data)
    rng = np.random.default_rng(25)
    for model in data["models"].values():
        model["raw_epoch_times_ms"] = [
            t * 0.95 * (1 + 0.05 * rng.standard_normal()) for t in model["raw_epoch_times_ms"]
        ]
    b = write_json(tmp_path / "b.json", data)
    completed = subprocess.run(
        [sys.executable, "-m", "gpubench", "compare", a, b, "--markdown", "-"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert completed.returncode == 0, completed.stderr
    rows = [line.split(" | ") for line in completed.stdout.splitlines() if line.startswith(("| dqn", "| ppo"))]
    assert len(rows) == 2 and all(row[2:4] == ["10 (4)", "10 (4)"] and row[-1] == "AMBIGUOUS |" for row in rows)
    for row in rows:
        low, high = (float(end) for end in row[9].split("–"))
        assert 0 < low < 0.95 and high > 1.05
    # The rounds printed are the product's own figure for these reports, read in process.
    for comparison in compare_reports(read_report(Path(a)), read_report(Path(b))):
        epochs = comparison.result.epochs_for_power
        assert epochs is not None and comparison.result.a.round_epochs == 2
        rounds = -(-epochs // 2)
        assert f"80% power from {epochs:,} epochs per run in {rounds:,} rounds" in completed.stdout
        assert f"(statistics.rounds={rounds} epochs={epochs})" in completed.stdout


def test_cli_as_a_module_prints_markdown_on_stdout_and_the_table_on_stderr(tmp_path, gpu_report):
    a = write_report(tmp_path / "a.json", gpu_report)
    completed = subprocess.run(
        [sys.executable, "-m", "gpubench.compare", a, a, "--markdown", "-", "--threshold", "0.1"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.startswith("## gpubench compare: B against A\n")
    assert "±10% noise threshold" in completed.stdout and completed.stdout.count("| SAME |") == 3
    assert "┃ model" in completed.stderr and "┃" not in completed.stdout


def log_report_runs(folder: Path, contents: dict[str, Any]) -> tuple[str, dict[str, str]]:
    """MLflow runs in one temp SQLite store, each holding its content as its report.json artifact (none when the
    content is None); (uri, run id by name)."""
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{folder / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    experiment_id = client.create_experiment("compare", artifact_location=(folder / "artifacts").as_uri())
    run_ids = {}
    for name, content in contents.items():
        run_id = client.create_run(experiment_id).info.run_id
        if content is not None:
            (folder / name).mkdir()
            client.log_artifact(run_id, write_json(folder / name / "report.json", content))
        client.set_terminated(run_id)
        run_ids[name] = run_id
    return uri, run_ids


@pytest.fixture(scope="module")
def logged_runs(tmp_path_factory) -> tuple[str, dict[str, str]]:
    """The runs the command-line tests read, in one store for the module (creating a store costs a second or more):
    ``gpu`` holds the GPU report, ``no_report`` has no report.json, ``not_gpubench``'s report.json is not a
    gpubench report; (uri, run id by name)."""
    contents = {"gpu": make_gpu_report().to_dict(), "no_report": None, "not_gpubench": {"timestamp": "x"}}
    return log_report_runs(tmp_path_factory.mktemp("compare_store"), contents)


def test_cli_compares_an_mlflow_run_id_with_a_report_file(tmp_path, gpu_report, logged_runs):
    uri, run_ids = logged_runs
    run_id = run_ids["gpu"]
    faster = scaled(gpu_report, 0.8)
    b = write_report(tmp_path / "b.json", faster)
    markdown = tmp_path / "out.md"
    assert main([run_id, b, "--tracking-uri", uri, "--markdown", str(markdown)]) == 0
    text = markdown.read_text()
    assert f"- **A**: {run_id} (Test GPU, 2026-01-01T00:00:00+00:00)" in text
    assert text.count("| FASTER |") == 3


def test_cli_reads_the_tracking_uri_from_the_environment(tmp_path, logged_runs, monkeypatch):
    uri, run_ids = logged_runs
    run_id = run_ids["gpu"]
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    markdown = tmp_path / "out.md"
    assert main([run_id, run_id, "--markdown", str(markdown)]) == 0
    assert markdown.read_text().count("| SAME |") == 3


def test_cli_unknown_run_id_or_run_without_report_exits_2_naming_the_argument(tmp_path, capsys, logged_runs):
    uri, run_ids = logged_runs
    run_id = run_ids["no_report"]
    unknown = uuid.uuid4().hex
    assert main([unknown, run_id, "--tracking-uri", uri]) == 2
    assert f"argument A '{unknown}': no MLflow run {unknown}" in capsys.readouterr().err
    existing = write_report(tmp_path / "a.json", make_report({"mlp": [float(t) for t in range(1, MIN_EPOCHS + 1)]}))
    assert main([existing, run_id, "--tracking-uri", uri]) == 2
    assert f"argument B '{run_id}': MLflow run {run_id} has no report.json artifact" in capsys.readouterr().err


def test_cli_run_whose_report_is_not_a_gpubench_report_exits_2_naming_the_run(
    tmp_path, gpu_report, capsys, logged_runs
):
    uri, run_ids = logged_runs
    run_id = run_ids["not_gpubench"]
    good = write_report(tmp_path / "good.json", gpu_report)
    assert main([good, run_id, "--tracking-uri", uri]) == 2
    err = capsys.readouterr().err
    assert f"argument B '{run_id}': MLflow run {run_id}'s report.json is not a gpubench report" in err
    assert "Traceback" not in err


def test_cli_refuses_a_missing_sqlite_store_instead_of_creating_one(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    run_id = uuid.uuid4().hex
    assert main([run_id, run_id]) == 2
    assert f"argument A '{run_id}': the MLflow tracking store sqlite:///mlruns/mlflow.db does not exist" in (
        capsys.readouterr().err
    )
    assert not (tmp_path / "mlruns").exists()


def test_cli_bad_report_arguments_exit_2_with_the_argument_named(tmp_path, gpu_report, capsys):
    good = write_report(tmp_path / "good.json", gpu_report)
    no_times = replace(make_report({}), models={"dqn": ModelResult(status="failed", error="boom")})
    cases = {
        str(tmp_path / "missing.json"): "neither an existing report file nor an MLflow run id",
        write_report(tmp_path / "no_times.json", no_times): "no model with enough measured epoch times",
        write_json(tmp_path / "list.json", [1, 2]): "is not a gpubench report",
    }
    (tmp_path / "broken.json").write_text("{not json")
    cases[str(tmp_path / "broken.json")] = "is not valid JSON"
    for bad, message in cases.items():
        assert main([good, bad]) == 2
        err = capsys.readouterr().err
        assert f"argument B '{bad}'" in err and message in err and "Traceback" not in err
    other = write_report(tmp_path / "other.json", make_report({"tft": [float(t) for t in range(1, MIN_EPOCHS + 1)]}))
    assert main([good, other]) == 2
    assert "no model can be compared between A" in capsys.readouterr().err


@pytest.mark.parametrize(("option", "value"), [("--threshold", "1.5"), ("--confidence", "0"), ("--threshold", "x")])
def test_cli_bad_options_exit_2_naming_the_option(tmp_path, gpu_report, capsys, option, value):
    good = write_report(tmp_path / "good.json", gpu_report)
    with pytest.raises(SystemExit) as exited:
        main([good, good, option, value])
    assert exited.value.code == 2
    assert option in capsys.readouterr().err


def test_cli_missing_file_as_a_module_exits_2_without_traceback(tmp_path):
    completed = subprocess.run(
        [sys.executable, "-m", "gpubench.compare", "nope.json", "also_nope.json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 2
    assert "argument A 'nope.json'" in completed.stderr and "Traceback" not in completed.stderr
