"""The recommendation: plan, time estimate and its prediction bound, the decision, memory budget, actions."""

import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from report_factory import batch_search, cpu_hardware, gpu_hardware, model_section, noisy_epochs_ms, report
from scipy.signal import lfilter

from gpubench.decision import rule
from gpubench.decision.config import DecisionConfig, TrainingPlanConfig
from gpubench.decision.estimate import (
    TimeEstimate,
    TotalTime,
    checkpoint_interval_hours,
    combine_estimates,
    drift_ms_per_epoch,
    estimate_training_time,
    plan_samples,
    total_time_margin_ms,
)
from gpubench.decision.memory_budget import headroom_status, memory_budget
from gpubench.decision.recommendation import build_recommendation
from gpubench.decision.rule import MIN_DECISION_EPOCHS, classify
from gpubench.errors import ConfigError
from gpubench.hardware.catalog import load_catalog
from gpubench.results import (
    CLOUD_GPU_RECOMMENDED,
    DECISION_BASES,
    GRAY_ZONE,
    LOCAL_GPU_VIABLE,
    MemoryProfile,
    MemorySplit,
    MissingModel,
    ModelResult,
    Recommendation,
    RunReport,
    cheapest_rental,
)
from gpubench.stats import decision_interval
from gpubench.stats.intervals import MIN_BATCH_EPOCHS, MIN_EPOCHS

CATALOG = load_catalog()
#: ``python -m gpubench experiment=quick tracking.enabled=false`` on the CPU, written by main at 1092cdc.
CPU_REPORT = Path(__file__).parent / "fixtures" / "report_main_1092cdc_cpu_quick.json"
# Both RL models consume 800 environment steps per benchmark epoch, so the default 10M-step plan is 12,500 epochs
# each and the pair's time is 25,000 x the mean epoch time plus their one-off costs.
PLANNED_EPOCHS = 12_500
ONE_OFF_SECONDS = 2.0 + (1500.0 + 1100.0) / 1e3  # calibration + the two warmup epochs, per model


def dqn(mean_ms: float, **kwargs) -> ModelResult:
    epochs = kwargs.pop("epochs", None) or noisy_epochs_ms(mean_ms, seed=1)
    return model_section(epochs, steps_per_epoch=100, samples_per_step=8, sample_unit="env_step", **kwargs)


def ppo(mean_ms: float, **kwargs) -> ModelResult:
    epochs = kwargs.pop("epochs", None) or noisy_epochs_ms(mean_ms, seed=2)
    return model_section(epochs, steps_per_epoch=50, samples_per_step=16, sample_unit="env_step", **kwargs)


def tft(mean_ms: float, **kwargs) -> ModelResult:
    return model_section(
        noisy_epochs_ms(mean_ms, seed=3), steps_per_epoch=20, samples_per_step=64, sample_unit="window", **kwargs
    )


# --------------------------------------------------------------------------------------------------- the plan


def test_default_plan_is_the_seed_dataset_and_cleanrl_budgets():
    plan = TrainingPlanConfig()
    assert plan.windows_per_pass == 360 * 390
    assert plan_samples("tft", "window", plan) == (
        7_020_000.0,
        "360 days x 390 bars x 1 symbol(s) x 50 passes = 7,020,000 windows",
    )
    assert plan_samples("dqn", "env_step", plan)[0] == 10_000_000.0
    assert plan_samples("ppo", "env_step", plan)[0] == 10_000_000.0


def test_a_model_without_a_plan_names_the_key_to_set():
    with pytest.raises(ValueError, match=r"decision\.plan\.passes\.custom"):
        plan_samples("custom", "window", TrainingPlanConfig())


@pytest.mark.parametrize(
    ("build", "key"),
    [
        (lambda: DecisionConfig(electricity_usd_per_kwh=-0.1), "`decision.electricity_usd_per_kwh`"),
        (lambda: DecisionConfig(memory_budget_mb={"tft": 0.0}), "`decision.memory_budget_mb.tft`"),
        (lambda: TrainingPlanConfig(passes={"tft": 0}), "`decision.plan.passes.tft`"),
        (lambda: TrainingPlanConfig(symbols=0), "`decision.plan.symbols`"),
        (lambda: DecisionConfig(assumed_matmul_efficiency=1.5), "`decision.assumed_matmul_efficiency`"),
        (lambda: DecisionConfig(trainings_per_month=0), "`decision.trainings_per_month`"),
    ],
)
def test_bad_decision_config_names_the_key(build, key):
    with pytest.raises(ConfigError) as error:
        build()
    assert key in str(error.value)


def test_plan_is_overridable_from_the_command_line():
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from gpubench.conf import CONF_DIR
    from gpubench.config import register_configs

    register_configs()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
        cfg = compose(
            "config",
            overrides=[
                "decision.plan.passes.tft=20",
                "decision.plan.env_steps.ppo=5e7",
                "decision.local_hardware_cost_usd=1500",
                "output=r.json",
            ],
        )
    decision = OmegaConf.to_object(cfg).decision
    assert decision.plan.passes == {"mlp": 50, "tft": 20, "mamba2": 50}
    assert decision.plan.env_steps == {"dqn": 1e7, "ppo": 5e7}
    assert decision.local_hardware_cost_usd == 1500.0
    assert decision.cloud_card == "h100"


# --------------------------------------------------------------------------------------------------- the estimate


def test_total_time_margin_by_hand():
    # h = 2 ms over n = 10 epochs, N = 90 future epochs: 2 * sqrt(90 * 100).
    assert total_time_margin_ms(2.0, 10, 90.0) == pytest.approx(2.0 * math.sqrt(9000.0))
    # Far more future epochs than measured ones: the margin tends to N * h (the mean's uncertainty dominates).
    assert total_time_margin_ms(2.0, 10, 1e6) / (1e6 * 2.0) == pytest.approx(1.0, rel=1e-5)


