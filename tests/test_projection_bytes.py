"""The step's counted bytes in the projection: the rest after compute and launches split into memory traffic (bytes
at the device's bandwidth) and host work, the traffic scaled by the bandwidth ratio in the point and taken as the
floor of the memory-bound alternative, the CPU's rebuilt step paying for its bytes, and a step without bytes
(an older report) projected exactly as before bytes were counted."""

import re
from dataclasses import replace

import pytest
from report_factory import cpu_hardware, gpu_hardware, model_section, noisy_epochs_ms, report

from gpubench.decision.config import DecisionConfig
from gpubench.decision.projection import (
    PROJECTION_RELATIVE_ERROR,
    counted_step_ms,
    project_step,
    projected_step_ms,
    source_throughput,
    split_step,
    target_throughput,
)
from gpubench.decision.recommendation import build_recommendation
from gpubench.hardware.catalog import load_catalog
from gpubench.results import RunReport, StepSplit

CATALOG = load_catalog()
# An H200 (4,800 GB/s) whose burn-in reached 50.25 of 67 fp32 TFLOP/s (efficiency 0.75), capped to an RTX 3050 Ti
# (192 GB/s, 5.3 fp32 TFLOP/s: 0.75 x 5.3 = 3.975 TFLOP/s attainable).
H200_BURN_IN_TFLOPS = 50.25
# DQN as measured on the H200: a 32.5 ms step of 0.148 ms compute, 924 launches (9.24 ms) and 5 MB of traffic.
DQN_STEP_MS, DQN_COMPUTE_MS, DQN_LAUNCHES, DQN_BYTES = 32.5, 0.148, 924, 5_000_000


def h200_source():
    emulated = report(
        {},
        hardware=gpu_hardware("NVIDIA H200", total_vram_mb=4096.0, achieved_tflops=H200_BURN_IN_TFLOPS),
        hardware_choice="rtx3050ti",
    )
    return source_throughput(emulated, CATALOG, assumed_efficiency=0.7)


def target(name: str, source=None):
    return target_throughput(name, CATALOG[name], "fp32", source or h200_source(), 0.7)


def dqn_split() -> StepSplit:
    source = h200_source()
    flops = DQN_COMPUTE_MS * 1e-3 * H200_BURN_IN_TFLOPS * 1e12
    return split_step(
        DQN_STEP_MS, flops, source.attainable_tflops, DQN_LAUNCHES, DQN_BYTES, source.memory_bandwidth_gbps
    )


# --------------------------------------------------------------------------------------------------- the split


def test_the_rest_splits_into_launches_memory_at_the_bandwidth_and_host_work():
    split = dqn_split()
    # By hand: 5e6 bytes at 4,800 GB/s = 1.0417e-3 ms; the host is what remains of 32.5 - 0.148 - 9.24.
    memory_ms = 5e6 / 4800e9 * 1e3
    assert memory_ms == pytest.approx(1.0417e-3, rel=1e-4)
    assert split.compute_ms == pytest.approx(0.148)
    assert split.launch_ms == pytest.approx(9.24)
    assert split.memory_ms == pytest.approx(memory_ms)
    assert split.host_ms == pytest.approx(32.5 - 0.148 - 9.24 - memory_ms)
    assert split.host_ms == pytest.approx(23.1110, abs=1e-4)
    assert split.bytes_per_step == DQN_BYTES
    assert split.compute_ms + split.launch_ms + split.memory_ms + split.host_ms == pytest.approx(DQN_STEP_MS)


def test_the_memory_part_is_at_most_what_remains_after_compute_and_launches():
    # 10 ms, no FLOPs, 100 launches (1 ms), 48 GB: 10 ms at 4,800 GB/s, more than the 9 ms that remain.
    split = split_step(10.0, None, 50.25, 100, 48_000_000_000, 4800)
    assert (split.launch_ms, split.memory_ms, split.host_ms) == pytest.approx((1.0, 9.0, 0.0))


def test_without_the_source_bandwidth_the_bytes_are_carried_but_not_split():
    split = split_step(10.0, None, 50.25, 100, 5_000_000, None)
    assert (split.memory_ms, split.host_ms, split.bytes_per_step) == (pytest.approx(9.0), None, 5_000_000)


# --------------------------------------------------------------------------------------------------- projection


