"""Plots of a report, what a reader checks before trusting the numbers: per model the epoch times, the loss, the VRAM
timeline and the batch search; the projected time and cheapest rental per card. A plot without data is skipped.
Figures are bare :class:`matplotlib.figure.Figure` objects on an Agg canvas, not pyplot's: no global registry, no GUI
backend, safe from any thread; matplotlib is imported inside the functions."""

import math
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from gpubench.results import (
    CardProjection,
    CostRow,
    HardwareReport,
    MemoryTimeline,
    ModelResult,
    Recommendation,
    RunReport,
    cheapest_rental,
)

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.ticker import Formatter

#: Every figure's size (inches) and resolution: 1200 x 660 pixels, legible in MLflow's artifact viewer unzoomed.
FIGURE_SIZE_IN = (10.0, 5.5)
DPI = 120

#: Fonts large enough to read at the artifact viewer's default scale.
_STYLE = {
    "font.size": 11,
    "axes.titlesize": 13,
    "axes.labelsize": 11,
    "xtick.labelsize": 10,
    "ytick.labelsize": 10,
    "legend.fontsize": 9,
    "figure.titlesize": 14,
    "axes.grid": True,
    "grid.alpha": 0.3,
}

#: Colours, one meaning each across all plots (matplotlib's default cycle, named).
MEASURED_COLOUR = "#1f77b4"
WARMUP_COLOUR = "#7f7f7f"
OUTLIER_COLOUR = "#d62728"
MEAN_COLOUR = "#2ca02c"
MEDIAN_COLOUR = "#9467bd"
T_INTERVAL_COLOUR = "#2ca02c"
DECISION_INTERVAL_COLOUR = "#ff7f0e"
PROCESS_COLOUR = "#ff7f0e"
LIMIT_COLOUR = "#d62728"

#: Bounds on the epoch-time histogram's bin count.
_MIN_BINS = 6
_MAX_BINS = 40
#: Warmup epochs slower than this multiple of the slowest measured epoch are clipped to the plot's top edge.
_WARMUP_CLIP_FACTOR = 1.5


@dataclass(frozen=True)
class ReportPlot:
    """One plot: its file stem (``mlp_epoch_times``), its model (None for the whole report), its subject, the figure."""

    stem: str
    model: str | None
    subject: str
    figure: "Figure"


@contextmanager
def plot_style(**overrides: Any) -> Iterator[None]:
    """The shared style (fonts, grid) with ``overrides`` (rcParams) on top, in which figures are built and saved."""
    from matplotlib import rc_context

    with rc_context({**_STYLE, **overrides}):
        yield


def report_plots(report: RunReport, memory_timelines: dict[str, MemoryTimeline] | None = None) -> Iterator[ReportPlot]:
    """Every plot the report has data for, built one at a time as the caller takes them (a figure is freed once
    saved), in drawing order; ``memory_timelines``: per model, the sampler's readings for its VRAM plot."""
    timelines = memory_timelines or {}
    for name, result in report.models.items():
        stem = _safe_name(name)
        builders: tuple[tuple[str, Callable[..., Figure | None], tuple[Any, ...]], ...] = (
            ("epoch times", epoch_time_figure, (name, result)),
            ("loss", loss_figure, (name, result)),
            ("vram", vram_figure, (name, result, timelines.get(name), report.hardware)),
            ("batch search", batch_search_figure, (name, result)),
        )
        for subject, build, arguments in builders:
            figure = build(*arguments)
            if figure is not None:
                yield ReportPlot(f"{stem}_{subject.replace(' ', '_')}", name, subject, figure)
    recommendation = report.recommendation
    cost = cost_figure(recommendation) if recommendation is not None and recommendation.projection else None
    if cost is not None:
        yield ReportPlot("cost_by_card", None, "cost by card", cost)


def save_report_plots(
    report: RunReport, out_dir: Path, memory_timelines: dict[str, MemoryTimeline] | None = None
) -> list[Path]:
    """Draw every plot the report has data for into ``out_dir`` as ``<stem>.png``; return the paths, in order."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    with plot_style():
        return [_save(plot.figure, out_dir / f"{plot.stem}.png") for plot in report_plots(report, memory_timelines)]


def _safe_name(name: str) -> str:
    """A file-name-safe form of a model name (custom workloads may carry dots, slashes or spaces)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)


