"""Projection of a measured step to the catalog cards, and the catalog itself."""

import json
from dataclasses import replace
from pathlib import Path

import pytest
from report_factory import cpu_hardware, gpu_hardware, model_section, noisy_epochs_ms, report, ten_hour_estimate

from gpubench.decision import projection
from gpubench.decision.config import DecisionConfig
from gpubench.decision.cost import ENERGY_BOARD_POWER
from gpubench.decision.estimate import combine_estimates, estimate_training_time
from gpubench.decision.projection import (
    BOUND_COMPUTE,
    BOUND_OVERHEAD,
    BOUND_UNKNOWN,
    CPU_REBUILD_FACTOR,
    LAUNCH_COST_MS,
    DeviceThroughput,
    project_estimate,
    project_step,
    projected_step_ms,
    source_throughput,
    split_step,
    target_throughput,
)
from gpubench.decision.recommendation import build_recommendation
from gpubench.decision.scaling import scaled_time
from gpubench.hardware.catalog import load_catalog
from gpubench.results import ModelResult, RunReport, ScalingEfficiency, cheapest_rental

CATALOG = load_catalog()
# A T4 whose burn-in reached 6.48 of its 8.1 fp32 TFLOP/s: matmul efficiency 0.8.
T4_BURN_IN_TFLOPS = 6.48
T4_EFFICIENCY = 0.8


def t4_report(models: dict[str, ModelResult], precision: str = "fp32") -> RunReport:
    hardware = gpu_hardware("Tesla T4", total_vram_mb=15360.0, achieved_tflops=T4_BURN_IN_TFLOPS)
    return report(models, hardware=hardware, precision=precision)


def t4_source() -> DeviceThroughput:
    return source_throughput(t4_report({}), CATALOG, assumed_efficiency=0.7)


@pytest.fixture
def round_interval(monkeypatch):
    """Round interval figures for hand-worked answers: the card part within ±5%, the host part within ÷/× 1.5."""
    monkeypatch.setattr(projection, "PROJECTION_RELATIVE_ERROR", 0.05)
    monkeypatch.setattr(projection, "HOST_RATIO_SPREAD", 1.5)


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
        t4_report(_rl_models(flops_per_step=2e11, peak_reserved_mb=6000.0)),
        DecisionConfig(critical_models=["dqn", "ppo"]),
        CATALOG,
    )
    rows = {row.card: row for row in recommendation.projection}
    assert sorted(rows) == sorted(CATALOG)
    measured = recommendation.estimated_full_training_hours
    assert rows["t4"].measured_device is True
    assert rows["t4"].training_hours == pytest.approx(measured)
    assert rows["t4"].speedup_vs_measured == pytest.approx(1.0)
    # 2 x 12,500 epochs of 1 s, all compute, scaled by 8.1/67 on an H100; the one-off costs (2 x 4.6 s) are steps
    # and scale with them.
    h100_hours = (25_000 + 2 * 4.6) * 8.1 / 67.0 / 3600
    assert rows["h100"].training_hours == pytest.approx(h100_hours)
    # The cloud card's money is its cheapest dated row of the cost table that fits, nothing else.
    h100_rental = cheapest_rental(recommendation.cost_table, "h100")
    assert h100_rental is not None and h100_rental.training_hours == pytest.approx(h100_hours)
    assert recommendation.cost_analysis.cloud_cost_usd_per_training == h100_rental.usd
    assert recommendation.cost_analysis.cloud_price_date == h100_rental.price_date
    # No time outside compute: whether the rest is launch- or memory-bound makes no difference.
    assert rows["h100"].training_hours_if_memory_bound == pytest.approx(h100_hours)
    assert rows["h100"].models["dqn"].speedup == pytest.approx(67.0 / 8.1)
    assert recommendation.cost_analysis.cloud_speedup_factor == pytest.approx(measured / h100_hours)
    assert rows["rtx3050ti"].fits_in_vram is False  # 6000 MB on a 4 GB card
    assert rows["a100_40gb"].fits_in_vram is True
    assert "rtx3050ti" not in {row.gpu for row in recommendation.cost_table}  # not rentable: no dated price
    assert recommendation.per_model["dqn"].step_split.bound == BOUND_COMPUTE