def test_time_estimate_by_hand():
    epochs = [1010.0, 990.0, 1005.0, 995.0, 1000.0]
    section = dqn(1000.0, epochs=epochs)
    estimate = estimate_training_time("dqn", section, TrainingPlanConfig())
    lo_ms, hi_ms = section.statistics.decision_interval_ms
    h_ms = (hi_ms - lo_ms) / 2
    assert estimate.planned_epochs == PLANNED_EPOCHS
    assert estimate.one_off_seconds == pytest.approx(ONE_OFF_SECONDS)
    assert estimate.hours == pytest.approx((PLANNED_EPOCHS * 1000.0 / 1e3 + ONE_OFF_SECONDS) / 3600)
    margin_s = h_ms * math.sqrt(PLANNED_EPOCHS * (PLANNED_EPOCHS + 5)) / 1e3
    assert estimate.statistical_margin_seconds() == pytest.approx(margin_s)
    # No floor: the bounds are the measured margin either side.
    assert estimate.upper_hours == pytest.approx(estimate.hours + margin_s / 3600)
    assert estimate.lower_hours == pytest.approx(estimate.hours - margin_s / 3600)
    assert estimate.samples_per_second == pytest.approx(800.0)
    # Throughput is computed in one place: the estimate's figure is the model result's.
    assert estimate.samples_per_second == section.samples_per_second.mean


def test_an_interval_cut_at_zero_keeps_its_full_half_width_in_the_estimate():
    # A ramp of 10: the interval (batch means of 5, 1.5 degrees of freedom) is 5.5 ± h with h ≈ 10.3 > 5.5 (by hand
    # in test_stats), reported as [0, 5.5 + h]; the margin must use h itself, not half the cut interval.
    epochs = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0]
    section = dqn(5.5, epochs=epochs)
    lo_ms, hi_ms = decision_interval(epochs, 0.95)
    assert section.statistics.decision_interval_ms == (0.0, pytest.approx(hi_ms)) and lo_ms == 0.0
    estimate = estimate_training_time("dqn", section, TrainingPlanConfig())
    assert estimate.halfwidth_ms == pytest.approx(hi_ms - 5.5) and estimate.halfwidth_ms > 5.5


def _model_margin_s(estimate: TimeEstimate, epochs: int | None = None) -> float:
    """A model's margin (s) by hand: h sqrt(n / n') sqrt(N (N + n')) plus the flagged drift."""
    n = estimate.measured_epochs if epochs is None else epochs
    halfwidth_ms = estimate.halfwidth_ms * math.sqrt(estimate.measured_epochs / n)
    measured_s = halfwidth_ms * math.sqrt(estimate.planned_epochs * (estimate.planned_epochs + n)) / 1e3
    drift_s = estimate.drift_ms_per_epoch * estimate.planned_epochs / 1e3 if estimate.drift_flags else 0.0
    return measured_s + drift_s


def test_margins_of_several_models_add_not_in_quadrature():
    # Measured one after another on one device, the models' errors can share a cause: the margins add.
    plan = TrainingPlanConfig()
    first = estimate_training_time("dqn", dqn(1000.0), plan)
    # Margins of a similar size, where adding them differs most from the quadrature sum.
    second = estimate_training_time("ppo", ppo(2000.0, epochs=noisy_epochs_ms(2000.0, rel_sd=0.01, seed=9)), plan)
    total = combine_estimates([first, second])
    assert total.hours == pytest.approx(first.hours + second.hours)
    assert first.margin_seconds == pytest.approx(_model_margin_s(first))
    assert second.margin_seconds == pytest.approx(_model_margin_s(second))
    assert total.upper_hours - total.hours == pytest.approx((first.margin_seconds + second.margin_seconds) / 3600)
    assert total.upper_hours == pytest.approx(first.upper_hours + second.upper_hours)
    assert total.hours - total.lower_hours == pytest.approx(total.upper_hours - total.hours)
    quadrature_h = math.hypot(first.margin_seconds, second.margin_seconds) / 3600
    assert total.upper_hours - total.hours > quadrature_h * 1.2


def test_a_tiny_measured_spread_gives_a_tight_bound_with_no_floor_under_it():
    # Epochs 0.1% apart: the margin is what was measured, about 0.1% of the time (a 12% floor made it 12% before).
    section = dqn(1000.0, epochs=noisy_epochs_ms(1000.0, rel_sd=0.001))
    estimate = estimate_training_time("dqn", section, TrainingPlanConfig())
    assert estimate.margin_seconds == pytest.approx(estimate.statistical_margin_seconds())
    assert estimate.margin_seconds < 0.005 * estimate.epochs_seconds
    recommendation = build_recommendation(
        report({"dqn": section, "ppo": ppo(1000.0)}), DecisionConfig(critical_models=["dqn", "ppo"]), CATALOG
    )
    assert recommendation.per_model["dqn"].relative_margin_floor_applied is None
    assert recommendation.per_model["dqn"].estimated_hours_upper == pytest.approx(
        (PLANNED_EPOCHS * 1000.0 / 1e3 + ONE_OFF_SECONDS + estimate.margin_seconds) / 3600
    )


