"""A data-parallel run's figures from its ranks' measurements: global epochs (the slowest rank's: the all-reduce
waits for it), throughputs and the scaling efficiency against the job's 1-process run."""

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from gpubench.results import BatchSearchResult, DistributedScaling, ModelResult, Record
from gpubench.results.units import MS_PER_S
from gpubench.stats.compare import RunMean, fieller_interval
from gpubench.stats.config import StatisticsConfig
from gpubench.stats.epoch_times import summarize_epoch_times, t_interval
from gpubench.stats.intervals import MIN_EPOCHS

METHOD_FIELLER = "fieller_long_run"
METHOD_T_RATIO = "t_interval_ratio"


@dataclass(frozen=True)
class RankMeasurement(Record):
    """What one rank measured (``peak_reserved_mb`` None on the CPU)."""

    rank: int
    epoch_times_ms: list[float]
    warmup_epoch_times_ms: list[float]
    samples_per_step: float
    peak_reserved_mb: float | None
    stop_reason: str


@dataclass(frozen=True)
class GatheredRun(Record):
    """What rank 0 gathered from every rank and wrote for the parent (``result.json``)."""

    world_size: int
    backend: str
    batch_size_per_rank: int
    steps_per_epoch: int
    sample_unit: str
    ranks: list[RankMeasurement]
    batch_search: BatchSearchResult | None = None
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ScalingEfficiency:
    """Global throughput over world size × 1-process throughput (1.0: linear), its interval and method."""

    value: float
    interval: tuple[float, float] | None
    method: str | None


def global_epoch_times_ms(per_rank_epoch_times_ms: Sequence[Sequence[float]]) -> list[float]:
    """Per epoch that every rank completed, the slowest rank's time (ms)."""
    epochs = min(len(times) for times in per_rank_epoch_times_ms)
    return [max(times[k] for times in per_rank_epoch_times_ms) for k in range(epochs)]


def _finite_interval(low: float, high: float) -> tuple[float, float] | None:
    return (low, high) if math.isfinite(low) and math.isfinite(high) and low > 0 else None


def scaling_efficiency(
    single_epoch_times_ms: Sequence[float],
    single_samples_per_epoch: float,
    global_times_ms: Sequence[float],
    rank_samples_per_epoch: float,
    confidence_level: float,
) -> ScalingEfficiency:
    """``(mean t₁ / S₁) / (mean t_d / S_d)`` with its interval: Fieller's from :data:`MIN_EPOCHS` epochs each, else
    the ratio of the ends of each run's t interval at level √c (a conservative box)."""
    single_per_sample = np.asarray(single_epoch_times_ms, dtype=float) / single_samples_per_epoch
    global_per_sample = np.asarray(global_times_ms, dtype=float) / rank_samples_per_epoch
    value = float(single_per_sample.mean() / global_per_sample.mean())
    if min(single_per_sample.size, global_per_sample.size) >= MIN_EPOCHS:
        ratio = fieller_interval(RunMean.of([global_per_sample]), RunMean.of([single_per_sample]), confidence_level)
        return ScalingEfficiency(value, _finite_interval(ratio.low, ratio.high), METHOD_FIELLER)
    if min(single_per_sample.size, global_per_sample.size) >= 2:
        level = math.sqrt(confidence_level)
        single_low, single_high = t_interval(single_per_sample, level)
        global_low, global_high = t_interval(global_per_sample, level)
        if global_low <= 0:
            return ScalingEfficiency(value, None, METHOD_T_RATIO)
        return ScalingEfficiency(
            value, _finite_interval(single_low / global_high, single_high / global_low), METHOD_T_RATIO
        )
    return ScalingEfficiency(value, None, None)


def distributed_scaling(gathered: GatheredRun, single: ModelResult, statistics: StatisticsConfig) -> DistributedScaling:
    """The model's ``distributed`` section from its ranks' measurements and its 1-process result."""
    per_rank = [rank.epoch_times_ms for rank in sorted(gathered.ranks, key=lambda rank: rank.rank)]
    global_times = global_epoch_times_ms(per_rank)
    warmup = global_epoch_times_ms([rank.warmup_epoch_times_ms for rank in gathered.ranks])
    samples_per_step = gathered.ranks[0].samples_per_step
    rank_samples_per_epoch = gathered.steps_per_epoch * samples_per_step
    status, error = "ok", None
    if any(rank.stop_reason == "diverged" for rank in gathered.ranks):
        status, error = "diverged", "training diverged under DDP (a NaN/Inf loss or gradient); measurement stopped"
    base = DistributedScaling(
        status=status,
        error=error,
        world_size=gathered.world_size,
        backend=gathered.backend,
        batch_size_per_rank=gathered.batch_size_per_rank,
        steps_per_epoch=gathered.steps_per_epoch,
        samples_per_step_per_rank=samples_per_step,
        sample_unit=gathered.sample_unit,
        raw_epoch_times_ms=global_times,
        warmup_epoch_times_ms=warmup,
        per_rank_epoch_times_ms=[list(times) for times in per_rank],
        peak_reserved_mb_per_rank=[r.peak_reserved_mb for r in gathered.ranks if r.peak_reserved_mb is not None],
        batch_search=gathered.batch_search,
        warnings=list(gathered.warnings),
    )
    if len(global_times) < 2:
        return base
    single_samples_per_epoch = single.samples_per_epoch
    single_throughput = single.samples_per_second
    efficiency = None
    if single_samples_per_epoch and single.raw_epoch_times_ms:
        efficiency = scaling_efficiency(
            single.raw_epoch_times_ms,
            single_samples_per_epoch,
            global_times,
            rank_samples_per_epoch,
            statistics.confidence_level,
        )
    return replace(
        base,
        statistics=summarize_epoch_times(
            global_times,
            confidence_level=statistics.confidence_level,
            cv_threshold=statistics.cv_threshold,
            outlier_rule=statistics.outlier_rule,
            target_rel_halfwidth=statistics.target_rel_halfwidth,
        ),
        per_rank_samples_per_second=[rank_samples_per_epoch / (float(np.mean(t)) / MS_PER_S) for t in per_rank],
        global_samples_per_second=len(per_rank) * rank_samples_per_epoch / (float(np.mean(global_times)) / MS_PER_S),
        single_process_samples_per_second=None if single_throughput is None else single_throughput.mean,
        scaling_efficiency=None if efficiency is None else efficiency.value,
        scaling_efficiency_interval=None if efficiency is None else efficiency.interval,
        scaling_efficiency_method=None if efficiency is None else efficiency.method,
    )
