"""report.html: the run on one self-contained offline page (inline style and plots, no script, loads nothing)."""

import base64
import io
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from gpubench.output import plots as report_figures
from gpubench.output.html_sections import (
    config_section,
    cost_section,
    host_section,
    run_section,
    status_banner,
    summary_section,
    text,
    verdict_section,
    what_if_section,
)
from gpubench.output.report_file import write_text_atomic
from gpubench.results import MemoryTimeline, RunReport

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: The page's file name beside a report named ``report.json``.
PAGE_FILE_NAME = "report.html"
#: The config file whose text the page shows, beside the report in the job's folder.
CONFIG_FILE_NAME = "config_resolved.yaml"
#: An SVG plot larger than this (bytes) is drawn as a PNG too, and the smaller of the two is embedded.
SVG_MAX_BYTES = 150_000

#: What each plot shows, under it (by :attr:`gpubench.output.plots.ReportPlot.subject`).
_CAPTIONS = {
    "epoch times": "Every measured epoch in order (warmup in grey, flagged outliers in red) beside their histogram, "
    "with the mean, the median, the t interval and the decision interval.",
    "loss": "Mean training loss per epoch: a health check, not a measure of the model's quality.",
    "vram": "GPU memory as the sampler read it during warmup and the measured epochs, against the usable VRAM.",
    "batch search": "Peak reserved memory and throughput of each batch-size trial, with the headroom limit, the "
    "chosen batch and the throughput knee.",
    "cost by card": "The decided models' full training projected on each catalog card (whisker to the upper bound) "
    "and its cloud cost.",
}

#: No script, nothing fetched: inline styles, and images only from the page itself (data: URIs).
_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"

_STYLE = resources.files("gpubench.output").joinpath("report.css").read_text(encoding="utf-8")


@dataclass(frozen=True)
class PagePlot:
    """One plot ready for the page: file stem, model, subject, format and markup (``<svg>`` or ``<img>``)."""

    stem: str
    model: str | None
    subject: str
    format: Literal["svg", "png"]
    markup: str

    @property
    def size_bytes(self) -> int:
        """The markup's size in the page (UTF-8 bytes)."""
        return len(self.markup.encode("utf-8"))


def page_path(report_path: Path) -> Path:
    """Where the page of the report at ``report_path`` goes: beside it, named ``*.html``."""
    if report_path.suffix.lower() == ".html":
        return report_path.with_name(report_path.name + ".html")
    return report_path.with_suffix(".html")


def svg_markup(figure: "Figure", label: str) -> str:
    """The figure as an inline ``<svg>`` element (the XML prolog and doctype dropped, an accessible name added)."""
    buffer = io.StringIO()
    # No date in the metadata: the same report gives the same page.
    figure.savefig(buffer, format="svg", facecolor="white", metadata={"Date": None})
    svg = buffer.getvalue()
    svg = svg[svg.index("<svg") :]
    return svg.replace("<svg ", f'<svg role="img" aria-label="{text(label)}" ', 1)


