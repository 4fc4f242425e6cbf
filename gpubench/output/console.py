"""What a person sees on the terminal: notices and the per-epoch progress on stderr, and on stdout only the closing
summary and the report's path, which scripts can read."""

import logging
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from gpubench.output.redact import redact
from gpubench.results import (
    CostAnalysis,
    DistributedScaling,
    HostLoad,
    MemorySplit,
    ModelEstimate,
    ModelResult,
    Recommendation,
    RunReport,
    fitting_rentals,
)

logger = logging.getLogger(__name__)
_stderr = Console(stderr=True, highlight=False)
# Rich assumes 80 columns when stdout is not a terminal (a log file, CI): too narrow for the summary table.
_stdout = Console(highlight=False, width=None if sys.stdout.isatty() else 160)


def notice(message: str) -> None:
    """A notice on stderr and in the job's log, credentials redacted, soft-wrapped (one line in a log) and escaped
    (``[Errno 111]`` is not markup)."""
    message = redact(message)
    _stderr.print(f"[yellow]gpubench:[/yellow] {escape(message)}", soft_wrap=True)
    # INFO, not WARNING: the log's terminal handler passes warnings, and the notice is on the terminal already.
    logger.info("notice: %s", message)


def error(message: str) -> None:
    """The one-paragraph error shown before a non-zero exit, on stderr and in the job's log, credentials redacted."""
    message = redact(message)
    _stderr.print(f"[bold red]gpubench: error:[/bold red] {escape(message)}", soft_wrap=True)
    logger.info("error: %s", message)


#: The per-epoch callback of :func:`model_progress`: (phase, epoch from 1, planned epochs, seconds, mean loss or None).
EpochProgress = Callable[[str, int, int, float, float | None], None]


