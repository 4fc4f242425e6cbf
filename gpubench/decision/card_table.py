"""The table of every catalog card's projected training: the models' steps and hours on ``decision.cloud_gpus``
cards, the decided models' total with bounds, and what fits the card's VRAM."""

from collections.abc import Mapping

from gpubench.decision.batch_fit import fits_at_batch
from gpubench.decision.config import DecisionConfig
from gpubench.decision.estimate import TimeEstimate, combine_estimates
from gpubench.decision.projection import (
    PROJECTION_RELATIVE_ERROR,
    DeviceThroughput,
    compute_precisions,
    interval_factors,
    model_targets,
    precision_label,
    project_estimate,
    projected_estimates,
    slower_cause,
    target_throughput,
)
from gpubench.decision.scaling import scaled_time, scaled_total, scaling_efficiency
from gpubench.hardware.catalog import Card
from gpubench.results import CardProjection, ProjectedModel, RunReport, ScalingEfficiency, StepSplit


def decided_precisions(report: RunReport, decided: list[str]) -> dict[str, float]:
    """The ``decided`` models' FLOPs per step by precision, added up, for a row's peak (the run's where none)."""
    total: dict[str, float] = {}
    for name in decided:
        result = report.models.get(name)
        if result is None or not result.flops_per_step:
            continue
        mix = compute_precisions(result, report.run.precision)
        scale = result.flops_per_step / sum(mix.values())
        for precision, flops in mix.items():
            total[precision] = total.get(precision, 0.0) + flops * scale
    return total or {report.run.precision: 1.0}


def projection_table(
    estimates: dict[str, TimeEstimate],
    decided_on: list[str],
    splits: dict[str, StepSplit],
    report: RunReport,
    source: DeviceThroughput,
    sources: Mapping[str, DeviceThroughput],
    catalog: dict[str, Card],
    decision: DecisionConfig,
    scalings: Mapping[str, ScalingEfficiency] | None = None,
) -> list[CardProjection]:
    """A row per catalog card for ``decision.cloud_gpus`` of it: each model's projected step and hours (bounds with
    the projection's error and the ``scalings`` interval), the ``decided_on`` models' total and whether they fit
    at their measured peak; unpriced (:mod:`gpubench.decision.rent` prices them)."""
    matmul_precision = report.run.fp32_matmul_precision
    decided = [name for name in decided_on if name in estimates]
    row_precision = decided_precisions(report, decided)
    gpus = decision.cloud_gpus
    scaling = {name: (scalings or {}).get(name) or scaling_efficiency(1, None) for name in estimates}
    efficiency = decision.assumed_matmul_efficiency
    rows = []
    for card_name, card in catalog.items():
        targets = model_targets(report, card_name, card, {name: sources[name] for name in estimates}, efficiency)
        row_target = target_throughput(card_name, card, row_precision, source, efficiency, matmul_precision)
        measured = card_name == source.card
        steps, projected = projected_estimates(estimates, splits, sources, targets, measured=measured)
        card_mb = card.vram_mb
        models: dict[str, ProjectedModel] = {}
        for name, estimate in estimates.items():
            step = steps[name]
            peak_mb = report.models[name].peak_reserved_mb
            model = projected.get(name)
            time = None if model is None else scaled_time(model, scaling[name])
            # Slower only where the projection's whole interval is above the measured step: within it the card may
            # be as fast.
            slower = (
                step.step_ms is not None
                and not measured
                and (step.interval_ms[0] if step.interval_ms is not None else step.step_ms) > estimate.step_ms
            )
            models[name] = ProjectedModel(
                step_ms=step.step_ms,
                step_ms_if_memory_bound=step.memory_bound_ms,
                speedup=estimate.step_ms / step.step_ms if step.step_ms else None,
                hours=None if time is None else time.hours,
                hours_upper=None if time is None else time.upper_hours,
                fits_in_vram=None if peak_mb is None or card_mb is None else peak_mb <= card_mb,
                step_ms_interval=step.interval_ms,
                hours_lower=None if time is None else time.lower_hours,
                refused=step.refused,
                slower_cause=slower_cause(splits[name], sources[name], targets[name], step.step_ms) if slower else None,
                fits_at_batch=fits_at_batch(
                    report.models[name].memory_split, card_mb, report.hardware.non_allocator_overhead_mb
                ),
                host_share=step.host_share,
            )
        hours = upper_hours = lower_hours = memory_bound_hours = single_card_hours = None
        decided_scalings = [scaling[name] for name in decided]
        if decided and all(name in projected for name in decided):
            total = scaled_total([projected[name] for name in decided], decided_scalings)
            hours, upper_hours, lower_hours = total.hours, total.upper_hours, total.lower_hours
            if gpus > 1:
                single_card_hours = combine_estimates([projected[name] for name in decided]).hours
        if decided and all(steps[name].memory_bound_ms is not None for name in decided):
            memory_bound = [
                project_estimate(estimates[name], steps[name].memory_bound_ms or 0.0, 0.0) for name in decided
            ]
            memory_bound_hours = scaled_total(memory_bound, decided_scalings).hours
        measured_hours = sum(estimates[name].hours for name in decided)
        fits_all = [models[name].fits_in_vram for name in decided]
        rows.append(
            CardProjection(
                card=card_name,
                measured_device=measured,
                precision=precision_label(row_precision),
                peak_tflops=card.mixed_peak_tflops(row_precision, matmul_precision),
                attainable_tflops=row_target.attainable_tflops,
                memory_bandwidth_gbps=card.memory_bandwidth_gbps,
                vram_mb=card_mb,
                training_hours=hours,
                training_hours_upper=upper_hours,
                training_hours_if_memory_bound=memory_bound_hours,
                speedup_vs_measured=measured_hours / hours if hours else None,
                fits_in_vram=None if not fits_all or None in fits_all else all(fits_all),
                models=models,
                training_hours_lower=lower_hours,
                projection_relative_error=0.0 if measured else PROJECTION_RELATIVE_ERROR if source.on_gpu else None,
                projection_interval_factors=interval_factors(from_gpu=source.on_gpu, measured=measured),
                gpus=gpus,
                single_card_training_hours=single_card_hours,
            )
        )
    return rows
