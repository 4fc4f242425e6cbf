"""The billed hours of a training on spot capacity, simulated from a distribution of instance lifetimes (hours).

``work`` hours of training save a checkpoint of δ hours after every τ hours of work. An instance runs until its
lifetime (drawn independently) ends, losing the work since the last checkpoint; the next one first spends R hours
restarting (not the first, as in Daly's model, :mod:`gpubench.decision.spot`, which this reproduces for exponential
lifetimes). Billed hours are the hours on instances. The shipped lifetimes (``gpubench/prices/spot_lifetimes.json``,
from the preemption traces of Wu et al., NSDI '24, by ``benchmarks/spot_trace_derive.py``) are a quantile table
with an exponential tail. Deterministic for a seed."""

import json
import math
from dataclasses import dataclass
from importlib import resources
from typing import Protocol

import numpy as np

from gpubench.decision.spot import daly_interval_hours

LIFETIMES_FILE = "spot_lifetimes.json"
#: The mean's Monte Carlo standard error is then a fraction of a percent of it.
DEFAULT_SIMULATIONS = 20_000
#: Instances per training past which the simulation stops: lifetimes mostly shorter than the restart never finish.
MAX_INSTANCES = 100_000


class LifetimeDistribution(Protocol):
    """Hours from an instance's start to its interruption."""

    @property
    def mean_hours(self) -> float:
        """The mean lifetime (h): M of Young's and Daly's intervals."""
        ...

    def sample_hours(self, rng: np.random.Generator, count: int) -> np.ndarray:
        """``count`` independent lifetimes (h)."""
        ...


@dataclass(frozen=True)
class ExponentialLifetimes:
    """Exponential lifetimes of mean ``mean_hours`` (interruptions as a Poisson process of rate 1/mean per hour)."""

    mean_hours: float

    def __post_init__(self) -> None:
        if not self.mean_hours > 0:
            raise ValueError(f"need mean_hours > 0, got {self.mean_hours!r}")

    def sample_hours(self, rng: np.random.Generator, count: int) -> np.ndarray:
        """``count`` exponential lifetimes (h)."""
        return rng.exponential(self.mean_hours, count)


@dataclass(frozen=True)
class EmpiricalLifetimes:
    """Lifetimes from a quantile table (``quantile_hours`` at ``quantile_levels``, linear between); past the last
    level an exponential excess of mean ``tail_mean_excess_hours``; the trace's rate and count beside."""

    family: str
    quantile_levels: tuple[float, ...]
    quantile_hours: tuple[float, ...]
    tail_mean_excess_hours: float
    interruptions_per_hour: float
    interruptions: int
    source: str

    def __post_init__(self) -> None:
        levels, hours = np.asarray(self.quantile_levels), np.asarray(self.quantile_hours)
        if levels.size < 2 or levels.size != hours.size:
            raise ValueError(f"{self.family}: need at least two levels, one quantile per level")
        if levels[0] != 0.0 or levels[-1] >= 1.0 or np.any(np.diff(levels) <= 0):
            raise ValueError(f"{self.family}: quantile_levels must start at 0 and increase below 1")
        if hours[0] <= 0 or np.any(np.diff(hours) < 0):
            raise ValueError(f"{self.family}: quantile_hours must be positive and non-decreasing")
        if not self.tail_mean_excess_hours > 0:
            raise ValueError(f"{self.family}: need tail_mean_excess_hours > 0, got {self.tail_mean_excess_hours!r}")

    @property
    def mean_hours(self) -> float:
        """The mean lifetime (h) of the interpolated table and its tail."""
        levels, hours = np.asarray(self.quantile_levels), np.asarray(self.quantile_hours)
        body = float(np.sum(np.diff(levels) * (hours[:-1] + hours[1:]) / 2.0))
        return body + float(1.0 - levels[-1]) * (float(hours[-1]) + self.tail_mean_excess_hours)

    def sample_hours(self, rng: np.random.Generator, count: int) -> np.ndarray:
        """``count`` lifetimes (h) by inverse CDF: one uniform each, through the table or the exponential tail."""
        levels, hours = np.asarray(self.quantile_levels), np.asarray(self.quantile_hours)
        uniform = rng.random(count)
        in_tail = uniform >= levels[-1]
        # The exponential tail's inverse CDF: its conditional survival is (1 - u) / (1 - last level).
        survival = np.where(in_tail, (1.0 - uniform) / (1.0 - levels[-1]), 1.0)
        tail = hours[-1] - self.tail_mean_excess_hours * np.log(survival)
        return np.where(in_tail, tail, np.interp(uniform, levels, hours))


@dataclass(frozen=True)
class SpotBilledHours:
    """Billed hours (h) over ``simulations`` simulated trainings: mean, median, 90th percentile and the mean's
    standard error; the mean interruptions, the checkpoint interval (None without) and the mean lifetime M."""

    mean_hours: float
    median_hours: float
    p90_hours: float
    standard_error_hours: float
    mean_interruptions: float
    interval_hours: float | None
    mean_lifetime_hours: float
    simulations: int
    seed: int


