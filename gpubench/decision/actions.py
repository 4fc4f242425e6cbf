"""The recommended actions: concrete next steps after a benchmark (what to measure, where to train, batch,
precision, checkpoints, cooling, memory), in the sentences the user reads."""

from collections.abc import Iterator, Mapping

from gpubench.decision.advice import (
    Outcome,
    cards_text,
    cheapest_text,
    drift_hours_text,
    host_bound_models,
    hours_text,
    missing_text,
    projection_uncertainty_text,
    rental_text,
)
from gpubench.decision.config import DecisionConfig
from gpubench.decision.estimate import CHECKPOINT_RUN_FRACTION, TimeEstimate, checkpoint_interval_hours
from gpubench.decision.memory_budget import HEADROOM_MARGINAL, HEADROOM_RISK, TOTAL_ROW
from gpubench.decision.projection import BOUND_COMPUTE, BOUND_OVERHEAD, compute_precisions
from gpubench.decision.rule import MIN_DECISION_EPOCHS
from gpubench.results import (
    CLOUD_GPU_RECOMMENDED,
    GRAY_ZONE,
    LOCAL_GPU_VIABLE,
    CardProjection,
    CostRow,
    MemoryBudgetRow,
    ModelResult,
    RunReport,
    ScalingEfficiency,
    StepSplit,
    WhatIfEstimate,
    cheapest_rental,
    fitting_rentals,
)
from gpubench.results.units import MS_PER_S, SECONDS_PER_HOUR

#: The one action when no model was measured successfully.
NO_ESTIMATE_ACTIONS: tuple[str, ...] = (
    "Fix the failures (each model's error is in its report section) and run the benchmark again.",
)


def _batch_actions(models: dict[str, ModelResult]) -> Iterator[str]:
    for name, result in models.items():
        search = result.batch_search
        if search is None or search.batch_size is None:
            continue
        limit = f" under {search.peak_limit_mb:,.0f} MB" if search.peak_limit_mb else ""
        knee = f"; throughput reaches 90% of its best at {search.knee_size}" if search.knee_size else ""
        yield (
            f"{name}: train with batch {search.batch_size} x {search.gradient_accumulation_steps} gradient "
            f"accumulation step(s) = effective {search.effective_batch_size} "
            f"(target {search.target_effective_batch_size}; largest fitting "
            f"{'at least ' if search.time_limited else ''}{search.largest_fitting_size}"
            f"{limit}{knee})."
        )
    configured = {
        name: result.batch_size for name, result in models.items() if result.batch_search is None and result.batch_size
    }
    if configured:
        sizes = ", ".join(f"{name} {size}" for name, size in configured.items())
        yield (
            f"No batch-size search ran for {', '.join(configured)} (CPU, or batch.search=false): the batch sizes are "
            f"the configured ones ({sizes}); on the GPU the search finds the largest that fits."
        )


#: The command that measures each what-if variant in a full run (execution keys, or the knee batch's policy).
WHAT_IF_COMMANDS: dict[str, str] = {
    "bf16": "execution.precision=bf16",
    "tf32": "execution.matmul_precision=high",
    "compile": "execution.compile=true",
    "reduce-overhead": "execution.compile=reduce-overhead",
    "knee": "batch.policy=knee",
}


def _what_if_text(row: WhatIfEstimate) -> str:
    """One measured what-if beside the main measurement, in words, with the command that makes it the default."""
    assert row.step_ms is not None and row.hours is not None
    versus = f" vs {row.main_step_ms:.3g} ms ({row.speedup:.2f}x)" if row.main_step_ms and row.speedup else ""
    hours = f"training {hours_text(row.hours)}"
    if row.hours_lower is not None and row.hours_upper is not None:
        hours += f" ({hours_text(row.hours_lower)} to {hours_text(row.hours_upper)})"
    if row.main_hours is not None:
        hours += f" vs {hours_text(row.main_hours)}"
    memory = ""
    if row.peak_reserved_mb is not None and row.main_peak_reserved_mb is not None:
        memory = f", peak {row.peak_reserved_mb:,.0f} MB vs {row.main_peak_reserved_mb:,.0f} MB"
    command = WHAT_IF_COMMANDS.get(row.variant)
    return f"{row.description}: step {row.step_ms:.3g} ms{versus}, {hours}{memory}" + (
        f" (python -m gpubench {command})" if command else ""
    )


