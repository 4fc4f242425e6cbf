"""``python -m gpubench.compare A B``: are B's training epochs shorter, longer or the same as A's, beyond the noise?

    python -m gpubench.compare A B [--threshold 0.05] [--confidence 0.95] [--markdown out.md | -] [--tracking-uri URI]

A and B are report.json files (or folders holding one) or MLflow run ids (32 hex characters), whose report.json
artifact is downloaded from the tracking store (``--tracking-uri``, else ``MLFLOW_TRACKING_URI``, else
``sqlite:///mlruns/mlflow.db``). Every model measured in both reports is compared on its measured epoch times
(milliseconds, warmup excluded); models measured in only one, or without at least two epoch times in either, are
listed as not compared.

Everything reads "B against A": the ratio is B's mean epoch time over A's, so below 1 B trains faster. The
statistics (Fieller's ratio interval, the verdict FASTER / SLOWER / SAME / AMBIGUOUS, the epochs that would decide,
the Welch, Mann-Whitney and Yuen p-values) are :mod:`gpubench.stats.compare`'s; this module loads the reports,
pairs their models, explains each verdict in a sentence and renders the table (terminal and markdown).
"""

import argparse
import math
import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from gpubench.errors import GpubenchError
from gpubench.output.report_file import REPORT_FILE_NAME, ReportReadError, read_report
from gpubench.output.tracking import TrackingError, load_run_report
from gpubench.results import ModelResult, RunReport
from gpubench.stats.compare import (
    AMBIGUOUS,
    FASTER,
    MIN_EPOCHS,
    SAME,
    SLOWER,
    YUEN_TRIM,
    EpochTimeComparison,
    check_settings,
    compare_epoch_times,
)

DEFAULT_THRESHOLD = 0.05
DEFAULT_CONFIDENCE = 0.95
DEFAULT_TRACKING_URI = "sqlite:///mlruns/mlflow.db"
#: MLflow run ids are ``uuid4().hex``; anything else that is not a file is treated as a mistyped path.
_RUN_ID = re.compile(r"^[0-9a-f]{32}$")
#: Console width when output goes to a pipe or file.
_PIPE_WIDTH_COLUMNS = 200
_LEFT_ALIGNED = ("model", "verdict: B vs A")
_VERDICT_STYLE = {FASTER: "green", SLOWER: "red", SAME: "cyan", AMBIGUOUS: "yellow"}


class CompareError(GpubenchError):
    """An argument of the compare command is not a usable report (missing, unreadable, no epoch times)."""


@dataclass(frozen=True)
class ModelComparison:
    """One model measured in both reports: its name and B's epoch times against A's (``result``)."""

    model: str
    result: EpochTimeComparison

    @property
    def explanation(self) -> str:
        """One sentence on why this verdict, in B-against-A terms."""
        result = self.result
        low, high = result.ratio_interval
        interval = _format_interval(result.ratio_interval)
        lower, upper = 1 - result.threshold, 1 + result.threshold
        band = f"[{lower:g}, {upper:g}]"
        change = abs(result.ratio_b_over_a - 1)
        if result.verdict == FASTER:
            return f"B's epochs are {change:.1%} shorter than A's; the interval {interval} lies below {lower:g}."
        if result.verdict == SLOWER:
            return f"B's epochs are {change:.1%} longer than A's; the interval {interval} lies above {upper:g}."
        if result.identical_measurements:
            return "B's epoch times are A's, one measurement compared with itself: no difference to detect."
        if result.verdict == SAME:
            return f"B and A agree within ±{_percent(result.threshold)}: the interval {interval} lies inside {band}."
        if not (math.isfinite(low) and math.isfinite(high)):
            return "A's epoch times are too few or too noisy for a bounded ratio interval; measure more epochs."
        advice = (
            f"about {result.epochs_to_decide} epochs per run would decide, if means and spreads hold"
            if result.epochs_to_decide is not None
            else "the ratio sits on the threshold edge, so more epochs would not decide"
        )
        return f"The interval {interval} crosses an edge of the band {band}, so these epochs cannot tell; {advice}."


@dataclass(frozen=True)
class UnmatchedModel:
    """A model that could not be compared, and why (only in one report, or too few epoch times in one)."""

    model: str
    reason: str


