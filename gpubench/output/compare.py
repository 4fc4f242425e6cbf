"""Compare two gpubench runs: are B's training epochs shorter, longer or the same as A's, beyond the noise?

    python -m gpubench.compare A B [--threshold 0.05] [--confidence 0.95] [--markdown out.md | -] [--tracking-uri URI]

A and B are report.json files (or folders holding one) or MLflow run ids (32 hex characters), whose report.json
artifact is downloaded from the tracking store (``--tracking-uri``, else ``MLFLOW_TRACKING_URI``, else
``sqlite:///mlruns/mlflow.db``). Every model measured in both reports is compared on its measured epoch times
(``raw_epoch_times_ms``, milliseconds, warmup excluded); models measured in only one, or without at least two epoch
times in either, are listed as not compared.

**Direction.** Everything reads "B against A": the ratio is ``mean epoch time of B / mean epoch time of A``, so a
ratio below 1 means B's epochs are shorter (B trains faster) and above 1 that they are longer.

**Ratio interval.** Fieller's interval for the ratio of two independent means: the set of ratios R for which
``mean_B - R * mean_A = 0`` is not rejected by a Welch-type t test, i.e. the R solving
``(mean_B - R mean_A)^2 <= t^2 (se_B^2 + R^2 se_A^2)`` with ``se = sd / sqrt(n)``. Its degrees of freedom are
Welch-Satterthwaite's for ``mean_B - R mean_A`` evaluated at the estimated ratio,
``(se_B^2 + R^2 se_A^2)^2 / (se_B^4 / (n_B - 1) + R^4 se_A^4 / (n_A - 1))``. Unlike a delta-method interval it
needs no small-noise approximation and is asymmetric where the ratio's distribution is; it is unbounded when A's
mean itself is not distinguishable from zero (then the verdict is AMBIGUOUS).

**Verdict** of B against A with noise threshold ``d`` (default 0.05) and the interval ``[low, high]``:

* FASTER    -- ``high < 1 - d``: B's epochs are shorter by more than ``d``, with the stated confidence;
* SLOWER    -- ``low > 1 + d``: B's epochs are longer by more than ``d``;
* SAME      -- ``1 - d <= low`` and ``high <= 1 + d``: any difference is within the noise threshold
  (an equivalence claim, like two one-sided tests at level ``(1 - confidence) / 2`` each);
* AMBIGUOUS -- anything else: the interval reaches across ``1 - d`` or ``1 + d``, so these epochs cannot tell.
  A noisy run compared with itself is AMBIGUOUS too: identical data do not show that a rerun lands within ``d``.
  For AMBIGUOUS the comparison says how many epochs per run would decide, if means and spreads stayed as measured.

The verdict rests on the interval only. Welch's t test (``scipy.stats.ttest_ind(equal_var=False)``), the
Mann-Whitney U test (``scipy.stats.mannwhitneyu``, two-sided) and Yuen's 20%-trimmed Welch test
(``scipy.stats.ttest_ind(equal_var=False, trim=0.2)``, robust to stalls) give two-sided p-values for "any
difference at all"; when they disagree with each other, outliers or skew are at work. Epochs within a run are
treated as independent here; consecutive epochs often correlate, which makes every figure somewhat optimistic.
"""

import argparse
import json
import logging
import math
import os
import re
import sys
import tempfile
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from rich.console import Console
from rich.table import Table
from scipy import stats as sps

from gpubench.errors import GpubenchError
from gpubench.stats.epoch_times import smallest_satisfying

FASTER = "FASTER"
SLOWER = "SLOWER"
SAME = "SAME"
AMBIGUOUS = "AMBIGUOUS"

DEFAULT_THRESHOLD = 0.05
DEFAULT_CONFIDENCE = 0.95
DEFAULT_TRACKING_URI = "sqlite:///mlruns/mlflow.db"
#: Fraction trimmed from each tail for Yuen's test; 20% is Yuen's and Wilcox's usual choice.
YUEN_TRIM = 0.2
#: A variance needs two epochs.
MIN_EPOCHS = 2
#: MLflow run ids are ``uuid4().hex``; anything else that is not a file is treated as a mistyped path.
_RUN_ID = re.compile(r"^[0-9a-f]{32}$")
_SQLITE_PREFIX = "sqlite:///"
#: The search for the epochs that would decide an AMBIGUOUS comparison gives up beyond this many per run.
_MAX_EPOCHS_TO_DECIDE = 1_000_000
#: Console width when output goes to a pipe or file.
_PIPE_WIDTH_COLUMNS = 200
_LEFT_ALIGNED = ("model", "verdict: B vs A")
_VERDICT_STYLE = {FASTER: "green", SLOWER: "red", SAME: "cyan", AMBIGUOUS: "yellow"}


