"""The HTML report page's sections; every outside text goes through :func:`text` (redacted, then escaped)."""

import html
from collections.abc import Iterable, Sequence
from typing import Any

from gpubench.output.console import cloud_line, distributed_line, fmt_hours, health_cell, health_lines, plan_lines
from gpubench.output.redact import redact
from gpubench.results import (
    CLOUD_GPU_RECOMMENDED,
    GRAY_ZONE,
    LOCAL_GPU_VIABLE,
    CostRow,
    ModelResult,
    Recommendation,
    RunReport,
)

#: The verdict box's CSS class per decision (its colour); a withheld decision (None) gets ``none``.
VERDICT_CLASSES = {LOCAL_GPU_VIABLE: "local", GRAY_ZONE: "gray", CLOUD_GPU_RECOMMENDED: "cloud"}

#: What a report that is not complete says about itself, per status.
_PARTIAL_STATUS = {
    "running": "the run had not finished when this page was written (it is still running, or it was killed "
    "before it could say so)",
    "interrupted": "the run was interrupted",
    "failed": "the run failed",
}


def text(value: Any) -> str:
    """``value`` as text safe inside HTML: credentials redacted, then ``& < > " '`` escaped."""
    return html.escape(redact(str(value)), quote=True)


def _fmt(value: float | int | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _hours(hours: float | None) -> str:
    return "-" if hours is None else fmt_hours(hours)


def _between(lower: str, upper: str) -> str:
    return "" if lower == "-" and upper == "-" else f" ({lower} to {upper})"


def _usd(value: float | None) -> str:
    return "-" if value is None else f"${value:,.2f}"


def _with_bounds(value: str, lower: str, upper: str) -> str:
    """A table cell: the value, and its bounds on a line of their own beneath (escaped here)."""
    bounds = "" if lower == "-" and upper == "-" else f'<span class="range">{text(lower)} to {text(upper)}</span>'
    return text(value) + bounds


def _hours_cell(hours: float | None, lower: float | None, upper: float | None) -> str:
    return _with_bounds(_hours(hours), _hours(lower), _hours(upper))


def _table(headers: Sequence[str], rows: Iterable[Sequence[str]], numeric: Sequence[bool], caption: str = "") -> str:
    """A table of escaped cells ``rows`` (headers escaped here); ``numeric`` right-aligns a column on one line."""
    align = [' class="num"' if num else "" for num in numeric]
    head = "".join(f"<th{css}>{text(h)}</th>" for h, css in zip(headers, align, strict=True))
    body = "".join(
        "<tr>" + "".join(f"<td{css}>{cell}</td>" for cell, css in zip(row, align, strict=True)) + "</tr>"
        for row in rows
    )
    title = f"<caption>{text(caption)}</caption>" if caption else ""
    return f'<div class="scroll"><table>{title}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def _list(items: Iterable[str], css: str = "") -> str:
    """A bulleted list of plain-text items (escaped here); empty when there are none."""
    entries = "".join(f"<li>{text(item)}</li>" for item in items)
    return f'<ul class="{css}">{entries}</ul>' if entries else ""


def _facts(pairs: Iterable[tuple[str, str | None]]) -> str:
    """A definition list of (label, value) in plain text; pairs whose value is None or empty are left out."""
    entries = "".join(f"<dt>{text(label)}</dt><dd>{text(value)}</dd>" for label, value in pairs if value)
    return f"<dl>{entries}</dl>" if entries else ""


def status_banner(report: RunReport) -> str:
    """A banner for an incomplete report: what stopped it and how many models it holds; empty for a complete one."""
    if report.status == "complete":
        return ""
    reason = _PARTIAL_STATUS.get(report.status, f"the run's status is {report.status}")
    held = ", ".join(f"{name} ({result.status})" for name, result in report.models.items())
    lines = [
        f"Partial report: {reason}. It holds {len(report.models)} of the {len(report.run.models)} models planned"
        + (f": {held}" if held else "")
        + ". A verdict below, if any, comes from those alone, and never from a model it lacks."
    ]
    if report.error:
        lines.append(f"Error: {report.error}")
    paragraphs = "".join(f"<p>{text(line)}</p>" for line in lines)
    status = text(report.status.upper())
    return f'<section class="banner partial" id="status"><strong>{status}</strong>{paragraphs}</section>'


def _estimate_line(recommendation: Recommendation) -> str | None:
    hours = recommendation.estimated_full_training_hours
    if hours is None:
        return None
    lower = recommendation.estimated_full_training_hours_lower
    upper = recommendation.estimated_full_training_hours_upper
    level = recommendation.upper_bound_level
    bounds = _between(_hours(lower), _hours(upper))
    return f"{_hours(hours)}{bounds}" + (f", {level:.1%} bounds" if level is not None and bounds else "")


def verdict_section(report: RunReport) -> str:
    """The answer: the decision or why none, its reasoning, bounds, thresholds, actions and plans."""
    recommendation = report.recommendation
    if recommendation is None:
        reason = (
            "no model was measured" if not report.models else "the run ended before the recommendation was computed"
        )
        return (
            '<section class="verdict none" id="verdict"><h2>Verdict</h2>'
            f'<p class="decision">No verdict</p><p class="reasoning">{text(reason)}.</p></section>'
        )
    decision = recommendation.decision
    css = VERDICT_CLASSES.get(decision or "", "none")
    note = report.run.preset_note
    thresholds = (
        f"LOCAL when the upper bound is under {_fmt(recommendation.local_max_hours, 'g')} h; CLOUD when the lower "
        f"bound is over {_fmt(recommendation.cloud_min_hours, 'g')} h"
    )
    facts = _facts(
        [
            ("Full training", _estimate_line(recommendation)),
            ("Decided on", ", ".join(recommendation.decided_on)),
            ("Critical models", ", ".join(recommendation.critical_models)),
            ("Rule", thresholds if recommendation.thresholds_hours else None),
            ("Basis", recommendation.decision_basis),
            ("Measured on", recommendation.measured_device),
            ("The answer is about", recommendation.emulated_card),
        ]
    )
    settle = recommendation.epochs_to_settle or {}
    settle_items = [
        f"{model}: {'no practical number of epochs' if epochs is None else f'{epochs:,} measured epochs'}"
        for model, epochs in settle.items()
    ]
    missing = [f"{m.model} ({m.status}): {m.reason}" for m in recommendation.missing_critical_models]
    parts = [
        f'<section class="verdict {css}" id="verdict"><h2>Verdict</h2>',
        f'<p class="decision">{text(decision or "No decision")}</p>',
        f'<p class="preset">{text(note)}</p>' if note else "",
        f'<p class="reasoning">{text(recommendation.reasoning)}</p>',
        facts,
        "<h3>Epochs that would settle it</h3>" + _list(settle_items) if settle_items else "",
        "<h3>Critical models without an estimate</h3>" + _list(missing) if missing else "",
        "<h3>Recommended actions</h3>" + _list(recommendation.recommended_actions)
        if recommendation.recommended_actions
        else "",
    ]
    plans = plan_lines(recommendation.per_model)
    if plans:
        parts.append("<h3>Plans</h3>" + "".join(f'<p class="mono">{text(line)}</p>' for line in plans))
    parts.append("</section>")
    return "".join(parts)


def _interval(interval: tuple[float, float] | None) -> str:
    return f"{interval[0]:,.1f}–{interval[1]:,.1f}" if interval else "-"


def _summary_row(name: str, result: ModelResult) -> list[str]:
    stats, throughput = result.statistics, result.samples_per_second
    rate = "-"
    if throughput is not None and throughput.mean is not None:
        rate = f"{throughput.mean:,.0f} {throughput.unit}"
    status = f'<span class="{"ok" if result.status == "ok" else "bad"}">{text(result.status)}</span>'
    epochs, cv = _fmt(len(result.raw_epoch_times_ms) or None, "d"), _fmt(result.coefficient_of_variation, ".3f")
    intervals = [_interval(result.confidence_interval_ms), _interval(stats.decision_interval_ms if stats else None)]
    return [
        *(text(name), status, epochs, _fmt(result.mean_epoch_time_ms, ",.1f"), *intervals, cv, text(rate)),
        *(_fmt(result.batch_size, "d"), _fmt(result.memory_usage_mb, ",.0f"), text(health_cell(result))),
    ]


def summary_section(report: RunReport) -> str:
    """Per model: status, epochs, epoch time (ms) with intervals, throughput, batch, memory (MB) and health."""
    if not report.models:
        return '<section id="summary"><h2>Models</h2><p>No model was measured.</p></section>'
    levels = [r.statistics.confidence_level for r in report.models.values() if r.statistics]
    t_header = f"{levels[0] * 100:g}% CI (t), ms" if levels else "CI (t), ms"
    headers = ["model", "status", "epochs", "mean epoch, ms", t_header, "decision CI, ms", "CV", "throughput"]
    headers += ["batch", "peak MB", "stability · loss trend"]
    numeric = [False, False, True, True, True, True, True, True, True, True, False]
    rows = [_summary_row(name, result) for name, result in report.models.items()]
    notes = list(health_lines(report))
    notes += [distributed_line(n, r.distributed) for n, r in report.models.items() if r.distributed is not None]
    notes += [f"{name}: {result.error}" for name, result in report.models.items() if result.error]
    notes += [f"{name}: {warning}" for name, result in report.models.items() for warning in result.warnings]
    return f'<section id="summary"><h2>Models</h2>{_table(headers, rows, numeric)}{_list(notes, "notes")}</section>'


def _cost_cells(row: CostRow, source_number: int) -> list[str]:
    cards = text(f"{row.gpus_used} × {row.gpu}" if row.gpus_used > 1 else row.gpu)
    if row.gpu_count != row.gpus_used:
        cards += f'<span class="range">{row.gpu_count} on the instance</span>'
    fits = {True: "yes", False: "no", None: "unknown"}[row.fits_in_vram]
    details = [row.note] if row.note else []
    if row.spot and row.interruptions_per_hour is not None:
        expected = _fmt(row.expected_interruptions, ".2g")
        details.append(f"{row.interruptions_per_hour:g} interruptions/h assumed, {expected} expected")
    return [
        cards,
        text(row.provider),
        '<span class="nowrap">on-demand</span>' if not row.spot else "spot",
        text(f"{row.instance} · {row.location}"),
        fits,
        _hours_cell(row.hours, row.hours_lower, row.hours_upper),
        _with_bounds(_usd(row.usd), _usd(row.usd_lower), _usd(row.usd_upper)),
        f"{row.price_usd_per_hour:,.2f}",
        f'<span class="nowrap">{text(row.price_date)} [{source_number}]</span>',
        text("; ".join(details)),
    ]


def cost_section(report: RunReport) -> str:
    """Every row of the cost table, the local option and the price snapshot's age."""
    recommendation = report.recommendation
    if recommendation is None or not recommendation.cost_table:
        why = "no recommendation yet" if recommendation is None else "no priced option (see the notes)"
        notes = _list(recommendation.cost_table_notes if recommendation else [], "notes")
        return f'<section id="cost"><h2>Renting</h2><p>No cost table: {text(why)}.</p>{notes}</section>'
    parts = ['<section id="cost"><h2>Renting</h2>']
    line = cloud_line(recommendation.cost_analysis)
    if line:
        parts.append(f"<p>{text(line)}</p>")
    headers = ["GPU", "provider", "kind", "instance · location", "fits", "hours", "USD", "USD/h", "price of", "note"]
    numeric = [False, False, False, False, False, True, True, True, False, False]
    # Each source is named once below the table; a row points to its number.
    sources = list(dict.fromkeys(row.price_source for row in recommendation.cost_table))
    rows = [_cost_cells(row, sources.index(row.price_source) + 1) for row in recommendation.cost_table]
    caption = f"{len(rows)} priced options, cheapest expected cost first (bounds beneath each figure)"
    parts.append(_table(headers, rows, numeric, caption))
    entries = "".join(f"<li>{text(source)}</li>" for source in sources)
    parts.append(f'<p class="notes">Price sources:</p><ol class="notes sources">{entries}</ol>')
    local = recommendation.local_cost
    if local is not None:
        energy = "energy not measured"
        if local.energy_kwh is not None:
            energy = f"{local.energy_kwh:.3g} kWh ({local.energy_basis})"
        tariff = f"{local.electricity_usd_per_kwh:g} USD/kWh" + (
            f" of {local.electricity_date}" if local.electricity_date else ""
        )
        parts.append(
            f"<p><strong>Local</strong> ({text(local.device)}): "
            f"{text(_hours(local.hours) + _between(_hours(local.hours_lower), _hours(local.hours_upper)))}, "
            f"{text(energy)}, {text(_usd(local.usd))} of energy at {text(tariff)} "
            f"({text(local.electricity_source)}).</p>"
        )
    snapshot = recommendation.price_snapshot
    if snapshot is not None:
        age = f"{snapshot.age_days} day{'s' if snapshot.age_days != 1 else ''} old when the report was written"
        parts.append(f"<p>Prices from the snapshot of {text(snapshot.snapshot_date)} ({text(age)}).</p>")
        if snapshot.stale:
            parts.append(f'<p class="warning">{text(snapshot.stale)}</p>')
    parts.append(_list(recommendation.cost_table_notes, "notes"))
    parts.append("</section>")
    return "".join(parts)


def what_if_section(report: RunReport) -> str:
    """The measured what-ifs beside the main answer (step, hours with bounds, peak memory); empty without any."""
    recommendation = report.recommendation
    if recommendation is None or not recommendation.what_ifs:
        return ""
    headers = ["model", "variant", "what it changes", "step, ms", "main step, ms", "speedup", "hours", "main hours"]
    headers += ["peak MB", "main peak MB", "note"]
    numeric = [False, False, False, True, True, True, True, True, True, True, False]
    rows = [
        [
            *(text(w.model), text(w.variant), text(w.description), _fmt(w.step_ms, ",.3g")),
            *(_fmt(w.main_step_ms, ",.3g"), _fmt(w.speedup, ".2f"), _hours_cell(w.hours, w.hours_lower, w.hours_upper)),
            *(text(_hours(w.main_hours)), _fmt(w.peak_reserved_mb, ",.0f"), _fmt(w.main_peak_reserved_mb, ",.0f")),
            text(w.reason or w.status),
        ]
        for w in recommendation.what_ifs
    ]
    return f'<section id="what-ifs"><h2>What-ifs</h2>{_table(headers, rows, numeric)}</section>'


def host_section(report: RunReport) -> str:
    """The host at the start, the noisy-host sentence, and each model's rounds with probe readings."""
    parts = ['<section id="host"><h2>Host</h2>']
    host = report.run.host
    hardware = report.hardware
    loads = threads = variables = None
    if host is not None:
        threads = f"{host.torch_num_threads} intra-op, {host.torch_interop_threads} inter-op"
        variables = " ".join(f"{name}={value}" for name, value in host.thread_environment.items())
        loads = " / ".join(_fmt(v, ".2f") for v in (host.load_average_1m, host.load_average_5m, host.load_average_15m))
        loads += f" over {host.available_cpus} CPUs available"
        if host.load_average_1m is not None and host.load_average_1m > host.available_cpus:
            loads += ": busy, other processes competed with the benchmark"
    parts.append(
        _facts(
            [
                ("CPU", hardware.cpu_name),
                ("CPUs", f"{host.available_cpus} of {host.cpu_count} usable" if host else None),
                ("Load average (1 / 5 / 15 min)", loads),
                ("torch threads", threads),
                ("Threads chosen by", host.threads_source if host else None),
                ("Thread variables", variables),
                ("RAM", f"{hardware.ram_mb:,.0f} MB" if hardware.ram_mb else None),
            ]
        )
    )
    recommendation = report.recommendation
    noisy = recommendation.host_note if recommendation is not None else None
    if noisy:
        parts.append(f'<p class="warning">{text(noisy)}</p>')
    parts.append(_list(hardware.notices, "notes"))
    for name, result in report.models.items():
        if result.rounds:
            parts.append(_rounds_table(name, result))
    parts.append("</section>")
    return "".join(parts)


def _rounds_table(name: str, result: ModelResult) -> str:
    headers = ["round", "epochs", "mean epoch, ms", "started, s", "Python loop, ms", "torch CPU op, ms", "CPU"]
    headers += ["SM clock, MHz", "power, W", "throttled"]
    numeric = [True] * 9 + [False]
    rows = []
    for r in result.rounds:
        probe = r.host_probe
        readings = (probe.python_loop_ms, probe.torch_cpu_op_ms, probe.cpu) if probe else (None, None, None)
        cells = [str(r.index), str(r.epochs), f"{r.mean_epoch_ms:,.2f}", f"{r.started_s:,.1f}"]
        cells += [_fmt(value, spec) for value, spec in zip(readings, (".2f", ".2f", "d"), strict=True)]
        throttled = {True: "yes", False: "no", None: "-"}[r.throttled]
        rows.append([*cells, _fmt(r.sm_clock_mhz, ",.0f"), _fmt(r.power_w, ",.0f"), throttled])
    stats = result.statistics.rounds if result.statistics else None
    caption = f"{name}: measured rounds and the host probe read before each"
    if stats is not None:
        caption += (
            f"; {stats.between_share:.0%} of the bound's variance from between rounds "
            f"(p = {stats.between_p_value:.3g}, {stats.dominant} dominates)"
        )
    if result.host_probe_explained_share is not None:
        caption += f"; the probe tracks {result.host_probe_explained_share:.0%} of the spread between rounds"
    if result.gpu_wait_explained_share is not None:
        caption += (
            f"; the card's power, falling in the slower rounds at a steady clock (the card waiting on its host), "
            f"tracks {result.gpu_wait_explained_share:.0%} of it"
        )
    return _table(headers, rows, numeric, caption)


def run_section(report: RunReport) -> str:
    """The hardware, the data and the run (versions, settings, overrides, where it wrote)."""
    hw = report.hardware
    warmup = hw.warmup_stats
    burn_in = None
    if warmup is not None:
        burn_in = f"{warmup.achieved_tflops:.3g} TFLOP/s over {warmup.seconds:.1f} s"
        if warmup.final_temperature_celsius is not None:
            burn_in += f", {warmup.final_temperature_celsius:.0f} °C at the end"
    hardware = _facts(
        [
            ("Device", f"{hw.device_name} ({hw.measured_on})"),
            ("VRAM", f"{hw.total_vram_mb:,.0f} MB" if hw.total_vram_mb else None),
            ("Usable VRAM", f"{hw.usable_vram_mb:,.0f} MB" if hw.usable_vram_mb else None),
            ("CUDA / driver", " / ".join(v for v in (hw.cuda_version, hw.driver_version) if v) or None),
            ("Compute capability", hw.compute_capability),
            ("Burn-in", burn_in),
        ]
    )
    data = report.data
    data_facts = ""
    if data is not None:
        span = " to ".join(t for t in (data.first_timestamp, data.last_timestamp) if t)
        data_facts = _facts(
            [
                ("Source", data.source + (f" ({data.path})" if data.path else "")),
                ("Bars", f"{data.bars:,} over {data.files} file(s), symbols {', '.join(data.symbols)}"),
                ("Span", span or None),
                ("Content hash", data.content_hash),
            ]
        )
    run = report.run
    versions = ", ".join(f"{k} {v}" for k, v in run.versions.items() if v)
    run_facts = _facts(
        [
            ("Started (UTC)", report.timestamp),
            ("Models", ", ".join(run.models)),
            ("Epochs", f"{run.epochs} measured after {run.warmup_epochs} warmup"),
            ("Execution", f"{run.precision}, compile {run.compile}, fp32 matmul {run.fp32_matmul_precision}"),
            ("Seed", str(run.seed)),
            ("Preset", run.preset),
            ("Overrides", " ".join(run.overrides)),
            ("Versions", versions),
            ("Commit", run.git_commit),
            ("Folder", run.output_dir),
            ("MLflow run", run.mlflow_run_id),
        ]
    )
    return (
        f'<section id="run"><h2>Hardware, data and run</h2><h3>Hardware</h3>{hardware}'
        f"<h3>Data</h3>{data_facts or '<p>No data was loaded.</p>'}<h3>Run</h3>{run_facts}</section>"
    )


def config_section(config_text: str | None, config_name: str) -> str:
    """The resolved config as the job wrote it (``config_name``), folded; a sentence when it could not be read."""
    if config_text is None:
        return f'<section id="config"><h2>Config</h2><p>{text(config_name)} could not be read.</p></section>'
    return (
        f'<section id="config"><h2>Config</h2><details><summary>{text(config_name)} (resolved, credentials '
        f"redacted)</summary><pre>{text(config_text)}</pre></details></section>"
    )
