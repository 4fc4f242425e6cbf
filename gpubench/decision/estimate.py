"""Full-training time on the measured device: one model's estimate and bounds, several in sequence, checkpoints."""

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from statistics import fmean

from gpubench.decision.config import TrainingPlanConfig
from gpubench.decision.methods import method_text
from gpubench.results import BatchWhatIf, ModelEstimate, ModelResult, RoundStatistics, StepSplit
from gpubench.results.units import MS_PER_S, SECONDS_PER_HOUR

#: Checkpoint often enough that a crash loses at most this fraction of the run, within these bounds (hours).
CHECKPOINT_RUN_FRACTION = 0.1
_CHECKPOINT_MIN_HOURS = 0.25
_CHECKPOINT_MAX_HOURS = 4.0


def plan_samples(name: str, sample_unit: str | None, plan: TrainingPlanConfig) -> tuple[float, str]:
    """The full training of ``name`` in ``sample_unit`` samples, and its sentence; ValueError without a plan."""
    if plan.samples.get(name) is not None:
        samples = float(plan.samples[name])
        return samples, f"{samples:,.0f} {sample_unit or 'sample'}s (decision.plan.samples.{name})"
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
    group = {"env_step": "env_steps", "window": "passes"}.get(sample_unit or "", "samples")
    raise ValueError(f"no training plan for {name} ({sample_unit} samples): set decision.plan.{group}.{name}")


@dataclass(frozen=True)
class RecurringPlan:
    """The plan's validation passes and checkpoints with their costs (s; 0 and None where off or unmeasured)."""

    eval_passes: int = 0
    eval_pass_seconds: float | None = None
    checkpoints: int = 0
    checkpoint_seconds: float | None = None

    @property
    def eval_seconds(self) -> float:
        """The validation passes' total (s)."""
        return self.eval_passes * (self.eval_pass_seconds or 0.0)

    @property
    def seconds(self) -> float:
        """Their total (s)."""
        return self.eval_seconds + self.checkpoints * (self.checkpoint_seconds or 0.0)


def recurring_plan(result: ModelResult, plan_updates: float, plan: TrainingPlanConfig) -> RecurringPlan:
    """How many evaluations and checkpoints ``plan_updates`` updates hold, and what each costs (s)."""
    evaluation, checkpoint = result.evaluation, result.checkpoint
    eval_passes, eval_pass_s = 0, None
    # Samples one validation pass covers: supervised or RL.
    pass_samples = {"window": plan.windows_per_pass * plan.eval_fraction, "env_step": plan.eval_env_steps}.get(
        result.sample_unit or ""
    )
    if plan.eval_every_steps is not None and evaluation is not None and pass_samples is not None:
        eval_passes = math.floor(plan_updates / plan.eval_every_steps)
        eval_pass_s = pass_samples / evaluation.samples_per_call * evaluation.ms_per_call / MS_PER_S
    checkpoints, checkpoint_s = 0, None
    if plan.checkpoint_every_steps is not None and checkpoint is not None:
        checkpoints = math.floor(plan_updates / plan.checkpoint_every_steps)
        checkpoint_s = checkpoint.ms_per_save / MS_PER_S
    return RecurringPlan(eval_passes, eval_pass_s, checkpoints, checkpoint_s)


def batch_what_ifs(result: ModelResult, plan_samples: float) -> list[BatchWhatIf]:
    """The plan's hours at every batch the search measured (steps only); None where the batch is the algorithm's own."""
    search = result.batch_search
    if search is None or search.batch_is_hyperparameter:
        return []
    labels = {search.largest_fitting_size: "largest fitting", search.knee_size: "knee"}
    return [
        BatchWhatIf(
            batch_size=point.size,
            samples_per_s=point.samples_per_s,
            plan_hours=plan_samples / point.samples_per_s / SECONDS_PER_HOUR,
            trial_steps=search.search_steps,
            label=labels.get(point.size, ""),
        )
        for point in search.throughput_curve
        if point.samples_per_s > 0
    ]


def total_time_margin_ms(halfwidth_ms: float, measured_epochs: int, planned_epochs: float) -> float:
    """Prediction margin (ms) on ``planned_epochs`` (N) epochs: ``h × sqrt(N (N + n))``, n = ``measured_epochs``."""
    if measured_epochs < 1 or planned_epochs < 0 or halfwidth_ms < 0:
        raise ValueError(f"need n >= 1, N >= 0, h >= 0; got n={measured_epochs}, N={planned_epochs}, h={halfwidth_ms}")
    return halfwidth_ms * math.sqrt(planned_epochs * (planned_epochs + measured_epochs))


