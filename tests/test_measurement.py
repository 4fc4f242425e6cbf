"""The measurement loop against a fake workload and a fake clock: epoch counts, stopping rules, observers."""

import numpy as np
import pytest
import torch

from gpubench.measure.config import EpochConfig
from gpubench.measure.epochs import measure_workload, precision_stage
from gpubench.measure.stability import StabilityMonitor
from gpubench.measure.timing import BlockTimer
from gpubench.stats.config import StabilityConfig, StatisticsConfig
from gpubench.stats.intervals import MIN_EPOCHS, two_stage_epochs, two_stage_required_epochs
from gpubench.workload import StepResult, Workload


class FakeClockWorkload(Workload):
    """Each step advances a fake clock by a scripted duration and reports a scripted loss."""

    name = "fake"

    def __init__(self, step_seconds, losses=None) -> None:
        self.now_s = 0.0
        self.step_seconds = step_seconds
        self.losses = losses
        self.steps_run = 0

    @property
    def samples_per_step(self) -> float:
        return 8.0

    def modules(self):
        return []

    def train_step(self) -> StepResult:
        self.now_s += self.step_seconds(self.steps_run)
        loss = 1.0 if self.losses is None else self.losses(self.steps_run)
        self.steps_run += 1
        return StepResult(loss=torch.tensor(loss), grad_norm=torch.tensor(0.5))


def measure(workload, *, epochs=5, warmup=2, steps="auto", statistics=None, observers=(), on_epoch=None):
    statistics = statistics or StatisticsConfig()
    return measure_workload(
        workload,
        timer=BlockTimer(lambda: None, lambda: workload.now_s),
        epochs=epochs,
        warmup_epochs=warmup,
        epoch_config=EpochConfig(steps=steps, min_seconds=1.0),
        statistics=statistics,
        monitor=StabilityMonitor(StabilityConfig(), torch.device("cpu")),
        observers=observers,
        on_epoch=on_epoch,
        second_stage=precision_stage(statistics) if statistics.is_adaptive else None,
    )


def test_fixed_epochs_are_measured_after_warmup_with_exact_times():
    # 2**-7 s per step keeps the fake clock's sums exact in binary floating point.
    workload = FakeClockWorkload(lambda i: 2.0**-7)
    result = measure(workload, epochs=5, warmup=2)
    assert result.sizing.steps_per_epoch == 128  # 1.0 s / 7.8125 ms
    assert len(result.warmup_epoch_times_ms) == 2 and len(result.epoch_times_ms) == 5
    assert result.epoch_times_ms == pytest.approx([1000.0] * 5)
    assert result.epoch_losses == pytest.approx([1.0] * 5)
    assert result.stop_reason == "epochs"
    calibration_steps = 1 + sum(result.sizing.probe_steps)
    assert workload.steps_run == calibration_steps + 7 * 128


def test_epoch_grows_when_the_model_speeds_up_during_warmup():
    # Calibration (26 steps) sees 20 ms steps, warmup 5 ms ones: calibrated at 50 steps, warmup lasts 0.25 s.
    workload = FakeClockWorkload(lambda i: 0.02 if i < 26 else 0.005)
    result = measure(workload, epochs=3, warmup=1)
    assert result.sizing.steps_per_epoch == 200
    assert all(t >= 1000.0 - 1e-6 for t in result.epoch_times_ms)


def test_divergence_stops_the_model_at_once():
    workload = FakeClockWorkload(lambda i: 0.01, losses=lambda i: float("nan") if i > 600 else 1.0)
    result = measure(workload, epochs=10, warmup=1, steps="100")
    assert result.stop_reason == "diverged"
    # Steps 1..100 warm up, then measured epochs of 100 steps: step 601 falls in measured epoch 6.
    assert len(result.epoch_times_ms) == 6
    assert result.health[-1].diverged


def test_adaptive_identical_epochs_stop_after_a_first_stage_of_at_least_the_minimum():
    steady = FakeClockWorkload(lambda i: 0.01)
    result = measure(steady, epochs=4, warmup=0, steps="100", statistics=StatisticsConfig(adaptive="precision"))
    assert result.stop_reason == "precision_target_met"
    # A first stage of epochs = 4 is raised to the decision interval's minimum; identical epochs need no more.
    assert len(result.epoch_times_ms) == result.first_stage_epochs == MIN_EPOCHS


