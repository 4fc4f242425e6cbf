"""Projection of a measured training step onto the catalog cards (:mod:`gpubench.hardware.catalog`): the
measured device's throughput and a target card's, the step's split into compute and the rest, the projected step,
and the table of every card's projected training.

The model and its assumptions, in words, are :data:`gpubench.decision.advice.PROJECTION_METHOD` (written into the
report as well); step times are in ms, throughput in TFLOP/s (1e12 FLOP/s), training in hours. Pure arithmetic on
the report's typed records: nothing here imports torch.
"""

from dataclasses import dataclass

from gpubench.decision.config import DecisionConfig
from gpubench.decision.estimate import TimeEstimate, combine_estimates
from gpubench.hardware.catalog import Card, match_catalog_card
from gpubench.results import CardProjection, ProjectedModel, RunReport, StepSplit

#: A step whose compute part is at least this fraction of its time is called compute-bound.
COMPUTE_BOUND_SHARE = 0.5
BOUND_COMPUTE = "compute-bound"
BOUND_OVERHEAD = "overhead-bound"
BOUND_UNKNOWN = "unknown"


@dataclass(frozen=True)
class DeviceThroughput:
    """What the projection knows of one device's speed.

    ``attainable_tflops`` is η × peak at the run's precision (TFLOP/s), ``matmul_efficiency`` the η used (None
    where the attainable figure is the burn-in's own measurement), ``card`` the catalog name when the device is a
    catalog card, ``basis`` a sentence on where the figures come from.
    """

    name: str
    card: str | None
    attainable_tflops: float | None
    matmul_efficiency: float | None
    memory_bandwidth_gbps: float | None
    basis: str


def source_throughput(report: RunReport, catalog: dict[str, Card], assumed_efficiency: float) -> DeviceThroughput:
    """The measured device's throughput, from the report's hardware (the device, its burn-in) and the run's
    precision. An emulated card (``hardware=<card>`` on a bigger GPU) caps memory only: the speed is the device's."""
    hardware, precision = report.hardware, report.run.precision
    device_name = hardware.device_name or "unknown device"
    burn_in_tflops = (hardware.warmup_stats.achieved_tflops if hardware.warmup_stats else None) or None
    card_name = match_catalog_card(device_name, catalog) if hardware.on_gpu else None
    if card_name is not None:
        card = catalog[card_name]
        peak = card.peak_tflops(precision)
        if burn_in_tflops and card.peak_fp32_tflops:
            efficiency = min(1.0, burn_in_tflops / card.peak_fp32_tflops)
            basis = (
                f"catalog card {card_name} (matched by device name); matmul efficiency {efficiency:.2f} measured "
                f"by the burn-in ({burn_in_tflops:.1f} of {card.peak_fp32_tflops:g} fp32 TFLOP/s)"
            )
        else:
            efficiency = assumed_efficiency
            basis = f"catalog card {card_name} (matched by device name); matmul efficiency assumed {efficiency:g}"
        return DeviceThroughput(
            name=device_name,
            card=card_name,
            attainable_tflops=efficiency * peak if peak else None,
            matmul_efficiency=efficiency,
            memory_bandwidth_gbps=card.memory_bandwidth_gbps,
            basis=basis,
        )
    if burn_in_tflops:
        basis = (
            f"{device_name} is not a catalog card: its attainable throughput is the burn-in's measured "
            f"{burn_in_tflops:.3g} fp32 matmul TFLOP/s (used for every precision); memory bandwidth unknown"
        )
    else:
        basis = f"{device_name} is not a catalog card and the burn-in measured no throughput: no projection"
    return DeviceThroughput(
        name=device_name,
        card=None,
        attainable_tflops=burn_in_tflops,
        matmul_efficiency=None,
        memory_bandwidth_gbps=None,
        basis=basis,
    )


def target_throughput(
    name: str, card: Card, precision: str, source: DeviceThroughput, assumed_efficiency: float
) -> DeviceThroughput:
    """A catalog card's throughput as a projection target: the source's measured η when the source is a catalog
    card (same kernels, same software), else ``assumed_efficiency``."""
    efficiency = source.matmul_efficiency if source.card is not None else assumed_efficiency
    assert efficiency is not None
    peak = card.peak_tflops(precision)
    return DeviceThroughput(
        name=name,
        card=name,
        attainable_tflops=efficiency * peak if peak else None,
        matmul_efficiency=efficiency,
        memory_bandwidth_gbps=card.memory_bandwidth_gbps,
        basis=f"catalog {precision} peak {peak} TFLOP/s x efficiency {efficiency:.2f}",
    )


