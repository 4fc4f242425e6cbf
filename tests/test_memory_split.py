"""The memory split (gpubench/measure/memory_split.py) and what fits where (gpubench/decision/batch_fit.py): the
accounting against hand-counted tensors, the line through the trials against a synthetic oracle whose peak is exactly
a + b·B, and the largest batch under a limit against floor((limit − a)/b)."""

import json
import math
import re
from dataclasses import replace
from datetime import date
from pathlib import Path

import pytest
import torch
from torch import nn

from gpubench.decision.batch_fit import fits_at_batch, largest_batch, peak_limit_mb, trial_peak_mb
from gpubench.decision.config import DecisionConfig
from gpubench.decision.recommendation import build_recommendation
from gpubench.hardware.catalog import load_catalog
from gpubench.measure.batch_search import TrialResult, find_max_batch_size
from gpubench.measure.memory_split import (
    LINE_MISFIT_FRACTION,
    StateBytes,
    fit_peak_line,
    fit_points,
    memory_split,
    state_bytes,
)
from gpubench.output.console import memory_split_line, rent_lines
from gpubench.results import BatchTrial, MemorySplit, ModelResult, RunReport
from gpubench.results.units import BYTES_PER_MB

#: nn.Linear(3, 4) then nn.Linear(4, 2): 3·4 + 4 + 4·2 + 2 weights and biases, in four tensors.
HAND_COUNTED_PARAMETERS = 3 * 4 + 4 + 4 * 2 + 2
PARAMETER_TENSORS = 4
FP32_BYTES = 4


def two_layer_net() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))


def step(net: nn.Module, optimizer: torch.optim.Optimizer) -> None:
    """One optimizer update on a random batch, so that the optimizer's state exists."""
    optimizer.zero_grad(set_to_none=True)
    net(torch.randn(5, 3)).square().mean().backward()
    optimizer.step()


def test_accounting_counts_the_hand_counted_parameters_and_a_gradient_for_each() -> None:
    net = two_layer_net()
    counted = state_bytes([net], [])
    assert counted.parameters_bytes == HAND_COUNTED_PARAMETERS * FP32_BYTES
    assert counted.gradients_bytes == HAND_COUNTED_PARAMETERS * FP32_BYTES
    assert counted.optimizer_state_bytes == 0


def test_adam_keeps_two_fp32_moments_per_parameter_and_a_step_counter_per_tensor() -> None:
    net = two_layer_net()
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
    assert state_bytes([net], [optimizer]).optimizer_state_bytes == 0  # Adam creates its state on the first step
    step(net, optimizer)
    # exp_avg and exp_avg_sq (fp32, one value per parameter each), and each tensor's 0-d fp32 step counter, which
    # lives on the CPU here as the parameters do (on a GPU it stays on the CPU and is not device memory).
    expected = 2 * HAND_COUNTED_PARAMETERS * FP32_BYTES + PARAMETER_TENSORS * FP32_BYTES
    assert state_bytes([net], [optimizer]).optimizer_state_bytes == expected


def test_sgd_without_momentum_keeps_no_state_and_with_momentum_one_buffer() -> None:
    net = two_layer_net()
    plain = torch.optim.SGD(net.parameters(), lr=0.1)
    step(net, plain)
    assert state_bytes([net], [plain]).optimizer_state_bytes == 0
    momentum = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    step(net, momentum)
    assert state_bytes([net], [momentum]).optimizer_state_bytes == HAND_COUNTED_PARAMETERS * FP32_BYTES


def test_frozen_parameters_have_no_gradient_and_shared_ones_count_once() -> None:
    net = two_layer_net()
    net[0].weight.requires_grad_(False)
    # The same network twice (a module listed twice, or tied weights) is counted once.
    counted = state_bytes([net, net], [])
    assert counted.parameters_bytes == HAND_COUNTED_PARAMETERS * FP32_BYTES
    assert counted.gradients_bytes == (HAND_COUNTED_PARAMETERS - 3 * 4) * FP32_BYTES


def test_half_precision_parameters_take_two_bytes() -> None:
    net = two_layer_net().half()
    assert state_bytes([net], []).parameters_bytes == HAND_COUNTED_PARAMETERS * 2


# ------------------------------------------------------------------------------------------- the line and the fit


