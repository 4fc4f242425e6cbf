"""The recommendation: plan, time estimate and its prediction bound, the decision, memory budget, actions."""

import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from report_factory import batch_search, cpu_hardware, gpu_hardware, model_section, noisy_epochs_ms, report
from scipy.signal import lfilter

from gpubench.decision.config import DecisionConfig, TrainingPlanConfig
from gpubench.decision.estimate import (
    checkpoint_interval_hours,
    classify,
    combine_estimates,
    estimate_training_time,
    plan_samples,
    total_time_margin_ms,
)
from gpubench.decision.memory_budget import headroom_status, memory_budget
from gpubench.decision.recommendation import build_recommendation
from gpubench.errors import ConfigError
from gpubench.hardware.catalog import load_catalog
from gpubench.results import (
    CLOUD_GPU_RECOMMENDED,
    GRAY_ZONE,
    LOCAL_GPU_VIABLE,
    MemoryProfile,
    MissingModel,
    ModelResult,
    RunReport,
)
from gpubench.stats.epoch_times import autocorrelation_interval

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
    assert estimate.upper_hours == pytest.approx(estimate.hours + margin_s / 3600)
    assert estimate.samples_per_second == pytest.approx(800.0)
    # Throughput is computed in one place: the estimate's figure is the model result's.
    assert estimate.samples_per_second == section.samples_per_second.mean


def test_an_interval_cut_at_zero_keeps_its_full_half_width_in_the_estimate():
    # A ramp: the ESS-2 interval is 3.5 ± h with h > 3.5, reported as [0, 3.5 + h]; the margin must use h itself,
    # not half the cut interval.
    epochs = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    section = dqn(3.5, epochs=epochs)
    lo_ms, hi_ms, _, _ = autocorrelation_interval(epochs, 0.95)
    assert section.statistics.decision_interval_ms[0] == 0.0 > lo_ms
    estimate = estimate_training_time("dqn", section, TrainingPlanConfig())
    assert estimate.halfwidth_ms == pytest.approx((hi_ms - lo_ms) / 2)


def test_margins_of_several_models_add_in_quadrature():
    plan = TrainingPlanConfig()
    first = estimate_training_time("dqn", dqn(1000.0), plan)
    second = estimate_training_time("ppo", ppo(2000.0, epochs=noisy_epochs_ms(2000.0, rel_sd=0.05, seed=9)), plan)
    hours, upper = combine_estimates([first, second])
    assert hours == pytest.approx(first.hours + second.hours)
    expected_margin_h = math.hypot(first.margin_seconds, second.margin_seconds) / 3600
    assert upper - hours == pytest.approx(expected_margin_h)
    assert upper < first.upper_hours + second.upper_hours


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
        lo_ms, hi_ms, _, _ = autocorrelation_interval(measured, level)
        upper_ms = future * measured.mean() + total_time_margin_ms((hi_ms - lo_ms) / 2, n, future)
        covered += total_ms <= upper_ms
        naive += total_ms <= future * hi_ms
    return covered / reps, naive / reps


@pytest.mark.parametrize(
    ("n", "future", "rho", "tolerance"),
    [(30, 5, 0.0, 0.015), (30, 30, 0.5, 0.03), (10, 1000, 0.5, 0.03)],
    ids=["independent", "batch-means", "effective-sample-size"],
)
def test_prediction_bound_covers_near_nominal_on_ar1_epochs(n, future, rho, tolerance):
    coverage, _ = _ar1_coverage(n, future, rho, reps=2000, seed=11)
    # A 95% interval's upper end is a one-sided 97.5% bound; 2000 runs give a standard error of 0.35 points. With
    # correlated epochs the decision interval itself covers a little less (about 96% one-sided here: batch means
    # of 6 epochs and the effective-sample-size correction at n = 10 both underestimate the variance slightly),
    # and for N >> n the bound inherits that.
    assert coverage == pytest.approx(0.975, abs=tolerance)


def test_naive_bound_undercovers_when_few_epochs_remain():
    coverage, naive = _ar1_coverage(30, 5, 0.0, reps=2000, seed=12)
    assert coverage > 0.96
    assert naive < 0.88  # N x the mean's upper end ignores the variability of the future epochs themselves


# --------------------------------------------------------------------------------------------------- the decision