def test_the_lower_bound_never_falls_below_the_one_off_costs():
    # Epochs jumping twenty-fold: the margin exceeds the epochs' time, so the lower bound is the calibration and
    # warmup alone.
    section = dqn(0, epochs=[100.0] * 5 + [2000.0] * 5)
    estimate = estimate_training_time("dqn", section, TrainingPlanConfig())
    assert estimate.margin_seconds > estimate.epochs_seconds
    assert estimate.lower_hours == pytest.approx(ONE_OFF_SECONDS / 3600)
    ppo_estimate = estimate_training_time("ppo", ppo(1000.0), TrainingPlanConfig())
    total = combine_estimates([estimate, ppo_estimate])
    ppo_lower_s = PLANNED_EPOCHS * 1000.0 / 1e3 - ppo_estimate.lower_margin_seconds + ONE_OFF_SECONDS
    assert total.lower_hours == pytest.approx((ONE_OFF_SECONDS + ppo_lower_s) / 3600)


def test_drift_widens_the_margin_by_the_drift_carried_to_the_plan():
    # A steady 1% climb per epoch over 12 epochs: the drift test flags it (slope 10 ms/epoch, 110 ms over the run).
    # The first third (4 epochs) averages 1015 ms, the last 1095 ms: 80 ms a planned epoch, 12,500 x 80 ms = 1,000 s
    # more margin.
    epochs = [1000.0 + 10.0 * i for i in range(12)]
    section = dqn(0, epochs=epochs)
    assert section.statistics.drift_detected
    estimate = estimate_training_time("dqn", section, TrainingPlanConfig())
    assert drift_ms_per_epoch(epochs) == pytest.approx(80.0)
    assert estimate.drift_margin_seconds == pytest.approx(1000.0)
    assert estimate.margin_seconds == pytest.approx(estimate.statistical_margin_seconds() + 1000.0)
    assert estimate.margin_seconds == pytest.approx(_model_margin_s(estimate))
    assert estimate.drift_flags == (
        f"epoch times drift (slope +10 ms/epoch, +110 ms over the run, p = {section.statistics.drift_p_value:.2g})",
    )
    recommendation = build_recommendation(
        report({"dqn": section, "ppo": ppo(1000.0)}), DecisionConfig(critical_models=["dqn", "ppo"]), CATALOG
    )
    assert recommendation.per_model["dqn"].drift_margin_hours == pytest.approx(1000.0 / 3600)
    assert recommendation.per_model["ppo"].drift_margin_hours is None
    assert "16.7 min for dqn's epoch times drift" in recommendation.reasoning
    assert any(
        action.startswith("dqn: the measured epoch times drift") for action in recommendation.recommended_actions
    )


def _ar1_coverage(n: int, future: int, rho: float, reps: int, seed: int, level: float = 0.95) -> tuple[float, float]:
    """Fraction of seeded AR(1) runs whose next ``future`` epochs total at most the prediction bound, and the same
    for the naive bound N x the interval's upper end. The future epochs continue the measured series."""
    rng = np.random.default_rng(seed)
    shocks = rng.standard_normal((reps, n + future)) * math.sqrt(1 - rho**2)
    shocks[:, 0] = rng.standard_normal(reps)  # start in the stationary distribution
    series_ms = 1000.0 + 50.0 * lfilter([1.0], [1.0, -rho], shocks, axis=1)
    covered = naive = 0
    for row in series_ms:
        measured, total_ms = row[:n], row[n:].sum()
        _, hi_ms = decision_interval(measured, level)
        upper_ms = future * measured.mean() + total_time_margin_ms(hi_ms - measured.mean(), n, future)
        covered += total_ms <= upper_ms
        naive += total_ms <= future * hi_ms
    return covered / reps, naive / reps


@pytest.mark.parametrize(
    ("n", "future", "rho", "tolerance"),
    [(30, 5, 0.0, 0.015), (30, 30, 0.5, 0.03), (10, 1000, 0.5, 0.03)],
    ids=["independent", "correlated", "ten-epochs-long-plan"],
)
def test_prediction_bound_covers_near_nominal_on_ar1_epochs(n, future, rho, tolerance):
    coverage, _ = _ar1_coverage(n, future, rho, reps=2000, seed=11)
    # A 95% interval's upper end is a one-sided 97.5% bound; 2000 runs give a standard error of 0.35 points. The
    # decision interval is conservative where it has few batches (at n = 10: batches of 5, 1.5 degrees of freedom,
    # about 98.6% one-sided here), and for N >> n the bound inherits that.
    assert coverage == pytest.approx(0.975, abs=tolerance)


def test_naive_bound_undercovers_when_few_epochs_remain():
    coverage, naive = _ar1_coverage(30, 5, 0.0, reps=2000, seed=12)
    assert coverage > 0.96
    assert naive < 0.88  # N x the mean's upper end ignores the variability of the future epochs themselves


# --------------------------------------------------------------------------------------------------- the decision


@pytest.mark.parametrize(
    ("mean_ms", "expected", "basis"),
    [
        (1000.0, LOCAL_GPU_VIABLE, "upper_below_local"),
        (4000.0, GRAY_ZONE, "estimate_in_gray_band"),
        (8000.0, CLOUD_GPU_RECOMMENDED, "lower_above_cloud"),
    ],
)
def test_the_seed_decisions_from_measured_epochs(mean_ms, expected, basis):
    recommendation = build_recommendation(
        report({"dqn": dqn(mean_ms), "ppo": ppo(mean_ms), "tft": tft(500.0)}),
        DecisionConfig(critical_models=["dqn", "ppo"]),
        CATALOG,
    )
    hours = (2 * PLANNED_EPOCHS * mean_ms / 1e3 + 2 * ONE_OFF_SECONDS) / 3600
    # Epochs 2% apart: the margins are the measured ones, and they add.
    plan = TrainingPlanConfig()
    margin_hours = (
        sum(
            estimate_training_time(name, section, plan).margin_seconds
            for name, section in (("dqn", dqn(mean_ms)), ("ppo", ppo(mean_ms)))
        )
        / 3600
    )
    assert recommendation.decision == expected
    assert recommendation.decision_basis == basis
    assert recommendation.epochs_to_settle is None
    assert recommendation.partial is False
    assert recommendation.decided_on == ["dqn", "ppo"]
    assert recommendation.estimated_full_training_hours == pytest.approx(hours)
    assert recommendation.estimated_full_training_days == pytest.approx(hours / 24)
    assert recommendation.estimated_full_training_hours_upper == pytest.approx(hours + margin_hours)
    assert recommendation.estimated_full_training_hours_lower == pytest.approx(hours - margin_hours)
    assert f"{recommendation.estimated_full_training_hours_upper:.1f} h" in recommendation.reasoning
    assert expected in recommendation.reasoning
    # tft was measured but is not critical: it is estimated, not decided on.
    assert recommendation.per_model["tft"].decided_on is False


