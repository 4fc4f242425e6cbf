"""The projected step's interval, part by part, and its calibration from measured cross-card pairs
(benchmarks/cross_card_fit.py, gpubench/decision/cross_card_calibration.json); the whole plan projected from a CPU
run onto a card."""

import json
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from report_factory import cpu_hardware, gpu_hardware, report, ten_hour_estimate

from gpubench.config import load_resolved_config
from gpubench.decision import projection
from gpubench.decision.config import DecisionConfig
from gpubench.decision.estimate import RecurringPlan, estimate_training_time
from gpubench.decision.projection import (
    CPU_REBUILD_FACTOR,
    HOST_RATIO_SPREAD,
    PROJECTION_RELATIVE_ERROR,
    compute_precisions,
    part_interval_ms,
    project_estimate,
    project_step,
    source_throughput,
    split_step,
    target_throughput,
)
from gpubench.hardware.catalog import load_catalog
from gpubench.output.report_file import read_report

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import cross_card_fit  # noqa: E402
from cross_card_check import PairCheck  # noqa: E402

CATALOG = load_catalog()
H100_TFT = ROOT / "benchmarks" / "results" / "2026-12-06-h100-tft"


def pair(model: str, target: str, card_ms: float, host_ms: float, measured_ms: float) -> PairCheck:
    """A pair whose projected step is ``card_ms + host_ms`` (ms), measured at ``measured_ms`` on ``target``."""
    step = card_ms + host_ms
    return PairCheck(model, "x", target, step, (step, step), measured_ms, 1.0, (1.0, 1.0), 1.0, None, host_ms)


# ------------------------------------------------------------------------------------------- the part-by-part step


def test_the_interval_bounds_the_card_part_by_its_error_and_the_host_part_by_its_spread():
    # A 30 ms step of 20 ms card part and 10 ms host part, e = 0.1, r = 2: 20 x 0.9 + 10 / 2 = 23 ms to
    # 20 x 1.1 + 10 x 2 = 42 ms.
    assert part_interval_ms(30.0, 10.0, 30.0, 10.0, card_error=0.1, host_spread=2.0) == pytest.approx((23.0, 42.0))
    # The ends may keep different host parts (a memory-bound alternative keeps only its launches): 50 ms above with
    # 4 ms kept: 46 x 1.1 + 8 = 58.6 ms.
    assert part_interval_ms(30.0, 10.0, 50.0, 4.0, card_error=0.1, host_spread=2.0) == pytest.approx((23.0, 58.6))
    # A step that is all host: the card's error does not enter it, only the machine's spread.
    assert part_interval_ms(8.0, 8.0, 8.0, 8.0, card_error=0.5, host_spread=1.25) == pytest.approx((6.4, 10.0))


def test_a_host_bound_step_says_so_with_its_host_share(monkeypatch):
    monkeypatch.setattr(projection, "PROJECTION_RELATIVE_ERROR", 0.1)
    monkeypatch.setattr(projection, "HOST_RATIO_SPREAD", 2.0)
    # 10 ms on a T4 (320 GB/s, 6.48 attainable TFLOP/s): 0.5 ms compute, 300 launches (7.2 ms), 0.32 GB of traffic
    # (1 ms), 1.3 ms host. On an H100 (tf32 off: 67 TFLOP/s at the T4's η 0.8 = 53.6; 3350 GB/s): compute 0.5 x
    # 6.48 / 53.6 = 0.060448 ms, traffic 1 x 320 / 3350 = 0.095522 ms, launches and host 8.5 ms kept.
    hardware = gpu_hardware("Tesla T4", total_vram_mb=15360.0, achieved_tflops=6.48)
    t4 = source_throughput(report({}, hardware=hardware), CATALOG, 0.7)
    h100 = target_throughput("h100", CATALOG["h100"], "fp32", t4, 0.7)
    split = split_step(10.0, 0.5e-3 * 6.48e12, 6.48, 300, 320_000_000, 320)
    step = project_step(split, t4, h100, measured=False)
    card_ms = 0.5 * 6.48 / 53.6 + 320 / 3350
    assert step.step_ms == pytest.approx(card_ms + 8.5)
    assert step.host_ms == pytest.approx(8.5)
    assert step.host_share == pytest.approx(8.5 / 8.655970, abs=1e-6)
    # (0.155970 x 0.9 + 8.5 / 2, 0.155970 x 1.1 + 8.5 x 2) = (4.390373, 17.171567) ms.
    assert step.interval_ms == pytest.approx((4.390373, 17.171567), abs=1e-6)


