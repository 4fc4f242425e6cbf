"""The report's schema as typed records: the only module that knows the report's keys.

Every section of ``report.json`` is a dataclass here, and every key is a field name (or a figure derived from
fields, listed in ``_DERIVED`` and computed in one place). Producers (``measure/``, ``hardware/``, ``stats/``,
``decision/``) build these records; consumers (``decision/``, ``output/``) read their attributes. A renamed field
therefore fails loudly: :meth:`Record.from_dict` rejects a key it does not know, and a reader naming a field that
does not exist fails at the attribute.

The seed tool's keys are kept exactly (``timestamp``, ``benchmark_version``, ``hardware{...}``, per model
``mean_epoch_time_ms``, ``confidence_interval_ms``, ``p95_latency_ms``, ``p99_latency_ms``,
``coefficient_of_variation``, ``memory_usage_mb``, ``batch_size``, ``gradient_accumulation_steps``, ``stability``,
``loss_trend``, ``raw_epoch_times_ms``, and ``recommendation{decision, reasoning, estimated_full_training_hours,
estimated_full_training_days, cost_analysis, recommended_actions}``); every timing figure is computed over exactly
``raw_epoch_times_ms``.

Pure Python: nothing here imports torch, numpy arrays are turned into plain values on the way in.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import MISSING, dataclass, field, fields, is_dataclass
from datetime import datetime, timezone
from typing import Any, ClassVar, Literal, TypeVar, Union, get_args, get_origin

from gpubench import __version__
from gpubench.units import HOURS_PER_DAY, MS_PER_S

#: Version of the report schema; bump when a key changes meaning. Version 1 is read as is.
REPORT_SCHEMA_VERSION = 1

#: Statuses a model can end with; ``interrupted``: a signal (Ctrl-C, SIGTERM, SIGHUP) cut its measurement short, and
#: the epochs completed before it are kept.
ModelStatus = Literal["ok", "oom", "diverged", "thermal_stop", "failed", "interrupted"]
STATUSES: tuple[str, ...] = get_args(ModelStatus)

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

R = TypeVar("R", bound="Record")


class ReportFormatError(ValueError):
    """A report (or one of its sections) does not match this schema: an unknown key, or a value of the wrong kind."""


# --------------------------------------------------------------------------------------------------- the codec


def _plain(value: Any) -> Any:
    """A JSON-ready copy of ``value``: records become dicts, tuples lists, numpy scalars Python numbers."""
    if isinstance(value, Record):
        return value.to_dict()
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, str | bytes):  # a numpy scalar
        return value.item()
    return value


def _is_optional(hint: Any) -> bool:
    return get_origin(hint) in (Union, types.UnionType) and type(None) in get_args(hint)


def _build(hint: Any, value: Any, where: str) -> Any:
    """``value`` read from JSON, shaped as the type ``hint`` says (records, lists, tuples, dicts, optionals)."""
    if value is None:
        return None
    origin = get_origin(hint)
    if origin in (Union, types.UnionType):
        options = [arg for arg in get_args(hint) if arg is not type(None)]
        if len(options) == 1:
            return _build(options[0], value, where)
        return value  # a union of plain types (e.g. int | str): JSON keeps the kind
    if isinstance(hint, type) and issubclass(hint, Record):
        if not isinstance(value, Mapping):
            raise ReportFormatError(f"`{where}`: expected an object for {hint.__name__}, got {type(value).__name__}")
        return hint.from_dict(value, where=where)
    if origin in (list, tuple) and not isinstance(value, list | tuple):
        # A string would otherwise be read as the list of its characters.
        raise ReportFormatError(f"`{where}`: expected a list, got {type(value).__name__} {value!r}")
    if origin is list:
        (item,) = get_args(hint) or (Any,)
        return [_build(item, v, f"{where}[{i}]") for i, v in enumerate(value)]
    if origin is tuple:
        args = get_args(hint)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_build(args[0], v, f"{where}[{i}]") for i, v in enumerate(value))
        return tuple(_build(a, v, f"{where}[{i}]") for i, (a, v) in enumerate(zip(args, value, strict=True)))
    if origin is dict:
        _, item = get_args(hint) or (str, Any)
        return {k: _build(item, v, f"{where}.{k}") for k, v in value.items()}
    if hint in (int, float) and (isinstance(value, bool) or not isinstance(value, int | float)):
        raise ReportFormatError(f"`{where}`: expected a number, got {type(value).__name__} {value!r}")
    if hint is float and isinstance(value, int):
        return float(value)
    return value


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


class Record:
    """A report section: ``to_dict`` writes its fields by name (plus the figures in ``_DERIVED``), ``from_dict``
    reads them back, refusing keys it does not know. ``_OMITTED_WHEN_EMPTY`` fields are left out of the dict
    while None or empty (sections a run may not have, such as a batch search on the CPU)."""

    _DERIVED: ClassVar[tuple[str, ...]] = ()
    _OMITTED_WHEN_EMPTY: ClassVar[tuple[str, ...]] = ()

    def derived(self) -> dict[str, Any]:
        """The figures this record writes beside its fields (computed from them; never read back)."""
        return {}

    def to_dict(self) -> dict[str, Any]:
        """The section as JSON-ready plain values, fields in declaration order, then the derived figures."""
        assert is_dataclass(self)
        data = {
            f.name: _plain(getattr(self, f.name))
            for f in fields(self)
            if not (f.name in self._OMITTED_WHEN_EMPTY and getattr(self, f.name) in (None, [], {}, ""))
        }
        data.update(_plain(self.derived()))
        return data

    @classmethod
    def from_dict(cls: type[R], data: Mapping[str, Any], *, where: str | None = None) -> R:
        """The record from a dict written by :meth:`to_dict` (by this version or an earlier one of the schema)."""
        where = where or cls.__name__
        assert is_dataclass(cls)
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - names - set(cls._DERIVED))
        if unknown:
            raise ReportFormatError(f"`{where}` has keys this schema does not know: {', '.join(unknown)}")
        hints = _hints(cls)
        missing = [
            f.name
            for f in fields(cls)
            if f.name not in data and f.default is MISSING and f.default_factory is MISSING  # type: ignore[misc]
        ]
        if missing:
            raise ReportFormatError(f"`{where}` lacks required keys: {', '.join(missing)}")
        kwargs = {name: _build(hints[name], data[name], f"{where}.{name}") for name in names if name in data}
        return cls(**kwargs)


# --------------------------------------------------------------------------------------------------- statistics


@dataclass(frozen=True)
class RoundStatistics(Record):
    """The two variance levels of epochs measured in replicated rounds (:mod:`gpubench.stats.rounds`); ms and ms².

    ``epochs_per_round`` and ``round_means_ms`` in measurement order. ``within_variance_ms2`` is the within level's
    long-run variance per epoch, estimated as ``within_method`` says (``overlapping_batch_means_pooled`` when every
    round has enough epochs for it, else ``anova_within``, the within-round mean square, which cannot see
    autocorrelation inside a round, whose part then shows as between); ``between_variance_ms2`` the host level's
    variance σ̂_a², what the round means spread beyond the within level (truncated at 0); ``between_share`` the
    fraction of the mean's variance from the between level and ``dominant`` (``between`` | ``within``) the level
    contributing more. ``between_p_value`` is the ANOVA F test of σ_a² = 0 (it takes epochs within a round as
    independent). ``degrees_of_freedom``: the decision interval's, R − 1.
    """

    epochs_per_round: tuple[int, ...]
    round_means_ms: tuple[float, ...]
    within_variance_ms2: float
    within_method: str
    between_variance_ms2: float
    between_p_value: float
    between_share: float
    dominant: Literal["between", "within"]
    degrees_of_freedom: float


@dataclass(frozen=True)
class EpochTimeStatistics(Record):
    """Summary of one model's measured epoch times; every ``*_ms`` figure is in milliseconds.

    ``mean_ms``, ``confidence_interval_ms`` (plain Student-t on all ``n`` epochs), ``coefficient_of_variation``
    and ``p95_ms``/``p99_ms`` are the seed tool's legacy figures, computed over exactly the epochs given.
    ``decision_interval_ms`` is the autocorrelation-aware interval for the mean that decisions use, by
    ``decision_interval_method`` (see :mod:`gpubench.stats.epoch_times`); ``effective_sample_size`` is n·s²/σ̂²∞ for
    the long-run variance σ̂²∞ that interval uses. Outliers (``outlier_indices``, positions in the input) are
    flagged only; they stay in every estimate. ``lag1_autocorrelation`` is the plain sample estimate;
    ``lag1_autocorrelation_adjusted`` is the bias-corrected, clipped value, reported only.

    Drift (:func:`gpubench.stats.rounds.drift_test`): ``drift_slope_ms_per_epoch`` the fitted slope,
    ``drift_shift_ms`` the level change it implies across the measured epochs (slope × (n − 1)), ``drift_p_value``
    its two-sided p-value by ``drift_method``, ``drift_detected`` when p < 1 − ``confidence_level``. Reports written
    before 2026-12 carry Kendall's tau (``drift_kendall_tau``) instead of the slope, shift and method.
    ``rounds``: the two variance levels when the epochs were measured in two rounds or more.
    """

    n: int
    mean_ms: float
    std_ms: float
    confidence_level: float
    confidence_interval_ms: tuple[float, float]
    coefficient_of_variation: float
    cv_threshold: float
    cv_ok: bool
    p95_ms: float
    p99_ms: float
    p95_reliable: bool
    p99_reliable: bool
    median_ms: float
    median_interval_ms: tuple[float, float]
    median_interval_coverage: float
    outlier_rule: str
    outlier_indices: tuple[int, ...]
    lag1_autocorrelation: float
    lag1_autocorrelation_adjusted: float
    decision_interval_ms: tuple[float, float]
    decision_interval_method: str
    effective_sample_size: float
    relative_halfwidth: float
    target_rel_halfwidth: float
    meets_precision_target: bool
    required_epochs: int
    drift_p_value: float
    drift_detected: bool
    warnings: tuple[str, ...]
    drift_slope_ms_per_epoch: float | None = None
    drift_shift_ms: float | None = None
    drift_method: str | None = None
    #: Only in reports written before 2026-12, whose drift test was Kendall's tau of time against epoch index.
    drift_kendall_tau: float | None = None
    #: An adaptive (two-stage) run's first stage: the epochs whose variance fixed the count; None (and absent from
    #: the report) for a fixed count.
    first_stage_epochs: int | None = None
    rounds: RoundStatistics | None = None

    _OMITTED_WHEN_EMPTY: ClassVar[tuple[str, ...]] = (
        "drift_slope_ms_per_epoch",
        "drift_shift_ms",
        "drift_method",
        "drift_kendall_tau",
        "first_stage_epochs",
        "rounds",
    )

    @property
    def decision_halfwidth_ms(self) -> float:
        """Half-width of the decision interval (ms), from its upper end: the interval is centred on the mean and
        its lower end may be cut at zero (an epoch time is positive)."""
        return self.decision_interval_ms[1] - self.mean_ms

    @property
    def drift_description(self) -> str:
        """The drift test's result in words, e.g. "slope +10 ms/epoch, +110 ms over the run, p = 3.2e-11" (an older
        report's: "Kendall tau = 0.62, p = 0.0001")."""
        if self.drift_slope_ms_per_epoch is None or self.drift_shift_ms is None:
            tau = self.drift_kendall_tau if self.drift_kendall_tau is not None else float("nan")
            return f"Kendall tau = {tau:.2f}, p = {self.drift_p_value:.2g}"
        return (
            f"slope {self.drift_slope_ms_per_epoch:+.3g} ms/epoch, {self.drift_shift_ms:+.3g} ms over the run, "
            f"p = {self.drift_p_value:.2g}"
        )