def _new_figure(
    ncols: int = 1, width_ratios: Sequence[float] | None = None, sharey: bool = False
) -> tuple["Figure", list["Axes"]]:
    """A figure of the standard size on an Agg canvas, with ``ncols`` axes side by side."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=FIGURE_SIZE_IN, dpi=DPI, layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.subplots(1, ncols, width_ratios=width_ratios, sharey=sharey, squeeze=False)[0]
    return figure, list(axes)


def _save(figure: "Figure", path: Path) -> Path:
    figure.savefig(path, dpi=DPI, facecolor="white")
    return path


def _finite(values: Sequence[float | None] | None) -> np.ndarray:
    """Values as floats with None turned into NaN (the report writes non-finite numbers as null)."""
    if values is None:
        return np.array([], dtype=float)
    return np.array([np.nan if v is None else v for v in values], dtype=float)


def _thousands() -> "Formatter":
    """Tick labels as plain numbers with thousands separators (not 2^12 or 1e5)."""
    from matplotlib.ticker import FuncFormatter

    return FuncFormatter(lambda value, _position: f"{value:,.0f}" if abs(value) >= 1 else f"{value:g}")


def _range_ms(interval: tuple[float, float]) -> str:
    return f"{interval[0]:.4g}–{interval[1]:.4g} ms"


def epoch_time_figure(name: str, result: ModelResult) -> "Figure | None":
    """Every measured epoch (ms) in order (warmup in grey, outliers in red) beside their histogram, with the mean,
    median, t interval and decision interval; None without measured epochs."""
    times_ms = _finite(result.raw_epoch_times_ms)
    if times_ms.size == 0 or not np.isfinite(times_ms).any():
        return None
    warmup_ms = _finite(result.warmup_epoch_times_ms)
    stats = result.statistics
    outliers = [i for i in (stats.outlier_indices if stats else ()) if 0 <= i < times_ms.size]
    figure, (sequence, histogram) = _new_figure(2, width_ratios=(2.6, 1.0), sharey=True)
    epochs = np.arange(1, times_ms.size + 1)
    # Warmup epochs sit left of epoch 1 (numbered 0, -1, ...), so the sequence reads left to right in time.
    warmup_epochs = np.arange(1 - warmup_ms.size, 1)
    lines: list[tuple[str, float, str, str]] = []
    bands: list[tuple[str, tuple[float, float], str, str | None]] = []
    if stats is not None:
        level = f"{stats.confidence_level:.0%}"
        lines = [("mean", stats.mean_ms, MEAN_COLOUR, "-"), ("median", stats.median_ms, MEDIAN_COLOUR, ":")]
        decision = f"{level} decision interval ({stats.decision_interval_method})"
        bands = [
            (f"{level} t interval", stats.confidence_interval_ms, T_INTERVAL_COLOUR, None),
            (decision, stats.decision_interval_ms, DECISION_INTERVAL_COLOUR, "//"),
        ]
    for axes in (sequence, histogram):
        for name_, interval, colour, hatch in bands:
            face, alpha = (colour, 0.15) if hatch is None else ("none", 0.6)
            label = f"{name_}: {_range_ms(interval)}"
            axes.axhspan(*interval, facecolor=face, edgecolor=colour, hatch=hatch, alpha=alpha, lw=0.8, label=label)
        for label, value, colour, style in lines:
            # The median is drawn dotted and wider, on top of the mean, so both show when they nearly agree.
            width = 2.5 if style == ":" else 1.5
            axes.axhline(value, color=colour, linestyle=style, linewidth=width, label=f"{label}: {value:.4g} ms")
    sequence.plot(epochs, times_ms, "-o", color=MEASURED_COLOUR, markersize=5, linewidth=1, label="measured epoch")
    if stats is not None and outliers:
        label = f"outlier ({stats.outlier_rule} rule; kept in the estimate)"
        sequence.plot(epochs[outliers], times_ms[outliers], "X", color=OUTLIER_COLOUR, ms=11, ls="none", label=label)
    finite_ms = times_ms[np.isfinite(times_ms)]
    top_ms = max([finite_ms.max(), *(interval[1] for _, interval, _, _ in bands)])
    # A first epoch that compiles can be 100x the others: a warmup epoch far above the measured ones is clipped
    # to the top edge with its value printed, so it does not squash the measured epochs into a flat line.
    warmup_shown = warmup_ms[np.isfinite(warmup_ms) & (warmup_ms <= _WARMUP_CLIP_FACTOR * top_ms)]
    top_ms = max([top_ms, *warmup_shown])
    bottom_ms = min([finite_ms.min(), *(interval[0] for _, interval, _, _ in bands), *warmup_shown])
    margin_ms = 0.08 * (top_ms - bottom_ms) or 0.05 * top_ms
    ylim = (max(0.0, bottom_ms - margin_ms), top_ms + margin_ms)
    if warmup_ms.size:
        shown_ms = np.minimum(warmup_ms, ylim[1])
        sequence.plot(warmup_epochs, shown_ms, "s", color=WARMUP_COLOUR, markersize=6, label="warmup epoch (discarded)")
        for epoch, value in zip(warmup_epochs, warmup_ms, strict=True):
            if value > ylim[1]:
                note = f"↑ {value:.4g} ms"
                offset = {"xytext": (6, -12), "textcoords": "offset points"}
                sequence.annotate(note, (epoch, ylim[1]), **offset, ha="left", fontsize=9, color=WARMUP_COLOUR)
    sequence.set_ylim(*ylim)
    sequence.set_xlabel("epoch (warmup ≤ 0, measured ≥ 1)" if warmup_ms.size else "measured epoch")
    sequence.set_ylabel("epoch time (ms)")
    sequence.set_title("epochs in order")
    # A figure-level legend below both panels: attached to one panel, it widens that panel's layout box and pushes
    # the histogram away.
    handles, labels = sequence.get_legend_handles_labels()
    figure.legend(handles, labels, loc="outside lower center", ncol=3, frameon=False)
    if times_ms.size <= 30:
        sequence.set_xticks(np.concatenate([warmup_epochs, epochs]))
    # numpy's "auto" rule gives two or three bins for ten epochs; at least _MIN_BINS shows the shape.
    bins = min(_MAX_BINS, max(_MIN_BINS, len(np.histogram_bin_edges(finite_ms, bins="auto")) - 1))
    edges = np.histogram_bin_edges(finite_ms, bins=bins)
    bars = {"bins": edges, "orientation": "horizontal", "edgecolor": "white", "linewidth": 1}
    histogram.hist(finite_ms, color=MEASURED_COLOUR, alpha=0.8, zorder=3, **bars)
    if outliers:
        histogram.hist(times_ms[outliers], color=OUTLIER_COLOUR, zorder=4, **bars)
    histogram.set_xlabel("measured epochs (count)")
    histogram.set_title("distribution")
    histogram.xaxis.get_major_locator().set_params(integer=True)
    steps, batch, cv = result.steps_per_epoch, result.batch_size, result.coefficient_of_variation
    parts = [f"{steps} steps each" if steps else "", f"batch {batch}" if batch else ""]
    parts.append("" if cv is None else f"CV {cv:.3f}")
    detail = ", ".join([f"{times_ms.size} measured epochs", *(part for part in parts if part)])
    figure.suptitle(f"{name}: epoch time — {detail}")
    return figure


def loss_figure(name: str, result: ModelResult) -> "Figure | None":
    """Mean training loss per epoch (warmup epochs too when the report has them); None without losses."""
    losses = _finite(result.epoch_losses)
    if not np.isfinite(losses).any():
        return None
    warmup = _finite(result.warmup_epoch_losses)
    figure, (axes,) = _new_figure()
    epochs = np.arange(1, losses.size + 1)
    if warmup.size:
        axes.plot(np.arange(1 - warmup.size, 1), warmup, "-s", color=WARMUP_COLOUR, label="warmup epoch (not measured)")
    axes.plot(epochs, losses, "-o", color=MEASURED_COLOUR, label="measured epoch")
    nonfinite = epochs[~np.isfinite(losses)]
    for epoch in nonfinite:
        axes.axvline(epoch, color=OUTLIER_COLOUR, linestyle="--", linewidth=1)
    if nonfinite.size:
        axes.plot([], [], color=OUTLIER_COLOUR, linestyle="--", label="NaN/Inf loss")
    known = np.concatenate([losses, warmup])
    known = known[np.isfinite(known)]
    # Losses spanning decades (a model that learns fast) read better on a log axis.
    if known.min() > 0 and known.max() / known.min() > 50:
        axes.set_yscale("log")
    axes.set_xlabel("epoch (warmup ≤ 0, measured ≥ 1)" if warmup.size else "measured epoch")
    axes.set_ylabel("mean training loss per epoch (model's loss)")
    verdict = " · ".join(v for v in (result.stability, result.loss_trend) if v)
    axes.set_title(f"{name}: training loss" + (f" — {verdict}" if verdict else ""))
    axes.legend(loc="best")
    return figure


def vram_figure(
    name: str, result: ModelResult, timeline: MemoryTimeline | None, hardware: HardwareReport
) -> "Figure | None":
    """GPU memory (MB) over the model's measurement as the sampler read it, with the model's peak reserved memory and
    the usable VRAM; None without samples (the CPU has no sampler)."""
    if timeline is None or len(timeline.times_s) == 0:
        return None
    t_s = _finite(timeline.times_s)
    device_mb = _finite(timeline.device_used_mb)
    process_mb = _finite(timeline.process_used_mb)
    if t_s.size == 0 or not (np.isfinite(device_mb).any() or np.isfinite(process_mb).any()):
        return None
    elapsed_s = t_s - t_s[0]
    figure, (axes,) = _new_figure()
    # Only the readings: the sampler reads this process's memory on one sample in ten (NaN in between), and a line
    # through NaN gaps draws nothing between isolated points.
    for values_mb, colour, label in (
        (device_mb, MEASURED_COLOUR, "whole card (NVML used)"),
        (process_mb, PROCESS_COLOUR, "this process (NVML)"),
    ):
        read = np.isfinite(values_mb)
        if read.any():
            axes.plot(elapsed_s[read], values_mb[read], color=colour, label=label)
    if result.memory_usage_mb is not None:
        axes.axhline(result.memory_usage_mb, color=MEAN_COLOUR, linestyle=":", label="torch peak reserved")
    usable_mb = hardware.usable_vram_mb
    total_mb = hardware.total_vram_mb
    # The limit that matters is the usable VRAM (a cap emulating a smaller card); the card's total is named in
    # the label rather than drawn, since a 141 GB line would flatten a 4 GB budget.
    limit_mb = usable_mb if usable_mb is not None else total_mb
    if limit_mb is not None:
        capped = usable_mb is not None and total_mb is not None and not math.isclose(usable_mb, total_mb, rel_tol=1e-3)
        label = f"usable VRAM {limit_mb:,.0f} MB" + (f" (capped; card has {total_mb:,.0f} MB)" if capped else "")
        axes.axhline(limit_mb, color=LIMIT_COLOUR, linestyle="--", label=label)
    axes.set_ylim(bottom=0)
    axes.yaxis.set_major_formatter(_thousands())
    axes.set_xlabel("time since the first sample (s)")
    axes.set_ylabel("GPU memory used (MB)")
    axes.set_title(f"{name}: VRAM during warmup and measured epochs ({t_s.size} samples)")
    axes.legend(loc="lower right")
    return figure


def batch_search_figure(name: str, result: ModelResult) -> "Figure | None":
    """Peak reserved memory (MB) and throughput (samples/s) of each batch-size trial, with the headroom limit, the
    chosen size and the throughput knee; None when no batch search ran (the CPU, or ``batch.search=false``)."""
    search = result.batch_search
    if search is None or not search.trials:
        return None
    trials = search.trials
    figure, (memory, throughput) = _new_figure(2)
    measured = [t for t in trials if t.peak_reserved_mb is not None]
    ok = [t for t in measured if t.status == "ok"]
    over = [t for t in measured if t.status == "over_headroom"]
    oom = [t for t in trials if t.status == "oom"]
    for chosen, marker, colour, label in (
        (ok, "o", MEASURED_COLOUR, "fits"),
        (over, "D", PROCESS_COLOUR, "over the headroom limit"),
    ):
        if chosen:
            sizes, peaks_mb = [t.size for t in chosen], [t.peak_reserved_mb for t in chosen]
            memory.plot(sizes, peaks_mb, marker, color=colour, linestyle="none", markersize=7, label=label)
    limit_mb = search.peak_limit_mb
    if limit_mb is not None:
        memory.axhline(limit_mb, color=LIMIT_COLOUR, linestyle="--", label=f"headroom limit {limit_mb:,.0f} MB")
    measured_mb = [t.peak_reserved_mb for t in ok + over if t.peak_reserved_mb is not None]
    top_mb = max([*measured_mb, limit_mb or 0.0]) * 1.1 or 1.0
    if oom:
        # An OOM trial has no memory reading: mark its size at the top of the axis.
        style = {"color": OUTLIER_COLOUR, "markersize": 10, "markeredgewidth": 2, "linestyle": "none"}
        memory.plot([t.size for t in oom], [top_mb] * len(oom), "x", **style, label="out of memory")
    memory.set_ylim(0, top_mb * 1.05)
    memory.set_ylabel("peak reserved memory (MB)")
    memory.set_title("memory per trial")
    unit = result.sample_unit or "sample"
    curve = search.throughput_curve
    if curve:
        sizes, rates = [p.size for p in curve], [p.samples_per_s for p in curve]
        throughput.plot(sizes, rates, "-o", color=MEASURED_COLOUR, label="search trials that fit")
    if search.knee_size is not None:
        throughput.axvline(search.knee_size, color=MEDIAN_COLOUR, linestyle=":", label=f"knee ({search.knee_size})")
    chosen_size = search.batch_size
    for axes in (memory, throughput):
        if chosen_size is not None:
            axes.axvline(chosen_size, color=MEAN_COLOUR, linestyle="--", label=f"chosen batch {chosen_size}")
        axes.set_xscale("log", base=2)
        axes.xaxis.set_major_formatter(_thousands())
        axes.yaxis.set_major_formatter(_thousands())
        axes.set_xlabel(f"batch size ({unit}s per step)")
        # When not even the smallest batch fit, the throughput panel has nothing to name.
        if axes.get_legend_handles_labels()[0]:
            axes.legend(loc="best")
    throughput.set_ylim(bottom=0)
    throughput.set_ylabel(f"throughput ({unit}s/s)")
    throughput.set_title("throughput per trial")
    figure.suptitle(f"{name}: batch-size search ({len(trials)} trials) — {search.status}")
    return figure


def _duration_unit(hours: Sequence[float]) -> tuple[str, float]:
    """Minutes for runs under an hour (0.02 h reads badly), hours otherwise: (unit, factor from hours)."""
    return ("min", 60.0) if max(hours, default=0.0) < 1.0 else ("h", 1.0)


def _usd(value: float) -> str:
    return f"${value:,.2f}" if value >= 1 else f"${value:.2g}"


@dataclass(frozen=True)
class CostBar:
    """One row of the cost plot: a card's projected training time (h) and upper bound, and its cheapest fitting
    cost-table row (None where the snapshot has no dated price)."""

    label: str
    hours: float
    upper_hours: float
    rental: CostRow | None
    measured: bool

    @property
    def cost_usd(self) -> float | None:
        return None if self.rental is None else self.rental.usd


def _card_bar(row: CardProjection, cost_table: list[CostRow]) -> CostBar | None:
    if row.training_hours is None:
        return None
    return CostBar(
        # Several cloud cards (decision.cloud_gpus): the bar is their time and cost, so its label counts them.
        label=(f"{row.card_count} × " if row.card_count > 1 else "")
        + (f"{row.card} (measured)" if row.measured_device else row.card),
        hours=row.training_hours,
        upper_hours=row.training_hours_upper if row.training_hours_upper is not None else row.training_hours,
        rental=cheapest_rental(cost_table, row.card),
        measured=row.measured_device,
    )


def cost_bars(recommendation: Recommendation) -> list[CostBar]:
    """The cost plot's rows: the projection's rows with a time, each at its card's cheapest fitting rental, and the
    measured estimate when no catalog card is the measured device (a CPU run, an unlisted GPU)."""
    table = recommendation.cost_table
    bars = [bar for row in recommendation.projection if (bar := _card_bar(row, table)) is not None]
    hours = recommendation.estimated_full_training_hours
    if hours is not None and not any(row.measured_device for row in recommendation.projection):
        upper = recommendation.estimated_full_training_hours_upper
        label = f"{recommendation.measured_device or 'this machine'} (measured)"
        bars.append(CostBar(label, hours, upper if upper is not None else hours, None, measured=True))
    return bars


def cost_figure(recommendation: Recommendation) -> "Figure | None":
    """Projected full-training time (with a whisker to its upper bound) and cheapest rental (USD, provider) per
    card of :func:`cost_bars`, fastest at the top, the cheapest row marked; None when no row has a time."""
    bars = sorted(cost_bars(recommendation), key=lambda bar: bar.hours, reverse=True)
    if not bars:
        return None
    unit, factor = _duration_unit([max(bar.hours, bar.upper_hours) for bar in bars])
    positions = np.arange(len(bars))
    figure, (time_axes, cost_axes) = _new_figure(2, width_ratios=(1.3, 1.0), sharey=True)
    times = np.array([bar.hours * factor for bar in bars])
    uppers = np.array([bar.upper_hours * factor for bar in bars])
    colours = [WARMUP_COLOUR if bar.measured else MEASURED_COLOUR for bar in bars]
    time_axes.barh(positions, times, color=colours, alpha=0.85)
    # The upper bound is what the decision uses: a whisker from the estimate to it.
    time_axes.errorbar(
        times, positions, xerr=[np.zeros_like(times), uppers - times], fmt="none", ecolor="black", capsize=4
    )
    right = uppers.max()
    for position, time_value, upper in zip(positions, times, uppers, strict=True):
        time_axes.text(upper + 0.01 * right, position, f"{time_value:,.3g} {unit}", va="center", fontsize=10)
    thresholds = (
        (recommendation.local_max_hours, "local limit", "--"),
        (recommendation.cloud_min_hours, "cloud from", ":"),
    )
    # The decision thresholds are drawn only when they fall near the bars; far off they would squash them.
    for threshold_hours, label, style in thresholds:
        if threshold_hours is not None and threshold_hours * factor <= 1.5 * right:
            value = threshold_hours * factor
            time_axes.axvline(value, color=LIMIT_COLOUR, linestyle=style, label=f"{label} {value:g} {unit}")
            right = max(right, value)
    if time_axes.get_legend_handles_labels()[0]:
        time_axes.legend(loc="lower right")
    time_axes.set_xlim(0, 1.25 * right)
    time_axes.set_xlabel(f"projected training time ({unit}; whisker to the upper bound)")
    time_axes.set_yticks(positions, [bar.label for bar in bars])
    costs = [bar.cost_usd for bar in bars]
    known = [c for c in costs if c is not None]
    cost_axes.barh(positions, [0.0 if c is None else c for c in costs], color=PROCESS_COLOUR, alpha=0.85)
    offset = 0.01 * max(known, default=1.0)
    cheapest = cheapest_rental(recommendation.cost_table)
    for position, bar in zip(positions, bars, strict=True):
        cost = bar.cost_usd
        text = "no dated price" if bar.rental is None or cost is None else f"{_usd(cost)} {bar.rental.provider}"
        if cheapest is not None and bar.rental == cheapest:
            text += " (cheapest)"
        cost_axes.text(offset if cost is None else cost + offset, position, text, va="center", fontsize=10)
    cost_axes.set_xlim(0, 1.6 * max(known, default=1.0))
    cost_axes.set_xlabel("cheapest dated rental per training (USD)")
    for axes in (time_axes, cost_axes):
        axes.grid(axis="y", visible=False)
    decided_on = ", ".join(recommendation.decided_on)
    decision = recommendation.decision
    figure.suptitle(
        "Full training projected on each card"
        + (f" ({decided_on})" if decided_on else "")
        + (f" — {decision}" if decision else "")
    )
    return figure