def test_a_cloud_card_without_a_dated_price_says_so_instead_of_using_another_number():
    recommendation = build_recommendation(
        t4_report(_rl_models(flops_per_step=2e11)),
        DecisionConfig(critical_models=["dqn", "ppo"], cloud_card="rtx3060"),
        CATALOG,
    )
    cost = recommendation.cost_analysis
    assert cost.cloud_training_hours is not None and cost.cloud_cost_usd_per_training is None
    assert cost.cloud_hourly_price_usd is None and cost.cloud_provider is None
    assert any("rtx3060: no dated price" in note for note in cost.notes)
    assert "rtx3060" in recommendation.reasoning and "(no dated price)" in recommendation.reasoning
    cheapest = cheapest_rental(recommendation.cost_table)
    assert cost.cheapest_label == cheapest.label and cost.cheapest_card_cost_usd_per_training == cheapest.usd


# ------------------------------------------------------------------------------------------ launches, intervals


def test_the_rest_splits_into_launches_and_memory_and_only_memory_scales_with_bandwidth(round_interval):
    # A 10 ms step on the T4: 4 ms of FLOPs at 6.48 TFLOP/s, 125 launches x 0.024 ms = 3 ms, 3 ms of other work.
    assert LAUNCH_COST_MS == 0.024
    split = split_step(10.0, 4e-3 * T4_BURN_IN_TFLOPS * 1e12, T4_BURN_IN_TFLOPS, launches_per_step=125)
    assert (split.compute_ms, split.launch_ms, split.memory_ms) == pytest.approx((4.0, 3.0, 3.0))
    source = t4_source()
    h100 = target_throughput("h100", CATALOG["h100"], "fp32", source, 0.7)
    # The T4's measured efficiency on both sides: the peak ratio, 4 x 8.1 / 67 = 0.483582 ms of compute.
    compute_on_h100 = 4.0 * 8.1 / 67.0
    step = project_step(split, source, h100, measured=False)
    # Point: 0.483582 + 3 + 3 = 6.483582 ms; memory-bound: 0.483582 + 3 + 3 x 320 / 3350 (0.286567) = 3.770149 ms.
    assert step.step_ms == pytest.approx(compute_on_h100 + 3.0 + 3.0)
    assert step.step_ms == pytest.approx(6.483582, abs=1e-6)
    assert step.memory_bound_ms == pytest.approx(compute_on_h100 + 3.0 + 3.0 * 320 / 3350)
    assert step.memory_bound_ms == pytest.approx(3.770149, abs=1e-6)
    # The interval spans both projections, part by part (card part x (1 ± 0.05), host part ÷/x 1.5). Below, the
    # memory-bound one: card 3.770149 - 3 launches = 0.770149 x 0.95 = 0.731642, plus 3 / 1.5 = 2: 2.731642 ms.
    # Above, the point, whose bytes were not counted, keeps its whole rest (6 ms): 0.483582 x 1.05 = 0.507761, plus
    # 6 x 1.5 = 9: 9.507761 ms.
    assert step.interval_ms == pytest.approx((2.731642, 9.507761), abs=1e-6)
    assert step.host_ms == pytest.approx(6.0)
    # The margin is the upper side: 9.507761 / 6.483582 - 1 = 0.466436.
    assert step.margin_fraction == pytest.approx(0.466436, abs=1e-6)
    assert step.margin_fraction == pytest.approx(step.interval_ms[1] / step.step_ms - 1)


def test_the_measured_device_itself_has_no_projection_error():
    split = split_step(10.0, 1e10, T4_BURN_IN_TFLOPS, launches_per_step=100)
    t4 = target_throughput("t4", CATALOG["t4"], "fp32", t4_source(), 0.7)
    step = project_step(split, t4_source(), t4, measured=True)
    assert step.step_ms == pytest.approx(10.0)
    assert step.interval_ms == pytest.approx((10.0, 10.0))
    assert step.margin_fraction == pytest.approx(0.0)


