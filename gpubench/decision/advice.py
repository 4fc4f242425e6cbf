"""The prose of the recommendation: how each figure is made (the method texts written into the report), the
reasoning sentence and the recommended actions. The numbers come from the other ``decision`` modules; here they
are only put into words (hours as minutes or hours, sizes in MB, money in USD).
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gpubench.decision.config import DecisionConfig
from gpubench.decision.cost import cheapest_card
from gpubench.decision.estimate import (
    CHECKPOINT_RUN_FRACTION,
    TimeEstimate,
    TotalTime,
    checkpoint_interval_hours,
)
from gpubench.decision.memory_budget import HEADROOM_MARGINAL, HEADROOM_RISK, TOTAL_ROW
from gpubench.decision.projection import (
    BOUND_COMPUTE,
    BOUND_OVERHEAD,
    CPU_REBUILD_FACTOR,
    LAUNCH_COST_MS,
    PROJECTION_RELATIVE_ERROR,
)
from gpubench.decision.rule import (
    CRITICAL_MODEL_CANNOT_RUN,
    DRIFT_OR_THROTTLING,
    ESTIMATE_IN_GRAY_BAND,
    INTERVAL_STRADDLES_THRESHOLD,
    LOWER_ABOVE_CLOUD,
    MIN_DECISION_EPOCHS,
    NOTHING_MEASURED,
    PARTIAL_MEASUREMENT,
    SETTLE_MAX_EPOCHS,
    TOO_FEW_EPOCHS,
    UPPER_BELOW_LOCAL,
    Verdict,
)
from gpubench.decision.scaling import (
    ASSUMED_SCALING_EFFICIENCY,
    ASSUMED_SCALING_INTERVAL,
    EFFICIENCY_FLOOR,
)
from gpubench.results import (
    CLOUD_GPU_RECOMMENDED,
    GRAY_ZONE,
    LOCAL_GPU_VIABLE,
    CardProjection,
    HardwareReport,
    MemoryBudgetRow,
    MissingModel,
    ModelResult,
    RunInfo,
    ScalingEfficiency,
    StepSplit,
    WhatIfEstimate,
    recommendation_method,
)
from gpubench.units import BYTES_PER_MB, HOURS_PER_DAY, MS_PER_S, SECONDS_PER_HOUR

# --------------------------------------------------------------------------------------------------- methods
# How each part of the recommendation is made, in words: written into the report's ``recommendation.method``
# (by :func:`method_texts`). Each text describes the arithmetic of one module: estimate (the first three),
# memory_budget, projection and cost.

ESTIMATE_METHOD = (
    "Plan: supervised models train decision.plan.passes[model] passes over trading_days x bars_per_day x symbols "
    "windows; RL models decision.plan.env_steps[model] environment steps. A model's planned epochs N = plan samples / "
    "(steps_per_epoch x samples_per_step), fractional. Estimate: N x mean epoch time + one-off costs, the one-off "
    "costs being the calibration (first step, with compilation, and the epoch-sizing probes) plus the warmup epochs, "
    "all counted as pure overhead (their samples are not credited: slightly conservative), plus the first-time cost "
    "at the timed batch (cuDNN autotuning, kernels compiled on first use: the batch search's first trial at that "
    "batch less the same steps at its fastest later trial's speed). That cost varies between processes, so it "
    "carries a range from the run's own observations: every build at the timed batch whose first steps were timed "
    "(each batch-search trial at it, the measured run's first step), less its steps at the measured step time; from "
    "the least a build paid (in the warmed process) to the most (the process's first build at that batch). The "
    "bounds take the one-off costs at the matching end of that range."
)

UPPER_BOUND_METHOD = (
    "Bounds: prediction bounds for the total of the N future epochs, not N x the interval's ends. With h the "
    "half-width of the decision interval of the mean over n measured epochs (overlapping batch means, "
    "gpubench.stats.intervals), se = h / q is the standard error of the mean (q its t quantile) and the long-run "
    "per-epoch variance is n x se^2 (= sigma^2 (1 + rho) / (1 - rho) for AR(1) epochs). The total of N future "
    "epochs minus N x mean then has variance N^2 se^2 (uncertainty of the mean) + N n se^2 (variability of the "
    "future epochs), so the measured margin is h x sqrt(N (N + n)), using the interval's own quantile: each bound "
    "is one-sided at (1 + level) / 2 (97.5% for a 95% interval). For N >> n it tends to N x h; for N comparable "
    "to n it is wider. A model whose measured epochs drift (the drift test) or include throttled epochs gets "
    "|mean of the last third of its epochs - mean of the first third| x N added to its margin: the drift's size "
    "carried to the whole plan, the simplest defensible choice (a shift as large as the one seen persisting for "
    "the whole training). The half-width h comes from the model's rounds: its epochs are measured in rounds, "
    "interleaved round-robin with the other models' rounds, and their spread is measured at two levels, within a "
    "round (autocorrelated epochs) and between rounds (the host's speed, which moves over seconds and minutes), "
    "each with its own degrees of freedom (gpubench.stats.rounds). A noisy host widens h by what it measured; a "
    "quiet host or a GPU-bound model keeps it tight. No constant floor. The bound assumes the host keeps, over the "
    "training, the mix of speeds it showed during the benchmark; python -m gpubench.validate checks that against "
    "real trainings. Upper = estimate + margin; lower = estimate - margin, never below the one-off costs. "
    "Several models are trained one after another and were measured one after another on one device, so their "
    "errors can share a cause (the card's clocks, the host's load): their margins add, the conservative "
    "combination (quadrature would assume independent errors), each model's lower bound cut at its one-off costs "
    "first."
)

DECISION_METHOD = (
    "Decision on the total of the models in decision.critical_models (every model run when that list is empty). "
    "CLOUD_GPU_RECOMMENDED when a critical model cannot run on the local card (status oom: not even "
    "batch.min_size fits, or the step ran out of memory; decision_basis critical_model_cannot_run), or when the "
    "lower bound is over decision.cloud_min_hours (lower_above_cloud); both also from a subset of the critical "
    "models, since times add and a subset bounds the total from below. LOCAL_GPU_VIABLE when the upper bound is "
    "under decision.local_max_hours (upper_below_local). Otherwise GRAY_ZONE: estimate_in_gray_band when the "
    "estimate lies between the thresholds (both included), interval_straddles_threshold when the estimate is on "
    "one side of a threshold and its bound on the other, with epochs_to_settle: per critical model max(n, K), K "
    "the smallest common epoch count (the epochs setting) at which the bound would be on the estimate's side, "
    "the long-run variance and the quantile held as measured (h scaled by sqrt(n / K)) in the same margin "
    f"formula; None where not even {SETTLE_MAX_EPOCHS:,} epochs would (a drift's part and the future "
    "epochs' own variability do not shrink). LOCAL_GPU_VIABLE and GRAY_ZONE only when every critical model was "
    f"measured (status ok, with a plan) over at least {MIN_DECISION_EPOCHS} epochs; otherwise no decision (None): "
    "partial_measurement when a critical model was not run, failed, diverged or stopped, too_few_epochs when one "
    "had fewer epochs (such a model is left out of the bound the rule reads). The bounds include the margin added "
    "for a drift or throttled epochs; where the decision without it would differ, decision_basis is "
    "drift_or_throttling. nothing_measured: no model has an estimate. The figures (estimate, bounds, projection, "
    "cost) cover decided_on: the critical models with an estimate, else every model with one. A run on the CPU "
    "(hardware.measured_on not cuda) decides about the CPU: its reasoning starts by saying so."
)

MEMORY_METHOD = (
    "Per model: the measured peak reserved VRAM (torch caching allocator) against decision.memory_budget_mb[model] "
    "and against the card (usable VRAM under a cap, else total VRAM). Status by fraction of the card: safe < 85%, "
    "marginal 85-93%, risk > 93%; 'not measured' on the CPU. The total row sums the peaks: what the card would need "
    "to hold the models at once (they are benchmarked, and can be trained, one after another)."
)

PROJECTION_METHOD = (
    "A step of t ms on the measured (source) device does F FLOPs: torch's flop counter over one training step, "
    "forward and backward of matmuls, convolutions and attention (elementwise work and the optimizer are not "
    "counted), L kernel launches: the tensor operations it dispatches that launch a kernel in eager mode "
    "(counted on an eager twin of a compiled workload, so L overstates a compiled step's launches), and B bytes: "
    "the tensor inputs and outputs of those L operations, each storage once per operation and a view at its viewed "
    "size (every kernel reading its inputs from and writing its outputs to DRAM, no reuse in caches: an upper "
    "bound on the step's memory traffic). A device's "
    "attainable matmul throughput is A = eta x peak, peak being the catalog's fp32 TFLOP/s for fp32 runs (its tf32 "
    "tensor-core figure under execution.matmul_precision high or medium, on cards with tf32) and its bf16 (T4: fp16) "
    "tensor-core figure for bf16/fp16 runs. On a catalog card eta is measured: the burn-in's achieved matmul "
    "TFLOP/s (at the job's matmul precision) over the card's peak, and the targets use the same eta (same kernels, "
    "same software). A GPU not in the catalog has no peak: its A is the burn-in's achieved TFLOP/s itself, and the "
    "targets' eta is decision.assumed_matmul_efficiency. From a GPU, the step splits into compute "
    "t_c = min(t, F / A_src), launches t_l = min(t - t_c, L x c) with c = "
    f"{LAUNCH_COST_MS * 1000:g} us per launch (measured on the H200 as eager steps less their CUDA-graph replays "
    "per launching operation: 11.8 us for Mamba-2 to 35.0 us for DQN, the median of four models), memory t_m = "
    "min(t - t_c - t_l, B / bw_src) (bw the catalog's memory bandwidth, GB/s) and host t_h = t - t_c - t_l - "
    "t_m (Python, dispatch and other host work outside the launches). A step with t_c >= 0.5 t is compute-bound, "
    "otherwise overhead-bound; without a FLOP count the whole step is taken as "
    "overhead. On a target card t' = t_c x A_src / A_tgt + t_l + t_m x bw_src / bw_tgt + t_h: the counted traffic "
    "scales with memory bandwidth, launch and host costs are kept (a small network's Adam step is launch-bound even "
    "on an H200), so a compute-bound step scales by the peak ratio and a launch-bound one keeps its time. The "
    "*_if_memory_bound figures take the counted traffic as the step's floor on the card: max(t', B / bw_tgt + "
    "t_l). A step whose bytes were not counted (reports written before they were, or a source of unknown "
    "bandwidth) keeps its rest t_m = t - t_c - t_l (memory and host together) in t' as measured, and its "
    "*_if_memory_bound figures use t_c x A_src / A_tgt + t_l + t_m x bw_src / bw_tgt (when both bandwidths are "
    "known). From the CPU, whose time says nothing of a GPU's, a card's step is rebuilt from the counts: t' = F / "
    "A_tgt + L x c + B / bw_tgt (the B term where the bytes were counted), refused (with the reason) where F or L "
    "could not be counted; host work that is no tensor operation is not in it, and its interval is the rebuild "
    f"/ {CPU_REBUILD_FACTOR:g} to x {CPU_REBUILD_FACTOR:g} (checked on the H200 against four models' fp32 eager "
    "steps: they were 0.52 to 1.93 times the rebuild from a CPU's counts). The counts are an iteration's "
    "average (PPO: a rollout and its minibatch updates) after one uncounted step, and the CPU counts up to 26% more "
    "launches than a GPU where CUDA fuses a layer (Mamba-2's RMSNorm), the same where it does not (DQN, PPO). "
    "Every step projected from a GPU is an interval: from the smaller of the two projections / (1 + e) to the "
    "larger / (1 - e), the measured steps a projection with relative error at most e = "
    f"{PROJECTION_RELATIVE_ERROR:.0%} can have come from. The published "
    "errors (NeuSight, ASPLOS 2025: 2.3% headline and about 10% mean over its 41 training configurations for a "
    "learned predictor; Habitat, USENIX ATC 2021: 11.8%; peak-spec estimates about 32% too fast) are below it; "
    "checked on the H200, fp32 projected to tf32 and bf16 ran up to 42.2% too fast (Mamba-2's small matmuls did "
    "not speed up with the peak), mean 17.9% over 8 cases, and e is that worst case rounded up. The training's "
    "bounds on a projected card add the interval's sides, relative to the point, to the measured margin above and "
    "below. The measured device's own row carries no projection error. "
    "With hardware=<card> on a bigger GPU the answer is about that card: its memory measured under the card's "
    "VRAM cap, its time the projection of the measured step onto it, the measured device's own time reported "
    "beside it (measured_device_hours). The batch size is the one measured: a card with less memory may need a "
    "smaller one (see fits_in_vram)."
)

COST_METHOD = (
    "Per training (the plan of the models decided on): local energy kWh = sum over models of joules per sample "
    "(NVML energy counter over the measured epochs) x plan samples / 3.6e6, or, where the counter is missing on a "
    "catalog card, its board power x the estimated hours (an upper bound); local cost = kWh x "
    "decision.electricity_usd_per_kwh. Cloud cost = projected hours on decision.cloud_card x its hourly price "
    "(catalog, or decision.cloud_hourly_price_usd). Monthly: x decision.trainings_per_month, plus on the local side "
    "decision.local_hardware_cost_usd / decision.amortisation_months. annual_savings_usd = 12 x (cloud monthly - "
    "local monthly): positive when training locally is cheaper. cloud_speedup_factor = local hours / projected "
    "cloud hours. Break-even: local is cheaper from amortisation / (cloud cost - local cost per training) "
    "trainings a month on (none when a cloud training costs no more than the local energy); in local GPU hours a "
    "month, that times the local hours per training. Point estimates of time are used, not the upper bounds. "
    "The cloud side rents decision.cloud_gpus cards: its cost is cards x hourly price x their projected hours "
    "(see scaling), for every catalog card; cheapest_card is the card whose cards cost least per training among "
    "those the models fit on. The local side is always the one card measured."
)

SCALING_METHOD = (
    "Cloud time on N = decision.cloud_gpus cards training data-parallel (DistributedDataParallel: each card its "
    "own batch, for RL its own environments, gradients all-reduced every step): per model, the planned epochs' "
    "one-card time E / (N x e(N)) plus the fixed costs F as on one card (every rank pays its calibration and warmup "
    "at once; rank 0 saves the checkpoints); the models' times add. e(N) is the scaling efficiency, the global "
    "throughput of N processes over N x one process's. Measured: a model run with distributed.nproc = N (status "
    "ok) gives e(N) and its interval (the point alone where the run had too few epochs for one), measured over "
    "this machine's interconnect and backend (named in the source: gloo processes on a CPU say little of NCCL "
    "between GPUs, a cloud host's links may differ from this one's). Measured at another m: e(N) = e(m)^(log2 N "
    "/ log2 m), the same loss per doubling of cards, at most 1. That is an assumption: how the all-reduce's cost "
    "per step grows with N depends on the message size, the algorithm and the links (a bandwidth-bound ring "
    "all-reduce's barely grows past a few cards, a latency-bound one's grows with N, and across hosts the network "
    "is slower), so the interval spans the two ends, efficiency never rising with the card count: for N > m from "
    "the measured lower end with the communication's cost growing linearly with N, 1 / (1 + (1 / e_lo(m) - 1)(N - "
    "1) / (m - 1)), to the measured upper end (no further loss past m); for N < m from the measured lower end to "
    "1. Nothing "
    f"measured (distributed.nproc = 1, or the run failed): e = {ASSUMED_SCALING_EFFICIENCY:g}, assumed, with the "
    f"wide interval {ASSUMED_SCALING_INTERVAL[0]:g}-{ASSUMED_SCALING_INTERVAL[1]:g}. Sources: Horovod's benchmark "
    "(horovod/horovod docs/benchmarks.rst; Sergeev and Del Balso, 2018) on 128 servers of 4 Pascal GPUs over 25 "
    "Gbit/s RoCE reports '90% scaling efficiency for both Inception V3 and ResNet-101, and 68% scaling efficiency "
    "for VGG-16'; Li et al., 'PyTorch Distributed: Experiences on Accelerating Data Parallel Training', VLDB 2020, "
    "report that DDP 'attains near-linear scalability using 256 GPUs'. The interval's lower end is below VGG-16's "
    "0.68 because these models are small and often launch-bound, where the all-reduce's fixed latency is a larger "
    "share of a step; its upper end is linear scaling. Bounds: upper F + (E + M) / (N x e_lo), lower F + max(0, E "
    f"- M) / (N x e_hi), M the one-card margin (a lower end under {EFFICIENCY_FLOOR:g} is held there). N = 1 is "
    "the one-card projection unchanged. Each card's step stays one card's: memory per card is unchanged (every "
    "card holds the whole model and its own batch)."
)


def method_texts(projection_source: str) -> dict[str, str]:
    """The recommendation's ``method``: every method text, and ``projection_source``, the sentence on where the
    measured device's throughput comes from."""
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