def test_a_dqn_like_step_on_an_rtx3050ti_scales_only_compute_and_its_counted_traffic():
    split, source, rtx = dqn_split(), h200_source(), target("rtx3050ti")
    assert (source.memory_bandwidth_gbps, rtx.memory_bandwidth_gbps) == (4800, 192)
    # By hand: compute 0.148 x 50.25 / 3.975 = 1.87094 ms; traffic 5e6 B at 192 GB/s = 0.0260417 ms (25x the
    # H200's); launches 9.24 ms and host 23.11096 ms kept.
    compute_ms = 0.148 * 50.25 / 3.975
    memory_ms = 5e6 / 192e9 * 1e3
    host_ms = 32.5 - 0.148 - 9.24 - 5e6 / 4800e9 * 1e3
    point = compute_ms + 9.24 + memory_ms + host_ms
    assert point == pytest.approx(34.2480, abs=1e-4)
    assert projected_step_ms(split, source, rtx) == pytest.approx(point)
    # The alternative's floor, 0.026 ms of traffic + 9.24 ms of launches, is under the point: the point stands.
    assert projected_step_ms(split, source, rtx, memory_bound=True) == pytest.approx(point)
    step = project_step(split, source, rtx, measured=False)
    assert step.interval_ms == pytest.approx((point * (1 - PROJECTION_RELATIVE_ERROR), point * 1.32))
    assert step.margin_fraction == pytest.approx(0.32)
    # Before bytes were counted the alternative scaled the whole 23.1 ms rest by 25: 588.87 ms (pinned below).
    assert step.interval_ms[1] < 46.0


def test_the_memory_bound_alternative_takes_the_counted_traffic_as_the_floor():
    source, rtx = h200_source(), target("rtx3050ti")
    split = split_step(10.0, None, source.attainable_tflops, 100, 48_000_000_000, source.memory_bandwidth_gbps)
    # Point: 1 ms launches + 9 ms memory x 4800/192 = 226 ms. Floor: 48e9 B at 192 GB/s = 250 ms + 1 ms launches.
    assert projected_step_ms(split, source, rtx) == pytest.approx(226.0)
    assert projected_step_ms(split, source, rtx, memory_bound=True) == pytest.approx(251.0)
    step = project_step(split, source, rtx, measured=False)
    assert step.interval_ms == pytest.approx((226.0 * 0.68, 251.0 * 1.32))
    # On the measured device the measurement is the step: no floor above it.
    h200 = target("h200")
    measured = project_step(split, source, h200, measured=True)
    assert (measured.step_ms, measured.memory_bound_ms) == pytest.approx((10.0, 10.0))
    assert measured.interval_ms == pytest.approx((10.0, 10.0))


def test_a_faster_card_shortens_the_traffic_by_its_bandwidth():
    # A 10 ms step on the T4 (320 GB/s, burn-in 6.48 of 8.1 TFLOP/s): 4 ms compute, 300 launches (3 ms),
    # 0.64 GB = 2 ms of traffic, 1 ms of host work.
    t4 = source_throughput(
        report({}, hardware=gpu_hardware("Tesla T4", total_vram_mb=15360.0, achieved_tflops=6.48)), CATALOG, 0.7
    )
    split = split_step(10.0, 4e-3 * 6.48e12, t4.attainable_tflops, 300, 640_000_000, t4.memory_bandwidth_gbps)
    assert (split.compute_ms, split.launch_ms, split.memory_ms, split.host_ms) == pytest.approx((4, 3, 2, 1))
    h100 = target("h100", t4)
    point = 4.0 * 8.1 / 67.0 + 3.0 + 2.0 * 320 / 3350 + 1.0
    assert projected_step_ms(split, t4, h100) == pytest.approx(point)
    assert projected_step_ms(split, t4, h100, memory_bound=True) == pytest.approx(point)


# --------------------------------------------------------------------------------------------------- from the CPU


def test_from_the_cpu_the_rebuilt_step_pays_for_its_bytes_at_the_cards_bandwidth():
    cpu = source_throughput(report({}, hardware=cpu_hardware(0.05)), CATALOG, assumed_efficiency=0.7)
    h100 = target("h100", cpu)
    # 2e12 FLOPs at 0.7 x 67 TFLOP/s = 42.644 ms, 500 launches = 5 ms, 3.35 GB at 3,350 GB/s = 1 ms.
    assert counted_step_ms(2e12, 500, h100, 3_350_000_000) == pytest.approx(2e12 / 46.9e12 * 1e3 + 5.0 + 1.0)
    assert counted_step_ms(2e12, 500, h100) == pytest.approx(2e12 / 46.9e12 * 1e3 + 5.0)
    assert counted_step_ms(2e12, 500, replace(h100, memory_bandwidth_gbps=None), 3_350_000_000) is None


def test_a_cpu_report_with_bytes_projects_them_onto_every_card():
    sections = {
        name: replace(
            model_section(
                noisy_epochs_ms(4000.0, seed=seed),
                steps_per_epoch=1,
                samples_per_step=256,
                sample_unit="env_step",
                flops_per_step=2e12,
                launches_per_step=500,
            ),
            bytes_per_step=1_920_000_000,
        )
        for seed, name in enumerate(("dqn", "ppo"))
    }
    recommendation = build_recommendation(report(sections, hardware=cpu_hardware(0.05)), DecisionConfig(), CATALOG)
    rows = {row.card: row for row in recommendation.projection}
    # rtx3050ti: 2e12 / (0.7 x 5.3e12) = 539.08 ms + 5 ms + 1.92e9 B at 192 GB/s = 10 ms.
    assert rows["rtx3050ti"].models["dqn"].step_ms == pytest.approx(2e12 / 3.71e12 * 1e3 + 5.0 + 10.0)
    assert recommendation.per_model["dqn"].step_split.bytes_per_step == 1_920_000_000