def trial(size: int, peak_mb: float | None, status: str = "ok", phase: str = "search") -> BatchTrial:
    return BatchTrial(size=size, status=status, phase=phase, steps=3, peak_reserved_mb=peak_mb)  # type: ignore[arg-type]


@pytest.mark.parametrize(("fixed_mb", "per_sample_mb"), [(812.0, 1.75), (40.5, 0.0123), (3000.0, 96.0)])
def test_the_line_recovers_an_exact_oracle(fixed_mb: float, per_sample_mb: float) -> None:
    sizes = [64, 128, 256, 512, 1024, 768, 896]
    line = fit_peak_line([(size, fixed_mb + per_sample_mb * size) for size in sizes])
    assert line.fixed_mb == pytest.approx(fixed_mb, rel=1e-9)
    assert line.per_sample_mb == pytest.approx(per_sample_mb, rel=1e-9)
    assert line.residual_rms_mb == pytest.approx(0.0, abs=1e-6)
    assert line.residual_max_mb == pytest.approx(0.0, abs=1e-6)


def test_the_residual_is_the_standard_error_of_the_fit() -> None:
    # Points off the line y = 10 + 2x by +1, −1, −1, +1: those deviations are orthogonal to 1 and to x, so least
    # squares keeps the line, SSR = 4 and the residual standard error is sqrt(4 / (4 − 2)).
    line = fit_peak_line([(1, 13.0), (2, 13.0), (3, 15.0), (4, 19.0)])
    assert (line.fixed_mb, line.per_sample_mb) == pytest.approx((10.0, 2.0))
    assert line.residual_rms_mb == pytest.approx(math.sqrt(2.0))
    assert line.residual_max_mb == pytest.approx(1.0)


def test_a_line_needs_two_distinct_sizes() -> None:
    with pytest.raises(ValueError, match="two distinct"):
        fit_peak_line([(64, 100.0), (64, 101.0)])
    assert fit_peak_line([(64, 100.0), (128, 164.0)]).residual_rms_mb is None


def test_only_search_trials_that_measured_a_peak_are_fitted() -> None:
    trials = [
        trial(64, 164.0),
        trial(128, 228.0),
        trial(256, 356.0, status="over_headroom"),  # it ran: its peak is a measurement
        trial(512, None, status="oom"),  # nothing measured
        trial(128, 260.0, phase="verify"),  # a longer run, fragmented: not on the search's line
    ]
    assert fit_points(trials) == [(64, 164.0), (128, 228.0), (256, 356.0)]


def test_the_split_reports_the_line_the_remainder_and_the_gap_at_the_timed_batch() -> None:
    state = StateBytes(parameters_bytes=10 * BYTES_PER_MB, gradients_bytes=10 * BYTES_PER_MB, optimizer_state_bytes=0)
    trials = [trial(size, 100.0 + 0.5 * size) for size in (64, 128, 256, 512)]
    split = memory_split(state, trials, batch_size=300, measured_peak_mb=262.0, headroom=0.9)
    assert (split.parameters_mb, split.gradients_mb, split.optimizer_state_mb) == (10.0, 10.0, 0.0)
    assert split.fixed_mb == pytest.approx(100.0)
    assert split.activations_mb_per_sample == pytest.approx(0.5)
    assert split.remainder_mb == pytest.approx(80.0)
    assert split.predicted_peak_mb == pytest.approx(250.0)
    assert split.gap_mb == pytest.approx(12.0)
    assert split.fit_sizes == [64, 128, 256, 512] and split.headroom == 0.9 and split.notes == []


def test_without_a_search_only_the_accounting_is_reported_and_the_notes_say_why() -> None:
    state = StateBytes(parameters_bytes=BYTES_PER_MB, gradients_bytes=BYTES_PER_MB, optimizer_state_bytes=0)
    split = memory_split(state, [], batch_size=64, measured_peak_mb=None, headroom=0.9)
    assert split.parameters_mb == 1.0 and split.fixed_mb is None and not split.has_fit
    assert "no batch search ran" in split.notes[0]
    one = memory_split(state, [trial(64, 200.0)], batch_size=64, measured_peak_mb=None, headroom=0.9)
    assert "1 batch size(s); a line needs two" in one.notes[0]