# --------------------------------------------------------------------------------------------------- memory

#: What each peak counts, carried into the report next to the figures.
PEAK_DEFINITIONS: dict[str, str] = {
    "peak_allocated_mb": "live tensors at the worst moment (torch max_memory_allocated)",
    "peak_reserved_mb": "torch caching allocator's reservation at the worst moment (max_memory_reserved); "
    "what must fit under a VRAM cap",
    "peak_nvml_device_used_mb": "whole card as NVML sees it: all processes, CUDA context, library workspaces (sampled)",
    "peak_nvml_process_mb": "this process per NVML: CUDA context + reserved + workspaces (sampled; None when NVML "
    "cannot attribute memory to this process)",
}


@dataclass(frozen=True)
class LeakEstimate(Record):
    """Growth of allocated memory across epochs: the OLS slope in MB/epoch with its Student-t interval.

    ``flagged`` when the slope exceeds ``threshold_mb_per_epoch`` and the interval excludes zero.
    """

    slope_mb_per_epoch: float
    interval_mb_per_epoch: tuple[float, float]
    confidence_level: float
    threshold_mb_per_epoch: float
    epochs: int
    flagged: bool


@dataclass(frozen=True)
class MemoryProfile(Record):
    """One model's device memory over its profiled epochs (MB); see :data:`PEAK_DEFINITIONS` for each peak.

    On the CPU ``measured`` is False and every GPU figure is None. ``allocated_mb_per_epoch`` is allocated
    memory at each epoch's end (the leak series); ``leak`` is None with fewer than 3 epochs.
    ``headroom_exceeded`` / ``headroom_limit_mb`` compare the peak reserved memory with ``batch.headroom`` × the
    usable VRAM (None on the CPU).
    """

    measured: bool
    peak_allocated_mb: float | None = None
    peak_reserved_mb: float | None = None
    peak_nvml_device_used_mb: float | None = None
    peak_nvml_process_mb: float | None = None
    peak_inactive_split_mb: float | None = None
    num_alloc_retries: int | None = None
    num_ooms: int | None = None
    allocated_mb_per_epoch: list[float] = field(default_factory=list)
    peak_allocated_mb_per_epoch: list[float] = field(default_factory=list)
    peak_reserved_mb_per_epoch: list[float] = field(default_factory=list)
    peak_nvml_device_used_mb_per_epoch: list[float | None] = field(default_factory=list)
    leak: LeakEstimate | None = None
    nvml_samples: int = 0
    sample_interval_ms: float | None = None
    notes: list[str] = field(default_factory=list)
    definitions: dict[str, str] = field(default_factory=lambda: dict(PEAK_DEFINITIONS))
    headroom_exceeded: bool | None = None
    headroom_limit_mb: float | None = None


@dataclass(frozen=True)
class MemoryTimeline:
    """The NVML sampler's readings over one model's measured run, for the VRAM plot (not stored in the report):
    sample times in seconds on ``time.perf_counter``'s scale, device-used and process memory in MB (NaN where not
    read). Sequences of equal length; the sampler hands numpy arrays."""

    times_s: Sequence[float]
    device_used_mb: Sequence[float]
    process_used_mb: Sequence[float]


# --------------------------------------------------------------------------------------------------- stability


@dataclass(frozen=True)
class RLHealth(Record):
    """The health signals of a reinforcement-learning model, whose loss trend is not one (PPO's clipped surrogate
    normally rises toward zero; a DQN's TD loss rises while its values bootstrap up).

    ``critic_loss_name`` names the critic's loss (``value loss`` for PPO, ``TD loss`` for DQN);
    ``epoch_mean_critic_losses`` its mean per measured epoch (None where no step had a finite one);
    ``critic_loss_ceiling`` the largest that loss can be for a critic whose predictions and targets stay within the
    discounted returns the rewards allow (``±max |reward| / (1 − γ)``). The critic has blown up above
    ``critic_loss_ceiling_factor`` times the ceiling, or when an epoch's mean rose ``critic_loss_growth_factor``
    times over an earlier one to above the ceiling. PPO only (None for DQN): the per-epoch means of the updates'
    approximate KL and clip fraction, judged against ``approx_kl_bound`` and ``clip_fraction_bound``, and the
    largest single update's. ``steps`` counts the updates that reported these signals.
    """

    critic_loss_name: str
    epoch_mean_critic_losses: list[float | None]
    critic_loss_ceiling: float
    critic_loss_ceiling_factor: float
    critic_loss_growth_factor: float
    steps: int
    epoch_mean_approx_kls: list[float | None] | None = None
    max_approx_kl: float | None = None
    approx_kl_bound: float | None = None
    epoch_mean_clip_fractions: list[float | None] | None = None
    max_clip_fraction: float | None = None
    clip_fraction_bound: float | None = None


