"""The recommendation: the report in, the :class:`gpubench.results.Recommendation` out, about the measured device or
the emulated ``hardware=<card>``. Only puts the other ``decision`` modules together; no torch."""

from dataclasses import replace
from datetime import date, datetime, timezone

from gpubench.decision.actions import NO_ESTIMATE_ACTIONS, recommended_actions
from gpubench.decision.advice import Outcome, host_text, reasoning
from gpubench.decision.card_table import projection_table
from gpubench.decision.config import DecisionConfig
from gpubench.decision.cost import COST_METHOD, CostInputs, cost_analysis, training_energy_kwh
from gpubench.decision.estimate import (
    ESTIMATE_METHOD,
    UPPER_BOUND_METHOD,
    TimeEstimate,
    combine_estimates,
    estimate_training_time,
)
from gpubench.decision.memory_budget import MEMORY_METHOD, memory_budget
from gpubench.decision.projection import (
    PROJECTION_METHOD,
    PROJECTION_RELATIVE_ERROR,
    DeviceThroughput,
    answer_card,
    model_sources,
    model_targets,
    projected_estimates,
    source_throughput,
    split_result,
)
from gpubench.decision.rent import cost_table, local_cost, snapshot_info
from gpubench.decision.rule import DECISION_METHOD, NOTHING_MEASURED, critical_models, decide
from gpubench.decision.scaling import SCALING_METHOD, scaling_efficiency
from gpubench.decision.what_ifs import what_if_estimates
from gpubench.hardware.catalog import Card
from gpubench.prices import PriceSnapshot, PriceSnapshotError, load_snapshot, user_snapshot
from gpubench.results import (
    CardProjection,
    CostAnalysis,
    CostRow,
    MissingModel,
    ModelEstimate,
    Recommendation,
    RunReport,
    StepSplit,
    cheapest_rental,
    recommendation_method,
    recommendation_thresholds,
)


def method_texts(projection_source: str) -> dict[str, str]:
    """The recommendation's ``method``: each module's ``*_METHOD`` text and the throughput's source."""
    return recommendation_method(
        estimate=ESTIMATE_METHOD,
        upper_bound=UPPER_BOUND_METHOD,
        decision=DECISION_METHOD,
        memory_budget=MEMORY_METHOD,
        projection=PROJECTION_METHOD,
        projection_source=projection_source,
        cost=COST_METHOD,
        scaling=SCALING_METHOD,
    )


def _energy(per_model: dict[str, ModelEstimate], decided_on: list[str]) -> tuple[float | None, str | None]:
    """The decided models' training energy (kWh) and its basis; None where a model's is unknown."""
    energies = [per_model[name].energy_kwh for name in decided_on]
    bases = {per_model[name].energy_basis for name in decided_on}
    kwh = None if None in energies else sum(e for e in energies if e is not None)
    return kwh, None if None in bases else "+".join(sorted(b for b in bases if b is not None))


def _cost(
    hours: float,
    energy: tuple[float | None, str | None],
    cloud_row: CardProjection | None,
    table: list[CostRow],
    catalog: dict[str, Card],
    decision: DecisionConfig,
) -> CostAnalysis:
    """The cost of one training of ``hours`` here, using ``energy`` (kWh, basis), against ``cloud_row`` at its
    cheapest row of ``table``."""
    return cost_analysis(
        CostInputs(
            local_hours=hours,
            local_energy_kwh=energy[0],
            energy_basis=energy[1],
            cloud_card=decision.cloud_card,
            cloud_hours=cloud_row.training_hours if cloud_row else None,
            catalog_cards=tuple(catalog),
            cloud_gpus=decision.cloud_gpus,
            cloud_hours_lower=cloud_row.training_hours_lower if cloud_row else None,
            cloud_hours_upper=cloud_row.training_hours_upper if cloud_row else None,
            cloud_single_card_hours=cloud_row.single_card_training_hours if cloud_row else None,
            cloud_rental=cheapest_rental(table, decision.cloud_card),
            cheapest=cheapest_rental(table),
        ),
        decision,
    )


