"""``statistics.adaptive=decision``: measure until the recommendation is settled, by a two-stage rule.

The rule's arithmetic by hand (the count at which the critical total's interval leaves a threshold), the
measurement loop's handling of a second stage's plan, and one model measured end to end on the CPU.
"""

import dataclasses
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import cpu_model_context, tiny_mlp_config
from report_factory import model_section, noisy_epochs_ms

from gpubench.bench import model_run
from gpubench.bench.model_run import ModelRunContext, WorkloadFacts, run_model
from gpubench.decision.config import DecisionConfig, TrainingPlanConfig
from gpubench.decision.estimate import TotalTime, estimate_training_time
from gpubench.decision.rule import SETTLE_MAX_EPOCHS, epochs_to_settle_decision, interval_settled
from gpubench.measure.config import EpochConfig
from gpubench.measure.epochs import (
    Measurement,
    SecondStagePlan,
    measure_workload,
)
from gpubench.measure.stability import StabilityMonitor
from gpubench.measure.timing import BlockTimer, EpochSizing
from gpubench.stats.config import (
    DECISION_CANNOT_SETTLE,
    DECISION_SETTLED,
    MAX_EPOCHS_REACHED,
    StabilityConfig,
    StatisticsConfig,
)
from gpubench.stats.intervals import MIN_EPOCHS
from gpubench.workload import StepResult, Workload

DECISION = DecisionConfig(critical_models=["dqn", "ppo"])


@pytest.mark.parametrize(
    ("lower", "upper", "settled"),
    [
        (10.0, 23.9, True),  # wholly under the local limit
        (48.1, 60.0, True),  # wholly over the cloud threshold
        (24.0, 48.0, True),  # wholly inside the band, thresholds included
        (23.0, 25.0, False),  # across the local limit
        (47.0, 49.0, False),  # across the cloud threshold
        (20.0, 50.0, False),  # across both
        (10.0, 24.0, False),  # touches the local limit: LOCAL needs the upper bound under it
    ],
)
def test_an_interval_is_settled_when_it_lies_wholly_on_one_side_of_each_threshold(lower, upper, settled):
    total = TotalTime(hours=(lower + upper) / 2, lower_hours=lower, upper_hours=upper)
    assert interval_settled(total, DECISION) is settled


def _rl(epochs_ms: list[float], steps_per_epoch: int, samples_per_step: float):
    return model_section(
        epochs_ms, steps_per_epoch=steps_per_epoch, samples_per_step=samples_per_step, sample_unit="env_step"
    )


def test_the_model_being_measured_grows_to_the_count_that_settles_the_total_and_no_further():
    # dqn measured already (10 epochs, 2% scatter); ppo's first stage scatters 15%: together the estimate (~21 h) is
    # under 24 h and the upper bound over it. Only ppo's count may grow.
    dqn = _rl(noisy_epochs_ms(3000.0, rel_sd=0.02, seed=1), 100, 8)
    ppo = _rl(noisy_epochs_ms(3000.0, rel_sd=0.15, seed=2), 50, 16)
    plan = TrainingPlanConfig()
    estimates = [estimate_training_time(name, section, plan) for name, section in (("dqn", dqn), ("ppo", ppo))]

    def upper_hours(ppo_epochs: int) -> float:
        hours = sum(e.hours for e in estimates)
        margins_s = estimates[0].margin_seconds_at() + estimates[1].margin_seconds_at(ppo_epochs)
        return hours + margins_s / 3600

    assert upper_hours(10) >= 24 > sum(e.hours for e in estimates)
    epochs = epochs_to_settle_decision("ppo", ppo, {"dqn": dqn}, ["dqn", "ppo"], DECISION)
    assert epochs is not None and epochs > 10
    assert upper_hours(epochs) < 24 <= upper_hours(epochs - 1)


def test_a_settled_total_needs_no_more_epochs_than_the_first_stage():
    dqn = _rl(noisy_epochs_ms(300.0, seed=1), 100, 8)  # ~2 h: far under 24 h
    assert epochs_to_settle_decision("dqn", dqn, {}, ["dqn", "ppo"], DECISION) == 10


