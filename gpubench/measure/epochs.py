"""One workload's timed run: size the epoch, warm up, then measure epochs until the stopping rule says so.

Every epoch is one synchronised block of ``steps_per_epoch`` steps (:mod:`gpubench.measure.timing`); after it the
stability monitor and the epoch observers are read. The loop stops after ``epochs`` epochs, or with a
:class:`SecondStage` by Stein's two-stage rule: the first stage fixes the total (at most ``max_epochs``), which
keeps the interval's level, unlike stopping once it looks narrow. It stops early on divergence or when an observer
asks; an interrupt raises :class:`MeasurementInterrupted` with the completed epochs.
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from gpubench.measure.config import EpochConfig
from gpubench.measure.stability import StabilityMonitor
from gpubench.measure.timing import BlockTimer, EpochSizing, resize_after_warmup, size_epoch
from gpubench.stats.config import (
    FIXED_EPOCHS,
    MAX_EPOCHS_REACHED,
    PRECISION_TARGET_MET,
    StatisticsConfig,
)
from gpubench.stats.intervals import MIN_EPOCHS, two_stage_required_epochs
from gpubench.stats.stability import EpochHealth
from gpubench.units import MS_PER_S
from gpubench.workload import Workload

#: The phase of a benchmark epoch: discarded warmup, or measured.
EpochPhase = Literal["warmup", "measured"]
#: The stop reason of a run that saw a NaN/Inf loss or gradient.
DIVERGED = "diverged"
#: The stop reason of a run cut short by an interrupt.
INTERRUPTED = "interrupted"


@dataclass(frozen=True)
class SecondStagePlan:
    """What a second stage asks for after the first: ``required_epochs`` in all (None: no count would reach the goal,
    so the run stops after the first stage) and the stop reason once measured to it (capped at ``max_epochs``, the
    reason becomes ``max_epochs_reached``)."""

    required_epochs: int | None
    reason: str


class SecondStage(Protocol):
    """The second stage of a two-stage rule: from the measurement of the first stage, the total epochs to measure."""

    def __call__(self, first_stage: "Measurement") -> SecondStagePlan: ...


class EpochObserver(Protocol):
    """Something that records a figure per epoch around the timed block (memory, temperature, energy) and keeps it."""

    def start_epoch(self) -> None: ...

    def end_epoch(self, phase: EpochPhase, epoch: int) -> object:
        """Record epoch number ``epoch`` (from 1 within ``phase``); what it returns is the observer's own."""
        ...

    def stop_reason(self) -> str | None:
        """A reason to stop measuring this model now (e.g. the card passed its stop temperature), or None."""
        ...


#: Called after every epoch with (phase, epoch number from 1, planned epochs in that phase, seconds, mean loss).
ProgressCallback = Callable[[str, int, int, float, float | None], None]


@dataclass(frozen=True)
class Measurement:
    """What the timed run of one workload produced, epoch by epoch, in the order run.

    ``epoch_times_ms`` and ``epoch_losses`` cover the measured epochs; ``health`` also a diverged warmup epoch.
    ``stop_reason``: ``epochs``, ``precision_target_met`` / ``decision_settled``, ``decision_cannot_settle``,
    ``max_epochs_reached``, ``diverged``, or an observer's reason. ``first_stage_epochs``: an adaptive run's first
    stage, else None.
    """

    sizing: EpochSizing
    warmup_epoch_times_ms: list[float]
    epoch_times_ms: list[float]
    epoch_losses: list[float | None]
    warmup_losses: list[float | None]
    health: list[EpochHealth]
    stop_reason: str
    first_stage_epochs: int | None = None


def precision_stage(statistics: StatisticsConfig) -> SecondStage:
    """The second stage of ``statistics.adaptive=precision``: Stein's total that brings the decision interval within
    ``statistics.target_rel_halfwidth`` of the mean (:func:`~gpubench.stats.intervals.two_stage_required_epochs`)."""

    def plan(first_stage: Measurement) -> SecondStagePlan:
        required = two_stage_required_epochs(
            first_stage.epoch_times_ms, statistics.target_rel_halfwidth, statistics.confidence_level
        )
        return SecondStagePlan(required_epochs=required, reason=PRECISION_TARGET_MET)

    return plan


class MeasurementInterrupted(KeyboardInterrupt):
    """An interrupt during the measurement of one workload; ``measurement`` holds the epochs completed before it
    (stop reason ``interrupted``), so the caller can keep them."""

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
    """Run and time ``workload``: epoch sizing, ``warmup_epochs`` discarded epochs, then measured epochs — ``epochs``
    of them, or with a ``second_stage`` a first stage of ``epochs`` (at least :data:`MIN_EPOCHS`) and then the total
    it asks for, at most ``statistics.max_epochs``. Given ``sizing`` (a later round of a model sized before), its
    steps per epoch are kept: no calibration, and no resizing after the warmup."""

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
            # Nearly all of a run's time is spent in here, so this is where an interrupt lands: the epochs already
            # recorded go up with it.
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
        sizing = EpochSizing(
            steps_per_epoch=steps,
            first_step_s=sizing.first_step_s,
            probe_steps=sizing.probe_steps,
            probe_seconds=sizing.probe_seconds,
        )

    # A two-stage run plans its first stage, then (after it) the total; the config keeps max_epochs >= MIN_EPOCHS.
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
            # Stage one is complete: its variance fixes the total, and the rest of the run only measures to it.
            plan = second_stage(measurement(FIXED_EPOCHS))
            first_stage = number
            if plan.required_epochs is None:
                return measurement(plan.reason)
            planned = min(max(plan.required_epochs, number), statistics.max_epochs)
            done_reason = plan.reason if plan.required_epochs <= statistics.max_epochs else MAX_EPOCHS_REACHED
    return measurement(done_reason)
