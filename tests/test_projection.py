"""Projection of a measured step to the catalog cards, and the catalog itself."""

import pytest
from report_factory import cpu_hardware, gpu_hardware, model_section, noisy_epochs_ms, report

from gpubench.decision.config import DecisionConfig
from gpubench.decision.projection import (
    BOUND_COMPUTE,
    BOUND_OVERHEAD,
    BOUND_UNKNOWN,
    DeviceThroughput,
    projected_step_ms,
    source_throughput,
    split_step,
    target_throughput,
)
from gpubench.decision.recommendation import build_recommendation
from gpubench.hardware.catalog import load_catalog
from gpubench.results import ModelResult, RunReport

CATALOG = load_catalog()
# A T4 whose burn-in reached 6.48 of its 8.1 fp32 TFLOP/s: matmul efficiency 0.8.
T4_BURN_IN_TFLOPS = 6.48
T4_EFFICIENCY = 0.8


def t4_report(models: dict[str, ModelResult], precision: str = "fp32") -> RunReport:
    hardware = gpu_hardware("Tesla T4", total_vram_mb=15360.0, achieved_tflops=T4_BURN_IN_TFLOPS)
    return report(models, hardware=hardware, precision=precision)


def t4_source() -> DeviceThroughput:
    return source_throughput(t4_report({}), CATALOG, assumed_efficiency=0.7)


# --------------------------------------------------------------------------------------------------- throughput


def test_source_on_a_catalog_card_measures_its_matmul_efficiency():
    source = t4_source()
    assert source.card == "t4"
    assert source.matmul_efficiency == pytest.approx(T4_EFFICIENCY)
    assert source.attainable_tflops == pytest.approx(T4_BURN_IN_TFLOPS)
    assert source.memory_bandwidth_gbps == 320
    bf16 = source_throughput(t4_report({}, precision="bf16"), CATALOG, assumed_efficiency=0.7)
    assert bf16.attainable_tflops == pytest.approx(T4_EFFICIENCY * 65.0)


def test_source_is_the_device_measured_not_the_card_emulated():
    # hardware=rtx3050ti on an H200 caps the VRAM; the speed measured is still the H200's.
    emulated = report(
        {},
        hardware=gpu_hardware("NVIDIA H200", total_vram_mb=4096.0, achieved_tflops=50.25),
        hardware_choice="rtx3050ti",
    )
    source = source_throughput(emulated, CATALOG, assumed_efficiency=0.7)
    assert source.card == "h200"
    assert source.matmul_efficiency == pytest.approx(50.25 / 67.0)


def test_cpu_source_uses_its_burn_in_and_targets_the_assumed_efficiency():
    source = source_throughput(report({}, hardware=cpu_hardware(0.05)), CATALOG, assumed_efficiency=0.7)
    assert source.card is None
    assert source.attainable_tflops == 0.05
    assert source.memory_bandwidth_gbps is None
    target = target_throughput("h100", CATALOG["h100"], "fp32", source, assumed_efficiency=0.7)
    assert target.attainable_tflops == pytest.approx(0.7 * 67.0)


def test_targets_reuse_the_efficiency_measured_on_the_source():
    target = target_throughput("h100", CATALOG["h100"], "fp32", t4_source(), assumed_efficiency=0.7)
    assert target.attainable_tflops == pytest.approx(T4_EFFICIENCY * 67.0)


# --------------------------------------------------------------------------------------------------- the step


def test_compute_bound_step_speeds_up_by_the_peak_ratio():
    # 1 TFLOP in 100 ms on a T4 attaining 6.48 TFLOP/s: the FLOPs alone need 154 ms, so the step is all compute.
    split = split_step(100.0, 1e12, T4_BURN_IN_TFLOPS)
    assert split.bound == BOUND_COMPUTE
    assert (split.compute_ms, split.other_ms) == (100.0, 0.0)
    h100 = target_throughput("h100", CATALOG["h100"], "fp32", t4_source(), 0.7)
    assert projected_step_ms(split, t4_source(), h100) == pytest.approx(100.0 * 8.1 / 67.0)


def test_launch_bound_step_keeps_its_time():
    # A tiny network: 1 MFLOP in 2 ms, a 0.00002 fraction of the attainable rate.
    split = split_step(2.0, 1e6, T4_BURN_IN_TFLOPS)
    assert split.bound == BOUND_OVERHEAD
    assert split.achieved_fraction == pytest.approx(1e6 / 2e-3 / 6.48e12)
    h100 = target_throughput("h100", CATALOG["h100"], "fp32", t4_source(), 0.7)
    projected = projected_step_ms(split, t4_source(), h100)
    assert 2.0 * (1 - 1e-4) < projected < 2.0


