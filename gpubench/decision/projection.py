"""Projection of a measured training step onto the catalog cards (:mod:`gpubench.hardware.catalog`): the devices'
throughput, the step's split into compute, kernel launches, memory traffic and host work, the projected step with its
interval, and a model's estimate on a card. The model in words is :data:`PROJECTION_METHOD` (also in the report).

A model's peaks are those of the precisions its FLOPs ran in (:func:`compute_precisions`), not only the run's
``execution.precision``: a user's model may autocast to bf16 under fp32. Step times in ms, throughput in TFLOP/s,
bandwidth in GB/s (1e9 bytes/s), training in hours. Pure arithmetic on typed records, no torch."""

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from importlib import resources

from gpubench.decision.estimate import TimeEstimate
from gpubench.decision.methods import method_text
from gpubench.hardware.catalog import Card, match_catalog_card
from gpubench.results import ModelResult, RunReport, StepSplit

#: A step whose compute part is at least this fraction of its time is called compute-bound.
COMPUTE_BOUND_SHARE = 0.5
BOUND_COMPUTE = "compute-bound"
BOUND_OVERHEAD = "overhead-bound"
BOUND_UNKNOWN = "unknown"

#: Host cost (ms) of one kernel-launching operation of an eager step, kept across cards: launch and dispatch are host
#: and driver time. Fitted: benchmarks/results/2026-12-06-evidence-decision.md.
LAUNCH_COST_MS = 0.024

#: The fitted figures of the projected step's interval (written by ``benchmarks/cross_card_fit.py``).
CALIBRATION_FILE = "cross_card_calibration.json"
_CALIBRATION = json.loads(resources.files("gpubench.decision").joinpath(CALIBRATION_FILE).read_text())

#: Relative error e of the card part (compute and memory traffic) of a step projected from a GPU: it lies within
#: ``× (1 ± e)`` of its projection.
PROJECTION_RELATIVE_ERROR = float(_CALIBRATION["card_relative_error"])

#: The host part (launches and host work, kept as measured) lies within this factor either way: a rented machine's
#: host is another CPU.
HOST_RATIO_SPREAD = float(_CALIBRATION["host_ratio_spread"])

#: From the CPU a card's step is rebuilt from counts (:func:`counted_step_ms`) and lies within this factor of the
#: rebuild either way.
CPU_REBUILD_FACTOR = 2.0


@dataclass(frozen=True)
class DeviceThroughput:
    """One device's speed: ``attainable_tflops`` = η × peak (TFLOP/s; η ``matmul_efficiency``, None where the figure
    is the burn-in's own), ``card`` its catalog name, ``basis`` where the figures come from."""

    name: str
    card: str | None
    attainable_tflops: float | None
    matmul_efficiency: float | None
    memory_bandwidth_gbps: float | None
    basis: str
    on_gpu: bool = True


def compute_precisions(result: ModelResult | None, run_precision: str) -> dict[str, float]:
    """A model's FLOPs by precision as recorded, else the whole step at ``run_precision`` (FLOPs not counted)."""
    recorded = None if result is None else result.flops_by_precision
    if recorded and sum(recorded.values()) > 0:
        return dict(recorded)
    return {run_precision: 1.0}


def precision_label(precision: str | Mapping[str, float]) -> str:
    """``bf16`` for one precision; the FLOP shares, largest first, for several (``bf16 90% + fp32 10%``)."""
    shares = _as_mix(precision)
    total = sum(shares.values())
    named = sorted(((flops, name) for name, flops in shares.items() if flops > 0), reverse=True)
    if len(named) <= 1:
        return named[0][1] if named else next(iter(shares), "unknown")
    return " + ".join(f"{name} {flops / total:.0%}" for flops, name in named)


def _as_mix(precision: str | Mapping[str, float]) -> dict[str, float]:
    """FLOPs by precision; a precision name stands for a step wholly in it."""
    return {precision: 1.0} if isinstance(precision, str) else dict(precision)


