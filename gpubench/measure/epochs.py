"""One workload's timed run: size the epoch, warm up, then measure epochs until the stopping rule says so.

Every epoch is one synchronised block of ``steps_per_epoch`` training steps (see :mod:`gpubench.measure.timing`). After
each block, and outside it, the stability monitor is read (one host sync per epoch) and the epoch observers
(memory profiler, device monitor) record their per-epoch figures. The loop stops after ``epochs`` measured
epochs, or — with adaptive statistics — when the precision target or ``max_epochs`` is reached, and early when
training diverges (a NaN/Inf loss or gradient) or an observer asks to stop (the card is too hot).
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from gpubench.measure.config import EpochConfig
from gpubench.measure.stability import EpochHealth, StabilityMonitor
from gpubench.measure.timing import BlockTimer, EpochSizing, resize_after_warmup, size_epoch
from gpubench.stats.config import StatisticsConfig
from gpubench.stats.epoch_times import should_stop_adaptive
from gpubench.workload import Workload


class EpochObserver(Protocol):
    """Something that records a figure per epoch around the timed block (memory, temperature, energy)."""

    name: str

    def start_epoch(self) -> None: ...

    def end_epoch(self) -> dict[str, Any]: ...

    def stop_reason(self) -> str | None:
        """A reason to stop measuring this model now (e.g. the card passed its stop temperature), or None."""
        ...


#: Called after every epoch with (phase, epoch number from 1, planned epochs in that phase, seconds, mean loss).
ProgressCallback = Callable[[str, int, int, float, float | None], None]


@dataclass
class Measurement:
    """What the timed run of one workload produced, epoch by epoch, in the order run.

    ``epoch_times_ms`` and ``epoch_losses`` are the measured epochs only (warmup excluded); ``stop_reason`` is
    ``epochs`` (the fixed count), ``precision_target_met``, ``max_epochs_reached``, ``diverged``, or an
    observer's reason.
    """

    sizing: EpochSizing
    warmup_epoch_times_ms: list[float] = field(default_factory=list)
    epoch_times_ms: list[float] = field(default_factory=list)
    epoch_losses: list[float | None] = field(default_factory=list)
    warmup_losses: list[float | None] = field(default_factory=list)
    health: list[EpochHealth] = field(default_factory=list)
    observations: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    stop_reason: str = "epochs"


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
) -> Measurement:
    """Run and time ``workload``: epoch sizing, ``warmup_epochs`` discarded epochs, then measured epochs."""

    def run_steps(count: int) -> None:
        for _ in range(count):
            monitor.observe(workload.train_step())

    def time_steps(count: int) -> float:
        return timer.time_block(lambda: run_steps(count))

    sizing = size_epoch(
        time_steps,
        min_seconds=epoch_config.min_seconds,
        max_steps=epoch_config.max_auto_steps,
        fixed_steps=epoch_config.fixed_steps,
    )
    # Calibration steps are not part of any epoch; drop what the monitor saw of them.
    monitor.end_epoch()
    result = Measurement(sizing=sizing)
    steps = sizing.steps_per_epoch

    def run_epoch(phase: str, number: int, planned: int) -> tuple[float, EpochHealth]:
        for observer in observers:
            observer.start_epoch()
        seconds = time_steps(steps)
        health = monitor.end_epoch()
        for observer in observers:
            result.observations.setdefault(observer.name, []).append(
                {"phase": phase, "epoch": number, **observer.end_epoch()}
            )
        if on_epoch is not None:
            on_epoch(phase, number, planned, seconds, health.mean_loss)
        return seconds, health

    for number in range(1, warmup_epochs + 1):
        seconds, health = run_epoch("warmup", number, warmup_epochs)
        result.warmup_epoch_times_ms.append(seconds * 1e3)
        result.warmup_losses.append(health.mean_loss)
        if health.diverged:
            result.health.append(health)
            result.stop_reason = "diverged"
            return result
    if warmup_epochs and sizing.automatic:
        steps = resize_after_warmup(
            steps,
            result.warmup_epoch_times_ms[-1] / 1e3,
            epoch_config.min_seconds,
            epoch_config.max_auto_steps,
        )
        result.sizing = EpochSizing(
            steps_per_epoch=steps,
            first_step_s=sizing.first_step_s,
            probe_steps=sizing.probe_steps,
            probe_seconds=sizing.probe_seconds,
        )

    planned = statistics.max_epochs if statistics.adaptive else epochs
    for number in range(1, planned + 1):
        seconds, health = run_epoch("measured", number, planned)
        result.epoch_times_ms.append(seconds * 1e3)
        result.epoch_losses.append(health.mean_loss)
        result.health.append(health)
        if health.diverged:
            result.stop_reason = "diverged"
            break
        observer_reason = next((o.stop_reason() for o in observers if o.stop_reason()), None)
        if observer_reason is not None:
            result.stop_reason = observer_reason
            break
        if statistics.adaptive and number >= 2:
            stop, reason = should_stop_adaptive(
                result.epoch_times_ms,
                min_epochs=epochs,
                max_epochs=statistics.max_epochs,
                confidence_level=statistics.confidence_level,
                target_rel_halfwidth=statistics.target_rel_halfwidth,
            )
            if stop:
                result.stop_reason = reason
                break
    return result
