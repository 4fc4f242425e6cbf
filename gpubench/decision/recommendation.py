"""The recommendation: full-training time from the measured throughput, the local-vs-cloud decision, the VRAM
budget, the cost analysis and the projection to the catalog cards.

:func:`build_recommendation` turns the report as written so far (the ``hardware``, ``run`` and ``models``
sections) into its ``recommendation`` section. It is pure: numbers in, numbers out, no torch. The formulas are in
the docstrings below and in the report's ``recommendation.method``.
"""

import math
from dataclasses import asdict, dataclass
from typing import Any

from gpubench.decision.config import DecisionConfig, TrainingPlanConfig
from gpubench.decision.cost import COST_METHOD, JOULES_PER_KWH, CostInputs, cost_analysis
from gpubench.decision.projection import (
    BOUND_COMPUTE,
    BOUND_OVERHEAD,
    PROJECTION_METHOD,
    DeviceThroughput,
    StepSplit,
    projected_step_ms,
    source_throughput,
    split_step,
    target_throughput,
)
from gpubench.hardware.config import HardwareConfig

LOCAL_GPU_VIABLE = "LOCAL_GPU_VIABLE"
GRAY_ZONE = "GRAY_ZONE"
CLOUD_GPU_RECOMMENDED = "CLOUD_GPU_RECOMMENDED"

#: VRAM headroom statuses (the seed's Tier-2 report): peak below 85% of the card is safe, 85-93% marginal, above
#: 93% a risk: allocator fragmentation and library workspaces can take the last few percent at any moment.
SAFE_MAX_FRACTION = 0.85
MARGINAL_MAX_FRACTION = 0.93
HEADROOM_SAFE = "safe"
HEADROOM_MARGINAL = "marginal"
HEADROOM_RISK = "risk"
NOT_MEASURED = "not measured"

#: Checkpoint often enough that a crash loses at most this fraction of the run, within these bounds (hours).
_CHECKPOINT_RUN_FRACTION = 0.1
_CHECKPOINT_MIN_HOURS = 0.25
_CHECKPOINT_MAX_HOURS = 4.0

SECONDS_PER_HOUR = 3600.0
HOURS_PER_DAY = 24.0
MB_PER_GB = 1024.0

#: How the time estimates and the decision are made, written into the report's ``recommendation.method``.
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


# --------------------------------------------------------------------------------------------------- estimates


def plan_samples(name: str, sample_unit: str | None, plan: TrainingPlanConfig) -> tuple[float, str]:
    """The full training of ``name`` in samples of ``sample_unit``, and the sentence it comes from.

    Raises ValueError when the plan has no entry for the model (or the unit is unknown).
    """
    if sample_unit == "env_step" and name in plan.env_steps:
        steps = float(plan.env_steps[name])
        return steps, f"{steps:,.0f} environment steps"
    if sample_unit == "window" and name in plan.passes:
        passes = float(plan.passes[name])
        windows = plan.windows_per_pass * passes
        basis = (
            f"{plan.trading_days} days x {plan.bars_per_day} bars x {plan.symbols} symbol(s) x {passes:g} passes "
            f"= {windows:,.0f} windows"
        )
        return windows, basis
    group = "env_steps" if sample_unit == "env_step" else "passes"
    raise ValueError(f"no training plan for {name} ({sample_unit} samples): set decision.plan.{group}.{name}")


def total_time_margin_ms(halfwidth_ms: float, measured_epochs: int, planned_epochs: float) -> float:
    """Prediction margin (ms) on the total time of ``planned_epochs`` future epochs: ``h × sqrt(N (N + n))``.

    ``halfwidth_ms`` (h) is the half-width of the decision interval of the mean epoch time over ``measured_epochs``
    (n) epochs. Var(total − N·mean) = N²·se² + N·n·se² with se = h/q, so q·sd = h·sqrt(N (N + n)).
    """
    if measured_epochs < 1 or planned_epochs < 0 or halfwidth_ms < 0:
        raise ValueError(f"need n >= 1, N >= 0, h >= 0; got n={measured_epochs}, N={planned_epochs}, h={halfwidth_ms}")
    return halfwidth_ms * math.sqrt(planned_epochs * (planned_epochs + measured_epochs))