def source_throughput(
    report: RunReport,
    catalog: dict[str, Card],
    assumed_efficiency: float,
    precision: str | Mapping[str, float] | None = None,
) -> DeviceThroughput:
    """The measured device's throughput for a step at ``precision`` (a name or FLOPs by precision; None: the run's).
    An emulated card caps memory only: the speed is the device's (:func:`answer_card` names the card)."""
    hardware = report.hardware
    mix = _as_mix(report.run.precision if precision is None else precision)
    matmul_precision = report.run.fp32_matmul_precision
    device_name = hardware.device_name or "unknown device"
    burn_in_tflops = (hardware.warmup_stats.achieved_tflops if hardware.warmup_stats else None) or None
    card_name = match_catalog_card(device_name, catalog) if hardware.on_gpu else None
    if card_name is not None:
        card = catalog[card_name]
        burn_in_peak = card.peak_tflops("fp32", matmul_precision)
        if burn_in_tflops and burn_in_peak:
            efficiency = min(1.0, burn_in_tflops / burn_in_peak)
            basis = (
                f"catalog card {card_name} (matched by device name); matmul efficiency {efficiency:.2f} measured "
                f"by the burn-in ({burn_in_tflops:.1f} of {burn_in_peak:g} TFLOP/s at matmul precision "
                f"{matmul_precision})"
            )
        else:
            efficiency = assumed_efficiency
            basis = f"catalog card {card_name} (matched by device name); matmul efficiency assumed {efficiency:g}"
        return _on_card(device_name, card_name, card, card.mixed_peak_tflops(mix, matmul_precision), efficiency, basis)
    if not hardware.on_gpu:
        basis = (
            f"{device_name} is the CPU: its step time says nothing of a GPU's, so each card's step is rebuilt from the "
            f"step's counted FLOPs at the card's attainable rate (matmul efficiency assumed {assumed_efficiency:g}) "
            f"plus its counted kernel launches at {LAUNCH_COST_MS * 1000:g} µs each plus its counted bytes at the "
            "card's memory bandwidth (where counted)"
        )
    elif burn_in_tflops:
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
        on_gpu=hardware.on_gpu,
    )


def answer_card(report: RunReport, source: DeviceThroughput, catalog: dict[str, Card]) -> str | None:
    """The catalog card ``hardware=<card>`` names when the run is on another GPU (memory capped, time projected);
    else None."""
    chosen = report.run.hardware_config.get("name")
    if not report.hardware.on_gpu or chosen not in catalog or chosen == source.card:
        return None
    return str(chosen)


def target_throughput(
    name: str,
    card: Card,
    precision: str | Mapping[str, float],
    source: DeviceThroughput,
    assumed_efficiency: float,
    matmul_precision: str = "highest",
) -> DeviceThroughput:
    """A catalog card's throughput as a target at ``precision``: the source's measured η when the source is a
    catalog card (same kernels, same software), else ``assumed_efficiency``."""
    efficiency = source.matmul_efficiency if source.card is not None else assumed_efficiency
    assert efficiency is not None
    peak = card.mixed_peak_tflops(_as_mix(precision), matmul_precision)
    basis = f"catalog {precision_label(precision)} peak {peak and round(peak, 4)} TFLOP/s x efficiency {efficiency:.2f}"
    return _on_card(name, name, card, peak, efficiency, basis)


def _on_card(
    name: str, card_name: str, card: Card, peak_tflops: float | None, efficiency: float, basis: str
) -> DeviceThroughput:
    """A catalog card's throughput: ``efficiency`` × its peak (TFLOP/s) and its memory bandwidth."""
    attainable_tflops = efficiency * peak_tflops if peak_tflops else None
    return DeviceThroughput(name, card_name, attainable_tflops, efficiency, card.memory_bandwidth_gbps, basis)


def model_sources(
    report: RunReport, catalog: dict[str, Card], assumed_efficiency: float, names: list[str]
) -> dict[str, DeviceThroughput]:
    """The measured device's throughput for each named model at the precisions its step computes in."""
    return {
        name: source_throughput(
            report, catalog, assumed_efficiency, compute_precisions(report.models.get(name), report.run.precision)
        )
        for name in names
    }


def model_targets(
    report: RunReport, card_name: str, card: Card, sources: Mapping[str, DeviceThroughput], assumed_efficiency: float
) -> dict[str, DeviceThroughput]:
    """Card ``card_name``'s throughput as each model's target (one per ``sources`` entry), at its precisions."""
    return {
        name: target_throughput(
            card_name,
            card,
            compute_precisions(report.models.get(name), report.run.precision),
            source,
            assumed_efficiency,
            report.run.fp32_matmul_precision,
        )
        for name, source in sources.items()
    }


