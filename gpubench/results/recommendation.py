"""The recommendation: the answer and its basis, the per-model estimates, the projections onto other cards."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, get_args

from gpubench.results.codec import OMIT_EMPTY, Record
from gpubench.results.cost import CostAnalysis, CostRow, LocalCost, PriceSnapshotInfo
from gpubench.results.units import HOURS_PER_DAY

#: The three answers of the decision rule.
LOCAL_GPU_VIABLE = "LOCAL_GPU_VIABLE"
GRAY_ZONE = "GRAY_ZONE"
CLOUD_GPU_RECOMMENDED = "CLOUD_GPU_RECOMMENDED"
#: Why the recommendation decided what it did, or decided nothing (``Recommendation.decision_basis``).
DecisionBasis = Literal[
    "upper_below_local",
    "lower_above_cloud",
    "critical_model_cannot_run",
    "estimate_in_gray_band",
    "interval_straddles_threshold",
    "partial_measurement",
    "too_few_epochs",
    "drift_or_throttling",
    "nothing_measured",
]
DECISION_BASES: tuple[str, ...] = get_args(DecisionBasis)


@dataclass(frozen=True)
class StepSplit(Record):
    """A measured step (ms) split into compute (FLOPs at the attainable rate), ``launch_ms`` (launches at the host's
    per-launch cost), ``memory_ms`` (``bytes_per_step`` at the bandwidth; without bytes, all the rest) and ``host_ms``
    (what remains); ``bound``: compute-bound when compute is at least half the step."""

    step_ms: float
    flops_per_step: float | None
    achieved_tflops: float | None
    achieved_fraction: float | None
    compute_ms: float | None
    other_ms: float | None
    bound: str
    compute_share: float | None
    launches_per_step: int | None = field(default=None, metadata=OMIT_EMPTY)
    launch_ms: float | None = field(default=None, metadata=OMIT_EMPTY)
    memory_ms: float | None = field(default=None, metadata=OMIT_EMPTY)
    bytes_per_step: int | None = field(default=None, metadata=OMIT_EMPTY)
    host_ms: float | None = field(default=None, metadata=OMIT_EMPTY)


@dataclass(frozen=True)
class BatchWhatIf(Record):
    """The plan at another batch size: ``plan_hours`` = plan samples ÷ ``samples_per_s`` of a short search trial of
    ``trial_steps`` steps (no warmup, evaluation or checkpoints); ``label``: ``knee``, ``largest fitting`` or empty."""

    batch_size: int
    samples_per_s: float
    plan_hours: float
    trial_steps: int | None
    label: str = ""


@dataclass(frozen=True)
class ModelEstimate(Record):
    """One model's full training on the measured device (h, ms, s), or why it has none (``reason``): ``mean_epoch_ms``
    and the decision interval's ``halfwidth_ms`` over ``measured_epochs``; ``one_off_seconds`` of calibration and
    warmup; ``estimated_hours`` with prediction bounds at ``upper_bound_level``, ``drift_margin_hours`` added for
    drift or throttling. ``relative_margin_floor_applied`` is read, not written."""

    status: str | None
    estimated: bool
    reason: str | None = None
    decided_on: bool = False
    model: str | None = None
    sample_unit: str | None = None
    plan_samples: float | None = None
    plan_basis: str | None = None
    samples_per_epoch: float | None = None
    steps_per_epoch: int | None = None
    planned_epochs: float | None = None
    measured_epochs: int | None = None
    mean_epoch_ms: float | None = None
    halfwidth_ms: float | None = None
    confidence_level: float | None = None
    one_off_seconds: float | None = None
    samples_per_second: float | None = None
    step_ms: float | None = None
    estimated_hours: float | None = None
    estimated_hours_upper: float | None = None
    upper_bound_level: float | None = None
    step_split: StepSplit | None = None
    energy_kwh: float | None = None
    energy_basis: str | None = None
    estimated_hours_lower: float | None = field(default=None, metadata=OMIT_EMPTY)
    drift_margin_hours: float | None = field(default=None, metadata=OMIT_EMPTY)
    relative_margin_floor_applied: bool | None = field(default=None, metadata=OMIT_EMPTY)
    projected_onto: str | None = field(default=None, metadata=OMIT_EMPTY)
    measured_step_ms: float | None = field(default=None, metadata=OMIT_EMPTY)
    plan_steps: float | None = field(default=None, metadata=OMIT_EMPTY)
    plan_updates: float | None = field(default=None, metadata=OMIT_EMPTY)
    updates_per_env_step: float | None = field(default=None, metadata=OMIT_EMPTY)
    eval_passes: int | None = field(default=None, metadata=OMIT_EMPTY)
    eval_pass_seconds: float | None = field(default=None, metadata=OMIT_EMPTY)
    checkpoints: int | None = field(default=None, metadata=OMIT_EMPTY)
    checkpoint_seconds: float | None = field(default=None, metadata=OMIT_EMPTY)
    recurring_seconds: float | None = field(default=None, metadata=OMIT_EMPTY)
    batch_what_ifs: list[BatchWhatIf] = field(default_factory=list, metadata=OMIT_EMPTY)
    one_off_lower_seconds: float | None = field(default=None, metadata=OMIT_EMPTY)
    one_off_upper_seconds: float | None = field(default=None, metadata=OMIT_EMPTY)

    def to_dict(self) -> dict[str, Any]:
        if not self.estimated:
            return {"status": self.status, "estimated": False, "reason": self.reason}
        data = super().to_dict()
        del data["reason"]
        return data


@dataclass(frozen=True)
class ProjectedModel(Record):
    """One model's step (ms) and training hours projected onto a card. ``step_ms_interval`` spans the launch-kept
    and memory-bound projections widened by the projection's error; ``refused`` says why there is none;
    ``slower_cause`` why a step projects slower than measured; ``fits_at_batch``: the largest batch predicted to fit
    (0: none); ``host_share``: the measured host's share of the projected step (near 1, the rented CPU decides)."""

    step_ms: float | None
    step_ms_if_memory_bound: float | None
    speedup: float | None
    hours: float | None
    hours_upper: float | None
    fits_in_vram: bool | None
    step_ms_interval: tuple[float, float] | None = field(default=None, metadata=OMIT_EMPTY)
    hours_lower: float | None = field(default=None, metadata=OMIT_EMPTY)
    refused: str | None = field(default=None, metadata=OMIT_EMPTY)
    slower_cause: str | None = field(default=None, metadata=OMIT_EMPTY)
    fits_at_batch: int | None = field(default=None, metadata=OMIT_EMPTY)
    host_share: float | None = field(default=None, metadata=OMIT_EMPTY)