@dataclass(frozen=True)
class StabilityReport(Record):
    """A model's training health over its epochs.

    ``stability``: DIVERGING (a NaN/Inf loss or gradient norm was seen; ``diverged`` is true), UNSTABLE
    (exploding or vanishing gradient norms; an INCREASING loss trend where the loss trend is judged; for RL a
    critic-loss blow-up or growth, or PPO's approximate KL or clip fraction beyond their bounds), STABLE, or
    NOT_CHECKED (``stability.enabled=false``, or steps that reported neither a loss nor a gradient norm: a
    ``model=custom`` step may return no loss). ``loss_trend`` and ``loss_rel_slope_per_epoch`` (fraction of the
    mean loss per epoch) use the epochs with a finite mean loss and are None with fewer than two;
    :attr:`loss_trend_judged` is False for RL, whose loss trend is reported but says nothing about health (``rl``
    holds the signals that do). Totals are step counts, None when not checked; ``first_nonfinite_epoch`` is the 0-based
    index of the first epoch with a NaN/Inf.
    """

    stability: Literal["STABLE", "UNSTABLE", "DIVERGING", "NOT_CHECKED"]
    loss_trend: Literal["DECREASING", "STABLE", "INCREASING"] | None
    loss_rel_slope_per_epoch: float | None
    diverged: bool
    reasons: list[str]
    epochs: int
    steps: int
    epoch_mean_losses: list[float | None]
    max_grad_norm: float | None
    nonfinite_loss_steps: int | None
    nonfinite_grad_steps: int | None
    exploding_steps: int | None
    vanishing_steps: int | None
    first_nonfinite_epoch: int | None
    loss_slope_p_value: float | None = None
    rl: RLHealth | None = None

    _OMITTED_WHEN_EMPTY: ClassVar[tuple[str, ...]] = ("rl",)

    @property
    def loss_trend_judged(self) -> bool:
        """Whether the loss trend counts toward ``stability``: not for RL (``rl`` is set), whose loss is a surrogate
        or a TD loss."""
        return self.rl is None


# --------------------------------------------------------------------------------------------------- batch search


@dataclass(frozen=True)
class BatchTrial(Record):
    """One trial of the batch search: its size, outcome and measurements (None where it ran out of memory).

    ``status`` is ``ok``; ``oom`` (the trial raised an out-of-memory error, whose first line is ``error``); or
    ``over_headroom`` (it ran, but its peak reserved memory in MB exceeded the headroom limit). ``phase`` says
    whether the search or the re-verification of the winner ran it, ``steps`` how many training steps it ran.
    """

    size: int
    status: Literal["ok", "oom", "over_headroom"]
    phase: Literal["search", "verify"]
    steps: int = 0
    peak_reserved_mb: float | None = None
    samples_per_s: float | None = None
    error: str | None = None
    #: Wall time of the trial's steps (s); None in reports written before it was recorded.
    seconds: float | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@dataclass(frozen=True)
class ThroughputPoint(Record):
    """Samples per second measured at one batch size (a point of the throughput curve)."""

    size: int
    samples_per_s: float


@dataclass(frozen=True)
class BatchSearchResult(Record):
    """The batch search's answer and the evidence for it (sizes in samples, memory in MB).

    ``status`` is ``ok`` or ``oom`` (not even ``batch.min_size`` fits; ``batch_size`` is None and ``message`` says
    why). ``largest_fitting_size`` is the search's answer; ``batch_size`` the largest size that also passed
    re-verification (it can be smaller). ``throughput_curve`` holds the successful search trials up to
    ``batch_size``, by size; ``knee_size`` is its knee (the smallest size within ``knee_fraction`` of the best
    throughput). ``peak_limit_mb`` is ``batch.headroom`` × usable VRAM. ``trials`` lists search then verification
    trials in the order they ran. ``policy`` (``batch.policy``) chose ``batch_size`` from the search's answer,
    ``configured_size`` being the recipe's batch; ``time_limited``: the search stopped once a trial took longer than
    ``trial_max_seconds`` (s), so ``largest_fitting_size`` is a lower bound. Reports written before the policy
    existed timed the largest fitting size (``max``). ``batch_is_hyperparameter``: the batch is the algorithm's own
    (an RL replay or PPO minibatch, or the user's), so the throughput curve says what fits and how fast, but a plan
    at another batch would be another training, and no batch what-if is priced from it.
    """

    status: Literal["ok", "oom"]
    batch_size: int | None
    largest_fitting_size: int | None
    gradient_accumulation_steps: int | None
    effective_batch_size: int | None
    target_effective_batch_size: int
    knee_size: int | None
    knee_fraction: float
    throughput_curve: list[ThroughputPoint]
    peak_reserved_mb: float | None
    peak_limit_mb: float | None
    search_min_size: int
    search_max_size: int
    verify_repeats: int
    message: str
    trials: list[BatchTrial]
    search_steps: int | None = None
    verify_steps: int | None = None
    policy: str = "max"
    configured_size: int | None = None
    time_limited: bool = False
    trial_max_seconds: float | None = None
    batch_is_hyperparameter: bool = False


@dataclass(frozen=True)
class BatchStepDown(Record):
    """A measurement abandoned because its peak reserved memory (MB) broke the headroom limit."""

    batch_size: int
    peak_reserved_mb: float
    headroom_limit_mb: float
    mean_epoch_time_ms: float | None
    samples_per_second: float | None


# --------------------------------------------------------------------------------------------------- device


@dataclass(frozen=True)
class DeviceEpoch(Record):
    """The device during one epoch (``phase`` warmup or measured, ``epoch`` counted from 1 within the phase).

    Temperature (°C), SM clock (MHz), power (W) and throttle reasons are read at the epoch's end; ``energy_j`` is
    NVML's energy counter's increase over the epoch and ``mean_power_w`` that energy over the epoch's wall time.
    Every figure is None (``temperature_status`` ``not measured``) on the CPU.
    """

    phase: Literal["warmup", "measured"]
    epoch: int
    temperature_c: float | None
    temperature_status: str
    sm_clock_mhz: float | None
    power_w: float | None
    mean_power_w: float | None
    throttle_reasons: list[str] | None
    energy_j: float | None
    throttled: bool | None
    throttle_cause: str | None


@dataclass(frozen=True)
class EnergySummary(Record):
    """Mean energy of the measured epochs from NVML's counter: joules per epoch and per sample."""

    joules_per_epoch: float
    joules_per_sample: float | None
    epochs: int


@dataclass(frozen=True)
class ExecutionSettings(Record):
    """How the workload ran: autocast precision (fp32, bf16, fp16), compilation mode and the fp32 matmul precision
    (None in reports written before it was a key: PyTorch's default, ``highest``)."""

    _OMITTED_WHEN_EMPTY: ClassVar[tuple[str, ...]] = ("matmul_precision",)

    precision: str
    compile: str
    matmul_precision: str | None = None


@dataclass(frozen=True)
class Throughput(Record):
    """Samples per second (higher is better) with the images of the time intervals (``unit`` names the sample).

    An end is None where the time interval reaches down to zero: throughput is unbounded there.
    """

    mean: float | None
    confidence_interval: tuple[float | None, float | None]
    decision_interval: tuple[float | None, float | None]
    unit: str


@dataclass(frozen=True)
class EvaluationCost(Record):
    """One evaluation call measured: milliseconds per call of ``samples_per_call`` samples (the mean over a block
    of ``calls_timed`` calls)."""

    ms_per_call: float
    samples_per_call: float
    calls_timed: int


@dataclass(frozen=True)
class CheckpointCost(Record):
    """One checkpoint measured: milliseconds per ``torch.save`` of the model and optimizer state (the mean of
    ``saves_timed`` saves), and the file's size in MB."""

    ms_per_save: float
    size_mb: float
    saves_timed: int


# --------------------------------------------------------------------------------------------------- one model


def _samples_per_second(samples_per_epoch: float, time_ms: float) -> float | None:
    return samples_per_epoch / (time_ms / MS_PER_S) if time_ms > 0 else None


