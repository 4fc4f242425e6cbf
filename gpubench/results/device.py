"""What the device did per epoch (clocks, power, throttling), the energy, the execution settings and the timed
side costs (evaluation, checkpoints)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from gpubench.results.codec import OMIT_EMPTY, Record


@dataclass(frozen=True)
class DeviceEpoch(Record):
    """The device during one epoch (``epoch`` from 1): temperature (°C), SM clock (MHz), power (W) and throttle
    reasons at its end, ``energy_j`` over it and ``mean_power_w`` = energy / wall time; None on the CPU."""

    phase: Literal["warmup", "measured"]
    epoch: int
    temperature_c: float | None
    temperature_status: str
    sm_clock_mhz: float | None
    power_w: float | None
    mean_power_w: float | None
    throttle_reasons: list[str] | None
    energy_j: float | None
    throttled: bool | None
    throttle_cause: str | None


@dataclass(frozen=True)
class EnergySummary(Record):
    """Mean energy of the measured epochs from NVML's counter: joules per epoch and per sample."""

    joules_per_epoch: float
    joules_per_sample: float | None
    epochs: int


@dataclass(frozen=True)
class ExecutionSettings(Record):
    """How the workload ran: autocast precision (fp32, bf16, fp16), compile mode and fp32 matmul precision."""

    precision: str
    compile: str
    matmul_precision: str | None = field(default=None, metadata=OMIT_EMPTY)


@dataclass(frozen=True)
class Throughput(Record):
    """Samples per second with the images of the time intervals; an end is None where the time reaches zero."""

    mean: float | None
    confidence_interval: tuple[float | None, float | None]
    decision_interval: tuple[float | None, float | None]
    unit: str


@dataclass(frozen=True)
class EvaluationCost(Record):
    """One evaluation call: ms per call of ``samples_per_call`` samples (the mean of ``calls_timed`` calls)."""

    ms_per_call: float
    samples_per_call: float
    calls_timed: int


@dataclass(frozen=True)
class CheckpointCost(Record):
    """One checkpoint: ms per ``torch.save`` of model and optimizer (the mean of ``saves_timed``), size in MB."""

    ms_per_save: float
    size_mb: float
    saves_timed: int