def png_markup(figure: "Figure", label: str) -> str:
    """The figure as an ``<img>`` holding its PNG (at the PNG files' resolution) as base64."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=report_figures.DPI, facecolor="white")
    encoded = base64.b64encode(buffer.getvalue()).decode("ascii")
    return f'<img alt="{text(label)}" src="data:image/png;base64,{encoded}">'


def draw_page_plots(report: RunReport, memory_timelines: dict[str, MemoryTimeline] | None = None) -> list[PagePlot]:
    """Every plot the report has data for: inline SVG, or PNG where the SVG is large and the PNG smaller."""
    drawn = []
    # Text as text, not glyph outlines: half the size, and the labels can be searched and copied.
    with report_figures.plot_style(**{"svg.fonttype": "none"}):
        for plot in report_figures.report_plots(report, memory_timelines):
            label = f"{plot.model}: {plot.subject}" if plot.model is not None else plot.subject
            kind: Literal["svg", "png"] = "svg"
            markup = svg_markup(plot.figure, label)
            if len(markup) > SVG_MAX_BYTES:
                png = png_markup(plot.figure, label)
                if len(png) < len(markup):
                    kind, markup = "png", png
            drawn.append(PagePlot(plot.stem, plot.model, plot.subject, kind, markup))
    return drawn


def _plots_section(report: RunReport, plots: Sequence[PagePlot], plots_note: str | None) -> str:
    parts = ['<section id="plots"><h2>Plots</h2>']
    if plots_note:
        parts.append(f'<p class="notes">{text(plots_note)}</p>')
    elif not plots:
        parts.append('<p class="notes">No plot: no model has measured epochs to draw.</p>')
    groups = [*((name, name) for name in report.models), (None, "Whole run")]
    for model, heading in groups:
        chosen = [plot for plot in plots if plot.model == model]
        if not chosen:
            continue
        parts.append(f"<h3>{text(heading)}</h3>")
        for plot in chosen:
            caption = _CAPTIONS.get(plot.subject, "")
            parts.append(
                f'<figure class="plot" data-plot="{text(plot.stem)}">{plot.markup}'
                f"<figcaption>{text(caption)}</figcaption></figure>"
            )
    parts.append("</section>")
    return "".join(parts)


def _header(report: RunReport) -> str:
    decision = report.recommendation.decision if report.recommendation is not None else None
    facts = [
        report.hardware.device_name,
        ", ".join(report.run.models),
        f"started {report.timestamp} UTC",
        f"status {report.status}",
        f"gpubench {report.benchmark_version}",
    ]
    links = [("verdict", "Verdict"), ("summary", "Models"), ("cost", "Renting"), ("plots", "Plots")]
    links += [("host", "Host"), ("run", "Hardware, data, run"), ("config", "Config")]
    nav = "".join(f'<a href="#{anchor}">{label}</a>' for anchor, label in links)
    title = f"gpubench · {report.hardware.device_name} · {decision or 'no decision'}"
    return (
        f"<title>{text(title)}</title></head><body><header><h1>gpubench report</h1>"
        f'<p class="meta">{text(" · ".join(facts))}</p><nav>{nav}</nav></header>'
    )


def render_page(
    report: RunReport,
    *,
    plots: Sequence[PagePlot] = (),
    config_text: str | None = None,
    config_name: str = CONFIG_FILE_NAME,
    plots_note: str | None = None,
) -> str:
    """The whole page of ``report`` as one HTML document, with ``plots``, config text and ``plots_note``."""
    sections = [show(report) for show in (status_banner, verdict_section, summary_section, cost_section)]
    sections += [what_if_section(report), _plots_section(report, plots, plots_note), host_section(report)]
    sections.append(run_section(report))
    sections.append(config_section(config_text, config_name))
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<meta name="generator" content="gpubench {text(report.benchmark_version)}">'
        f"<style>{_STYLE}</style>{_header(report)}"
        f"<main>{''.join(sections)}</main>"
        "<footer>Written by gpubench from the run's JSON report, which holds every figure on this page and more. "
        "The page loads nothing from the network.</footer></body></html>\n"
    )


def write_page(
    report: RunReport,
    report_path: Path,
    *,
    plots: Sequence[PagePlot] | None = None,
    plots_note: str | None = None,
    config_path: Path | None = None,
) -> Path:
    """Write the page of the report at ``report_path`` beside it atomically; return its path."""
    config = config_path if config_path is not None else report_path.parent / CONFIG_FILE_NAME
    try:
        config_text = config.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        config_text = None
    if plots is None and plots_note is None:
        plots_note = "The plots are drawn when the run ends; this page was written while it ran."
    page = render_page(
        report, plots=plots or (), config_text=config_text, config_name=config.name, plots_note=plots_note
    )
    path = page_path(report_path)
    write_text_atomic(path, page)
    return path