def split_result(step_ms: float, result: ModelResult, source: DeviceThroughput) -> StepSplit:
    """:func:`split_step` of a model's measured step (ms) with its counts, on ``source``."""
    return split_step(
        step_ms,
        result.flops_per_step,
        source.attainable_tflops,
        result.launches_per_step,
        result.bytes_per_step,
        source.memory_bandwidth_gbps,
    )


def memory_traffic_ms(bytes_per_step: int, memory_bandwidth_gbps: float) -> float:
    """Time (ms) to move ``bytes_per_step`` bytes at ``memory_bandwidth_gbps`` GB/s (1 GB = 1e9 bytes)."""
    return bytes_per_step / (memory_bandwidth_gbps * 1e9) * 1e3


def split_step(
    step_ms: float,
    flops_per_step: float | None,
    attainable_tflops: float | None,
    launches_per_step: int | None = None,
    bytes_per_step: int | None = None,
    memory_bandwidth_gbps: float | None = None,
) -> StepSplit:
    """Split a measured step (ms): compute ``min(t, F / A)``, launches ``min(rest, L × LAUNCH_COST_MS)`` where L is
    known, then memory ``min(remaining, B / bw)`` and host the rest where the bytes and bandwidth are known (else
    memory is all that remains and ``host_ms`` None)."""
    if step_ms <= 0:
        raise ValueError(f"step_ms must be positive, got {step_ms!r}")
    if not flops_per_step or not attainable_tflops:
        achieved = flops_per_step / (step_ms * 1e-3) / 1e12 if flops_per_step else None
        compute_ms, achieved_fraction, bound = 0.0, None, BOUND_UNKNOWN
    else:
        achieved = flops_per_step / (step_ms * 1e-3) / 1e12
        compute_ms = min(step_ms, flops_per_step / (attainable_tflops * 1e12) * 1e3)
        achieved_fraction = achieved / attainable_tflops
        bound = BOUND_COMPUTE if compute_ms >= COMPUTE_BOUND_SHARE * step_ms else BOUND_OVERHEAD
    other_ms = step_ms - compute_ms
    launch_ms = memory_ms = host_ms = None
    if launches_per_step is not None:
        launch_ms = min(other_ms, launches_per_step * LAUNCH_COST_MS)
        memory_ms = other_ms - launch_ms
    if bytes_per_step is not None and memory_bandwidth_gbps:
        remaining_ms = other_ms - (launch_ms or 0.0)
        memory_ms = min(remaining_ms, memory_traffic_ms(bytes_per_step, memory_bandwidth_gbps))
        host_ms = remaining_ms - memory_ms
    return StepSplit(
        step_ms=step_ms,
        flops_per_step=flops_per_step,
        achieved_tflops=achieved,
        achieved_fraction=achieved_fraction,
        compute_ms=compute_ms,
        other_ms=other_ms,
        bound=bound,
        compute_share=compute_ms / step_ms,
        launches_per_step=launches_per_step,
        launch_ms=launch_ms,
        memory_ms=memory_ms,
        bytes_per_step=bytes_per_step,
        host_ms=host_ms,
    )


