"""One model end to end: batch decision -> build -> measure -> step down -> :class:`~gpubench.results.ModelResult`.

A failing model gets a status and an error, so the next model still runs; an interrupted one keeps its measured
epochs and travels up on a :class:`ModelInterrupted`.
"""

import logging
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from gpubench.config import BenchmarkConfig
from gpubench.data.tensors import FeatureTensors
from gpubench.decision.stopping import StopRule
from gpubench.errors import GpubenchError
from gpubench.hardware.monitor import THERMAL_STOP, DeviceMonitor, energy_summary
from gpubench.measure.batch_search import (
    BatchDecision,
    HeadroomCheck,
    TimedBatch,
    TrialAgreement,
    TrialResult,
    TryBatch,
    check_headroom,
    choose_batch_size,
    effective_policy,
    gradient_accumulation_steps,
    is_oom,
    release_device_memory,
    same_trial,
    step_down_size,
    timed_batch,
)
from gpubench.measure.epochs import (
    DIVERGED,
    INTERRUPTED,
    Measurement,
    MeasurementInterrupted,
    SecondStage,
    SecondStagePlan,
    measure_workload,
    precision_stage,
)
from gpubench.measure.flops import StepCounts, count_step
from gpubench.measure.memory import MemoryProfiler, TorchCudaAllocator
from gpubench.measure.memory_split import StateBytes, memory_split, state_bytes
from gpubench.measure.recurring import measure_checkpoint, measure_evaluation
from gpubench.measure.stability import StabilityMonitor
from gpubench.measure.timing import BlockTimer
from gpubench.models import workload_class
from gpubench.output import console
from gpubench.output.history import MachineHistory
from gpubench.results import (
    BatchSearchResult,
    BatchStepDown,
    CheckpointCost,
    DeviceEpoch,
    EpochTimeStatistics,
    EvaluationCost,
    ExecutionSettings,
    MemoryProfile,
    MemoryTimeline,
    ModelResult,
    StabilityReport,
)
from gpubench.results.units import BYTES_PER_MB, MS_PER_S
from gpubench.stats.config import ADAPTIVE_DECISION, ADAPTIVE_PRECISION, DECISION_CANNOT_SETTLE, DECISION_SETTLED
from gpubench.stats.epoch_times import summarize_epoch_times
from gpubench.stats.stability import stability_verdict
from gpubench.workload import ExecutionContext, Workload

logger = logging.getLogger(__name__)

#: Per-epoch hook: (model, phase ``warmup``/``measured``, epoch number from 1, seconds, mean loss or None).
EpochObserver = Callable[[str, str, int, float, float | None], None]


@dataclass(frozen=True)
class ModelRunContext:
    """What every model of a job shares: config, device, data, timer, usable VRAM (MB; None on the CPU), the
    burn-in's peak SM clock (MHz), the models run before (for ``statistics.adaptive=decision``), and the data-parallel
    rank's settings (:mod:`gpubench.bench.rank_worker`)."""

    cfg: BenchmarkConfig
    device: torch.device
    features: FeatureTensors
    timer: BlockTimer
    usable_vram_mb: float | None
    reference_sm_clock_mhz: float | None
    completed: Mapping[str, ModelResult] = field(default_factory=dict)
    epoch_observer: EpochObserver | None = None
    data_parallel: bool = False
    rank: int = 0
    trial_agreement: TrialAgreement = same_trial
    #: Measured epochs planned over all rounds, for the progress lines; None: ``cfg.epochs``.
    planned_epochs: int | None = None
    #: The machine's history of earlier runs (``statistics.history``); None: off.
    history: MachineHistory | None = None

    @property
    def stop_rule(self) -> StopRule:
        """The job's stop rule, from ``cfg``."""
        return StopRule(self.cfg.statistics, self.cfg.decision, tuple(self.cfg.model_names))


@dataclass(frozen=True)
class ModelRun:
    """One model's outcome: its report section, its last run's memory samples and measurement (None if absent)."""

    result: ModelResult
    memory_timeline: MemoryTimeline | None
    measurement: Measurement | None = None


