"""Memory sections (MB): the peak definitions, the measured profile, the leak estimate and the per-epoch timeline."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from gpubench.results.codec import OMIT_EMPTY, Record

#: What each peak counts, carried into the report next to the figures.
PEAK_DEFINITIONS: dict[str, str] = {
    "peak_allocated_mb": "live tensors at the worst moment (torch max_memory_allocated)",
    "peak_reserved_mb": "torch caching allocator's reservation at the worst moment (max_memory_reserved); "
    "what must fit under a VRAM cap",
    "peak_nvml_device_used_mb": "whole card as NVML sees it: all processes, CUDA context, library workspaces (sampled)",
    "peak_nvml_process_mb": "this process per NVML: CUDA context + reserved + workspaces (sampled; None when NVML "
    "cannot attribute memory to this process)",
}


@dataclass(frozen=True)
class LeakEstimate(Record):
    """Growth of allocated memory across epochs: the OLS slope (MB/epoch) with its Student-t interval; ``flagged``
    when the slope exceeds ``threshold_mb_per_epoch`` and the interval excludes zero."""

    slope_mb_per_epoch: float
    interval_mb_per_epoch: tuple[float, float]
    confidence_level: float
    threshold_mb_per_epoch: float
    epochs: int
    flagged: bool


@dataclass(frozen=True)
class MemoryProfile(Record):
    """One model's device memory over its profiled epochs (MB; peaks per :data:`PEAK_DEFINITIONS`, None on the CPU);
    ``allocated_mb_per_epoch`` is the leak series; ``headroom_limit_mb`` = ``batch.headroom`` × the usable VRAM."""

    measured: bool
    peak_allocated_mb: float | None = None
    peak_reserved_mb: float | None = None
    peak_nvml_device_used_mb: float | None = None
    peak_nvml_process_mb: float | None = None
    peak_inactive_split_mb: float | None = None
    num_alloc_retries: int | None = None
    num_ooms: int | None = None
    allocated_mb_per_epoch: list[float] = field(default_factory=list)
    peak_allocated_mb_per_epoch: list[float] = field(default_factory=list)
    peak_reserved_mb_per_epoch: list[float] = field(default_factory=list)
    peak_nvml_device_used_mb_per_epoch: list[float | None] = field(default_factory=list)
    leak: LeakEstimate | None = None
    nvml_samples: int = 0
    sample_interval_ms: float | None = None
    notes: list[str] = field(default_factory=list)
    definitions: dict[str, str] = field(default_factory=lambda: dict(PEAK_DEFINITIONS))
    headroom_exceeded: bool | None = None
    headroom_limit_mb: float | None = None


@dataclass(frozen=True)
class MemoryTimeline:
    """The NVML sampler's readings over one model's measured run, for the VRAM plot (not in the report): times (s,
    ``time.perf_counter``), device-used and process memory (MB, NaN where not read)."""

    times_s: Sequence[float]
    device_used_mb: Sequence[float]
    process_used_mb: Sequence[float]


@dataclass(frozen=True)
class MemorySplit(Record):
    """Where a model's peak device memory goes (MB): parameters, gradients and optimizer state by accounting, and the
    line ``peak(B) = fixed_mb + activations_mb_per_sample × B`` through the search trials' peaks (None without a
    search); ``gap_mb``: measured − predicted peak at the timed ``batch_size``."""

    parameters_mb: float
    gradients_mb: float
    optimizer_state_mb: float
    activations_mb_per_sample: float | None = None
    fixed_mb: float | None = None
    remainder_mb: float | None = None
    fit_sizes: list[int] = field(default_factory=list)
    fit_peaks_mb: list[float] = field(default_factory=list)
    fit_residual_rms_mb: float | None = None
    fit_residual_max_mb: float | None = None
    batch_size: int | None = None
    predicted_peak_mb: float | None = None
    measured_peak_mb: float | None = None
    gap_mb: float | None = None
    headroom: float | None = None
    notes: list[str] = field(default_factory=list, metadata=OMIT_EMPTY)

    @property
    def state_mb(self) -> float:
        """Parameters, gradients and optimizer state (MB): the accounted part of the fixed memory."""
        return self.parameters_mb + self.gradients_mb + self.optimizer_state_mb

    @property
    def has_fit(self) -> bool:
        """Whether the line through the trials exists (a fixed part and a positive per-sample slope)."""
        return (
            self.fixed_mb is not None
            and self.activations_mb_per_sample is not None
            and self.activations_mb_per_sample > 0
        )

    @property
    def largest_tried_batch(self) -> int | None:
        """The largest batch the line's trials measured, beyond which the line extrapolates; None without a line."""
        return max(self.fit_sizes) if self.has_fit else None
