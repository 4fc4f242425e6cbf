"""The prose of the recommendation: how each figure is made (the method texts written into the report), the
reasoning sentence and the recommended actions. The numbers come from the other ``decision`` modules; here they
are only put into words (hours as minutes or hours, sizes in MB, money in USD).
"""

from dataclasses import dataclass

from gpubench.decision.config import DecisionConfig
from gpubench.decision.estimate import CHECKPOINT_RUN_FRACTION, TimeEstimate, checkpoint_interval_hours
from gpubench.decision.memory_budget import HEADROOM_MARGINAL, HEADROOM_RISK, TOTAL_ROW
from gpubench.decision.projection import BOUND_COMPUTE, BOUND_OVERHEAD, DeviceThroughput
from gpubench.hardware.catalog import Card
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
    StepSplit,
    recommendation_method,
)
from gpubench.units import HOURS_PER_DAY, MS_PER_S, SECONDS_PER_HOUR

# --------------------------------------------------------------------------------------------------- methods
# How each part of the recommendation is made, in words: written into the report's ``recommendation.method``
# (by :func:`method_texts`). Each text describes the arithmetic of one module: estimate (the first three),
# memory_budget, projection and cost.

ESTIMATE_METHOD = (
    "Plan: supervised models train decision.plan.passes[model] passes over trading_days x bars_per_day x symbols "
    "windows; RL models decision.plan.env_steps[model] environment steps. A model's planned epochs N = plan samples / "
    "(steps_per_epoch x samples_per_step), fractional. Estimate: N x mean epoch time + one-off costs, the one-off "
    "costs being the calibration (first step, with compilation, and the epoch-sizing probes) plus the warmup epochs, "
    "all counted as pure overhead (their samples are not credited: slightly conservative)."
)

UPPER_BOUND_METHOD = (
    "Upper bound: a prediction bound for the total of the N future epochs, not N x the interval's upper end. With h "
    "the half-width of the autocorrelation-aware decision interval of the mean over n measured epochs, "
    "se = h / q is the standard error of the mean (q its t quantile) and the long-run per-epoch variance is "
    "n x se^2 (= sigma^2 (1 + rho) / (1 - rho) for AR(1) epochs; batch means estimate the same). The total of N "
    "future epochs minus N x mean then has variance N^2 se^2 (uncertainty of the mean) + N n se^2 (variability of "
    "the future epochs), so upper = N x mean + h x sqrt(N (N + n)) + one-off costs, using the interval's own "
    "quantile: it is a one-sided (1 + level) / 2 bound (97.5% for a 95% interval). For N >> n it tends to N x the "
    "interval's upper end; for N comparable to n it is wider. Models are trained one after another and measured "
    "independently, so the margins of several models add in quadrature."
)

DECISION_METHOD = (
    "Decision on the combined upper bound of the models in decision.critical_models: below decision.local_max_hours "
    "LOCAL_GPU_VIABLE, above decision.cloud_min_hours CLOUD_GPU_RECOMMENDED, otherwise (bounds included) GRAY_ZONE. "
    "A model counts when its status is ok and it has a plan. A critical model not run or not ok is listed in "
    "missing_critical_models and the decision (partial) is made on the critical models that were measured; when "
    "none was, it is made on every measured model, still partial. With no measured model there is no decision "
    "(None)."
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
    "month, that times the local hours per training. Point estimates of time are used, not the upper bounds."
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
    )


# --------------------------------------------------------------------------------------------------- reasoning


@dataclass(frozen=True)
class Outcome:
    """The decision and the figures it rests on: the verdict, the estimates of the models ``decided`` on, their
    total ``hours`` and its bound ``upper_hours`` (the bound's interval level ``level``), the critical models
    ``missing``, the measured device and whether it is the CPU."""

    verdict: str
    decided: list[TimeEstimate]
    hours: float
    upper_hours: float
    level: float
    missing: list[MissingModel]
    device: str
    on_cpu: bool

    @property
    def upper_bound_level(self) -> float:
        """The one-sided level of ``upper_hours``: (1 + level) / 2."""
        return (1 + self.level) / 2


def _hours_text(hours: float) -> str:
    return f"{hours * 60:.1f} min" if hours < 1 else f"{hours:.1f} h"


def _missing_text(missing: list[MissingModel]) -> str:
    return ", ".join(f"{m.model} ({m.reason})" for m in missing)


def reasoning(outcome: Outcome, cloud_row: CardProjection | None, decision: DecisionConfig) -> str:
    """A sentence or two with the numbers behind the decision."""
    threshold_text = {
        LOCAL_GPU_VIABLE: f"under the {decision.local_max_hours:g} h local limit",
        CLOUD_GPU_RECOMMENDED: f"over the {decision.cloud_min_hours:g} h cloud threshold",
        GRAY_ZONE: f"between {decision.local_max_hours:g} h and {decision.cloud_min_hours:g} h",
    }[outcome.verdict]
    names = [e.model for e in outcome.decided]
    text = (
        f"On {outcome.device}, training {' + '.join(names)} to plan takes an estimated {_hours_text(outcome.hours)} "
        f"({outcome.hours / HOURS_PER_DAY:.2f} days); the {outcome.upper_bound_level:.1%} upper bound, "
        f"{_hours_text(outcome.upper_hours)}, is {threshold_text}: {outcome.verdict}."
    )
    if cloud_row and cloud_row.training_hours is not None:
        price = cloud_row.cost_usd_per_training
        text += (
            f" Projected on {decision.cloud_card}: {_hours_text(cloud_row.training_hours)}"
            f"{f' (${price:,.2f})' if price is not None else ''}."
        )
    if outcome.missing:
        measured_critical = set(names) & set(decision.critical_models)
        basis = "the critical models measured" if measured_critical else "every measured model"
        text += f" Partial: critical {_missing_text(outcome.missing)}; decided on {basis}."
    if outcome.on_cpu:
        text += " Measured on the CPU: these are CPU hours, not GPU hours."
    return text


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
            f"(target {search.target_effective_batch_size}; largest fitting {search.largest_fitting_size}"
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


