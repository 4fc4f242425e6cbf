"""Where a model's peak device memory goes (MB): parameters, gradients, optimizer state, activations per sample
and a fixed remainder. Two sources check each other: accounting of what training keeps between steps, and a line
``peak(B) = fixed + per_sample × B`` through the search trials' peaks (verification trials fragment further)."""

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

import numpy as np
import torch
from torch import nn

from gpubench.results import BatchTrial, MemorySplit
from gpubench.results.units import BYTES_PER_MB

#: A largest residual above this fraction of the largest peak means the memory per sample changes with the batch.
LINE_MISFIT_FRACTION = 0.1


@dataclass(frozen=True)
class StateBytes:
    """Bytes training keeps between steps: parameters, their gradients and the optimizers' state on the device."""

    parameters_bytes: int
    gradients_bytes: int
    optimizer_state_bytes: int


def _tensor_bytes(tensor: torch.Tensor) -> int:
    return tensor.numel() * tensor.element_size()


def state_bytes(modules: Iterable[nn.Module], optimizers: Iterable[torch.optim.Optimizer]) -> StateBytes:
    """Each parameter once, a gradient per trainable one, and each optimizer-state storage on its parameter's
    device once (Adam's CPU step counter is no device memory)."""
    parameters: dict[int, nn.Parameter] = {}
    for module in modules:
        for parameter in module.parameters():
            parameters.setdefault(id(parameter), parameter)
    parameters_bytes = sum(_tensor_bytes(p) for p in parameters.values())
    gradients_bytes = sum(_tensor_bytes(p) for p in parameters.values() if p.requires_grad)
    storages: dict[int, int] = {}
    for optimizer in optimizers:
        for parameter, state in optimizer.state.items():
            for value in state.values():
                if isinstance(value, torch.Tensor) and value.device == parameter.device:
                    key = value.untyped_storage().data_ptr() if value.numel() else id(value)
                    storages[key] = max(storages.get(key, 0), _tensor_bytes(value))
    return StateBytes(
        parameters_bytes=parameters_bytes, gradients_bytes=gradients_bytes, optimizer_state_bytes=sum(storages.values())
    )


@dataclass(frozen=True)
class PeakLine:
    """The least-squares line through (batch size, peak MB) points and its residuals (rms None with two points)."""

    fixed_mb: float
    per_sample_mb: float
    sizes: tuple[int, ...]
    peaks_mb: tuple[float, ...]
    residual_rms_mb: float | None
    residual_max_mb: float

    def peak_mb(self, batch_size: float) -> float:
        return self.fixed_mb + self.per_sample_mb * batch_size


def fit_peak_line(points: Sequence[tuple[int, float]]) -> PeakLine:
    """The least-squares line through ``points`` (size, peak MB); ValueError under two distinct sizes."""
    sizes = np.array([size for size, _ in points], dtype=float)
    peaks = np.array([peak for _, peak in points], dtype=float)
    if len(np.unique(sizes)) < 2:
        raise ValueError(f"a peak line needs at least two distinct batch sizes, got {sorted(set(sizes.tolist()))}")
    design = np.column_stack([np.ones_like(sizes), sizes])
    (fixed, per_sample), *_ = np.linalg.lstsq(design, peaks, rcond=None)
    residuals = peaks - (fixed + per_sample * sizes)
    degrees_of_freedom = len(points) - 2
    rms = math.sqrt(float(residuals @ residuals) / degrees_of_freedom) if degrees_of_freedom > 0 else None
    return PeakLine(
        fixed_mb=float(fixed),
        per_sample_mb=float(per_sample),
        sizes=tuple(int(size) for size, _ in points),
        peaks_mb=tuple(float(peak) for _, peak in points),
        residual_rms_mb=rms,
        residual_max_mb=float(np.max(np.abs(residuals))),
    )


def fit_points(trials: Sequence[BatchTrial]) -> list[tuple[int, float]]:
    """(size, peak reserved MB) of the search trials with a peak (over-headroom ones too), the highest per size."""
    peaks: dict[int, float] = {}
    for trial in trials:
        if trial.phase == "search" and trial.peak_reserved_mb is not None:
            peaks[trial.size] = max(peaks.get(trial.size, 0.0), trial.peak_reserved_mb)
    return sorted(peaks.items())


def memory_split(
    state: StateBytes,
    trials: Sequence[BatchTrial],
    *,
    batch_size: int | None,
    measured_peak_mb: float | None,
    headroom: float,
) -> MemorySplit:
    """The report's split: ``state`` by accounting, and the line through the search ``trials``' peaks at the timed
    ``batch_size`` beside the measured run's peak (MB)."""
    accounted = MemorySplit(
        parameters_mb=state.parameters_bytes / BYTES_PER_MB,
        gradients_mb=state.gradients_bytes / BYTES_PER_MB,
        optimizer_state_mb=state.optimizer_state_bytes / BYTES_PER_MB,
        batch_size=batch_size,
        measured_peak_mb=measured_peak_mb,
        headroom=headroom,
    )
    points = fit_points(trials)
    if len(points) < 2:
        reason = (
            "no batch search ran (it needs a GPU), so no trial measured a peak"
            if not trials
            else f"the batch search measured a peak at {len(points)} batch size(s); a line needs two"
        )
        return replace(accounted, notes=[f"activations per sample not split: {reason}"])
    line = fit_peak_line(points)
    notes = []
    if line.per_sample_mb <= 0:
        notes.append(
            f"the trials' peaks do not grow with the batch (slope {line.per_sample_mb:.4g} MB per sample): the "
            "activations are lost in the allocator's rounding, and no largest batch is predicted from the line"
        )
    largest_peak = max(line.peaks_mb)
    if line.residual_max_mb > LINE_MISFIT_FRACTION * largest_peak:
        notes.append(
            f"the trials' peaks lie up to {line.residual_max_mb:,.0f} MB off the line "
            f"({line.residual_max_mb / largest_peak:.0%} of the largest): the memory per sample changes with the batch "
            "(a workload that recomputes activations once a batch would not fit, as Mamba-2 does with "
            "recompute_scan=auto), so the largest batches predicted for other cards are uncertain"
        )
    remainder_mb = line.fixed_mb - accounted.state_mb
    if remainder_mb < 0:
        notes.append(
            f"the accounted state ({accounted.state_mb:,.1f} MB) exceeds the line's fixed part ({line.fixed_mb:,.1f} "
            "MB): the trials' peaks do not hold all of it at once (gradients freed before the optimizer's step), or "
            "the line bends over the sizes fitted"
        )
    predicted = None if batch_size is None else line.peak_mb(batch_size)
    return replace(
        accounted,
        activations_mb_per_sample=line.per_sample_mb,
        fixed_mb=line.fixed_mb,
        remainder_mb=remainder_mb,
        fit_sizes=list(line.sizes),
        fit_peaks_mb=list(line.peaks_mb),
        fit_residual_rms_mb=line.residual_rms_mb,
        fit_residual_max_mb=line.residual_max_mb,
        predicted_peak_mb=predicted,
        gap_mb=None if predicted is None or measured_peak_mb is None else measured_peak_mb - predicted,
        notes=notes,
    )
