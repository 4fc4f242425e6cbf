"""Data-parallel scaling onto N cloud cards: the efficiency e(N) and each model's cloud time (hours)."""

import math
from collections.abc import Sequence

from gpubench.decision.estimate import TimeEstimate, TotalTime, combine_estimates
from gpubench.decision.methods import method_text
from gpubench.results import DistributedScaling, ScalingEfficiency
from gpubench.results.units import SECONDS_PER_HOUR

#: Assumed where nothing measured one: Horovod (2018) and Li et al. (VLDB 2020) support 0.9.
ASSUMED_SCALING_EFFICIENCY = 0.9
#: Wide on purpose: small, launch-bound models pay the all-reduce's latency more than VGG-16 (0.68).
ASSUMED_SCALING_INTERVAL = (0.5, 1.0)
#: Lowest lower end of an efficiency interval, so the time's upper bound stays finite.
EFFICIENCY_FLOOR = 0.01
ASSUMED_SCALING_SOURCE = (
    f"assumed: {ASSUMED_SCALING_EFFICIENCY:g} (interval {ASSUMED_SCALING_INTERVAL[0]:g}-"
    f"{ASSUMED_SCALING_INTERVAL[1]:g}, wide) from Horovod's 512-GPU benchmark (90% for Inception V3 and ResNet-101, "
    "68% for VGG-16) and Li et al., VLDB 2020 (PyTorch DDP near-linear to 256 GPUs)"
)


def extrapolated_efficiency(efficiency: float, measured_world_size: int, gpus: int) -> float:
    """e(N) = e(m)^(log2 N / log2 m) from ``efficiency`` at ``measured_world_size`` m, at most 1."""
    if measured_world_size < 2 or gpus < 1 or efficiency <= 0:
        raise ValueError(f"need m >= 2, N >= 1 and e > 0; got m={measured_world_size}, N={gpus}, e={efficiency}")
    return min(1.0, efficiency ** (math.log2(gpus) / math.log2(measured_world_size)))


def linear_cost_efficiency(efficiency: float, measured_world_size: int, gpus: int) -> float:
    """e(N) if communication grows linearly with the cards: 1 / (1 + (1 / e(m) − 1)(N − 1) / (m − 1))."""
    if measured_world_size < 2 or gpus < 1 or efficiency <= 0:
        raise ValueError(f"need m >= 2, N >= 1 and e > 0; got m={measured_world_size}, N={gpus}, e={efficiency}")
    cost = 1.0 / min(1.0, efficiency) - 1.0
    return 1.0 / (1.0 + cost * (gpus - 1) / (measured_world_size - 1))


def _usable(distributed: DistributedScaling | None) -> bool:
    """Whether a distributed run gives an efficiency: finished, on two or more processes."""
    return (
        distributed is not None
        and distributed.status == "ok"
        and distributed.world_size >= 2
        and distributed.scaling_efficiency is not None
        and distributed.scaling_efficiency > 0
    )


def _on_cpu(distributed: DistributedScaling) -> bool:
    """Whether the distributed run was CPU processes over gloo, which says nothing of NCCL between cloud GPUs."""
    return distributed.backend == "gloo"


def _assumed(gpus: int, distributed: DistributedScaling | None) -> ScalingEfficiency:
    if distributed is None:
        why = "no distributed measurement (distributed.nproc=1)"
    elif _usable(distributed) and _on_cpu(distributed):
        why = (
            f"the {distributed.scaling_efficiency:.3g} measured at {distributed.world_size} CPU processes (gloo) is "
            "not carried onto GPUs: gloo on shared cores says nothing of NCCL between cards"
        )
    else:
        why = f"the distributed run at {distributed.world_size} processes ended {distributed.status}"
    return ScalingEfficiency(
        gpus=gpus,
        scaling_efficiency=ASSUMED_SCALING_EFFICIENCY,
        scaling_efficiency_interval=ASSUMED_SCALING_INTERVAL,
        scaling_source=f"{ASSUMED_SCALING_SOURCE}; {why}",
        measured=False,
        measured_world_size=None if distributed is None else distributed.world_size,
        measured_efficiency=None if distributed is None else distributed.scaling_efficiency,
    )