@dataclass(frozen=True)
class TimeEstimate:
    """One model's full-training time on the measured device.

    ``planned_epochs`` (N) benchmark epochs of ``samples_per_epoch`` samples make the plan; ``mean_epoch_ms`` and
    ``halfwidth_ms`` are the mean epoch time and the half-width of its decision interval over ``measured_epochs``
    (n) epochs; ``one_off_seconds`` is the calibration and warmup time.
    """

    model: str
    sample_unit: str
    plan_samples: float
    plan_basis: str
    samples_per_epoch: float
    steps_per_epoch: int
    planned_epochs: float
    measured_epochs: int
    mean_epoch_ms: float
    halfwidth_ms: float
    confidence_level: float
    one_off_seconds: float

    @property
    def step_ms(self) -> float:
        return self.mean_epoch_ms / self.steps_per_epoch

    @property
    def epochs_seconds(self) -> float:
        """N × mean epoch time, in seconds (the part that scales with the device's speed)."""
        return self.planned_epochs * self.mean_epoch_ms / 1e3

    @property
    def margin_seconds(self) -> float:
        return total_time_margin_ms(self.halfwidth_ms, self.measured_epochs, self.planned_epochs) / 1e3

    @property
    def hours(self) -> float:
        return (self.epochs_seconds + self.one_off_seconds) / SECONDS_PER_HOUR

    @property
    def upper_hours(self) -> float:
        return self.hours + self.margin_seconds / SECONDS_PER_HOUR

    def to_dict(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "samples_per_second": self.samples_per_epoch / (self.mean_epoch_ms / 1e3),
            "step_ms": self.step_ms,
            "estimated_hours": self.hours,
            "estimated_hours_upper": self.upper_hours,
            "upper_bound_level": (1.0 + self.confidence_level) / 2.0,
        }


def estimate_training_time(name: str, section: dict[str, Any], plan: TrainingPlanConfig) -> TimeEstimate:
    """Extrapolate one model's report section to its planned training. Raises ValueError (saying why) when the
    model was not measured successfully or has no plan."""
    status = section.get("status")
    if status != "ok":
        raise ValueError(f"status {status}" + (f": {section['error']}" if section.get("error") else ""))
    stats = section.get("statistics")
    steps_per_epoch = section.get("steps_per_epoch")
    samples_per_step = section.get("samples_per_step")
    if not stats or not steps_per_epoch or not samples_per_step:
        raise ValueError("no epoch-time statistics (fewer than two measured epochs)")
    samples, basis = plan_samples(name, section.get("sample_unit"), plan)
    samples_per_epoch = steps_per_epoch * samples_per_step
    # The interval is centred on the mean; its lower end may be cut at zero (an epoch time is positive), so the
    # half-width comes from the upper end.
    _, hi_ms = stats["decision_interval_ms"]
    calibration_s = section.get("calibration_seconds")
    if calibration_s is None:
        calibration_s = (section.get("first_step_ms") or 0.0) / 1e3
    return TimeEstimate(
        model=name,
        sample_unit=section["sample_unit"],
        plan_samples=samples,
        plan_basis=basis,
        samples_per_epoch=samples_per_epoch,
        steps_per_epoch=steps_per_epoch,
        planned_epochs=samples / samples_per_epoch,
        measured_epochs=stats["n"],
        mean_epoch_ms=stats["mean_ms"],
        halfwidth_ms=hi_ms - stats["mean_ms"],
        confidence_level=stats["confidence_level"],
        one_off_seconds=calibration_s + sum(section.get("warmup_epoch_times_ms") or []) / 1e3,
    )


def combine_estimates(estimates: list[TimeEstimate], time_ratios: list[float] | None = None) -> tuple[float, float]:
    """(hours, upper-bound hours) of training the models one after another: times add, margins add in quadrature
    (independent measurements). ``time_ratios`` scale each model's epoch time and margin (a projection)."""
    ratios = time_ratios or [1.0] * len(estimates)
    seconds = sum(e.epochs_seconds * r + e.one_off_seconds for e, r in zip(estimates, ratios, strict=True))
    margin_s = math.sqrt(sum((e.margin_seconds * r) ** 2 for e, r in zip(estimates, ratios, strict=True)))
    return seconds / SECONDS_PER_HOUR, (seconds + margin_s) / SECONDS_PER_HOUR


