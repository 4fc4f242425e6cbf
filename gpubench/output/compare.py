"""``gpubench compare A B``: does B train faster, slower or the same as A per sample?

A and B are report files or MLflow run ids. Models are compared on time per sample (epochs are auto-sized, so epoch
times alone would read SAME), with :mod:`gpubench.stats.compare`'s statistics, "B against A". Intervals are widened
by the hosts' difference (:mod:`gpubench.output.compare_host`); a verdict that does not survive reads HOST_DIFFERS."""

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from rich.console import Console
from rich.table import Table

from gpubench.errors import GpubenchError
from gpubench.output.compare_host import (
    HostCorrection,
    HostDifference,
    correct_for_host,
    format_ratio_interval,
    host_difference,
    host_explanation,
    host_lines,
    host_share,
)
from gpubench.output.report_file import measured_values_problem
from gpubench.results import ModelResult, RunReport
from gpubench.stats.compare import (
    AMBIGUOUS,
    FASTER,
    MAX_PLANNED_EPOCHS,
    PLANNED_DIFFERENCE,
    PLANNED_POWER,
    SAME,
    SLOWER,
    MeanTimeComparison,
    check_settings,
    compare_mean_times,
    rounds_problem,
)
from gpubench.stats.host_compare import HOST_DIFFERS
from gpubench.stats.rounds import round_gaps_epochs

DEFAULT_THRESHOLD = 0.05
DEFAULT_CONFIDENCE = 0.95
DEFAULT_TRACKING_URI = "sqlite:///mlruns/mlflow.db"
#: How A and B are named in reasons when no file names are given.
DEFAULT_SOURCES = ("A", "B")
#: MLflow run ids are ``uuid4().hex``; anything else that is not a file is treated as a mistyped path.
_RUN_ID = re.compile(r"^[0-9a-f]{32}$")
#: Console width when output goes to a pipe or file.
_PIPE_WIDTH_COLUMNS = 200
#: Per-sample times are fractions of a millisecond for the small models; the table shows microseconds.
_US_PER_MS = 1000.0
_LEFT_ALIGNED = ("model", "unit", "verdict: B vs A")
_VERDICT_STYLE = {FASTER: "green", SLOWER: "red", SAME: "cyan", AMBIGUOUS: "yellow", HOST_DIFFERS: "magenta"}


class CompareError(GpubenchError):
    """An argument of the compare command is not a usable report (missing, unreadable, no epoch times)."""


@dataclass(frozen=True)
class PerSampleTimes:
    """One model's measured epochs in one report as times per sample (ms per ``sample_unit``), in the rounds the
    decision counted (one block where there were none) and the gaps between them (model epochs; None: back to
    back)."""

    times_ms: np.ndarray
    samples_per_epoch: float
    sample_unit: str
    epochs_per_round: tuple[int, ...]
    gaps_epochs: tuple[float, ...] | None

    @property
    def rounds_ms(self) -> list[np.ndarray]:
        return np.split(self.times_ms, np.cumsum(self.epochs_per_round)[:-1])


@dataclass(frozen=True)
class ModelComparison:
    """One model measured in both reports, with B's times per sample against A's (``result``, ms per sample)."""

    model: str
    sample_unit: str
    samples_per_epoch_a: float
    samples_per_epoch_b: float
    result: MeanTimeComparison
    #: The hosts' difference and this model's interval with it divided out; None where the hosts did not differ.
    host_difference: HostDifference | None = None
    host: HostCorrection | None = None

    @property
    def verdict(self) -> str:
        """The verdict: the measured one, or HOST_DIFFERS where the hosts' difference could explain it."""
        return self.host.verdict if self.host else self.result.verdict

    @property
    def explanation(self) -> str:
        """Why this verdict, in B-against-A terms."""
        host = (
            host_explanation(self.model, self.result.verdict, self.host, self.host_difference, self.result.threshold)
            if self.host and self.host_difference
            else ""
        )
        return self._reason() + self._epoch_sizes() + host

    def _reason(self) -> str:
        result = self.result
        unit = self.sample_unit
        low, high = result.ratio_interval
        interval = format_ratio_interval(result.ratio_interval)
        lower, upper = 1 - result.threshold, 1 + result.threshold
        band = f"[{lower:g}, {upper:g}]"
        change = abs(result.ratio_b_over_a - 1)
        if result.verdict == FASTER:
            return f"B takes {change:.1%} less time per {unit} than A; the interval {interval} lies below {lower:g}."
        if result.verdict == SLOWER:
            return f"B takes {change:.1%} more time per {unit} than A; the interval {interval} lies above {upper:g}."
        if result.identical_measurements:
            return "B's times per sample are A's, one measurement compared with itself: no difference to detect."
        if result.verdict == SAME:
            return (
                f"B and A agree within ±{_percent(result.threshold)} per {unit}: the interval {interval} lies inside "
                f"{band}."
            )
        advice = _power_advice(result)
        if not math.isfinite(high):
            return f"A's mean is too uncertain for a bounded ratio interval; {advice}."
        if low == 0:
            return f"B's mean is too uncertain for a lower bound on the ratio ({interval}); {advice}."
        return f"The interval {interval} crosses an edge of the band {band}, so these epochs cannot tell; {advice}."

    def _epoch_sizes(self) -> str:
        if self.samples_per_epoch_a == self.samples_per_epoch_b:
            return ""
        return (
            f" B's epochs hold {_format_count(self.samples_per_epoch_b)} {self.sample_unit}s, A's "
            f"{_format_count(self.samples_per_epoch_a)}."
        )


