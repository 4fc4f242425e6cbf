"""The burn-in before measuring: matrix multiplications until the device's iteration time and SM clock settle,
because a cold GPU boosts, heats and then settles at a lower clock."""

import time
from collections.abc import Callable

import torch

from gpubench.hardware.identity import device_sampler
from gpubench.hardware.nvml import DeviceSample
from gpubench.hardware.selection import synchronizer
from gpubench.results import WarmupStats
from gpubench.results.units import MS_PER_S

# On the CPU the burn-in only checks that the loop runs.
_CPU_BURN_IN_MAX_SECONDS = 1.0
_CPU_BURN_IN_MATRIX_SIZE = 256
# Matmuls per synchronisation: enough that the sync and the clock read are a negligible part of an iteration.
_BURN_IN_MATMULS_PER_ITERATION = 10
_FLOPS_PER_TFLOP = 1e12


def _relative_spread(values: list[float]) -> float:
    ordered = sorted(values)
    median = ordered[len(ordered) // 2]
    return (ordered[-1] - ordered[0]) / median if median > 0 else float("inf")


def _has_settled(times_ms: list[float], sm_clocks_mhz: list[float | None], window: int, tolerance: float) -> bool:
    """True when the last ``window`` iteration times, and SM clocks where read, agree within ``tolerance``."""
    if len(times_ms) < window or _relative_spread(times_ms[-window:]) > tolerance:
        return False
    recent_clocks = [clock for clock in sm_clocks_mhz[-window:] if clock is not None]
    if len(recent_clocks) < window:
        return True
    return _relative_spread(recent_clocks) <= tolerance


def burn_in(
    device: torch.device,
    *,
    max_seconds: float = 30.0,
    matrix_size: int = 4096,
    tolerance: float = 0.02,
    window: int = 5,
    min_seconds: float = 2.0,
    clock: Callable[[], float] = time.perf_counter,
    sampler: Callable[[], DeviceSample] | None = None,
) -> WarmupStats:
    """Multiply matrices until, after ``min_seconds``, the last ``window`` iteration times and SM clocks spread
    (max − min over median) within ``tolerance``, or until ``max_seconds`` (s; ``stabilised`` False)."""
    if device.type != "cuda":
        max_seconds = min(max_seconds, _CPU_BURN_IN_MAX_SECONDS)
        matrix_size = min(matrix_size, _CPU_BURN_IN_MATRIX_SIZE)
    min_seconds = min(min_seconds, max_seconds)
    sampler = sampler or device_sampler(device)
    synchronize = synchronizer(device)
    generator = torch.Generator(device=device).manual_seed(0)
    left = torch.randn(matrix_size, matrix_size, device=device, generator=generator)
    right = torch.randn(matrix_size, matrix_size, device=device, generator=generator)
    product = torch.empty_like(left)

    times_ms: list[float] = []
    sm_clocks_mhz: list[float | None] = []
    peak_clock_mhz: float | None = None
    sample = DeviceSample()
    stabilised = False
    synchronize()
    start_s = clock()
    while True:
        begin_s = clock()
        for _ in range(_BURN_IN_MATMULS_PER_ITERATION):
            torch.mm(left, right, out=product)
        synchronize()
        end_s = clock()
        times_ms.append((end_s - begin_s) * MS_PER_S)
        sample = sampler()
        sm_clocks_mhz.append(sample.sm_clock_mhz)
        if sample.sm_clock_mhz is not None:
            peak_clock_mhz = max(peak_clock_mhz or 0.0, sample.sm_clock_mhz)
        elapsed_s = end_s - start_s
        if elapsed_s >= min_seconds and _has_settled(times_ms, sm_clocks_mhz, window, tolerance):
            stabilised = True
            break
        if elapsed_s >= max_seconds:
            break

    final_window_ms = times_ms[-window:]
    mean_time_ms = sum(final_window_ms) / len(final_window_ms)
    flops_per_iteration = 2.0 * matrix_size**3 * _BURN_IN_MATMULS_PER_ITERATION
    return WarmupStats(
        epochs=len(times_ms),
        mean_time_ms=mean_time_ms,
        final_temperature_celsius=sample.temperature_c,
        final_sm_clock_mhz=sample.sm_clock_mhz,
        peak_sm_clock_mhz=peak_clock_mhz,
        stabilised=stabilised,
        seconds=elapsed_s,
        matrix_size=matrix_size,
        matmuls_per_iteration=_BURN_IN_MATMULS_PER_ITERATION,
        achieved_tflops=(
            flops_per_iteration / (mean_time_ms / MS_PER_S) / _FLOPS_PER_TFLOP if mean_time_ms > 0 else 0.0
        ),
    )