def split_step(step_ms: float, flops_per_step: float | None, attainable_tflops: float | None) -> StepSplit:
    """Split a measured step of ``step_ms`` ms doing ``flops_per_step`` FLOPs on a device that attains
    ``attainable_tflops`` TFLOP/s: compute ``min(t, F / A)``, the rest ``t − compute``."""
    if step_ms <= 0:
        raise ValueError(f"step_ms must be positive, got {step_ms!r}")
    if not flops_per_step or not attainable_tflops:
        achieved = flops_per_step / (step_ms * 1e-3) / 1e12 if flops_per_step else None
        return StepSplit(
            step_ms=step_ms,
            flops_per_step=flops_per_step,
            achieved_tflops=achieved,
            achieved_fraction=None,
            compute_ms=0.0,
            other_ms=step_ms,
            bound=BOUND_UNKNOWN,
            compute_share=0.0,
        )
    achieved_tflops = flops_per_step / (step_ms * 1e-3) / 1e12
    compute_ms = min(step_ms, flops_per_step / (attainable_tflops * 1e12) * 1e3)
    bound = BOUND_COMPUTE if compute_ms >= COMPUTE_BOUND_SHARE * step_ms else BOUND_OVERHEAD
    return StepSplit(
        step_ms=step_ms,
        flops_per_step=flops_per_step,
        achieved_tflops=achieved_tflops,
        achieved_fraction=achieved_tflops / attainable_tflops,
        compute_ms=compute_ms,
        other_ms=step_ms - compute_ms,
        bound=bound,
        compute_share=compute_ms / step_ms,
    )


def projected_step_ms(
    split: StepSplit, source: DeviceThroughput, target: DeviceThroughput, *, memory_bound: bool = False
) -> float | None:
    """The step's time (ms) on ``target``: ``t_c × A_src / A_tgt + t_o``, or with ``memory_bound`` the rest scaled
    by the bandwidth ratio, ``t_o × bw_src / bw_tgt``. None when a figure it needs is unknown (an attainable
    throughput while the compute part is non-zero; a bandwidth when ``memory_bound``)."""
    compute_ms = 0.0
    if split.compute_ms:
        if not source.attainable_tflops or not target.attainable_tflops:
            return None
        compute_ms = split.compute_ms * source.attainable_tflops / target.attainable_tflops
    if not memory_bound:
        return compute_ms + split.other_ms
    if not source.memory_bandwidth_gbps or not target.memory_bandwidth_gbps:
        return None
    return compute_ms + split.other_ms * source.memory_bandwidth_gbps / target.memory_bandwidth_gbps


def projection_table(
    estimates: dict[str, TimeEstimate],
    decided_on: list[str],
    splits: dict[str, StepSplit],
    report: RunReport,
    source: DeviceThroughput,
    catalog: dict[str, Card],
    decision: DecisionConfig,
) -> list[CardProjection]:
    """A row per catalog card: each estimated model's projected step and hours, and the ``decided_on`` models'
    total, its bound, its cost (USD) and whether they fit in the card's VRAM at their measured peak."""
    precision = report.run.precision
    measured_hours = sum(estimates[name].hours for name in decided_on)
    decided = [estimates[name] for name in decided_on]
    rows = []
    for card_name, card in catalog.items():
        target = target_throughput(card_name, card, precision, source, decision.assumed_matmul_efficiency)
        card_mb = card.vram_mb
        models: dict[str, ProjectedModel] = {}
        # Each model's projected step time over its measured one: the factor its epochs' time scales by.
        ratios: dict[str, float] = {}
        memory_bound_ratios: dict[str, float] = {}
        for name, estimate in estimates.items():
            step_ms = projected_step_ms(splits[name], source, target)
            memory_bound_ms = projected_step_ms(splits[name], source, target, memory_bound=True)
            peak_mb = report.models[name].peak_reserved_mb
            model_hours = model_upper = None
            if step_ms is not None:
                ratios[name] = step_ms / estimate.step_ms
                projected = combine_estimates([estimate], [ratios[name]])
                model_hours, model_upper = projected.hours, projected.upper_hours
            if memory_bound_ms is not None:
                memory_bound_ratios[name] = memory_bound_ms / estimate.step_ms
            models[name] = ProjectedModel(
                step_ms=step_ms,
                step_ms_if_memory_bound=memory_bound_ms,
                speedup=estimate.step_ms / step_ms if step_ms else None,
                hours=model_hours,
                hours_upper=model_upper,
                fits_in_vram=None if peak_mb is None or card_mb is None else peak_mb <= card_mb,
            )
        hours = upper_hours = memory_bound_hours = None
        if decided and all(name in ratios for name in decided_on):
            total = combine_estimates(decided, [ratios[name] for name in decided_on])
            hours, upper_hours = total.hours, total.upper_hours
        if decided and all(name in memory_bound_ratios for name in decided_on):
            memory_bound_hours = combine_estimates(decided, [memory_bound_ratios[name] for name in decided_on]).hours
        fits_all = [models[name].fits_in_vram for name in decided_on]
        price = card.hourly_price_usd
        if card_name == decision.cloud_card and decision.cloud_hourly_price_usd is not None:
            price = decision.cloud_hourly_price_usd
        rows.append(
            CardProjection(
                card=card_name,
                measured_device=card_name == source.card,
                precision=precision,
                peak_tflops=card.peak_tflops(precision),
                attainable_tflops=target.attainable_tflops,
                memory_bandwidth_gbps=card.memory_bandwidth_gbps,
                vram_mb=card_mb,
                hourly_price_usd=price,
                training_hours=hours,
                training_hours_upper=upper_hours,
                training_hours_if_memory_bound=memory_bound_hours,
                speedup_vs_measured=measured_hours / hours if hours else None,
                cost_usd_per_training=hours * price if hours is not None and price is not None else None,
                fits_in_vram=None if not fits_all or None in fits_all else all(fits_all),
                models=models,
            )
        )
    return rows