class ModelInterrupted(KeyboardInterrupt):
    """An interrupt during one model's measurement; ``run`` holds the epochs completed before it, ``model`` its
    name where the caller cannot know it."""

    def __init__(self, run: ModelRun, model: str | None = None) -> None:
        super().__init__(INTERRUPTED)
        self.run = run
        self.model = model


@dataclass(frozen=True)
class WorkloadFacts:
    """What a built workload says about itself: per-step FLOPs, launches, bytes (None if uncounted), samples."""

    flops_per_step: float | None
    samples_per_step: float
    sample_unit: str
    description: dict[str, Any]
    updates_per_step: float = 1.0
    launches_per_step: int | None = None
    bytes_per_step: int | None = None
    flops_by_precision: dict[str, float] | None = None

    @property
    def updates_per_env_step(self) -> float | None:
        """Gradient updates per environment step (the update-to-data ratio), for RL workloads; else None."""
        return self.updates_per_step / self.samples_per_step if self.sample_unit == "env_step" else None


@dataclass(frozen=True)
class Attempt:
    """One measured run of a model at one batch size; ``headroom`` is None on the CPU, ``statistics`` below two
    epochs, ``stability`` without any (an interrupt in the first)."""

    facts: WorkloadFacts
    measurement: Measurement
    memory: MemoryProfile
    headroom: HeadroomCheck | None
    device_epochs: list[DeviceEpoch]
    stability: StabilityReport | None
    statistics: EpochTimeStatistics | None
    memory_timeline: MemoryTimeline | None
    status: str
    error: str | None
    evaluation: EvaluationCost | None = None
    checkpoint: CheckpointCost | None = None
    state: StateBytes | None = None


def build_workload(
    name: str, context: ModelRunContext, batch_size: int, *, eager: bool = False, gradient_sync: bool = True
) -> Workload:
    """The workload ``name`` at ``batch_size``; ``gradient_sync`` False builds a rank's batch-search trial."""
    cfg = context.cfg
    compile_mode = "false" if eager else cfg.execution.compile
    if compile_mode != "false":
        # Without a reset a batch search reaches dynamo's recompile limit and later instances fall back to eager.
        torch._dynamo.reset()
    torch.manual_seed(cfg.seed)
    execution = ExecutionContext(
        device=context.device,
        batch_size=batch_size,
        precision=cfg.execution.precision,
        compile_mode=compile_mode,
        seed=cfg.seed + context.rank,
        usable_vram_mb=context.usable_vram_mb,
        data_parallel=context.data_parallel,
        gradient_sync=gradient_sync,
    )
    return workload_class(name)(getattr(cfg.workloads, name), context.features, execution)


def _search_enabled(context: ModelRunContext) -> bool:
    search = context.cfg.batch.search
    return context.device.type == "cuda" if search is None else bool(search)


def _policy(name: str, context: ModelRunContext) -> str:
    """``batch.policy`` as it applies to model ``name`` (``configured`` where the batch is part of the algorithm)."""
    is_hyperparameter = workload_class(name).batch_size_is_hyperparameter
    return effective_policy(context.cfg.batch.policy, is_hyperparameter=is_hyperparameter)


def batch_trial(name: str, context: ModelRunContext) -> TryBatch:
    """The batch search's ``try_batch`` for model ``name``: peak reserved MB, throughput and time of ``steps``."""
    allocator = TorchCudaAllocator(context.device)

    def try_batch(size: int, steps: int) -> TrialResult:
        allocator.reset_peak()
        # An OOM on one rank must not leave the others in a collective: the ranks agree after the trial.
        workload = build_workload(name, context, size, gradient_sync=False)
        seconds = context.timer.time_block(lambda: [workload.train_step() for _ in range(steps)])
        return TrialResult(
            peak_reserved_mb=allocator.snapshot().peak_reserved_bytes / BYTES_PER_MB,
            samples_per_s=workload.samples_per_step * steps / seconds,
            seconds=seconds,
        )

    return try_batch


def choose_batch(name: str, context: ModelRunContext) -> BatchDecision | None:
    """The batch search's decision on the GPU; None without a search."""
    if not _search_enabled(context) or context.usable_vram_mb is None:
        return None
    batch = context.cfg.batch
    return choose_batch_size(
        batch_trial(name, context),
        batch,
        context.usable_vram_mb,
        policy=_policy(name, context),
        configured_size=getattr(context.cfg.workloads, name).batch_size,
        verify_steps=batch.verify_steps,
        agree=context.trial_agreement,
    )