@dataclass(frozen=True)
class ScalingEfficiency(Record):
    """The data-parallel scaling efficiency a model's cloud time on ``gpus`` cards uses (throughput of ``gpus``
    processes over ``gpus`` × one's; 1.0 is linear), its interval and ``scaling_source``; ``measured`` when exactly
    ``gpus`` processes ran here, ``measured_*`` the distributed measurement it rests on."""

    gpus: int
    scaling_efficiency: float
    scaling_efficiency_interval: tuple[float, float]
    scaling_source: str
    measured: bool
    measured_world_size: int | None = field(default=None, metadata=OMIT_EMPTY)
    measured_efficiency: float | None = field(default=None, metadata=OMIT_EMPTY)


@dataclass(frozen=True)
class CardProjection(Record):
    """The decided models' training projected onto ``gpus`` cards of one catalog card (h, fit; no price): with
    ``gpus`` > 1 each model's epochs are divided by ``gpus`` × its :class:`ScalingEfficiency`; ``models``' steps stay
    one card's. ``projection_relative_error``: the projection's e (0 on the measured device, None from the CPU)."""

    card: str
    measured_device: bool
    precision: str
    peak_tflops: float | None
    attainable_tflops: float | None
    memory_bandwidth_gbps: float | None
    vram_mb: float | None
    training_hours: float | None
    training_hours_upper: float | None
    training_hours_if_memory_bound: float | None
    speedup_vs_measured: float | None
    fits_in_vram: bool | None
    models: dict[str, ProjectedModel] = field(default_factory=dict)
    training_hours_lower: float | None = field(default=None, metadata=OMIT_EMPTY)
    projection_relative_error: float | None = field(default=None, metadata=OMIT_EMPTY)
    gpus: int | None = field(default=None, metadata=OMIT_EMPTY)
    single_card_training_hours: float | None = field(default=None, metadata=OMIT_EMPTY)
    projection_interval_factors: tuple[float, float] | None = field(default=None, metadata=OMIT_EMPTY)

    @property
    def card_count(self) -> int:
        return self.gpus or 1


@dataclass(frozen=True)
class MemoryBudgetRow(Record):
    """A model's (or the ``total``'s) measured peak reserved VRAM against its budget and the card (MB)."""

    model: str
    budget_mb: float | None
    peak_reserved_mb: float | None
    within_budget: bool | None
    budget_used_fraction: float | None
    card_mb: float | None
    fraction_of_card: float | None
    status: str


@dataclass(frozen=True)
class MissingModel(Record):
    """A critical model without an estimate: its status (``not run`` when it was not selected) and why."""

    model: str
    status: str
    reason: str


@dataclass(frozen=True)
class WhatIfEstimate(Record):
    """A measured what-if's step (ms), training hours with bounds on the answer's card and peak reserved VRAM (MB),
    each beside the main measurement's; ``reason`` says why there is no estimate."""

    model: str
    variant: str
    description: str
    status: str
    step_ms: float | None = None
    main_step_ms: float | None = None
    speedup: float | None = None
    hours: float | None = None
    hours_lower: float | None = None
    hours_upper: float | None = None
    main_hours: float | None = None
    peak_reserved_mb: float | None = None
    main_peak_reserved_mb: float | None = None
    reason: str | None = None