def classify(upper_hours: float, decision: DecisionConfig) -> str:
    """The decision for an upper bound of ``upper_hours``: < local_max_hours local, > cloud_min_hours cloud, else
    the gray zone (both thresholds included)."""
    if upper_hours < decision.local_max_hours:
        return LOCAL_GPU_VIABLE
    if upper_hours > decision.cloud_min_hours:
        return CLOUD_GPU_RECOMMENDED
    return GRAY_ZONE


# --------------------------------------------------------------------------------------------------- memory


def headroom_status(fraction_of_card: float | None) -> str:
    """``safe`` (< 85% of the card), ``marginal`` (85-93%, both included), ``risk`` (> 93%), or ``not measured``."""
    if fraction_of_card is None:
        return NOT_MEASURED
    if fraction_of_card < SAFE_MAX_FRACTION:
        return HEADROOM_SAFE
    if fraction_of_card <= MARGINAL_MAX_FRACTION:
        return HEADROOM_MARGINAL
    return HEADROOM_RISK


def card_memory_mb(hardware: dict[str, Any]) -> float | None:
    """VRAM (MiB) the models had: the usable VRAM under a cap, else the card's total; None on the CPU."""
    return hardware.get("usable_vram_mb") or hardware.get("total_vram_mb")


def peak_reserved_mb(section: dict[str, Any]) -> float | None:
    """A model's measured peak reserved VRAM (MiB), None where not measured."""
    return (section.get("memory") or {}).get("peak_reserved_mb")


def memory_budget(report: dict[str, Any], decision: DecisionConfig) -> list[dict[str, Any]]:
    """The VRAM budget table: a row per model in the report, then a ``total`` row (all sizes MiB)."""
    card_mb = card_memory_mb(report.get("hardware") or {})
    rows = []

    def row(model: str, budget_mb: float | None, peak_mb: float | None) -> dict[str, Any]:
        fraction = peak_mb / card_mb if peak_mb is not None and card_mb else None
        return {
            "model": model,
            "budget_mb": budget_mb,
            "peak_reserved_mb": peak_mb,
            "within_budget": None if peak_mb is None or budget_mb is None else peak_mb <= budget_mb,
            "budget_used_fraction": None if peak_mb is None or not budget_mb else peak_mb / budget_mb,
            "card_mb": card_mb,
            "fraction_of_card": fraction,
            "status": headroom_status(fraction),
        }

    for name, section in (report.get("models") or {}).items():
        rows.append(row(name, decision.memory_budget_mb.get(name), peak_reserved_mb(section)))
    peaks = [r["peak_reserved_mb"] for r in rows]
    budgets = [r["budget_mb"] for r in rows]
    if rows:
        total_peak = None if any(p is None for p in peaks) else sum(peaks)
        total_budget = None if any(b is None for b in budgets) else sum(budgets)
        rows.append(row("total", total_budget, total_peak))
    return rows


# --------------------------------------------------------------------------------------------------- projection


def _energy_kwh(
    estimate: TimeEstimate, section: dict[str, Any], source: DeviceThroughput, catalog: dict[str, HardwareConfig]
) -> tuple[float | None, str | None]:
    """Energy (kWh) of one model's planned training on the measured device, and its basis."""
    joules_per_sample = (section.get("energy") or {}).get("joules_per_sample")
    if joules_per_sample is not None:
        return joules_per_sample * estimate.plan_samples / JOULES_PER_KWH, "nvml"
    board_power_w = catalog[source.card].board_power_w if source.card else None
    if board_power_w:
        return board_power_w * estimate.hours * SECONDS_PER_HOUR / JOULES_PER_KWH, "board_power_w"
    return None, None