def test_an_imprecise_estimate_is_not_cloud():
    # The quick run: an estimate of 20.0 h whose upper bound is far over 48 h was CLOUD under the old rule
    # (the upper bound alone). ppo's ten epochs swing between 0.48 and 6.48 s (mean 2.88 s, no drift: 3 low, 4 high,
    # 3 low): batch means of 5 sit 0, 1.2, 2.4, 2.4, 1.2, 0 s above the mean, σ̂² = 50/30 · 14.4 s², h = t(1.5) ·
    # 1.55 s = 9.3 s, so ppo's margin alone is about 12,500 × 9.3 s = 32 h and the lower bound is under 24 h too.
    models = {"dqn": dqn(2880.0), "ppo": ppo(0, epochs=[480.0] * 3 + [6480.0] * 4 + [480.0] * 3)}
    recommendation = build_recommendation(report(models), DecisionConfig(critical_models=["dqn", "ppo"]), CATALOG)
    assert recommendation.estimated_full_training_hours == pytest.approx((25_000 * 2.88 + 2 * ONE_OFF_SECONDS) / 3600)
    assert recommendation.estimated_full_training_hours_upper > 48
    assert recommendation.estimated_full_training_hours_lower < 24
    assert recommendation.decision == GRAY_ZONE
    assert recommendation.decision_basis == "interval_straddles_threshold"
    assert "The estimate is under the 24 h local limit but its upper bound is not" in recommendation.reasoning


def test_an_interval_straddling_a_threshold_says_how_many_epochs_would_settle_it():
    # 15% scatter, 2.9 s epochs: the estimate (20.1 h) is under the 24 h limit, its upper bound (24.7 h) is not.
    models = {
        "dqn": dqn(0, epochs=noisy_epochs_ms(2900.0, rel_sd=0.15, seed=1)),
        "ppo": ppo(0, epochs=noisy_epochs_ms(2900.0, rel_sd=0.15, seed=2)),
    }
    recommendation = build_recommendation(report(models), DecisionConfig(critical_models=["dqn", "ppo"]), CATALOG)
    assert recommendation.estimated_full_training_hours < 24 <= recommendation.estimated_full_training_hours_upper
    assert recommendation.decision == GRAY_ZONE
    assert recommendation.decision_basis == "interval_straddles_threshold"
    settle = recommendation.epochs_to_settle
    assert set(settle) == {"dqn", "ppo"} and settle["dqn"] == settle["ppo"]
    epochs = settle["dqn"]
    assert epochs > 10
    # By hand: at that many epochs (same long-run variance, same quantile) the upper bound is under 24 h, one
    # fewer and it is not.
    estimates = [estimate_training_time(name, models[name], TrainingPlanConfig()) for name in ("dqn", "ppo")]
    hours = recommendation.estimated_full_training_hours

    def upper_hours(n: int) -> float:
        return hours + sum(_model_margin_s(e, n) for e in estimates) / 3600

    assert upper_hours(epochs) < 24 <= upper_hours(epochs - 1)
    assert f"Measuring {epochs} epochs per critical model (epochs={epochs}) would settle it" in recommendation.reasoning
    assert any(f"python -m gpubench epochs={epochs}" in action for action in recommendation.recommended_actions)


def test_an_estimate_near_a_threshold_settles_with_the_epochs_the_rule_names():
    # 23.4 h with 2% and 5% scatter: the upper bound straddles 24 h. With no floor under the margin, more epochs
    # narrow it, and at the count the rule names the projected upper bound is under 24 h (one fewer is not).
    models = {"dqn": dqn(3300.0), "ppo": ppo(3300.0, epochs=noisy_epochs_ms(3300.0, rel_sd=0.05, seed=2))}
    decision = DecisionConfig(critical_models=["dqn", "ppo"])
    recommendation = build_recommendation(report(models), decision, CATALOG)
    assert recommendation.decision_basis == "interval_straddles_threshold"
    counts = recommendation.epochs_to_settle
    assert counts is not None and all(isinstance(count, int) for count in counts.values())
    estimates = [estimate_training_time(name, models[name], TrainingPlanConfig()) for name in ("dqn", "ppo")]
    assert combine_estimates(estimates, measured_epochs=counts).upper_hours < 24
    fewer = {name: max(10, count - 1) for name, count in counts.items()}
    assert combine_estimates(estimates, measured_epochs=fewer).upper_hours >= 24