def test_the_split_travels_through_the_report() -> None:
    state = StateBytes(parameters_bytes=BYTES_PER_MB, gradients_bytes=BYTES_PER_MB, optimizer_state_bytes=0)
    split = memory_split(
        state, [trial(64, 164.0), trial(128, 228.0)], batch_size=64, measured_peak_mb=170.0, headroom=0.9
    )
    result = ModelResult(memory_split=split)
    assert ModelResult.from_dict(result.to_dict()).memory_split == split
    assert "memory_split" not in ModelResult().to_dict()  # reports without a split keep their keys


# ------------------------------------------------------------------------------------------- what fits where


EXACT_SIZES = [64, 128, 256, 512, 1024]


@pytest.mark.parametrize("limit_mb", [500.0, 1000.0, 1_234.5, 4096.0, 12_288.0, 16_100.5])
def test_on_an_exact_line_the_largest_batch_is_floor_of_the_room_over_the_per_sample_memory(limit_mb: float) -> None:
    # Below the first trial (500 MB), between trials, on a trial's peak and beyond the last one (12 GB, 16 GB).
    fixed_mb, per_sample_mb = 300.0, 3.3
    peaks = [fixed_mb + per_sample_mb * size for size in EXACT_SIZES]
    expected = max(0, math.floor((limit_mb - fixed_mb) / per_sample_mb))
    assert largest_batch(EXACT_SIZES, peaks, per_sample_mb, limit_mb) == expected


def test_between_trials_the_peak_is_interpolated_and_beyond_them_it_follows_the_slope() -> None:
    # TFT's trials on the H200 (benchmarks/results/2026-12-02-h200-s7-default-report.json), MB.
    sizes = [64, 128, 256, 512, 1024, 2048, 4096]
    peaks = [1452.0, 2508.0, 5732.0, 10244.0, 22388.0, 40492.0, 80822.0]
    # The RTX 3050 Ti's limit, 0.9 × (4,096 − 676) = 3,078 MB, lies between 128 (2,508) and 256 (5,732):
    # 128 + (3,078 − 2,508) / (5,732 − 2,508) × 128 = 150.6.
    assert largest_batch(sizes, peaks, 19.6, peak_limit_mb(4096.0, 676.0, 0.9)) == 150
    assert trial_peak_mb(sizes, peaks, 19.6, 192) == pytest.approx((2508.0 + 5732.0) / 2)
    # Beyond 4,096: 19.6 MB a sample from the last trial.
    assert largest_batch(sizes, peaks, 19.6, 80822.0 + 19.6 * 100) == 4196
    assert trial_peak_mb(sizes, peaks, 19.6, 4196) == pytest.approx(80822.0 + 19.6 * 100)
    # Below 64: 19.6 MB a sample less from the first trial; none when even that is over the limit.
    assert largest_batch(sizes, peaks, 19.6, 1452.0 - 19.6 * 10) == 54
    assert largest_batch(sizes, peaks, 19.6, 100.0) == 0


def test_a_peak_that_falls_at_a_larger_batch_does_not_raise_the_prediction() -> None:
    # The finder assumes a larger batch never needs less; the peaks are made monotone (a running maximum) first.
    sizes, peaks = [100, 200, 300], [1000.0, 2000.0, 1500.0]
    assert largest_batch(sizes, peaks, 10.0, 1999.0) == 199
    assert largest_batch(sizes, peaks, 10.0, 2100.0) == 310


def test_the_peak_read_off_the_trials_inverts_the_largest_batch() -> None:
    sizes = [64, 128, 256, 512, 1024, 2048, 4096]
    peaks = [1452.0, 2508.0, 5732.0, 10244.0, 22388.0, 40492.0, 80822.0]
    for batch in (40, 64, 100, 150, 700, 1448, 2896, 5000):
        limit = trial_peak_mb(sizes, peaks, 19.6, batch + 0.5)
        assert largest_batch(sizes, peaks, 19.6, limit) == batch


def test_a_flat_line_or_no_trials_predicts_nothing() -> None:
    with pytest.raises(ValueError, match="grows with the batch"):
        largest_batch([64, 128], [100.0, 100.0], 0.0, 4000.0)
    with pytest.raises(ValueError, match="trials' peaks"):
        largest_batch([], [], 1.0, 4000.0)


