"""Report plots: which files are drawn for which data, and that they show what they claim (pixels, not just files).

Reports are typed records built from the real producers (the statistics summary, the batch-size chooser with a fake
trial, the decision module), so the plots are tested against the schema the runner writes; a real CLI report is
plotted in test_mlflow_ui.py.
"""

import functools
import math
from dataclasses import replace
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
import pytest
from matplotlib.image import imread
from report_factory import cost_row, projection_row

from gpubench.decision.config import DecisionConfig
from gpubench.decision.recommendation import build_recommendation
from gpubench.hardware.catalog import load_catalog
from gpubench.measure.batch_search import BatchDecision, TrialResult, choose_batch_size
from gpubench.measure.config import BatchConfig
from gpubench.output import plots
from gpubench.results import (
    BatchSearchResult,
    HardwareReport,
    MemoryTimeline,
    ModelResult,
    Recommendation,
    RunInfo,
    RunReport,
    cheapest_rental,
)
from gpubench.stats.epoch_times import summarize_epoch_times

#: A steady model with one stalled epoch (index 7), which the MAD rule flags.
STEADY_MS = [100.0, 101.0, 99.5, 100.4, 100.9, 99.2, 100.1, 160.0, 100.6, 99.8, 100.3, 99.9]
PIXELS = (round(plots.FIGURE_SIZE_IN[1] * plots.DPI), round(plots.FIGURE_SIZE_IN[0] * plots.DPI))


# The two producers below still return dicts or their own types; these helpers read them as the report's records,
# the one place to change when they return typed records themselves.


def as_batch_search(decision: BatchDecision) -> BatchSearchResult:
    """The batch chooser's decision as the report's batch search record."""
    return decision.record


def recommendation_for(report: RunReport) -> Recommendation:
    """The recommendation the decision module builds for ``report`` with the default decision config."""
    return build_recommendation(report, DecisionConfig(critical_models=["dqn", "ppo"]), load_catalog())


def model_result(times_ms: list[float], *, outlier_rule: str = "mad", warmup_ms=(900.0, 101.0)) -> ModelResult:
    return ModelResult(
        batch_size=256,
        steps_per_epoch=7,
        samples_per_step=256.0,
        sample_unit="window",
        raw_epoch_times_ms=list(times_ms),
        warmup_epoch_times_ms=list(warmup_ms),
        epoch_losses=[1.0 / (1 + i) for i in range(len(times_ms))],
        stability="STABLE",
        loss_trend="DECREASING",
        statistics=summarize_epoch_times(times_ms, outlier_rule=outlier_rule),
    )


def cpu_report(**result_options) -> RunReport:
    run = RunInfo(device="cpu", models=["mlp"], epochs=12, warmup_epochs=2, precision="fp32", compile="false", seed=0)
    report = RunReport.start(run, HardwareReport(measured_on="cpu", device_name="cpu"), None)
    return replace(report, models={"mlp": model_result(STEADY_MS, **result_options)})


@functools.cache
def _batch_search() -> BatchSearchResult:
    """A batch search on a card with 4 GB usable, the fake trial running out of memory above it (computed once;
    the garbage collection the chooser runs after every trial to free device memory is skipped: there is none)."""

    def try_batch(size: int, steps: int) -> TrialResult:
        peak_mb = 300.0 + 1.5 * size
        if peak_mb > 4096:
            raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return TrialResult(peak_reserved_mb=peak_mb, samples_per_s=50_000.0 * size / (size + 128))

    with mock.patch("gpubench.measure.batch_search.release_device_memory"):
        decision = choose_batch_size(
            try_batch, BatchConfig(policy="max", min_size=32, max_size=8192), usable_vram_mb=4096
        )
    return as_batch_search(decision)


def gpu_report() -> RunReport:
    """The CPU report plus what a GPU run adds: the batch search and the card's VRAM."""
    report = cpu_report()
    search = _batch_search()
    mlp = replace(report.models["mlp"], batch_search=search, memory_usage_mb=search.peak_reserved_mb)
    hardware = replace(report.hardware, usable_vram_mb=4096.0, total_vram_mb=143_771.0)
    return replace(report, hardware=hardware, models={"mlp": mlp})