def _projection_table(
    estimates: dict[str, TimeEstimate],
    decided_on: list[str],
    splits: dict[str, StepSplit],
    report: dict[str, Any],
    source: DeviceThroughput,
    catalog: dict[str, HardwareConfig],
    decision: DecisionConfig,
) -> list[dict[str, Any]]:
    """A row per catalog card: each model's projected step and hours, and the decided models' total and cost."""
    precision = (report.get("run") or {}).get("precision") or "fp32"
    measured_hours = sum(estimates[name].hours for name in decided_on)
    rows = []
    for card_name, card in catalog.items():
        target = target_throughput(card_name, card, precision, source, decision.assumed_matmul_efficiency)
        card_mb = card.vram_gb * MB_PER_GB if card.vram_gb else None
        models: dict[str, dict[str, Any]] = {}
        ratios: dict[str, float] = {}
        memory_bound_ratios: dict[str, float] = {}
        for name, estimate in estimates.items():
            step_ms = projected_step_ms(splits[name], source, target)
            memory_bound_ms = projected_step_ms(splits[name], source, target, memory_bound=True)
            peak_mb = peak_reserved_mb((report.get("models") or {}).get(name) or {})
            model_hours = model_upper = None
            if step_ms is not None:
                ratios[name] = step_ms / estimate.step_ms
                model_hours, model_upper = combine_estimates([estimate], [ratios[name]])
            if memory_bound_ms is not None:
                memory_bound_ratios[name] = memory_bound_ms / estimate.step_ms
            models[name] = {
                "step_ms": step_ms,
                "step_ms_if_memory_bound": memory_bound_ms,
                "speedup": estimate.step_ms / step_ms if step_ms else None,
                "hours": model_hours,
                "hours_upper": model_upper,
                "fits_in_vram": None if peak_mb is None or card_mb is None else peak_mb <= card_mb,
            }
        decided = [estimates[name] for name in decided_on]
        hours = upper_hours = memory_bound_hours = None
        if decided and all(name in ratios for name in decided_on):
            hours, upper_hours = combine_estimates(decided, [ratios[name] for name in decided_on])
        if decided and all(name in memory_bound_ratios for name in decided_on):
            memory_bound_hours, _ = combine_estimates(decided, [memory_bound_ratios[name] for name in decided_on])
        fits_all = [models[name]["fits_in_vram"] for name in decided_on]
        price = card.hourly_price_usd
        if card_name == decision.cloud_card and decision.cloud_hourly_price_usd is not None:
            price = decision.cloud_hourly_price_usd
        rows.append(
            {
                "card": card_name,
                "measured_device": card_name == source.card,
                "precision": precision,
                "peak_tflops": card.peak_tflops(precision),
                "attainable_tflops": target.attainable_tflops,
                "memory_bandwidth_gbps": card.memory_bandwidth_gbps,
                "vram_mb": card_mb,
                "hourly_price_usd": price,
                "training_hours": hours,
                "training_hours_upper": upper_hours,
                "training_hours_if_memory_bound": memory_bound_hours,
                "speedup_vs_measured": measured_hours / hours if hours else None,
                "cost_usd_per_training": hours * price if hours is not None and price is not None else None,
                "fits_in_vram": None if not fits_all or None in fits_all else all(fits_all),
                "models": models,
            }
        )
    return rows


# --------------------------------------------------------------------------------------------------- actions


def _hours_text(hours: float) -> str:
    return f"{hours * 60:.1f} min" if hours < 1 else f"{hours:.1f} h"


def _missing_text(missing: list[dict[str, Any]]) -> str:
    return ", ".join(f"{m['model']} ({m['reason']})" for m in missing)


def checkpoint_interval_hours(upper_hours: float) -> float | None:
    """Hours between checkpoints for a run bounded by ``upper_hours``: a tenth of the run (a crash loses at most
    ~10%), rounded down to a quarter hour, within [0.25, 4] h; None for a run shorter than a quarter hour."""
    if upper_hours < _CHECKPOINT_MIN_HOURS:
        return None
    interval = min(_CHECKPOINT_MAX_HOURS, upper_hours * _CHECKPOINT_RUN_FRACTION)
    return max(_CHECKPOINT_MIN_HOURS, math.floor(interval / _CHECKPOINT_MIN_HOURS) * _CHECKPOINT_MIN_HOURS)