def _prepare(name: str, context: ModelRunContext, batch_size: int) -> tuple[Workload, WorkloadFacts]:
    """Build the workload to measure at ``batch_size`` and count its FLOPs."""
    if context.cfg.execution.compile == "false":
        workload = build_workload(name, context, batch_size)
        counts = count_step(workload)
    else:
        # The FLOP counter cannot see into compiled graphs: count an eager twin, released before the measured one.
        counts: StepCounts = count_step(build_workload(name, context, batch_size, eager=True))
        release_device_memory()
        workload = build_workload(name, context, batch_size)
    facts = WorkloadFacts(
        flops_per_step=counts.flops,
        launches_per_step=counts.launches,
        bytes_per_step=counts.bytes,
        flops_by_precision=counts.flops_by_precision,
        samples_per_step=workload.samples_per_step,
        sample_unit=workload.sample_unit,
        description=workload.describe(),
        updates_per_step=workload.updates_per_step,
    )
    return workload, facts


def _outcome(measurement: Measurement, context: ModelRunContext) -> tuple[str, str | None]:
    """The model's status after a measured run, and the error saying why when it is not ``ok``."""
    if measurement.stop_reason == DIVERGED:
        return DIVERGED, "training diverged: a NaN/Inf loss or gradient was seen; measurement stopped there"
    if measurement.stop_reason == INTERRUPTED:
        return INTERRUPTED, (
            f"interrupted after {len(measurement.epoch_times_ms)} measured epochs; the epochs measured are kept "
            "(the epoch in progress is not)"
        )
    if measurement.stop_reason == THERMAL_STOP:
        return THERMAL_STOP, (
            f"the GPU passed {context.cfg.hardware.temperature_stop_c:g} °C (hardware.temperature_stop_c); "
            "measurement of this model stopped"
        )
    return "ok", None


def _summary(measurement: Measurement, cfg: BenchmarkConfig) -> EpochTimeStatistics:
    """The epoch-time statistics of ``measurement`` (at least two measured epochs), as configured."""
    return summarize_epoch_times(
        measurement.epoch_times_ms,
        confidence_level=cfg.statistics.confidence_level,
        cv_threshold=cfg.statistics.cv_threshold,
        outlier_rule=cfg.statistics.outlier_rule,
        target_rel_halfwidth=cfg.statistics.target_rel_halfwidth,
        first_stage_epochs=measurement.first_stage_epochs,
    )


def _decision_stage(name: str, facts: WorkloadFacts, context: ModelRunContext) -> SecondStage:
    """The second stage of ``statistics.adaptive=decision``: the epochs at which the critical total settles."""
    cfg = context.cfg

    def plan(first_stage: Measurement) -> SecondStagePlan:
        sizing = first_stage.sizing
        provisional = ModelResult(
            status="ok",
            raw_epoch_times_ms=first_stage.epoch_times_ms,
            warmup_epoch_times_ms=first_stage.warmup_epoch_times_ms,
            steps_per_epoch=sizing.steps_per_epoch,
            samples_per_step=facts.samples_per_step,
            sample_unit=facts.sample_unit,
            updates_per_step=facts.updates_per_step,
            updates_per_env_step=facts.updates_per_env_step,
            first_step_ms=sizing.first_step_s * MS_PER_S,
            calibration_seconds=sizing.calibration_seconds,
            statistics=_summary(first_stage, cfg),
        )
        required = context.stop_rule.epochs_to_settle(name, provisional, context.completed)
        reason = DECISION_CANNOT_SETTLE if required is None else DECISION_SETTLED
        return SecondStagePlan(required_epochs=required, reason=reason)

    return plan


def _second_stage(name: str, facts: WorkloadFacts, context: ModelRunContext) -> SecondStage | None:
    """The second stage ``statistics.adaptive`` asks for (None: a fixed count of epochs)."""
    adaptive = context.cfg.statistics.adaptive
    if adaptive == ADAPTIVE_PRECISION:
        return precision_stage(context.cfg.statistics)
    if adaptive == ADAPTIVE_DECISION:
        return _decision_stage(name, facts, context)
    return None


