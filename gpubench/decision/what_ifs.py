"""The measured what-ifs' predicted training (:class:`gpubench.results.WhatIfEstimate`): each alternative
extrapolated to the plan as the main measurement is and, for an emulated card, projected onto it."""

from dataclasses import replace

from gpubench.decision.config import DecisionConfig
from gpubench.decision.estimate import TimeEstimate, estimate_training_time
from gpubench.decision.projection import (
    compute_precisions,
    project_estimate,
    project_step,
    source_throughput,
    split_result,
    target_throughput,
)
from gpubench.hardware.catalog import Card
from gpubench.results import RunReport, WhatIf, WhatIfEstimate


def _on_answer_card(
    name: str,
    what_if: WhatIf,
    estimate: TimeEstimate,
    report: RunReport,
    card: str,
    catalog: dict[str, Card],
    decision: DecisionConfig,
) -> TimeEstimate | str:
    """The what-if's estimate projected onto the emulated ``card`` at its own precisions, or why it cannot be."""
    result = what_if.result
    precision = compute_precisions(result, what_if.precision)
    run = replace(report.run, precision=what_if.precision, matmul_precision=what_if.matmul_precision)
    source = source_throughput(replace(report, run=run), catalog, decision.assumed_matmul_efficiency, precision)
    target = target_throughput(
        card, catalog[card], precision, source, decision.assumed_matmul_efficiency, what_if.matmul_precision
    )
    step = project_step(split_result(estimate.step_ms, result, source), source, target, measured=False)
    if step.step_ms is None:
        return f"no projection of {name}'s {what_if.variant} onto {card}: {step.refused}"
    return project_estimate(estimate, step.step_ms, step.margin_fraction, step.lower_margin_fraction)


def what_if_estimates(
    report: RunReport,
    main: dict[str, TimeEstimate],
    emulated_card: str | None,
    catalog: dict[str, Card],
    decision: DecisionConfig,
) -> list[WhatIfEstimate]:
    """Every measured what-if of the report beside its model's main estimate ``main``, on the answer's card."""
    rows = []
    for name, what_ifs in report.what_ifs.items():
        reference = main.get(name)
        main_peak = report.models[name].peak_reserved_mb if name in report.models else None
        for what_if in what_ifs:
            result = what_if.result
            base = WhatIfEstimate(
                model=name,
                variant=what_if.variant,
                description=what_if.description,
                status=result.status,
                main_step_ms=None if reference is None else reference.step_ms,
                main_hours=None if reference is None else reference.hours,
                peak_reserved_mb=result.peak_reserved_mb,
                main_peak_reserved_mb=main_peak,
            )
            try:
                estimate = estimate_training_time(name, result, decision.plan)
            except ValueError as exc:
                rows.append(replace(base, reason=str(exc)))
                continue
            answer: TimeEstimate | str = estimate
            if emulated_card is not None:
                answer = _on_answer_card(name, what_if, estimate, report, emulated_card, catalog, decision)
            if isinstance(answer, str):
                rows.append(replace(base, reason=answer))
                continue
            rows.append(
                replace(
                    base,
                    step_ms=answer.step_ms,
                    speedup=None if reference is None else reference.step_ms / answer.step_ms,
                    hours=answer.hours,
                    hours_lower=answer.lower_hours,
                    hours_upper=answer.upper_hours,
                )
            )
    return rows