# --------------------------------------------------------------------------------------------------- reasoning


@dataclass(frozen=True)
class Outcome:
    """The decision and the figures it rests on: the rule's ``verdict``, the estimates of the models ``decided``
    on (the figures' models), their ``total`` (None when none has an estimate) and the level of the interval its
    bounds come from, the critical models ``missing`` an estimate, the measured device and whether it is the CPU."""

    verdict: Verdict
    decided: list[TimeEstimate]
    total: TotalTime | None
    level: float | None
    missing: list[MissingModel]
    device: str
    on_cpu: bool
    measured_device: str | None = None
    measured_total: TotalTime | None = None
    splits: dict[str, StepSplit] | None = None
    projection_error: float | None = None
    vram_limit_mb: float | None = None

    @property
    def emulated(self) -> bool:
        """Whether the answer is about an emulated card (``device``), projected from ``measured_device``."""
        return self.measured_total is not None

    @property
    def bound_level(self) -> float | None:
        """The one-sided level of each bound: (1 + level) / 2."""
        return None if self.level is None else (1 + self.level) / 2


def _hours_text(hours: float) -> str:
    return f"{hours * 60:.1f} min" if hours < 1 else f"{hours:.1f} h"


def _missing_text(missing: tuple[MissingModel, ...] | list[MissingModel]) -> str:
    return ", ".join(f"{m.model} ({m.reason})" for m in missing)


