"""A model's later rounds: built again at the batch it was timed at, warmed, and measured round after round.

The host's speed drifts over minutes; rounds spread over the job carry that drift into each model's data, and its
bound takes the spread between rounds in (:mod:`gpubench.stats.rounds`). Memory is profiled in round 1 only, since
later rounds share the device.
"""

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from statistics import fmean

from gpubench.bench.model_run import ModelInterrupted, ModelRun, ModelRunContext, build_workload
from gpubench.hardware.host import probe_host_speed
from gpubench.hardware.monitor import DeviceMonitor, energy_summary
from gpubench.measure.epochs import INTERRUPTED, Measurement, MeasurementInterrupted, measure_workload
from gpubench.measure.stability import StabilityMonitor
from gpubench.output import console
from gpubench.results import DeviceEpoch, HostProbe, MeasuredRound, ModelResult
from gpubench.stats.epoch_times import summarize_epoch_times
from gpubench.stats.host import explained_share, gpu_wait_share
from gpubench.stats.rounds import round_gaps_epochs
from gpubench.stats.stability import stability_verdict
from gpubench.workload import Workload

logger = logging.getLogger(__name__)


#: The fewest epochs in a round, for the within-round variance.
MIN_ROUND_EPOCHS = 2


def split_epochs(epochs: int, rounds: int) -> list[int]:
    """``epochs`` in at most ``rounds`` rounds as equal as can be, longer first (22 in 4: 6, 6, 5, 5), each of at
    least :data:`MIN_ROUND_EPOCHS` epochs."""
    if epochs < 1 or rounds < 1:
        raise ValueError(f"need epochs >= 1 and rounds >= 1, got {epochs} and {rounds}")
    rounds = max(1, min(rounds, epochs // MIN_ROUND_EPOCHS))
    base, extra = divmod(epochs, rounds)
    return [base + 1] * extra + [base] * (rounds - extra)


@dataclass(frozen=True)
class RoundRun:
    """One later round of a model: its report record, its measurement and the device's epochs during it."""

    record: MeasuredRound
    measurement: Measurement
    device_epochs: tuple[DeviceEpoch, ...]


@dataclass(frozen=True)
class ModelRounds:
    """Everything a model's rounds measured so far: round 1 and the later rounds in order."""

    first: ModelRun
    first_record: MeasuredRound
    later: tuple[RoundRun, ...] = ()

    @property
    def epochs(self) -> int:
        """Measured epochs so far, every round's."""
        return self.first_record.epochs + sum(r.record.epochs for r in self.later)

    def with_round(self, round_run: RoundRun) -> "ModelRounds":
        return replace(self, later=(*self.later, round_run))


@dataclass
class LiveModel:
    """A model built again and warmed for its later rounds, with the monitors that follow it through them."""

    name: str
    workload: Workload
    measurement: Measurement
    stability: StabilityMonitor
    device: DeviceMonitor


def first_round_record(run: ModelRun, index: int, started_s: float, probe: HostProbe | None) -> MeasuredRound:
    """The record of round 1, from the model's run."""
    times = run.result.raw_epoch_times_ms
    return _record(index, times, started_s, probe, run.result.measured_device_epochs)


def _record(
    index: int, times_ms: Sequence[float], started_s: float, probe: HostProbe | None, device: Sequence[DeviceEpoch]
) -> MeasuredRound:
    clocks = [e.sm_clock_mhz for e in device if e.sm_clock_mhz is not None]
    powers = [e.mean_power_w for e in device if e.mean_power_w is not None]
    throttles = [e.throttled for e in device if e.throttled is not None]
    return MeasuredRound(
        index=index,
        epochs=len(times_ms),
        mean_epoch_ms=fmean(times_ms) if times_ms else 0.0,
        started_s=started_s,
        host_probe=probe,
        sm_clock_mhz=fmean(clocks) if clocks else None,
        power_w=fmean(powers) if powers else None,
        throttled=any(throttles) if throttles else None,
    )


def start_later_rounds(name: str, rounds: ModelRounds, context: ModelRunContext) -> LiveModel:
    """Build model ``name`` again at the batch round 1 timed, and warm it up."""
    cfg = context.cfg
    result, first = rounds.first.result, rounds.first.measurement
    assert first is not None and result.batch_size is not None
    workload = build_workload(name, context, result.batch_size)
    stability = StabilityMonitor(cfg.stability, context.device)
    device = DeviceMonitor(context.device, cfg.hardware, reference_sm_clock_mhz=context.reference_sm_clock_mhz)
    warmup = measure_workload(
        workload,
        timer=context.timer,
        epochs=0,
        warmup_epochs=cfg.warmup_epochs,
        epoch_config=cfg.epoch,
        statistics=cfg.statistics,
        monitor=stability,
        sizing=first.sizing,
    )
    return LiveModel(name=name, workload=workload, measurement=warmup, stability=stability, device=device)


def measure_round(
    live: LiveModel, rounds: ModelRounds, epochs: int, index: int, started_s: float, context: ModelRunContext
) -> ModelRounds:
    """``rounds`` with one more round of ``epochs`` epochs of ``live``; an interrupt raises
    :class:`~gpubench.bench.model_run.ModelInterrupted` carrying the epochs completed."""
    cfg = context.cfg
    probe = probe_host_speed()
    before = len(live.device.epochs)
    first_number = rounds.epochs
    observer = context.epoch_observer

    try:
        with console.model_progress(live.name, 0, cfg.epochs, verbose=cfg.verbose) as show_epoch:

            def on_epoch(phase: str, number: int, planned: int, seconds: float, loss: float | None) -> None:
                show_epoch(phase, first_number + number, max(cfg.epochs, first_number + planned), seconds, loss)
                if observer is not None:
                    observer(live.name, phase, first_number + number, seconds, loss)

            measurement = measure_workload(
                live.workload,
                timer=context.timer,
                epochs=epochs,
                warmup_epochs=0,
                epoch_config=cfg.epoch,
                statistics=cfg.statistics,
                monitor=live.stability,
                observers=[live.device],
                on_epoch=on_epoch,
                sizing=live.measurement.sizing,
            )
    except MeasurementInterrupted as exc:
        partial = _round(exc.measurement, live, before, first_number, index, started_s, probe)
        result = merged_result(rounds.with_round(partial) if partial.record.epochs else rounds, context)
        error = f"interrupted in round {index} after {rounds.epochs + partial.record.epochs} measured epochs"
        interrupted = replace(result, status=INTERRUPTED, error=error, stop_reason=INTERRUPTED)
        raise ModelInterrupted(ModelRun(interrupted, None), model=live.name) from exc
    return rounds.with_round(_round(measurement, live, before, first_number, index, started_s, probe))


def _round(
    measurement: Measurement,
    live: LiveModel,
    device_before: int,
    first_number: int,
    index: int,
    started_s: float,
    probe: HostProbe,
) -> RoundRun:
    # The report numbers a model's measured epochs on across its rounds.
    device = tuple(
        replace(epoch, epoch=first_number + k) for k, epoch in enumerate(live.device.epochs[device_before:], start=1)
    )
    record = _record(index, measurement.epoch_times_ms, started_s, probe, device)
    return RoundRun(record=record, measurement=measurement, device_epochs=device)


def merged_result(rounds: ModelRounds, context: ModelRunContext, stop_reason: str | None = None) -> ModelResult:
    """The model's report section: round 1's result with the epochs, readings and statistics of all its rounds."""
    cfg = context.cfg
    first = rounds.first
    assert first.measurement is not None
    result = first.result
    later = rounds.later
    times = [*result.raw_epoch_times_ms, *(t for r in later for t in r.measurement.epoch_times_ms)]
    losses = [*result.epoch_losses, *(loss for r in later for loss in r.measurement.epoch_losses)]
    health = [*first.measurement.health, *(h for r in later for h in r.measurement.health)]
    device = [*result.device_epochs, *(e for r in later for e in r.device_epochs)]
    records = [rounds.first_record, *(r.record for r in later)]
    counted, kept, warnings = records, records, list(result.warnings)
    if len(records) > 1 and records[-1].epochs < MIN_ROUND_EPOCHS:
        # Only an interrupted round ends this short: its epoch is counted with the round before.
        last, before = records[-1], records[-2]
        warnings.append(
            f"the interrupted round {last.index}'s {last.epochs} epoch is counted with round {before.index} in the "
            "statistics (a round needs at least 2)"
        )
        counted, kept = [*records[:-2], replace(before, epochs=before.epochs + last.epochs)], records[:-1]
    statistics = summarize_epoch_times(
        times,
        confidence_level=cfg.statistics.confidence_level,
        cv_threshold=cfg.statistics.cv_threshold,
        outlier_rule=cfg.statistics.outlier_rule,
        target_rel_halfwidth=cfg.statistics.target_rel_halfwidth,
        rounds=[r.epochs for r in counted],
        round_gaps_epochs=round_gaps_epochs(
            [r.started_s for r in kept], [r.epochs for r in kept], [r.mean_epoch_ms for r in kept]
        ),
        earlier_runs=context.history.earlier_runs(result) if context.history is not None else (),
    )
    stability = stability_verdict(health, cfg.stability)
    samples_per_epoch = result.samples_per_epoch or 0.0
    probes = [(r.mean_epoch_ms, r.host_probe.python_loop_ms) for r in records if r.host_probe is not None]
    return replace(
        result,
        raw_epoch_times_ms=times,
        epoch_losses=losses,
        device_epochs=device,
        rounds=records,
        warnings=warnings,
        statistics=statistics,
        stability=stability.stability,
        loss_trend=stability.loss_trend,
        stability_details=stability,
        energy=energy_summary(device, samples_per_epoch),
        stop_reason=stop_reason or result.stop_reason,
        host_probe_explained_share=explained_share([m for m, _ in probes], [p for _, p in probes]),
        gpu_wait_explained_share=rounds_gpu_wait_share(records),
    )


def rounds_gpu_wait_share(records: Sequence[MeasuredRound]) -> float | None:
    """:func:`gpu_wait_share` over the rounds the device monitor read; None without three."""
    monitored = [r for r in records if r.power_w is not None and r.sm_clock_mhz is not None]
    return gpu_wait_share(
        [r.mean_epoch_ms for r in monitored],
        [r.power_w for r in monitored],
        [r.sm_clock_mhz for r in monitored],
        [bool(r.throttled) for r in monitored],
    )


def seconds_since(start_s: float) -> float:
    """Seconds from ``start_s`` (a :func:`time.perf_counter` reading) to now."""
    return time.perf_counter() - start_s
