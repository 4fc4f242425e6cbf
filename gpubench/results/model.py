"""One model's outcome (:class:`ModelResult`), its measured rounds and host probes, and its data-parallel run."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, get_args

from gpubench.results.batch_search import BatchSearchResult, BatchStepDown
from gpubench.results.codec import OMIT_EMPTY, Record
from gpubench.results.device import (
    CheckpointCost,
    DeviceEpoch,
    EnergySummary,
    EvaluationCost,
    ExecutionSettings,
    Throughput,
)
from gpubench.results.memory import MemoryProfile, MemorySplit
from gpubench.results.stability import StabilityReport
from gpubench.results.statistics import EpochTimeStatistics
from gpubench.results.units import MS_PER_S

#: A model's outcomes; ``interrupted``: a signal cut its measurement short (the epochs before it are kept).
ModelStatus = Literal["ok", "oom", "diverged", "thermal_stop", "failed", "interrupted"]
STATUSES: tuple[str, ...] = get_args(ModelStatus)


@dataclass(frozen=True)
class DistributedScaling(Record):
    """The model measured data-parallel by ``world_size`` torchrun processes; ``raw_epoch_times_ms``: per epoch the
    slowest rank's (the all-reduce waits for it); ``scaling_efficiency``: global throughput over ``world_size`` × the
    1-process throughput at the same batch (1.0: linear)."""

    status: ModelStatus = "ok"
    error: str | None = field(default=None, metadata=OMIT_EMPTY)
    world_size: int = 1
    backend: str | None = None
    launcher: str = "torchrun"
    batch_size_per_rank: int | None = None
    steps_per_epoch: int | None = None
    samples_per_step_per_rank: float | None = None
    sample_unit: str | None = None
    raw_epoch_times_ms: list[float] = field(default_factory=list)
    warmup_epoch_times_ms: list[float] = field(default_factory=list)
    per_rank_epoch_times_ms: list[list[float]] = field(default_factory=list)
    statistics: EpochTimeStatistics | None = None
    per_rank_samples_per_second: list[float] = field(default_factory=list)
    global_samples_per_second: float | None = None
    single_process_samples_per_second: float | None = None
    scaling_efficiency: float | None = None
    scaling_efficiency_interval: tuple[float, float] | None = None
    scaling_efficiency_method: str | None = None
    peak_reserved_mb_per_rank: list[float] = field(default_factory=list)
    batch_search: BatchSearchResult | None = field(default=None, metadata=OMIT_EMPTY)
    warnings: list[str] = field(default_factory=list, metadata=OMIT_EMPTY)


@dataclass(frozen=True)
class HostProbe(Record):
    """A fixed amount of host work timed (ms): a pure-Python loop and a small torch CPU operation, so a slower
    reading means a slower host at that moment. ``cpu``: the CPU the process ran on (None where the OS does not say)."""

    python_loop_ms: float
    torch_cpu_op_ms: float
    cpu: int | None = None


@dataclass(frozen=True)
class MeasuredRound(Record):
    """One round of ``epochs`` consecutive measured epochs after a warmed start: ``index`` counts the job's rounds
    from 1, ``started_s`` is seconds since its first; ``host_probe`` is read just before; the device's means."""

    index: int
    epochs: int
    mean_epoch_ms: float
    started_s: float
    host_probe: HostProbe | None = None
    sm_clock_mhz: float | None = None
    power_w: float | None = None
    throttled: bool | None = None