@pytest.mark.parametrize(
    ("hours", "lower", "upper", "expected", "basis"),
    [
        (20.0, 19.0, 23.99, LOCAL_GPU_VIABLE, "upper_below_local"),
        (20.0, -9.0, 49.2, GRAY_ZONE, "interval_straddles_threshold"),
        (23.0, 22.0, 24.0, GRAY_ZONE, "interval_straddles_threshold"),
        (24.0, 23.0, 25.0, GRAY_ZONE, "estimate_in_gray_band"),
        (48.0, 47.0, 49.0, GRAY_ZONE, "estimate_in_gray_band"),
        (49.0, 48.0, 50.0, GRAY_ZONE, "interval_straddles_threshold"),
        (49.0, 48.01, 50.0, CLOUD_GPU_RECOMMENDED, "lower_above_cloud"),
    ],
)
def test_thresholds_include_the_gray_zone_bounds(hours, lower, upper, expected, basis):
    # The quick run: a 20 h estimate with a 49.2 h upper bound was CLOUD; its lower bound is under 24 h.
    assert classify(
        TotalTime(hours=hours, lower_hours=lower, upper_hours=upper), DecisionConfig(critical_models=["dqn", "ppo"])
    ) == (
        expected,
        basis,
    )


def test_every_basis_the_rule_gives_is_a_schema_value():
    answers = {LOCAL_GPU_VIABLE, GRAY_ZONE, CLOUD_GPU_RECOMMENDED}
    # Every upper-case string of the rule's module is a basis, but for the rule in words (DECISION_METHOD).
    constants = {getattr(rule, name) for name in dir(rule) if name.isupper() and name != "DECISION_METHOD"}
    bases = {value for value in constants if isinstance(value, str) and value not in answers}
    assert bases == set(DECISION_BASES)


def test_a_subset_of_the_critical_models_gives_no_decision_unless_it_proves_cloud():
    models = {"dqn": dqn(1000.0), "ppo": ppo(1000.0, status="failed")}
    recommendation = build_recommendation(report(models), DecisionConfig(critical_models=["dqn", "ppo"]), CATALOG)
    assert recommendation.partial is True
    assert recommendation.decided_on == ["dqn"]
    assert recommendation.missing_critical_models == [
        MissingModel(model="ppo", status="failed", reason="status failed: RuntimeError: boom")
    ]
    dqn_hours = (PLANNED_EPOCHS + ONE_OFF_SECONDS) / 3600
    assert recommendation.estimated_full_training_hours == pytest.approx(dqn_hours)
    # dqn alone (3.5 h, upper 3.7 h) would have been LOCAL: a subset only bounds the total from below.
    assert recommendation.decision is None
    assert recommendation.decision_basis == "partial_measurement"
    assert "No decision: critical ppo (status failed: RuntimeError: boom) not measured" in recommendation.reasoning
    assert "is not over the 48 h cloud threshold" in recommendation.reasoning
    assert any("python -m gpubench model=ppo" in action for action in recommendation.recommended_actions)
    assert not any(
        action.startswith(("Train locally", "Rent", "Consider")) for action in recommendation.recommended_actions
    )


def test_a_subset_whose_lower_bound_is_over_the_cloud_threshold_decides_cloud():
    # dqn alone: 12,500 epochs of 16 s = 55.6 h, its lower bound over 48 h whatever ppo takes.
    section = dqn(16_000.0)
    recommendation = build_recommendation(
        report({"dqn": section}), DecisionConfig(critical_models=["dqn", "ppo"]), CATALOG
    )
    assert recommendation.partial is True
    assert recommendation.decision == CLOUD_GPU_RECOMMENDED
    assert recommendation.decision_basis == "lower_above_cloud"
    estimate = estimate_training_time("dqn", section, TrainingPlanConfig())
    lower_s = PLANNED_EPOCHS * 16.0 - estimate.lower_margin_seconds + ONE_OFF_SECONDS
    assert recommendation.estimated_full_training_hours_lower == pytest.approx(lower_s / 3600)
    assert lower_s / 3600 > 48
    assert f"the lower bound of dqn alone, {lower_s / 3600:.1f} h, is over the 48 h cloud" in recommendation.reasoning


@pytest.mark.parametrize("measured", [{"dqn": dqn(1000.0)}, {}], ids=["with-dqn", "alone"])
def test_a_critical_model_out_of_memory_decides_cloud_even_from_a_subset(measured):
    models = {**measured, "ppo": ppo(1000.0, status="oom")}
    recommendation = build_recommendation(report(models), DecisionConfig(critical_models=["dqn", "ppo"]), CATALOG)
    assert recommendation.decision == CLOUD_GPU_RECOMMENDED
    assert recommendation.decision_basis == "critical_model_cannot_run"
    assert "Critical ppo (status oom: RuntimeError: boom) cannot run on the local card" in recommendation.reasoning
    assert any(action.startswith("ppo does not fit on") for action in recommendation.recommended_actions)
    assert (recommendation.estimated_full_training_hours is None) == (not measured)
    # The projected cloud time covers what was measured, and says so.
    renting = [action for action in recommendation.recommended_actions if action.startswith("Rent h100")]
    assert [" for dqn alone, $" in action for action in renting] == ([True] if measured else [])


def test_a_decision_needs_the_decision_intervals_minimum_of_epochs():
    # Two batches of 5 (1.5 degrees of freedom); "no decision from fewer than 5 measured epochs" holds.
    assert MIN_DECISION_EPOCHS == MIN_EPOCHS == 2 * MIN_BATCH_EPOCHS == 10


@pytest.mark.parametrize("epochs", [1, MIN_DECISION_EPOCHS - 1])
def test_fewer_than_the_minimum_of_measured_epochs_give_no_decision(epochs):
    models = {"dqn": dqn(0, epochs=noisy_epochs_ms(1000.0, n=epochs, seed=1)), "ppo": ppo(1000.0)}
    recommendation = build_recommendation(report(models), DecisionConfig(critical_models=["dqn", "ppo"]), CATALOG)
    assert recommendation.decision is None
    assert recommendation.decision_basis == "too_few_epochs"
    plural = "s" if epochs > 1 else ""
    assert (
        f"No decision: dqn had {epochs} measured epoch{plural}, fewer than the {MIN_DECISION_EPOCHS} a decision needs"
        in recommendation.reasoning
    )
    assert any(
        f"Measure at least {MIN_DECISION_EPOCHS} epochs" in action for action in recommendation.recommended_actions
    )