def _what_if_actions(what_ifs: list[WhatIfEstimate], models: list[str]) -> Iterator[str]:
    """Per model, its measured what-ifs, fastest first (never a guessed speed-up), and those without an estimate."""
    for name in models:
        rows = [row for row in what_ifs if row.model == name]
        measured = sorted((row for row in rows if row.hours is not None), key=lambda row: row.hours or 0.0)
        if measured:
            yield f"{name}, measured alternatives: " + "; ".join(_what_if_text(row) for row in measured) + "."
        failed = [row for row in rows if row.hours is None]
        if failed:
            yield (
                f"{name}: what-if(s) without an estimate: "
                + "; ".join(f"{row.description} ({row.status}: {row.reason})" for row in failed)
                + "."
            )


def _execution_actions(
    report: RunReport, splits: dict[str, StepSplit], what_ifs: list[WhatIfEstimate]
) -> Iterator[str]:
    """Precision and compilation: the measured what-ifs, else on a GPU what the step's classification suggests
    measuring (bf16 only for a model whose FLOPs all ran in fp32)."""
    run = report.run
    measured_models = {row.model for row in what_ifs}
    others = [name for name in dict.fromkeys(row.model for row in what_ifs) if name not in splits]
    yield from _what_if_actions(what_ifs, [*splits, *others])
    if not report.hardware.on_gpu:
        return
    unmeasured = {name: split for name, split in splits.items() if name not in measured_models}
    compute_bound = [
        name
        for name, split in unmeasured.items()
        if split.bound == BOUND_COMPUTE and set(compute_precisions(report.models.get(name), run.precision)) == {"fp32"}
    ]
    overhead_bound = [name for name, split in unmeasured.items() if split.bound == BOUND_OVERHEAD]
    if compute_bound:
        yield (
            f"{', '.join(compute_bound)}: compute-bound in fp32; measure bf16 autocast and tf32 matmuls "
            "(decision.what_if=true measures them briefly after the main measurement, or python -m gpubench "
            "execution.precision=bf16 / execution.matmul_precision=high)."
        )
    if overhead_bound and run.compile == "false":
        yield (
            f"{', '.join(overhead_bound)}: the step is dominated by kernel launches and host work, not arithmetic; "
            "measure execution.compile=reduce-overhead (CUDA graphs replay the step without per-kernel launch cost; "
            "decision.what_if=true measures it briefly)."
        )
    if run.precision != "fp32" or run.compile != "false" or run.fp32_matmul_precision != "highest":
        yield (
            f"Measured with precision {run.precision}, compile {run.compile} and matmul precision "
            f"{run.fp32_matmul_precision}: its gain is the ratio to a run with the defaults "
            "(python -m gpubench.compare A B)."
        )