def simulate_billed_hours(
    work_hours: float,
    interval_hours: float,
    checkpoint_hours: float,
    restart_hours: float,
    lifetimes: LifetimeDistribution,
    simulations: int = DEFAULT_SIMULATIONS,
    seed: int = 0,
) -> SpotBilledHours:
    """The billed hours of simulated trainings checkpointed every τ at δ each, restarting in R; without
    checkpoints pass τ = work and δ = 0."""
    if work_hours < 0 or interval_hours <= 0 or checkpoint_hours < 0 or restart_hours < 0 or simulations < 2:
        raise ValueError(
            f"need work >= 0, τ > 0, δ >= 0, R >= 0, simulations >= 2; got work={work_hours!r}, "
            f"τ={interval_hours!r}, δ={checkpoint_hours!r}, R={restart_hours!r}, simulations={simulations!r}"
        )
    rng = np.random.default_rng(seed)
    progress = np.zeros(simulations)
    billed = np.zeros(simulations)
    interruptions = np.zeros(simulations, dtype=np.int64)
    active = np.arange(simulations) if work_hours > 0 else np.arange(0)
    segment_hours = interval_hours + checkpoint_hours
    for instance in range(MAX_INSTANCES):
        if active.size == 0:
            break
        overhead = 0.0 if instance == 0 else restart_hours
        lifetime = lifetimes.sample_hours(rng, active.size)
        remaining = work_hours - progress[active]
        # Progress is a whole number of intervals; the tolerance keeps rounding from adding an empty segment.
        segments_left = np.ceil(remaining / interval_hours - 1e-9)
        needed = overhead + remaining + segments_left * checkpoint_hours
        finishes = lifetime >= needed
        billed[active] += np.where(finishes, needed, lifetime)
        saved_segments = np.floor(np.clip(lifetime - overhead, 0.0, None) / segment_hours)
        progress[active] += np.where(finishes, 0.0, saved_segments * interval_hours)
        interruptions[active] += ~finishes
        active = active[~finishes]
    else:
        raise RuntimeError(
            f"{active.size} of {simulations} simulated trainings still unfinished after {MAX_INSTANCES} instances: "
            f"lifetimes (mean {lifetimes.mean_hours:.3g} h) too short for the restart ({restart_hours:.3g} h) and "
            f"segment ({segment_hours:.3g} h)"
        )
    return SpotBilledHours(
        mean_hours=float(billed.mean()),
        median_hours=float(np.percentile(billed, 50)),
        p90_hours=float(np.percentile(billed, 90)),
        standard_error_hours=float(billed.std(ddof=1) / math.sqrt(simulations)),
        mean_interruptions=float(interruptions.mean()),
        interval_hours=float(interval_hours) if checkpoint_hours > 0 else None,
        mean_lifetime_hours=float(lifetimes.mean_hours),
        simulations=simulations,
        seed=seed,
    )


def spot_billed_hours(
    work_hours: float,
    checkpoint_hours: float | None,
    restart_hours: float,
    lifetimes: LifetimeDistribution,
    simulations: int = DEFAULT_SIMULATIONS,
    seed: int = 0,
) -> SpotBilledHours:
    """The billed hours of ``work_hours`` checkpointed every Daly interval for the lifetimes' mean, or, without
    ``checkpoint_hours``, restarted from the start after each interruption."""
    if work_hours == 0:
        return simulate_billed_hours(0.0, 1.0, 0.0, restart_hours, lifetimes, simulations, seed)
    if not checkpoint_hours:
        return simulate_billed_hours(work_hours, work_hours, 0.0, restart_hours, lifetimes, simulations, seed)
    interval = min(work_hours, daly_interval_hours(checkpoint_hours, lifetimes.mean_hours))
    return simulate_billed_hours(work_hours, interval, checkpoint_hours, restart_hours, lifetimes, simulations, seed)


@dataclass(frozen=True)
class SpotTrace:
    """The shipped spot lifetimes: the trace's provenance, each family's lifetimes and every family's interruption
    rate (per hour)."""

    citation: str
    trace_repository: str
    trace_commit: str
    default_family: str
    families: dict[str, EmpiricalLifetimes]
    interruptions_per_hour: dict[str, float]


def load_spot_trace() -> SpotTrace:
    """Read the shipped ``gpubench/prices/spot_lifetimes.json``."""
    document = json.loads(resources.files("gpubench.prices").joinpath(LIFETIMES_FILE).read_text())
    source = f"{document['citation']} Trace: {document['trace_repository']} at {document['trace_commit']}."
    families = {
        name: EmpiricalLifetimes(
            family=name,
            quantile_levels=tuple(family["quantile_levels"]),
            quantile_hours=tuple(family["hours_to_interruption"]),
            tail_mean_excess_hours=family["tail_mean_excess_hours"],
            interruptions_per_hour=family["interruptions_per_hour"],
            interruptions=family["interruptions"],
            source=source,
        )
        for name, family in document["families"].items()
    }
    rates = {
        name: family["interruptions_per_hour"]
        for group in ("families", "rate_only_families")
        for name, family in document[group].items()
    }
    provenance = {key: document[key] for key in ("citation", "trace_repository", "trace_commit", "default_family")}
    return SpotTrace(**provenance, families=families, interruptions_per_hour=rates)


def load_spot_lifetimes(family: str | None = None) -> EmpiricalLifetimes:
    """The shipped lifetimes of instance ``family`` (e.g. ``aws-p3.2xlarge``), or of the default family when None."""
    trace = load_spot_trace()
    name = trace.default_family if family is None else family
    if name not in trace.families:
        raise KeyError(f"no spot lifetimes for family {name!r}; shipped: {', '.join(sorted(trace.families))}")
    return trace.families[name]