@dataclass(frozen=True)
class DistributedScaling(Record):
    """The model measured data-parallel (``distributed.nproc`` > 1): ``world_size`` processes launched by torchrun,
    each training its own batch of ``batch_size_per_rank`` under DistributedDataParallel (``backend``: nccl on GPUs,
    gloo on the CPU), every rank timing the same ``steps_per_epoch``.

    ``raw_epoch_times_ms`` are the global epochs: per epoch, the slowest rank's time (the gradient all-reduce makes
    every step wait for the slowest rank, so a global epoch ends with it); ``per_rank_epoch_times_ms[r]`` are rank
    r's own. ``statistics`` summarises ``raw_epoch_times_ms`` as a model's do. Throughputs are in the workload's
    sample unit per second (``sample_unit``). ``scaling_efficiency`` is the global throughput over ``world_size`` ×
    ``single_process_samples_per_second`` (the same job's 1-process measurement of the same model at the same batch):
    1.0 is linear scaling; ``scaling_efficiency_interval`` is its interval at the job's confidence level, by
    ``scaling_efficiency_method`` (see :mod:`gpubench.distributed.scaling`). ``status`` and ``error`` as a model's:
    an out-of-memory, failed or interrupted distributed run leaves the 1-process result untouched. ``warnings``
    say where the run differs from the 1-process one (a smaller batch per rank when the agreed search found the
    1-process batch does not fit under DDP).
    """

    _OMITTED_WHEN_EMPTY: ClassVar[tuple[str, ...]] = ("batch_search", "error", "warnings")

    status: ModelStatus = "ok"
    error: str | None = None
    world_size: int = 1
    backend: str | None = None
    launcher: str = "torchrun"
    batch_size_per_rank: int | None = None
    steps_per_epoch: int | None = None
    samples_per_step_per_rank: float | None = None
    sample_unit: str | None = None
    raw_epoch_times_ms: list[float] = field(default_factory=list)
    warmup_epoch_times_ms: list[float] = field(default_factory=list)
    per_rank_epoch_times_ms: list[list[float]] = field(default_factory=list)
    statistics: EpochTimeStatistics | None = None
    per_rank_samples_per_second: list[float] = field(default_factory=list)
    global_samples_per_second: float | None = None
    single_process_samples_per_second: float | None = None
    scaling_efficiency: float | None = None
    scaling_efficiency_interval: tuple[float, float] | None = None
    scaling_efficiency_method: str | None = None
    peak_reserved_mb_per_rank: list[float] = field(default_factory=list)
    batch_search: BatchSearchResult | None = None
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class HostProbe(Record):
    """A fixed amount of host work, timed (ms): a pure-Python loop and a small torch CPU operation. The same work
    every time, so a slower reading means a slower host at that moment (a shared or throttled CPU), not other work.
    ``cpu`` is the CPU the process ran on (None where the OS does not say)."""

    python_loop_ms: float
    torch_cpu_op_ms: float
    cpu: int | None = None


@dataclass(frozen=True)
class MeasuredRound(Record):
    """One round of a model's measured epochs: ``epochs`` consecutive epochs timed after a warmed start.

    ``index`` counts the job's rounds from 1 across every model (rounds are interleaved round-robin, so a model's
    rounds are spread over the job's measuring time); ``started_s`` is when the round began, in seconds since the
    job's first round; ``mean_epoch_ms`` is the mean of its epochs. ``host_probe`` is the host's speed read just
    before the round; ``sm_clock_mhz``, ``power_w`` (means over the round's epochs) and ``throttled`` (any epoch
    throttled) come from the device monitor, None where it has no reading (the CPU)."""

    index: int
    epochs: int
    mean_epoch_ms: float
    started_s: float
    host_probe: HostProbe | None = None
    sm_clock_mhz: float | None = None
    power_w: float | None = None
    throttled: bool | None = None


@dataclass(frozen=True)
class ModelResult(Record):
    """One model's outcome. ``status`` is one of :data:`STATUSES`; ``error`` says why when it is not ``ok``.

    Times in ms, memory in MB. ``statistics`` summarises exactly ``raw_epoch_times_ms`` (None with fewer than two
    measured epochs); the seed's headline figures (``mean_epoch_time_ms``, ``confidence_interval_ms``, ...) and
    the throughput are derived from it. ``memory_usage_mb`` is the peak reserved VRAM of the measured run.
    """

    _DERIVED: ClassVar[tuple[str, ...]] = (
        "mean_epoch_time_ms",
        "confidence_interval_ms",
        "p95_latency_ms",
        "p99_latency_ms",
        "coefficient_of_variation",
        "samples_per_second",
    )
    _OMITTED_WHEN_EMPTY: ClassVar[tuple[str, ...]] = (
        "batch_search",
        "batch_policy",
        "batch_step_downs",
        "warnings",
        "traceback",
        "calibration_steps",
        "launches_per_step",
        "bytes_per_step",
        "updates_per_step",
        "updates_per_env_step",
        "evaluation",
        "checkpoint",
        "distributed",
        "rounds",
        "host_probe_explained_share",
    )

    status: ModelStatus = "ok"
    error: str | None = None
    memory_usage_mb: float | None = None
    batch_size: int | None = None
    gradient_accumulation_steps: int = 1
    stability: str | None = None
    loss_trend: str | None = None
    raw_epoch_times_ms: list[float] = field(default_factory=list)
    warmup_epoch_times_ms: list[float] = field(default_factory=list)
    epoch_losses: list[float] = field(default_factory=list)
    warmup_epoch_losses: list[float] = field(default_factory=list)
    steps_per_epoch: int | None = None
    samples_per_step: float | None = None
    sample_unit: str | None = None
    first_step_ms: float | None = None
    calibration_seconds: float | None = None
    stop_reason: str | None = None
    statistics: EpochTimeStatistics | None = None
    batch_search: BatchSearchResult | None = None
    batch_policy: str | None = None
    batch_step_downs: list[BatchStepDown] = field(default_factory=list)
    flops_per_step: float | None = None
    launches_per_step: int | None = None
    workload: dict[str, Any] = field(default_factory=dict)
    execution: ExecutionSettings | None = None
    memory: MemoryProfile | None = None
    device_epochs: list[DeviceEpoch] = field(default_factory=list)
    stability_details: StabilityReport | None = None
    energy: EnergySummary | None = None
    warnings: list[str] = field(default_factory=list)
    traceback: str | None = None
    #: Optimizer steps run while sizing the epoch (the first step and the probe blocks), whose time is
    #: ``calibration_seconds``: with the warmup and measured epochs, every step the benchmark ran for the model.
    calibration_steps: int | None = None
    #: Gradient updates per workload step; for RL also per environment step (the update-to-data ratio).
    updates_per_step: float | None = None
    updates_per_env_step: float | None = None
    evaluation: EvaluationCost | None = None
    checkpoint: CheckpointCost | None = None
    #: The data-parallel measurement of the same model (``distributed.nproc`` > 1), None in a 1-process job.
    distributed: DistributedScaling | None = None
    #: Bytes of the tensor inputs and outputs of the step's counted kernel launches (each storage once per
    #: operation): the step's DRAM traffic with no cache reuse, an upper bound. None where not counted.
    bytes_per_step: int | None = None
    #: The measured epochs in rounds, in the order measured (``raw_epoch_times_ms`` is their epochs, round after
    #: round); empty for a run measured in one block.
    rounds: list[MeasuredRound] = field(default_factory=list)
    #: How much of the spread of the round means the host probe explains: R² of the round means regressed on the
    #: probe's Python-loop time (None with fewer than three probed rounds, or a probe that did not vary).
    host_probe_explained_share: float | None = None

    @property
    def epochs_per_round(self) -> list[int]:
        """The epochs of each round, in order; one round of every measured epoch for a run measured in one block."""
        if self.rounds:
            return [r.epochs for r in self.rounds]
        return [len(self.raw_epoch_times_ms)] if self.raw_epoch_times_ms else []

    # -- the seed's headline figures, over exactly raw_epoch_times_ms

    @property
    def mean_epoch_time_ms(self) -> float | None:
        return self.statistics.mean_ms if self.statistics else None

    @property
    def confidence_interval_ms(self) -> tuple[float, float] | None:
        return self.statistics.confidence_interval_ms if self.statistics else None

    @property
    def p95_latency_ms(self) -> float | None:
        return self.statistics.p95_ms if self.statistics else None

    @property
    def p99_latency_ms(self) -> float | None:
        return self.statistics.p99_ms if self.statistics else None

    @property
    def coefficient_of_variation(self) -> float | None:
        return self.statistics.coefficient_of_variation if self.statistics else None

    @property
    def samples_per_epoch(self) -> float | None:
        """Samples one benchmark epoch consumes (steps per epoch × samples per step)."""
        if not self.steps_per_epoch or not self.samples_per_step:
            return None
        return self.steps_per_epoch * self.samples_per_step

    @property
    def step_time_ms(self) -> float | None:
        """Mean time of one optimizer step (ms)."""
        if self.statistics is None or not self.steps_per_epoch:
            return None
        return self.statistics.mean_ms / self.steps_per_epoch

    @property
    def samples_per_second(self) -> Throughput | None:
        """Throughput from the mean epoch time and its intervals.

        The interval on throughput maps the time interval's ends through ``samples_per_epoch / t``, which is
        monotone, so the coverage carries over exactly.
        """
        samples_per_epoch = self.samples_per_epoch
        if self.statistics is None or samples_per_epoch is None:
            return None
        stats = self.statistics
        t_lo, t_hi = stats.confidence_interval_ms
        d_lo, d_hi = stats.decision_interval_ms
        return Throughput(
            mean=_samples_per_second(samples_per_epoch, stats.mean_ms),
            confidence_interval=(
                _samples_per_second(samples_per_epoch, t_hi),
                _samples_per_second(samples_per_epoch, t_lo),
            ),
            decision_interval=(
                _samples_per_second(samples_per_epoch, d_hi),
                _samples_per_second(samples_per_epoch, d_lo),
            ),
            unit=f"{self.sample_unit}/s",
        )

    @property
    def peak_reserved_mb(self) -> float | None:
        """Peak reserved VRAM of the measured run (MB), None where not measured."""
        return self.memory.peak_reserved_mb if self.memory else None

    @property
    def measured_device_epochs(self) -> list[DeviceEpoch]:
        return [epoch for epoch in self.device_epochs if epoch.phase == "measured"]

    def derived(self) -> dict[str, Any]:
        return {
            "mean_epoch_time_ms": self.mean_epoch_time_ms,
            "confidence_interval_ms": self.confidence_interval_ms,
            "p95_latency_ms": self.p95_latency_ms,
            "p99_latency_ms": self.p99_latency_ms,
            "coefficient_of_variation": self.coefficient_of_variation,
            "samples_per_second": self.samples_per_second,
        }

    def to_dict(self) -> dict[str, Any]:
        """The model's section of the report, the seed's keys first."""
        data = super().to_dict()
        seed_first = (
            "status",
            "error",
            "mean_epoch_time_ms",
            "confidence_interval_ms",
            "p95_latency_ms",
            "p99_latency_ms",
            "coefficient_of_variation",
            "memory_usage_mb",
            "batch_size",
            "gradient_accumulation_steps",
            "stability",
            "loss_trend",
            "raw_epoch_times_ms",
        )
        return {**{key: data[key] for key in seed_first}, **data}


