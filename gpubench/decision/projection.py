"""Projection of a measured training step onto the catalog cards (:mod:`gpubench.hardware.catalog`).

The model and its assumptions are :data:`PROJECTION_METHOD` (written into the report as well); step times are in
ms, throughput in TFLOP/s (1e12 FLOP/s). Pure arithmetic on the report's numbers: nothing here imports torch.
"""

from dataclasses import asdict, dataclass
from typing import Any

from gpubench.hardware.catalog import Card, match_catalog_card

#: A step whose compute part is at least this fraction of its time is called compute-bound.
COMPUTE_BOUND_SHARE = 0.5
BOUND_COMPUTE = "compute-bound"
BOUND_OVERHEAD = "overhead-bound"
BOUND_UNKNOWN = "unknown"

#: The projection's model and assumptions, written into the report's ``recommendation.method``.
PROJECTION_METHOD = (
    "A step of t ms on the measured (source) device does F FLOPs: torch's flop counter over one training step, "
    "forward and backward of matmuls, convolutions and attention (elementwise work and the optimizer are not "
    "counted). A device's attainable matmul throughput is A = eta x peak, peak being the catalog's fp32 TFLOP/s for "
    "fp32 runs and its bf16 (T4: fp16) tensor-core figure for bf16/fp16 runs. On a catalog card eta is measured: the "
    "burn-in's achieved fp32 matmul TFLOP/s over the card's fp32 peak, and the targets use the same eta (same "
    "kernels, same software). A device not in the catalog (the CPU, an unlisted GPU) has no peak: its A is the "
    "burn-in's achieved TFLOP/s itself, and the targets' eta is decision.assumed_matmul_efficiency. The step splits "
    "into compute t_c = min(t, F / A_src), the time its FLOPs take at the attainable rate, and the rest "
    "t_o = t - t_c: kernel launches, host work (Python, RL environment control flow), memory traffic of elementwise "
    "kernels, the optimizer. A step with t_c >= 0.5 t is compute-bound, otherwise overhead-bound (launch/host/"
    "memory); without a FLOP count the whole step is taken as overhead. On a target card "
    "t' = t_c x A_src / A_tgt + t_o: the rest is assumed unchanged, as launch and host costs are (a small network's "
    "Adam step is launch-bound even on an H200), so a compute-bound step scales by the peak ratio and a launch-bound "
    "one keeps its time. Bytes moved are not measured; were the rest memory traffic instead, it would scale with "
    "memory bandwidth: the *_if_memory_bound figures use t_c x A_src / A_tgt + t_o x bw_src / bw_tgt (when both "
    "bandwidths are known), and the truth lies between the two where they differ. The batch size is the one "
    "measured: a card with less memory may need a smaller one (see fits_in_vram). From a CPU measurement t_o is CPU "
    "time, which a GPU spends very differently: such projections are indicative only."
)


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

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def source_throughput(report: dict[str, Any], catalog: dict[str, Card], assumed_efficiency: float) -> DeviceThroughput:
    """The measured device's throughput, from the report's ``hardware`` and ``run`` sections."""
    hardware = report.get("hardware") or {}
    precision = (report.get("run") or {}).get("precision") or "fp32"
    device_name = hardware.get("device_name") or "unknown device"
    burn_in_tflops = (hardware.get("warmup_stats") or {}).get("achieved_tflops") or None
    card_name = match_catalog_card(device_name, catalog) if hardware.get("measured_on") == "cuda" else None
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


@dataclass(frozen=True)
class StepSplit:
    """One training step on the source device split into compute and the rest (ms), and its classification.

    ``achieved_tflops`` is F / t; ``achieved_fraction`` its fraction of the source's attainable throughput (above 1
    when the step's kernels beat the burn-in's matmul). ``bound`` is ``compute-bound``, ``overhead-bound`` or
    ``unknown`` (no FLOP count: the whole step is taken as overhead, so no speed-up is credited).
    """

    step_ms: float
    flops_per_step: float | None
    achieved_tflops: float | None
    achieved_fraction: float | None
    compute_ms: float
    other_ms: float
    bound: str

    @property
    def compute_share(self) -> float:
        return self.compute_ms / self.step_ms

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "compute_share": self.compute_share}


def split_step(step_ms: float, flops_per_step: float | None, attainable_tflops: float | None) -> StepSplit:
    """Split a measured step of ``step_ms`` ms doing ``flops_per_step`` FLOPs on a device that attains
    ``attainable_tflops`` TFLOP/s: compute ``min(t, F / A)``, the rest ``t − compute``."""
    if step_ms <= 0:
        raise ValueError(f"step_ms must be positive, got {step_ms!r}")
    if not flops_per_step or not attainable_tflops:
        achieved = flops_per_step / (step_ms * 1e-3) / 1e12 if flops_per_step else None
        return StepSplit(step_ms, flops_per_step, achieved, None, 0.0, step_ms, BOUND_UNKNOWN)
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
    )


def projected_step_ms(
    split: StepSplit, source: DeviceThroughput, target: DeviceThroughput, *, memory_bound: bool = False
) -> float | None:
    """The step's time (ms) on ``target``: ``t_c × A_src / A_tgt + t_o``, or with ``memory_bound`` the rest scaled
    by the bandwidth ratio, ``t_o × bw_src / bw_tgt``. None when a figure it needs is unknown (an attainable
    throughput while the compute part is non-zero; a bandwidth when ``memory_bound``)."""
    compute_ms = 0.0
    if split.compute_ms > 0:
        if not source.attainable_tflops or not target.attainable_tflops:
            return None
        compute_ms = split.compute_ms * source.attainable_tflops / target.attainable_tflops
    if not memory_bound:
        return compute_ms + split.other_ms
    if not source.memory_bandwidth_gbps or not target.memory_bandwidth_gbps:
        return None
    return compute_ms + split.other_ms * source.memory_bandwidth_gbps / target.memory_bandwidth_gbps
