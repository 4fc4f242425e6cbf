"""One workload's timed run: size the epoch, warm up, then measure epochs until the stopping rule says so.

Each epoch is one synchronised block of steps. With a :class:`SecondStage` (Stein's two-stage rule) the first stage
fixes the total, which keeps the interval's level, unlike stopping once it looks narrow."""

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Literal, Protocol

from gpubench.measure.config import EpochConfig
from gpubench.measure.stability import StabilityMonitor
from gpubench.measure.timing import BlockTimer, EpochSizing, resize_after_warmup, size_epoch
from gpubench.results.units import MS_PER_S
from gpubench.stats.config import FIXED_EPOCHS, MAX_EPOCHS_REACHED, PRECISION_TARGET_MET, StatisticsConfig
from gpubench.stats.intervals import MIN_EPOCHS, two_stage_required_epochs
from gpubench.stats.stability import EpochHealth
from gpubench.workload import Workload

EpochPhase = Literal["warmup", "measured"]
DIVERGED = "diverged"
INTERRUPTED = "interrupted"


@dataclass(frozen=True)
class SecondStagePlan:
    """The epochs to measure in all (None: no count reaches the goal, stop now) and the stop reason once there."""

    required_epochs: int | None
    reason: str


class EpochObserver(Protocol):
    """Records a figure per epoch around the timed block (memory, temperature) and may ask to stop (a reason)."""

    def start_epoch(self) -> None: ...

    def end_epoch(self, phase: EpochPhase, epoch: int) -> object: ...

    def stop_reason(self) -> str | None: ...


#: (phase, epoch number from 1, planned epochs in that phase, seconds, mean loss), after every epoch.
ProgressCallback = Callable[[str, int, int, float, float | None], None]


@dataclass(frozen=True)
class Measurement:
    """One workload's timed run, epoch by epoch; ``health`` also holds a diverged warmup epoch.
    ``first_stage_epochs``: an adaptive run's first stage, else None."""

    sizing: EpochSizing
    warmup_epoch_times_ms: list[float]
    epoch_times_ms: list[float]
    epoch_losses: list[float | None]
    warmup_losses: list[float | None]
    health: list[EpochHealth]
    stop_reason: str
    first_stage_epochs: int | None = None


#: The first stage's measurement in, the total epochs to measure out.
SecondStage = Callable[[Measurement], SecondStagePlan]


def precision_stage(statistics: StatisticsConfig) -> SecondStage:
    """Stein's total that brings the interval within ``statistics.target_rel_halfwidth`` of the mean."""

    def plan(first_stage: Measurement) -> SecondStagePlan:
        required = two_stage_required_epochs(
            first_stage.epoch_times_ms, statistics.target_rel_halfwidth, statistics.confidence_level
        )
        return SecondStagePlan(required_epochs=required, reason=PRECISION_TARGET_MET)

    return plan


class MeasurementInterrupted(KeyboardInterrupt):
    """An interrupt during a measurement; ``measurement`` holds the epochs completed before it."""

    def __init__(self, measurement: Measurement) -> None:
        super().__init__(INTERRUPTED)
        self.measurement = measurement


def measure_workload(
    workload: Workload,
    *,
    timer: BlockTimer,
    epochs: int,
    warmup_epochs: int,
    epoch_config: EpochConfig,
    statistics: StatisticsConfig,
    monitor: StabilityMonitor,
    observers: Sequence[EpochObserver] = (),
    on_epoch: ProgressCallback | None = None,
    second_stage: SecondStage | None = None,
    sizing: EpochSizing | None = None,
) -> Measurement:
    """Size the epoch (unless ``sizing`` is given), run ``warmup_epochs`` discarded epochs, then ``epochs`` measured
    ones, or with a ``second_stage`` a first stage of that many and then its total (at most ``max_epochs``)."""

    def run_steps(count: int) -> None:
        for _ in range(count):
            monitor.observe(workload.train_step())

    def time_steps(count: int) -> float:
        return timer.time_block(lambda: run_steps(count))

    given_sizing = sizing
    sizing = given_sizing or size_epoch(
        time_steps,
        min_seconds=epoch_config.min_seconds,
        max_steps=epoch_config.max_auto_steps,
        fixed_steps=epoch_config.fixed_steps,
        steps_per_iteration=workload.steps_per_iteration,
        steps_into_iteration=workload.steps_into_iteration,
    )
    if given_sizing is None:
        # Calibration steps are not part of any epoch; drop what the monitor saw of them.
        monitor.end_epoch()
    steps = sizing.steps_per_epoch

    def run_epoch(phase: EpochPhase, number: int, planned: int) -> tuple[float, EpochHealth]:
        try:
            for observer in observers:
                observer.start_epoch()
            seconds = time_steps(steps)
            health = monitor.end_epoch()
            for observer in observers:
                observer.end_epoch(phase, number)
            if on_epoch is not None:
                on_epoch(phase, number, planned, seconds, health.mean_loss)
        except KeyboardInterrupt as exc:
            # Nearly all of a run's time is spent here, so this is where an interrupt lands.
            raise MeasurementInterrupted(measurement(INTERRUPTED)) from exc
        return seconds, health

    warmup_times_ms: list[float] = []
    warmup_losses: list[float | None] = []
    times_ms: list[float] = []
    losses: list[float | None] = []
    healths: list[EpochHealth] = []
    first_stage: int | None = None

    def measurement(stop_reason: str) -> Measurement:
        return Measurement(
            sizing=sizing,
            warmup_epoch_times_ms=list(warmup_times_ms),
            epoch_times_ms=list(times_ms),
            epoch_losses=list(losses),
            warmup_losses=list(warmup_losses),
            health=list(healths),
            stop_reason=stop_reason,
            first_stage_epochs=first_stage,
        )

    for number in range(1, warmup_epochs + 1):
        seconds, health = run_epoch("warmup", number, warmup_epochs)
        warmup_times_ms.append(seconds * MS_PER_S)
        warmup_losses.append(health.mean_loss)
        if health.diverged:
            healths.append(health)
            return measurement(DIVERGED)
    if warmup_epochs and sizing.automatic and given_sizing is None:
        steps = resize_after_warmup(
            steps,
            warmup_times_ms[-1] / MS_PER_S,
            epoch_config.min_seconds,
            epoch_config.max_auto_steps,
            workload.steps_per_iteration,
        )
        sizing = replace(sizing, steps_per_epoch=steps)

    planned = min(max(epochs, MIN_EPOCHS), statistics.max_epochs) if second_stage is not None else epochs
    done_reason = FIXED_EPOCHS
    number = 0
    while number < planned:
        number += 1
        seconds, health = run_epoch("measured", number, planned)
        times_ms.append(seconds * MS_PER_S)
        losses.append(health.mean_loss)
        healths.append(health)
        if health.diverged:
            return measurement(DIVERGED)
        observer_reason = next((o.stop_reason() for o in observers if o.stop_reason()), None)
        if observer_reason is not None:
            return measurement(observer_reason)
        if second_stage is not None and first_stage is None and number == planned:
            # The first stage's variance fixes the total.
            plan = second_stage(measurement(FIXED_EPOCHS))
            first_stage = number
            if plan.required_epochs is None:
                return measurement(plan.reason)
            planned = min(max(plan.required_epochs, number), statistics.max_epochs)
            done_reason = plan.reason if plan.required_epochs <= statistics.max_epochs else MAX_EPOCHS_REACHED
    return measurement(done_reason)
