"""Report dicts shaped like the ones the runner writes, for the decision, projection and cost tests.

The statistics are computed by ``gpubench.stats.epoch_times`` from the epoch times given, exactly as the runner does, so a
test's inputs are measured-style: epoch times, steps per epoch, samples per step, memory peaks, energy.
"""

from typing import Any

import numpy as np

from gpubench.stats.epoch_times import summarize_epoch_times


def noisy_epochs_ms(mean_ms: float, n: int = 10, rel_sd: float = 0.02, seed: int = 0) -> list[float]:
    """``n`` epoch times (ms) scattered around ``mean_ms`` with a relative sd of ``rel_sd``, mean exactly
    ``mean_ms`` (so hand computations can use it)."""
    noise = np.random.default_rng(seed).standard_normal(n)
    noise -= noise.mean()
    return list(mean_ms * (1.0 + rel_sd * noise))


def model_section(
    epoch_times_ms: list[float],
    *,
    steps_per_epoch: int,
    samples_per_step: float,
    sample_unit: str,
    status: str = "ok",
    peak_reserved_mb: float | None = None,
    joules_per_sample: float | None = None,
    flops_per_step: float | None = None,
    calibration_seconds: float = 2.0,
    warmup_epoch_times_ms: tuple[float, ...] = (1500.0, 1100.0),
    throttled_epochs: int = 0,
    batch_search: dict[str, Any] | None = None,
    batch_size: int = 256,
) -> dict[str, Any]:
    """One model's report section (the keys the decision reads, as the runner writes them)."""
    stats = summarize_epoch_times(epoch_times_ms).to_dict() if len(epoch_times_ms) >= 2 else None
    device_epochs = [
        {"phase": "measured", "epoch": i + 1, "throttled": i < throttled_epochs, "throttle_cause": "thermal"}
        for i in range(len(epoch_times_ms))
    ]
    return {
        "status": status,
        "error": None if status == "ok" else "RuntimeError: boom",
        "mean_epoch_time_ms": stats["mean_ms"] if stats else None,
        "batch_size": batch_size,
        "gradient_accumulation_steps": 1,
        "raw_epoch_times_ms": list(epoch_times_ms),
        "warmup_epoch_times_ms": list(warmup_epoch_times_ms),
        "steps_per_epoch": steps_per_epoch,
        "samples_per_step": samples_per_step,
        "sample_unit": sample_unit,
        "first_step_ms": 800.0,
        "calibration_seconds": calibration_seconds,
        "statistics": stats,
        "memory": {"measured": peak_reserved_mb is not None, "peak_reserved_mb": peak_reserved_mb},
        "energy": None if joules_per_sample is None else {"joules_per_sample": joules_per_sample},
        "flops_per_step": flops_per_step,
        "device_epochs": device_epochs,
        **({"batch_search": batch_search} if batch_search else {}),
    }


def gpu_hardware(
    device_name: str = "NVIDIA GeForce RTX 3050 Ti Laptop GPU",
    total_vram_mb: float = 4096.0,
    achieved_tflops: float = 4.24,
) -> dict[str, Any]:
    """The report's ``hardware`` section for a GPU run."""
    return {
        "measured_on": "cuda",
        "device_name": device_name,
        "total_vram_mb": total_vram_mb,
        "usable_vram_mb": total_vram_mb,
        "warmup_stats": {"achieved_tflops": achieved_tflops},
    }


def cpu_hardware(achieved_tflops: float = 0.05) -> dict[str, Any]:
    """The report's ``hardware`` section for a CPU run: no VRAM, no NVML."""
    return {
        "measured_on": "cpu",
        "device_name": "AMD EPYC",
        "total_vram_mb": None,
        "usable_vram_mb": None,
        "warmup_stats": {"achieved_tflops": achieved_tflops},
    }


def report(
    models: dict[str, dict[str, Any]], hardware: dict[str, Any] | None = None, precision: str = "fp32"
) -> dict[str, Any]:
    """A report as written before the recommendation."""
    return {
        "status": "complete",
        "run": {"precision": precision, "compile": "false", "hardware_config": {"name": "auto"}},
        "hardware": hardware or gpu_hardware(),
        "models": models,
    }