# ------------------------------------------------------------------------------------------- the emulated answer


def _dqn_like_emulated_report(bytes_per_step: int | None) -> RunReport:
    dqn = model_section(
        noisy_epochs_ms(DQN_STEP_MS * 100, seed=1),
        steps_per_epoch=100,
        samples_per_step=8,
        sample_unit="env_step",
        flops_per_step=DQN_COMPUTE_MS * 1e-3 * H200_BURN_IN_TFLOPS * 1e12,
        launches_per_step=DQN_LAUNCHES,
        peak_reserved_mb=200.0,
    )
    hardware = replace(
        gpu_hardware("NVIDIA H200", total_vram_mb=143771.0, achieved_tflops=H200_BURN_IN_TFLOPS), vram_limit_mb=4096.0
    )
    return report({"dqn": replace(dqn, bytes_per_step=bytes_per_step)}, hardware=hardware, hardware_choice="rtx3050ti")


def test_the_emulated_answer_names_the_memory_and_host_parts_and_its_bounds_narrow():
    config = DecisionConfig(critical_models=["dqn"])
    with_bytes = build_recommendation(_dqn_like_emulated_report(DQN_BYTES), config, CATALOG)
    without = build_recommendation(_dqn_like_emulated_report(None), config, CATALOG)
    text = with_bytes.reasoning
    assert re.search(r"dqn 32\.\d ms = 0\.14\d ms compute, 9\.24 ms launches, 0\.00104 ms memory \(4\.77 MB", text)
    assert re.search(r"23\.\d+ ms host", text)
    assert "the counted memory traffic by the bandwidth ratio, the launch and host parts kept" in text
    assert "ms other" in without.reasoning and "ms host" not in without.reasoning
    tft_like = build_recommendation(_dqn_like_emulated_report(2_000_000_000), config, CATALOG)
    assert "(1,907 MB counted)" in tft_like.reasoning
    # The same step: the point barely moves (the traffic is 0.03 ms on the card), but the upper bound is no
    # longer the whole rest x 25.
    assert with_bytes.per_model["dqn"].step_ms == pytest.approx(without.per_model["dqn"].step_ms, rel=1e-3)
    assert with_bytes.estimated_full_training_hours_upper < without.estimated_full_training_hours_upper / 10
    dqn_row = next(row for row in with_bytes.projection if row.card == "rtx3050ti").models["dqn"]
    assert dqn_row.step_ms_if_memory_bound == pytest.approx(dqn_row.step_ms)


# ------------------------------------------------------------------------------------- older reports: unchanged

# The functions' outputs on these inputs before bytes were counted (commit 7325989), for the H200 source above:
# (step ms, FLOPs, launches) -> card: (point, memory-bound alternative, interval, margin fraction).
BEFORE_BYTES = {
    (32.5, 7.6e9, None): {
        "rtx3050ti": (34.260705904440066, 810.6308551581715, (23.297280015019243, 1070.0327288087865)),
        "h100": (32.5, 46.501700452959085, (22.099999999999998, 61.382244597905995)),
    },
    (32.5, 7.6e9, 924): {
        "rtx3050ti": (34.260705904440066, 588.8708551581714, (23.297280015019243, 777.3095288087862)),
        "t4": (33.59978502548984, 357.12237209016644, (22.847853817333085, 471.4015311590197)),
    },
    (59.6, 4.07e11, 3000): {
        "rtx3050ti": (153.89043461935606, 669.9023749178634, (104.6454955411621, 884.2711348915798)),
        "h100": (59.6, 68.90618549045816, (40.528, 90.95616484740476)),
    },
    (10.0, None, None): {"t4": (10.0, 150.0, (6.799999999999999, 198.0))},
}
COUNTED_BEFORE_BYTES = {"rtx3050ti": 11.151949685534591, "h100": 9.391243781094527, "t4": 10.491028806584362}


@pytest.mark.parametrize("inputs", sorted(BEFORE_BYTES, key=str))
def test_a_step_without_bytes_projects_exactly_as_before(inputs):
    source = h200_source()
    step_ms, flops, launches = inputs
    split = split_step(step_ms, flops, source.attainable_tflops, launches, None, source.memory_bandwidth_gbps)
    assert split.host_ms is None and split.bytes_per_step is None
    for card, (point, alternative, interval) in BEFORE_BYTES[inputs].items():
        step = project_step(split, source, target(card), measured=False)
        assert (step.step_ms, step.memory_bound_ms, step.interval_ms) == (point, alternative, interval)


@pytest.mark.parametrize("card", sorted(COUNTED_BEFORE_BYTES))
def test_a_cpu_count_without_bytes_rebuilds_the_step_as_before(card):
    assert counted_step_ms(7.6e9, 924, target(card)) == COUNTED_BEFORE_BYTES[card]


def test_an_old_split_without_bytes_keeps_its_keys():
    split = split_step(32.5, 7.6e9, 50.25, 924)
    assert {"bytes_per_step", "host_ms"}.isdisjoint(split.to_dict())
    assert StepSplit.from_dict(split.to_dict()) == split