def halfwidth_at_epochs_ms(halfwidth_ms: float, measured_epochs: int, epochs: int) -> float:
    """The half-width (ms) after ``epochs`` epochs, ``h × sqrt(n / n')``, variance and quantile held."""
    if measured_epochs < 1 or epochs < 1:
        raise ValueError(f"need n >= 1 and n' >= 1; got n={measured_epochs}, n'={epochs}")
    return halfwidth_ms * math.sqrt(measured_epochs / epochs)


def halfwidth_after_rounds_ms(
    halfwidth_ms: float, rounds: RoundStatistics, more_epochs: int, confidence_level: float
) -> float:
    """The two-level half-width (ms) after ``more_epochs`` more epochs in rounds, at most the measured one; the
    run-to-run level (:mod:`gpubench.stats.run_level`) does not shrink."""
    from scipy import stats as sps

    from gpubench.stats.rounds import DRIFT_AR1_BOUND, planned_halfwidth, variance_ratio_after

    per_round = rounds.epochs_per_round[-1]
    more_rounds = max(0, math.ceil(more_epochs / per_round))
    if more_rounds == 0:
        return halfwidth_ms
    ratio, dof, dof_after = variance_ratio_after(
        rounds.epochs_per_round,
        rounds.gaps_epochs,
        len(rounds.epochs_per_round) + more_rounds,
        per_round,
        rho=DRIFT_AR1_BOUND if rounds.rho is None else rounds.rho,
        phi=rounds.round_correlation,
        steady=rounds.steady_mean_ms is not None,
    )
    # A report without the in-run variance stored: the half-width is its t quantile times its square root.
    in_run = rounds.variance_of_mean_ms2
    if in_run is None:
        in_run = (halfwidth_ms / sps.t.ppf(0.5 + confidence_level / 2.0, dof)) ** 2
    after = planned_halfwidth(
        in_run,
        ratio,
        dof_after,
        rounds.run_level_variance_ms2,
        rounds.run_level_dof or math.inf,
        confidence_level,
    )
    return min(halfwidth_ms, after)