@dataclass(frozen=True)
class ModelResult(Record):
    """One model's outcome (ms, MB): ``status`` one of :data:`STATUSES`, ``error`` why when not ``ok``.
    ``statistics`` summarises exactly ``raw_epoch_times_ms`` (None under two epochs), and the seed's figures derive
    from it; ``rounds``: the measured epochs in rounds; ``*_explained_share``: R² of the round means on the host
    probe and on the board power (:func:`gpubench.stats.host.gpu_wait_share`)."""

    _DERIVED: ClassVar[tuple[str, ...]] = (
        *("mean_epoch_time_ms", "confidence_interval_ms", "p95_latency_ms", "p99_latency_ms"),
        *("coefficient_of_variation", "samples_per_second"),
    )

    status: ModelStatus = "ok"
    error: str | None = None
    memory_usage_mb: float | None = None
    batch_size: int | None = None
    gradient_accumulation_steps: int = 1
    stability: str | None = None
    loss_trend: str | None = None
    raw_epoch_times_ms: list[float] = field(default_factory=list)
    warmup_epoch_times_ms: list[float] = field(default_factory=list)
    epoch_losses: list[float] = field(default_factory=list)
    warmup_epoch_losses: list[float] = field(default_factory=list)
    steps_per_epoch: int | None = None
    samples_per_step: float | None = None
    sample_unit: str | None = None
    first_step_ms: float | None = None
    calibration_seconds: float | None = None
    stop_reason: str | None = None
    statistics: EpochTimeStatistics | None = None
    batch_search: BatchSearchResult | None = field(default=None, metadata=OMIT_EMPTY)
    batch_policy: str | None = field(default=None, metadata=OMIT_EMPTY)
    batch_step_downs: list[BatchStepDown] = field(default_factory=list, metadata=OMIT_EMPTY)
    flops_per_step: float | None = None
    launches_per_step: int | None = field(default=None, metadata=OMIT_EMPTY)
    workload: dict[str, Any] = field(default_factory=dict)
    execution: ExecutionSettings | None = None
    memory: MemoryProfile | None = None
    device_epochs: list[DeviceEpoch] = field(default_factory=list)
    stability_details: StabilityReport | None = None
    energy: EnergySummary | None = None
    warnings: list[str] = field(default_factory=list, metadata=OMIT_EMPTY)
    traceback: str | None = field(default=None, metadata=OMIT_EMPTY)
    calibration_steps: int | None = field(default=None, metadata=OMIT_EMPTY)
    updates_per_step: float | None = field(default=None, metadata=OMIT_EMPTY)
    updates_per_env_step: float | None = field(default=None, metadata=OMIT_EMPTY)
    evaluation: EvaluationCost | None = field(default=None, metadata=OMIT_EMPTY)
    checkpoint: CheckpointCost | None = field(default=None, metadata=OMIT_EMPTY)
    distributed: DistributedScaling | None = field(default=None, metadata=OMIT_EMPTY)
    bytes_per_step: int | None = field(default=None, metadata=OMIT_EMPTY)
    rounds: list[MeasuredRound] = field(default_factory=list, metadata=OMIT_EMPTY)
    host_probe_explained_share: float | None = field(default=None, metadata=OMIT_EMPTY)
    gpu_wait_explained_share: float | None = field(default=None, metadata=OMIT_EMPTY)
    memory_split: MemorySplit | None = field(default=None, metadata=OMIT_EMPTY)
    flops_by_precision: dict[str, float] | None = field(default=None, metadata=OMIT_EMPTY)

    @property
    def epochs_per_round(self) -> list[int]:
        """The epochs of each round, in order; one round of every measured epoch for a run measured in one block."""
        if self.rounds:
            return [r.epochs for r in self.rounds]
        return [len(self.raw_epoch_times_ms)] if self.raw_epoch_times_ms else []

    @property
    def mean_epoch_time_ms(self) -> float | None:
        return self.statistics.mean_ms if self.statistics else None

    @property
    def confidence_interval_ms(self) -> tuple[float, float] | None:
        return self.statistics.confidence_interval_ms if self.statistics else None

    @property
    def p95_latency_ms(self) -> float | None:
        return self.statistics.p95_ms if self.statistics else None

    @property
    def p99_latency_ms(self) -> float | None:
        return self.statistics.p99_ms if self.statistics else None

    @property
    def coefficient_of_variation(self) -> float | None:
        return self.statistics.coefficient_of_variation if self.statistics else None

    @property
    def samples_per_epoch(self) -> float | None:
        """Samples one benchmark epoch consumes (steps per epoch × samples per step)."""
        if not self.steps_per_epoch or not self.samples_per_step:
            return None
        return self.steps_per_epoch * self.samples_per_step

    @property
    def step_time_ms(self) -> float | None:
        if self.statistics is None or not self.steps_per_epoch:
            return None
        return self.statistics.mean_ms / self.steps_per_epoch

    @property
    def samples_per_second(self) -> Throughput | None:
        """Throughput from the mean epoch time and its intervals (``samples_per_epoch / t`` is monotone, so the
        coverage carries over)."""
        samples_per_epoch = self.samples_per_epoch
        if self.statistics is None or samples_per_epoch is None:
            return None
        stats = self.statistics

        def rate(time_ms: float) -> float | None:
            return samples_per_epoch / (time_ms / MS_PER_S) if time_ms > 0 else None

        (t_lo, t_hi), (d_lo, d_hi) = stats.confidence_interval_ms, stats.decision_interval_ms
        unit = f"{self.sample_unit}/s"
        return Throughput(rate(stats.mean_ms), (rate(t_hi), rate(t_lo)), (rate(d_hi), rate(d_lo)), unit)

    @property
    def peak_reserved_mb(self) -> float | None:
        return self.memory.peak_reserved_mb if self.memory else None

    @property
    def measured_device_epochs(self) -> list[DeviceEpoch]:
        return [epoch for epoch in self.device_epochs if epoch.phase == "measured"]

    def to_dict(self) -> dict[str, Any]:
        """The model's section of the report, the seed's keys first."""
        data = super().to_dict()
        seed_first = (
            *("status", "error", "mean_epoch_time_ms", "confidence_interval_ms", "p95_latency_ms", "p99_latency_ms"),
            *("coefficient_of_variation", "memory_usage_mb", "batch_size", "gradient_accumulation_steps", "stability"),
            *("loss_trend", "raw_epoch_times_ms"),
        )
        return {**{key: data[key] for key in seed_first}, **data}
