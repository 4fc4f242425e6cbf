"""Full-training time on the measured device: the plan in samples, one model's estimate and its prediction bound,
several models trained one after another, the decision rule on the bound, and the checkpoint interval it implies.

Pure arithmetic on a model's typed result (:class:`gpubench.results.ModelResult`): times in the unit their name
says (ms, seconds, hours). How it is done, in words, is :data:`gpubench.decision.advice.ESTIMATE_METHOD` and
:data:`~gpubench.decision.advice.UPPER_BOUND_METHOD`.
"""

import math
from dataclasses import dataclass

from gpubench.decision.config import DecisionConfig, TrainingPlanConfig
from gpubench.results import (
    CLOUD_GPU_RECOMMENDED,
    GRAY_ZONE,
    LOCAL_GPU_VIABLE,
    ModelEstimate,
    ModelResult,
    StepSplit,
)
from gpubench.units import MS_PER_S, SECONDS_PER_HOUR

#: Checkpoint often enough that a crash loses at most this fraction of the run, within these bounds (hours).
CHECKPOINT_RUN_FRACTION = 0.1
_CHECKPOINT_MIN_HOURS = 0.25
_CHECKPOINT_MAX_HOURS = 4.0


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
    (n) epochs; ``step_ms`` is the mean optimizer step and ``samples_per_second`` the throughput, both as the
    model's result derives them; ``one_off_seconds`` is the calibration and warmup time.
    """

    model: str
    sample_unit: str
    plan_samples: float
    plan_basis: str
    samples_per_epoch: float
    samples_per_second: float | None
    steps_per_epoch: int
    step_ms: float
    planned_epochs: float
    measured_epochs: int
    mean_epoch_ms: float
    halfwidth_ms: float
    confidence_level: float
    one_off_seconds: float

    @property
    def epochs_seconds(self) -> float:
        """N × mean epoch time, in seconds (the part that scales with the device's speed)."""
        return self.planned_epochs * self.mean_epoch_ms / MS_PER_S

    @property
    def margin_seconds(self) -> float:
        return total_time_margin_ms(self.halfwidth_ms, self.measured_epochs, self.planned_epochs) / MS_PER_S

    @property
    def hours(self) -> float:
        return (self.epochs_seconds + self.one_off_seconds) / SECONDS_PER_HOUR

    @property
    def upper_hours(self) -> float:
        return self.hours + self.margin_seconds / SECONDS_PER_HOUR

    @property
    def upper_bound_level(self) -> float:
        """The one-sided level of ``upper_hours``: (1 + level) / 2 of the decision interval."""
        return (1.0 + self.confidence_level) / 2.0

    def model_estimate(
        self, *, decided_on: bool, step_split: StepSplit, energy_kwh: float | None, energy_basis: str | None
    ) -> ModelEstimate:
        """The estimate as the report's per-model record, with the step's split and the training's energy (kWh)."""
        return ModelEstimate(
            # Only a model whose status is ok gets an estimate (estimate_training_time refuses the others).
            status="ok",
            estimated=True,
            decided_on=decided_on,
            model=self.model,
            sample_unit=self.sample_unit,
            plan_samples=self.plan_samples,
            plan_basis=self.plan_basis,
            samples_per_epoch=self.samples_per_epoch,
            steps_per_epoch=self.steps_per_epoch,
            planned_epochs=self.planned_epochs,
            measured_epochs=self.measured_epochs,
            mean_epoch_ms=self.mean_epoch_ms,
            halfwidth_ms=self.halfwidth_ms,
            confidence_level=self.confidence_level,
            one_off_seconds=self.one_off_seconds,
            samples_per_second=self.samples_per_second,
            step_ms=self.step_ms,
            estimated_hours=self.hours,
            estimated_hours_upper=self.upper_hours,
            upper_bound_level=self.upper_bound_level,
            step_split=step_split,
            energy_kwh=energy_kwh,
            energy_basis=energy_basis,
        )


def estimate_training_time(name: str, result: ModelResult, plan: TrainingPlanConfig) -> TimeEstimate:
    """Extrapolate one model's measured result to its planned training. Raises ValueError (saying why) when the
    model was not measured successfully or has no plan."""
    if result.status != "ok":
        raise ValueError(f"status {result.status}" + (f": {result.error}" if result.error else ""))
    stats, samples_per_epoch, step_ms = result.statistics, result.samples_per_epoch, result.step_time_ms
    throughput, steps_per_epoch = result.samples_per_second, result.steps_per_epoch
    if stats is None or samples_per_epoch is None or step_ms is None or throughput is None or not steps_per_epoch:
        raise ValueError("no epoch-time statistics (fewer than two measured epochs)")
    # plan_samples accepts only the units it knows: past it, the unit is one of them.
    samples, basis = plan_samples(name, result.sample_unit, plan)
    calibration_s = result.calibration_seconds
    if calibration_s is None:
        calibration_s = (result.first_step_ms or 0.0) / MS_PER_S
    return TimeEstimate(
        model=name,
        sample_unit=result.sample_unit,
        plan_samples=samples,
        plan_basis=basis,
        samples_per_epoch=samples_per_epoch,
        samples_per_second=throughput.mean,
        steps_per_epoch=steps_per_epoch,
        step_ms=step_ms,
        planned_epochs=samples / samples_per_epoch,
        measured_epochs=stats.n,
        mean_epoch_ms=stats.mean_ms,
        halfwidth_ms=stats.decision_halfwidth_ms,
        confidence_level=stats.confidence_level,
        one_off_seconds=calibration_s + sum(result.warmup_epoch_times_ms) / MS_PER_S,
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


def checkpoint_interval_hours(upper_hours: float) -> float | None:
    """Hours between checkpoints for a run bounded by ``upper_hours``: a tenth of the run (a crash loses at most
    ~10%), rounded down to a quarter hour, within [0.25, 4] h; None for a run shorter than a quarter hour."""
    if upper_hours < _CHECKPOINT_MIN_HOURS:
        return None
    interval = min(_CHECKPOINT_MAX_HOURS, upper_hours * CHECKPOINT_RUN_FRACTION)
    return max(_CHECKPOINT_MIN_HOURS, math.floor(interval / _CHECKPOINT_MIN_HOURS) * _CHECKPOINT_MIN_HOURS)