def _execution_actions(
    hardware: HardwareReport,
    run: RunInfo,
    splits: dict[str, StepSplit],
    source: DeviceThroughput,
    catalog: dict[str, Card],
) -> list[str]:
    """Precision and compilation advice from the step classification (GPU runs only)."""
    if not hardware.on_gpu:
        return []
    precision, compile_mode = run.precision, run.compile
    actions = []
    compute_bound = [name for name, split in splits.items() if split.bound == BOUND_COMPUTE]
    overhead_bound = [name for name, split in splits.items() if split.bound == BOUND_OVERHEAD]
    if compute_bound and precision == "fp32":
        card = catalog[source.card] if source.card else None
        ratio = ""
        if card is not None and card.peak_fp32_tflops and card.peak_bf16_tflops:
            peak_ratio = card.peak_bf16_tflops / card.peak_fp32_tflops
            ratio = f"; {source.card}'s bf16 tensor-core peak is {peak_ratio:.0f}x its fp32 peak"
        actions.append(
            f"{', '.join(compute_bound)}: compute-bound in fp32; measure bf16 autocast "
            f"(python -m gpubench execution.precision=bf16{ratio}) and compare the two reports."
        )
    if overhead_bound and compile_mode == "false":
        actions.append(
            f"{', '.join(overhead_bound)}: the step is dominated by kernel launches and host work, not arithmetic; "
            "measure execution.compile=reduce-overhead (CUDA graphs replay the step without per-kernel launch cost)."
        )
    if precision != "fp32" or compile_mode != "false":
        actions.append(
            f"Measured with precision {precision} and compile {compile_mode}: its gain is the ratio to a run with "
            "the defaults (python -m gpubench.output.compare A B)."
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
                f"{stats.required_epochs} epochs (epochs={stats.required_epochs} or statistics.adaptive=true)."
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


def _cheapest_card(rows: list[CardProjection]) -> CardProjection | None:
    priced = [row for row in rows if row.cost_usd_per_training is not None and row.fits_in_vram is not False]
    return min(priced, key=lambda row: row.cost_usd_per_training) if priced else None


def recommended_actions(
    outcome: Outcome,
    models: dict[str, ModelResult],
    hardware: HardwareReport,
    run: RunInfo,
    splits: dict[str, StepSplit],
    source: DeviceThroughput,
    catalog: dict[str, Card],
    projection: list[CardProjection],
    budget_rows: list[MemoryBudgetRow],
    decision: DecisionConfig,
) -> list[str]:
    """Concrete next steps: what to measure, where to train, batch, precision, checkpoints, cooling, memory."""
    actions: list[str] = []
    missing, verdict, upper_hours = outcome.missing, outcome.verdict, outcome.upper_hours
    if missing:
        names = ",".join(m.model for m in missing)
        command = f"python -m gpubench -m model={names}" if len(missing) > 1 else f"python -m gpubench model={names}"
        actions.append(f"Measure the missing critical model(s) ({_missing_text(missing)}): {command}.")
    if outcome.on_cpu:
        actions.append(
            f"Measured on the CPU ({outcome.device}): GPU memory, energy and the batch-size search were not measured "
            "and the projection starts from CPU time. Run python -m gpubench on the GPU you mean to train on."
        )
    cloud_row = next((row for row in projection if row.card == decision.cloud_card), None)
    if verdict == LOCAL_GPU_VIABLE:
        actions.append(
            f"Train locally on {outcome.device}: the upper bound {_hours_text(upper_hours)} is under "
            f"{decision.local_max_hours:g} h."
        )
    elif cloud_row and cloud_row.training_hours is not None:
        price = cloud_row.cost_usd_per_training
        actions.append(
            f"{'Rent' if verdict == CLOUD_GPU_RECOMMENDED else 'Consider renting'} {decision.cloud_card}: projected "
            f"{_hours_text(cloud_row.training_hours)} (upper {_hours_text(cloud_row.training_hours_upper)})"
            + (f", ${price:,.2f} per training." if price is not None else ".")
        )
    cheapest = _cheapest_card(projection)
    if cheapest is not None and verdict != LOCAL_GPU_VIABLE and cheapest.card != decision.cloud_card:
        actions.append(
            f"Cheapest catalog card for this plan: {cheapest.card}, {_hours_text(cheapest.training_hours)} "
            f"for ${cheapest.cost_usd_per_training:,.2f} per training."
        )
    actions += _batch_actions(models)
    actions += _execution_actions(hardware, run, {e.model: splits[e.model] for e in outcome.decided}, source, catalog)
    actions.append(_checkpoint_action(outcome.decided, upper_hours))
    actions += _thermal_actions(models)
    actions += _memory_actions(budget_rows)
    actions += _headroom_actions(models)
    actions += _precision_actions(outcome.decided, models)
    return actions