# ------------------------------------------------------------------------------------------------ the calibration


def test_leave_one_out_coverage_on_hand_made_pairs():
    # r = 1.5. Card-bound pairs (card part at least half the step) fit e as |m - c - h| / c: a 2/80 = 0.025, b
    # 6/60 = 0.1. Host-bound c: 2 ms card, 30 ms host, measured 50 ms: needs host x 1.6 > 1.5, outside whatever e.
    a = pair("a", "h100", 80.0, 20.0, 102.0)
    b = pair("b", "h200", 60.0, 20.0, 74.0)
    c = pair("c", "h100", 2.0, 30.0, 50.0)
    checks = [a, b, c]
    assert cross_card_fit.card_error(checks) == pytest.approx(0.1)
    # Without a, e = 0.1 (b): a's interval 80 x 0.9 + 20 / 1.5 to 80 x 1.1 + 30 = 85.33 to 118 holds 102. Without
    # b, e = 0.025 (a): b's 60 x 1.025 + 30 = 91.5 holds 74, and 60 x 0.975 + 13.33 = 71.83 is under it. c is
    # outside at any e: 2 x 2 + 45 = 49 < 50. Two of three held-out pairs inside.
    by_model = cross_card_fit.leave_one_model_out(checks, 1.5)
    assert (by_model.inside, by_model.total) == (2, 3)
    # Leave one card out: the h100 pairs against e from b (0.1), the h200 pair against e from a (0.025): a in, c
    # out, b in.
    by_card = cross_card_fit.leave_one_card_out(checks, 1.5)
    assert (by_card.inside, by_card.total) == (2, 3)
    with pytest.raises(ValueError, match="card part is most of its step"):
        cross_card_fit.card_error([c])


def test_the_host_spread_is_the_quantile_of_the_machine_to_machine_probe_ratios():
    probes = [
        cross_card_fit.Probe("one", "dqn", 2.0),
        cross_card_fit.Probe("one", "ppo", 4.0),
        cross_card_fit.Probe("two", "dqn", 3.0),
    ]
    # Only runs of different reports pair: 3/2 = 1.5 and 4/3 = 1.333333; the 0.9 quantile, linear between them,
    # 1.333333 + 0.9 x 0.166667 = 1.483333.
    assert sorted(cross_card_fit.probe_ratios(probes)) == pytest.approx([4 / 3, 1.5])
    assert cross_card_fit.host_spread(probes, 0.9) == pytest.approx(1.483333, abs=1e-6)


@pytest.fixture(scope="module")
def refitted() -> dict:
    """The calibration refitted from the stored reports the file names."""
    stored = json.loads((ROOT / "gpubench" / "decision" / "cross_card_calibration.json").read_text())
    pair_files = sorted({p[key] for p in stored["pairs"] for key in ("source_file", "target_file")})
    probe_files = sorted({p["file"] for p in stored["probes"]})
    return cross_card_fit.fit([ROOT / f for f in pair_files], [ROOT / f for f in probe_files])


def test_the_calibration_file_is_what_the_fit_computes_from_the_stored_pairs(refitted):
    stored = json.loads((ROOT / "gpubench" / "decision" / "cross_card_calibration.json").read_text())
    assert refitted["card_relative_error"] == pytest.approx(stored["card_relative_error"], rel=1e-9)
    assert refitted["host_ratio_spread"] == pytest.approx(stored["host_ratio_spread"], rel=1e-9)
    assert stored["card_relative_error"] == PROJECTION_RELATIVE_ERROR
    assert stored["host_ratio_spread"] == HOST_RATIO_SPREAD
    assert refitted["held_out_coverage"] == stored["held_out_coverage"]
    assert len(stored["pairs"]) >= 12 and stored["level"] == cross_card_fit.LEVEL


def test_the_held_out_coverage_is_at_least_nine_tenths(refitted):
    for coverage in refitted["held_out_coverage"].values():
        assert coverage["pairs"] >= 12
        assert coverage["share"] >= 0.9


# ----------------------------------------------------------------------------------------- the plan from the CPU