@dataclass(frozen=True)
class UnmatchedModel:
    """A model that could not be compared, and why."""

    model: str
    reason: str


def _rounds(result: ModelResult) -> tuple[tuple[int, ...], tuple[float, ...] | None]:
    """The rounds the decision counted (``statistics.rounds``, else the round records) and their gaps; one block
    where there were none."""
    times = result.raw_epoch_times_ms
    counted = result.statistics.rounds if result.statistics else None
    epochs = tuple(counted.epochs_per_round) if counted else tuple(result.epochs_per_round)
    if len(epochs) < 2 or sum(epochs) != len(times):
        return (len(times),), None
    gaps, records = counted.gaps_epochs if counted else None, result.rounds
    if gaps is None and tuple(r.epochs for r in records) == epochs:
        # A report from before the gaps were stored: derive them from the round records, as the decision does.
        gaps = tuple(
            round_gaps_epochs([r.started_s for r in records], list(epochs), [r.mean_epoch_ms for r in records])
        )
    return epochs, gaps


def _per_sample_times_or_reason(result: ModelResult) -> PerSampleTimes | str:
    """A model's epochs as times per sample when it has enough of them, else why not."""
    times = result.raw_epoch_times_ms
    error = f": {result.error}" if result.error else ""
    epochs_per_round, gaps = _rounds(result)
    problem = rounds_problem(epochs_per_round) if times else None
    if not times or problem:
        detail = f" ({problem})" if problem else ""
        return f"{len(times)} measured epoch time(s){detail}, status {result.status}{error}"
    problem = measured_values_problem(result)
    if problem:
        return problem
    samples_per_epoch = result.samples_per_epoch
    if samples_per_epoch is None or not result.sample_unit:
        return "no samples per epoch recorded (steps_per_epoch, samples_per_step, sample_unit), so no time per sample"
    per_sample = np.asarray(times, dtype=float) / samples_per_epoch
    return PerSampleTimes(per_sample, samples_per_epoch, result.sample_unit, epochs_per_round, gaps)


def per_sample_times(report: RunReport) -> dict[str, PerSampleTimes]:
    """Per comparable model, its epochs as times per sample, in report order; CompareError when there is none."""
    measured = {
        name: times
        for name, result in report.models.items()
        if not isinstance(times := _per_sample_times_or_reason(result), str)
    }
    if not measured:
        found = "; ".join(f"{name}: {_per_sample_times_or_reason(result)}" for name, result in report.models.items())
        raise CompareError(
            "it has no model with enough measured epoch times (raw_epoch_times_ms) and its samples per epoch"
            + (f" ({found})" if found else ", it has no models")
        )
    return measured