def _measure(name: str, workload: Workload, facts: WorkloadFacts, context: ModelRunContext) -> Attempt:
    """Measure ``workload`` and summarise the run: memory against the headroom, stability, epoch-time statistics."""
    cfg = context.cfg
    monitor = StabilityMonitor(cfg.stability, context.device)
    profiler = MemoryProfiler(
        context.device,
        sample_interval_ms=cfg.memory.sample_interval_ms,
        leak_threshold_mb_per_epoch=cfg.memory.leak_threshold_mb_per_epoch,
        confidence_level=cfg.statistics.confidence_level,
        sampler=cfg.memory.sampler,
    )
    device_monitor = DeviceMonitor(context.device, cfg.hardware, reference_sm_clock_mhz=context.reference_sm_clock_mhz)
    observer = context.epoch_observer
    try:
        shown_epochs = context.planned_epochs or cfg.epochs
        with profiler, console.model_progress(name, cfg.warmup_epochs, shown_epochs, verbose=cfg.verbose) as show_epoch:

            def on_epoch(phase: str, number: int, planned: int, seconds: float, loss: float | None) -> None:
                show_epoch(phase, number, max(planned, shown_epochs) if phase == "measured" else planned, seconds, loss)
                if observer is not None:
                    observer(name, phase, number, seconds, loss)

            measurement = measure_workload(
                workload,
                timer=context.timer,
                epochs=cfg.epochs,
                warmup_epochs=cfg.warmup_epochs,
                epoch_config=cfg.epoch,
                statistics=cfg.statistics,
                monitor=monitor,
                observers=[profiler, device_monitor],
                on_epoch=on_epoch,
                second_stage=_second_stage(name, facts, context),
            )
    except MeasurementInterrupted as exc:
        measurement = exc.measurement
    profile = profiler.result()
    # Fragmentation grows over the measured epochs, beyond the search's short trials: check the headroom again.
    headroom = check_headroom(profile.peak_reserved_mb, context.usable_vram_mb, cfg.batch.headroom)
    memory = replace(
        profile,
        headroom_exceeded=None if headroom is None else headroom.exceeded,
        headroom_limit_mb=None if headroom is None else headroom.peak_limit_mb,
    )
    statistics = None
    if len(measurement.epoch_times_ms) >= 2:
        statistics = _summary(measurement, cfg)
        if cfg.verbose:
            console.model_warnings(name, list(statistics.warnings))
    status, error = _outcome(measurement, context)
    plan = cfg.decision.plan
    evaluation = checkpoint = None
    if status == "ok":
        evaluation = None if plan.eval_every_steps is None else measure_evaluation(workload, context.timer)
        checkpoint = None if plan.checkpoint_every_steps is None else measure_checkpoint(workload, context.timer)
    # After the steps, so that the optimizer's state exists.
    state = state_bytes(workload.modules(), workload.optimizers())
    return Attempt(
        facts=facts,
        measurement=measurement,
        memory=memory,
        headroom=headroom,
        device_epochs=device_monitor.epochs,
        stability=stability_verdict(measurement.health, cfg.stability) if measurement.health else None,
        statistics=statistics,
        memory_timeline=profiler.timeline(),
        status=status,
        error=error,
        evaluation=evaluation,
        checkpoint=checkpoint,
        state=state,
    )


def _execution(context: ModelRunContext) -> ExecutionSettings:
    """How every workload of the job runs (``execution.*``)."""
    execution = context.cfg.execution
    return ExecutionSettings(
        precision=execution.precision, compile=execution.compile, matmul_precision=execution.matmul_precision
    )


def _search_record(name: str, decision: BatchDecision | None) -> BatchSearchResult | None:
    """The report's record of model ``name``'s batch search (None without one)."""
    if decision is None:
        return None
    return replace(decision.record, batch_is_hyperparameter=workload_class(name).batch_size_is_hyperparameter)


