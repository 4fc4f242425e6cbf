"""The size of report.html for a report, plot by plot, as inline SVG (what the page embeds) against base64 PNG.

Issue 25 bounds the page at 2 MB for the default four-model run. This draws every plot of a stored report (by
default the H200's default run, benchmarks/results/2026-12-02-h200-s7-default-report.json) both ways, with a VRAM
timeline per model of the sample count its sampler recorded (the report keeps the count, not the samples; a seeded
random walk, every point distinct, stands in for them), and prints per plot the bytes of each format and the one the
page chose, then the whole page's size and the CPU seconds the drawing took.

    python benchmarks/html_page_size.py
    python benchmarks/html_page_size.py --report path/to/report.json --vram-samples 100000
"""

import argparse
import time
from pathlib import Path

import numpy as np

from gpubench.output import html_report, plots
from gpubench.output.report_file import read_report
from gpubench.results import MemoryTimeline

DEFAULT_REPORT = Path(__file__).resolve().parent / "results" / "2026-12-02-h200-s7-default-report.json"


def _timeline(samples: int, seed: int) -> MemoryTimeline:
    """``samples`` readings 10 ms apart: a seeded random walk (MB), the process read on one sample in ten."""
    rng = np.random.default_rng(seed)
    device_mb = 2000.0 + np.cumsum(rng.normal(0.0, 5.0, samples))
    process_mb = device_mb - 500.0
    process_mb[np.arange(samples) % 10 != 0] = np.nan
    return MemoryTimeline(1000.0 + 0.01 * np.arange(samples), device_mb, process_mb)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--report", type=Path, default=DEFAULT_REPORT)
    parser.add_argument(
        "--vram-samples", type=int, default=None, help="samples per VRAM timeline (default: each model's own count)"
    )
    args = parser.parse_args()
    report = read_report(args.report)
    timelines = {
        name: _timeline(args.vram_samples or (result.memory.nvml_samples if result.memory else 0) or 1, seed)
        for seed, (name, result) in enumerate(report.models.items())
    }
    started = time.process_time()
    chosen = html_report.draw_page_plots(report, timelines)
    draw_s = time.process_time() - started
    page_bytes = len(html_report.render_page(report, plots=chosen).encode("utf-8"))

    # The other format of each plot, drawn as the page draws it, for the comparison.
    sizes = []
    with plots.plot_style(**{"svg.fonttype": "none"}):
        for plot in plots.report_plots(report, timelines):
            label = plot.stem
            svg = len(html_report.svg_markup(plot.figure, label))
            png = len(html_report.png_markup(plot.figure, label))
            sizes.append((plot.stem, svg, png))
    print(f"{'plot':<24} {'SVG KB':>8} {'PNG b64 KB':>11} {'page has':>9}")
    for (stem, svg, png), page_plot in zip(sizes, chosen, strict=True):
        print(f"{stem:<24} {svg / 1e3:>8.1f} {png / 1e3:>11.1f} {page_plot.format:>9}")
    total_svg = sum(svg for _, svg, _ in sizes)
    total_png = sum(png for _, _, png in sizes)
    print(f"{'all plots':<24} {total_svg / 1e3:>8.1f} {total_png / 1e3:>11.1f}")
    print(f"page: {page_bytes / 1e6:.3f} MB with {len(chosen)} plots (limit 2 MB); drawing took {draw_s:.1f} s of CPU")


if __name__ == "__main__":
    main()