def test_tf32_uses_the_tf32_peak_and_a_card_without_it_keeps_fp32():
    assert CATALOG["h100"].peak_tflops("fp32", "high") == 494.5
    assert CATALOG["h100"].peak_tflops("fp32", "highest") == 67.0
    assert CATALOG["t4"].peak_tflops("fp32", "high") == 8.1
    assert CATALOG["a100_40gb"].peak_tflops("bf16", "high") == 312.0


# --------------------------------------------------------------------------------------------------- from the CPU

# A compute-bound step counted on the CPU: 2 TFLOP and 500 kernel launches; the CPU took 4 s per step.
CPU_FLOPS, CPU_LAUNCHES, CPU_STEP_MS = 2e12, 500, 4000.0


def _cpu_counted_report(**overrides) -> RunReport:
    counts = {"flops_per_step": CPU_FLOPS, "launches_per_step": CPU_LAUNCHES, **overrides}
    sections = {
        name: model_section(
            noisy_epochs_ms(CPU_STEP_MS, seed=seed),
            steps_per_epoch=1,
            samples_per_step=256,
            sample_unit="env_step",
            **counts,
        )
        for seed, name in enumerate(("dqn", "ppo"))
    }
    return report(sections, hardware=cpu_hardware(0.05))


def test_from_the_cpu_a_card_step_is_rebuilt_from_flops_and_launches():
    recommendation = build_recommendation(
        _cpu_counted_report(), DecisionConfig(critical_models=["dqn", "ppo"]), CATALOG
    )
    rows = {row.card: row for row in recommendation.projection}
    # By hand: an H100 attains 0.7 x 67 = 46.9 TFLOP/s, so 2e12 FLOPs take 42.644 ms; 500 launches x 0.024 ms =
    # 12 ms: 54.644 ms.
    h100_step_ms = 2e12 / 46.9e12 * 1e3 + 500 * 0.024
    assert h100_step_ms == pytest.approx(54.644, abs=1e-3)
    dqn = rows["h100"].models["dqn"]
    assert dqn.step_ms == pytest.approx(h100_step_ms)
    assert dqn.step_ms_if_memory_bound is None  # bytes are not counted
    # From the CPU the interval is the rebuild within a factor of 2: 54.644 / 2 = 27.322 ms to 54.644 x 2 =
    # 109.288 ms (a GPU source's would be the point / (1 + e) to / (1 - e)).
    assert CPU_REBUILD_FACTOR == 2.0
    assert dqn.step_ms_interval == pytest.approx((27.322, 109.288), abs=1e-3)
    assert rows["h100"].projection_relative_error is None
    assert rows["h100"].projection_interval_factors == (0.5, 2.0)
    # The H100 is now 4000 / 54.644 = 73.2x the 2-core CPU's step, not 1.12x.
    assert dqn.speedup == pytest.approx(CPU_STEP_MS / 54.644, rel=1e-4)
    assert rows["h100"].speedup_vs_measured > 50
    # The bounds carry the rebuild's margins, the interval's sides (the point x 2 above, / 2 below), beside the
    # measurement's.
    # Below: half the epochs' time, plus the fixed costs (which are not projected).
    assert rows["h100"].training_hours_lower < 0.55 * rows["h100"].training_hours
    assert rows["h100"].training_hours_upper > 1.9 * rows["h100"].training_hours  # twice the epochs, plus fixed