# --------------------------------------------------------------------------------------------------- hardware, run


@dataclass(frozen=True)
class WarmupStats(Record):
    """The burn-in before measuring: how long it ran (s) and the state it left the device in.

    ``epochs`` counts burn-in iterations (``matmuls_per_iteration`` matmuls of ``matrix_size``² each);
    ``mean_time_ms`` is the mean iteration time over the final window, the level it settled at.
    ``peak_sm_clock_mhz`` is the highest SM clock seen, the reference for flagging throttled epochs.
    """

    epochs: int
    mean_time_ms: float
    final_temperature_celsius: float | None
    final_sm_clock_mhz: float | None
    peak_sm_clock_mhz: float | None
    stabilised: bool
    seconds: float
    matrix_size: int
    matmuls_per_iteration: int
    achieved_tflops: float


#: Fields of HardwareReport that a CPU run (or a GPU without NVML) leaves unmeasured; listed in ``not_measured``.
_DEVICE_FIELDS: tuple[str, ...] = (
    "total_vram_mb",
    "cuda_version",
    "cuda_driver_version",
    "driver_version",
    "compute_capability",
    "uuid",
    "nvml_index",
    "power_limit_w",
    "sm_clock_mhz",
    "max_sm_clock_mhz",
    "temperature_c",
    "throttle_reasons",
    "warmup_stats",
)


@dataclass(frozen=True)
class HardwareReport(Record):
    """What the benchmark ran on (the report's ``hardware`` object).

    ``measured_on`` is ``cuda`` or ``cpu``. ``cuda_version`` is the CUDA runtime torch was built with;
    ``cuda_driver_version`` the newest CUDA the driver supports (NVML). The CPU fields describe the host in both
    cases (RL environments run there). The VRAM budget (MB): ``vram_limit_mb`` is the emulated card (or the whole
    card), ``non_allocator_overhead_mb`` what the process holds outside torch's allocator, ``usable_vram_mb`` the
    rest, which the allocator is capped at; all None on the CPU.
    """

    _DERIVED: ClassVar[tuple[str, ...]] = ("not_measured",)

    measured_on: str
    device_name: str
    total_vram_mb: float | None = None
    cuda_version: str | None = None
    cuda_driver_version: str | None = None
    driver_version: str | None = None
    compute_capability: str | None = None
    uuid: str | None = None
    torch_index: int | None = None
    nvml_index: int | None = None
    power_limit_w: float | None = None
    sm_clock_mhz: float | None = None
    max_sm_clock_mhz: float | None = None
    temperature_c: float | None = None
    throttle_reasons: list[str] | None = None
    nvml_available: bool = False
    energy_counter_available: bool = False
    cpu_name: str = ""
    cpu_logical_cores: int | None = None
    ram_mb: float | None = None
    notices: list[str] = field(default_factory=list)
    warmup_stats: WarmupStats | None = None
    vram_limit_mb: float | None = None
    non_allocator_overhead_mb: float | None = None
    usable_vram_mb: float | None = None
    overhead_source: str | None = None

    @property
    def not_measured(self) -> list[str]:
        """The device fields left None (not measured on this device)."""
        return [name for name in _DEVICE_FIELDS if getattr(self, name) is None]

    @property
    def card_memory_mb(self) -> float | None:
        """VRAM (MB) the models had: the usable VRAM under a cap, else the card's total; None on the CPU."""
        return self.usable_vram_mb or self.total_vram_mb

    @property
    def on_gpu(self) -> bool:
        return self.measured_on == "cuda"

    def derived(self) -> dict[str, Any]:
        return {"not_measured": self.not_measured}


@dataclass(frozen=True)
class DataProvenance(Record):
    """Where the market data came from: source, files, bars, symbols, time range (ISO 8601), cache and load time.

    ``files`` counts every file data.path named; ``empty_files`` lists those among them that held no bars (DBN
    files with metadata only) and were skipped; it is left out of the report when there were none."""

    _OMITTED_WHEN_EMPTY: ClassVar[tuple[str, ...]] = ("empty_files",)

    source: str
    path: str | None
    files: int
    bars: int
    symbols: list[str]
    first_timestamp: str | None
    last_timestamp: str | None
    cache_hit: bool
    load_seconds: float
    content_hash: str | None
    empty_files: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class HostLoad(Record):
    """The host when the run started: its CPUs (all, and those this process may use), the 1/5/15-minute load
    averages (runnable processes; None where the OS has none), torch's intra-op and inter-op thread counts, how the
    intra-op count was chosen, and the OpenMP/MKL thread variables that were set."""

    cpu_count: int
    available_cpus: int
    load_average_1m: float | None
    load_average_5m: float | None
    load_average_15m: float | None
    torch_num_threads: int
    torch_interop_threads: int
    threads_source: str
    thread_environment: dict[str, str] = field(default_factory=dict)


#: What a run made with a preset (``experiment=<name>``) stands for, where its numbers are not the user's training.
PRESET_NOTES: dict[str, str] = {"quick": "smoke test: tiny shapes, not your training"}


@dataclass(frozen=True)
class RunInfo(Record):
    """The job: device, models, epochs, execution mode, the hardware settings, what Hydra overrode and chose, where
    it wrote, versions and the gpubench commit; ``mlflow_run_id`` once the run is logged; ``host`` the host's load
    and thread settings (None in reports written before they were recorded). Derived: ``preset``, the
    ``experiment`` preset chosen, and ``preset_note``, what its numbers stand for (``quick``: a smoke test), both
    written only when there is one."""

    _OMITTED_WHEN_EMPTY: ClassVar[tuple[str, ...]] = ("mlflow_run_id", "host", "matmul_precision")
    _DERIVED: ClassVar[tuple[str, ...]] = ("preset", "preset_note")

    device: str
    models: list[str]
    epochs: int
    warmup_epochs: int
    precision: str
    compile: str
    seed: int
    hardware_config: dict[str, Any] = field(default_factory=dict)
    overrides: list[str] = field(default_factory=list)
    choices: dict[str, str] = field(default_factory=dict)
    output_dir: str | None = None
    sweep_dir: str | None = None
    job_num: int | None = None
    versions: dict[str, str | None] = field(default_factory=dict)
    git_commit: str | None = None
    mlflow_run_id: str | None = None
    host: HostLoad | None = None
    matmul_precision: str | None = None

    @property
    def preset(self) -> str | None:
        """The ``experiment`` preset the job was composed with (``quick``, ``seed``), None without one."""
        choice = self.choices.get("experiment")
        return None if choice in (None, "", "null") else choice

    @property
    def preset_note(self) -> str | None:
        """What the preset's numbers stand for when they are not the user's training (``quick``: a smoke test)."""
        return None if self.preset is None else PRESET_NOTES.get(self.preset)

    def derived(self) -> dict[str, Any]:
        figures = {"preset": self.preset, "preset_note": self.preset_note}
        return {key: value for key, value in figures.items() if value is not None}

    @property
    def fp32_matmul_precision(self) -> str:
        """``execution.matmul_precision``: ``highest`` (PyTorch's default) in reports written before the key."""
        return self.matmul_precision or "highest"

    @property
    def torch_version(self) -> str | None:
        return self.versions.get("torch")

    @property
    def python_version(self) -> str | None:
        return self.versions.get("python")