def host_bound_actions(
    decided: list[str], report: RunReport, cloud_row: CardProjection | None, what_ifs: list[WhatIfEstimate]
) -> Iterator[str]:
    """For the models whose rented step is mostly host work: the host probe to compare machines by, and the
    measured remedy (compilation or CUDA graphs, from the what-ifs), else the command that measures it."""
    shares = host_bound_models(decided, cloud_row) if cloud_row is not None else {}
    if not shares:
        return
    probes = sorted(
        round_.host_probe.torch_cpu_op_ms
        for name in shares
        for round_ in report.models[name].rounds
        if round_.host_probe is not None
    )
    probe = f" (this machine's host probe: {probes[len(probes) // 2]:.3g} ms per torch CPU operation)" if probes else ""
    remedies: dict[str, list[str]] = {}
    for name in shares:
        faster = [
            row
            for row in what_ifs
            if row.model == name and row.variant in ("compile", "reduce-overhead") and (row.speedup or 0.0) > 1.0
        ]
        if faster:
            best = max(faster, key=lambda row: row.speedup or 0.0)
            remedy = (
                f"measured: {best.description} runs the step {best.speedup:.2f}x faster "
                f"(python -m gpubench {WHAT_IF_COMMANDS[best.variant]})"
            )
        else:
            remedy = "measure execution.compile=reduce-overhead (CUDA graphs cut the launches; decision.what_if=true)"
        remedies.setdefault(remedy, []).append(name)
    for remedy, names in remedies.items():
        yield (
            f"{', '.join(names)}: a rented {cloud_row.card}'s time depends on its machine's CPU more than its GPU"
            f"{probe}; ask for a fast CPU, or shrink the host work: {remedy}."
        )


def _thermal_actions(models: dict[str, ModelResult]) -> Iterator[str]:
    for name, result in models.items():
        measured = result.measured_device_epochs
        throttled = [epoch for epoch in measured if epoch.throttled]
        if throttled:
            causes = sorted({epoch.throttle_cause for epoch in throttled if epoch.throttle_cause})
            yield (
                f"{name}: {len(throttled)} of {len(measured)} measured epochs were throttled"
                f"{' (' + ', '.join(causes) + ')' if causes else ''}; the estimate includes the slowdown. For a "
                "multi-hour run improve cooling (airflow, a cooling pad on a laptop) or cap the power limit "
                "(nvidia-smi -pl) to hold a steady clock."
            )


def _memory_actions(rows: list[MemoryBudgetRow]) -> Iterator[str]:
    for row in rows:
        if row.model == TOTAL_ROW:
            if row.status in (HEADROOM_MARGINAL, HEADROOM_RISK):
                yield (
                    f"The models' peaks sum to {row.peak_reserved_mb:,.0f} MB ({row.fraction_of_card:.0%} of "
                    f"the card): train them one after another, not at once."
                )
            continue
        if row.status in (HEADROOM_MARGINAL, HEADROOM_RISK):
            yield (
                f"{row.model}: peak {row.peak_reserved_mb:,.0f} MB is {row.fraction_of_card:.0%} of the "
                f"{row.card_mb:,.0f} MB card ({row.status}): fragmentation or a longer sequence can run out of "
                "memory mid-run; lower the batch (raise accumulation) or use bf16 to stay under batch.headroom."
            )
        if row.within_budget is False:
            yield (
                f"{row.model}: peak {row.peak_reserved_mb:,.0f} MB exceeds its budget {row.budget_mb:,.0f} "
                f"MB (decision.memory_budget_mb.{row.model})."
            )


def _headroom_actions(models: dict[str, ModelResult]) -> Iterator[str]:
    """Models whose measured peak passed ``batch.headroom`` × usable VRAM although their batch search fitted."""
    for name, result in models.items():
        memory = result.memory
        if memory is not None and memory.headroom_exceeded:
            yield (
                f"{name}: during the measured epochs the peak reserved memory reached "
                f"{memory.peak_reserved_mb:,.0f} MB, above the {memory.headroom_limit_mb:,.0f} MB headroom limit "
                f"its batch search respected (batch {result.batch_size}): allocator fragmentation grows over a "
                "long run, so train with a smaller batch (more gradient accumulation) on the target card."
            )


def _precision_actions(estimates: list[TimeEstimate], models: dict[str, ModelResult]) -> Iterator[str]:
    for estimate in estimates:
        stats = models[estimate.model].statistics
        if not stats.meets_precision_target:
            yield (
                f"{estimate.model}: the epoch-time interval is +/-{stats.relative_halfwidth:.0%} of the mean "
                f"(target {stats.target_rel_halfwidth:.0%}), which widens the upper bound; measure about "
                f"{stats.required_epochs} epochs (epochs={stats.required_epochs} or statistics.adaptive=precision)."
            )