def split_line(fixed_mb: float, per_sample_mb: float, headroom: float = 0.9) -> MemorySplit:
    return MemorySplit(
        parameters_mb=0.0,
        gradients_mb=0.0,
        optimizer_state_mb=0.0,
        fixed_mb=fixed_mb,
        activations_mb_per_sample=per_sample_mb,
        fit_sizes=EXACT_SIZES,
        fit_peaks_mb=[fixed_mb + per_sample_mb * size for size in EXACT_SIZES],
        headroom=headroom,
    )


def test_a_cards_limit_is_the_batch_searchs_headroom_times_its_memory_less_the_overhead() -> None:
    # A 16 GB card that loses 500 MB to the CUDA context: 0.9 × (16,384 − 500) = 14,295.6 MB for the peak.
    assert peak_limit_mb(16_384.0, 500.0, 0.9) == pytest.approx(14_295.6)
    assert fits_at_batch(split_line(1_000.0, 2.0), 16_384.0, 500.0) == math.floor((14_295.6 - 1_000.0) / 2.0)
    assert fits_at_batch(split_line(1_000.0, 2.0), None, 500.0) is None
    assert fits_at_batch(split_line(1_000.0, 2.0), 16_384.0, None) is None
    assert fits_at_batch(None, 16_384.0, 500.0) is None
    assert fits_at_batch(split_line(1_000.0, 0.0), 16_384.0, 500.0) is None  # peaks that do not grow


def test_the_prediction_equals_what_the_finder_finds_under_a_linear_oracle() -> None:
    # The batch finder itself, on an oracle whose peak is exactly a + b·B: under a limit it must stop at
    # floor((limit − a) / b), the batch_fit's prediction from the line through the trials of an unlimited search.
    fixed_mb, per_sample_mb, headroom, overhead_mb = 612.0, 1.37, 0.9, 480.0

    def oracle(size: int, steps: int) -> TrialResult:
        return TrialResult(peak_reserved_mb=fixed_mb + per_sample_mb * size)

    uncapped = find_max_batch_size(oracle, 32, 4096)
    state = StateBytes(parameters_bytes=0, gradients_bytes=0, optimizer_state_bytes=0)
    split = memory_split(state, uncapped.trials, batch_size=None, measured_peak_mb=None, headroom=headroom)
    for card_mb in (2_048.0, 3_000.0, 4_096.0):
        limit = peak_limit_mb(card_mb, overhead_mb, headroom)
        measured = find_max_batch_size(oracle, 1, 1 << 16, peak_limit_mb=limit).best_size
        assert fits_at_batch(split, card_mb, overhead_mb) == measured == math.floor((limit - fixed_mb) / per_sample_mb)


# ------------------------------------------------------------------------------------------- in the recommendation

H200_REPORT = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "2026-12-02-h200-s7-default-report.json"


def test_every_catalog_card_and_cost_row_carries_the_largest_batch_predicted_to_fit() -> None:
    # The H200's default run (session 7), with TFT's split from its own search trials (64 to 4,096 windows).
    stored = RunReport.from_dict(json.loads(H200_REPORT.read_text()))
    tft = stored.models["tft"]
    state = StateBytes(parameters_bytes=0, gradients_bytes=0, optimizer_state_bytes=0)
    split = memory_split(
        state, tft.batch_search.trials, batch_size=tft.batch_size, measured_peak_mb=tft.peak_reserved_mb, headroom=0.9
    )
    report = replace(stored, models={"tft": replace(tft, memory_split=split)})
    catalog = load_catalog()
    rec = build_recommendation(report, DecisionConfig(critical_models=["tft"]), catalog, today=date(2026, 12, 3))
    overhead_mb = stored.hardware.non_allocator_overhead_mb
    assert overhead_mb == 676.0
    for row in rec.projection:
        limit = peak_limit_mb(catalog[row.card].vram_mb, overhead_mb, 0.9)
        expected = largest_batch(split.fit_sizes, split.fit_peaks_mb, split.activations_mb_per_sample, limit)
        assert row.models["tft"].fits_at_batch == expected
    # The RTX 3050 Ti (4 GB): 150, where its own capped search on the same H200 measured 158 (session 6).
    assert rec.card("rtx3050ti").models["tft"].fits_at_batch == 150
    assert rec.cost_table and all(
        row.fits_at_batch == {"tft": rec.card(row.gpu).models["tft"].fits_at_batch} for row in rec.cost_table
    )
    first = next(line for line in rent_lines(rec) if "price of" in line)
    assert f"fits at batch {rec.cost_table[0].fits_at_batch['tft']:,}" in first


