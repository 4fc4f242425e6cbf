"""The batch-size search: its trials, the throughput curve, the result and the step-downs after an out-of-memory."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from gpubench.results.codec import Record


@dataclass(frozen=True)
class BatchTrial(Record):
    """One trial of the batch search: size, outcome (``oom``: ``error`` is the error's first line;
    ``over_headroom``: its peak reserved MB broke the limit), phase, steps, and measurements (None after an OOM)."""

    size: int
    status: Literal["ok", "oom", "over_headroom"]
    phase: Literal["search", "verify"]
    steps: int = 0
    peak_reserved_mb: float | None = None
    samples_per_s: float | None = None
    error: str | None = None
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
    """The batch search's answer and its evidence (sizes in samples, MB): ``batch_size`` is ``policy``'s re-verified
    choice, ``knee_size`` the smallest within ``knee_fraction`` of the best throughput; ``time_limited``: the largest
    fitting size is a lower bound; ``batch_is_hyperparameter``: the algorithm's own batch, priced at no other."""

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