def _held_back_text(verdict: Verdict) -> str:
    """The critical models the decision lacks: not measured, or measured over too few epochs."""
    parts = []
    if verdict.missing:
        parts.append(f"critical {_missing_text(verdict.missing)} not measured")
    if verdict.too_few:
        (first, first_epochs), *others = verdict.too_few.items()
        counts = "".join(f", {name} {epochs}" for name, epochs in others)
        parts.append(
            f"{first} had {first_epochs} measured epoch{'s' if first_epochs != 1 else ''}{counts}, fewer than the "
            f"{MIN_DECISION_EPOCHS} a decision needs"
        )
    return "; ".join(parts)


def _lower_bound_clause(verdict: Verdict, decision: DecisionConfig) -> str:
    """Why the measured part does not prove CLOUD: its lower bound, where there is one."""
    if verdict.total is None:
        return "."
    return (
        f"; the lower bound of {' + '.join(verdict.bound_models)}, {_hours_text(verdict.total.lower_hours)}, is "
        f"not over the {decision.cloud_min_hours:g} h cloud threshold."
    )


def _settle_text(verdict: Verdict) -> str:
    counts = verdict.epochs_to_settle or {}
    known = {name: epochs for name, epochs in counts.items() if epochs is not None}
    if not known:
        return (
            f" No practical number of epochs (up to {SETTLE_MAX_EPOCHS:,}) settles it: a drift's part and the "
            "future epochs' own variability do not shrink with more epochs."
        )
    most = max(known.values())
    if len(set(known.values())) == 1:
        return f" Measuring {most} epochs per critical model (epochs={most}) would settle it, if the variance holds."
    listed = ", ".join(f"{name} {epochs}" for name, epochs in known.items())
    return f" Measuring {listed} epochs (epochs={most}) would settle it, if the variance holds."