# --------------------------------------------------------------------------------------------------- recommendation


@dataclass(frozen=True)
class StepSplit(Record):
    """A measured step (ms) split into its compute part (FLOPs at the device's attainable rate) and the rest.

    ``bound`` is compute-bound when compute is at least half the step, overhead-bound otherwise, unknown without a
    FLOP count or an attainable rate. The rest splits further into ``launch_ms`` (``launches_per_step`` kernel
    launches at the documented per-launch host cost, at most the rest) and ``memory_ms``. Where the step's bytes
    were counted (``bytes_per_step``) and the device's memory bandwidth is known, ``memory_ms`` is that traffic's
    time at the bandwidth (at most what remains after compute and launches) and ``host_ms`` what remains after it
    (Python, dispatch: host work outside the launches). Otherwise ``memory_ms`` is all that remains (memory traffic
    and host work together) and ``host_ms`` None; ``launch_ms`` and ``memory_ms`` are None where the launches were
    not counted either (older reports).
    """

    _OMITTED_WHEN_EMPTY: ClassVar[tuple[str, ...]] = (
        "launches_per_step",
        "launch_ms",
        "memory_ms",
        "bytes_per_step",
        "host_ms",
    )

    step_ms: float
    flops_per_step: float | None
    achieved_tflops: float | None
    achieved_fraction: float | None
    compute_ms: float | None
    other_ms: float | None
    bound: str
    compute_share: float | None
    launches_per_step: int | None = None
    launch_ms: float | None = None
    memory_ms: float | None = None
    bytes_per_step: int | None = None
    host_ms: float | None = None


@dataclass(frozen=True)
class BatchWhatIf(Record):
    """The plan at another batch size: ``plan_hours`` = plan samples ÷ ``samples_per_s``, the throughput one short
    search trial of ``trial_steps`` steps measured at ``batch_size`` (steps only: no warmup, evaluation or
    checkpoints). ``label`` says which point it is (``knee``, ``largest fitting``, or empty)."""

    batch_size: int
    samples_per_s: float
    plan_hours: float
    trial_steps: int | None
    label: str = ""


@dataclass(frozen=True)
class ModelEstimate(Record):
    """One model's full training on the measured device, or why it has none (``estimated`` false, ``reason``).

    ``planned_epochs`` (N) benchmark epochs of ``samples_per_epoch`` samples make the plan of ``plan_samples``;
    ``mean_epoch_ms`` and ``halfwidth_ms`` are the mean epoch time and its decision interval's half-width over
    ``measured_epochs`` (n) epochs; ``one_off_seconds`` the calibration and warmup. ``estimated_hours`` and
    ``estimated_hours_upper`` (a prediction bound at ``upper_bound_level``) are the training's hours;
    ``energy_kwh`` its energy on the measured device (``energy_basis``: nvml or board_power_w).
    ``estimated_hours_lower`` is the lower prediction bound at the same level, never below the one-off costs;
    ``drift_margin_hours`` the part of the margin added for flagged drift or throttled epochs (None when neither
    was flagged); both are None in reports written before they existed (and left out of the dict).
    ``relative_margin_floor_applied`` is read from reports written while a 12% floor bounded the margin (before
    2026-12-02), whether it did there; gpubench no longer writes it (bounds come from the measured rounds).

    The plan in the team's terms: ``plan_steps`` optimizer steps of the workload (plan samples ÷ samples per step),
    ``plan_updates`` gradient updates, ``updates_per_env_step`` (RL) their ratio to environment steps.
    ``eval_passes`` validation passes of ``eval_pass_seconds`` each and ``checkpoints`` saves of
    ``checkpoint_seconds`` each add ``recurring_seconds`` to the estimate (and to both bounds). ``batch_what_ifs``
    is the plan's time at each batch the search measured. All are None (or empty) in older reports.
    ``one_off_lower_seconds`` / ``one_off_upper_seconds``: the range a fresh training's one-off costs lie in (the
    first-time cost at the timed batch bracketed by the run's observations, ``decision.estimate.first_time_cost``);
    the bounds take the one-off costs at the matching end. None in older reports.
    """

    _OMITTED_WHEN_EMPTY: ClassVar[tuple[str, ...]] = (
        "one_off_lower_seconds",
        "one_off_upper_seconds",
        "estimated_hours_lower",
        "drift_margin_hours",
        "relative_margin_floor_applied",
        "projected_onto",
        "measured_step_ms",
        "plan_steps",
        "plan_updates",
        "updates_per_env_step",
        "eval_passes",
        "eval_pass_seconds",
        "checkpoints",
        "checkpoint_seconds",
        "recurring_seconds",
        "batch_what_ifs",
    )

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
    estimated_hours_lower: float | None = None
    drift_margin_hours: float | None = None
    relative_margin_floor_applied: bool | None = None
    projected_onto: str | None = None
    measured_step_ms: float | None = None
    plan_steps: float | None = None
    plan_updates: float | None = None
    updates_per_env_step: float | None = None
    eval_passes: int | None = None
    eval_pass_seconds: float | None = None
    checkpoints: int | None = None
    checkpoint_seconds: float | None = None
    recurring_seconds: float | None = None
    batch_what_ifs: list[BatchWhatIf] = field(default_factory=list)
    one_off_lower_seconds: float | None = None
    one_off_upper_seconds: float | None = None

    def to_dict(self) -> dict[str, Any]:
        # A model without an estimate is written as its status, ``estimated: false`` and the reason alone.
        if not self.estimated:
            return {"status": self.status, "estimated": False, "reason": self.reason}
        data = super().to_dict()
        del data["reason"]
        return data


@dataclass(frozen=True)
class ProjectedModel(Record):
    """One model's step (ms) and training hours projected onto a card; ``fits_in_vram`` from its measured peak.

    ``step_ms_interval`` spans the launch-kept and the memory-bound projections widened by the projection's own
    relative error; ``hours_lower``/``hours_upper`` are the training's bounds with it. ``refused`` says why there
    is no projection (a figure it needs was not measured); None when there is one. ``slower_cause`` says why a step
    projected slower than the one measured is so (None when it is not slower, or on the measured device).
    """

    _OMITTED_WHEN_EMPTY: ClassVar[tuple[str, ...]] = ("step_ms_interval", "hours_lower", "refused", "slower_cause")

    step_ms: float | None
    step_ms_if_memory_bound: float | None
    speedup: float | None
    hours: float | None
    hours_upper: float | None
    fits_in_vram: bool | None
    step_ms_interval: tuple[float, float] | None = None
    hours_lower: float | None = None
    refused: str | None = None
    slower_cause: str | None = None


@dataclass(frozen=True)
class ScalingEfficiency(Record):
    """The data-parallel scaling efficiency one model's cloud time on ``gpus`` cards is computed with: the global
    throughput of ``gpus`` data-parallel processes over ``gpus`` × one process's (1.0 is linear scaling), its
    interval, and where it comes from (``scaling_source``: ``measured at 2 processes (nccl)``, ``extrapolated from
    ...`` or ``assumed: ...``). ``measured`` is true only when this machine measured exactly ``gpus`` processes;
    ``measured_world_size`` and ``measured_efficiency`` are the distributed measurement it rests on (None when
    there is none)."""

    _OMITTED_WHEN_EMPTY: ClassVar[tuple[str, ...]] = ("measured_world_size", "measured_efficiency")

    gpus: int
    scaling_efficiency: float
    scaling_efficiency_interval: tuple[float, float]
    scaling_source: str
    measured: bool
    measured_world_size: int | None = None
    measured_efficiency: float | None = None