def projected_step_ms(
    split: StepSplit, source: DeviceThroughput, target: DeviceThroughput, *, memory_bound: bool = False
) -> float | None:
    """The step's time (ms) on ``target`` from a GPU measurement: ``t_c × A_src / A_tgt + t_l + t_m × bw_src / bw_tgt
    + t_h`` (counted traffic scales, launches and host work are kept); ``memory_bound`` takes the counted bytes at
    the card's bandwidth as the floor, ``max(point, B / bw_tgt + t_l)``. Without counted bytes the point keeps the
    whole rest ``t_o`` and ``memory_bound`` scales it by the bandwidth ratio. None when a needed figure is unknown."""
    compute_ms = 0.0
    if split.compute_ms:
        if not source.attainable_tflops or not target.attainable_tflops:
            return None
        compute_ms = split.compute_ms * source.attainable_tflops / target.attainable_tflops
    if split.host_ms is not None and split.memory_ms is not None and split.bytes_per_step is not None:
        if not source.memory_bandwidth_gbps or not target.memory_bandwidth_gbps:
            return None
        bandwidth_ratio = source.memory_bandwidth_gbps / target.memory_bandwidth_gbps
        launch_ms = split.launch_ms or 0.0
        point = compute_ms + launch_ms + split.memory_ms * bandwidth_ratio + split.host_ms
        if not memory_bound:
            return point
        return max(point, memory_traffic_ms(split.bytes_per_step, target.memory_bandwidth_gbps) + launch_ms)
    if not memory_bound:
        return compute_ms + split.other_ms
    if not source.memory_bandwidth_gbps or not target.memory_bandwidth_gbps:
        return None
    bandwidth_ratio = source.memory_bandwidth_gbps / target.memory_bandwidth_gbps
    if split.launch_ms is None or split.memory_ms is None:
        return compute_ms + split.other_ms * bandwidth_ratio
    return compute_ms + split.launch_ms + split.memory_ms * bandwidth_ratio


def counted_step_ms(
    flops_per_step: float, launches_per_step: int, target: DeviceThroughput, bytes_per_step: int | None = None
) -> float | None:
    """The step's time (ms) on ``target`` rebuilt from its counts: ``F / A_tgt + L × LAUNCH_COST_MS (+ B / bw_tgt)``;
    None where a needed figure of the target is unknown."""
    if not target.attainable_tflops:
        return None
    step_ms = flops_per_step / (target.attainable_tflops * 1e12) * 1e3 + launches_per_step * LAUNCH_COST_MS
    if bytes_per_step is None:
        return step_ms
    if not target.memory_bandwidth_gbps:
        return None
    return step_ms + memory_traffic_ms(bytes_per_step, target.memory_bandwidth_gbps)


@dataclass(frozen=True)
class StepProjection:
    """A step projected onto one card (ms): the point, the memory-bound alternative, the interval spanning both,
    ``refused`` why there is none, and ``host_ms`` the part kept from the measured host (None from the CPU)."""

    step_ms: float | None
    memory_bound_ms: float | None
    interval_ms: tuple[float, float] | None
    refused: str | None = None
    host_ms: float | None = None

    @property
    def host_share(self) -> float | None:
        """:attr:`host_ms` over the point: near 1, the machine's CPU decides, not the card."""
        if self.host_ms is None or not self.step_ms:
            return None
        return self.host_ms / self.step_ms

    @property
    def margin_fraction(self) -> float:
        """The interval's side above the point, relative to it (0 without a projection)."""
        if self.step_ms is None or self.interval_ms is None:
            return 0.0
        return self.interval_ms[1] / self.step_ms - 1.0

    @property
    def lower_margin_fraction(self) -> float:
        """The interval's side below the point, relative to it."""
        if self.step_ms is None or self.interval_ms is None:
            return 0.0
        return 1.0 - self.interval_ms[0] / self.step_ms


def interval_factors(*, from_gpu: bool, measured: bool) -> tuple[float, float]:
    """The projected part's range as multiples of its projection (below, above): ``(1 ∓ e)`` from a GPU,
    ``(1 / k, k)`` from the CPU, ``(1, 1)`` on the device measured."""
    if measured:
        return (1.0, 1.0)
    if from_gpu:
        return (1.0 - PROJECTION_RELATIVE_ERROR, 1.0 + PROJECTION_RELATIVE_ERROR)
    return (1.0 / CPU_REBUILD_FACTOR, CPU_REBUILD_FACTOR)


def part_interval_ms(
    low_ms: float,
    low_host_ms: float,
    high_ms: float,
    high_host_ms: float,
    card_error: float | None = None,
    host_spread: float | None = None,
) -> tuple[float, float]:
    """A projected step's interval (ms), part by part: ``((low − h_low)(1 − e) + h_low / r, (high − h_high)(1 + e)
    + h_high r)``, e ``card_error``, r ``host_spread`` (None: the calibrated figures)."""
    card_error = PROJECTION_RELATIVE_ERROR if card_error is None else card_error
    host_spread = HOST_RATIO_SPREAD if host_spread is None else host_spread
    return (
        max(0.0, low_ms - low_host_ms) * (1.0 - card_error) + low_host_ms / host_spread,
        max(0.0, high_ms - high_host_ms) * (1.0 + card_error) + high_host_ms * host_spread,
    )