def test_from_the_cpu_a_compute_bound_step_scales_with_the_fp32_peak_plus_launches():
    recommendation = build_recommendation(
        _cpu_counted_report(), DecisionConfig(critical_models=["dqn", "ppo"]), CATALOG
    )
    rows = {row.card: row for row in recommendation.projection}
    # By hand, step ms at 0.7 x the fp32 peak plus 500 x 0.024 = 12 ms of launches: T4 2e12/5.67e12 = 352.7 + 12 =
    # 364.7 ms; L4 2e12/21.21e12 = 94.3 + 12 = 106.3 ms.
    t4_step, l4_step = 2e12 / (0.7 * 8.1e12) * 1e3 + 12.0, 2e12 / (0.7 * 30.3e12) * 1e3 + 12.0
    assert rows["t4"].models["dqn"].step_ms == pytest.approx(t4_step)
    assert rows["l4"].models["dqn"].step_ms == pytest.approx(l4_step)
    # The epochs dominate (the one-off costs are seconds against hours): the hours' ratio is the steps'.
    assert rows["t4"].training_hours / rows["l4"].training_hours == pytest.approx(t4_step / l4_step, rel=1e-3)


def test_a_card_projected_slower_than_the_cpu_says_why():
    # The README's mytrain.py with AdamW unfused, as a CPU counts it: a 0.61 ms step of 2.2 MFLOPs and 55
    # operations. On an H100 the 55 launches alone take 55 x 0.024 = 1.32 ms: slower than the CPU, and the
    # projection says it is the launches.
    section = model_section(
        noisy_epochs_ms(0.61),
        steps_per_epoch=1,
        samples_per_step=256,
        sample_unit="env_step",
        flops_per_step=2.2e6,
        launches_per_step=55,
    )
    cpu = report({"dqn": section}, hardware=cpu_hardware(0.05))
    recommendation = build_recommendation(cpu, DecisionConfig(critical_models=["dqn"]), CATALOG)
    h100 = next(row for row in recommendation.projection if row.card == "h100").models["dqn"]
    assert h100.speedup < 1
    assert h100.slower_cause.startswith(
        "55 kernel launches at 24 µs of host time each (1.32 ms of the 1.32 ms projected step) outweigh the "
    )
    assert "a fused optimizer, fused=True" in h100.slower_cause
    assert "dqn is projected slower there than where it was measured: 55 kernel launches" in recommendation.reasoning
    # A step the card runs faster carries no cause.
    faster = build_recommendation(_cpu_counted_report(), DecisionConfig(), CATALOG)
    assert all(row.models["dqn"].slower_cause is None for row in faster.projection)


def test_a_card_whose_interval_holds_the_measured_step_is_not_called_slower():
    # The H200's default run (session 7): on the H100 dqn's step projects to 39.3 ms against 39.3 ms measured, a
    # hair above it through the slower memory, well inside the projection's 45% interval: no cause to state.
    stored = Path(__file__).parents[1] / "benchmarks" / "results" / "2026-12-02-h200-s7-default-report.json"
    h200 = RunReport.from_dict(json.loads(stored.read_text()))
    recommendation = build_recommendation(h200, DecisionConfig(critical_models=["dqn", "ppo"]), CATALOG)
    h100 = next(row for row in recommendation.projection if row.card == "h100")
    low_ms, high_ms = h100.models["dqn"].step_ms_interval
    assert low_ms < recommendation.per_model["dqn"].step_ms < high_ms
    assert all(model.slower_cause is None for model in h100.models.values())
    assert "projected slower" not in recommendation.reasoning


def test_from_the_cpu_without_a_launch_count_the_projection_is_refused_with_the_reason():
    recommendation = build_recommendation(
        _cpu_counted_report(launches_per_step=None), DecisionConfig(critical_models=["dqn", "ppo"]), CATALOG
    )
    h100 = next(row for row in recommendation.projection if row.card == "h100")
    assert h100.training_hours is None
    assert h100.models["dqn"].step_ms is None
    assert "kernel launches could not be counted" in h100.models["dqn"].refused


# --------------------------------------------------------------------------------------------------- emulated card

# An H200 whose burn-in reached 50.25 of 67 fp32 TFLOP/s (efficiency 0.75), capped to an RTX 3050 Ti's 4 GB.
H200_BURN_IN_TFLOPS = 50.25