# --------------------------------------------------------------------------------------------------- reports


def _epoch_times_or_reason(result: ModelResult) -> np.ndarray | str:
    """A model's measured epoch times (ms) if there are at least two finite positive ones, else why not."""
    times = result.raw_epoch_times_ms
    error = f": {result.error}" if result.error else ""
    if len(times) < MIN_EPOCHS:
        return f"{len(times)} measured epoch time(s), status {result.status}{error}"
    # The schema shapes the list but not its items: a hand-edited or foreign report may hold anything there.
    if not all(isinstance(t, int | float) and not isinstance(t, bool) and math.isfinite(t) and t > 0 for t in times):
        return "its raw_epoch_times_ms are not all finite positive numbers"
    return np.asarray(times, dtype=float)


def measured_epoch_times(report: RunReport) -> dict[str, np.ndarray]:
    """Per model with at least two measured epochs: its measured epoch times (ms), in report order.

    Raises CompareError when the report has no such model, since then there is nothing to compare.
    """
    measured = {
        name: times
        for name, result in report.models.items()
        if not isinstance(times := _epoch_times_or_reason(result), str)
    }
    if not measured:
        found = "; ".join(f"{name}: {_epoch_times_or_reason(result)}" for name, result in report.models.items())
        raise CompareError(
            f"it has no model with at least {MIN_EPOCHS} measured epoch times (raw_epoch_times_ms)"
            + (f" ({found})" if found else ", it has no models")
        )
    return measured


def compare_reports(
    report_a: RunReport,
    report_b: RunReport,
    threshold: float = DEFAULT_THRESHOLD,
    confidence: float = DEFAULT_CONFIDENCE,
) -> list[ModelComparison]:
    """B against A for every model with at least two measured epochs in both reports, in A's model order.

    ``threshold`` is the noise band as a fraction of A's mean epoch time (0.05 = ±5%); ``confidence`` the level
    of the ratio interval. Raises CompareError when either report has no measured epoch times at all.
    """
    try:
        check_settings(threshold, confidence)
    except ValueError as exc:
        raise CompareError(str(exc)) from exc
    measured = []
    for label, report in (("A", report_a), ("B", report_b)):
        try:
            measured.append(measured_epoch_times(report))
        except CompareError as exc:
            raise CompareError(f"report {label}: {exc}") from exc
    times_a, times_b = measured
    return [
        ModelComparison(
            model,
            compare_epoch_times(times_a[model], times_b[model], threshold=threshold, confidence_level=confidence),
        )
        for model in times_a
        if model in times_b
    ]


def unmatched_models(report_a: RunReport, report_b: RunReport) -> list[UnmatchedModel]:
    """Models in either report that :func:`compare_reports` leaves out, with the reason, A's models first."""
    models_a, models_b = report_a.models, report_b.models
    unmatched = []
    for model in [*models_a, *(name for name in models_b if name not in models_a)]:
        if model not in models_b:
            unmatched.append(UnmatchedModel(model, "only in A"))
            continue
        if model not in models_a:
            unmatched.append(UnmatchedModel(model, "only in B"))
            continue
        reasons = [
            f"{label}: {reason}"
            for label, result in (("A", models_a[model]), ("B", models_b[model]))
            if isinstance(reason := _epoch_times_or_reason(result), str)
        ]
        if reasons:
            unmatched.append(UnmatchedModel(model, "; ".join(reasons)))
    return unmatched


# --------------------------------------------------------------------------------------------------- rendering


def _format_interval(interval: tuple[float, float]) -> str:
    low, high = interval
    return f"{low:.3f}–{high:.3f}" if math.isfinite(low) and math.isfinite(high) else "unbounded"


def _format_p(p_value: float) -> str:
    return "–" if math.isnan(p_value) else f"{p_value:.2g}"


def _percent(fraction: float) -> str:
    return f"{fraction * 100:g}%"


def _columns(confidence: float) -> list[str]:
    return [
        "model",
        "epochs A",
        "epochs B",
        "mean A (ms)",
        "mean B (ms)",
        "ratio B/A",
        f"{_percent(confidence)} interval B/A",
        "Welch p",
        "Mann–Whitney p",
        f"Yuen p ({_percent(YUEN_TRIM)} trim)",
        "verdict: B vs A",
    ]