def vram_timeline() -> MemoryTimeline:
    t_s = np.linspace(1000.0, 1004.0, 400)
    process_mb = 500.0 + 2500.0 * (t_s > 1000.5)
    process_mb[:10] = math.nan
    return MemoryTimeline(times_s=t_s, device_used_mb=900 + 2500 * (t_s > 1000.5), process_used_mb=process_mb)


def recommendation(**fields: Any) -> Recommendation:
    """A recommendation with the given fields, nothing decided or estimated otherwise."""
    empty: dict[str, Any] = {
        "decision": None,
        "reasoning": "",
        "estimated_full_training_hours": None,
        "estimated_full_training_hours_upper": None,
        "upper_bound_level": None,
        "partial": False,
        "missing_critical_models": [],
        "critical_models": [],
        "decided_on": [],
        "thresholds_hours": {},
        "measured_device": "",
        "per_model": {},
        "cost_analysis": None,
        "projection": [],
        "memory_budget": [],
        "recommended_actions": [],
        "method": {},
    }
    return Recommendation(**{**empty, **fields})


THRESHOLDS_HOURS = {"local_max": 24.0, "cloud_min": 48.0}
RECOMMENDATION = recommendation(
    decision="GRAY_ZONE",
    decided_on=["dqn", "ppo"],
    measured_device="NVIDIA GeForce RTX 3050 Ti Laptop GPU",
    estimated_full_training_hours=30.0,
    estimated_full_training_hours_upper=36.0,
    thresholds_hours=THRESHOLDS_HOURS,
    projection=[
        projection_row("h100", 6.5, upper=7.0),
        projection_row("t4", 55.0, upper=61.0),
        projection_row("rtx3060", 80.2, upper=90.0),
    ],
    # The plot's money is the cost table's: the h100's cheapest row that fits, a t4 row too big for its model
    # (no dated price that fits), the rtx3060 unpriced.
    cost_table=[
        cost_row("h100", 19.4, hours=6.5, provider="lambdalabs"),
        cost_row("h100", 25.0, hours=6.5, provider="aws"),
        cost_row("t4", 19.3, hours=55.0, fits=False),
    ],
)


def rgb(path: Path) -> np.ndarray:
    return np.round(imread(path)[..., :3] * 255).astype(int)


def colour_pixels(image: np.ndarray, hex_colour: str, tolerance: int = 6) -> int:
    """Pixels within ``tolerance`` of ``hex_colour`` in every channel."""
    target = np.array([int(hex_colour[i : i + 2], 16) for i in (1, 3, 5)])
    return int((np.abs(image - target) <= tolerance).all(axis=-1).sum())


def labelled_lines(axes) -> list[str]:
    """Labels of the axes' lines that have one (matplotlib names unlabelled artists such as whisker caps '_...')."""
    return [line.get_label() for line in axes.get_lines() if not line.get_label().startswith("_")]


def assert_drawn(path: Path) -> None:
    """A PNG of the documented size with real content: many colours and a good share of non-white pixels."""
    image = rgb(path)
    assert image.shape[:2] == PIXELS
    packed = (image[..., 0] << 16) | (image[..., 1] << 8) | image[..., 2]
    assert len(np.unique(packed)) > 50
    assert (image < 250).any(axis=-1).mean() > 0.02


