"""The joint decision-driven stop section of ``benchmarks/statistics_coverage.py`` (``--only-joint-stop``): a seeded
simulation of ``statistics.adaptive=decision`` over two critical models, through the runner's own pieces.

Each simulated job measures the critical models as the runner does: round 1 of each model in turn, the later fixed
rounds round-robin (``bench.model_rounds.split_epochs`` of ``epochs`` into ``statistics.rounds``), then one round
at a time wherever :func:`gpubench.decision.stopping.next_round` sends it, until it stops. Every model's section is
summarised by :func:`gpubench.stats.epoch_times.summarize_epoch_times` with its rounds and the gaps between them, as
``gpubench.bench.model_rounds.merged_result`` does; the verdict at the stop is :func:`gpubench.decision.rule.decide` on
:func:`gpubench.decision.estimate.estimate_training_time` of each section.

Epochs: every model's epoch takes 1000 ms × (1 + h_r + CV · x_t), h_r ~ N(0, σ_h) per round and x an AR(1) process
of unit variance per model that runs on in time (one epoch of any model = one step of the clock), so the gap
between two rounds of one model is the other models' epochs measured in between (plus their warmup after the
rebuild). The true total of a model is its plan's epochs × 1000 ms (the host levels average out over a training of
hours): the plan (``decision.plan.samples``) is set so that the critical total is the cell's true hours, split
between the models by ``shares``. No one-off or recurring costs: the bounds are the epochs' alone.
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from gpubench.bench.model_rounds import split_epochs
from gpubench.decision.config import DecisionConfig, TrainingPlanConfig
from gpubench.decision.estimate import estimate_training_time
from gpubench.decision.rule import CLOUD_GPU_RECOMMENDED, GRAY_ZONE, LOCAL_GPU_VIABLE, decide
from gpubench.decision.stopping import next_round
from gpubench.results import ModelResult
from gpubench.stats.config import ADAPTIVE_DECISION, StatisticsConfig
from gpubench.stats.epoch_times import summarize_epoch_times
from gpubench.stats.rounds import round_gaps_epochs

MEAN_MS = 1000.0
STEPS_PER_EPOCH = 100
SAMPLES_PER_STEP = 8.0
SAMPLES_PER_EPOCH = STEPS_PER_EPOCH * SAMPLES_PER_STEP
CRITICAL_NAMES = ("dqn", "ppo", "mamba2", "tft")
#: Epochs of a rebuilt model's warmup before its later rounds (``warmup_epochs``' default): the clock runs on.
WARMUP_EPOCHS = 2


@dataclass
class _Host:
    """The host's level, an AR(1) across the job's rounds at ``phi`` with marginal ``sigma`` (φ = 0: a fresh level
    each round), started from its stationary distribution."""

    sigma: float
    phi: float = 0.0
    level: float | None = None

    def step(self, rng: np.random.Generator) -> float:
        shock = rng.normal(0.0, self.sigma)
        self.level = shock if self.level is None else self.phi * self.level + math.sqrt(1.0 - self.phi**2) * shock
        return self.level


@dataclass
class _Model:
    """One simulated model: its rounds' epoch times (ms) and start times (s), and its AR(1) state on the clock."""

    name: str
    rounds: list[list[float]] = field(default_factory=list)
    starts_s: list[float] = field(default_factory=list)
    ar_state: float | None = None
    ar_clock_s: float = 0.0


def _measure(
    rng: np.random.Generator,
    model: _Model,
    epochs: int,
    clock_s: float,
    cv: float,
    rho: float,
    host: _Host,
    first_excess: float = 0.0,
):
    """One round of ``epochs`` epochs of ``model`` starting at ``clock_s`` (s); returns the clock after it. The
    AR(1) state steps on through the time since the model's last epoch: x_t = ρ^k x_{t−k} + √(1 − ρ^{2k}) ε. A later
    round's first epoch is ``first_excess`` slower (the first epoch after a gap)."""
    level = host.step(rng)
    later = bool(model.rounds)
    times = []
    for k in range(epochs):
        now = clock_s + k
        if model.ar_state is None:
            model.ar_state = rng.standard_normal()
        else:
            decay = rho ** (now - model.ar_clock_s)
            model.ar_state = decay * model.ar_state + math.sqrt(1.0 - decay**2) * rng.standard_normal()
        model.ar_clock_s = now
        slow = first_excess if later and k == 0 else 0.0
        times.append(max(MEAN_MS * (1.0 + level + cv * model.ar_state) * (1.0 + slow), 0.01 * MEAN_MS))
    model.rounds.append(times)
    model.starts_s.append(clock_s)
    return clock_s + epochs