def _widened(outcome: Outcome) -> list[TimeEstimate]:
    """The estimates whose margin the rule widened for a drift or throttled epochs."""
    return [e for e in outcome.decided if e.model in outcome.verdict.widened]


def _drift_hours_text(estimate: TimeEstimate) -> str:
    return _hours_text(estimate.drift_margin_seconds / SECONDS_PER_HOUR)


def _drift_text(outcome: Outcome) -> str:
    """The flagged models, how much their margin grew, and what the decision would be without it."""
    verdict = outcome.verdict
    flagged = "; ".join(
        f"{e.model}: {', '.join(e.drift_flags)}, its margin widened by {_drift_hours_text(e)}"
        for e in _widened(outcome)
    )
    without = verdict.plain_decision or "no decision"
    with_it = verdict.decision or "no decision"
    return (
        f"{flagged} (the shift between the first and the last third of its epochs, carried to the whole plan). "
        f"Without that widening the answer would be {without}; with it, {with_it}."
    )


def _verdict_text(outcome: Outcome, decision: DecisionConfig) -> str:
    """The sentence that gives the decision (or withholds it) and the rule behind it."""
    verdict, total = outcome.verdict, outcome.verdict.total
    local, cloud = decision.local_max_hours, decision.cloud_min_hours
    basis = verdict.basis
    if basis == NOTHING_MEASURED:
        return no_estimate_reasoning(outcome.missing)
    if basis == CRITICAL_MODEL_CANNOT_RUN:
        return f"Critical {_missing_text(verdict.cannot_run)} cannot run on the local card: {CLOUD_GPU_RECOMMENDED}."
    if basis == DRIFT_OR_THROTTLING:
        return _drift_text(outcome)
    if basis == UPPER_BELOW_LOCAL:
        return f"The upper bound is under the {local:g} h local limit: {LOCAL_GPU_VIABLE}."
    if basis == LOWER_ABOVE_CLOUD:
        if not verdict.missing and not verdict.too_few:
            return f"The lower bound is over the {cloud:g} h cloud threshold: {CLOUD_GPU_RECOMMENDED}."
        assert total is not None  # CLOUD from a subset rests on its lower bound
        return (
            f"Not every critical model is measured ({_held_back_text(verdict)}), but times add and the lower bound "
            f"of {' + '.join(verdict.bound_models)} alone, {_hours_text(total.lower_hours)}, is over the "
            f"{cloud:g} h cloud threshold: {CLOUD_GPU_RECOMMENDED}."
        )
    if basis == ESTIMATE_IN_GRAY_BAND:
        return f"The estimate lies between {local:g} h and {cloud:g} h: {GRAY_ZONE}."
    if basis == INTERVAL_STRADDLES_THRESHOLD:
        assert total is not None  # a complete measurement
        side = (
            f"under the {local:g} h local limit but its upper bound is not"
            if total.hours < local
            else f"over the {cloud:g} h cloud threshold but its lower bound is not"
        )
        return f"The estimate is {side}: {GRAY_ZONE}, uncertain." + _settle_text(verdict)
    if basis == PARTIAL_MEASUREMENT:
        return (
            f"No decision: {_held_back_text(verdict)}. A subset of the critical models only bounds the total from "
            "below, so it can show CLOUD_GPU_RECOMMENDED but not the rest" + _lower_bound_clause(verdict, decision)
        )
    assert basis == TOO_FEW_EPOCHS
    return f"No decision: {_held_back_text(verdict)}" + _lower_bound_clause(verdict, decision)