def test_mixed_step_scales_only_its_compute_part():
    # 4 ms of compute and 6 ms of overhead in a 10 ms step.
    split = split_step(10.0, 4e-3 * T4_BURN_IN_TFLOPS * 1e12, T4_BURN_IN_TFLOPS)
    assert split.compute_ms == pytest.approx(4.0)
    assert split.bound == BOUND_OVERHEAD
    a100 = target_throughput("a100_40gb", CATALOG["a100_40gb"], "fp32", t4_source(), 0.7)
    assert projected_step_ms(split, t4_source(), a100) == pytest.approx(4.0 * 8.1 / 19.5 + 6.0)


def test_overhead_keeps_its_time_unless_taken_as_memory_bound():
    source = source_throughput(report({}, hardware=gpu_hardware("NVIDIA H100 80GB HBM3")), CATALOG, 0.7)
    split = split_step(10.0, None, source.attainable_tflops)
    assert split.bound == BOUND_UNKNOWN
    for name in ("t4", "h200"):
        target = target_throughput(name, CATALOG[name], "fp32", source, 0.7)
        assert projected_step_ms(split, source, target) == 10.0
        bandwidth_ratio = 3350 / CATALOG[name].memory_bandwidth_gbps
        assert projected_step_ms(split, source, target, memory_bound=True) == pytest.approx(10.0 * bandwidth_ratio)


def test_memory_bound_variant_needs_both_bandwidths():
    source = source_throughput(report({}, hardware=cpu_hardware(0.05)), CATALOG, assumed_efficiency=0.7)
    h100 = target_throughput("h100", CATALOG["h100"], "fp32", source, 0.7)
    split = split_step(10.0, 1e8, source.attainable_tflops)
    assert projected_step_ms(split, source, h100, memory_bound=True) is None
    assert projected_step_ms(split, source, h100) == pytest.approx(2.0 * 0.05 / (0.7 * 67.0) + 8.0)


# --------------------------------------------------------------------------------------------------- the table


def _rl_models(**kwargs) -> dict[str, ModelResult]:
    # Both RL models: 800 env steps per epoch of 1 s (steps of 10 and 20 ms); 2e11 FLOPs take the T4 31 ms at its
    # attainable rate, so with that count both steps are all compute.
    dqn = model_section(
        noisy_epochs_ms(1000.0, seed=1), steps_per_epoch=100, samples_per_step=8, sample_unit="env_step", **kwargs
    )
    ppo = model_section(
        noisy_epochs_ms(1000.0, seed=2), steps_per_epoch=50, samples_per_step=16, sample_unit="env_step", **kwargs
    )
    return {"dqn": dqn, "ppo": ppo}


def test_projection_table_from_a_t4():
    recommendation = build_recommendation(
        t4_report(_rl_models(flops_per_step=2e11, peak_reserved_mb=6000.0)), DecisionConfig(), CATALOG
    )
    rows = {row.card: row for row in recommendation.projection}
    assert sorted(rows) == sorted(CATALOG)
    measured = recommendation.estimated_full_training_hours
    assert rows["t4"].measured_device is True
    assert rows["t4"].training_hours == pytest.approx(measured)
    assert rows["t4"].speedup_vs_measured == pytest.approx(1.0)
    # 2 x 12,500 epochs of 1 s, all compute, scaled by 8.1/67 on an H100; the one-off costs (2 x 4.6 s) stay.
    h100_hours = (25_000 * 8.1 / 67.0 + 2 * 4.6) / 3600
    assert rows["h100"].training_hours == pytest.approx(h100_hours)
    assert rows["h100"].cost_usd_per_training == pytest.approx(h100_hours * 2.9)
    # No time outside compute: whether the rest is launch- or memory-bound makes no difference.
    assert rows["h100"].training_hours_if_memory_bound == pytest.approx(h100_hours)
    assert rows["h100"].models["dqn"].speedup == pytest.approx(67.0 / 8.1)
    assert recommendation.cost_analysis.cloud_speedup_factor == pytest.approx(measured / h100_hours)
    assert rows["rtx3050ti"].fits_in_vram is False  # 6000 MB on a 4 GB card
    assert rows["a100_40gb"].fits_in_vram is True
    assert rows["rtx3050ti"].cost_usd_per_training is None  # not rentable: no price
    assert recommendation.per_model["dqn"].step_split.bound == BOUND_COMPUTE


def test_cloud_price_override_applies_to_the_cloud_card():
    recommendation = build_recommendation(
        t4_report(_rl_models(flops_per_step=2e11)), DecisionConfig(cloud_hourly_price_usd=1.0), CATALOG
    )
    h100 = next(row for row in recommendation.projection if row.card == "h100")
    assert h100.hourly_price_usd == 1.0
    assert recommendation.cost_analysis.cloud_cost_usd_per_training == pytest.approx(h100.training_hours)