def _emulated_report() -> RunReport:
    # dqn: a 10 ms step on the H200 = 4 ms of FLOPs at 50.25 TFLOP/s + 125 launches x 0.024 ms (3 ms) + 3 ms other;
    # ppo: a 20 ms step of next to no FLOPs, 500 launches (12 ms) and 8 ms other.
    dqn = model_section(
        noisy_epochs_ms(1000.0, seed=1),
        steps_per_epoch=100,
        samples_per_step=8,
        sample_unit="env_step",
        flops_per_step=4e-3 * H200_BURN_IN_TFLOPS * 1e12,
        launches_per_step=125,
        peak_reserved_mb=2500.0,
    )
    ppo = model_section(
        noisy_epochs_ms(1000.0, seed=2),
        steps_per_epoch=50,
        samples_per_step=16,
        sample_unit="env_step",
        flops_per_step=1e6,
        launches_per_step=500,
        peak_reserved_mb=1200.0,
    )
    hardware = replace(
        gpu_hardware("NVIDIA H200", total_vram_mb=143771.0, achieved_tflops=H200_BURN_IN_TFLOPS), vram_limit_mb=4096.0
    )
    return report({"dqn": dqn, "ppo": ppo}, hardware=hardware, hardware_choice="rtx3050ti")


def test_the_emulated_card_is_the_answers_card_with_projected_times():
    emulated = _emulated_report()
    recommendation = build_recommendation(emulated, DecisionConfig(critical_models=["dqn", "ppo"]), CATALOG)
    assert recommendation.emulated_card == "rtx3050ti"
    assert recommendation.measured_device == "NVIDIA H200"
    # By hand: the 3050 Ti attains 0.75 x 5.3 = 3.975 TFLOP/s, so dqn's 4 ms of compute take 4 x 50.25 / 3.975 =
    # 50.566 ms there; launches and the rest are kept: 56.566 ms. ppo's step is launches and other work: kept.
    dqn_step = 4.0 * 50.25 / 3.975 + 6.0
    assert dqn_step == pytest.approx(56.566, abs=1e-3)
    dqn, ppo = recommendation.per_model["dqn"], recommendation.per_model["ppo"]
    assert dqn.step_ms == pytest.approx(dqn_step)
    assert (dqn.projected_onto, dqn.measured_step_ms) == ("rtx3050ti", pytest.approx(10.0))
    measured_dqn = estimate_training_time(
        "dqn", emulated.models["dqn"], DecisionConfig(critical_models=["dqn", "ppo"]).plan
    )
    measured_ppo = estimate_training_time(
        "ppo", emulated.models["ppo"], DecisionConfig(critical_models=["dqn", "ppo"]).plan
    )
    ppo_ratio = ppo.step_ms / measured_ppo.step_ms
    assert ppo_ratio == pytest.approx(1.0, abs=1e-3)
    # The one-off costs are steps too: scaled with them.
    expected_hours = (
        (measured_dqn.epochs_seconds + measured_dqn.one_off_seconds) * dqn_step / 10.0
        + (measured_ppo.epochs_seconds + measured_ppo.one_off_seconds) * ppo_ratio
    ) / 3600
    assert recommendation.estimated_full_training_hours == pytest.approx(expected_hours)
    assert recommendation.measured_device_hours == pytest.approx(measured_dqn.hours + measured_ppo.hours)
    # The bounds are wider than the measurement's by at least the projection's margin, the interval's upper side
    # relative to the point, of the epochs' time.
    row = next(row for row in recommendation.projection if row.card == "rtx3050ti").models["dqn"]
    margin = row.step_ms_interval[1] / row.step_ms - 1
    assert recommendation.estimated_full_training_hours_upper > expected_hours + margin * (
        measured_dqn.epochs_seconds * dqn_step / 10.0 / 3600
    )
    text = recommendation.reasoning
    assert "This answer is about rtx3050ti, emulated on NVIDIA H200" in text
    assert "under its 4,096 MB cap" in text
    assert "On rtx3050ti, training dqn + ppo" in text
    assert "Measured on NVIDIA H200 itself the same training takes" in text
    assert "dqn 10 ms = 4 ms compute, 3 ms launches, 3 ms other" in text
    # The energy is the card's board power over the projected hours, not the H200's counter.
    assert dqn.energy_basis == ENERGY_BOARD_POWER