def scaling_text(scalings: Mapping[str, ScalingEfficiency], models: list[str]) -> str:
    """The scaling efficiency of ``models`` and where it comes from, one clause for the models that share both."""
    groups: dict[tuple[str, str], list[str]] = {}
    for name in models:
        scaling = scalings[name]
        groups.setdefault((f"{scaling.scaling_efficiency:.2f}", scaling.scaling_source), []).append(name)
    if len(groups) == 1:
        ((efficiency, source),) = groups
        return f"scaling efficiency {efficiency}, {source}"
    return "scaling efficiency " + "; ".join(
        f"{' + '.join(names)} {efficiency}, {source}" for (efficiency, source), names in groups.items()
    )


def cards_text(row: CardProjection) -> str:
    """A projection row's card, with its count when it rents more than one: ``h100``, ``8 × h100``."""
    return row.card if row.card_count == 1 else f"{row.card_count} × {row.card}"


def _projection_uncertainty_text(row: CardProjection) -> str:
    """What widened a projected row's bounds: the projection's error from a GPU, the rebuild's factor from the CPU
    (a row with no relative error)."""
    if row.projection_relative_error is None:
        return f"the CPU rebuild's factor of {CPU_REBUILD_FACTOR:g} either way"
    return f"the projection's {PROJECTION_RELATIVE_ERROR:.0%} error"


def _cloud_text(outcome: Outcome, cloud_row: CardProjection, scalings: Mapping[str, ScalingEfficiency] | None) -> str:
    """The cloud row's projected training: hours, bounds, cost, and on several cards their scaling efficiency."""
    assert cloud_row.training_hours is not None
    price = cloud_row.cost_usd_per_training
    several = cloud_row.card_count > 1
    widened = _projection_uncertainty_text(cloud_row)
    if several:
        widened = (f"{widened} and " if not cloud_row.measured_device else "") + "the scaling efficiency's interval"
    interval = ""
    if (several or not cloud_row.measured_device) and cloud_row.training_hours_lower is not None:
        interval = (
            f", {_hours_text(cloud_row.training_hours_lower)} to {_hours_text(cloud_row.training_hours_upper)} "
            f"with {widened}"
        )
    cards = cards_text(cloud_row)
    if several and scalings:
        cards += f" ({scaling_text(scalings, [e.model for e in outcome.decided])})"
    cost = ""
    if price is not None:
        per_card = f": {cloud_row.card_count} × ${cloud_row.hourly_price_usd:,.2f}/h" if several else ""
        cost = f" (${price:,.2f}{per_card})"
    single = ""
    if several and cloud_row.single_card_training_hours is not None:
        single = f" On one {cloud_row.card}: {_hours_text(cloud_row.single_card_training_hours)}."
    if several:
        single += (
            f" The decision is about the one local card: decision.cloud_gpus={cloud_row.card_count} changes only the "
            "cloud figures."
        )
    slower = "".join(
        f" {name} is projected slower there than where it was measured: {model.slower_cause}."
        for name, model in cloud_row.models.items()
        if model.slower_cause and name in {estimate.model for estimate in outcome.decided}
    )
    return f"Projected on {cards}: {_hours_text(cloud_row.training_hours)}{interval}{cost}.{single}{slower}"


def reasoning(
    outcome: Outcome,
    cloud_row: CardProjection | None,
    decision: DecisionConfig,
    scalings: Mapping[str, ScalingEfficiency] | None = None,
) -> str:
    """A few sentences with the numbers behind the decision, or behind there being none. A CPU run's starts by
    saying that its times are CPU times; an emulated card's says what was measured on which device and what was
    projected. The cloud row's sentence covers its ``gpus`` cards with each decided model's scaling efficiency
    from ``scalings``; the decision itself is about the one local card."""
    parts = []
    if outcome.emulated:
        parts.append(_emulation_text(outcome))
    if outcome.on_cpu:
        parts.append(
            f"These are CPU times, measured on the CPU ({outcome.device}) without a GPU: every figure here is about "
            "training on this CPU, not on a GPU."
        )
    total = outcome.total
    if total is not None and outcome.bound_level is not None:
        names = " + ".join(e.model for e in outcome.decided)
        lead = "Training" if outcome.on_cpu else f"On {outcome.device}, training"
        parts.append(
            f"{lead} {names} to plan takes an estimated {_hours_text(total.hours)} "
            f"({total.hours / HOURS_PER_DAY:.2f} days); its {outcome.bound_level:.1%} bounds are "
            f"{_hours_text(total.lower_hours)} and {_hours_text(total.upper_hours)}."
        )
    parts.append(_verdict_text(outcome, decision))
    if outcome.verdict.widened and outcome.verdict.basis != DRIFT_OR_THROTTLING:
        parts.append(
            "The bounds include "
            + "; ".join(f"{_drift_hours_text(e)} for {e.model}'s {', '.join(e.drift_flags)}" for e in _widened(outcome))
            + "."
        )
    if outcome.emulated and outcome.measured_total is not None:
        measured = outcome.measured_total
        parts.append(
            f"Measured on {outcome.measured_device} itself the same training takes {_hours_text(measured.hours)} "
            f"(bounds {_hours_text(measured.lower_hours)} to {_hours_text(measured.upper_hours)})."
        )
    if total is not None and cloud_row and cloud_row.training_hours is not None:
        parts.append(_cloud_text(outcome, cloud_row, scalings))
    return " ".join(parts)