def _section(
    model: _Model, statistics: StatisticsConfig, earlier_runs: Sequence[tuple[float, float]] = ()
) -> ModelResult:
    """The model's report section over its rounds, summarised as ``merged_result`` does (with the machine's history
    of the model, ``earlier_runs``)."""
    times = [t for r in model.rounds for t in r]
    counts = [len(r) for r in model.rounds]
    gaps = None
    if len(counts) > 1:
        gaps = round_gaps_epochs(model.starts_s, counts, [float(np.mean(r)) for r in model.rounds])
    stats = summarize_epoch_times(
        times,
        confidence_level=statistics.confidence_level,
        cv_threshold=statistics.cv_threshold,
        outlier_rule=statistics.outlier_rule,
        target_rel_halfwidth=statistics.target_rel_halfwidth,
        rounds=counts if len(counts) > 1 else None,
        round_gaps_epochs=gaps,
        earlier_runs=earlier_runs,
    )
    return ModelResult(
        status="ok",
        batch_size=256,
        gradient_accumulation_steps=1,
        raw_epoch_times_ms=times,
        steps_per_epoch=STEPS_PER_EPOCH,
        samples_per_step=SAMPLES_PER_STEP,
        sample_unit="env_step",
        calibration_seconds=0.0,
        statistics=stats,
    )


@dataclass(frozen=True)
class JointStopRun:
    """One simulated job at its stop: the verdict, the total's bounds and estimate (h), epochs per model."""

    decision: str | None
    lower_hours: float
    hours: float
    upper_hours: float
    epochs: tuple[int, ...]
    stop_reason: str


def _fixed_rounds(
    rng: np.random.Generator,
    names: Sequence[str],
    plan: Sequence[int],
    cv: float,
    rho: float,
    host: _Host,
    first_excess: float,
) -> tuple[dict[str, _Model], float]:
    """Round 1 of every model in turn, then the later fixed rounds round-robin, as the runner measures them."""
    models = {name: _Model(name) for name in names}
    clock_s = 0.0
    for name in names:
        clock_s = _measure(rng, models[name], plan[0], clock_s, cv, rho, host)
    clock_s += WARMUP_EPOCHS * len(names)
    for size in plan[1:]:
        for name in names:
            clock_s = _measure(rng, models[name], size, clock_s, cv, rho, host, first_excess)
    return models, clock_s


def earlier_run(
    rng: np.random.Generator,
    names: Sequence[str],
    statistics: StatisticsConfig,
    epochs: int,
    cv: float,
    rho: float,
    host: _Host,
    first_excess: float,
) -> dict[str, tuple[float, float]]:
    """An earlier fixed run on the machine (its own host levels), as the history stores each model: its mean epoch
    (ms) and the relative variance of that mean."""
    models, _ = _fixed_rounds(rng, names, split_epochs(epochs, statistics.rounds), cv, rho, host, first_excess)
    summaries = {}
    for name, model in models.items():
        stats = _section(model, statistics).statistics
        assert stats is not None and stats.rounds is not None and stats.rounds.variance_of_mean_ms2 is not None
        summaries[name] = (stats.decision_mean_ms, stats.rounds.variance_of_mean_ms2 / stats.decision_mean_ms**2)
    return summaries