def _per_model(
    report: RunReport,
    estimates: dict[str, TimeEstimate],
    refusals: dict[str, str],
    decided_on: list[str],
    splits: dict[str, StepSplit],
    source: DeviceThroughput,
    catalog: dict[str, Card],
    emulated: str | None,
) -> dict[str, ModelEstimate]:
    """Each model's record, those without an estimate first; on an ``emulated`` card the energy is its board power
    (the device's counter is another card's)."""
    per_model = {
        name: ModelEstimate(status=report.models[name].status, estimated=False, reason=reason)
        for name, reason in refusals.items()
    }
    for name, estimate in estimates.items():
        result = report.models[name]
        if emulated is None:
            energy_kwh, energy_basis = training_energy_kwh(estimate, result, source.card, catalog)
        else:
            energy_kwh, energy_basis = training_energy_kwh(estimate, replace(result, energy=None), emulated, catalog)
        record = estimate.model_estimate(
            decided_on=name in decided_on, step_split=splits[name], energy_kwh=energy_kwh, energy_basis=energy_basis
        )
        if emulated is not None:
            record = replace(record, projected_onto=emulated, measured_step_ms=splits[name].step_ms)
        per_model[name] = record
    return per_model


def _answer_estimates(
    measured: dict[str, TimeEstimate],
    splits: dict[str, StepSplit],
    report: RunReport,
    sources: dict[str, DeviceThroughput],
    emulated: str | None,
    catalog: dict[str, Card],
    decision: DecisionConfig,
) -> tuple[dict[str, TimeEstimate], dict[str, str]]:
    """The estimates the answer is about (measured, or projected onto the ``emulated`` card) and the models that
    cannot be projected, with the reason."""
    if emulated is None:
        return measured, {}
    targets = model_targets(report, emulated, catalog[emulated], sources, decision.assumed_matmul_efficiency)
    steps, projected = projected_estimates(measured, splits, sources, targets, measured=False)
    refused = {
        name: f"no projection onto {emulated}: {steps[name].refused}" for name in measured if name not in projected
    }
    return projected, refused


def _prices(decision: DecisionConfig, prices: PriceSnapshot | None) -> tuple[PriceSnapshot | None, list[str]]:
    """The price snapshot: ``prices``, else ``decision.prices_dir``'s (unreadable: ConfigError), else the shipped one
    (unreadable: None and why, and no cost table)."""
    if prices is not None:
        return prices, []
    if decision.prices_dir:
        # Checked with the config; read again here, so a folder changed since is refused, not silently dropped.
        return user_snapshot(decision.prices_dir), []
    try:
        return load_snapshot(), []
    except PriceSnapshotError as exc:
        return None, [f"no cost table: {exc}"]