def host_text(models: Mapping[str, ModelResult], decided_on: Sequence[str]) -> str | None:
    """One sentence when the host was noisy, else None: noisy when the round means of a decided model differ by
    more than their epochs explain (the rounds' F test of no host level, at the model's own interval level), with
    the host probe's spread over every round of the job and, where it is known, how much of that model's spread
    between rounds the probe accounts for."""
    noisy = []
    for name in decided_on:
        section = models.get(name)
        stats = None if section is None else section.statistics
        if stats is not None and stats.rounds is not None and stats.rounds.between_p_value < 1 - stats.confidence_level:
            noisy.append((name, stats.rounds.between_share, section.host_probe_explained_share))
    if not noisy:
        return None
    probes = [r.host_probe.python_loop_ms for m in models.values() for r in m.rounds if r.host_probe is not None]
    probe = f" (a fixed Python loop took {min(probes):.1f} to {max(probes):.1f} ms across the rounds)" if probes else ""
    shares = "; ".join(
        f"{name}: {share:.0%} of its bound's variance from between rounds"
        + (f", {explained:.0%} of that spread tracking the probe" if explained is not None else "")
        for name, share, explained in noisy
    )
    return f"The host's speed moved during the run{probe}, and its bounds carry it ({shares})."


def _traffic_mb_text(bytes_per_step: int) -> str:
    """A step's counted traffic in MB: three significant figures, whole MB with thousands separators from 1,000."""
    traffic_mb = bytes_per_step / BYTES_PER_MB
    return f"{traffic_mb:,.0f}" if traffic_mb >= 1000 else f"{traffic_mb:.3g}"


def _emulation_text(outcome: Outcome) -> str:
    """Which parts of an emulated card's answer were measured, on which device, and which were projected."""
    cap = f" under its {outcome.vram_limit_mb:,.0f} MB cap" if outcome.vram_limit_mb else " under its VRAM cap"
    splits = outcome.splits or {}
    parts = []
    for name, split in splits.items():
        launch = f", {split.launch_ms:.3g} ms launches" if split.launch_ms is not None else ""
        if split.host_ms is not None and split.bytes_per_step is not None:
            rest = (
                f"{split.memory_ms or 0.0:.3g} ms memory ({_traffic_mb_text(split.bytes_per_step)} MB counted), "
                f"{split.host_ms:.3g} ms host"
            )
        else:
            rest = f"{(split.memory_ms if split.memory_ms is not None else split.other_ms) or 0.0:.3g} ms other"
        parts.append(f"{name} {split.step_ms:.3g} ms = {split.compute_ms or 0.0:.3g} ms compute{launch}, {rest}")
    detail = f" (measured steps: {'; '.join(parts)})" if parts else ""
    error = outcome.projection_error or 0.0
    if any(split.host_ms is not None for split in splits.values()):
        scaled = (
            "the compute part scaled by the attainable-throughput ratio, the counted memory traffic by the bandwidth "
            "ratio, the launch and host parts kept (the memory-bound alternative, the counted traffic at the card's "
            f"bandwidth as the step's floor, and a {error:.0%} projection error, the measured step between the "
            f"projection / {1 + error:.2f} and / {1 - error:.2f}, are in the bounds)"
        )
    else:
        scaled = (
            "the compute part scaled by the attainable-throughput ratio and the launch and other parts kept (the "
            f"memory-bound alternative and a {error:.0%} projection error, the measured step between the projection "
            f"/ {1 + error:.2f} and / {1 - error:.2f}, are in the bounds)"
        )
    return (
        f"This answer is about {outcome.device}, emulated on {outcome.measured_device}: memory and batch sizes were "
        f"measured on {outcome.measured_device}{cap}; times are projected from the steps measured there{detail}, "
        f"{scaled}."
    )


def no_estimate_reasoning(missing: list[MissingModel]) -> str:
    """Why there is no decision: no model was measured successfully."""
    return "No model was measured successfully, so there is nothing to extrapolate" + (
        f": {_missing_text(missing)}." if missing else "."
    )


#: The one action when no model was measured successfully.
NO_ESTIMATE_ACTIONS: tuple[str, ...] = (
    "Fix the failures (each model's error is in its report section) and run the benchmark again.",
)


# --------------------------------------------------------------------------------------------------- actions