def test_a_cpu_runs_tft_projected_onto_the_h100_brackets_the_h100s_hours():
    # The H100's own TFT run gives the hours to hit. The CPU run is built from it: the same step (its FLOPs,
    # launches and bytes counted the same), every time 60 times the H100's (epochs, validation passes, one-off
    # costs), the checkpoint the same. Projected back onto the H100 from the counts, the validation passes and
    # one-off costs are no longer the CPU's (60 x what the H100 measured).
    result = read_report(H100_TFT / "report.json").models["tft"]
    plan = load_resolved_config(H100_TFT / "config_resolved.yaml").decision.plan
    measured = estimate_training_time("tft", result, plan)
    assert measured.recurring.eval_passes > 0 and measured.recurring.checkpoints > 0
    slowdown = 60.0
    recurring = replace(measured.recurring, eval_pass_seconds=measured.recurring.eval_pass_seconds * slowdown)
    on_cpu = replace(
        measured,
        step_ms=measured.step_ms * slowdown,
        mean_epoch_ms=measured.mean_epoch_ms * slowdown,
        halfwidth_ms=measured.halfwidth_ms * slowdown,
        samples_per_second=measured.samples_per_second / slowdown,
        one_off_seconds=measured.one_off_seconds * slowdown,
        one_off_spread_seconds=tuple(s * slowdown for s in measured.one_off_spread_seconds),
        recurring=recurring,
    )
    decision = DecisionConfig()
    cpu = source_throughput(report({}, hardware=cpu_hardware()), CATALOG, decision.assumed_matmul_efficiency)
    h100 = target_throughput(
        "h100", CATALOG["h100"], compute_precisions(result, "fp32"), cpu, decision.assumed_matmul_efficiency
    )
    split = split_step(
        on_cpu.step_ms, result.flops_per_step, None, result.launches_per_step, result.bytes_per_step, None
    )
    step = project_step(split, cpu, h100, measured=False)
    assert step.interval_ms == pytest.approx((step.step_ms / CPU_REBUILD_FACTOR, step.step_ms * CPU_REBUILD_FACTOR))
    projected = project_estimate(
        on_cpu, step.step_ms, step.margin_fraction, step.lower_margin_fraction, from_counts=True
    )
    ratio = step.step_ms / on_cpu.step_ms
    assert projected.recurring.eval_pass_seconds == pytest.approx(on_cpu.recurring.eval_pass_seconds * ratio)
    assert projected.recurring.checkpoint_seconds == measured.recurring.checkpoint_seconds
    assert projected.one_off_seconds == pytest.approx(on_cpu.one_off_seconds * ratio)
    assert projected.lower_hours <= measured.hours <= projected.upper_hours
    assert abs(projected.hours / measured.hours - 1.0) <= 0.5
    # By the figures: 0.504 h projected (the rebuild's step is 0.52 of the H100's), 0.252 to 1.009 h, against the
    # 0.967 h the H100 measured.
    assert (projected.lower_hours, projected.hours, projected.upper_hours) == pytest.approx(
        (0.2522, 0.5044, 1.0088), abs=1e-3
    )
    assert measured.hours == pytest.approx(0.9670, abs=1e-3)


def test_validation_passes_take_the_steps_margins_and_checkpoints_are_kept():
    # 10 h of epochs at 10 ms a step, 100 validation passes of 36 s (1 h) and 10 checkpoints of 36 s (0.1 h), no
    # one-off costs, projected at 5 ms (ratio 0.5) with margins 0.5 above and 0.25 below: epochs 5 h, passes 0.5 h,
    # checkpoints 0.1 h = 5.6 h; upper 5.6 + 0.5 x 5.5 = 8.35 h; lower 5.6 - 0.25 x 5.5 = 4.225 h.
    estimate = replace(
        ten_hour_estimate(), halfwidth_ms=0.0, recurring=RecurringPlan(100, 36.0, 10, 36.0), one_off_seconds=0.0
    )
    projected = project_estimate(estimate, 5.0, 0.5, 0.25)
    assert (projected.recurring.eval_pass_seconds, projected.recurring.checkpoint_seconds) == (18.0, 36.0)
    assert projected.hours == pytest.approx(5.6)
    assert projected.upper_hours == pytest.approx(8.35)
    assert projected.lower_hours == pytest.approx(4.225)
