"""Typed reports shaped like the ones the runner writes, for the decision, projection and cost tests.

Every record is a :mod:`gpubench.results` type, and the statistics are computed by
``gpubench.stats.epoch_times.summarize_epoch_times`` from the epoch times given, exactly as the runner does, so a
test's inputs are measured-style: epoch times, steps per epoch, samples per step, memory peaks, energy. Beside
them, one model's time estimate worked by hand (:func:`ten_hour_estimate`).
"""

import math
from dataclasses import replace

import numpy as np

from gpubench.decision.estimate import TimeEstimate
from gpubench.results import (
    BatchSearchResult,
    BatchTrial,
    CardProjection,
    CostRow,
    DeviceEpoch,
    EnergySummary,
    HardwareReport,
    MemoryProfile,
    ModelResult,
    RunInfo,
    RunReport,
    ThroughputPoint,
    WarmupStats,
)
from gpubench.stats.epoch_times import summarize_epoch_times


def noisy_epochs_ms(mean_ms: float, n: int = 10, rel_sd: float = 0.02, seed: int = 0) -> list[float]:
    """``n`` epoch times (ms) scattered around ``mean_ms`` with a relative sd of ``rel_sd``, mean exactly
    ``mean_ms`` (so hand computations can use it)."""
    noise = np.random.default_rng(seed).standard_normal(n)
    noise -= noise.mean()
    return list(mean_ms * (1.0 + rel_sd * noise))


def _device_epoch(epoch: int, throttled: bool) -> DeviceEpoch:
    """A measured epoch's device record: throttled (cause ``thermal``) or not; no sensor figures."""
    return DeviceEpoch(
        phase="measured",
        epoch=epoch,
        temperature_c=None,
        temperature_status="not measured",
        sm_clock_mhz=None,
        power_w=None,
        mean_power_w=None,
        throttle_reasons=None,
        energy_j=None,
        throttled=throttled,
        throttle_cause="thermal" if throttled else None,
    )


def batch_search(
    batch_size: int,
    *,
    largest_fitting_size: int,
    knee_size: int | None,
    peak_limit_mb: float,
    target_effective_batch_size: int = 512,
) -> BatchSearchResult:
    """A batch search over powers of two from 32 whose search fitted ``largest_fitting_size`` and whose
    verification kept ``batch_size``; the throughput grows with the size (``knee_size`` as given)."""
    accumulation = math.ceil(target_effective_batch_size / batch_size)
    sizes = [32 * 2**i for i in range(int(math.log2(largest_fitting_size / 32)) + 1)]
    curve = [ThroughputPoint(size=size, samples_per_s=1000.0 * size / (size + 128)) for size in sizes]
    trials = [
        *(BatchTrial(size=p.size, status="ok", phase="search", steps=3, samples_per_s=p.samples_per_s) for p in curve),
        BatchTrial(size=2 * largest_fitting_size, status="oom", phase="search", error="CUDA out of memory"),
        BatchTrial(size=batch_size, status="ok", phase="verify", steps=3),
    ]
    return BatchSearchResult(
        status="ok",
        batch_size=batch_size,
        largest_fitting_size=largest_fitting_size,
        gradient_accumulation_steps=accumulation,
        effective_batch_size=batch_size * accumulation,
        target_effective_batch_size=target_effective_batch_size,
        knee_size=knee_size,
        knee_fraction=0.9,
        throughput_curve=[p for p in curve if p.size <= batch_size],
        peak_reserved_mb=None,
        peak_limit_mb=peak_limit_mb,
        search_min_size=32,
        search_max_size=4096,
        verify_repeats=1,
        message=f"batch size {batch_size}",
        trials=trials,
    )


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
    launches_per_step: int | None = None,
    calibration_seconds: float = 2.0,
    warmup_epoch_times_ms: tuple[float, ...] = (1500.0, 1100.0),
    throttled_epochs: int = 0,
    batch_search: BatchSearchResult | None = None,
    batch_size: int = 256,
    rounds: list[int] | None = None,
    round_gaps_epochs: list[float] | None = None,
) -> ModelResult:
    """One model's result (what the decision reads, as the runner builds it): the statistics of the epoch times
    (in ``rounds``, ``round_gaps_epochs`` apart: None, back to back), the memory peak (measured when given), the
    energy from ``joules_per_sample`` and the first ``throttled_epochs`` measured epochs throttled."""
    stats = None
    if len(epoch_times_ms) >= 2:
        stats = summarize_epoch_times(epoch_times_ms, rounds=rounds, round_gaps_epochs=round_gaps_epochs)
    energy = None
    if joules_per_sample is not None:
        joules_per_epoch = joules_per_sample * steps_per_epoch * samples_per_step
        energy = EnergySummary(
            joules_per_epoch=joules_per_epoch, joules_per_sample=joules_per_sample, epochs=len(epoch_times_ms)
        )
    return ModelResult(
        status=status,
        error=None if status == "ok" else "RuntimeError: boom",
        memory_usage_mb=peak_reserved_mb,
        batch_size=batch_size,
        gradient_accumulation_steps=1,
        raw_epoch_times_ms=list(epoch_times_ms),
        warmup_epoch_times_ms=list(warmup_epoch_times_ms),
        steps_per_epoch=steps_per_epoch,
        samples_per_step=samples_per_step,
        sample_unit=sample_unit,
        first_step_ms=800.0,
        calibration_seconds=calibration_seconds,
        statistics=stats,
        batch_search=batch_search,
        flops_per_step=flops_per_step,
        launches_per_step=launches_per_step,
        memory=MemoryProfile(measured=peak_reserved_mb is not None, peak_reserved_mb=peak_reserved_mb),
        device_epochs=[_device_epoch(i + 1, i < throttled_epochs) for i in range(len(epoch_times_ms))],
        energy=energy,
    )