def test_the_minimum_of_measured_epochs_decides():
    # Ten epochs give the interval 1.5 degrees of freedom (t = 6.0): steady epochs bound the total under 24 h.
    epochs = noisy_epochs_ms(1000.0, n=MIN_DECISION_EPOCHS, rel_sd=0.002, seed=1)
    models = {"dqn": dqn(0, epochs=epochs), "ppo": ppo(1000.0)}
    assert (
        build_recommendation(report(models), DecisionConfig(critical_models=["dqn", "ppo"]), CATALOG).decision
        == LOCAL_GPU_VIABLE
    )


def test_throttling_that_alone_changes_the_answer_is_the_basis():
    # dqn's last third of epochs averages 283 ms more than its first (3 of them throttled): 12,500 x 283 ms = 59 min
    # more margin, which lifts the upper bound from 23.6 h over the 24 h limit.
    epochs = [2700.0, 3000.0, 2800.0, 3300.0, 2900.0, 3200.0, 3100.0, 3000.0, 3400.0, 2950.0]
    models = {"dqn": dqn(0, epochs=epochs, throttled_epochs=3), "ppo": ppo(3200.0)}
    assert not models["dqn"].statistics.drift_detected  # the throttled epochs alone widen the margin
    recommendation = build_recommendation(report(models), DecisionConfig(critical_models=["dqn", "ppo"]), CATALOG)
    estimates = [estimate_training_time(name, models[name], TrainingPlanConfig()) for name in ("dqn", "ppo")]
    assert estimates[0].drift_margin_seconds == pytest.approx(PLANNED_EPOCHS * (9350.0 - 8500.0) / 3 / 1e3)
    assert combine_estimates(estimates, widened=False).upper_hours < 24 <= combine_estimates(estimates).upper_hours
    assert recommendation.decision == GRAY_ZONE
    assert recommendation.decision_basis == "drift_or_throttling"
    assert "dqn: 3 of 10 measured epochs throttled, its margin widened by 59.0 min" in recommendation.reasoning
    assert "Without that widening the answer would be LOCAL_GPU_VIABLE; with it, GRAY_ZONE." in recommendation.reasoning


def test_critical_model_not_run_is_reported_as_not_run():
    recommendation = build_recommendation(
        report({"dqn": dqn(1000.0)}), DecisionConfig(critical_models=["dqn", "ppo"]), CATALOG
    )
    assert recommendation.missing_critical_models == [MissingModel(model="ppo", status="not run", reason="not run")]
    assert recommendation.partial is True
    assert recommendation.decision is None


def test_without_critical_models_there_is_no_decision_but_every_measured_model_is_estimated():
    mamba2 = model_section(noisy_epochs_ms(700.0), steps_per_epoch=10, samples_per_step=32, sample_unit="window")
    recommendation = build_recommendation(
        report({"tft": tft(500.0), "mamba2": mamba2}), DecisionConfig(critical_models=["dqn", "ppo"]), CATALOG
    )
    assert recommendation.partial is True
    assert recommendation.decided_on == ["tft", "mamba2"]
    # 7,020,000 windows: tft 1280 per epoch of 0.5 s, mamba2 320 per epoch of 0.7 s.
    expected_s = 7_020_000 / 1280 * 0.5 + 7_020_000 / 320 * 0.7 + 2 * ONE_OFF_SECONDS
    assert recommendation.estimated_full_training_hours == pytest.approx(expected_s / 3600)
    # Neither is critical: their time does not bound dqn + ppo's (the model=mlp deciding LOCAL on mlp).
    assert recommendation.decision is None
    assert recommendation.decision_basis == "partial_measurement"
    assert "critical dqn (not run), ppo (not run) not measured" in recommendation.reasoning
    assert any("python -m gpubench -m model=dqn,ppo" in action for action in recommendation.recommended_actions)


def test_an_empty_critical_list_decides_on_every_model_run():
    recommendation = build_recommendation(
        report({"dqn": dqn(1000.0), "tft": tft(500.0)}), DecisionConfig(critical_models=[]), CATALOG
    )
    assert recommendation.critical_models == ["dqn", "tft"]
    assert recommendation.decision == LOCAL_GPU_VIABLE
    assert recommendation.partial is False


def test_nothing_measured_gives_no_decision():
    models = {"dqn": dqn(1000.0, status="diverged"), "ppo": ppo(1000.0, status="failed")}
    recommendation = build_recommendation(report(models), DecisionConfig(critical_models=["dqn", "ppo"]), CATALOG)
    assert recommendation.decision is None
    assert recommendation.decision_basis == "nothing_measured"
    assert recommendation.estimated_full_training_hours is None
    assert recommendation.estimated_full_training_hours_lower is None
    assert "No model was measured successfully" in recommendation.reasoning


def test_on_the_cpu_the_reasoning_leads_with_the_cpu():
    recommendation = build_recommendation(
        report({"dqn": dqn(1000.0), "ppo": ppo(1000.0)}, hardware=cpu_hardware()),
        DecisionConfig(critical_models=["dqn", "ppo"]),
        CATALOG,
    )
    assert recommendation.reasoning.startswith("These are CPU times, measured on the CPU (AMD EPYC) without a GPU")
    assert recommendation.decision == LOCAL_GPU_VIABLE
    assert recommendation.cost_analysis.local_gpu_monthly_cost_usd is None
    assert {row.status for row in recommendation.memory_budget} == {"not measured"}