def _row(comparison: ModelComparison) -> list[str]:
    result = comparison.result
    return [
        comparison.model,
        str(result.n_a),
        str(result.n_b),
        f"{result.mean_a_ms:.2f}",
        f"{result.mean_b_ms:.2f}",
        f"{result.ratio_b_over_a:.3f}",
        _format_interval(result.ratio_interval),
        _format_p(result.welch_p_value),
        _format_p(result.mann_whitney_p_value),
        _format_p(result.yuen_p_value),
        result.verdict,
    ]


def _method_text(threshold: float, confidence: float) -> str:
    return (
        "Ratio B/A = mean epoch time of B / mean epoch time of A: below 1, B's epochs are shorter (B is faster). "
        f"Interval: {_percent(confidence)} Fieller interval for the ratio, Welch degrees of freedom. "
        f"Verdict of B against A with a ±{_percent(threshold)} noise threshold: FASTER when the whole interval lies "
        f"below {1 - threshold:g}, SLOWER when above {1 + threshold:g}, SAME when inside "
        f"[{1 - threshold:g}, {1 + threshold:g}], otherwise AMBIGUOUS. p-values are two-sided tests for any difference."
    )


def render_markdown(
    comparisons: Sequence[ModelComparison],
    unmatched: Sequence[UnmatchedModel],
    *,
    label_a: str,
    label_b: str,
    threshold: float,
    confidence: float,
) -> str:
    """The comparison as a markdown section: what A and B are, the method, one table row per model, notes."""
    columns = _columns(confidence)
    lines = [
        "## gpubench compare: B against A",
        "",
        f"- **A**: {label_a}",
        f"- **B**: {label_b}",
        "",
        _method_text(threshold, confidence),
        "",
        "| " + " | ".join(columns) + " |",
        "|" + "|".join(":---" if column in _LEFT_ALIGNED else "---:" for column in columns) + "|",
    ]
    lines += ["| " + " | ".join(_row(comparison)) + " |" for comparison in comparisons]
    if comparisons:
        lines += ["", *(f"- **{c.model}** ({c.result.verdict}): {c.explanation}" for c in comparisons)]
    if unmatched:
        lines += ["", "Not compared:", "", *(f"- **{u.model}**: {u.reason}" for u in unmatched)]
    return "\n".join(lines) + "\n"


def print_table(
    console: Console,
    comparisons: Sequence[ModelComparison],
    unmatched: Sequence[UnmatchedModel],
    *,
    label_a: str,
    label_b: str,
    threshold: float,
    confidence: float,
) -> None:
    """The same content as :func:`render_markdown`, as a rich table with coloured verdicts."""
    table = Table(title="gpubench compare: B against A", caption=f"A = {label_a}\nB = {label_b}")
    for column in _columns(confidence):
        table.add_column(column, justify="left" if column in _LEFT_ALIGNED else "right")
    for comparison in comparisons:
        cells = _row(comparison)
        style = _VERDICT_STYLE[comparison.result.verdict]
        table.add_row(*cells[:-1], f"[{style}]{cells[-1]}[/{style}]")
    console.print(table)
    console.print(_method_text(threshold, confidence), soft_wrap=True, highlight=False)
    for comparison in comparisons:
        console.print(
            f"[bold]{comparison.model}[/bold] ({comparison.result.verdict}): {comparison.explanation}",
            highlight=False,
        )
    for model in unmatched:
        console.print(f"[bold]{model.model}[/bold] not compared: {model.reason}", soft_wrap=True, highlight=False)


# --------------------------------------------------------------------------------------------------- loading


def load_report(argument: str, tracking_uri: str) -> RunReport:
    """The report an argument names: a report.json file, a folder holding one, or an MLflow run id."""
    path = Path(argument)
    if path.is_dir() and (path / REPORT_FILE_NAME).is_file():
        path = path / REPORT_FILE_NAME
    try:
        if path.is_file():
            return read_report(path)
        if _RUN_ID.match(argument):
            return load_run_report(argument, tracking_uri)
    except (ReportReadError, TrackingError) as exc:
        raise CompareError(str(exc)) from exc
    raise CompareError("it is neither an existing report file nor an MLflow run id (32 hex characters)")


