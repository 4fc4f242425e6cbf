"""The projection takes each card's peak for the precision a model's FLOPs really ran in (the run's
``flops_by_precision`` record), not only for ``execution.precision``: a stored H200 report of a custom bf16 GPT, a
hand-worked step, and the mixed-precision peak."""

import json
from dataclasses import replace
from datetime import date
from pathlib import Path

import pytest
from report_factory import gpu_hardware, model_section, noisy_epochs_ms, report

from gpubench.decision.config import DecisionConfig, TrainingPlanConfig
from gpubench.decision.projection import compute_precisions, precision_label
from gpubench.decision.recommendation import build_recommendation
from gpubench.hardware.catalog import load_catalog
from gpubench.results import Recommendation, RunReport

CATALOG = load_catalog()
#: A custom GPT-2-small LM (benchmarks/user_models/gpt_language_model.py) measured on the H200 with the default
#: execution.precision fp32; the model autocasts to bf16 itself on a GPU. Written before the precision record.
GPT_LM_REPORT = Path(__file__).parents[1] / "benchmarks" / "results" / "2026-12-02-h200-s7-gpt-lm-report.json"
GPT_LM_DECISION = DecisionConfig(critical_models=["custom"], plan=TrainingPlanConfig(samples={"custom": 2e9}))


def gpt_lm_recommendation(flops_by_precision: dict[str, float] | None) -> Recommendation:
    """The stored report's recommendation, with ``flops_by_precision`` recorded for its model (None: as written)."""
    written = json.loads(GPT_LM_REPORT.read_text())
    if flops_by_precision is not None:
        written["models"]["custom"]["flops_by_precision"] = flops_by_precision
    return build_recommendation(RunReport.from_dict(written), GPT_LM_DECISION, CATALOG, today=date(2026, 12, 2))


def test_a_bf16_gpt_measured_on_the_h200_is_projected_no_faster_on_a_card_with_less_of_both():
    # What the counter records for this step on a GPU: its matmuls and attention all run under the model's own
    # bf16 autocast (tests/test_flops.py counts an autocast layer's FLOPs as bf16).
    flops = json.loads(GPT_LM_REPORT.read_text())["models"]["custom"]["flops_per_step"]
    recommendation = gpt_lm_recommendation({"bf16": flops})
    rows = {row.card: row for row in recommendation.projection}
    h200 = rows["h200"]
    measured_ms = h200.models["custom"].step_ms
    assert h200.measured_device and (h200.precision, h200.peak_tflops) == ("bf16", 989.0)
    # A card with no more bf16 peak and no more bandwidth than the H200 cannot run the step faster.
    h200_card = CATALOG["h200"]
    for name, card in CATALOG.items():
        if name == "h200":
            continue
        assert card.peak_bf16_tflops <= h200_card.peak_bf16_tflops
        assert card.memory_bandwidth_gbps <= h200_card.memory_bandwidth_gbps
        assert rows[name].models["custom"].step_ms >= measured_ms, name
    # The L40S (362 bf16 TFLOP/s, 864 GB/s) is slower by its whole interval, and says why.
    l40s = rows["l40s"].models["custom"]
    assert l40s.step_ms_interval[0] > measured_ms
    assert l40s.slower_cause is not None and l40s.slower_cause.startswith("l40s attains ")
    # At the bf16 peak the step reached 31% of the H200's attainable rate (at the fp32 peak: 4.6 times it, which no
    # step can).
    split = recommendation.per_model["custom"].step_split
    assert split.achieved_fraction == pytest.approx(233.97 / (50.773 / 67.0 * 989.0), rel=1e-3)


def test_the_report_as_written_is_projected_at_its_execution_precision_as_before():
    # No record (a report written before it): the whole step at execution.precision fp32, where the L40S's 91.6
    # TFLOP/s beat the H200's 67: 20.7 ms projected against the 28.3 measured.
    rows = {row.card: row for row in gpt_lm_recommendation(None).projection}
    assert (rows["h200"].precision, rows["h200"].peak_tflops) == ("fp32", 67.0)
    assert rows["l40s"].models["custom"].step_ms == pytest.approx(20.7, abs=0.05)
    assert rows["h200"].models["custom"].step_ms == pytest.approx(28.27, abs=0.01)