@dataclass(frozen=True)
class CardProjection(Record):
    """The decided models' training projected onto ``gpus`` cards of one catalog card: hours, upper bound, cost
    (USD) and fit.

    With ``gpus`` > 1 (``decision.cloud_gpus``) the hours are those of ``gpus`` data-parallel cards (each model's
    epochs divided by ``gpus`` × its :class:`ScalingEfficiency`, the fixed costs kept; the bounds widened by the
    efficiency's interval), ``cost_usd_per_training`` is ``gpus`` × ``hourly_price_usd`` (one card's) × those
    hours, and ``single_card_training_hours`` is one card's time (None, and left out, for one card). The models'
    ``step_ms`` stay one card's step. ``speedup_vs_measured`` is the measured device's hours over these.
    ``projection_relative_error`` is the e of a projection from a GPU (0 on the measured device; None from the
    CPU), ``projection_interval_factors`` the range a projected step can have, as multiples of it (below, above:
    ``gpubench.decision.projection.interval_factors``; None in reports written before it).
    """

    _OMITTED_WHEN_EMPTY: ClassVar[tuple[str, ...]] = (
        "training_hours_lower",
        "projection_relative_error",
        "gpus",
        "single_card_training_hours",
        "projection_interval_factors",
    )

    card: str
    measured_device: bool
    precision: str
    peak_tflops: float | None
    attainable_tflops: float | None
    memory_bandwidth_gbps: float | None
    vram_mb: float | None
    hourly_price_usd: float | None
    training_hours: float | None
    training_hours_upper: float | None
    training_hours_if_memory_bound: float | None
    speedup_vs_measured: float | None
    cost_usd_per_training: float | None
    fits_in_vram: bool | None
    models: dict[str, ProjectedModel] = field(default_factory=dict)
    training_hours_lower: float | None = None
    projection_relative_error: float | None = None
    gpus: int | None = None
    single_card_training_hours: float | None = None
    projection_interval_factors: tuple[float, float] | None = None

    @property
    def card_count(self) -> int:
        """The cards this row rents: ``gpus``, or one in a report written before ``decision.cloud_gpus``."""
        return self.gpus or 1


@dataclass(frozen=True)
class CostAnalysis(Record):
    """Local-vs-cloud cost of the planned training (USD, hours, kWh); figures that cannot be computed are None
    and ``notes`` says why. The seed's keys come first.

    The cloud side rents ``cloud_gpus`` cards of ``cloud_card`` (``decision.cloud_gpus``): ``cloud_training_hours``
    (with its bounds ``cloud_training_hours_lower``/``_upper``) is their projected time, ``cloud_hourly_price_usd``
    one card's price, ``cloud_cost_usd_per_training`` = ``cloud_gpus`` × price × hours, and
    ``cloud_single_card_training_hours`` one card's time (None, and left out, for one card). The local side is
    always the one card measured. ``cheapest_card`` is the catalog card whose ``cloud_gpus`` cards cost least per
    training among those the models fit on, with its hours and cost.
    """

    _OMITTED_WHEN_EMPTY: ClassVar[tuple[str, ...]] = (
        "cloud_gpus",
        "cloud_training_hours_lower",
        "cloud_training_hours_upper",
        "cloud_single_card_training_hours",
        "cheapest_card",
        "cheapest_card_training_hours",
        "cheapest_card_cost_usd_per_training",
    )

    local_gpu_monthly_cost_usd: float | None
    cloud_gpu_monthly_cost_usd: float | None
    cloud_speedup_factor: float | None
    cloud_training_hours: float | None
    annual_savings_usd: float | None
    cheaper: str | None
    trainings_per_month: float
    local_training_hours: float
    local_energy_kwh_per_training: float | None
    energy_basis: str | None
    electricity_usd_per_kwh: float
    local_energy_cost_usd_per_training: float | None
    local_hardware_cost_usd: float | None
    amortisation_months: int
    amortisation_usd_per_month: float
    cloud_card: str
    cloud_hourly_price_usd: float | None
    cloud_cost_usd_per_training: float | None
    break_even_trainings_per_month: float | None
    break_even_local_hours_per_month: float | None
    notes: list[str] = field(default_factory=list)
    cloud_gpus: int | None = None
    cloud_training_hours_lower: float | None = None
    cloud_training_hours_upper: float | None = None
    cloud_single_card_training_hours: float | None = None
    cheapest_card: str | None = None
    cheapest_card_training_hours: float | None = None
    cheapest_card_cost_usd_per_training: float | None = None

    @property
    def cloud_card_count(self) -> int:
        """The cloud cards priced: ``cloud_gpus``, or one in a report written before ``decision.cloud_gpus``."""
        return self.cloud_gpus or 1


@dataclass(frozen=True)
class CostRow(Record):
    """One rentable option in the cost table: the decided models' training on ``gpu`` (a catalog card) at
    ``provider``, spot or on-demand, on the cheapest instance of that kind in the price snapshot.

    ``gpu_count`` is the instance's GPUs, ``gpus_used`` the cards the training runs on (``decision.cloud_gpus``);
    the whole instance is paid. ``hours`` (with ``hours_lower``/``hours_upper``) is the expected wall time: the
    projected training on the card (``training_hours``, from the measured device's projection, or the measurement
    itself on the measured card) and, for spot, the interruptions, restarts and checkpoints on top
    (:mod:`gpubench.decision.spot`). ``usd`` = ``hours`` × ``price_usd_per_hour`` (bounds alike).
    ``fits_in_vram``: the measured peak fits the card's VRAM at the timed batch (None: unknown). ``price_date`` is
    when ``price_source`` observed the price (ISO). Spot rows carry the interruption rate used and its source, the
    checkpoint interval (work hours between checkpoints, Daly's; None without checkpoints), the checkpoint and
    restart costs (s) and the expected interruptions. ``note`` names a stale price snapshot and what else a reader
    of the row must know; None when nothing.
    """

    _OMITTED_WHEN_EMPTY: ClassVar[tuple[str, ...]] = (
        "interruptions_per_hour",
        "interruption_source",
        "checkpoint_interval_hours",
        "checkpoint_seconds",
        "restart_seconds",
        "expected_interruptions",
        "note",
    )

    gpu: str
    provider: str
    spot: bool
    gpu_count: int
    gpus_used: int
    fits_in_vram: bool | None
    hours: float | None
    hours_lower: float | None
    hours_upper: float | None
    usd: float | None
    usd_lower: float | None
    usd_upper: float | None
    price_date: str
    price_usd_per_hour: float
    price_source: str
    instance: str
    location: str
    training_hours: float | None = None
    interruptions_per_hour: float | None = None
    interruption_source: str | None = None
    checkpoint_interval_hours: float | None = None
    checkpoint_seconds: float | None = None
    restart_seconds: float | None = None
    expected_interruptions: float | None = None
    note: str | None = None


@dataclass(frozen=True)
class LocalCost(Record):
    """The local option beside the cost table: the training on the answer's card (``device``), its hours and
    bounds, its energy (kWh, ``energy_basis``: nvml or board_power_w; None when unknown) and that energy's cost
    (USD) at ``electricity_usd_per_kwh``, whose source and date are ``decision.electricity_source`` and
    ``decision.electricity_date``. Hardware amortisation is in ``cost_analysis``."""

    device: str
    hours: float
    hours_lower: float | None
    hours_upper: float | None
    energy_kwh: float | None
    energy_basis: str | None
    electricity_usd_per_kwh: float
    electricity_source: str
    electricity_date: str | None
    usd: float | None