def _checkpoint_action(estimates: list[TimeEstimate], upper_hours: float) -> str:
    interval = checkpoint_interval_hours(upper_hours)
    if interval is None:
        return f"The run is short (upper bound {hours_text(upper_hours)}): a checkpoint at the end suffices."
    steps = ", ".join(
        f"{e.model} every {round(interval * SECONDS_PER_HOUR / (e.step_ms / MS_PER_S)):,} steps" for e in estimates
    )
    return (
        f"Checkpoint every {interval:g} h ({steps}): a crash then costs at most about "
        f"{CHECKPOINT_RUN_FRACTION:.0%} of the {hours_text(upper_hours)} run."
    )


def _measurement_actions(outcome: Outcome, decision: DecisionConfig) -> Iterator[str]:
    """What to measure for a decision, or a firmer one: the critical models missing, more epochs."""
    verdict = outcome.verdict
    if verdict.missing:
        names = ",".join(m.model for m in verdict.missing)
        many = len(verdict.missing) > 1
        command = f"python -m gpubench -m model={names}" if many else f"python -m gpubench model={names}"
        yield f"Measure the missing critical model(s) ({missing_text(verdict.missing)}): {command}."
    for model in verdict.cannot_run:
        yield (
            f"{model.model} does not fit on {outcome.device} ({model.reason}): train it on a card with more memory "
            f"({decision.cloud_card} or another with fits_in_vram in the projection), or make it smaller."
        )
    if verdict.too_few:
        counts = ", ".join(f"{name} {epochs}" for name, epochs in verdict.too_few.items())
        yield (
            f"Measure at least {MIN_DECISION_EPOCHS} epochs per model "
            f"(python -m gpubench epochs={MIN_DECISION_EPOCHS}; measured: {counts}): fewer give no decision."
        )
    settle = {name: epochs for name, epochs in (verdict.epochs_to_settle or {}).items() if epochs is not None}
    if settle:
        most = max(settle.values())
        yield (
            f"Measure {most} epochs (python -m gpubench epochs={most}) to settle the decision: with the variance "
            "measured so far the interval would then lie on one side of the threshold it straddles. "
            "statistics.adaptive=decision measures each model to the count that settles it, by a two-stage rule "
            "that keeps the interval's level."
        )


def _drift_actions(estimates: list[TimeEstimate], models: dict[str, ModelResult]) -> Iterator[str]:
    """Models whose measured epochs drift: what the drift costs the bounds and how to avoid it."""
    for estimate in estimates:
        stats = models[estimate.model].statistics
        if stats is not None and stats.drift_detected:
            yield (
                f"{estimate.model}: the measured epoch times drift ({stats.drift_description}), "
                f"which adds {drift_hours_text(estimate)} to its margin; a longer warmup (warmup_epochs) lets "
                "clocks, caches and the allocator settle before measuring."
            )


def _scaling_actions(
    outcome: Outcome, scalings: Mapping[str, ScalingEfficiency], decision: DecisionConfig
) -> list[str]:
    """How to measure the scaling efficiency on several cloud cards where it was not measured."""
    gpus = decision.cloud_gpus
    unmeasured = [e.model for e in outcome.decided if e.model in scalings and not scalings[e.model].measured]
    if gpus == 1 or not unmeasured:
        return []
    return [
        f"The scaling efficiency on {gpus} cards of {', '.join(unmeasured)} is not measured (it is assumed or "
        f"extrapolated, so the cloud time's interval is wide): measure it on a machine with {gpus} GPUs, "
        f"python -m gpubench distributed.nproc={gpus} decision.cloud_gpus={gpus}."
    ]