def _pair_models(
    report_a: RunReport, report_b: RunReport, sources: tuple[str, str]
) -> tuple[list[tuple[str, PerSampleTimes, PerSampleTimes]], list[UnmatchedModel]]:
    """The models both reports can compare, and the others with the reason; A's models first."""
    source_a, source_b = sources
    models_a, models_b = report_a.models, report_b.models
    paired, unmatched = [], []
    for model in [*models_a, *(name for name in models_b if name not in models_a)]:
        if model not in models_b:
            unmatched.append(UnmatchedModel(model, f"only in {source_a}"))
            continue
        if model not in models_a:
            unmatched.append(UnmatchedModel(model, f"only in {source_b}"))
            continue
        times_a = _per_sample_times_or_reason(models_a[model])
        times_b = _per_sample_times_or_reason(models_b[model])
        reasons = [
            f"{source}: {times}"
            for source, times in ((source_a, times_a), (source_b, times_b))
            if isinstance(times, str)
        ]
        if reasons:
            unmatched.append(UnmatchedModel(model, "; ".join(reasons)))
        elif times_a.sample_unit != times_b.sample_unit:
            unmatched.append(
                UnmatchedModel(
                    model,
                    f"refused: {source_a} counts its samples in {times_a.sample_unit!r}, {source_b} in "
                    f"{times_b.sample_unit!r}; times per sample in different units are not comparable",
                )
            )
        else:
            paired.append((model, times_a, times_b))
    return paired, unmatched


def compare_reports(
    report_a: RunReport,
    report_b: RunReport,
    threshold: float = DEFAULT_THRESHOLD,
    confidence: float = DEFAULT_CONFIDENCE,
) -> list[ModelComparison]:
    """B against A per sample for every comparable model; ``threshold`` is the noise band (0.05 = ±5%)."""
    try:
        check_settings(threshold, confidence)
    except ValueError as exc:
        raise CompareError(str(exc)) from exc
    for label, report in zip(DEFAULT_SOURCES, (report_a, report_b), strict=True):
        try:
            per_sample_times(report)
        except CompareError as exc:
            raise CompareError(f"report {label}: {exc}") from exc
    paired, _ = _pair_models(report_a, report_b, DEFAULT_SOURCES)
    hosts = host_difference(report_a, report_b, confidence)
    comparisons = []
    for model, times_a, times_b in paired:
        result = compare_mean_times(
            times_a.rounds_ms,
            times_b.rounds_ms,
            threshold=threshold,
            confidence_level=confidence,
            gaps_a_epochs=times_a.gaps_epochs,
            gaps_b_epochs=times_b.gaps_epochs,
        )
        # B's times exactly A's are one measurement compared with itself: no host can have moved them apart.
        differs = hosts.differs and not result.identical_measurements
        comparisons.append(
            ModelComparison(
                model=model,
                sample_unit=times_a.sample_unit,
                samples_per_epoch_a=times_a.samples_per_epoch,
                samples_per_epoch_b=times_b.samples_per_epoch,
                result=result,
                host_difference=hosts if differs else None,
                host=(
                    correct_for_host(
                        result.verdict, result.ratio_interval, threshold, hosts, host_share(report_a, report_b, model)
                    )
                    if differs
                    else None
                ),
            )
        )
    return comparisons


def unmatched_models(
    report_a: RunReport, report_b: RunReport, sources: tuple[str, str] = DEFAULT_SOURCES
) -> list[UnmatchedModel]:
    """Models in either report that :func:`compare_reports` leaves out, with the reason; ``sources`` name A and B."""
    return _pair_models(report_a, report_b, sources)[1]


def _power_advice(result: MeanTimeComparison) -> str:
    """How many epochs (in how many rounds) per run would see a :data:`PLANNED_DIFFERENCE` difference with
    :data:`PLANNED_POWER`."""
    difference, power, epochs = _percent(PLANNED_DIFFERENCE), _percent(PLANNED_POWER), result.epochs_for_power
    if epochs is None:
        if result.threshold >= PLANNED_DIFFERENCE:
            return f"a {difference} difference lies inside the ±{_percent(result.threshold)} band"
        limit = f"{MAX_PLANNED_EPOCHS:,} epochs per run"
        return f"no count up to {limit} would see a {difference} difference with {power} power"
    seen = f"a {difference} difference would be seen with {power} power from {epochs:,} epochs per run"
    rounds_a, rounds_b = result.a.planned_rounds(epochs), result.b.planned_rounds(epochs)
    if rounds_a == rounds_b == 1:
        return f"{seen} in one block"
    if rounds_a != rounds_b:
        return f"{seen} in {rounds_a:,} rounds for A, {rounds_b:,} for B"
    return f"{seen} in {rounds_a:,} rounds (statistics.rounds={rounds_a} epochs={epochs})"


def _format_p(p_value: float) -> str:
    return "–" if math.isnan(p_value) else f"{p_value:.2g}"


def _format_count(samples: float) -> str:
    return f"{samples:,.0f}" if float(samples).is_integer() else f"{samples:,.2f}"