def describe(argument: str, report: RunReport) -> str:
    """A one-line label for a report: the argument, its device and when it was measured."""
    details = [value for value in (report.hardware.device_name, report.timestamp) if value]
    return argument + (f" ({', '.join(details)})" if details else "")


# --------------------------------------------------------------------------------------------------- command line


def _fraction(text: str) -> float:
    value = float(text)
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"must be a fraction strictly between 0 and 1, got {text}")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m gpubench.compare",
        description=(
            "Compare the epoch times of two gpubench runs, B against A: per model the ratio of mean epoch times "
            "B/A with a Fieller interval, Welch, Mann-Whitney and Yuen tests, and a verdict FASTER / SLOWER / SAME "
            "/ AMBIGUOUS (FASTER: B's epochs are shorter)."
        ),
    )
    parser.add_argument("a", metavar="A", help="baseline: a report.json (or its folder) or an MLflow run id")
    parser.add_argument("b", metavar="B", help="candidate, compared against A: a report.json or an MLflow run id")
    parser.add_argument(
        "--threshold",
        type=_fraction,
        default=DEFAULT_THRESHOLD,
        help="noise threshold as a fraction of A's mean epoch time (default 0.05 = ±5%%)",
    )
    parser.add_argument(
        "--confidence", type=_fraction, default=DEFAULT_CONFIDENCE, help="level of the ratio interval (default 0.95)"
    )
    parser.add_argument(
        "--markdown", metavar="PATH", help="also write the table as markdown to PATH, or '-' for stdout"
    )
    parser.add_argument(
        "--tracking-uri",
        default=os.environ.get("MLFLOW_TRACKING_URI", DEFAULT_TRACKING_URI),
        help="MLflow store for run ids (default: $MLFLOW_TRACKING_URI, else sqlite:///mlruns/mlflow.db)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; returns the exit code (0 done, 2 bad argument). argparse itself exits 2 on bad options."""
    args = _parser().parse_args(argv)
    # Rich assumes 80 columns when a stream is not a terminal (a pipe, a log file): too narrow for eleven columns.
    stderr = Console(stderr=True, highlight=False, width=None if sys.stderr.isatty() else _PIPE_WIDTH_COLUMNS)
    stdout = Console(highlight=False, width=None if sys.stdout.isatty() else _PIPE_WIDTH_COLUMNS)
    try:
        reports = {}
        for name, argument in (("A", args.a), ("B", args.b)):
            try:
                report = load_report(argument, args.tracking_uri)
                measured_epoch_times(report)
            except CompareError as exc:
                raise CompareError(f"argument {name} {argument!r}: {exc}.") from exc
            reports[name] = report
        comparisons = compare_reports(reports["A"], reports["B"], args.threshold, args.confidence)
        unmatched = unmatched_models(reports["A"], reports["B"])
        if not comparisons:
            raise CompareError(
                f"no model has measured epoch times in both A {args.a!r} and B {args.b!r}: "
                + "; ".join(f"{u.model}: {u.reason}" for u in unmatched)
                + "."
            )
        labels = {"label_a": describe(args.a, reports["A"]), "label_b": describe(args.b, reports["B"])}
        settings = {"threshold": args.threshold, "confidence": args.confidence}
        markdown = render_markdown(comparisons, unmatched, **labels, **settings)
        if args.markdown and args.markdown != "-":
            try:
                Path(args.markdown).write_text(markdown)
            except OSError as exc:
                raise CompareError(f"--markdown {args.markdown!r}: cannot write the file ({exc}).") from exc
    except CompareError as exc:
        stderr.print(f"[bold red]gpubench compare: error:[/bold red] {exc}", soft_wrap=True)
        return 2
    # With markdown on stdout the table goes to stderr, so that stdout can be piped as clean markdown.
    print_table(stderr if args.markdown == "-" else stdout, comparisons, unmatched, **labels, **settings)
    if args.markdown == "-":
        sys.stdout.write(markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
