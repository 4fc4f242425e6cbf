"""The step's counted bytes in the projection: the rest after compute and launches split into memory traffic (bytes
at the device's bandwidth) and host work, the traffic scaled by the bandwidth ratio in the point and taken as the
floor of the memory-bound alternative, the CPU's rebuilt step paying for its bytes, and a step without bytes
(an older report) projected exactly as before bytes were counted."""

import re
from dataclasses import replace

import pytest
from report_factory import cpu_hardware, gpu_hardware, model_section, noisy_epochs_ms, report

from gpubench.decision import projection
from gpubench.decision.config import DecisionConfig
from gpubench.decision.projection import (
    LAUNCH_COST_MS,
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
# DQN as measured on the H200: a 32.5 ms step of 0.148 ms compute, 924 launches (924 x 0.024 ms = 22.176 ms) and
# 5 MB of traffic.
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


@pytest.fixture
def round_interval(monkeypatch):
    """Round interval figures for hand-worked answers: the card part within ±5%, the host part within ÷/× 1.5."""
    monkeypatch.setattr(projection, "PROJECTION_RELATIVE_ERROR", 0.05)
    monkeypatch.setattr(projection, "HOST_RATIO_SPREAD", 1.5)


def test_the_rest_splits_into_launches_memory_at_the_bandwidth_and_host_work():
    split = dqn_split()
    # By hand: 924 launches x 0.024 ms = 22.176 ms; 5e6 bytes at 4,800 GB/s = 1.0417e-3 ms; the host is what
    # remains: 32.5 - 0.148 - 22.176 - 0.0010417 = 10.1749583 ms.
    assert LAUNCH_COST_MS == 0.024
    memory_ms = 5e6 / 4800e9 * 1e3
    assert memory_ms == pytest.approx(1.0417e-3, rel=1e-4)
    assert split.compute_ms == pytest.approx(0.148)
    assert split.launch_ms == pytest.approx(22.176)
    assert split.memory_ms == pytest.approx(memory_ms)
    assert split.host_ms == pytest.approx(32.5 - 0.148 - 22.176 - memory_ms)
    assert split.host_ms == pytest.approx(10.1750, abs=1e-4)
    assert split.bytes_per_step == DQN_BYTES
    assert split.compute_ms + split.launch_ms + split.memory_ms + split.host_ms == pytest.approx(DQN_STEP_MS)


def test_the_memory_part_is_at_most_what_remains_after_compute_and_launches():
    # 10 ms, no FLOPs, 100 launches (2.4 ms), 48 GB: 10 ms at 4,800 GB/s, more than the 7.6 ms that remain.
    split = split_step(10.0, None, 50.25, 100, 48_000_000_000, 4800)
    assert (split.launch_ms, split.memory_ms, split.host_ms) == pytest.approx((2.4, 7.6, 0.0))


def test_without_the_source_bandwidth_the_bytes_are_carried_but_not_split():
    # 10 ms less 100 launches x 0.024 ms = 7.6 ms, all of it memory as before bytes were counted.
    split = split_step(10.0, None, 50.25, 100, 5_000_000, None)
    assert (split.memory_ms, split.host_ms, split.bytes_per_step) == (pytest.approx(7.6), None, 5_000_000)


# --------------------------------------------------------------------------------------------------- projection


def test_a_dqn_like_step_on_an_rtx3050ti_scales_only_compute_and_its_counted_traffic(round_interval):
    split, source, rtx = dqn_split(), h200_source(), target("rtx3050ti")
    assert (source.memory_bandwidth_gbps, rtx.memory_bandwidth_gbps) == (4800, 192)
    # By hand: compute 0.148 x 50.25 / 3.975 = 1.87094 ms; traffic 5e6 B at 192 GB/s = 0.0260417 ms (25x the
    # H200's); launches 22.176 ms and host 10.17496 ms kept: 1.87094 + 22.176 + 0.02604 + 10.17496 = 34.24794 ms.
    compute_ms = 0.148 * 50.25 / 3.975
    memory_ms = 5e6 / 192e9 * 1e3
    host_ms = 32.5 - 0.148 - 22.176 - 5e6 / 4800e9 * 1e3
    point = compute_ms + 22.176 + memory_ms + host_ms
    assert point == pytest.approx(34.2479, abs=1e-4)
    assert projected_step_ms(split, source, rtx) == pytest.approx(point)
    # The alternative's floor, 0.026 ms of traffic + 22.176 ms of launches, is under the point: the point stands.
    assert projected_step_ms(split, source, rtx, memory_bound=True) == pytest.approx(point)
    step = project_step(split, source, rtx, measured=False)
    # Part by part: the card part (compute and traffic, 1.87094 + 0.02604 = 1.89698 ms) x (1 ± 0.05), the host
    # part (launches and host, 22.176 + 10.17496 = 32.35096 ms) ÷/x 1.5: 1.80213 + 21.56731 = 23.36944 ms to
    # 1.99183 + 48.52644 = 50.51827 ms. The host part is 94.5% of the step: the host decides, not the card.
    assert step.interval_ms == pytest.approx((23.36944, 50.51827), abs=1e-4)
    assert step.host_share == pytest.approx(32.35096 / point, abs=1e-6)
    assert step.host_share == pytest.approx(0.94461, abs=1e-5)
    # The margin is the upper side: 50.51827 / 34.24794 - 1 = 0.475074.
    assert step.margin_fraction == pytest.approx(0.475074, abs=1e-6)


def test_the_memory_bound_alternative_takes_the_counted_traffic_as_the_floor(round_interval):
    source, rtx = h200_source(), target("rtx3050ti")
    split = split_step(10.0, None, source.attainable_tflops, 100, 48_000_000_000, source.memory_bandwidth_gbps)
    # Point: 100 x 0.024 = 2.4 ms launches + 7.6 ms memory x 4800/192 = 192.4 ms. Floor: 48e9 B at 192 GB/s =
    # 250 ms + 2.4 ms launches = 252.4 ms.
    assert projected_step_ms(split, source, rtx) == pytest.approx(192.4)
    assert projected_step_ms(split, source, rtx, memory_bound=True) == pytest.approx(252.4)
    step = project_step(split, source, rtx, measured=False)
    # Below, the point: its card part 190 ms x 0.95 + its 2.4 ms of launches / 1.5 = 182.1 ms; above, the floor:
    # 250 ms x 1.05 + 2.4 x 1.5 = 266.1 ms.
    assert step.interval_ms == pytest.approx((182.1, 266.1))
    # On the measured device the measurement is the step: no floor above it.
    h200 = target("h200")
    measured = project_step(split, source, h200, measured=True)
    assert (measured.step_ms, measured.memory_bound_ms) == pytest.approx((10.0, 10.0))
    assert measured.interval_ms == pytest.approx((10.0, 10.0))


def test_a_faster_card_shortens_the_traffic_by_its_bandwidth():
    # A 10 ms step on the T4 (320 GB/s, burn-in 6.48 of 8.1 TFLOP/s): 4 ms compute, 125 launches x 0.024 ms (3 ms),
    # 0.64 GB = 2 ms of traffic, 1 ms of host work.
    t4 = source_throughput(
        report({}, hardware=gpu_hardware("Tesla T4", total_vram_mb=15360.0, achieved_tflops=6.48)), CATALOG, 0.7
    )
    split = split_step(10.0, 4e-3 * 6.48e12, t4.attainable_tflops, 125, 640_000_000, t4.memory_bandwidth_gbps)
    assert (split.compute_ms, split.launch_ms, split.memory_ms, split.host_ms) == pytest.approx((4, 3, 2, 1))
    h100 = target("h100", t4)
    point = 4.0 * 8.1 / 67.0 + 3.0 + 2.0 * 320 / 3350 + 1.0
    assert projected_step_ms(split, t4, h100) == pytest.approx(point)
    assert projected_step_ms(split, t4, h100, memory_bound=True) == pytest.approx(point)


# --------------------------------------------------------------------------------------------------- from the CPU


def test_from_the_cpu_the_rebuilt_step_pays_for_its_bytes_at_the_cards_bandwidth():
    cpu = source_throughput(report({}, hardware=cpu_hardware(0.05)), CATALOG, assumed_efficiency=0.7)
    h100 = target("h100", cpu)
    # 2e12 FLOPs at 0.7 x 67 TFLOP/s = 42.644 ms, 500 launches x 0.024 ms = 12 ms, 3.35 GB at 3,350 GB/s = 1 ms.
    assert counted_step_ms(2e12, 500, h100, 3_350_000_000) == pytest.approx(2e12 / 46.9e12 * 1e3 + 12.0 + 1.0)
    assert counted_step_ms(2e12, 500, h100) == pytest.approx(2e12 / 46.9e12 * 1e3 + 12.0)
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
    recommendation = build_recommendation(
        report(sections, hardware=cpu_hardware(0.05)), DecisionConfig(critical_models=["dqn", "ppo"]), CATALOG
    )
    rows = {row.card: row for row in recommendation.projection}
    # rtx3050ti: 2e12 / (0.7 x 5.3e12) = 539.08 ms + 500 x 0.024 = 12 ms + 1.92e9 B at 192 GB/s = 10 ms.
    assert rows["rtx3050ti"].models["dqn"].step_ms == pytest.approx(2e12 / 3.71e12 * 1e3 + 12.0 + 10.0)
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


def test_the_emulated_answer_names_the_memory_and_host_parts_and_its_bounds_narrow(round_interval):
    config = DecisionConfig(critical_models=["dqn"])
    with_bytes = build_recommendation(_dqn_like_emulated_report(DQN_BYTES), config, CATALOG)
    without = build_recommendation(_dqn_like_emulated_report(None), config, CATALOG)
    text = with_bytes.reasoning
    assert re.search(r"dqn 32\.\d ms = 0\.14\d ms compute, 22\.2 ms launches, 0\.00104 ms memory \(4\.77 MB", text)
    assert re.search(r"10\.\d+ ms host", text)
    assert "the counted memory traffic by the bandwidth ratio, the launch and host parts kept" in text
    assert "ms other" in without.reasoning and "ms host" not in without.reasoning
    tft_like = build_recommendation(_dqn_like_emulated_report(2_000_000_000), config, CATALOG)
    assert "(1,907 MB counted)" in tft_like.reasoning
    # The same step: the point barely moves (the traffic is 0.03 ms on the card: 34.24794 ms with the bytes,
    # 1.87094 + 32.352 = 34.22294 ms without), but the upper end is no longer the rest after launches x 25: 50.51827
    # ms (above) against the alternative's card part (1.87094 + 10.176 x 25 = 256.27094) x 1.05 + its launches
    # 22.176 x 1.5 = 302.34849 ms.
    with_row = next(row for row in with_bytes.projection if row.card == "rtx3050ti").models["dqn"]
    without_row = next(row for row in without.projection if row.card == "rtx3050ti").models["dqn"]
    assert with_bytes.per_model["dqn"].step_ms == pytest.approx(without.per_model["dqn"].step_ms, rel=1e-3)
    assert (with_row.step_ms, without_row.step_ms) == pytest.approx((34.24794, 34.22294), abs=1e-5)
    assert with_row.step_ms_if_memory_bound == pytest.approx(with_row.step_ms)
    assert without_row.step_ms_if_memory_bound == pytest.approx(278.44694, abs=1e-5)
    assert with_row.step_ms_interval[1] == pytest.approx(50.51827, abs=1e-4)
    assert without_row.step_ms_interval[1] == pytest.approx(302.34849, abs=1e-4)
    # The training's margin (upper bound less the estimate) narrows with it: the projection's part of it is
    # 50.518 / 34.24794 - 1 = 0.475 of the epochs' time with the bytes against 302.348 / 34.22294 - 1 = 7.83
    # without, more than tenfold beside the measurement's (the same for both).
    with_margin = with_bytes.estimated_full_training_hours_upper - with_bytes.estimated_full_training_hours
    without_margin = without.estimated_full_training_hours_upper - without.estimated_full_training_hours
    assert with_margin < without_margin / 10


# ------------------------------------------------------------------------------------- older reports: unchanged

# The no-bytes path's formulas by hand, for the H200 source above (A_src 50.25 TFLOP/s, bw_src 4,800 GB/s) onto the
# fp32 targets at its efficiency 0.75 (rtx3050ti 3.975 TFLOP/s and 192 GB/s, h100 50.25 and 3,350, t4 6.075 and
# 320): compute t_c = F / A_src, the rest t_o = t - t_c, launches t_l = min(t_o, L x 0.024 ms), memory t_m = t_o -
# t_l; the point t_c x A_src / A_tgt + t_o, the memory-bound alternative t_c x A_src / A_tgt + t_l + t_m x bw_src /
# bw_tgt (t_o x bw_src / bw_tgt where the launches were not counted).
# (step ms, FLOPs, launches) -> card: (point, memory-bound alternative), ms.
BEFORE_BYTES = {
    # t_c = 7.6e9 / 50.25e12 = 0.151244 ms, t_o = 32.348756 ms.
    (32.5, 7.6e9, None): {
        # 7.6e9 / 3.975e12 = 1.911950; point 1.911950 + 32.348756; alternative 1.911950 + 32.348756 x 25.
        "rtx3050ti": (34.260706, 810.630855),
        # Same rate: point 32.5; alternative 0.151244 + 32.348756 x 4800 / 3350 (1.432836) = 0.151244 + 46.350457.
        "h100": (32.5, 46.501700),
    },
    # t_l = 924 x 0.024 = 22.176 ms, t_m = 32.348756 - 22.176 = 10.172756 ms.
    (32.5, 7.6e9, 924): {
        # Alternative 1.911950 + 22.176 + 10.172756 x 25 (254.318906).
        "rtx3050ti": (34.260706, 278.406855),
        # 7.6e9 / 6.075e12 = 1.251029; point 1.251029 + 32.348756; alternative 1.251029 + 22.176 + 10.172756 x 15.
        "t4": (33.599785, 176.018372),
    },
    # t_c = 4.07e11 / 50.25e12 = 8.099502 ms, t_o = 51.500498 ms, t_l = 1250 x 0.024 = 30 ms, t_m = 21.500498 ms
    # (1250 launches: 3000 would take the whole rest at 0.024 ms and leave no memory part to scale).
    (59.6, 4.07e11, 1250): {
        # 4.07e11 / 3.975e12 = 102.389937; point 102.389937 + 51.500498; alternative 102.389937 + 30 + 537.512438.
        "rtx3050ti": (153.890435, 669.902375),
        # Point 59.6; alternative 8.099502 + 30 + 21.500498 x 1.432836 (30.806683).
        "h100": (59.6, 68.906185),
    },
    # No FLOPs, no launches: point 10 ms kept; alternative 10 x 4800 / 320 = 150 ms.
    (10.0, None, None): {"t4": (10.0, 150.0)},
}
# F / A_tgt + 924 x 0.024 ms (22.176): 1.911950, 0.151244 and 1.251029 ms of compute (above) plus the launches.
COUNTED_BEFORE_BYTES = {"rtx3050ti": 24.087950, "h100": 22.327244, "t4": 23.427029}


@pytest.mark.parametrize("inputs", sorted(BEFORE_BYTES, key=str))
def test_a_step_without_bytes_projects_exactly_as_before(inputs, round_interval):
    source = h200_source()
    step_ms, flops, launches = inputs
    split = split_step(step_ms, flops, source.attainable_tflops, launches, None, source.memory_bandwidth_gbps)
    assert split.host_ms is None and split.bytes_per_step is None
    for card, (point, alternative) in BEFORE_BYTES[inputs].items():
        step = project_step(split, source, target(card), measured=False)
        assert (step.step_ms, step.memory_bound_ms) == pytest.approx((point, alternative), abs=1e-6)
        # Every alternative here is at least its point. Below, the point keeps the whole rest after compute (t_o)
        # as host: (point - t_o) x 0.95 + t_o / 1.5. Above, the alternative keeps the launches (t_l; 0 where not
        # counted): (alternative - t_l) x 1.05 + t_l x 1.5. E.g. no FLOPs, no launches on the T4: 10 / 1.5 =
        # 6.666667 ms to 150 x 1.05 = 157.5 ms.
        kept, launches = split.other_ms, split.launch_ms or 0.0
        low = (point - kept) * 0.95 + kept / 1.5
        high = (alternative - launches) * 1.05 + launches * 1.5
        assert step.interval_ms == pytest.approx((low, high), abs=1e-6)
        assert step.margin_fraction == pytest.approx(high / point - 1, abs=1e-6)
    if inputs == (10.0, None, None):
        assert step.interval_ms == pytest.approx((10 / 1.5, 157.5))


@pytest.mark.parametrize("card", sorted(COUNTED_BEFORE_BYTES))
def test_a_cpu_count_without_bytes_rebuilds_the_step_as_before(card):
    assert counted_step_ms(7.6e9, 924, target(card)) == pytest.approx(COUNTED_BEFORE_BYTES[card], abs=1e-6)


def test_an_old_split_without_bytes_keeps_its_keys():
    split = split_step(32.5, 7.6e9, 50.25, 924)
    assert {"bytes_per_step", "host_ms"}.isdisjoint(split.to_dict())
    assert StepSplit.from_dict(split.to_dict()) == split
