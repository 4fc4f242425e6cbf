"""``gpubench compare A B [--threshold 0.05] [--confidence 0.95] [--markdown out.md | -] [--tracking-uri URI]``:
does B train faster, slower or the same as A per sample, beyond the noise (:mod:`gpubench.output.compare`)?

A and B are report.json files (or their folders) or MLflow run ids. Exit 0 when compared, 2 for bad input."""

import argparse
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console

from gpubench.output.compare import (
    DEFAULT_CONFIDENCE,
    DEFAULT_THRESHOLD,
    CompareError,
    compare_reports,
    per_sample_times,
    print_table,
    render_markdown,
    unmatched_models,
)
from gpubench.output.compare_host import host_difference
from gpubench.output.report_file import REPORT_FILE_NAME, ReportReadError, read_report
from gpubench.output.tracking import TrackingError, load_run_report
from gpubench.results import RunReport

DEFAULT_TRACKING_URI = "sqlite:///mlruns/mlflow.db"
#: MLflow run ids are ``uuid4().hex``; anything else that is not a file is treated as a mistyped path.
_RUN_ID = re.compile(r"^[0-9a-f]{32}$")
#: Console width when output goes to a pipe or file.
_PIPE_WIDTH_COLUMNS = 200


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
        prog="gpubench compare",
        description=(
            "Compare two gpubench runs, B against A, on time per sample (epoch time / samples per epoch): per "
            "model the ratio of mean times per sample B/A with a Fieller interval on long-run (batch-means) "
            "variances, a t test with the same standard errors, and a verdict FASTER / SLOWER / SAME / AMBIGUOUS "
            "(FASTER: B takes less time per sample), or HOST_DIFFERS where the hosts' recorded loads or probes "
            "could explain the difference."
        ),
    )
    parser.add_argument("a", metavar="A", help="baseline: a report.json (or its folder) or an MLflow run id")
    parser.add_argument("b", metavar="B", help="candidate, compared against A: a report.json or an MLflow run id")
    parser.add_argument(
        "--threshold",
        type=_fraction,
        default=DEFAULT_THRESHOLD,
        help="noise threshold as a fraction of A's mean time per sample (default 0.05 = ±5%%)",
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
    # Rich assumes 80 columns when a stream is not a terminal (a pipe, a log file): too narrow for twelve columns.
    stderr = Console(stderr=True, highlight=False, width=None if sys.stderr.isatty() else _PIPE_WIDTH_COLUMNS)
    stdout = Console(highlight=False, width=None if sys.stdout.isatty() else _PIPE_WIDTH_COLUMNS)
    try:
        reports = {}
        for name, argument in (("A", args.a), ("B", args.b)):
            try:
                report = load_report(argument, args.tracking_uri)
                per_sample_times(report)
            except CompareError as exc:
                raise CompareError(f"argument {name} {argument!r}: {exc}.") from exc
            reports[name] = report
        comparisons = compare_reports(reports["A"], reports["B"], args.threshold, args.confidence)
        unmatched = unmatched_models(reports["A"], reports["B"], (f"A {args.a!r}", f"B {args.b!r}"))
        if not comparisons:
            raise CompareError(
                f"no model can be compared between A {args.a!r} and B {args.b!r}: "
                + "; ".join(f"{u.model}: {u.reason}" for u in unmatched)
                + "."
            )
        labels = {"label_a": describe(args.a, reports["A"]), "label_b": describe(args.b, reports["B"])}
        settings = {
            "threshold": args.threshold,
            "confidence": args.confidence,
            "hosts": host_difference(reports["A"], reports["B"], args.confidence),
        }
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