def _format_epochs(epochs_per_round: tuple[int, ...]) -> str:
    rounds = len(epochs_per_round)
    return f"{sum(epochs_per_round)} ({rounds})" if rounds > 1 else str(sum(epochs_per_round))


def _percent(fraction: float) -> str:
    return f"{fraction * 100:g}%"


def _columns(confidence: float) -> list[str]:
    return [
        "model",
        "unit",
        "epochs (rounds) A",
        "epochs (rounds) B",
        "samples/epoch A",
        "samples/epoch B",
        "µs/sample A",
        "µs/sample B",
        "ratio B/A",
        f"{_percent(confidence)} interval B/A",
        "p (t test)",
        "B/A host divided out",
        "verdict: B vs A",
    ]


def _row(comparison: ModelComparison) -> list[str]:
    result = comparison.result
    return [
        comparison.model,
        comparison.sample_unit,
        _format_epochs(result.a.epochs_per_round),
        _format_epochs(result.b.epochs_per_round),
        _format_count(comparison.samples_per_epoch_a),
        _format_count(comparison.samples_per_epoch_b),
        f"{result.a.mean_ms * _US_PER_MS:.4g}",
        f"{result.b.mean_ms * _US_PER_MS:.4g}",
        f"{result.ratio_b_over_a:.3f}",
        format_ratio_interval(result.ratio_interval),
        _format_p(result.p_value),
        format_ratio_interval(comparison.host.interval) if comparison.host else "–",
        comparison.verdict,
    ]


def _method_text(threshold: float, confidence: float) -> str:
    return (
        "Each measured epoch becomes a time per sample: epoch time / samples per epoch (steps per epoch × samples "
        "per step; a sample is one unit of the model's work, the unit column), because epochs are auto-sized to a "
        "fixed duration and a faster run fits more samples in one. Columns: the measured epochs (and rounds) and "
        "samples per epoch of each run, each run's mean time per sample (µs), ratio B/A = mean time per sample of B "
        f"/ of A (below 1, B is faster), its {_percent(confidence)} Fieller interval from the variance of each "
        "run's mean as the decision interval takes it (the round means, their correlation under AR(1) epochs "
        "counted; one block: overlapping batch means) with Satterthwaite degrees of freedom, '≤' where only its "
        "upper end is bounded, and p, the two-sided t test of equal means with the same standard errors. "
        f"Verdict of B against A with a ±{_percent(threshold)} noise threshold: FASTER when the whole interval lies "
        f"below {1 - threshold:g}, SLOWER when above {1 + threshold:g}, SAME when inside "
        f"[{1 - threshold:g}, {1 + threshold:g}], otherwise AMBIGUOUS, with the epochs per run (and their rounds) that "
        f"would see a {_percent(PLANNED_DIFFERENCE)} difference with {_percent(PLANNED_POWER)} power, planned given "
        "that verdict. Where the hosts differ "
        "(the 1-minute loads at the start, as fair shares of the CPUs, or the host probes' Hodges-Lehmann ratio "
        "where its interval excludes 1), 'B/A host divided out' is the interval with any host factor in their "
        "range divided out of the host share of the model's step (all of it on a CPU, else from the step split); "
        "a verdict that interval does not keep reads HOST_DIFFERS: the host could explain it."
    )


def render_markdown(
    comparisons: Sequence[ModelComparison],
    unmatched: Sequence[UnmatchedModel],
    *,
    label_a: str,
    label_b: str,
    threshold: float,
    confidence: float,
    hosts: HostDifference | None = None,
) -> str:
    """The comparison as a markdown section: A and B, their hosts, the method, one row per model, notes."""
    columns = _columns(confidence)
    lines = [
        "## gpubench compare: B against A",
        "",
        f"- **A**: {label_a}",
        f"- **B**: {label_b}",
        *(["", *(f"{line}  " for line in host_lines(hosts))] if hosts else []),
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
    hosts: HostDifference | None = None,
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
    for line in host_lines(hosts) if hosts else []:
        console.print(line, soft_wrap=True, highlight=False)
    console.print(_method_text(threshold, confidence), soft_wrap=True, highlight=False)
    for comparison in comparisons:
        console.print(
            f"[bold]{comparison.model}[/bold] ({comparison.verdict}): {comparison.explanation}", highlight=False
        )
    for model in unmatched:
        console.print(f"[bold]{model.model}[/bold] not compared: {model.reason}", soft_wrap=True, highlight=False)