def joint_stop_run(
    rng: np.random.Generator,
    true_hours: Sequence[float],
    rho: float,
    cv: float,
    host_sigma: float,
    statistics: StatisticsConfig,
    epochs: int,
    host_phi: float = 0.0,
    earlier: int = 0,
    first_excess: float = 0.0,
) -> JointStopRun:
    """One job of ``statistics.adaptive=decision`` over models whose true totals are ``true_hours`` (h), after
    ``earlier`` earlier fixed runs of the same models on the machine (each with host levels of its own)."""
    # The seed's critical pair by name (decision.critical_models takes known models); the plan is the cell's own.
    names = list(CRITICAL_NAMES[: len(true_hours)])
    samples = {name: hours * 3600.0 * SAMPLES_PER_EPOCH for name, hours in zip(names, true_hours, strict=True)}
    decision = DecisionConfig(critical_models=names, plan=TrainingPlanConfig(samples=samples))
    fixed = replace(statistics, adaptive="off")
    history = [
        earlier_run(rng, names, fixed, epochs, cv, rho, _Host(host_sigma, host_phi), first_excess)
        for _ in range(earlier)
    ]
    earlier_runs = {name: [run[name] for run in history] for name in names}
    plan = split_epochs(epochs, statistics.rounds)
    host = _Host(host_sigma, host_phi)
    models, clock_s = _fixed_rounds(rng, names, plan, cv, rho, host, first_excess)
    sections = {name: _section(models[name], statistics, earlier_runs[name]) for name in names}
    reason = "fixed rounds"
    if len(plan) > 1:
        while True:
            choice = next_round(
                sections,
                names,
                {n: sum(len(r) for r in models[n].rounds) for n in names},
                dict.fromkeys(names, plan[-1]),
                statistics,
                decision,
                clock_s,
            )
            if choice.model is None:
                reason = ",".join(sorted(set(choice.stop_reasons.values())))
                break
            clock_s = _measure(rng, models[choice.model], plan[-1], clock_s, cv, rho, host, first_excess)
            sections[choice.model] = _section(models[choice.model], statistics, earlier_runs[choice.model])
    estimates = {name: estimate_training_time(name, sections[name], decision.plan) for name in names}
    verdict = decide(names, sections, estimates, [], decision)
    total = verdict.total
    assert total is not None
    return JointStopRun(
        decision=verdict.decision,
        lower_hours=total.lower_hours,
        hours=total.hours,
        upper_hours=total.upper_hours,
        epochs=tuple(sections[n].statistics.n for n in names),
        stop_reason=reason,
    )


@dataclass(frozen=True)
class JointStopCell:
    """Rates over the runs of one cell (fractions): the bounds' coverage of the true total at the stop, the
    verdicts, wrong verdicts (LOCAL with the truth over the local limit, CLOUD with it under the cloud threshold),
    the runs that stopped settled, and the mean epochs per job (all critical models together)."""

    runs: int
    upper_coverage: float
    lower_coverage: float
    coverage: float
    local: float
    cloud: float
    gray: float
    wrong: float
    settled: float
    mean_epochs: float


def joint_stop_cell(
    rng: np.random.Generator,
    runs: int,
    true_total_hours: float,
    shares: Sequence[float],
    rho: float,
    cv: float,
    host_sigma: float,
    statistics: StatisticsConfig,
    epochs: int,
    host_phi: float = 0.0,
    earlier: int = 0,
    first_excess: float = 0.0,
) -> JointStopCell:
    """``runs`` seeded jobs whose critical total is ``true_total_hours``, split by ``shares``."""
    statistics = replace(statistics, adaptive=ADAPTIVE_DECISION)
    true_hours = [true_total_hours * s / sum(shares) for s in shares]
    decision = DecisionConfig()
    results = [
        joint_stop_run(rng, true_hours, rho, cv, host_sigma, statistics, epochs, host_phi, earlier, first_excess)
        for _ in range(runs)
    ]
    upper = np.mean([r.upper_hours >= true_total_hours for r in results])
    lower = np.mean([r.lower_hours <= true_total_hours for r in results])
    both = np.mean([r.lower_hours <= true_total_hours <= r.upper_hours for r in results])
    verdicts = [r.decision for r in results]
    wrong_local = true_total_hours >= decision.local_max_hours
    wrong_cloud = true_total_hours <= decision.cloud_min_hours
    wrong = np.mean(
        [(v == LOCAL_GPU_VIABLE and wrong_local) or (v == CLOUD_GPU_RECOMMENDED and wrong_cloud) for v in verdicts]
    )
    return JointStopCell(
        runs=runs,
        upper_coverage=float(upper),
        lower_coverage=float(lower),
        coverage=float(both),
        local=verdicts.count(LOCAL_GPU_VIABLE) / runs,
        cloud=verdicts.count(CLOUD_GPU_RECOMMENDED) / runs,
        gray=verdicts.count(GRAY_ZONE) / runs,
        wrong=float(wrong),
        settled=float(np.mean([r.stop_reason == "decision_settled" for r in results])),
        mean_epochs=float(np.mean([sum(r.epochs) for r in results])),
    )