class CompareError(GpubenchError):
    """An argument of the compare command is not a usable report (missing, unreadable, no epoch times)."""


@dataclass(frozen=True)
class RatioInterval:
    """Fieller's interval for ``mean_B / mean_A`` (dimensionless); ``(-inf, inf)`` when unbounded."""

    ratio: float
    low: float
    high: float
    welch_df: float
    confidence_level: float


@dataclass(frozen=True)
class ModelComparison:
    """One model measured in both reports, B against A; times in milliseconds, ratios are B / A.

    ``ratio_b_over_a`` below 1 means B's epochs are shorter. The p-values are two-sided and NaN where a test is
    undefined (both samples constant). ``epochs_to_decide`` is set for AMBIGUOUS only: the epochs per run that
    would make the verdict decisive if the means and standard deviations stayed as measured (None when no count
    would, e.g. when the ratio sits on a threshold edge).
    """

    model: str
    n_a: int
    n_b: int
    mean_a_ms: float
    mean_b_ms: float
    std_a_ms: float
    std_b_ms: float
    ratio_b_over_a: float
    ratio_interval: tuple[float, float]
    ratio_interval_df: float
    confidence_level: float
    threshold: float
    welch_p_value: float
    mann_whitney_p_value: float
    yuen_p_value: float
    verdict: str
    epochs_to_decide: int | None
    #: True when B's epoch times are exactly A's (a report compared with itself): SAME by definition.
    identical_measurements: bool = False

    @property
    def explanation(self) -> str:
        """One sentence on why this verdict, in B-against-A terms."""
        low, high = self.ratio_interval
        interval = _format_interval(self.ratio_interval)
        lower, upper = 1 - self.threshold, 1 + self.threshold
        band = f"[{lower:g}, {upper:g}]"
        change = abs(self.ratio_b_over_a - 1)
        if self.verdict == FASTER:
            return f"B's epochs are {change:.1%} shorter than A's; the interval {interval} lies below {lower:g}."
        if self.verdict == SLOWER:
            return f"B's epochs are {change:.1%} longer than A's; the interval {interval} lies above {upper:g}."
        if self.identical_measurements:
            return "B's epoch times are A's, one measurement compared with itself: no difference to detect."
        if self.verdict == SAME:
            return f"B and A agree within ±{_percent(self.threshold)}: the interval {interval} lies inside {band}."
        if not (math.isfinite(low) and math.isfinite(high)):
            return "A's epoch times are too few or too noisy for a bounded ratio interval; measure more epochs."
        advice = (
            f"about {self.epochs_to_decide} epochs per run would decide, if means and spreads hold"
            if self.epochs_to_decide is not None
            else "the ratio sits on the threshold edge, so more epochs would not decide"
        )
        return f"The interval {interval} crosses an edge of the band {band}, so these epochs cannot tell; {advice}."


@dataclass(frozen=True)
class UnmatchedModel:
    """A model that could not be compared, and why (only in one report, or too few epoch times in one)."""

    model: str
    reason: str


# --------------------------------------------------------------------------------------------------- statistics


def _fieller(
    mean_a_ms: float,
    std_a_ms: float,
    n_a: int,
    mean_b_ms: float,
    std_b_ms: float,
    n_b: int,
    confidence_level: float,
) -> RatioInterval:
    """Fieller's interval for mean_B / mean_A from summary statistics (see the module docstring)."""
    ratio = mean_b_ms / mean_a_ms
    var_mean_a = std_a_ms**2 / n_a
    var_mean_b = std_b_ms**2 / n_b
    if var_mean_a == 0 and var_mean_b == 0:
        # No spread in either sample: the ratio is known exactly.
        return RatioInterval(ratio, ratio, ratio, math.inf, confidence_level)
    welch_df = (var_mean_b + ratio**2 * var_mean_a) ** 2 / (
        var_mean_b**2 / (n_b - 1) + ratio**4 * var_mean_a**2 / (n_a - 1)
    )
    t = float(sps.t.ppf((1 + confidence_level) / 2, welch_df))
    leading = mean_a_ms**2 - t**2 * var_mean_a
    if leading <= 0:
        # A's mean is not distinguishable from zero, so the set of plausible ratios is not an interval.
        return RatioInterval(ratio, -math.inf, math.inf, welch_df, confidence_level)
    # The roots of (mean_b - R mean_a)^2 = t^2 (var_mean_b + R^2 var_mean_a); the discriminant is positive here.
    half = t * math.sqrt(mean_a_ms**2 * var_mean_b + mean_b_ms**2 * var_mean_a - t**2 * var_mean_a * var_mean_b)
    centre = mean_a_ms * mean_b_ms
    return RatioInterval(ratio, (centre - half) / leading, (centre + half) / leading, welch_df, confidence_level)