def test_cpu_report_gets_the_epoch_time_and_loss_plots_and_no_gpu_ones(tmp_path):
    written = plots.save_report_plots(cpu_report(), tmp_path)
    assert [p.name for p in written] == ["mlp_epoch_times.png", "mlp_loss.png"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mlp_epoch_times.png", "mlp_loss.png"]
    for path in written:
        assert_drawn(path)


def test_outliers_are_highlighted_only_when_the_rule_flags_them(tmp_path):
    flagged = cpu_report()
    assert flagged.models["mlp"].statistics.outlier_indices == (7,)
    unflagged = cpu_report(outlier_rule="none")
    assert unflagged.models["mlp"].statistics.outlier_indices == ()
    with_outlier = rgb(plots.save_report_plots(flagged, tmp_path / "a")[0])
    without = rgb(plots.save_report_plots(unflagged, tmp_path / "b")[0])
    # The red X marker and the red histogram bar: hundreds of pixels of the outlier colour, none without one.
    assert colour_pixels(with_outlier, plots.OUTLIER_COLOUR) > 200
    assert colour_pixels(without, plots.OUTLIER_COLOUR) == 0


def test_gpu_report_adds_vram_batch_search_and_cost_plots(tmp_path):
    report = gpu_report()
    # The recommendation as the decision module builds it from this report: the plot reads its real schema.
    report = replace(report, recommendation=recommendation_for(report))
    written = plots.save_report_plots(report, tmp_path, {"mlp": vram_timeline()})
    assert [p.name for p in written] == [
        "mlp_epoch_times.png",
        "mlp_loss.png",
        "mlp_vram.png",
        "mlp_batch_search.png",
        "cost_by_card.png",
    ]
    for path in written:
        assert_drawn(path)
    # The headroom limit (red dashed line) is drawn across the batch-search memory panel.
    assert colour_pixels(rgb(tmp_path / "mlp_batch_search.png"), plots.LIMIT_COLOUR) > 300


def test_the_process_line_joins_the_readings_the_sampler_took_one_sample_in_ten():
    t_s = np.arange(100, dtype=float) * 0.01
    process_mb = np.full(100, math.nan)
    process_mb[::10] = 700.0 + t_s[::10]
    timeline = MemoryTimeline(times_s=t_s, device_used_mb=np.full(100, 1900.0), process_used_mb=process_mb)
    report = gpu_report()
    figure = plots.vram_figure("mlp", report.models["mlp"], timeline, report.hardware)
    lines = {line.get_label(): line for line in figure.axes[0].get_lines()}
    process = lines["this process (NVML)"]
    # Ten readings, drawn as one connected line without NaN gaps (a line through the gaps would draw nothing).
    assert list(process.get_ydata()) == list(process_mb[::10])
    assert len(lines["whole card (NVML used)"].get_xdata()) == 100


def test_batch_search_marks_out_of_memory_trials():
    report = gpu_report()
    search = report.models["mlp"].batch_search
    statuses = {trial.status for trial in search.trials}
    assert "oom" in statuses and "ok" in statuses
    figure = plots.batch_search_figure("mlp", report.models["mlp"])
    memory_axes = figure.axes[0]
    labels = [line.get_label() for line in memory_axes.get_lines()]
    assert "out of memory" in labels
    oom_line = memory_axes.get_lines()[labels.index("out of memory")]
    assert sorted(oom_line.get_xdata()) == sorted(t.size for t in search.trials if t.status == "oom")


def test_a_search_where_nothing_fits_draws_only_its_out_of_memory_trials(recwarn):
    def try_batch(size: int, steps: int) -> TrialResult:
        raise RuntimeError("CUDA out of memory. Tried to allocate 20.00 GiB")

    with mock.patch("gpubench.measure.batch_search.release_device_memory"):
        search = as_batch_search(
            choose_batch_size(try_batch, BatchConfig(policy="max", min_size=32, max_size=64), usable_vram_mb=4096)
        )
    assert search.status == "oom"
    figure = plots.batch_search_figure("tft", ModelResult(status="oom", batch_search=search))
    memory, throughput = figure.axes
    assert labelled_lines(memory) == ["headroom limit 3,686 MB", "out of memory"]
    assert throughput.get_legend() is None and not recwarn.list


def test_cost_plot_adds_the_measured_device_marks_thresholds_and_missing_prices():
    figure = plots.cost_figure(RECOMMENDATION)
    time_axes = figure.axes[0]
    texts = [text.get_text() for axes in figure.axes for text in axes.texts]
    assert "no dated price" in texts and "$19.40 lambdalabs (cheapest)" in texts and "80.2 h" in texts
    assert "30 h" in texts and "$19.30" not in " ".join(texts)
    bars = {bar.label: bar for bar in plots.cost_bars(RECOMMENDATION)}
    assert bars["h100"].rental == cheapest_rental(RECOMMENDATION.cost_table) and bars["t4"].cost_usd is None
    # Fastest at the top (the highest y position); no catalog card is the measured one, so it gets its own row.
    labels = [label.get_text() for label in time_axes.get_yticklabels()]
    assert labels == ["rtx3060", "t4", "NVIDIA GeForce RTX 3050 Ti Laptop GPU (measured)", "h100"]
    assert labelled_lines(time_axes) == ["local limit 24 h", "cloud from 48 h"]
    assert "GRAY_ZONE" in figure.texts[0].get_text() and "dqn, ppo" in figure.texts[0].get_text()


def test_cost_plot_uses_minutes_for_short_runs_and_a_measured_catalog_card_is_not_repeated():
    short = recommendation(
        projection=[
            projection_row("h100", 0.02, upper=0.025, measured_device=True),
            projection_row("t4", 0.1, upper=0.12),
        ],
        cost_table=[cost_row("t4", 0.03, hours=0.1), cost_row("h100", 0.05, hours=0.02)],
        estimated_full_training_hours=0.02,
        thresholds_hours=THRESHOLDS_HOURS,
    )
    figure = plots.cost_figure(short)
    time_axes = figure.axes[0]
    assert time_axes.get_xlabel().startswith("projected training time (min")
    assert [label.get_text() for label in time_axes.get_yticklabels()] == ["t4", "h100 (measured)"]
    # 24 h is far beyond 7 minutes: the threshold lines are left out rather than squashing the bars.
    assert labelled_lines(time_axes) == []


def test_cost_plot_is_skipped_without_a_projected_time(tmp_path):
    assert plots.cost_figure(recommendation(projection=[projection_row("t4", None)])) is None
    report = replace(cpu_report(), recommendation=recommendation(decision=None, projection=[]))
    assert "cost_by_card.png" not in [p.name for p in plots.save_report_plots(report, tmp_path)]


def test_a_failed_model_gets_only_its_vram_timeline_and_an_unread_timeline_none(tmp_path):
    report = cpu_report()
    report = replace(report, models={**report.models, "tft": ModelResult(status="oom", error="CUDA out of memory")})
    unread = MemoryTimeline(times_s=[1.0, 2.0], device_used_mb=[math.nan, math.nan], process_used_mb=[math.nan] * 2)
    written = plots.save_report_plots(report, tmp_path, {"mlp": unread, "tft": vram_timeline()})
    # No epochs, no losses for the model that ran out of memory, but its memory climb is what explains it.
    assert [p.name for p in written] == ["mlp_epoch_times.png", "mlp_loss.png", "tft_vram.png"]


def test_a_compile_epoch_far_above_the_rest_is_clipped_and_labelled():
    result = model_result(STEADY_MS, warmup_ms=(25_000.0, 100.0))
    figure = plots.epoch_time_figure("mlp", result)
    sequence = figure.axes[0]
    assert sequence.get_ylim()[1] < 250  # the measured epochs keep the scale, not the 25 s warmup epoch
    assert any(text.get_text() == "↑ 2.5e+04 ms" for text in sequence.texts)


def test_no_warmup_epochs_and_no_intervals_still_draw(tmp_path):
    # Without statistics (a model with fewer than two measured epochs has none) there is no interval to draw.
    result = replace(model_result(STEADY_MS, warmup_ms=()), statistics=None)
    figure = plots.epoch_time_figure("mlp", result)
    assert figure.axes[0].get_xlabel() == "measured epoch"
    assert figure.axes[0].get_ylim()[1] > max(STEADY_MS)


@pytest.mark.parametrize("name", ["custom/model v2", "a.b"])
def test_model_names_become_safe_file_names(tmp_path, name):
    report = cpu_report()
    report = replace(report, models={name: report.models["mlp"]})
    written = plots.save_report_plots(report, tmp_path)
    assert all(path.parent == tmp_path and path.exists() for path in written)
    assert all("/" not in path.name and " " not in path.name for path in written)