def drift_ms_per_epoch(epoch_times_ms: Sequence[float]) -> float:
    """How far the epoch times moved during the measurement (ms): |mean of the last third − mean of the first third|."""
    if not epoch_times_ms:
        raise ValueError("no epoch times")
    third = max(1, len(epoch_times_ms) // 3)
    return abs(fmean(epoch_times_ms[-third:]) - fmean(epoch_times_ms[:third]))


def _drift_flags(result: ModelResult) -> tuple[str, ...]:
    """What was flagged during the measured epochs: a drift (the drift test) and throttled epochs, in words."""
    stats = result.statistics
    flags = []
    if stats is not None and stats.drift_detected:
        flags.append(f"epoch times drift ({stats.drift_description})")
    measured = result.measured_device_epochs
    throttled = sum(1 for epoch in measured if epoch.throttled)
    if throttled:
        flags.append(f"{throttled} of {len(measured)} measured epochs throttled")
    return tuple(flags)


@dataclass(frozen=True)
class TimeEstimate:
    """One model's full-training time: ``planned_epochs`` (N) make the plan; the margin (s) is
    :func:`total_time_margin_ms`, plus the drift × N when flagged, plus a projection's fractions."""

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
    drift_flags: tuple[str, ...]
    drift_ms_per_epoch: float
    rounds: RoundStatistics | None = None
    projection_margin_fraction: float = 0.0
    projection_lower_margin_fraction: float = 0.0
    plan_steps: float = 0.0
    plan_updates: float = 0.0
    updates_per_env_step: float | None = None
    recurring: RecurringPlan = RecurringPlan()
    what_ifs: tuple[BatchWhatIf, ...] = ()
    #: Range (s) of a fresh training's one-off costs below and above ``one_off_seconds``.
    one_off_spread_seconds: tuple[float, float] = (0.0, 0.0)

    @property
    def fixed_seconds(self) -> float:
        """What does not scale with the epochs (s): one-off costs, evaluations and checkpoints."""
        return self.one_off_seconds + self.recurring.seconds

    @property
    def fixed_lower_seconds(self) -> float:
        """:attr:`fixed_seconds` with the one-off costs at the low end of their range (s)."""
        return self.fixed_seconds - self.one_off_spread_seconds[0]

    @property
    def fixed_upper_seconds(self) -> float:
        """:attr:`fixed_seconds` with the one-off costs at the high end of their range (s)."""
        return self.fixed_seconds + self.one_off_spread_seconds[1]

    @property
    def epochs_seconds(self) -> float:
        """N × mean epoch time, in seconds (the part that scales with the device's speed)."""
        return self.planned_epochs * self.mean_epoch_ms / MS_PER_S

    def statistical_margin_seconds(self, measured_epochs: int | None = None) -> float:
        """The margin (s) from the measured variance, or after ``measured_epochs`` with it held."""
        epochs = self.measured_epochs if measured_epochs is None else measured_epochs
        if self.rounds is not None and epochs != self.measured_epochs:
            halfwidth_ms = halfwidth_after_rounds_ms(
                self.halfwidth_ms, self.rounds, epochs - self.measured_epochs, self.confidence_level
            )
        else:
            halfwidth_ms = halfwidth_at_epochs_ms(self.halfwidth_ms, self.measured_epochs, epochs)
        return total_time_margin_ms(halfwidth_ms, epochs, self.planned_epochs) / MS_PER_S

    @property
    def drift_margin_seconds(self) -> float:
        """What a flagged drift or throttling adds to the margin (s): the drift carried to the plan, else 0."""
        return self.drift_ms_per_epoch * self.planned_epochs / MS_PER_S if self.drift_flags else 0.0

    def margin_seconds_at(
        self, measured_epochs: int | None = None, *, widened: bool = True, below: bool = False
    ) -> float:
        """The margin (s) above (``below``: under) the total: statistical, drift when ``widened``, projection."""
        measured = self.statistical_margin_seconds(measured_epochs) + (self.drift_margin_seconds if widened else 0.0)
        projection = self.projection_lower_margin_fraction if below else self.projection_margin_fraction
        return measured + projection * (self.epochs_seconds + self.recurring.eval_seconds)

    @property
    def margin_seconds(self) -> float:
        """The margin (s) above the total, widened for a flagged drift."""
        return self.margin_seconds_at()

    @property
    def lower_margin_seconds(self) -> float:
        """The margin (s) under the total: :attr:`margin_seconds` with a projection's lower side."""
        return self.margin_seconds_at(below=True)

    @property
    def hours(self) -> float:
        return (self.epochs_seconds + self.fixed_seconds) / SECONDS_PER_HOUR

    @property
    def upper_hours(self) -> float:
        """The upper bound (h), the one-off costs at the high end of their range."""
        return self.hours + (self.margin_seconds + self.one_off_spread_seconds[1]) / SECONDS_PER_HOUR

    @property
    def lower_hours(self) -> float:
        """The lower bound (h), never below the fixed costs at their low end."""
        return (self.fixed_lower_seconds + max(0.0, self.epochs_seconds - self.lower_margin_seconds)) / SECONDS_PER_HOUR

    @property
    def upper_bound_level(self) -> float:
        """The one-sided level of ``upper_hours``: (1 + level) / 2 of the decision interval."""
        return (1.0 + self.confidence_level) / 2.0

    def model_estimate(
        self, *, decided_on: bool, step_split: StepSplit, energy_kwh: float | None, energy_basis: str | None
    ) -> ModelEstimate:
        """The estimate as the report's per-model record, with the step's split and the training's energy (kWh)."""
        return ModelEstimate(
            status="ok",
            estimated=True,
            decided_on=decided_on,
            # The fields the two records share, by name, and the recurring plan's.
            **{name: getattr(self, name) for name in _SHARED_FIELDS},
            **asdict(self.recurring),
            estimated_hours=self.hours,
            estimated_hours_upper=self.upper_hours,
            upper_bound_level=self.upper_bound_level,
            step_split=step_split,
            energy_kwh=energy_kwh,
            energy_basis=energy_basis,
            estimated_hours_lower=self.lower_hours,
            drift_margin_hours=self.drift_margin_seconds / SECONDS_PER_HOUR if self.drift_flags else None,
            recurring_seconds=self.recurring.seconds,
            batch_what_ifs=list(self.what_ifs),
            one_off_lower_seconds=self.one_off_seconds - self.one_off_spread_seconds[0],
            one_off_upper_seconds=self.one_off_seconds + self.one_off_spread_seconds[1],
        )


_SHARED_FIELDS = tuple(f.name for f in fields(TimeEstimate) if f.name in ModelEstimate.__dataclass_fields__)


@dataclass(frozen=True)
class FirstTimeCost:
    """The process's one-time cost at the timed batch (``seconds``) and the range of a fresh first build's cost (s)."""

    seconds: float
    first_build_seconds: float
    lower_seconds: float
    upper_seconds: float
    observations_s: tuple[float, ...]

    @property
    def spread_seconds(self) -> tuple[float, float]:
        """How far under and over ``first_build_seconds`` the range reaches (s)."""
        return self.first_build_seconds - self.lower_seconds, self.upper_seconds - self.first_build_seconds


def first_time_cost(result: ModelResult) -> FirstTimeCost:
    """What the process paid once at the timed batch (s): the earliest batch-search trial at that size less the same
    steps at the fastest later trial's speed; the range spans every timed build at that size."""
    search = result.batch_search
    step_ms = result.step_time_ms
    observations: list[float] = []
    point = 0.0
    if search is not None and result.batch_size is not None:
        trials = [t for t in search.trials if t.ok and t.size == result.batch_size and t.seconds and t.steps > 0]
        if len(trials) >= 2:
            fastest_s_per_step = min(t.seconds / t.steps for t in trials[1:])
            point = max(0.0, trials[0].seconds - trials[0].steps * fastest_s_per_step)
            if step_ms is not None:
                observations = [t.seconds - t.steps * step_ms / MS_PER_S for t in trials]
    own_first_s = 0.0
    if result.first_step_ms is not None and step_ms is not None:
        own_first_s = (result.first_step_ms - step_ms) / MS_PER_S
        observations.append(own_first_s)
    first_build = own_first_s + point
    if len(observations) < 2:
        return FirstTimeCost(point, first_build, first_build, first_build, tuple(observations))
    return FirstTimeCost(
        seconds=point,
        first_build_seconds=first_build,
        lower_seconds=min(first_build, min(observations)),
        upper_seconds=max(first_build, max(observations)),
        observations_s=tuple(observations),
    )


def _first_epoch_excess_ms(rounds: RoundStatistics | None) -> float:
    """What the slower first epoch after a gap costs a training once (ms), where the rounds showed it."""
    return 0.0 if rounds is None else max(rounds.first_epoch_excess_ms, 0.0)


def estimate_training_time(name: str, result: ModelResult, plan: TrainingPlanConfig) -> TimeEstimate:
    """Extrapolate one model's result to its planned training; ValueError when unmeasured or unplanned."""
    if result.status != "ok":
        raise ValueError(f"status {result.status}" + (f": {result.error}" if result.error else ""))
    stats, samples_per_epoch, step_ms = result.statistics, result.samples_per_epoch, result.step_time_ms
    throughput, steps_per_epoch = result.samples_per_second, result.steps_per_epoch
    if stats is None or samples_per_epoch is None or step_ms is None or throughput is None or not steps_per_epoch:
        raise ValueError("no epoch-time statistics (fewer than two measured epochs)")
    samples, basis = plan_samples(name, result.sample_unit, plan)
    calibration_s = result.calibration_seconds
    if calibration_s is None:
        calibration_s = (result.first_step_ms or 0.0) / MS_PER_S
    plan_steps = samples / result.samples_per_step if result.samples_per_step else 0.0
    plan_updates = plan_steps * (result.updates_per_step or 1.0)
    basis += f" = {plan_steps:,.0f} steps"
    if result.updates_per_env_step is not None:
        basis += f" at {result.updates_per_env_step:.4g} gradient updates per env step = {plan_updates:,.0f} updates"
    elif result.sample_unit == "window" and result.batch_size:
        basis += f" of batch {result.batch_size}"
    recurring = recurring_plan(result, plan_updates, plan)
    first_time = first_time_cost(result)
    if recurring.eval_passes:
        basis += f"; {recurring.eval_passes:,} validation passes of {recurring.eval_pass_seconds:,.3g} s"
    if recurring.checkpoints:
        basis += f"; {recurring.checkpoints:,} checkpoints of {recurring.checkpoint_seconds:,.3g} s"
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
        mean_epoch_ms=stats.decision_mean_ms,
        halfwidth_ms=stats.decision_halfwidth_ms,
        confidence_level=stats.confidence_level,
        one_off_seconds=calibration_s
        + (sum(result.warmup_epoch_times_ms) + _first_epoch_excess_ms(stats.rounds)) / MS_PER_S
        + first_time.seconds,
        one_off_spread_seconds=first_time.spread_seconds,
        drift_flags=_drift_flags(result),
        drift_ms_per_epoch=drift_ms_per_epoch(result.raw_epoch_times_ms),
        rounds=stats.rounds,
        plan_steps=plan_steps,
        plan_updates=plan_updates,
        updates_per_env_step=result.updates_per_env_step,
        recurring=recurring,
        what_ifs=tuple(batch_what_ifs(result, samples)),
    )