@pytest.mark.parametrize(
    ("mean_ms", "expected"),
    [(1000.0, LOCAL_GPU_VIABLE), (4000.0, GRAY_ZONE), (8000.0, CLOUD_GPU_RECOMMENDED)],
)
def test_the_seed_decisions_from_measured_epochs(mean_ms, expected):
    recommendation = build_recommendation(
        report({"dqn": dqn(mean_ms), "ppo": ppo(mean_ms), "tft": tft(500.0)}), DecisionConfig(), CATALOG
    )
    hours = (2 * PLANNED_EPOCHS * mean_ms / 1e3 + 2 * ONE_OFF_SECONDS) / 3600
    assert recommendation.decision == expected
    assert recommendation.partial is False
    assert recommendation.decided_on == ["dqn", "ppo"]
    assert recommendation.estimated_full_training_hours == pytest.approx(hours)
    assert recommendation.estimated_full_training_days == pytest.approx(hours / 24)
    assert hours < recommendation.estimated_full_training_hours_upper < 1.03 * hours
    assert f"{recommendation.estimated_full_training_hours_upper:.1f} h" in recommendation.reasoning
    assert expected in recommendation.reasoning
    # tft was measured but is not critical: it is estimated, not decided on.
    assert recommendation.per_model["tft"].decided_on is False


def test_the_upper_bound_decides_not_the_point_estimate():
    # Three noisy epochs: the point estimate is under a day (21.5 h), the bound is not (about 25 h).
    epochs = [2800.0, 3100.0, 3400.0]
    recommendation = build_recommendation(
        report({"dqn": dqn(0, epochs=epochs), "ppo": ppo(0, epochs=epochs)}), DecisionConfig(), CATALOG
    )
    assert recommendation.estimated_full_training_hours < 24 < recommendation.estimated_full_training_hours_upper
    assert recommendation.decision == GRAY_ZONE


@pytest.mark.parametrize(
    ("upper_hours", "expected"),
    [(23.99, LOCAL_GPU_VIABLE), (24.0, GRAY_ZONE), (48.0, GRAY_ZONE), (48.01, CLOUD_GPU_RECOMMENDED)],
)
def test_thresholds_include_the_gray_zone_bounds(upper_hours, expected):
    assert classify(upper_hours, DecisionConfig()) == expected


def test_failed_critical_model_gives_a_partial_decision_on_the_rest():
    models = {"dqn": dqn(1000.0), "ppo": ppo(1000.0, status="failed")}
    recommendation = build_recommendation(report(models), DecisionConfig(), CATALOG)
    assert recommendation.partial is True
    assert recommendation.decided_on == ["dqn"]
    assert recommendation.missing_critical_models == [
        MissingModel(model="ppo", status="failed", reason="status failed: RuntimeError: boom")
    ]
    dqn_hours = (PLANNED_EPOCHS + ONE_OFF_SECONDS) / 3600
    assert recommendation.estimated_full_training_hours == pytest.approx(dqn_hours)
    assert recommendation.decision == LOCAL_GPU_VIABLE
    assert "Partial: critical ppo (status failed" in recommendation.reasoning
    assert any("python -m gpubench model=ppo" in action for action in recommendation.recommended_actions)


def test_critical_model_not_run_is_reported_as_not_run():
    recommendation = build_recommendation(report({"dqn": dqn(1000.0)}), DecisionConfig(), CATALOG)
    assert recommendation.missing_critical_models == [MissingModel(model="ppo", status="not run", reason="not run")]
    assert recommendation.partial is True


def test_without_critical_models_the_decision_uses_every_measured_model():
    mamba2 = model_section(noisy_epochs_ms(700.0), steps_per_epoch=10, samples_per_step=32, sample_unit="window")
    recommendation = build_recommendation(report({"tft": tft(500.0), "mamba2": mamba2}), DecisionConfig(), CATALOG)
    assert recommendation.partial is True
    assert recommendation.decided_on == ["tft", "mamba2"]
    # 7,020,000 windows: tft 1280 per epoch of 0.5 s, mamba2 320 per epoch of 0.7 s.
    expected_s = 7_020_000 / 1280 * 0.5 + 7_020_000 / 320 * 0.7 + 2 * ONE_OFF_SECONDS
    assert recommendation.estimated_full_training_hours == pytest.approx(expected_s / 3600)
    assert "decided on every measured model" in recommendation.reasoning
    assert any("python -m gpubench -m model=dqn,ppo" in action for action in recommendation.recommended_actions)


def test_nothing_measured_gives_no_decision():
    models = {"dqn": dqn(1000.0, status="oom"), "ppo": ppo(1000.0, status="failed")}
    recommendation = build_recommendation(report(models), DecisionConfig(), CATALOG)
    assert recommendation.decision is None
    assert recommendation.estimated_full_training_hours is None
    assert "No model was measured successfully" in recommendation.reasoning


def test_on_the_cpu_the_reasoning_says_cpu_hours():
    recommendation = build_recommendation(
        report({"dqn": dqn(1000.0), "ppo": ppo(1000.0)}, hardware=cpu_hardware()), DecisionConfig(), CATALOG
    )
    assert "Measured on the CPU" in recommendation.reasoning
    assert recommendation.cost_analysis.local_gpu_monthly_cost_usd is None
    assert {row.status for row in recommendation.memory_budget} == {"not measured"}