def _result(
    name: str,
    attempt: Attempt,
    batch: TimedBatch,
    decision: BatchDecision | None,
    step_downs: list[BatchStepDown],
    warnings: list[str],
    context: ModelRunContext,
) -> ModelResult:
    """The model's report section from a measured run at ``batch``."""
    measurement = attempt.measurement
    sizing = measurement.sizing
    return ModelResult(
        status=attempt.status,
        error=attempt.error,
        memory_usage_mb=attempt.memory.peak_reserved_mb,
        batch_size=batch.batch_size,
        gradient_accumulation_steps=batch.gradient_accumulation_steps,
        stability=None if attempt.stability is None else attempt.stability.stability,
        loss_trend=None if attempt.stability is None else attempt.stability.loss_trend,
        raw_epoch_times_ms=measurement.epoch_times_ms,
        warmup_epoch_times_ms=measurement.warmup_epoch_times_ms,
        epoch_losses=measurement.epoch_losses,
        warmup_epoch_losses=measurement.warmup_losses,
        steps_per_epoch=sizing.steps_per_epoch,
        samples_per_step=attempt.facts.samples_per_step,
        sample_unit=attempt.facts.sample_unit,
        first_step_ms=sizing.first_step_s * MS_PER_S,
        calibration_seconds=sizing.calibration_seconds,
        calibration_steps=sizing.calibration_steps,
        stop_reason=measurement.stop_reason,
        statistics=attempt.statistics,
        batch_search=_search_record(name, decision),
        batch_policy=batch.policy,
        batch_step_downs=step_downs,
        flops_per_step=attempt.facts.flops_per_step,
        launches_per_step=attempt.facts.launches_per_step,
        bytes_per_step=attempt.facts.bytes_per_step,
        workload=attempt.facts.description,
        execution=_execution(context),
        memory=attempt.memory,
        device_epochs=attempt.device_epochs,
        stability_details=attempt.stability,
        energy=energy_summary(attempt.device_epochs, sizing.steps_per_epoch * attempt.facts.samples_per_step),
        warnings=warnings,
        updates_per_step=attempt.facts.updates_per_step,
        updates_per_env_step=attempt.facts.updates_per_env_step,
        evaluation=attempt.evaluation,
        checkpoint=attempt.checkpoint,
        memory_split=None
        if attempt.state is None
        else memory_split(
            attempt.state,
            [] if decision is None else decision.search.trials,
            batch_size=batch.batch_size,
            measured_peak_mb=attempt.memory.peak_reserved_mb,
            headroom=context.cfg.batch.headroom,
        ),
        flops_by_precision=attempt.facts.flops_by_precision,
    )


def _failed_result(
    name: str,
    exc: Exception,
    batch: TimedBatch | None,
    decision: BatchDecision | None,
    step_downs: list[BatchStepDown],
    facts: WorkloadFacts | None,
    context: ModelRunContext,
) -> ModelResult:
    """The section of a model whose run raised (``oom`` or ``failed``), with what the earlier phases established."""
    return ModelResult(
        status="oom" if is_oom(exc) else "failed",
        error=f"{type(exc).__name__}: {exc}".strip(),
        batch_size=None if batch is None else batch.batch_size,
        gradient_accumulation_steps=1 if batch is None else batch.gradient_accumulation_steps,
        samples_per_step=None if facts is None else facts.samples_per_step,
        sample_unit=None if facts is None else facts.sample_unit,
        batch_search=_search_record(name, decision),
        batch_policy=None if batch is None else batch.policy,
        batch_step_downs=step_downs,
        flops_per_step=None if facts is None else facts.flops_per_step,
        launches_per_step=None if facts is None else facts.launches_per_step,
        bytes_per_step=None if facts is None else facts.bytes_per_step,
        workload={} if facts is None else facts.description,
        execution=None if facts is None else _execution(context),
        traceback=traceback.format_exc(limit=8),
        flops_by_precision=None if facts is None else facts.flops_by_precision,
    )