def scaling_efficiency(gpus: int, distributed: DistributedScaling | None) -> ScalingEfficiency:
    """The scaling efficiency at ``gpus`` cards and its interval: 1 for one card, else measured, extrapolated or
    assumed."""
    if gpus == 1:
        return ScalingEfficiency(gpus, 1.0, (1.0, 1.0), "one card: no scaling", measured=False)
    if not _usable(distributed) or _on_cpu(distributed):
        return _assumed(gpus, distributed)
    assert distributed is not None and distributed.scaling_efficiency is not None
    measured, world = distributed.scaling_efficiency, distributed.world_size
    low, high = distributed.scaling_efficiency_interval or (measured, measured)
    low = max(low, EFFICIENCY_FLOOR)
    processes = f"{world} processes ({distributed.backend})" if distributed.backend else f"{world} processes"
    point, interval, source = measured, (low, high), f"measured at {processes}"
    if world != gpus:
        point = extrapolated_efficiency(measured, world, gpus)
        if gpus > world:
            interval = (min(point, linear_cost_efficiency(low, world, gpus)), max(point, min(1.0, high)))
        else:
            interval = (min(point, low), 1.0)
        source = (
            f"extrapolated from {measured:.3g} measured at {processes}: e({gpus}) = e({world})^(log2 {gpus} / "
            f"log2 {world}), the same loss per doubling of cards (an assumption)"
        )
    return ScalingEfficiency(
        gpus=gpus,
        scaling_efficiency=point,
        scaling_efficiency_interval=interval,
        scaling_source=source,
        measured=world == gpus,
        measured_world_size=world,
        measured_efficiency=measured,
    )


def scaled_time(estimate: TimeEstimate, scaling: ScalingEfficiency) -> TotalTime:
    """One model's training (hours) on ``scaling.gpus`` cards: F + E / (N e), bounds at e_lo and e_hi."""
    if scaling.gpus == 1:
        return TotalTime(hours=estimate.hours, lower_hours=estimate.lower_hours, upper_hours=estimate.upper_hours)
    gpus, (low, high) = scaling.gpus, scaling.scaling_efficiency_interval
    epochs_s, margin_s, fixed_s = estimate.epochs_seconds, estimate.margin_seconds, estimate.fixed_seconds
    return TotalTime(
        hours=(fixed_s + epochs_s / (gpus * scaling.scaling_efficiency)) / SECONDS_PER_HOUR,
        lower_hours=(fixed_s + max(0.0, epochs_s - estimate.lower_margin_seconds) / (gpus * high)) / SECONDS_PER_HOUR,
        upper_hours=(fixed_s + (epochs_s + margin_s) / (gpus * low)) / SECONDS_PER_HOUR,
    )


def scaled_total(estimates: Sequence[TimeEstimate], scalings: Sequence[ScalingEfficiency]) -> TotalTime:
    """Several models in sequence on N cards: their :func:`scaled_time` figures and bounds add."""
    if all(scaling.gpus == 1 for scaling in scalings):
        return combine_estimates(estimates)
    times = [scaled_time(estimate, scaling) for estimate, scaling in zip(estimates, scalings, strict=True)]
    return TotalTime(
        hours=sum(time.hours for time in times),
        lower_hours=sum(time.lower_hours for time in times),
        upper_hours=sum(time.upper_hours for time in times),
    )


#: The report's ``recommendation.method.scaling``.
SCALING_METHOD = method_text(
    "scaling",
    ASSUMED_SCALING_EFFICIENCY=ASSUMED_SCALING_EFFICIENCY,
    ASSUMED_SCALING_INTERVAL=ASSUMED_SCALING_INTERVAL,
    EFFICIENCY_FLOOR=EFFICIENCY_FLOOR,
)