def new_training_bounds_seconds(estimate: TimeEstimate, result: ModelResult) -> tuple[float, float]:
    """The bounds (s) on one new training in a fresh process, what ``gpubench validate`` checks."""
    stats = result.statistics
    if stats is None or stats.rounds is None or len(stats.rounds.epochs_per_round) < 2:
        return estimate.lower_hours * SECONDS_PER_HOUR, estimate.upper_hours * SECONDS_PER_HOUR
    from gpubench.stats.rounds import new_run_interval, round_gaps_epochs, split_rounds

    rounds_ms = split_rounds(result.raw_epoch_times_ms, stats.rounds.epochs_per_round)
    epochs = max(1, round(estimate.planned_epochs))
    gaps = stats.rounds.gaps_epochs
    records = result.rounds or []
    if gaps is None and len(records) == len(rounds_ms):
        gaps = round_gaps_epochs(
            [r.started_s for r in records], [r.epochs for r in records], [r.mean_epoch_ms for r in records]
        )
    # A report from before the first epoch after a gap was left out and ρ bounded from the run is read as written.
    from_run = stats.rounds.steady_mean_ms is not None
    low_ms, high_ms = new_run_interval(
        rounds_ms, epochs, stats.confidence_level, gaps, from_run=from_run, earlier_runs=stats.rounds.earlier_runs
    )
    lower_s = estimate.fixed_lower_seconds + estimate.planned_epochs * low_ms / MS_PER_S
    upper_s = (
        estimate.fixed_upper_seconds + estimate.planned_epochs * high_ms / MS_PER_S + estimate.drift_margin_seconds
    )
    return lower_s, upper_s


