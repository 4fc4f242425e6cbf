"""What the device did per epoch (clocks, power, throttling), the energy, the execution settings and the timed
side costs (evaluation, checkpoints)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from gpubench.results.codec import OMIT_EMPTY, Record


@dataclass(frozen=True)
class DeviceEpoch(Record):
    """The device during one epoch (``phase`` warmup or measured, ``epoch`` from 1): temperature (°C), SM clock (MHz),
    power (W) and throttle reasons at its end, ``energy_j`` over it and ``mean_power_w`` = energy / wall time; all
    None on the CPU."""

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
    """How the workload ran: autocast precision (fp32, bf16, fp16), compilation mode and the fp32 matmul precision
    (None where not recorded: PyTorch's default, ``highest``)."""

    precision: str
    compile: str
    matmul_precision: str | None = field(default=None, metadata=OMIT_EMPTY)


@dataclass(frozen=True)
class Throughput(Record):
    """Samples per second with the images of the time intervals (``unit`` names the sample); an end is None where
    the time interval reaches zero."""

    mean: float | None
    confidence_interval: tuple[float | None, float | None]
    decision_interval: tuple[float | None, float | None]
    unit: str


@dataclass(frozen=True)
class EvaluationCost(Record):
    """One evaluation call measured: milliseconds per call of ``samples_per_call`` samples (the mean over a block
    of ``calls_timed`` calls)."""

    ms_per_call: float
    samples_per_call: float
    calls_timed: int


@dataclass(frozen=True)
class CheckpointCost(Record):
    """One checkpoint measured: milliseconds per ``torch.save`` of the model and optimizer state (the mean of
    ``saves_timed`` saves), and the file's size in MB."""

    ms_per_save: float
    size_mb: float
    saves_timed: int