def _batch_actions(models: dict[str, ModelResult]) -> list[str]:
    actions = []
    for name, result in models.items():
        search = result.batch_search
        if search is None or search.batch_size is None:
            continue
        limit = f" under {search.peak_limit_mb:,.0f} MB" if search.peak_limit_mb else ""
        knee = f"; throughput reaches 90% of its best at {search.knee_size}" if search.knee_size else ""
        actions.append(
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
        actions.append(
            f"No batch-size search ran for {', '.join(configured)} (CPU, or batch.search=false): the batch sizes are "
            f"the configured ones ({sizes}); on the GPU the search finds the largest that fits."
        )
    return actions


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
    hours = f"training {_hours_text(row.hours)}"
    if row.hours_lower is not None and row.hours_upper is not None:
        hours += f" ({_hours_text(row.hours_lower)} to {_hours_text(row.hours_upper)})"
    if row.main_hours is not None:
        hours += f" vs {_hours_text(row.main_hours)}"
    memory = ""
    if row.peak_reserved_mb is not None and row.main_peak_reserved_mb is not None:
        memory = f", peak {row.peak_reserved_mb:,.0f} MB vs {row.main_peak_reserved_mb:,.0f} MB"
    command = WHAT_IF_COMMANDS.get(row.variant)
    return f"{row.description}: step {row.step_ms:.3g} ms{versus}, {hours}{memory}" + (
        f" (python -m gpubench {command})" if command else ""
    )


def _what_if_actions(what_ifs: list[WhatIfEstimate], models: list[str]) -> list[str]:
    """Per model, its measured what-ifs, fastest first, quoting the measured figures (never a guessed speed-up);
    those that could not be estimated with their reason."""
    actions = []
    for name in models:
        rows = [row for row in what_ifs if row.model == name]
        measured = sorted((row for row in rows if row.hours is not None), key=lambda row: row.hours or 0.0)
        if measured:
            actions.append(f"{name}, measured alternatives: " + "; ".join(_what_if_text(row) for row in measured) + ".")
        failed = [row for row in rows if row.hours is None]
        if failed:
            actions.append(
                f"{name}: what-if(s) without an estimate: "
                + "; ".join(f"{row.description} ({row.status}: {row.reason})" for row in failed)
                + "."
            )
    return actions


def _execution_actions(
    hardware: HardwareReport,
    run: RunInfo,
    splits: dict[str, StepSplit],
    what_ifs: list[WhatIfEstimate],
) -> list[str]:
    """Precision and compilation: the measured what-ifs where there are; on a GPU without them, which alternatives
    the step's classification suggests measuring, and how (no speed-up is guessed)."""
    measured_models = {row.model for row in what_ifs}
    others = [name for name in dict.fromkeys(row.model for row in what_ifs) if name not in splits]
    actions = _what_if_actions(what_ifs, [*splits, *others])
    if not hardware.on_gpu:
        return actions
    unmeasured = {name: split for name, split in splits.items() if name not in measured_models}
    compute_bound = [name for name, split in unmeasured.items() if split.bound == BOUND_COMPUTE]
    overhead_bound = [name for name, split in unmeasured.items() if split.bound == BOUND_OVERHEAD]
    if compute_bound and run.precision == "fp32":
        actions.append(
            f"{', '.join(compute_bound)}: compute-bound in fp32; measure bf16 autocast and tf32 matmuls "
            "(decision.what_if=true measures them briefly after the main measurement, or python -m gpubench "
            "execution.precision=bf16 / execution.matmul_precision=high)."
        )
    if overhead_bound and run.compile == "false":
        actions.append(
            f"{', '.join(overhead_bound)}: the step is dominated by kernel launches and host work, not arithmetic; "
            "measure execution.compile=reduce-overhead (CUDA graphs replay the step without per-kernel launch cost; "
            "decision.what_if=true measures it briefly)."
        )
    if run.precision != "fp32" or run.compile != "false" or run.fp32_matmul_precision != "highest":
        actions.append(
            f"Measured with precision {run.precision}, compile {run.compile} and matmul precision "
            f"{run.fp32_matmul_precision}: its gain is the ratio to a run with the defaults "
            "(python -m gpubench.compare A B)."
        )
    return actions


def _thermal_actions(models: dict[str, ModelResult]) -> list[str]:
    actions = []
    for name, result in models.items():
        measured = result.measured_device_epochs
        throttled = [epoch for epoch in measured if epoch.throttled]
        if throttled:
            causes = sorted({epoch.throttle_cause for epoch in throttled if epoch.throttle_cause})
            actions.append(
                f"{name}: {len(throttled)} of {len(measured)} measured epochs were throttled"
                f"{' (' + ', '.join(causes) + ')' if causes else ''}; the estimate includes the slowdown. For a "
                "multi-hour run improve cooling (airflow, a cooling pad on a laptop) or cap the power limit "
                "(nvidia-smi -pl) to hold a steady clock."
            )
    return actions


def _memory_actions(rows: list[MemoryBudgetRow]) -> list[str]:
    actions = []
    for row in rows:
        if row.model == TOTAL_ROW:
            if row.status in (HEADROOM_MARGINAL, HEADROOM_RISK):
                actions.append(
                    f"The models' peaks sum to {row.peak_reserved_mb:,.0f} MB ({row.fraction_of_card:.0%} of "
                    f"the card): train them one after another, not at once."
                )
            continue
        if row.status in (HEADROOM_MARGINAL, HEADROOM_RISK):
            actions.append(
                f"{row.model}: peak {row.peak_reserved_mb:,.0f} MB is {row.fraction_of_card:.0%} of the "
                f"{row.card_mb:,.0f} MB card ({row.status}): fragmentation or a longer sequence can run out of "
                "memory mid-run; lower the batch (raise gradient accumulation) or use bf16 to keep below 85%."
            )
        if row.within_budget is False:
            actions.append(
                f"{row.model}: peak {row.peak_reserved_mb:,.0f} MB exceeds its budget {row.budget_mb:,.0f} "
                f"MB (decision.memory_budget_mb.{row.model})."
            )
    return actions


def _headroom_actions(models: dict[str, ModelResult]) -> list[str]:
    """Models whose measured peak passed ``batch.headroom`` × usable VRAM although their batch search fitted."""
    actions = []
    for name, result in models.items():
        memory = result.memory
        if memory is not None and memory.headroom_exceeded:
            actions.append(
                f"{name}: during the measured epochs the peak reserved memory reached "
                f"{memory.peak_reserved_mb:,.0f} MB, above the {memory.headroom_limit_mb:,.0f} MB headroom limit "
                f"its batch search respected (batch {result.batch_size}): allocator fragmentation grows over a "
                "long run, so train with a smaller batch (more gradient accumulation) on the target card."
            )
    return actions


def _precision_actions(estimates: list[TimeEstimate], models: dict[str, ModelResult]) -> list[str]:
    actions = []
    for estimate in estimates:
        # A model with an estimate has its statistics.
        stats = models[estimate.model].statistics
        if not stats.meets_precision_target:
            actions.append(
                f"{estimate.model}: the epoch-time interval is +/-{stats.relative_halfwidth:.0%} of the mean "
                f"(target {stats.target_rel_halfwidth:.0%}), which widens the upper bound; measure about "
                f"{stats.required_epochs} epochs (epochs={stats.required_epochs} or statistics.adaptive=precision)."
            )
    return actions


def _checkpoint_action(estimates: list[TimeEstimate], upper_hours: float) -> str:
    interval = checkpoint_interval_hours(upper_hours)
    if interval is None:
        return f"The run is short (upper bound {_hours_text(upper_hours)}): a checkpoint at the end suffices."
    steps = ", ".join(
        f"{e.model} every {round(interval * SECONDS_PER_HOUR / (e.step_ms / MS_PER_S)):,} steps" for e in estimates
    )
    return (
        f"Checkpoint every {interval:g} h ({steps}): a crash then costs at most about "
        f"{CHECKPOINT_RUN_FRACTION:.0%} of the {_hours_text(upper_hours)} run."
    )


def _measurement_actions(outcome: Outcome, decision: DecisionConfig) -> list[str]:
    """What to measure for a decision, or a firmer one: the critical models missing, more epochs."""
    verdict = outcome.verdict
    actions = []
    if verdict.missing:
        names = ",".join(m.model for m in verdict.missing)
        many = len(verdict.missing) > 1
        command = f"python -m gpubench -m model={names}" if many else f"python -m gpubench model={names}"
        actions.append(f"Measure the missing critical model(s) ({_missing_text(verdict.missing)}): {command}.")
    for model in verdict.cannot_run:
        actions.append(
            f"{model.model} does not fit on {outcome.device} ({model.reason}): train it on a card with more memory "
            f"({decision.cloud_card} or another with fits_in_vram in the projection), or make it smaller."
        )
    if verdict.too_few:
        counts = ", ".join(f"{name} {epochs}" for name, epochs in verdict.too_few.items())
        actions.append(
            f"Measure at least {MIN_DECISION_EPOCHS} epochs per model "
            f"(python -m gpubench epochs={MIN_DECISION_EPOCHS}; measured: {counts}): fewer give no decision."
        )
    settle = {name: epochs for name, epochs in (verdict.epochs_to_settle or {}).items() if epochs is not None}
    if settle:
        most = max(settle.values())
        actions.append(
            f"Measure {most} epochs (python -m gpubench epochs={most}) to settle the decision: with the variance "
            "measured so far the interval would then lie on one side of the threshold it straddles. "
            "statistics.adaptive=decision measures each model to the count that settles it, by a two-stage rule "
            "that keeps the interval's level."
        )
    return actions


def _drift_actions(estimates: list[TimeEstimate], models: dict[str, ModelResult]) -> list[str]:
    """Models whose measured epochs drift: what the drift costs the bounds and how to avoid it."""
    actions = []
    for estimate in estimates:
        stats = models[estimate.model].statistics
        if stats is not None and stats.drift_detected:
            actions.append(
                f"{estimate.model}: the measured epoch times drift ({stats.drift_description}), "
                f"which adds {_drift_hours_text(estimate)} to its margin; a longer warmup (warmup_epochs) lets "
                "clocks, caches and the allocator settle before measuring."
            )
    return actions


def _scaling_actions(
    outcome: Outcome, scalings: Mapping[str, ScalingEfficiency], decision: DecisionConfig
) -> list[str]:
    """On several cloud cards, the decided models whose scaling efficiency was not measured at that card count:
    how to measure it."""
    gpus = decision.cloud_gpus
    unmeasured = [e.model for e in outcome.decided if e.model in scalings and not scalings[e.model].measured]
    if gpus == 1 or not unmeasured:
        return []
    return [
        f"The scaling efficiency on {gpus} cards of {', '.join(unmeasured)} is not measured (it is assumed or "
        f"extrapolated, so the cloud time's interval is wide): measure it on a machine with {gpus} GPUs, "
        f"python -m gpubench distributed.nproc={gpus} decision.cloud_gpus={gpus}."
    ]


def recommended_actions(
    outcome: Outcome,
    models: dict[str, ModelResult],
    hardware: HardwareReport,
    run: RunInfo,
    splits: dict[str, StepSplit],
    projection: list[CardProjection],
    budget_rows: list[MemoryBudgetRow],
    decision: DecisionConfig,
    what_ifs: list[WhatIfEstimate] | None = None,
    scalings: Mapping[str, ScalingEfficiency] | None = None,
) -> list[str]:
    """Concrete next steps: what to measure (the missing models, more epochs, the scaling to several cards),
    where to train, batch, precision, checkpoints, cooling, memory."""
    actions: list[str] = []
    verdict, total = outcome.verdict, outcome.total
    actions += _measurement_actions(outcome, decision)
    if outcome.on_cpu:
        actions.append(
            f"Measured on the CPU ({outcome.device}): GPU memory, energy and the batch-size search were not measured "
            "and the projection starts from CPU time. Run python -m gpubench on the GPU you mean to train on."
        )
    cloud_row = next((row for row in projection if row.card == decision.cloud_card), None)
    if verdict.decision == LOCAL_GPU_VIABLE and total is not None:
        actions.append(
            f"Train locally on {outcome.device}: the upper bound {_hours_text(total.upper_hours)} is under "
            f"{decision.local_max_hours:g} h."
        )
    elif verdict.decision is not None and cloud_row and cloud_row.training_hours is not None:
        price = cloud_row.cost_usd_per_training
        included = _projection_uncertainty_text(cloud_row)
        if cloud_row.card_count > 1:
            included += " and the scaling efficiency's interval"
        actions.append(
            f"{'Rent' if verdict.decision == CLOUD_GPU_RECOMMENDED else 'Consider renting'} {cards_text(cloud_row)}: "
            f"projected {_hours_text(cloud_row.training_hours)} (upper {_hours_text(cloud_row.training_hours_upper)}, "
            f"{included} included)"
            + (f" for {' + '.join(e.model for e in outcome.decided)} alone" if outcome.missing else "")
            + (f", ${price:,.2f} per training." if price is not None else ".")
        )
    cheapest = cheapest_card(projection)
    worth_renting = verdict.decision in (GRAY_ZONE, CLOUD_GPU_RECOMMENDED)
    if cheapest is not None and worth_renting and cheapest.card != decision.cloud_card:
        actions.append(
            f"Cheapest catalog card for this plan: {cards_text(cheapest)}, {_hours_text(cheapest.training_hours)} "
            f"for ${cheapest.cost_usd_per_training:,.2f} per training."
        )
    actions += _scaling_actions(outcome, scalings or {}, decision)
    actions += _batch_actions(models)
    decided_splits = {e.model: splits[e.model] for e in outcome.decided}
    actions += _execution_actions(hardware, run, decided_splits, what_ifs or [])
    if total is not None:
        actions.append(_checkpoint_action(outcome.decided, total.upper_hours))
    actions += _drift_actions(outcome.decided, models)
    actions += _thermal_actions(models)
    actions += _memory_actions(budget_rows)
    actions += _headroom_actions(models)
    actions += _precision_actions(outcome.decided, models)
    return actions