def _warmup(achieved_tflops: float) -> WarmupStats:
    return WarmupStats(
        epochs=100,
        mean_time_ms=5.0,
        final_temperature_celsius=None,
        final_sm_clock_mhz=None,
        peak_sm_clock_mhz=None,
        stabilised=True,
        seconds=1.0,
        matrix_size=256,
        matmuls_per_iteration=10,
        achieved_tflops=achieved_tflops,
    )


def gpu_hardware(
    device_name: str = "NVIDIA GeForce RTX 3050 Ti Laptop GPU",
    total_vram_mb: float = 4096.0,
    achieved_tflops: float = 4.24,
) -> HardwareReport:
    """The hardware of a GPU run: the whole card usable, the burn-in's matmul throughput (TFLOP/s)."""
    return HardwareReport(
        measured_on="cuda",
        device_name=device_name,
        total_vram_mb=total_vram_mb,
        usable_vram_mb=total_vram_mb,
        nvml_available=True,
        warmup_stats=_warmup(achieved_tflops),
    )


def cpu_hardware(achieved_tflops: float = 0.05) -> HardwareReport:
    """The hardware of a CPU run: no VRAM, no NVML."""
    return HardwareReport(
        measured_on="cpu", device_name="AMD EPYC", cpu_name="AMD EPYC", warmup_stats=_warmup(achieved_tflops)
    )


def run_info(precision: str = "fp32", hardware: str = "auto") -> RunInfo:
    """The run: the four seed models, at ``precision``, with the ``hardware`` config group chosen (a catalog card
    emulates that card on a bigger GPU)."""
    return RunInfo(
        device="cuda:0",
        models=["dqn", "ppo", "mamba2", "tft"],
        epochs=10,
        warmup_epochs=2,
        precision=precision,
        compile="false",
        seed=0,
        hardware_config={"name": hardware},
        choices={"hardware": hardware},
    )


def report(
    models: dict[str, ModelResult],
    hardware: HardwareReport | None = None,
    precision: str = "fp32",
    hardware_choice: str = "auto",
) -> RunReport:
    """A report as written before the recommendation: every model has run."""
    started = RunReport.start(run_info(precision, hardware_choice), hardware or gpu_hardware(), None)
    return replace(started, status="complete", models=dict(models))


def ten_hour_estimate() -> TimeEstimate:
    """One model's one-card estimate of exactly 10 h of epochs (36,000 epochs of 1 s) and no fixed costs."""
    return TimeEstimate(
        model="dqn",
        sample_unit="env_step",
        plan_samples=36_000 * 800.0,
        plan_basis="by hand",
        samples_per_epoch=800.0,
        samples_per_second=800.0,
        steps_per_epoch=100,
        step_ms=10.0,
        planned_epochs=36_000.0,
        measured_epochs=10,
        mean_epoch_ms=1000.0,
        halfwidth_ms=20.0,
        confidence_level=0.95,
        one_off_seconds=0.0,
        drift_flags=(),
        drift_ms_per_epoch=0.0,
    )


def projection_row(
    card: str,
    hours: float | None,
    *,
    lower: float | None = None,
    upper: float | None = None,
    fits: bool | None = None,
    measured_device: bool = False,
) -> CardProjection:
    """A one-GPU row of the recommendation's projection with the hours (their bounds) and fit given; the card's
    figures unknown."""
    return CardProjection(
        card=card,
        measured_device=measured_device,
        precision="fp32",
        peak_tflops=None,
        attainable_tflops=None,
        memory_bandwidth_gbps=None,
        vram_mb=None,
        training_hours=hours,
        training_hours_upper=upper,
        training_hours_if_memory_bound=None,
        speedup_vs_measured=None,
        fits_in_vram=fits,
        training_hours_lower=lower,
        gpus=1,
    )


def cost_row(
    gpu: str,
    usd: float | None,
    *,
    hours: float = 2.0,
    provider: str = "runpod",
    spot: bool = False,
    fits: bool | None = True,
    gpu_count: int = 1,
    gpus_used: int = 1,
    note: str | None = None,
    price_date: str = "2026-10-29",
) -> CostRow:
    """A row of the cost table: ``usd`` for ``hours`` on ``gpu`` at ``provider`` (price = usd / hours per hour of the
    instance), bounds at 0.75 and 1.25 of each."""
    return CostRow(
        gpu=gpu,
        provider=provider,
        spot=spot,
        gpu_count=gpu_count,
        gpus_used=gpus_used,
        fits_in_vram=fits,
        hours=hours,
        hours_lower=0.75 * hours,
        hours_upper=1.25 * hours,
        usd=usd,
        usd_lower=None if usd is None else 0.75 * usd,
        usd_upper=None if usd is None else 1.25 * usd,
        price_date=price_date,
        price_usd_per_hour=(usd or 0.0) / hours,
        price_source="https://example.org/prices",
        instance=f"{gpu_count}x {gpu}",
        location="",
        training_hours=hours,
        note=note,
    )