@dataclass(frozen=True)
class TotalTime:
    """The time of training several models one after another (hours): the estimate and its prediction bounds."""

    hours: float
    lower_hours: float
    upper_hours: float


def combine_estimates(
    estimates: Sequence[TimeEstimate],
    time_ratios: Sequence[float] | None = None,
    *,
    measured_epochs: Mapping[str, int] | None = None,
    widened: bool = True,
) -> TotalTime:
    """The total of training ``estimates``' models in sequence: times add, and so do margins (errors may share a
    cause)."""
    ratios = time_ratios or [1.0] * len(estimates)
    epochs = measured_epochs or {}
    seconds = lower_s = margin_s = 0.0
    for estimate, ratio in zip(estimates, ratios, strict=True):
        measured = epochs.get(estimate.model)
        margin = estimate.margin_seconds_at(measured, widened=widened) * ratio
        margin_below = estimate.margin_seconds_at(measured, widened=widened, below=True) * ratio
        epochs_s = estimate.epochs_seconds * ratio
        seconds += epochs_s + estimate.fixed_seconds
        lower_s += estimate.fixed_lower_seconds + max(0.0, epochs_s - margin_below)
        margin_s += margin + estimate.one_off_spread_seconds[1]
    return TotalTime(
        hours=seconds / SECONDS_PER_HOUR,
        lower_hours=lower_s / SECONDS_PER_HOUR,
        upper_hours=(seconds + margin_s) / SECONDS_PER_HOUR,
    )


def checkpoint_interval_hours(upper_hours: float) -> float | None:
    """Hours between checkpoints: a tenth of ``upper_hours``, in quarter hours within [0.25, 4]; None below 0.25."""
    if upper_hours < _CHECKPOINT_MIN_HOURS:
        return None
    interval = min(_CHECKPOINT_MAX_HOURS, upper_hours * CHECKPOINT_RUN_FRACTION)
    return max(_CHECKPOINT_MIN_HOURS, math.floor(interval / _CHECKPOINT_MIN_HOURS) * _CHECKPOINT_MIN_HOURS)


#: How a model's estimate is made, in words: the report's ``recommendation.method.estimate``.
ESTIMATE_METHOD = method_text("estimate")


#: How the prediction bounds are made, in words: the report's ``recommendation.method.upper_bound``.
UPPER_BOUND_METHOD = method_text("upper_bound")