def test_a_gpu_run_reasoning_names_the_device_first():
    recommendation = build_recommendation(
        report({"dqn": dqn(1000.0), "ppo": ppo(1000.0)}), DecisionConfig(critical_models=["dqn", "ppo"]), CATALOG
    )
    assert recommendation.reasoning.startswith("On NVIDIA GeForce RTX 3050 Ti Laptop GPU, training dqn + ppo")


def test_a_new_recommendation_round_trips_through_json():
    models = {
        "dqn": dqn(0, epochs=noisy_epochs_ms(3200.0, rel_sd=0.15, seed=1)),
        "ppo": ppo(0, epochs=noisy_epochs_ms(3200.0, rel_sd=0.15, seed=2)),
    }
    recommendation = build_recommendation(report(models), DecisionConfig(critical_models=["dqn", "ppo"]), CATALOG)
    written = json.loads(json.dumps(recommendation.to_dict()))
    assert written["decision_basis"] == "interval_straddles_threshold"
    assert Recommendation.from_dict(written) == recommendation


# --------------------------------------------------------------------------------------------------- memory


def with_headroom(result: ModelResult, headroom: float) -> ModelResult:
    """``result`` with a memory split recording the ``batch.headroom`` its batch search ran under."""
    split = MemorySplit(parameters_mb=0.0, gradients_mb=0.0, optimizer_state_mb=0.0, headroom=headroom)
    return replace(result, memory_split=split)


@pytest.mark.parametrize(
    ("fraction", "headroom", "status"),
    [
        (0.89, 0.9, "safe"),  # a peak the batch search accepted
        (0.9, 0.9, "safe"),
        (0.9001, 0.9, "marginal"),
        (0.95, 0.9, "marginal"),
        (0.9501, 0.9, "risk"),
        (0.8, 0.8, "safe"),
        (0.85, 0.8, "marginal"),
        (0.9001, 0.8, "risk"),
        (None, 0.9, "not measured"),
        (0.5, None, "no headroom recorded"),
    ],
)
def test_headroom_status_derives_from_the_batch_headroom(fraction, headroom, status):
    assert headroom_status(fraction, headroom) == status


def test_memory_budget_table_on_a_4gb_card():
    models = {
        "dqn": dqn(1000.0, peak_reserved_mb=400.0),
        "ppo": with_headroom(ppo(1000.0, peak_reserved_mb=3600.0), 0.85),
        "tft": tft(500.0, peak_reserved_mb=3900.0),
    }
    rows = {row.model: row for row in memory_budget(report(models), DecisionConfig(critical_models=["dqn", "ppo"]))}
    assert rows["dqn"].status == "safe"  # judged by the run's headroom, 0.85, which ppo's split recorded
    assert rows["dqn"].within_budget is True
    assert rows["dqn"].budget_used_fraction == pytest.approx(400 / 512)
    assert rows["ppo"].fraction_of_card == pytest.approx(3600 / 4096)  # 87.9%
    assert rows["ppo"].status == "marginal"
    assert rows["ppo"].within_budget is False
    assert rows["tft"].status == "risk"  # 95.2%, above (1 + 0.85) / 2
    assert rows["total"].peak_reserved_mb == 7900.0
    assert rows["total"].budget_mb == 512 + 512 + 1024
    assert rows["total"].status == "risk"


def test_a_peak_the_batch_search_accepted_is_safe_and_without_a_headroom_it_is_not_judged():
    accepted = {"dqn": with_headroom(dqn(1000.0, peak_reserved_mb=0.89 * 4096), 0.9)}
    (row, _total) = memory_budget(report(accepted), DecisionConfig(critical_models=["dqn"]))
    assert row.status == "safe"
    unrecorded = {"dqn": dqn(1000.0, peak_reserved_mb=0.89 * 4096)}
    (row, total) = memory_budget(report(unrecorded), DecisionConfig(critical_models=["dqn"]))
    assert row.status == total.status == "no headroom recorded"


def test_a_report_without_a_memory_split_reads_the_headroom_off_its_batch_search():
    # 3,686.4 MB = 0.9 × the 4,096 MB usable: the limit the search ran under gives the headroom back.
    search = batch_search(512, largest_fitting_size=1024, knee_size=256, peak_limit_mb=3686.4)
    rows = memory_budget(
        report(
            {
                "dqn": dqn(1000.0, batch_search=search, peak_reserved_mb=0.89 * 4096),
                "ppo": ppo(1000.0, batch_search=search, peak_reserved_mb=0.93 * 4096),
            }
        ),
        DecisionConfig(critical_models=["dqn", "ppo"]),
    )
    assert [row.status for row in rows] == ["safe", "marginal", "risk"]


# --------------------------------------------------------------------------------------------------- actions


@pytest.mark.parametrize(("upper_hours", "interval"), [(0.1, None), (1.0, 0.25), (30.0, 3.0), (100.0, 4.0)])
def test_checkpoint_interval(upper_hours, interval):
    assert checkpoint_interval_hours(upper_hours) == interval


def test_actions_name_batch_throttling_memory_and_checkpoints():
    search = batch_search(512, largest_fitting_size=1024, knee_size=256, peak_limit_mb=3686.4)
    models = {
        "dqn": with_headroom(dqn(4000.0, batch_search=search, throttled_epochs=3, peak_reserved_mb=3800.0), 0.9),
        "ppo": ppo(4000.0, peak_reserved_mb=300.0),
    }
    actions = build_recommendation(
        report(models), DecisionConfig(critical_models=["dqn", "ppo"]), CATALOG
    ).recommended_actions
    text = "\n".join(actions)
    assert "dqn: train with batch 512 x 1 gradient accumulation step(s) = effective 512" in text
    assert "largest fitting 1024 under 3,686 MB; throughput reaches 90% of its best at 256" in text
    assert "dqn: 3 of 10 measured epochs were throttled (thermal)" in text
    assert "dqn: peak 3,800 MB is 93% of the 4,096 MB card (marginal)" in text
    # Upper bound 28.6 h: a checkpoint every 2.75 h (a tenth, rounded down to a quarter hour); dqn's step is 40 ms,
    # so 247,500 steps.
    assert "Checkpoint every 2.75 h (dqn every 247,500 steps, ppo every 123,750 steps)" in text