@dataclass(frozen=True)
class Recommendation(Record):
    """The answer: the decision and the rule behind it (``decision_basis``; None: ``reasoning`` says why), the
    estimate and its bounds (h), the cost, the projection onto every catalog card, the memory budget, the actions and
    each formula (``method``). ``epochs_to_settle``: per critical model, the measured epochs that would decide (None:
    no practical number); ``cost_table``: every GPU × provider × kind of ``price_snapshot``, cheapest first."""

    _DERIVED: ClassVar[tuple[str, ...]] = ("estimated_full_training_days",)

    decision: str | None
    reasoning: str
    estimated_full_training_hours: float | None
    estimated_full_training_hours_upper: float | None
    upper_bound_level: float | None
    partial: bool
    missing_critical_models: list[MissingModel]
    critical_models: list[str]
    decided_on: list[str]
    thresholds_hours: dict[str, float]
    measured_device: str
    per_model: dict[str, ModelEstimate]
    cost_analysis: CostAnalysis | None
    projection: list[CardProjection]
    memory_budget: list[MemoryBudgetRow]
    recommended_actions: list[str]
    method: dict[str, str]
    estimated_full_training_hours_lower: float | None = field(default=None, metadata=OMIT_EMPTY)
    decision_basis: DecisionBasis | None = field(default=None, metadata=OMIT_EMPTY)
    epochs_to_settle: dict[str, int | None] | None = field(default=None, metadata=OMIT_EMPTY)
    emulated_card: str | None = field(default=None, metadata=OMIT_EMPTY)
    measured_device_hours: float | None = field(default=None, metadata=OMIT_EMPTY)
    measured_device_hours_upper: float | None = field(default=None, metadata=OMIT_EMPTY)
    what_ifs: list[WhatIfEstimate] = field(default_factory=list, metadata=OMIT_EMPTY)
    cloud_gpus: int | None = field(default=None, metadata=OMIT_EMPTY)
    scaling: dict[str, ScalingEfficiency] = field(default_factory=dict, metadata=OMIT_EMPTY)
    cost_table: list[CostRow] = field(default_factory=list, metadata=OMIT_EMPTY)
    cost_table_notes: list[str] = field(default_factory=list, metadata=OMIT_EMPTY)
    local_cost: LocalCost | None = field(default=None, metadata=OMIT_EMPTY)
    price_snapshot: PriceSnapshotInfo | None = field(default=None, metadata=OMIT_EMPTY)
    #: The sentence saying the host's speed moved during the run (None when it did not), also in ``reasoning``.
    host_note: str | None = field(default=None, metadata=OMIT_EMPTY)

    @property
    def estimated_full_training_days(self) -> float | None:
        hours = self.estimated_full_training_hours
        return None if hours is None else hours / HOURS_PER_DAY

    @property
    def local_max_hours(self) -> float | None:
        """``decision.local_max_hours``: LOCAL_GPU_VIABLE when the upper bound is under it."""
        return self.thresholds_hours.get("local_max")

    @property
    def cloud_min_hours(self) -> float | None:
        """``decision.cloud_min_hours``: CLOUD_GPU_RECOMMENDED when the lower bound is over it."""
        return self.thresholds_hours.get("cloud_min")

    def card(self, name: str) -> CardProjection | None:
        """The projection row of catalog card ``name``, None when it is not in the catalog."""
        return next((row for row in self.projection if row.card == name), None)

    def to_dict(self) -> dict[str, Any]:
        data = super().to_dict()
        # The seed's order: the days follow the hours.
        order = ("decision", "reasoning", "estimated_full_training_hours", "estimated_full_training_days")
        return {**{key: data[key] for key in order}, **data}


def recommendation_thresholds(local_max_hours: float, cloud_min_hours: float) -> dict[str, float]:
    """The recommendation's ``thresholds_hours``: the local limit on the upper bound, the cloud one on the lower (h)."""
    return {"local_max": local_max_hours, "cloud_min": cloud_min_hours}


def recommendation_method(
    *,
    estimate: str,
    upper_bound: str,
    decision: str,
    memory_budget: str,
    projection: str,
    projection_source: str,
    cost: str,
    scaling: str,
) -> dict[str, str]:
    """The recommendation's ``method``: how each of its parts is computed, in words."""
    return {
        "estimate": estimate,
        "upper_bound": upper_bound,
        "decision": decision,
        "memory_budget": memory_budget,
        "projection": projection,
        "projection_source": projection_source,
        "cost": cost,
        "scaling": scaling,
    }