def test_a_model_outside_the_critical_list_keeps_its_first_stage():
    tft = model_section(
        noisy_epochs_ms(3000.0, rel_sd=0.3), steps_per_epoch=20, samples_per_step=64, sample_unit="window"
    )
    assert epochs_to_settle_decision("tft", tft, {}, ["dqn", "ppo", "tft"], DECISION) == 10


def test_a_critical_model_out_of_memory_has_decided_already():
    oom = dataclasses.replace(_rl(noisy_epochs_ms(3000.0), 100, 8), status="oom")
    ppo = _rl(noisy_epochs_ms(3000.0, rel_sd=0.15, seed=2), 50, 16)
    assert epochs_to_settle_decision("ppo", ppo, {"dqn": oom}, ["dqn", "ppo"], DECISION) == 10


def test_an_estimate_within_a_hair_of_a_threshold_never_settles():
    # 2 x (12,500 epochs of 3.4555 s + 4.6 s one-off) = 23.9991 h: the upper bound must come within 3 s of the
    # estimate, and the future epochs' own variability (h sqrt(n N) as n grows, about 20 s here) never does.
    dqn = _rl(noisy_epochs_ms(3455.5, seed=1), 100, 8)
    ppo = _rl(noisy_epochs_ms(3455.5, seed=2), 50, 16)
    assert epochs_to_settle_decision("ppo", ppo, {"dqn": dqn}, ["dqn", "ppo"], DECISION) is None
    assert SETTLE_MAX_EPOCHS == 100_000


def test_a_model_without_a_plan_cannot_settle_anything():
    mystery = model_section(noisy_epochs_ms(100.0), steps_per_epoch=10, samples_per_step=1, sample_unit="window")
    assert epochs_to_settle_decision("mystery", mystery, {}, ["mystery"], DecisionConfig(critical_models=[])) is None


# ------------------------------------------------------------------------------------------- the measurement loop


class TickWorkload(Workload):
    """Each step advances a fake clock by 10 ms (a fixed epoch of 10 steps is 100 ms)."""

    name = "tick"

    def __init__(self) -> None:
        self.now_s = 0.0

    @property
    def samples_per_step(self) -> float:
        return 1.0

    def modules(self):
        return []

    def train_step(self) -> StepResult:
        self.now_s += 0.01
        return StepResult(loss=torch.tensor(1.0), grad_norm=torch.tensor(0.5))


def _measure_with(plan: SecondStagePlan, *, epochs: int = 4, max_epochs: int = 30) -> tuple[Measurement, list[int]]:
    workload = TickWorkload()
    seen: list[int] = []

    def second_stage(first_stage: Measurement) -> SecondStagePlan:
        seen.append(len(first_stage.epoch_times_ms))
        return plan

    measurement = measure_workload(
        workload,
        timer=BlockTimer(lambda: None, lambda: workload.now_s),
        epochs=epochs,
        warmup_epochs=0,
        epoch_config=EpochConfig(steps="10"),
        statistics=StatisticsConfig(adaptive="decision", max_epochs=max_epochs),
        monitor=StabilityMonitor(StabilityConfig(), torch.device("cpu")),
        second_stage=second_stage,
    )
    return measurement, seen


def test_the_loop_measures_a_first_stage_of_the_minimum_then_the_count_asked_for():
    measurement, seen = _measure_with(SecondStagePlan(required_epochs=17, reason=DECISION_SETTLED))
    assert seen == [MIN_EPOCHS]  # asked once, after a first stage of at least the minimum (epochs=4 < 10)
    assert len(measurement.epoch_times_ms) == 17
    assert measurement.stop_reason == DECISION_SETTLED
    assert measurement.first_stage_epochs == MIN_EPOCHS