@contextmanager
def model_progress(
    model_name: str, warmup_epochs: int, epochs: int, *, verbose: bool = False
) -> Iterator[EpochProgress]:
    """Live progress for one model; yields the callback the measurement loop calls after each epoch: a bar on a
    terminal (with ``verbose``, a line per epoch above it), elsewhere a plain line per epoch (a log cannot redraw)."""

    def epoch_line(phase: str, number: int, planned: int, seconds: float, loss_text: str) -> str:
        return f"{model_name} {phase} epoch {number}/{planned}: {seconds * 1e3:.1f} ms, loss {loss_text}"

    if not _stderr.is_terminal:

        def log_epoch(phase: str, number: int, planned: int, seconds: float, loss: float | None) -> None:
            line = epoch_line(phase, number, planned, seconds, "-" if loss is None else f"{loss:.4g}")
            _stderr.print(line)
            logger.debug(line)

        yield log_epoch
        return

    progress = Progress(
        TextColumn("[bold]{task.fields[model]:<7}[/bold] {task.fields[phase]:<8}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("epoch {task.fields[epoch_s]} · loss {task.fields[loss]}"),
        TimeElapsedColumn(),
        console=_stderr,
        transient=False,
    )
    task = progress.add_task(
        model_name, total=warmup_epochs + epochs, model=model_name, phase="sizing", epoch_s="-", loss="-"
    )

    def on_epoch(phase: str, number: int, planned: int, seconds: float, loss: float | None) -> None:
        done = number if phase == "warmup" else warmup_epochs + number
        total = warmup_epochs + planned if phase == "measured" else warmup_epochs + epochs
        loss_text = "-" if loss is None else f"{loss:.4g}"
        progress.update(task, completed=done, total=total, phase=phase, epoch_s=f"{seconds:.3f} s", loss=loss_text)
        logger.debug(epoch_line(phase, number, planned, seconds, loss_text))
        if verbose:
            progress.console.print(epoch_line(phase, number, planned, seconds, loss_text))

    with progress:
        yield on_epoch


def model_warnings(model_name: str, warnings: list[str]) -> None:
    """The statistics' warnings for one model (printed with ``verbose``)."""
    for warning in warnings:
        _stderr.print(f"[yellow]{model_name}:[/yellow] {warning}", soft_wrap=True)


def _fmt(value: Any, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _interval(interval: tuple[float, float] | None) -> str:
    return f"{interval[0]:.1f}–{interval[1]:.1f}" if interval else "-"


def epoch_time_text(result: ModelResult) -> str:
    """A model's mean epoch time with its t interval, as the summary table shows them: ``812.4 ms (95% CI
    790.1–834.7)``; ``-`` without a measured epoch."""
    if result.mean_epoch_time_ms is None:
        return "-"
    interval, statistics = result.confidence_interval_ms, result.statistics
    level = f"{statistics.confidence_level * 100:g}% CI " if statistics else ""
    return f"{result.mean_epoch_time_ms:.1f} ms" + (f" ({level}{_interval(interval)})" if interval else "")


def host_text(host: HostLoad) -> str:
    """The host at the start in one line: the CPUs usable, the load averages and torch's threads."""
    loads = " / ".join(_fmt(v, ".2f") for v in (host.load_average_1m, host.load_average_5m, host.load_average_15m))
    variables = "".join(f", {name}={value}" for name, value in host.thread_environment.items())
    return (
        f"{host.available_cpus} of {host.cpu_count} CPUs usable, load average {loads} (1 / 5 / 15 min), torch "
        f"threads {host.torch_num_threads} intra-op ({host.threads_source}), {host.torch_interop_threads} inter-op"
        f"{variables}"
    )


def _t_interval_column(report: RunReport) -> str:
    """The t interval's column header at the run's level, to as many digits as it has (``99.5% CI (t)``)."""
    levels = [result.statistics.confidence_level for result in report.models.values() if result.statistics]
    return f"{levels[0] * 100:g}% CI (t)" if levels else "CI (t)"


def plan_lines(per_model: dict[str, ModelEstimate]) -> list[str]:
    """Per estimated model, its plan and hours, then its what-ifs at the labelled batches of the search's trials."""
    lines = []
    for name, estimate in per_model.items():
        if not estimate.estimated or estimate.estimated_hours is None:
            continue
        lines.append(f"{name} plan: {estimate.plan_basis}: {estimate.estimated_hours:,.2f} h")
        for what_if in estimate.batch_what_ifs:
            if what_if.label:
                lines.append(
                    f"  what-if: at batch {what_if.batch_size} ({what_if.label}) the plan's steps take "
                    f"{what_if.plan_hours:,.2f} h (from {what_if.trial_steps}-step search trials)"
                )
    return lines


def fmt_hours(hours: float) -> str:
    """Hours as the console shows them: ``24.1 min`` under an hour, else ``1.25 h``."""
    return f"{hours * 60:.1f} min" if hours < 1 else f"{hours:,.2f} h"


def cloud_line(cost: CostAnalysis | None) -> str | None:
    """On several cloud cards (``decision.cloud_gpus`` > 1), their hours with bounds and cost, one card's hours and the
    cheapest fitting rental; None for one card or without a projection."""
    if cost is None or cost.cloud_card_count == 1 or cost.cloud_training_hours is None:
        return None
    line = f"Cloud: {cost.cloud_card_count} × {cost.cloud_card}: {fmt_hours(cost.cloud_training_hours)}"
    if cost.cloud_training_hours_lower is not None and cost.cloud_training_hours_upper is not None:
        line += f" ({fmt_hours(cost.cloud_training_hours_lower)} to {fmt_hours(cost.cloud_training_hours_upper)})"
    if cost.cloud_cost_usd_per_training is not None:
        line += f", ${cost.cloud_cost_usd_per_training:,.2f} per training at {cost.cloud_provider}"
    else:
        line += ", no dated price"
    if cost.cloud_single_card_training_hours is not None:
        line += f"; one card {fmt_hours(cost.cloud_single_card_training_hours)}"
    if cost.cheapest_label is not None and cost.cheapest_card_cost_usd_per_training is not None:
        line += (
            f"; cheapest {cost.cloud_card_count} × {cost.cheapest_label}: "
            f"{fmt_hours(cost.cheapest_card_training_hours or 0.0)}, ${cost.cheapest_card_cost_usd_per_training:,.2f} "
            f"(price of {cost.cheapest_price_date})"
        )
    return line


def memory_split_line(name: str, split: MemorySplit) -> str | None:
    """One model's memory split (MB): the accounted state, the line through the batch search's trials and its gap to
    the measured peak; None without a line (no batch search: the CPU)."""
    if split.fixed_mb is None or split.activations_mb_per_sample is None:
        return None
    line = (
        f"{name} memory: parameters {split.parameters_mb:,.1f} MB, gradients {split.gradients_mb:,.1f} MB, "
        f"optimizer state {split.optimizer_state_mb:,.1f} MB, activations {split.activations_mb_per_sample:,.3g} "
        f"MB/sample, remainder {split.remainder_mb or 0.0:,.0f} MB"
    )
    sizes = split.fit_sizes
    residual = "" if split.fit_residual_rms_mb is None else f", residual ±{split.fit_residual_rms_mb:,.0f} MB"
    line += f" (line through {len(sizes)} search trials, batch {min(sizes):,} to {max(sizes):,}{residual})"
    if split.predicted_peak_mb is not None and split.measured_peak_mb is not None and split.gap_mb is not None:
        line += (
            f"; at batch {split.batch_size:,} the line gives {split.predicted_peak_mb:,.0f} MB, the measured peak "
            f"{split.measured_peak_mb:,.0f} MB ({split.gap_mb:+,.0f} MB)"
        )
    return line


def _fits_phrase(fits_at_batch: Mapping[str, int], largest_tried_batch: Mapping[str, int]) -> str:
    """``, fits at batch 1,234`` (one model) or ``, fits at batch 1,234 (tft), 567 (mamba2)``; empty without; ``≥``
    the largest batch tried where predicted past it (an extrapolation)."""
    if not fits_at_batch:
        return ""
    shown = {}
    for name, batch in fits_at_batch.items():
        tried = largest_tried_batch.get(name)
        shown[name] = f"≥{tried:,}" if tried is not None and batch > tried else f"{batch:,}"
    beyond = " (≥: the largest batch tried)" if any(text.startswith("≥") for text in shown.values()) else ""
    if len(shown) == 1:
        return f", fits at batch {next(iter(shown.values()))}{beyond}"
    return ", fits at batch " + ", ".join(f"{text} ({name})" for name, text in shown.items()) + beyond


#: How many of the cost table's cheapest fitting rows the summary shows.
RENT_ROWS_SHOWN = 5


def largest_tried_batches(report: RunReport) -> dict[str, int]:
    """Each model's largest batch its memory trials measured (models without a memory line left out)."""
    splits = {name: result.memory_split for name, result in report.models.items()}
    tried = {name: split.largest_tried_batch for name, split in splits.items() if split is not None}
    return {name: batch for name, batch in tried.items() if batch is not None}


def rent_lines(recommendation: Recommendation, largest_tried_batch: Mapping[str, int] | None = None) -> list[str]:
    """The cost table's cheapest fitting rows (at most :data:`RENT_ROWS_SHOWN`) with hours, USD, price date and the
    batch predicted to fit, then the local option and a stale snapshot's warning; [] without a cost table."""
    fitting = fitting_rentals(recommendation.cost_table)
    if not fitting:
        return []
    lines = [f"Cheapest rentals that fit ({len(fitting)} of {len(recommendation.cost_table)} priced options):"]
    for row in fitting[:RENT_ROWS_SHOWN]:
        kind = "spot" if row.spot else "on-demand"
        cards = f"{row.gpus_used} × {row.gpu}" if row.gpus_used > 1 else row.gpu
        lines.append(
            f"  {cards} at {row.provider} ({kind}, {row.instance}): {fmt_hours(row.hours or 0.0)} "
            f"({fmt_hours(row.hours_lower or 0.0)} to {fmt_hours(row.hours_upper or 0.0)}), ${row.usd:,.2f} "
            f"(${row.usd_lower or 0.0:,.2f} to ${row.usd_upper or 0.0:,.2f}), price of {row.price_date}"
            f"{_fits_phrase(row.fits_at_batch, largest_tried_batch or {})}"
        )
    local = recommendation.local_cost
    if local is not None:
        energy = "energy not measured" if local.usd is None else f"${local.usd:,.2f} of energy"
        tariff = f"{local.electricity_usd_per_kwh:g} USD/kWh" + (
            f" of {local.electricity_date}" if local.electricity_date else ""
        )
        lines.append(
            f"  local ({local.device}): {fmt_hours(local.hours)}, {energy} at {tariff} ({local.electricity_source})"
        )
    snapshot = recommendation.price_snapshot
    if snapshot is not None and snapshot.stale:
        lines.append(f"  warning: {snapshot.stale}")
    return lines


def distributed_line(name: str, scaling: DistributedScaling) -> str:
    """One model's data-parallel outcome (``mlp: 2 processes: 1,234 window/s global, efficiency 0.93 [0.90, 0.95]``)."""
    head = f"{name}: {scaling.world_size} processes"
    if scaling.status != "ok":
        return f"{head}: {scaling.status} ({scaling.error})"
    unit = f"{scaling.sample_unit}/s" if scaling.sample_unit else "samples/s"
    line = f"{head}: {_fmt(scaling.global_samples_per_second, ',.0f')} {unit} global"
    if scaling.scaling_efficiency is not None:
        line += f", efficiency {scaling.scaling_efficiency:.2f}"
        interval = scaling.scaling_efficiency_interval
        line += f" [{interval[0]:.2f}, {interval[1]:.2f}]" if interval else " (no interval)"
    return line


def health_cell(result: ModelResult) -> str:
    """The ``stability · loss trend`` cell (``STABLE · DECREASING``); an RL model's unjudged trend in parentheses."""
    details = result.stability_details
    trend = result.loss_trend
    if trend and details is not None and not details.loss_trend_judged:
        trend = f"({trend})"
    return " · ".join(verdict for verdict in (result.stability, trend) if verdict) or "-"


def health_lines(report: RunReport) -> list[str]:
    """Under the table: why a model is not STABLE, and what judged the RL models' health instead of their loss."""
    lines = []
    rl_models = []
    for name, result in report.models.items():
        details = result.stability_details
        if details is None:
            continue
        if details.rl is not None:
            rl_models.append(name)
        if details.stability in ("UNSTABLE", "DIVERGING") and details.reasons:
            lines.append(f"{name} {details.stability}: " + "; ".join(details.reasons))
    if rl_models:
        lines.insert(
            0,
            f"{', '.join(rl_models)}: health from NaN/Inf, gradient norms (and their growth over the first "
            "epochs), the critic's loss (and DQN's Q-values) against the rewards' return range, and PPO's "
            "approximate KL and clip fraction; the loss trend in parentheses is a surrogate's or a TD loss's, shown "
            "but not judged.",
        )
    return lines


def print_summary(report: RunReport, report_path: str) -> None:
    """One screen on stdout: per model status, mean epoch time (ms) with its intervals, CV, throughput, batch, peak
    memory (MB) and health; then memory splits, data-parallel runs, errors, the recommendation, the cheapest rentals
    and the report's path."""
    table = Table(title=f"gpubench · {report.hardware.device_name}", show_lines=False)
    t_interval = _t_interval_column(report)
    for column in ("model", "status", "mean epoch ms", t_interval, "decision CI", "CV", "samples/s", "batch"):
        table.add_column(column, justify="left" if column in ("model", "status") else "right")
    table.add_column("peak MB", justify="right")
    table.add_column("stability · loss trend", justify="left")
    for name, result in report.models.items():
        throughput = result.samples_per_second
        table.add_row(
            name,
            result.status if result.status == "ok" else f"[red]{result.status}[/red]",
            _fmt(result.mean_epoch_time_ms, ".1f"),
            _interval(result.confidence_interval_ms),
            _interval(result.statistics.decision_interval_ms if result.statistics else None),
            _fmt(result.coefficient_of_variation, ".3f"),
            _fmt(throughput.mean if throughput else None, ",.0f"),
            _fmt(result.batch_size, "d"),
            _fmt(result.memory_usage_mb, ",.0f"),
            health_cell(result),
        )
    _stdout.print(table)
    models = report.models.items()
    splits = [memory_split_line(name, r.memory_split) for name, r in models if r.memory_split is not None]
    scaling = [distributed_line(name, r.distributed) for name, r in models if r.distributed is not None]
    _plain_lines([*health_lines(report), *splits, *scaling])
    for name, result in models:
        if result.error:
            _stdout.print(f"[red]{name}[/red]: {result.error}", soft_wrap=True)
    recommendation = report.recommendation
    if recommendation is not None:
        _plain_lines(plan_lines(recommendation.per_model))
        if recommendation.decision or recommendation.reasoning:
            # A preset's verdict (experiment=quick) is about its toy shapes: the verdict line says so itself.
            note = f" ({escape(report.run.preset_note)})" if report.run.preset_note else ""
            verdict = f"{recommendation.decision or 'no decision'} — {escape(recommendation.reasoning)}"
            _stdout.print(f"[bold]Recommendation{note}:[/bold] {verdict}", soft_wrap=True)
        cloud = cloud_line(recommendation.cost_analysis)
        _plain_lines([cloud, *rent_lines(recommendation, largest_tried_batches(report))])
    _stdout.print(f"Report: {report_path}")


def _plain_lines(lines: Sequence[str | None]) -> None:
    """Print each line (None skipped) to stdout as plain text, soft-wrapped."""
    for line in lines:
        if line:
            _stdout.print(line, soft_wrap=True, markup=False)