def project_step(
    split: StepSplit, source: DeviceThroughput, target: DeviceThroughput, *, measured: bool
) -> StepProjection:
    """Project one model's measured step onto ``target``: from a GPU by :func:`projected_step_ms`, from the CPU by
    :func:`counted_step_ms`; ``measured``: the target is the device measured (no projection error)."""
    factors = interval_factors(from_gpu=source.on_gpu, measured=measured)
    if source.on_gpu:
        point = projected_step_ms(split, source, target)
        alternative = projected_step_ms(split, source, target, memory_bound=True)
        if measured and split.host_ms is not None:
            # The measured step is the card's time: a traffic floor above it only says the bytes overcount.
            alternative = point
        known = "attainable throughput" if split.host_ms is None else "attainable throughput and memory bandwidth"
        refused = None if point is not None else f"no {known} known for {source.name} or {target.name}"
    else:
        counts = {"FLOPs": split.flops_per_step, "kernel launches": split.launches_per_step}
        missing = [label for label, value in counts.items() if value is None]
        point = alternative = refused = None
        if missing:
            refused = (
                f"from the CPU a card's step is rebuilt from the step's counts, and its {' and '.join(missing)} "
                "could not be counted"
            )
        else:
            point = counted_step_ms(
                split.flops_per_step or 0.0, split.launches_per_step or 0, target, split.bytes_per_step
            )
            if point is None and not target.attainable_tflops:
                refused = f"no peak throughput for {target.name} at this precision"
            elif point is None:
                refused = f"no memory bandwidth for {target.name} to move the step's counted bytes at"
    if point is None:
        return StepProjection(None, None, None, refused)
    low = min(point, alternative) if alternative is not None else point
    high = max(point, alternative) if alternative is not None else point
    if not source.on_gpu:
        return StepProjection(point, alternative, (low * factors[0], high * factors[1]))
    # Kept as measured: launches and host work, or the whole rest where the bytes were not counted.
    host_ms = split.other_ms if split.host_ms is None else (split.launch_ms or 0.0) + split.host_ms
    if measured:
        return StepProjection(point, alternative, (low, high), host_ms=host_ms)
    # The memory-bound alternative, where it differs from the point, keeps only the launches.
    alternative_host_ms = host_ms if alternative in (None, point) else split.launch_ms or 0.0
    interval = part_interval_ms(
        low, host_ms if low == point else alternative_host_ms, high, host_ms if high == point else alternative_host_ms
    )
    return StepProjection(point, alternative, interval, host_ms=host_ms)


def project_estimate(
    estimate: TimeEstimate,
    projected_step_ms: float,
    margin_fraction: float,
    lower_margin_fraction: float = 0.0,
    *,
    from_counts: bool = False,
) -> TimeEstimate:
    """``estimate`` on a card where its step takes ``projected_step_ms``: per-epoch times, validation passes and
    one-off costs scaled by the step ratio (checkpoints kept: a copy and a write), ``margin_fraction`` of the epochs'
    time added above. ``from_counts`` (rebuilt from a CPU's counts): the measured spread and drift are not the
    card's, the projection's factor is the whole uncertainty. Below, the bounds multiply, ``E (1 − m)(1 − p)``, so
    the stored lower fraction is ``p (1 − m)``: added, they can reach zero."""
    ratio = projected_step_ms / estimate.step_ms
    recurring = estimate.recurring
    if recurring.eval_pass_seconds is not None:
        recurring = replace(recurring, eval_pass_seconds=recurring.eval_pass_seconds * ratio)
    one_off_s = estimate.one_off_seconds * ratio
    one_off_low_s = (estimate.one_off_seconds - estimate.one_off_spread_seconds[0]) * ratio
    one_off_high_s = (estimate.one_off_seconds + estimate.one_off_spread_seconds[1]) * ratio
    projected = replace(
        estimate,
        step_ms=projected_step_ms,
        mean_epoch_ms=estimate.mean_epoch_ms * ratio,
        halfwidth_ms=0.0 if from_counts else estimate.halfwidth_ms * ratio,
        drift_ms_per_epoch=0.0 if from_counts else estimate.drift_ms_per_epoch * ratio,
        drift_flags=() if from_counts else estimate.drift_flags,
        samples_per_second=None if estimate.samples_per_second is None else estimate.samples_per_second / ratio,
        projection_margin_fraction=margin_fraction,
        projection_lower_margin_fraction=0.0,
        recurring=recurring,
        one_off_seconds=one_off_s,
        one_off_spread_seconds=(
            one_off_s - one_off_low_s * (1.0 - lower_margin_fraction),
            one_off_high_s * (1.0 + margin_fraction) - one_off_s,
        ),
    )
    epochs_seconds = projected.epochs_seconds
    measured_fraction = min(1.0, projected.lower_margin_seconds / epochs_seconds) if epochs_seconds > 0 else 0.0
    return replace(projected, projection_lower_margin_fraction=lower_margin_fraction * (1.0 - measured_fraction))