def ratio_interval(times_a_ms: ArrayLike, times_b_ms: ArrayLike, confidence_level: float) -> RatioInterval:
    """Fieller's interval for mean(times_b_ms) / mean(times_a_ms) with Welch degrees of freedom at the estimate."""
    a = np.asarray(times_a_ms, dtype=float)
    b = np.asarray(times_b_ms, dtype=float)
    return _fieller(
        float(a.mean()), float(a.std(ddof=1)), a.size, float(b.mean()), float(b.std(ddof=1)), b.size, confidence_level
    )


def verdict(interval: tuple[float, float], threshold: float) -> str:
    """FASTER / SLOWER / SAME / AMBIGUOUS for B against A from the interval of the ratio B / A."""
    low, high = interval
    if high < 1 - threshold:
        return FASTER
    if low > 1 + threshold:
        return SLOWER
    if 1 - threshold <= low and high <= 1 + threshold:
        return SAME
    return AMBIGUOUS


def epochs_to_decide(
    mean_a_ms: float,
    std_a_ms: float,
    mean_b_ms: float,
    std_b_ms: float,
    threshold: float,
    confidence_level: float,
    start_epochs: int = MIN_EPOCHS,
) -> int | None:
    """The fewest epochs per run (>= ``start_epochs``) whose interval gives a decisive verdict, if both runs kept
    these means and standard deviations (ms); None when none up to a million would (the ratio on an edge).
    """

    def decides(n: int) -> bool:
        interval = _fieller(mean_a_ms, std_a_ms, n, mean_b_ms, std_b_ms, n, confidence_level)
        return verdict((interval.low, interval.high), threshold) != AMBIGUOUS

    if not decides(_MAX_EPOCHS_TO_DECIDE):
        return None
    # The interval narrows as n grows, so "decides" flips from False to True once: bisect for the flip.
    return smallest_satisfying(decides, start_epochs - 1, _MAX_EPOCHS_TO_DECIDE)


def _p_values(times_a_ms: np.ndarray, times_b_ms: np.ndarray) -> tuple[float, float, float]:
    """Two-sided Welch, Mann-Whitney U and Yuen (20% trimmed, Welch) p-values for a difference of B and A."""
    with warnings.catch_warnings():
        # Constant samples make the t tests undefined: scipy warns and returns NaN, which the table shows as "-".
        warnings.simplefilter("ignore", RuntimeWarning)
        welch = sps.ttest_ind(times_b_ms, times_a_ms, equal_var=False).pvalue
        mann_whitney = sps.mannwhitneyu(times_b_ms, times_a_ms, alternative="two-sided").pvalue
        yuen = sps.ttest_ind(times_b_ms, times_a_ms, equal_var=False, trim=YUEN_TRIM).pvalue
    return float(welch), float(mann_whitney), float(yuen)


# --------------------------------------------------------------------------------------------------- reports


def _epoch_times_or_reason(section: Any) -> np.ndarray | str:
    """A model's measured epoch times (ms) if there are at least two finite positive ones, else why not."""
    if not isinstance(section, dict):
        return "its report section is not an object"
    times = section.get("raw_epoch_times_ms")
    status = section.get("status", "?")
    error = f": {section['error']}" if section.get("error") else ""
    if not isinstance(times, list) or len(times) < MIN_EPOCHS:
        count = len(times) if isinstance(times, list) else 0
        return f"{count} measured epoch time(s), status {status}{error}"
    if not all(isinstance(t, int | float) and not isinstance(t, bool) and math.isfinite(t) and t > 0 for t in times):
        return "its raw_epoch_times_ms are not all finite positive numbers"
    return np.asarray(times, dtype=float)