# A step measured on an H100 whose burn-in reached 50.25 of its 67 fp32 TFLOP/s (matmul efficiency 0.75): 10 ms,
# 1e12 FLOPs, no launches or bytes counted (so everything but compute is kept as measured).
H100_EFFICIENCY = 50.25 / 67.0
STEP_MS = 10.0
FLOPS = 1e12


def h100_recommendation(flops_by_precision: dict[str, float] | None) -> Recommendation:
    """The recommendation of the H100 step, its FLOPs recorded by precision as given (None: no record)."""
    section = model_section(
        noisy_epochs_ms(STEP_MS * 100), steps_per_epoch=100, samples_per_step=8, sample_unit="env_step"
    )
    flops = sum(flops_by_precision.values()) if flops_by_precision else FLOPS
    section = replace(section, flops_per_step=flops, flops_by_precision=flops_by_precision)
    hardware = gpu_hardware("NVIDIA H100 80GB HBM3", total_vram_mb=81559.0, achieved_tflops=50.25)
    return build_recommendation(
        report({"dqn": section}, hardware=hardware), DecisionConfig(critical_models=["dqn"]), CATALOG
    )


def compute_ms(flops: float, peak_tflops: float) -> float:
    """``flops`` at the efficiency times ``peak_tflops``, in ms."""
    return flops / (H100_EFFICIENCY * peak_tflops * 1e12) * 1e3


def test_a_hand_worked_mixed_precision_step_scales_each_precisions_time_by_its_own_peaks():
    # 90% of the FLOPs in bf16 and 10% in fp32. On the H100: 0.9e12 at 0.75 x 989 and 0.1e12 at 0.75 x 67,
    # 1.213 + 1.990 = 3.203 ms of compute; the other 6.797 ms are kept. On an A100 (312 bf16, 19.5 fp32):
    # 3.846 + 6.838 = 10.684 ms of compute, 17.48 ms in all.
    on_h100 = compute_ms(0.9 * FLOPS, 989.0) + compute_ms(0.1 * FLOPS, 67.0)
    on_a100 = compute_ms(0.9 * FLOPS, 312.0) + compute_ms(0.1 * FLOPS, 19.5)
    recommendation = h100_recommendation({"bf16": 0.9 * FLOPS, "fp32": 0.1 * FLOPS})
    assert recommendation.per_model["dqn"].step_split.compute_ms == pytest.approx(on_h100)
    rows = {row.card: row for row in recommendation.projection}
    step_ms = recommendation.per_model["dqn"].step_split.step_ms
    assert rows["a100_80gb"].models["dqn"].step_ms == pytest.approx(on_a100 + step_ms - on_h100)
    assert rows["a100_80gb"].precision == "bf16 90% + fp32 10%"
    assert rows["a100_80gb"].peak_tflops == pytest.approx(FLOPS / (0.9 * FLOPS / 312.0 + 0.1 * FLOPS / 19.5))
    # All in fp32 (the record, or no record at execution.precision fp32): F / (0.75 x 67) = 19.9 ms is more than the
    # step, so the whole 10 ms step is compute, scaled by 67 / 19.5 on the A100.
    for record in ({"fp32": FLOPS}, None):
        fp32 = {row.card: row for row in h100_recommendation(record).projection}
        assert fp32["a100_80gb"].models["dqn"].step_ms == pytest.approx(step_ms * 67.0 / 19.5)
        assert fp32["a100_80gb"].precision == "fp32"


def test_a_compute_bound_bf16_step_is_not_told_to_measure_bf16():
    # All in fp32 the H100 step is compute-bound (above): the actions suggest bf16 autocast. A step of 8e12 bf16
    # FLOPs (10.8 ms at 0.75 x 989 TFLOP/s) is compute-bound too, but is not told to measure what it runs in.
    advice = "compute-bound in fp32; measure bf16 autocast"
    assert any(advice in action for action in h100_recommendation({"fp32": FLOPS}).recommended_actions)
    bf16 = h100_recommendation({"bf16": 8 * FLOPS})
    assert bf16.per_model["dqn"].step_split.bound == "compute-bound"
    assert not any(advice in action for action in bf16.recommended_actions)