def _sooner_rental_action(outcome: Outcome, cost_table: list[CostRow]) -> list[str]:
    """The cheapest rental that fits and finishes within half the local lower bound even at its upper bound, under
    any verdict (a local answer can still be slow)."""
    total = outcome.total
    if total is None:
        return []
    sooner = [
        row
        for row in fitting_rentals(cost_table)
        if row.hours is not None and row.hours_upper is not None and 2 * row.hours_upper <= total.lower_hours
    ]
    if not sooner:
        return []
    row = sooner[0]
    kind = "spot" if row.spot else "on-demand"
    return [
        f"Renting {row.gpu} at {row.provider} ({kind}) finishes in {hours_text(row.hours)} instead of "
        f"{hours_text(total.hours)} here on {outcome.device}, for ${row.usd:,.2f} (at most "
        f"{hours_text(row.hours_upper)} and ${row.usd_upper or 0.0:,.2f}; price of {row.price_date})."
    ]


def recommended_actions(
    outcome: Outcome,
    report: RunReport,
    splits: dict[str, StepSplit],
    cloud_row: CardProjection | None,
    budget_rows: list[MemoryBudgetRow],
    decision: DecisionConfig,
    what_ifs: list[WhatIfEstimate] | None = None,
    scalings: Mapping[str, ScalingEfficiency] | None = None,
    cost_table: list[CostRow] | None = None,
) -> list[str]:
    """Concrete next steps: what to measure, where to train (money from ``cost_table``), batch, precision,
    checkpoints, cooling, memory."""
    models = report.models
    actions: list[str] = []
    verdict, total = outcome.verdict, outcome.total
    actions += _measurement_actions(outcome, decision)
    if outcome.on_cpu:
        actions.append(
            f"Measured on the CPU ({outcome.device}): GPU memory, energy and the batch-size search were not measured "
            "and the projection starts from CPU time. Run python -m gpubench on the GPU you mean to train on."
        )
    if verdict.decision == LOCAL_GPU_VIABLE and total is not None:
        actions.append(
            f"Train locally on {outcome.device}: the upper bound {hours_text(total.upper_hours)} is under "
            f"{decision.local_max_hours:g} h."
        )
    elif verdict.decision is not None and cloud_row and cloud_row.training_hours is not None:
        rental = cheapest_rental(cost_table or [], decision.cloud_card)
        included = projection_uncertainty_text(cloud_row)
        if cloud_row.card_count > 1:
            included += " and the scaling efficiency's interval"
        actions.append(
            f"{'Rent' if verdict.decision == CLOUD_GPU_RECOMMENDED else 'Consider renting'} {cards_text(cloud_row)}: "
            f"projected {hours_text(cloud_row.training_hours)} (upper {hours_text(cloud_row.training_hours_upper)}, "
            f"{included} included)"
            + (f" for {' + '.join(e.model for e in outcome.decided)} alone" if outcome.missing else "")
            + f", {rental_text(rental)} per training."
        )
    actions += _sooner_rental_action(outcome, cost_table or [])
    cheapest = cheapest_rental(cost_table or [])
    worth_renting = verdict.decision in (GRAY_ZONE, CLOUD_GPU_RECOMMENDED)
    if cheapest is not None and cheapest.hours is not None and worth_renting and cheapest.gpu != decision.cloud_card:
        actions.append(cheapest_text(cheapest))
    actions += _scaling_actions(outcome, scalings or {}, decision)
    actions += _batch_actions(models)
    decided_splits = {e.model: splits[e.model] for e in outcome.decided}
    actions += _execution_actions(report, decided_splits, what_ifs or [])
    actions += host_bound_actions([e.model for e in outcome.decided], report, cloud_row, what_ifs or [])
    if total is not None:
        actions.append(_checkpoint_action(outcome.decided, total.upper_hours))
    actions += _drift_actions(outcome.decided, models)
    actions += _thermal_actions(models)
    actions += _memory_actions(budget_rows)
    actions += _headroom_actions(models)
    actions += _precision_actions(outcome.decided, models)
    return actions