def test_the_terminal_line_gives_the_split_the_fit_and_the_gap() -> None:
    state = StateBytes(
        parameters_bytes=3 * BYTES_PER_MB, gradients_bytes=3 * BYTES_PER_MB, optimizer_state_bytes=6 * BYTES_PER_MB
    )
    trials = [trial(size, 100.0 + 0.5 * size + (4.0 if size == 256 else 0.0)) for size in (64, 128, 256, 512)]
    split = memory_split(state, trials, batch_size=300, measured_peak_mb=262.0, headroom=0.9)
    line = memory_split_line("tft", split)
    assert line.startswith("tft memory: parameters 3.0 MB, gradients 3.0 MB, optimizer state 6.0 MB, activations 0.5")
    assert "line through 4 search trials, batch 64 to 512, residual ±" in line
    assert f"at batch 300 the line gives {split.predicted_peak_mb:,.0f} MB, the measured peak 262 MB" in line
    assert memory_split_line("mlp", memory_split(state, [], batch_size=64, measured_peak_mb=None, headroom=0.9)) is None


def test_a_line_the_trials_lie_far_off_is_named_in_the_notes() -> None:
    # Mamba-2's trials on the H200 (session 7): its scan recomputed at 1,024, whose peak stayed at 512's.
    peaks = {64: 7324.0, 128: 14420.0, 256: 28880.0, 512: 57556.0, 1024: 57564.0}
    trials = [trial(size, peak) for size, peak in peaks.items()]
    split = memory_split(StateBytes(0, 0, 0), trials, batch_size=32, measured_peak_mb=None, headroom=0.9)
    assert split.fit_residual_max_mb > LINE_MISFIT_FRACTION * 57564.0
    assert "the memory per sample changes with the batch" in split.notes[0]


def test_a_batch_past_the_largest_trial_prints_as_at_least_that_trial_not_the_lines_extrapolation() -> None:
    # DQN on the H200 (session 7): trials 64 to 4,096 transitions, ~0.004 MB each over a ~100 MB fixed part, so the
    # line puts millions on every card; the terminal says what was measured to fit.
    stored = RunReport.from_dict(json.loads(H200_REPORT.read_text()))
    dqn, tft = stored.models["dqn"], stored.models["tft"]
    state = StateBytes(parameters_bytes=0, gradients_bytes=0, optimizer_state_bytes=0)
    splits = {
        name: memory_split(
            state, m.batch_search.trials, batch_size=m.batch_size, measured_peak_mb=m.peak_reserved_mb, headroom=0.9
        )
        for name, m in (("dqn", dqn), ("tft", tft))
    }
    report = replace(stored, models={name: replace(stored.models[name], memory_split=s) for name, s in splits.items()})
    rec = build_recommendation(
        report, DecisionConfig(critical_models=["dqn", "tft"]), load_catalog(), today=date(2026, 12, 3)
    )
    tried = {name: s.largest_tried_batch for name, s in splits.items()}
    assert tried == {name: max(s.fit_sizes) for name, s in splits.items()} == {"dqn": 4_096, "tft": 4_096}
    for row in rec.cost_table:
        assert row.fits_at_batch["dqn"] > 1_000_000  # the line's extrapolation, kept in the report
    assert rec.card("rtx3050ti").models["tft"].fits_at_batch == 150
    # Without the trials' largest batch the lines print the prediction as it is.
    assert any("fits at batch 1" in line and "≥" not in line for line in rent_lines(rec) if "(dqn)" in line)
    for line in (line for line in rent_lines(rec, tried) if "price of" in line):
        tft_fit = re.search(r"(\S+) \(tft\)", line).group(1)
        assert "≥4,096 (dqn)" in line and line.endswith(" (≥: the largest batch tried)")
        assert tft_fit == "≥4,096" or int(tft_fit.replace(",", "")) <= 4_096