def test_mixed_precision_peaks_add_times_not_rates():
    h200 = CATALOG["h200"]
    assert h200.mixed_peak_tflops({"bf16": 9.0, "fp32": 1.0}) == pytest.approx(10.0 / (9.0 / 989.0 + 1.0 / 67.0))
    assert h200.mixed_peak_tflops({"bf16": 5.0}) == 989.0
    assert h200.mixed_peak_tflops({"fp32": 5.0}, "high") == 494.5  # fp32 matmuls on the tf32 tensor cores
    # A precision the catalog has no peak for leaves the mix without one; parts without FLOPs do not count.
    assert h200.mixed_peak_tflops({"bf16": 5.0, "float64": 1.0}) is None
    assert h200.mixed_peak_tflops({"bf16": 5.0, "float64": 0.0}) == 989.0
    assert h200.mixed_peak_tflops({}) is None
    assert h200.peak_tflops("float8_e4m3fn") is None


def test_a_models_precisions_are_its_record_else_the_runs():
    section = model_section(noisy_epochs_ms(100.0), steps_per_epoch=1, samples_per_step=1, sample_unit="window")
    assert compute_precisions(section, "fp32") == {"fp32": 1.0}
    assert compute_precisions(None, "bf16") == {"bf16": 1.0}
    assert compute_precisions(replace(section, flops_by_precision={"bf16": 3.0}), "fp32") == {"bf16": 3.0}
    assert precision_label({"fp32": 1.0, "bf16": 3.0}) == "bf16 75% + fp32 25%"
    assert precision_label("fp16") == "fp16"


#: ResNet-50 at batch 256 (benchmarks/user_models/resnet50_classifier.py) measured on the H200 in fp32, counted
#: before fp32 convolutions were told apart: its FLOPs are recorded as fp32.
RESNET_REPORT = Path(__file__).parents[1] / "benchmarks" / "results" / "2026-12-03-h200-s10-resnet" / "report.json"
RESNET_DECISION = DecisionConfig(critical_models=["custom"], plan=TrainingPlanConfig(samples={"custom": 1.28e8}))


def resnet_rows(flops_by_precision: dict[str, float]) -> dict:
    written = json.loads(RESNET_REPORT.read_text())
    written["models"]["custom"]["flops_by_precision"] = flops_by_precision
    recommendation = build_recommendation(
        RunReport.from_dict(written), RESNET_DECISION, CATALOG, today=date(2026, 12, 3)
    )
    return {row.card: row.models["custom"] for row in recommendation.projection}


def test_resnets_convolutions_at_tf32_let_the_bandwidth_tell_the_h100_from_the_h200() -> None:
    section = json.loads(RESNET_REPORT.read_text())["models"]["custom"]
    flops, launches, traffic = section["flops_per_step"], section["launches_per_step"], section["bytes_per_step"]
    step_ms = section["mean_epoch_time_ms"] / section["steps_per_epoch"]
    # Counted as fp32, the convolutions need more time at the fp32 peak than the whole step took: the split calls
    # the step all compute, and two cards of one compute peak (67 fp32 TFLOP/s) get the same step.
    as_fp32 = resnet_rows({"fp32": flops})
    assert as_fp32["h100"].step_ms == pytest.approx(as_fp32["h200"].step_ms) == pytest.approx(step_ms)
    # Counted as cuDNN runs them (tf32, 494.5 TFLOP/s on both), the compute is a part of the step, and the
    # traffic that remains after it and the launches takes the bandwidth ratio, 4.8 / 3.35 TB/s (hand-worked).
    efficiency = 50.900615728829 / 67.0  # the burn-in's fp32 matmuls over the H200's fp32 peak
    compute_ms = flops / (efficiency * 494.5e12) * 1e3
    launch_ms = launches * 0.024
    memory_ms = traffic / 4.8e12 * 1e3
    host_ms = step_ms - compute_ms - launch_ms - memory_ms
    expected_h100_ms = compute_ms + launch_ms + memory_ms * 4800 / 3350 + host_ms
    as_tf32 = resnet_rows({"tf32": flops})
    assert as_tf32["h200"].step_ms == pytest.approx(step_ms)
    assert as_tf32["h100"].step_ms == pytest.approx(expected_h100_ms, rel=1e-9)
    assert as_tf32["h100"].step_ms > 1.2 * step_ms


def test_a_tf32_part_takes_the_tf32_peak_or_the_fp32_one_on_a_card_without_tf32() -> None:
    assert CATALOG["h100"].peak_tflops("tf32") == 494.5
    assert CATALOG["t4"].peak_tflops("tf32") == CATALOG["t4"].peak_fp32_tflops