def _step_down(
    name: str,
    attempt: Attempt,
    batch: TimedBatch,
    smaller: int,
    decision: BatchDecision | None,
    step_downs: list[BatchStepDown],
    context: ModelRunContext,
) -> tuple[TimedBatch, BatchStepDown]:
    """The ``smaller`` batch to measure again at, and the record of the abandoned run at ``batch``."""
    headroom = attempt.headroom
    assert headroom is not None
    abandoned = _result(name, attempt, batch, decision, step_downs, [], context)
    reason = (
        f"stepped down from {batch.batch_size} to {smaller} because the measured peak reserved memory "
        f"{headroom.peak_reserved_mb:,.0f} MB exceeded the headroom limit {headroom.peak_limit_mb:,.0f} MB"
    )
    console.notice(f"{name}: {reason}; measuring again")
    throughput = abandoned.samples_per_second
    record = BatchStepDown(
        batch_size=batch.batch_size,
        peak_reserved_mb=headroom.peak_reserved_mb,
        headroom_limit_mb=headroom.peak_limit_mb,
        mean_epoch_time_ms=abandoned.mean_epoch_time_ms,
        samples_per_second=None if throughput is None else throughput.mean,
    )
    is_hyperparameter = workload_class(name).batch_size_is_hyperparameter
    target_effective = context.cfg.batch.target_effective
    smaller_batch = TimedBatch(
        batch_size=smaller,
        gradient_accumulation_steps=1 if is_hyperparameter else gradient_accumulation_steps(smaller, target_effective),
        policy=f"{batch.policy}; {reason}",
    )
    return smaller_batch, record


def run_model(name: str, context: ModelRunContext) -> ModelRun:
    """Choose the batch, measure model ``name`` at it, and step a searched batch down while its measured run breaks
    the headroom policy (fragmentation shows only over a measured run's many steps). Abandoned runs stay in
    ``batch_step_downs``."""
    cfg = context.cfg
    decision: BatchDecision | None = None
    batch: TimedBatch | None = None
    step_downs: list[BatchStepDown] = []
    facts: WorkloadFacts | None = None
    attempt: Attempt | None = None
    # Else this model's peaks would start from the previous model's reservation.
    release_device_memory()
    try:
        decision = choose_batch(name, context)
        configured = getattr(cfg.workloads, name).batch_size
        if decision is not None and decision.record.batch_size is None:
            return ModelRun(
                ModelResult(status="oom", error=decision.record.message, batch_search=_search_record(name, decision)),
                None,
            )
        batch = timed_batch(configured, decision, cfg.batch.max_size, _policy(name, context))
        # A configured batch is the recipe's: changing it would time another training, so it only warns.
        chosen_by_search = decision is not None and decision.record.policy != "configured"
        allowed_step_downs = cfg.batch.max_step_downs if chosen_by_search else 0
        while True:
            logger.info("model %s: measuring at batch %d (%s)", name, batch.batch_size, batch.policy or "configured")
            workload, facts = _prepare(name, context, batch.batch_size)
            attempt = _measure(name, workload, facts, context)
            del workload
            headroom = attempt.headroom
            smaller = None
            if headroom is not None and attempt.status == "ok" and len(step_downs) < allowed_step_downs:
                smaller = step_down_size(
                    batch.batch_size, headroom.peak_reserved_mb, headroom.peak_limit_mb, cfg.batch.min_size
                )
            if attempt.status == INTERRUPTED:
                interrupted = _result(name, attempt, batch, decision, step_downs, [], context)
                raise ModelInterrupted(ModelRun(interrupted, attempt.memory_timeline, attempt.measurement))
            if smaller is None:
                break
            batch, abandoned = _step_down(name, attempt, batch, smaller, decision, step_downs, context)
            step_downs = [*step_downs, abandoned]
            facts = None
            release_device_memory()
        warnings = []
        if attempt.headroom is not None and attempt.headroom.warning is not None:
            warnings.append(attempt.headroom.warning)
            console.notice(f"{name}: {attempt.headroom.warning}")
        result = _result(name, attempt, batch, decision, step_downs, warnings, context)
        return ModelRun(result, attempt.memory_timeline, attempt.measurement)
    except GpubenchError:
        # Bad input found while running (a user's build function) ends the job with exit 2.
        raise
    except Exception as exc:
        logger.debug("model %s raised", name, exc_info=True)
        timeline = None if attempt is None else attempt.memory_timeline
        return ModelRun(_failed_result(name, exc, batch, decision, step_downs, facts, context), timeline)