def _batch_actions(models: dict[str, dict[str, Any]]) -> list[str]:
    actions = []
    for name, section in models.items():
        search = section.get("batch_search")
        if not search or search.get("batch_size") is None:
            continue
        limit = f" under {search['peak_limit_mb']:,.0f} MB" if search.get("peak_limit_mb") else ""
        knee = f"; throughput reaches 90% of its best at {search['knee_size']}" if search.get("knee_size") else ""
        actions.append(
            f"{name}: train with batch {search['batch_size']} x {search['gradient_accumulation_steps']} gradient "
            f"accumulation step(s) = effective {search['effective_batch_size']} "
            f"(target {search['target_effective_batch_size']}; largest fitting {search['largest_fitting_size']}"
            f"{limit}{knee})."
        )
    configured = {
        name: s.get("batch_size") for name, s in models.items() if not s.get("batch_search") and s.get("batch_size")
    }
    if configured:
        sizes = ", ".join(f"{name} {size}" for name, size in configured.items())
        actions.append(
            f"No batch-size search ran for {', '.join(configured)} (CPU, or batch.search=false): the batch sizes are "
            f"the configured ones ({sizes}); on the GPU the search finds the largest that fits."
        )
    return actions


def _execution_actions(
    report: dict[str, Any],
    splits: dict[str, StepSplit],
    source: DeviceThroughput,
    catalog: dict[str, HardwareConfig],
) -> list[str]:
    """Precision and compilation advice from the step classification (GPU runs only)."""
    if (report.get("hardware") or {}).get("measured_on") != "cuda":
        return []
    run = report.get("run") or {}
    precision, compile_mode = run.get("precision", "fp32"), run.get("compile", "false")
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


def _thermal_actions(models: dict[str, dict[str, Any]]) -> list[str]:
    actions = []
    for name, section in models.items():
        measured = [e for e in section.get("device_epochs") or [] if e.get("phase") == "measured"]
        throttled = [e for e in measured if e.get("throttled")]
        if throttled:
            causes = sorted({str(e.get("throttle_cause")) for e in throttled if e.get("throttle_cause")})
            actions.append(
                f"{name}: {len(throttled)} of {len(measured)} measured epochs were throttled"
                f"{' (' + ', '.join(causes) + ')' if causes else ''}; the estimate includes the slowdown. For a "
                "multi-hour run improve cooling (airflow, a cooling pad on a laptop) or cap the power limit "
                "(nvidia-smi -pl) to hold a steady clock."
            )
    return actions


def _memory_actions(rows: list[dict[str, Any]]) -> list[str]:
    actions = []
    for row in rows:
        if row["model"] == "total":
            if row["status"] in (HEADROOM_MARGINAL, HEADROOM_RISK):
                actions.append(
                    f"The models' peaks sum to {row['peak_reserved_mb']:,.0f} MB ({row['fraction_of_card']:.0%} of "
                    f"the card): train them one after another, not at once."
                )
            continue
        if row["status"] in (HEADROOM_MARGINAL, HEADROOM_RISK):
            actions.append(
                f"{row['model']}: peak {row['peak_reserved_mb']:,.0f} MB is {row['fraction_of_card']:.0%} of the "
                f"{row['card_mb']:,.0f} MB card ({row['status']}): fragmentation or a longer sequence can run out of "
                "memory mid-run; lower the batch (raise gradient accumulation) or use bf16 to keep below 85%."
            )
        if row["within_budget"] is False:
            actions.append(
                f"{row['model']}: peak {row['peak_reserved_mb']:,.0f} MB exceeds its budget {row['budget_mb']:,.0f} "
                f"MB (decision.memory_budget_mb.{row['model']})."
            )
    return actions


def _precision_actions(estimates: list[TimeEstimate], models: dict[str, dict[str, Any]]) -> list[str]:
    actions = []
    for estimate in estimates:
        stats = models[estimate.model].get("statistics") or {}
        if stats.get("meets_precision_target") is False:
            actions.append(
                f"{estimate.model}: the epoch-time interval is +/-{stats['relative_halfwidth']:.0%} of the mean "
                f"(target {stats['target_rel_halfwidth']:.0%}), which widens the upper bound; measure about "
                f"{stats['required_epochs']} epochs (epochs={stats['required_epochs']} or statistics.adaptive=true)."
            )
    return actions