def _models(report: dict[str, Any]) -> dict[str, Any]:
    models = report.get("models")
    if not isinstance(models, dict):
        raise CompareError("it is not a gpubench report: there is no 'models' section")
    return models


def measured_epoch_times(report: dict[str, Any]) -> dict[str, np.ndarray]:
    """Per model with at least two measured epochs: its ``raw_epoch_times_ms`` (ms), in report order.

    Raises CompareError when the report has no such model, since then there is nothing to compare.
    """
    models = _models(report)
    measured = {
        name: times for name, section in models.items() if not isinstance(times := _epoch_times_or_reason(section), str)
    }
    if not measured:
        found = "; ".join(f"{name}: {_epoch_times_or_reason(section)}" for name, section in models.items())
        raise CompareError(
            f"it has no model with at least {MIN_EPOCHS} measured epoch times (raw_epoch_times_ms)"
            + (f" ({found})" if found else ", its 'models' section is empty")
        )
    return measured


def _check_parameters(threshold: float, confidence: float) -> None:
    if not 0 < threshold < 1:
        raise CompareError(f"threshold must lie in (0, 1), got {threshold}")
    if not 0 < confidence < 1:
        raise CompareError(f"confidence must lie in (0, 1), got {confidence}")


def compare_reports(
    report_a: dict[str, Any],
    report_b: dict[str, Any],
    threshold: float = DEFAULT_THRESHOLD,
    confidence: float = DEFAULT_CONFIDENCE,
) -> list[ModelComparison]:
    """B against A for every model with at least two measured epochs in both reports, in A's model order.

    ``threshold`` is the noise band as a fraction of A's mean epoch time (0.05 = ±5%); ``confidence`` the level
    of the ratio interval. Raises CompareError when either report has no measured epoch times at all.
    """
    _check_parameters(threshold, confidence)
    measured = []
    for label, report in (("A", report_a), ("B", report_b)):
        try:
            measured.append(measured_epoch_times(report))
        except CompareError as exc:
            raise CompareError(f"report {label}: {exc}") from exc
    times_a, times_b = measured
    comparisons = []
    for model in (name for name in times_a if name in times_b):
        a, b = times_a[model], times_b[model]
        interval = ratio_interval(a, b, confidence)
        welch, mann_whitney, yuen = _p_values(a, b)
        # The same epoch times on both sides are one measurement compared with itself: nothing differs, whatever
        # the noise, so it is SAME by definition (the interval still reports what these epochs could resolve).
        identical = a.shape == b.shape and bool(np.array_equal(a, b))
        outcome = SAME if identical else verdict((interval.low, interval.high), threshold)
        mean_a, std_a, mean_b, std_b = float(a.mean()), float(a.std(ddof=1)), float(b.mean()), float(b.std(ddof=1))
        comparisons.append(
            ModelComparison(
                model=model,
                n_a=a.size,
                n_b=b.size,
                mean_a_ms=mean_a,
                mean_b_ms=mean_b,
                std_a_ms=std_a,
                std_b_ms=std_b,
                ratio_b_over_a=interval.ratio,
                ratio_interval=(interval.low, interval.high),
                ratio_interval_df=interval.welch_df,
                confidence_level=confidence,
                threshold=threshold,
                welch_p_value=welch,
                mann_whitney_p_value=mann_whitney,
                yuen_p_value=yuen,
                verdict=outcome,
                identical_measurements=identical,
                epochs_to_decide=(
                    epochs_to_decide(mean_a, std_a, mean_b, std_b, threshold, confidence, max(a.size, b.size))
                    if outcome == AMBIGUOUS
                    else None
                ),
            )
        )
    return comparisons