def test_adaptive_measures_to_the_two_stage_total_of_its_first_stage():
    # Epoch times scattered by about 1%: ten epochs fix a total between the first stage and max_epochs.
    factors = 1.0 + 0.01 * np.random.default_rng(3).standard_normal(1000)
    workload = FakeClockWorkload(lambda i: 0.01 * factors[i // 100])
    planned = []
    result = measure(
        workload,
        epochs=10,
        warmup=0,
        steps="100",
        statistics=StatisticsConfig(adaptive="precision", max_epochs=50),
        on_epoch=lambda phase, number, total, seconds, loss: planned.append(total),
    )
    first_ms = result.epoch_times_ms[:10]
    total = two_stage_epochs(first_ms, 0.02, 0.95, max_epochs=50)
    assert 10 < total < 50
    assert len(result.epoch_times_ms) == total and result.first_stage_epochs == 10
    assert result.stop_reason == "precision_target_met"
    # The progress shows the first stage as planned, then the total the first stage fixed.
    assert planned == [10] * 10 + [total] * (total - 10)


def test_adaptive_stops_at_max_epochs_when_the_total_asked_for_is_beyond_it():
    noisy = FakeClockWorkload(lambda i: 0.01 * (1.5 if (i // 100) % 2 else 0.5))
    # Epochs alternate 0.5 s and 1.5 s: a first stage of the minimum asks for thousands of epochs.
    max_epochs = MIN_EPOCHS + 3
    statistics = StatisticsConfig(adaptive="precision", max_epochs=max_epochs)
    result = measure(noisy, epochs=MIN_EPOCHS, warmup=0, steps="100", statistics=statistics)
    assert two_stage_required_epochs(result.epoch_times_ms[:MIN_EPOCHS], 0.02, 0.95) > max_epochs
    assert result.stop_reason == "max_epochs_reached"
    assert len(result.epoch_times_ms) == max_epochs and result.first_stage_epochs == MIN_EPOCHS


def test_a_fixed_run_has_no_first_stage():
    result = measure(FakeClockWorkload(lambda i: 0.01), epochs=6, warmup=0, steps="100")
    assert result.stop_reason == "epochs" and result.first_stage_epochs is None


class HotCard:
    """An observer whose card passes its stop temperature at the third epoch it sees (the second measured one
    after one warmup epoch); it keeps (phase, epoch, temperature) per epoch, as the loop labelled it."""

    def __init__(self) -> None:
        self.records: list[tuple[str, int, float]] = []

    def start_epoch(self) -> None:
        pass

    def end_epoch(self, phase: str, epoch: int) -> None:
        self.records.append((phase, epoch, 70.0 + 10 * (len(self.records) + 1)))

    def stop_reason(self) -> str | None:
        return "thermal_stop" if len(self.records) >= 3 else None


def test_an_observer_can_stop_the_model_and_its_records_are_kept():
    card = HotCard()
    result = measure(FakeClockWorkload(lambda i: 0.01), epochs=10, warmup=1, steps="10", observers=[card])
    assert result.stop_reason == "thermal_stop"
    assert len(result.epoch_times_ms) == 2  # warmup is epoch 1 of the observer, measured epochs 2 and 3
    assert [(phase, epoch) for phase, epoch, _ in card.records] == [("warmup", 1), ("measured", 1), ("measured", 2)]
    assert [temperature for _, _, temperature in card.records] == [80.0, 90.0, 100.0]


def test_an_adaptive_run_stopped_during_its_first_stage_has_no_first_stage():
    statistics = StatisticsConfig(adaptive="precision")
    result = measure(
        FakeClockWorkload(lambda i: 0.01), epochs=10, warmup=1, steps="10", statistics=statistics, observers=[HotCard()]
    )
    assert result.stop_reason == "thermal_stop"
    assert len(result.epoch_times_ms) == 2 and result.first_stage_epochs is None


class FakeIterationWorkload(FakeClockWorkload):
    """A PPO-like fake: step ``k`` costs 2**-9 s, plus a 2**-5 s rollout when ``k`` starts one of its 16-step
    iterations; from step 96 on, updates cost half as much (the model warmed up)."""

    def __init__(self) -> None:
        super().__init__(lambda k: 2.0**-9 / (2 if k >= 96 else 1) + (2.0**-5 if k % 16 == 0 else 0.0))

    @property
    def steps_per_iteration(self) -> int:
        return 16

    @property
    def steps_into_iteration(self) -> int:
        return self.steps_run % 16


@pytest.mark.parametrize("steps_before", [0, 1])
def test_measured_epochs_of_a_ppo_like_workload_hold_whole_iterations_and_take_equal_times(steps_before):
    # steps_before 1: the eager FLOP count ran a step of the measured workload. Calibration, to step 96: the first
    # step, the rest of its iteration, probes of 1 and 4 iterations (62.5, 250 ms) -> 16 iterations for 1 s; the
    # warmup runs them in 0.75 s and the epoch grows to 22 iterations (1.03125 s), each epoch from a boundary.
    workload = FakeIterationWorkload()
    for _ in range(steps_before):
        workload.train_step()
    result = measure(workload, epochs=5, warmup=2)
    assert result.sizing.steps_per_epoch == 352
    assert result.warmup_epoch_times_ms == [750.0] * 2
    assert result.epoch_times_ms == [1031.25] * 5
    assert result.sizing.probe_steps == ((15, 16, 64) if steps_before == 0 else (14, 16, 64))
    assert workload.steps_run == 96 + 2 * 256 + 5 * 352