def test_the_loop_stops_after_the_first_stage_when_nothing_would_settle_it():
    measurement, _ = _measure_with(SecondStagePlan(required_epochs=None, reason=DECISION_CANNOT_SETTLE))
    assert len(measurement.epoch_times_ms) == MIN_EPOCHS
    assert measurement.stop_reason == DECISION_CANNOT_SETTLE


def test_the_loop_stops_at_max_epochs_short_of_the_count_asked_for():
    measurement, _ = _measure_with(SecondStagePlan(required_epochs=500, reason=DECISION_SETTLED), max_epochs=25)
    assert len(measurement.epoch_times_ms) == 25
    assert measurement.stop_reason == MAX_EPOCHS_REACHED


# --------------------------------------------------------------------------------------------------- end to end


def _mlp_context(tmp_path: Path, features, *overrides: str) -> ModelRunContext:
    cfg = tiny_mlp_config(
        tmp_path, "epoch.steps=5", "statistics.adaptive=decision", "decision.critical_models=[mlp]", *overrides
    )
    return cpu_model_context(cfg, features)


def test_a_model_whose_total_is_settled_after_its_first_stage_stops_there(tmp_path, learnable_features):
    # Thresholds a million hours away: the first stage settles the total.
    context = _mlp_context(tmp_path, learnable_features, "decision.local_max_hours=1e6", "decision.cloud_min_hours=2e6")
    result = run_model("mlp", context).result
    assert result.status == "ok", result.error
    assert result.stop_reason == DECISION_SETTLED
    assert len(result.raw_epoch_times_ms) == MIN_EPOCHS
    assert result.statistics.first_stage_epochs == MIN_EPOCHS


@pytest.mark.parametrize(
    ("mean_epoch_ms", "required", "reason"),
    [
        # 10M env steps / 800 per epoch = 12,500 epochs of 3 s: 10.4 h, far under 24 h: settled by the first stage.
        (3000.0, MIN_EPOCHS, DECISION_SETTLED),
        # 12,501 epochs of 6.911 s (the warmup too) and 0.5 s: 23.9986 h, 5 s under 24 h, which the future epochs'
        # own variability (h sqrt(n N), about 35 s) never comes within: no count settles it.
        (6911.0, None, DECISION_CANNOT_SETTLE),
    ],
)
def test_the_decision_stage_reads_the_first_stage_as_the_models_provisional_result(
    tmp_path, learnable_features, mean_epoch_ms, required, reason
):
    context = _mlp_context(tmp_path, learnable_features, "decision.critical_models=[dqn]")
    facts = WorkloadFacts(flops_per_step=None, samples_per_step=8.0, sample_unit="env_step", description={})
    first_stage = Measurement(
        sizing=EpochSizing(steps_per_epoch=100, first_step_s=0.5),
        warmup_epoch_times_ms=[mean_epoch_ms],
        epoch_times_ms=noisy_epochs_ms(mean_epoch_ms, rel_sd=0.02, seed=4),
        epoch_losses=[1.0] * 10,
        warmup_losses=[1.0],
        health=[],
        stop_reason="epochs",
    )
    plan = model_run._decision_stage("dqn", facts, context)(first_stage)
    assert plan == SecondStagePlan(required_epochs=required, reason=reason)


# ------------------------------------------------------------------------------------------- its level, simulated

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from statistics_coverage import decision_cell  # noqa: E402


@pytest.mark.parametrize("rho", [0.0, 0.5])
def test_decision_driven_stopping_keeps_its_level_and_never_calls_a_total_over_the_limit_local(rho: float) -> None:
    # The count depends on the first stage's mean as well as its variance (how near the threshold it is), unlike
    # Stein's rule; simulated AR(1) epochs with a true total near the 24 h limit show the level still holds.
    rng = np.random.default_rng(21)
    for fraction in (0.93, 1.07):
        coverage, _, _, wrong_local = decision_cell(rng, 1500, 10, rho, 0.05, 0.95, fraction, 50)
        assert coverage >= 0.93, f"rho={rho}, true total {fraction} x 24 h: coverage {coverage:.3f}"
        assert wrong_local == 0.0