# --------------------------------------------------------------------------------------------------- memory


@pytest.mark.parametrize(
    ("fraction", "status"),
    [(0.8499, "safe"), (0.85, "marginal"), (0.93, "marginal"), (0.9301, "risk"), (None, "not measured")],
)
def test_headroom_status_boundaries(fraction, status):
    assert headroom_status(fraction) == status


def test_memory_budget_table_on_a_4gb_card():
    models = {
        "dqn": dqn(1000.0, peak_reserved_mb=400.0),
        "ppo": ppo(1000.0, peak_reserved_mb=3600.0),
        "tft": tft(500.0, peak_reserved_mb=3900.0),
    }
    rows = {row.model: row for row in memory_budget(report(models), DecisionConfig())}
    assert rows["dqn"].status == "safe"
    assert rows["dqn"].within_budget is True
    assert rows["dqn"].budget_used_fraction == pytest.approx(400 / 512)
    assert rows["ppo"].fraction_of_card == pytest.approx(3600 / 4096)  # 87.9%
    assert rows["ppo"].status == "marginal"
    assert rows["ppo"].within_budget is False
    assert rows["tft"].status == "risk"  # 95.2%
    assert rows["total"].peak_reserved_mb == 7900.0
    assert rows["total"].budget_mb == 512 + 512 + 1024
    assert rows["total"].status == "risk"


# --------------------------------------------------------------------------------------------------- actions


@pytest.mark.parametrize(("upper_hours", "interval"), [(0.1, None), (1.0, 0.25), (30.0, 3.0), (100.0, 4.0)])
def test_checkpoint_interval(upper_hours, interval):
    assert checkpoint_interval_hours(upper_hours) == interval


def test_actions_name_batch_throttling_memory_and_checkpoints():
    search = batch_search(512, largest_fitting_size=1024, knee_size=256, peak_limit_mb=3686.4)
    models = {
        "dqn": dqn(4000.0, batch_search=search, throttled_epochs=3, peak_reserved_mb=3600.0),
        "ppo": ppo(4000.0, peak_reserved_mb=300.0),
    }
    actions = build_recommendation(report(models), DecisionConfig(), CATALOG).recommended_actions
    text = "\n".join(actions)
    assert "dqn: train with batch 512 x 1 gradient accumulation step(s) = effective 512" in text
    assert "largest fitting 1024 under 3,686 MB; throughput reaches 90% of its best at 256" in text
    assert "dqn: 3 of 10 measured epochs were throttled (thermal)" in text
    assert "dqn: peak 3,600 MB is 88% of the 4,096 MB card (marginal)" in text
    # Upper bound ~28 h: a checkpoint every 2.75 h; dqn's step is 40 ms, so 247,500 steps.
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
    recommendation = build_recommendation(report(models, hardware=hardware), DecisionConfig(), CATALOG)
    assert recommendation.decision == CLOUD_GPU_RECOMMENDED
    h100 = next(row for row in recommendation.projection if row.card == "h100")
    text = "\n".join(recommendation.recommended_actions)
    assert f"Rent h100: projected {h100.training_hours:.1f} h" in text
    assert f"${h100.cost_usd_per_training:,.2f} per training" in text
    priced = [row for row in recommendation.projection if row.cost_usd_per_training is not None]
    cheapest = min(priced, key=lambda row: row.cost_usd_per_training)
    assert cheapest.card != "h100"
    assert f"Cheapest catalog card for this plan: {cheapest.card}" in text
    assert "dqn: compute-bound in fp32; measure bf16 autocast" in text
    assert "t4's bf16 tensor-core peak is 8x its fp32 peak" in text
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
    recommendation = build_recommendation(report({"dqn": calm, "ppo": section}), DecisionConfig(), load_catalog())
    (action,) = [a for a in recommendation.recommended_actions if "headroom limit" in a]
    assert action.startswith("ppo:") and "3,138 MB" in action and "3,078 MB" in action and "batch 52" in action


# --------------------------------------------------------------------------------------------------- regrouping


def test_the_fixture_report_gets_the_recommendation_main_wrote_for_it():
    # Written by main at 1092cdc with experiment=quick, whose decision group is the default one: recomputed from
    # its models, hardware and run, the recommendation is the one written, to the last digit and the last word.
    written = json.loads(CPU_REPORT.read_text())
    measured = replace(RunReport.from_dict(written), recommendation=None)
    assert measured.run.choices["decision"] == "default"
    recommendation = build_recommendation(measured, DecisionConfig(), CATALOG)
    assert json.loads(json.dumps(recommendation.to_dict())) == written["recommendation"]
    for name, estimate in recommendation.per_model.items():
        assert estimate.samples_per_second == measured.models[name].samples_per_second.mean