def unmatched_models(report_a: dict[str, Any], report_b: dict[str, Any]) -> list[UnmatchedModel]:
    """Models in either report that :func:`compare_reports` leaves out, with the reason, A's models first."""
    models_a, models_b = _models(report_a), _models(report_b)
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
            for label, section in (("A", models_a[model]), ("B", models_b[model]))
            if isinstance(reason := _epoch_times_or_reason(section), str)
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
    return [
        comparison.model,
        str(comparison.n_a),
        str(comparison.n_b),
        f"{comparison.mean_a_ms:.2f}",
        f"{comparison.mean_b_ms:.2f}",
        f"{comparison.ratio_b_over_a:.3f}",
        _format_interval(comparison.ratio_interval),
        _format_p(comparison.welch_p_value),
        _format_p(comparison.mann_whitney_p_value),
        _format_p(comparison.yuen_p_value),
        comparison.verdict,
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
        lines += ["", *(f"- **{c.model}** ({c.verdict}): {c.explanation}" for c in comparisons)]
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
        style = _VERDICT_STYLE[comparison.verdict]
        table.add_row(*cells[:-1], f"[{style}]{cells[-1]}[/{style}]")
    console.print(table)
    console.print(_method_text(threshold, confidence), soft_wrap=True, highlight=False)
    for comparison in comparisons:
        console.print(
            f"[bold]{comparison.model}[/bold] ({comparison.verdict}): {comparison.explanation}", highlight=False
        )
    for model in unmatched:
        console.print(f"[bold]{model.model}[/bold] not compared: {model.reason}", soft_wrap=True, highlight=False)


# --------------------------------------------------------------------------------------------------- loading


def _read_report_file(path: Path) -> dict[str, Any]:
    try:
        report = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise CompareError(f"{path} is not valid JSON ({exc})") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise CompareError(f"{path} cannot be read ({exc})") from exc
    if not isinstance(report, dict):
        raise CompareError(f"{path} is not a gpubench report (a JSON object)")
    return report


def _check_store_exists(tracking_uri: str) -> None:
    # Opening a SQLite URI whose file is missing would silently create an empty store: refuse instead.
    if tracking_uri.startswith(_SQLITE_PREFIX):
        database = Path(tracking_uri[len(_SQLITE_PREFIX) :])
        if not database.is_file():
            raise CompareError(
                f"the MLflow tracking store {tracking_uri} does not exist (no file {database.resolve()}); run from "
                "the folder that holds mlruns/, or pass --tracking-uri"
            )


def _load_run_report(run_id: str, tracking_uri: str) -> dict[str, Any]:
    """Download the report.json artifact of an MLflow run; mlflow is imported only here."""
    _check_store_exists(tracking_uri)
    # MLflow's SQLite store logs schema set-up at INFO and SQLAlchemy warns about MLflow's own loader options.
    for logger_name in ("alembic", "mlflow.store.db.utils"):
        logging.getLogger(logger_name).setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", module=r"mlflow\.store\..*")
    from mlflow.artifacts import download_artifacts
    from mlflow.tracking import MlflowClient

    try:
        MlflowClient(tracking_uri=tracking_uri).get_run(run_id)
    # Any store failure (unknown run, unreachable server, bad URI) is the user's environment, not a bug here.
    except Exception as exc:
        reason = str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__
        raise CompareError(f"no MLflow run {run_id} in the tracking store {tracking_uri} ({reason})") from exc
    with tempfile.TemporaryDirectory() as folder:
        try:
            path = download_artifacts(
                run_id=run_id, artifact_path="report.json", dst_path=folder, tracking_uri=tracking_uri
            )
        except Exception as exc:
            raise CompareError(f"MLflow run {run_id} has no report.json artifact that can be downloaded") from exc
        return _read_report_file(Path(path))


def load_report(argument: str, tracking_uri: str) -> dict[str, Any]:
    """The report an argument names: a report.json file, a folder holding one, or an MLflow run id."""
    path = Path(argument)
    if path.is_dir() and (path / "report.json").is_file():
        path = path / "report.json"
    if path.is_file():
        return _read_report_file(path)
    if _RUN_ID.match(argument):
        return _load_run_report(argument, tracking_uri)
    raise CompareError("it is neither an existing report file nor an MLflow run id (32 hex characters)")


def describe(argument: str, report: dict[str, Any]) -> str:
    """A one-line label for a report: the argument, its device and when it was measured."""
    hardware = report.get("hardware") if isinstance(report.get("hardware"), dict) else {}
    details = [str(value) for value in (hardware.get("device_name"), report.get("timestamp")) if value]
    return argument + (f" ({', '.join(details)})" if details else "")


# --------------------------------------------------------------------------------------------------- command line


def _fraction(text: str) -> float:
    value = float(text)
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"must be a fraction strictly between 0 and 1, got {text}")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m gpubench.output.compare",
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