@dataclass(frozen=True)
class PriceSnapshotInfo(Record):
    """The price snapshot the cost table used: its date, its age (days) when the report was written, the
    providers' catalog versions, and ``stale`` (a sentence naming it when older than 90 days, else None)."""

    snapshot_date: str
    age_days: int
    versions: dict[str, str]
    folder: str
    stale: str | None = None


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
    """A measured what-if's predicted training beside the main answer's: the step (ms), the training hours and
    their bounds on the answer's card (the emulated card's projection, else the measured device), the peak
    reserved VRAM (MB), each beside the main measurement's; ``reason`` says why there is no estimate."""

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
    """The answer the run was for: the decision, why, the estimate and its bounds (hours), the cost, the projection
    onto every catalog card, the memory budget and the recommended actions; ``method`` documents each formula.

    ``decision`` is None when the measurements do not support one (nothing measured, a critical model missing or
    measured over too few epochs) and ``reasoning`` says why; ``decision_basis`` names the rule that gave the
    decision (or withheld it), one of :data:`DECISION_BASES`. ``estimated_full_training_hours_lower`` is the lower
    prediction bound of the total, never below the one-off costs. ``epochs_to_settle`` maps each critical model to
    the measured epochs that would put the total's interval on one side of the threshold it straddles (a model's
    value None when no practical number of epochs would); the whole is None unless ``decision_basis`` is
    ``interval_straddles_threshold``. The three are None in reports written before they existed (and left out of
    the dict). ``estimated_full_training_days`` is derived from the hours. ``cloud_gpus`` is the cards each
    cloud row of ``projection`` and the cost's cloud side rent (``decision.cloud_gpus``), and ``scaling`` the
    scaling efficiency each estimated model's cloud time is computed with (empty, and left out, for one card);
    every local figure is the one card measured. ``cloud_gpus`` and the new cost and projection fields are None
    (and left out) in reports written before ``decision.cloud_gpus`` existed, which priced one card.
    ``cost_table`` prices the training on every GPU type x provider x on-demand/spot of the price snapshot
    (:class:`CostRow`, sorted by expected cost, unpriced rows last), ``cost_table_notes`` says what it left out and
    why, ``local_cost`` is the local option beside it and ``price_snapshot`` the snapshot used; empty (and left
    out) in reports written before the cost table existed.
    """

    _DERIVED: ClassVar[tuple[str, ...]] = ("estimated_full_training_days",)
    _OMITTED_WHEN_EMPTY: ClassVar[tuple[str, ...]] = (
        "estimated_full_training_hours_lower",
        "decision_basis",
        "epochs_to_settle",
        "emulated_card",
        "measured_device_hours",
        "measured_device_hours_upper",
        "what_ifs",
        "cloud_gpus",
        "scaling",
        "cost_table",
        "cost_table_notes",
        "local_cost",
        "price_snapshot",
    )

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
    estimated_full_training_hours_lower: float | None = None
    decision_basis: DecisionBasis | None = None
    epochs_to_settle: dict[str, int | None] | None = None
    emulated_card: str | None = None
    measured_device_hours: float | None = None
    measured_device_hours_upper: float | None = None
    what_ifs: list[WhatIfEstimate] = field(default_factory=list)
    cloud_gpus: int | None = None
    scaling: dict[str, ScalingEfficiency] = field(default_factory=dict)
    cost_table: list[CostRow] = field(default_factory=list)
    cost_table_notes: list[str] = field(default_factory=list)
    local_cost: LocalCost | None = None
    price_snapshot: PriceSnapshotInfo | None = None

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

    def derived(self) -> dict[str, Any]:
        return {"estimated_full_training_days": self.estimated_full_training_days}

    def to_dict(self) -> dict[str, Any]:
        data = super().to_dict()
        # The seed's order: the days follow the hours.
        order = ("decision", "reasoning", "estimated_full_training_hours", "estimated_full_training_days")
        return {**{key: data[key] for key in order}, **data}


def recommendation_thresholds(local_max_hours: float, cloud_min_hours: float) -> dict[str, float]:
    """The recommendation's ``thresholds_hours``: the decision's local limit on the upper bound and cloud threshold
    on the lower bound (h)."""
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


# --------------------------------------------------------------------------------------------------- what-ifs


@dataclass(frozen=True)
class WhatIf(Record):
    """One alternative a model was measured in briefly after its main measurement (``decision.what_if``): the
    ``variant`` name (bf16, tf32, compile, reduce-overhead, knee), what it changes in words, the execution and batch
    it ran with, its short measurement's length (epochs of at least ``epoch_min_seconds`` s) and the model's
    section from that measurement, with the same statistics as the main one."""

    variant: str
    description: str
    precision: str
    compile: str
    matmul_precision: str
    batch_size: int | None
    epochs: int
    epoch_min_seconds: float
    result: ModelResult


# --------------------------------------------------------------------------------------------------- the report

#: ``failed``: an error ended the run after it started (``RunReport.error`` says which); the models measured before
#: it are kept.
RunStatus = Literal["running", "complete", "interrupted", "failed"]


@dataclass(frozen=True)
class RunReport(Record):
    """The whole report: when, which gpubench, the run, the hardware, the data, every model measured so far (in
    the order they ran) and, once all have run, the recommendation. ``status`` is ``running`` until then.
    ``what_ifs`` holds, per model, the alternatives measured briefly after the main measurements
    (``decision.what_if``); left out of the dict when none were. ``error`` says what ended a ``failed`` run (left
    out otherwise)."""

    _OMITTED_WHEN_EMPTY: ClassVar[tuple[str, ...]] = ("what_ifs", "error")

    timestamp: str
    benchmark_version: str
    report_schema_version: int
    status: RunStatus
    run: RunInfo
    hardware: HardwareReport
    data: DataProvenance | None
    models: dict[str, ModelResult] = field(default_factory=dict)
    recommendation: Recommendation | None = None
    what_ifs: dict[str, list[WhatIf]] = field(default_factory=dict)
    error: str | None = None

    @classmethod
    def start(cls, run: RunInfo, hardware: HardwareReport, data: DataProvenance | None) -> RunReport:
        """The report before any model has run (timestamped now, UTC)."""
        return cls(
            timestamp=datetime.now(timezone.utc).isoformat(timespec="seconds"),
            benchmark_version=__version__,
            report_schema_version=REPORT_SCHEMA_VERSION,
            status="running",
            run=run,
            hardware=hardware,
            data=data,
        )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, where: str | None = None) -> RunReport:
        version = data.get("report_schema_version")
        if version is not None and version > REPORT_SCHEMA_VERSION:
            raise ReportFormatError(
                f"report schema version {version} is newer than this gpubench reads ({REPORT_SCHEMA_VERSION}): "
                "upgrade gpubench to read it"
            )
        return super().from_dict(data, where=where or "report")


# --------------------------------------------------------------------------------------------------- validation


@dataclass(frozen=True)
class ValidationCheck(Record):
    """One real training of one model checked against the report's prediction of it (``python -m gpubench.validate``).

    The training, in a fresh process, runs every step the benchmark ran for the model with the measured epochs
    multiplied by ``factor``: ``steps`` optimizer steps in all (calibration, warmup and ``epochs`` epochs of
    ``steps_per_epoch``), in a plain loop timed by its own clock from the first step to the last. ``predicted_s``
    is the report's estimate of that training and ``lower_s``/``upper_s`` its bounds; ``actual_s`` the wall time
    measured; ``error_pct`` = 100 × (actual − predicted) / predicted; ``inside_bound`` whether lower ≤ actual ≤
    upper. With ``--repeats R`` each model trains R times, ``repeat`` 1 to R, each its own check. ``status`` is
    ``ok`` (it trained), ``failed`` (with ``error``) or ``skipped`` (the report holds nothing of the model to check,
    ``error`` says why; ``repeat`` is then None). ``host_probe_before`` / ``host_probe_after``: the host's speed
    (the rounds' fixed probe) read in the training's process just before and just after its timed region, so that
    a miss can be set beside the host states the report's rounds saw; None where not read (older files, a failed
    training).
    """

    model: str
    status: str
    repeat: int | None = None
    factor: float | None = None
    batch_size: int | None = None
    steps_per_epoch: int | None = None
    epochs: int | None = None
    steps: int | None = None
    predicted_s: float | None = None
    lower_s: float | None = None
    upper_s: float | None = None
    actual_s: float | None = None
    error_pct: float | None = None
    inside_bound: bool | None = None
    error: str | None = None
    host_probe_before: HostProbe | None = None
    host_probe_after: HostProbe | None = None


@dataclass(frozen=True)
class ValidationReport(Record):
    """``validation.json``: the predictions of the report at ``report_path`` checked by real trainings on
    ``device``. ``factor`` is ``--factor`` (each training K × the measured work), or None when ``minutes`` (``--minutes
    M``) chose each model's factor for a training of about M minutes; ``repeats`` trainings per model, interleaved
    across the models. ``status``: ``running`` while trainings remain, ``complete``, or ``interrupted`` (a signal
    stopped it; ``checks`` holds the trainings finished before it). ``checks`` has a row per training and one per
    model that could not be checked, in the order they ran."""

    report_path: str
    device: str
    created_utc: str
    status: str
    repeats: int
    factor: float | None = None
    minutes: float | None = None
    checks: list[ValidationCheck] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        """Whether every training ran and landed inside its bound, with at least one training checked."""
        trained = [check for check in self.checks if check.status != "skipped"]
        return self.status == "complete" and bool(trained) and all(check.inside_bound for check in trained)