def _checkpoint_action(estimates: list[TimeEstimate], upper_hours: float) -> str:
    interval = checkpoint_interval_hours(upper_hours)
    if interval is None:
        return f"The run is short (upper bound {_hours_text(upper_hours)}): a checkpoint at the end suffices."
    steps = ", ".join(
        f"{e.model} every {round(interval * SECONDS_PER_HOUR / (e.step_ms / 1e3)):,} steps" for e in estimates
    )
    return (
        f"Checkpoint every {interval:g} h ({steps}): a crash then costs at most about "
        f"{_CHECKPOINT_RUN_FRACTION:.0%} of the {_hours_text(upper_hours)} run."
    )


def _cheapest_card(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    priced = [r for r in rows if r["cost_usd_per_training"] is not None and r["fits_in_vram"] is not False]
    return min(priced, key=lambda r: r["cost_usd_per_training"]) if priced else None


@dataclass(frozen=True)
class _Outcome:
    """The decision and the figures it rests on, for the reasoning and the actions."""

    verdict: str
    decided: list[TimeEstimate]
    hours: float
    upper_hours: float
    level: float
    missing: list[dict[str, Any]]
    device: str
    on_cpu: bool


def _reasoning(outcome: _Outcome, cloud_row: dict[str, Any] | None, decision: DecisionConfig) -> str:
    """A sentence or two with the numbers behind the decision."""
    threshold_text = {
        LOCAL_GPU_VIABLE: f"under the {decision.local_max_hours:g} h local limit",
        CLOUD_GPU_RECOMMENDED: f"over the {decision.cloud_min_hours:g} h cloud threshold",
        GRAY_ZONE: f"between {decision.local_max_hours:g} h and {decision.cloud_min_hours:g} h",
    }[outcome.verdict]
    names = [e.model for e in outcome.decided]
    reasoning = (
        f"On {outcome.device}, training {' + '.join(names)} to plan takes an estimated {_hours_text(outcome.hours)} "
        f"({outcome.hours / HOURS_PER_DAY:.2f} days); the {(1 + outcome.level) / 2:.1%} upper bound, "
        f"{_hours_text(outcome.upper_hours)}, is {threshold_text}: {outcome.verdict}."
    )
    if cloud_row and cloud_row["training_hours"] is not None:
        price = cloud_row["cost_usd_per_training"]
        reasoning += (
            f" Projected on {decision.cloud_card}: {_hours_text(cloud_row['training_hours'])}"
            f"{f' (${price:,.2f})' if price is not None else ''}."
        )
    if outcome.missing:
        measured_critical = set(names) & set(decision.critical_models)
        basis = "the critical models measured" if measured_critical else "every measured model"
        reasoning += f" Partial: critical {_missing_text(outcome.missing)}; decided on {basis}."
    if outcome.on_cpu:
        reasoning += " Measured on the CPU: these are CPU hours, not GPU hours."
    return reasoning


def _actions(
    outcome: _Outcome,
    report: dict[str, Any],
    splits: dict[str, StepSplit],
    source: DeviceThroughput,
    catalog: dict[str, HardwareConfig],
    projection: list[dict[str, Any]],
    budget_rows: list[dict[str, Any]],
    decision: DecisionConfig,
) -> list[str]:
    """Concrete next steps: what to measure, where to train, batch, precision, checkpoints, cooling, memory."""
    models: dict[str, dict[str, Any]] = report.get("models") or {}
    actions: list[str] = []
    missing, verdict, upper_hours = outcome.missing, outcome.verdict, outcome.upper_hours
    if missing:
        names = ",".join(m["model"] for m in missing)
        command = f"python -m gpubench -m model={names}" if len(missing) > 1 else f"python -m gpubench model={names}"
        actions.append(f"Measure the missing critical model(s) ({_missing_text(missing)}): {command}.")
    if outcome.on_cpu:
        actions.append(
            f"Measured on the CPU ({outcome.device}): GPU memory, energy and the batch-size search were not measured "
            "and the projection starts from CPU time. Run python -m gpubench on the GPU you mean to train on."
        )
    cloud_row = next((r for r in projection if r["card"] == decision.cloud_card), None)
    if verdict == LOCAL_GPU_VIABLE:
        actions.append(
            f"Train locally on {outcome.device}: the upper bound {_hours_text(upper_hours)} is under "
            f"{decision.local_max_hours:g} h."
        )
    elif cloud_row and cloud_row["training_hours"] is not None:
        price = cloud_row["cost_usd_per_training"]
        actions.append(
            f"{'Rent' if verdict == CLOUD_GPU_RECOMMENDED else 'Consider renting'} {decision.cloud_card}: projected "
            f"{_hours_text(cloud_row['training_hours'])} (upper {_hours_text(cloud_row['training_hours_upper'])})"
            + (f", ${price:,.2f} per training." if price is not None else ".")
        )
    cheapest = _cheapest_card(projection)
    if cheapest is not None and verdict != LOCAL_GPU_VIABLE and cheapest["card"] != decision.cloud_card:
        actions.append(
            f"Cheapest catalog card for this plan: {cheapest['card']}, {_hours_text(cheapest['training_hours'])} "
            f"for ${cheapest['cost_usd_per_training']:,.2f} per training."
        )
    actions += _batch_actions(models)
    actions += _execution_actions(report, {e.model: splits[e.model] for e in outcome.decided}, source, catalog)
    actions.append(_checkpoint_action(outcome.decided, upper_hours))
    actions += _thermal_actions(models)
    actions += _memory_actions(budget_rows)
    actions += _headroom_actions(models)
    actions += _precision_actions(outcome.decided, models)
    return actions


def _headroom_actions(models: dict[str, dict[str, Any]]) -> list[str]:
    """Models whose measured peak passed ``batch.headroom`` × usable VRAM although their batch search fitted."""
    actions = []
    for name, section in models.items():
        memory = section.get("memory") or {}
        if memory.get("headroom_exceeded"):
            actions.append(
                f"{name}: during the measured epochs the peak reserved memory reached "
                f"{memory['peak_reserved_mb']:,.0f} MB, above the {memory['headroom_limit_mb']:,.0f} MB headroom limit "
                f"its batch search respected (batch {section.get('batch_size')}): allocator fragmentation grows over a "
                "long run, so train with a smaller batch (more gradient accumulation) on the target card."
            )
    return actions


# --------------------------------------------------------------------------------------------------- entry point


def build_recommendation(
    report: dict[str, Any], decision: DecisionConfig, catalog: dict[str, HardwareConfig]
) -> dict[str, Any]:
    """The report's ``recommendation`` section, from the report as written so far (``hardware``, ``run``,
    ``models``), the decision config and the hardware catalog (:func:`gpubench.hardware.catalog.load_catalog`).

    Keys: ``decision`` (LOCAL_GPU_VIABLE | GRAY_ZONE | CLOUD_GPU_RECOMMENDED, None when nothing was measured),
    ``reasoning``, ``estimated_full_training_hours``/``_days`` (point estimate) and
    ``estimated_full_training_hours_upper`` (the bound that decides), ``partial`` with ``missing_critical_models``
    and ``decided_on``, ``per_model``, ``cost_analysis``, ``projection`` (a row per catalog card),
    ``memory_budget`` (a row per model and a total), ``recommended_actions`` and ``method``.
    """
    models: dict[str, dict[str, Any]] = report.get("models") or {}
    hardware = report.get("hardware") or {}
    source = source_throughput(report, catalog, decision.assumed_matmul_efficiency)

    estimates: dict[str, TimeEstimate] = {}
    per_model: dict[str, dict[str, Any]] = {}
    for name, section in models.items():
        try:
            estimates[name] = estimate_training_time(name, section, decision.plan)
        except ValueError as exc:
            per_model[name] = {"status": section.get("status"), "estimated": False, "reason": str(exc)}
    missing = [
        {
            "model": name,
            "status": (models.get(name) or {}).get("status", "not run"),
            "reason": per_model[name]["reason"] if name in per_model else "not run",
        }
        for name in decision.critical_models
        if name not in estimates
    ]
    decided_on = [name for name in decision.critical_models if name in estimates] or list(estimates)
    splits = {
        name: split_step(e.step_ms, models[name].get("flops_per_step"), source.attainable_tflops)
        for name, e in estimates.items()
    }
    for name, estimate in estimates.items():
        energy_kwh, energy_basis = _energy_kwh(estimate, models[name], source, catalog)
        per_model[name] = {
            "status": models[name].get("status"),
            "estimated": True,
            "decided_on": name in decided_on,
            **estimate.to_dict(),
            "step_split": splits[name].to_dict(),
            "energy_kwh": energy_kwh,
            "energy_basis": energy_basis,
        }

    budget_rows = memory_budget(report, decision)
    projection = _projection_table(estimates, decided_on, splits, report, source, catalog, decision)
    method = {
        "estimate": ESTIMATE_METHOD,
        "upper_bound": UPPER_BOUND_METHOD,
        "decision": DECISION_METHOD,
        "memory_budget": MEMORY_METHOD,
        "projection": PROJECTION_METHOD,
        "projection_source": source.basis,
        "cost": COST_METHOD,
    }
    device = hardware.get("device_name") or source.name
    recommendation: dict[str, Any] = {
        "decision": None,
        "reasoning": "",
        "estimated_full_training_hours": None,
        "estimated_full_training_days": None,
        "estimated_full_training_hours_upper": None,
        "upper_bound_level": None,
        "partial": bool(missing),
        "missing_critical_models": missing,
        "critical_models": list(decision.critical_models),
        "decided_on": decided_on,
        "thresholds_hours": {"local_max": decision.local_max_hours, "cloud_min": decision.cloud_min_hours},
        "measured_device": device,
        "per_model": per_model,
        "cost_analysis": None,
        "projection": projection,
        "memory_budget": budget_rows,
        "recommended_actions": [],
        "method": method,
    }
    if not decided_on:
        recommendation["reasoning"] = "No model was measured successfully, so there is nothing to extrapolate" + (
            f": {_missing_text(missing)}." if missing else "."
        )
        recommendation["recommended_actions"] = [
            "Fix the failures (each model's error is in its report section) and run the benchmark again."
        ]
        return recommendation

    decided = [estimates[name] for name in decided_on]
    hours, upper_hours = combine_estimates(decided)
    outcome = _Outcome(
        verdict=classify(upper_hours, decision),
        decided=decided,
        hours=hours,
        upper_hours=upper_hours,
        level=min(e.confidence_level for e in decided),
        missing=missing,
        device=device,
        on_cpu=hardware.get("measured_on") != "cuda",
    )
    cloud_row = next((r for r in projection if r["card"] == decision.cloud_card), None)
    energies = [per_model[name]["energy_kwh"] for name in decided_on]
    bases = {per_model[name]["energy_basis"] for name in decided_on}
    cost = cost_analysis(
        CostInputs(
            local_hours=hours,
            local_energy_kwh=None if None in energies else sum(energies),
            energy_basis=None if None in bases else "+".join(sorted(bases)),
            cloud_card=decision.cloud_card,
            cloud_hours=cloud_row["training_hours"] if cloud_row else None,
            cloud_hourly_price_usd=cloud_row["hourly_price_usd"] if cloud_row else decision.cloud_hourly_price_usd,
        ),
        decision,
    )
    if cloud_row is None:
        cost["notes"].append(
            f"decision.cloud_card = {decision.cloud_card!r} is not a catalog card (one of {', '.join(catalog)})"
        )

    recommendation.update(
        {
            "decision": outcome.verdict,
            "reasoning": _reasoning(outcome, cloud_row, decision),
            "estimated_full_training_hours": hours,
            "estimated_full_training_days": hours / HOURS_PER_DAY,
            "estimated_full_training_hours_upper": upper_hours,
            "upper_bound_level": (1 + outcome.level) / 2,
            "cost_analysis": cost,
            "recommended_actions": _actions(
                outcome, report, splits, source, catalog, projection, budget_rows, decision
            ),
        }
    )
    return recommendation