def test_a_projected_trainings_bounds_take_the_intervals_two_sides(round_interval):
    # 10 h of epochs (36,000 of 1 s, no variance: no measured margin) projected at the same step, all of it kept
    # (no FLOPs: no card part) with the host part within ÷/x 1.5: the margin above is 0.5 of the epochs (5 h) and
    # the one below 1 - 1 / 1.5 = 0.333333 (3.33333 h).
    estimate = replace(ten_hour_estimate(), halfwidth_ms=0.0)
    split = split_step(estimate.step_ms, None, None)
    gpu = DeviceThroughput("a gpu", None, None, None, None, "by hand")
    step = project_step(split, gpu, replace(gpu, name="another"), measured=False)
    assert (step.margin_fraction, step.lower_margin_fraction) == pytest.approx((0.5, 1 / 3))
    projected = project_estimate(estimate, step.step_ms, step.margin_fraction, step.lower_margin_fraction)
    assert projected.hours == pytest.approx(10.0)
    assert projected.upper_hours == pytest.approx(15.0)
    assert projected.lower_hours == pytest.approx(10.0 * 2 / 3)
    # Summed over models as one model's, and on 2 cards at efficiency 1 halved.
    total = combine_estimates([projected, projected])
    assert (total.lower_hours, total.upper_hours) == pytest.approx((2 * 20 / 3, 2 * 15.0))
    on_two = scaled_time(projected, ScalingEfficiency(2, 1.0, (1.0, 1.0), "by hand", measured=True))
    assert (on_two.lower_hours, on_two.upper_hours) == pytest.approx((20 / 3 / 2, 15.0 / 2))


def test_no_projected_lower_bound_runs_to_zero_however_wide_the_two_sides():
    # A measurement whose margin is 60% of the epochs' time (halfwidth and drift) projected with a 50% lower side:
    # added, 60% + 50% would take the whole 10 h; multiplied, 10 h x 0.4 x 0.5 = 2 h remain.
    estimate = replace(ten_hour_estimate(), drift_flags=("drift",))
    measured_fraction = 0.6
    drift_ms = (measured_fraction * 10 * 3600 - estimate.statistical_margin_seconds()) * 1e3 / 36_000
    noisy = replace(estimate, drift_ms_per_epoch=drift_ms)
    assert noisy.lower_margin_seconds == pytest.approx(0.6 * 36_000)
    projected = project_estimate(noisy, noisy.step_ms, 1.0, 0.5)
    assert projected.lower_hours == pytest.approx(10.0 * 0.4 * 0.5)
    assert projected.upper_hours == pytest.approx(10.0 + 6.0 + 10.0)


def test_a_step_rebuilt_from_the_cpus_counts_carries_none_of_the_cpus_spread():
    # The CPU's own epoch-to-epoch spread and drift say nothing of a card's step rebuilt from counts: only the
    # rebuild's factor bounds it. 10 h projected at 5 ms a step instead of 10 ms: 5 h, lower 5 h x 0.5 = 2.5 h,
    # upper 5 h + 5 h = 10 h.
    noisy = replace(ten_hour_estimate(), halfwidth_ms=400.0, drift_flags=("drift",), drift_ms_per_epoch=300.0)
    projected = project_estimate(noisy, 5.0, 1.0, 0.5, from_counts=True)
    assert (projected.halfwidth_ms, projected.drift_ms_per_epoch, projected.drift_flags) == (0.0, 0.0, ())
    assert (projected.hours, projected.lower_hours, projected.upper_hours) == pytest.approx((5.0, 2.5, 10.0))