def test_unknown_cloud_card_leaves_cloud_cost_unknown_with_a_note():
    recommendation = build_recommendation(
        report({"dqn": dqn(1000.0), "ppo": ppo(1000.0)}), DecisionConfig(cloud_card="tpu_v9"), CATALOG
    )
    cost = recommendation.cost_analysis
    assert cost.cloud_training_hours is None
    assert cost.cloud_speedup_factor is None
    assert any("'tpu_v9' is not a catalog card" in note for note in cost.notes)


def test_cloud_actions_name_the_card_its_cost_and_the_cheapest_alternative():
    # A T4 (efficiency 0.8): dqn all compute (1e12 FLOPs in a 80 ms step), ppo launch-bound (1 MFLOP per step).
    hardware = gpu_hardware("Tesla T4", total_vram_mb=15360.0, achieved_tflops=6.48)
    models = {"dqn": dqn(8000.0, flops_per_step=1e12), "ppo": ppo(8000.0, flops_per_step=1e6)}
    recommendation = build_recommendation(
        report(models, hardware=hardware), DecisionConfig(critical_models=["dqn", "ppo"]), CATALOG
    )
    assert recommendation.decision == CLOUD_GPU_RECOMMENDED
    h100 = next(row for row in recommendation.projection if row.card == "h100")
    text = "\n".join(recommendation.recommended_actions)
    assert f"Rent h100: projected {h100.training_hours:.1f} h" in text
    # Both figures are dated rows of the cost table: the H100's cheapest and the whole table's cheapest.
    rental = cheapest_rental(recommendation.cost_table, "h100")
    kind = "spot" if rental.spot else "on-demand"
    assert f"${rental.usd:,.2f} at {rental.provider} ({kind}, price of {rental.price_date}) per training" in text
    cheapest = cheapest_rental(recommendation.cost_table)
    assert cheapest.gpu != "h100"
    assert f"Cheapest rental that fits this plan: {cheapest.gpu}, " in text
    assert f"${cheapest.usd:,.2f} at {cheapest.provider}" in text
    assert "dqn: compute-bound in fp32; measure bf16 autocast" in text
    # Without measured what-ifs the advice says what to measure and how, never a guessed speed-up.
    assert "decision.what_if=true" in text
    assert "peak is" not in text
    assert "ppo: the step is dominated by kernel launches" in text
    assert "execution.compile=reduce-overhead" in text


def test_a_measured_peak_over_the_headroom_limit_becomes_an_action():
    section = model_section(
        noisy_epochs_ms(1000.0), steps_per_epoch=100, samples_per_step=64, sample_unit="env_step", batch_size=52
    )
    section = replace(
        section,
        memory=MemoryProfile(measured=True, peak_reserved_mb=3138.0, headroom_limit_mb=3078.0, headroom_exceeded=True),
    )
    calm = model_section(noisy_epochs_ms(1000.0), steps_per_epoch=100, samples_per_step=64, sample_unit="env_step")
    recommendation = build_recommendation(
        report({"dqn": calm, "ppo": section}), DecisionConfig(critical_models=["dqn", "ppo"]), load_catalog()
    )
    (action,) = [a for a in recommendation.recommended_actions if "headroom limit" in a]
    assert action.startswith("ppo:") and "3,138 MB" in action and "3,078 MB" in action and "batch 52" in action


# --------------------------------------------------------------------------------------------------- regrouping


def test_the_fixture_report_now_gets_no_decision_with_its_reason():
    # Written by main at 1092cdc with experiment=quick (3 epochs per model), whose decision group is the default
    # one. Main decided LOCAL on it; recomputed from its models, hardware and run, the 3 epochs give no decision.
    written = json.loads(CPU_REPORT.read_text())
    measured = replace(RunReport.from_dict(written), recommendation=None)
    assert measured.run.choices["decision"] == "default"
    recommendation = build_recommendation(measured, DecisionConfig(critical_models=["dqn", "ppo"]), CATALOG)
    assert written["recommendation"]["decision"] == LOCAL_GPU_VIABLE
    assert recommendation.decision is None
    assert recommendation.decision_basis == "too_few_epochs"
    assert recommendation.reasoning.startswith("These are CPU times, measured on the CPU (AMD EPYC)")
    assert f"No decision: dqn had 3 measured epochs, ppo 3, fewer than the {MIN_DECISION_EPOCHS} a decision needs" in (
        recommendation.reasoning
    )
    # The per-model estimates are unchanged, to the last digit; the total's upper bound is now the sum of the
    # margins (4.8 h in quadrature, 5.2 h added).
    for name, estimate in recommendation.per_model.items():
        assert estimate.estimated_hours == written["recommendation"]["per_model"][name]["estimated_hours"]
        assert estimate.estimated_hours_upper == written["recommendation"]["per_model"][name]["estimated_hours_upper"]
        assert estimate.samples_per_second == measured.models[name].samples_per_second.mean
    assert recommendation.estimated_full_training_hours == written["recommendation"]["estimated_full_training_hours"]
    per_model = recommendation.per_model
    assert recommendation.estimated_full_training_hours_upper == pytest.approx(
        per_model["dqn"].estimated_hours_upper + per_model["ppo"].estimated_hours_upper
    )