def build_recommendation(
    report: RunReport,
    decision: DecisionConfig,
    catalog: dict[str, Card],
    prices: PriceSnapshot | None = None,
    today: date | None = None,
) -> Recommendation:
    """The recommendation from the report so far: the rule's decision (None, with the reason, when unsupported) and
    the figures behind it; ``prices`` None: the configured or shipped snapshot, judged on ``today`` (None: UTC)."""
    source = source_throughput(report, catalog, decision.assumed_matmul_efficiency)
    emulated = answer_card(report, source, catalog)
    measured: dict[str, TimeEstimate] = {}
    refusals: dict[str, str] = {}
    for name, result in report.models.items():
        try:
            measured[name] = estimate_training_time(name, result, decision.plan)
        except ValueError as exc:
            refusals[name] = str(exc)
    sources = model_sources(report, catalog, decision.assumed_matmul_efficiency, list(measured))
    splits = {name: split_result(e.step_ms, report.models[name], sources[name]) for name, e in measured.items()}
    estimates, unprojected = _answer_estimates(measured, splits, report, sources, emulated, catalog, decision)
    refusals.update(unprojected)
    critical = critical_models(decision.critical_models, list(report.models))
    missing = [
        MissingModel(
            model=name,
            status=report.models[name].status if name in report.models else "not run",
            reason=refusals.get(name, "not run"),
        )
        for name in critical
        if name not in estimates
    ]
    verdict = decide(critical, report.models, estimates, missing, decision)
    decided_on = [name for name in critical if name in estimates] or list(estimates)
    per_model = _per_model(report, estimates, refusals, decided_on, splits, source, catalog, emulated)
    # The cloud side's cards: each model's scaling efficiency at decision.cloud_gpus (one card: 1, not reported).
    scalings = {name: scaling_efficiency(decision.cloud_gpus, report.models[name].distributed) for name in measured}
    projection = projection_table(measured, decided_on, splits, report, source, sources, catalog, decision, scalings)
    budget_rows = memory_budget(report, decision)
    device = report.hardware.device_name or source.name
    decided = [estimates[name] for name in decided_on]
    total = combine_estimates(decided) if decided else None
    measured_decided = [measured[name] for name in decided_on if name in measured]
    measured_total = combine_estimates(measured_decided) if emulated is not None and measured_decided else None
    outcome = Outcome(
        verdict=verdict,
        decided=decided,
        total=total,
        level=min(e.confidence_level for e in decided) if decided else None,
        missing=missing,
        device=emulated or device,
        on_cpu=not report.hardware.on_gpu,
        measured_device=device,
        measured_total=measured_total,
        splits={name: splits[name] for name in decided_on},
        projection_error=PROJECTION_RELATIVE_ERROR if emulated is not None else None,
        vram_limit_mb=report.hardware.vram_limit_mb,
    )
    what_ifs = what_if_estimates(report, estimates, emulated, catalog, decision)
    cloud_row = next((row for row in projection if row.card == decision.cloud_card), None)
    snapshot, table_notes = _prices(decision, prices)
    today = today or datetime.now(timezone.utc).date()
    table, more_notes = (
        cost_table(projection, {name: per_model[name] for name in decided_on}, snapshot, decision, today, catalog)
        if snapshot is not None and total is not None
        else ([], [])
    )
    cloud_rental, cheapest = cheapest_rental(table, decision.cloud_card), cheapest_rental(table)
    text = reasoning(outcome, cloud_row, decision, scalings, cloud_rental, cheapest)
    energy = _energy(per_model, decided_on)
    host_note = host_text(report.models, decided_on)
    actions = (
        list(NO_ESTIMATE_ACTIONS)
        if verdict.basis == NOTHING_MEASURED
        else recommended_actions(outcome, report, splits, cloud_row, budget_rows, decision, what_ifs, scalings, table)
    )
    return Recommendation(
        decision=verdict.decision,
        reasoning=" ".join(filter(None, [text, host_note])),
        host_note=host_note,
        estimated_full_training_hours=total.hours if total else None,
        estimated_full_training_hours_upper=total.upper_hours if total else None,
        upper_bound_level=outcome.bound_level,
        partial=bool(missing),
        missing_critical_models=missing,
        critical_models=critical,
        decided_on=decided_on,
        thresholds_hours=recommendation_thresholds(decision.local_max_hours, decision.cloud_min_hours),
        measured_device=device,
        per_model=per_model,
        cost_analysis=_cost(total.hours, energy, cloud_row, table, catalog, decision) if total else None,
        projection=projection,
        memory_budget=budget_rows,
        recommended_actions=actions,
        method=method_texts(source.basis),
        estimated_full_training_hours_lower=total.lower_hours if total else None,
        decision_basis=verdict.basis,
        epochs_to_settle=verdict.epochs_to_settle,
        emulated_card=emulated,
        measured_device_hours=None if measured_total is None else measured_total.hours,
        measured_device_hours_upper=None if measured_total is None else measured_total.upper_hours,
        what_ifs=what_ifs,
        cloud_gpus=decision.cloud_gpus,
        scaling={} if decision.cloud_gpus == 1 else scalings,
        cost_table=table,
        cost_table_notes=table_notes + more_notes,
        local_cost=(
            local_cost(outcome.device, (total.hours, total.lower_hours, total.upper_hours), *energy, decision)
            if total
            else None
        ),
        price_snapshot=None if snapshot is None else snapshot_info(snapshot, today),
    )