def slower_cause(split: StepSplit, source: DeviceThroughput, target: DeviceThroughput, step_ms: float) -> str:
    """Why the step projected onto ``target`` (``step_ms``, ms) is slower than the one measured on ``source``, in
    words: from the CPU its largest rebuilt part (many small operations are launch-bound on any GPU)."""
    measured = f"the {split.step_ms:.3g} ms step measured on {source.name}"
    if not source.on_gpu and split.launches_per_step is not None:
        launch_ms = split.launches_per_step * LAUNCH_COST_MS
        compute_ms = (
            split.flops_per_step / (target.attainable_tflops * 1e12) * 1e3
            if split.flops_per_step and target.attainable_tflops
            else 0.0
        )
        traffic_ms = (
            memory_traffic_ms(split.bytes_per_step, target.memory_bandwidth_gbps)
            if split.bytes_per_step is not None and target.memory_bandwidth_gbps
            else 0.0
        )
        parts = {"kernel launches": launch_ms, "compute": compute_ms, "memory traffic": traffic_ms}
        largest = max(parts, key=lambda part: parts[part])
        if largest == "kernel launches":
            return (
                f"{split.launches_per_step} kernel launches at {LAUNCH_COST_MS * 1e3:.0f} µs of host time each "
                f"({launch_ms:.3g} ms of the {step_ms:.3g} ms projected step) outweigh {measured}: the step is "
                "launch-bound on a GPU; fewer, larger operations shorten it (a fused optimizer, fused=True; "
                "torch.compile; CUDA graphs)"
            )
        return f"its {largest} ({parts[largest]:.3g} ms of the {step_ms:.3g} ms projected step) outweighs {measured}"
    return (
        f"{target.name} attains {target.attainable_tflops or 0:.3g} TFLOP/s and "
        f"{target.memory_bandwidth_gbps or 0:.3g} GB/s against {source.name}'s "
        f"{source.attainable_tflops or 0:.3g} and {source.memory_bandwidth_gbps or 0:.3g}: a slower card than "
        f"the one measured ({step_ms:.3g} ms against {measured})"
    )


def projected_estimates(
    estimates: dict[str, TimeEstimate],
    splits: dict[str, StepSplit],
    sources: Mapping[str, DeviceThroughput],
    targets: Mapping[str, DeviceThroughput],
    *,
    measured: bool,
) -> tuple[dict[str, StepProjection], dict[str, TimeEstimate]]:
    """Each model's step projected from its ``sources`` entry onto its ``targets`` entry, and its estimate there."""
    steps = {name: project_step(splits[name], sources[name], targets[name], measured=measured) for name in estimates}
    projected = {
        name: project_estimate(
            estimate,
            steps[name].step_ms,
            steps[name].margin_fraction,
            steps[name].lower_margin_fraction,
            from_counts=not sources[name].on_gpu and not measured,
        )
        for name, estimate in estimates.items()
        if steps[name].step_ms is not None
    }
    return steps, projected


PROJECTION_METHOD = method_text(
    "projection",
    launch_cost_us=LAUNCH_COST_MS * 1000,
    CPU_REBUILD_FACTOR=CPU_REBUILD_FACTOR,
    PROJECTION_RELATIVE_ERROR=PROJECTION_RELATIVE_ERROR,
    HOST_RATIO_SPREAD=HOST_RATIO_SPREAD,
)
