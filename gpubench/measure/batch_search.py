"""Batch-size search: the largest batch that trains without running out of device memory, and the policy on top.

``try_batch(size, steps)`` trains ``steps`` steps at ``size``, building its workload inside so a failed trial's memory
dies with it, and returns the peak reserved MB or a :class:`TrialResult`. The timed batch alone is re-verified over
longer runs: fragmentation keeps growing past what a short trial shows."""

import gc
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Literal

import torch

from gpubench.measure.config import BatchConfig
from gpubench.results import BatchSearchResult, BatchTrial, ThroughputPoint

#: Messages of a failed device allocation outside ``torch.OutOfMemoryError``: the allocator's own, a cudaMalloc of a
#: library's workspace, cuBLAS and cuDNN (device memory only: cuDNN's host-memory failure is not VRAM).
_OOM_MESSAGE_MARKERS: tuple[str, ...] = (
    "CUDA out of memory",
    "CUDA error: out of memory",
    "CUBLAS_STATUS_ALLOC_FAILED",
    "CUDNN_STATUS_ALLOC_FAILED",
    "CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED",
)

KNEE_FRACTION = 0.9
#: Steps per search trial: two or more, so the optimizer state exists when memory is read.
SEARCH_STEPS = 2
#: Steps per re-verification trial, long enough for the allocator's fragmentation to settle.
VERIFY_STEPS = 20
#: A timed size whose search peak is at most this fraction of the limit is not re-verified: fragmentation grows a
#: peak by a fraction, not by half the limit.
UNVERIFIED_PEAK_FRACTION = 0.5

TrialPhase = Literal["search", "verify"]


@dataclass(frozen=True)
class TrialResult:
    """One successful trial: peak reserved memory (MB), throughput (samples/s) and its steps' wall time (s)."""

    peak_reserved_mb: float
    samples_per_s: float | None = None
    seconds: float | None = None


TryBatch = Callable[[int, int], "float | TrialResult"]
#: This process's trial in, the trial every rank acts on out: identity in one process, a collective under DDP.
TrialAgreement = Callable[[BatchTrial], BatchTrial]


def same_trial(trial: BatchTrial) -> BatchTrial:
    return trial


@dataclass(frozen=True)
class BatchSearch:
    """The largest size that fit (None if ``min_size`` did not) and every trial in order. ``time_limited``: a trial
    took longer than ``trial_max_seconds`` (s), so ``best_size`` is only a lower bound."""

    min_size: int
    max_size: int
    best_size: int | None
    trials: list[BatchTrial]
    steps: int = SEARCH_STEPS
    peak_limit_mb: float | None = None
    time_limited: bool = False
    trial_max_seconds: float | None = None

    @property
    def smallest_failure(self) -> BatchTrial | None:
        """The smallest failed trial (out of memory or over the headroom), None when every trial fit."""
        failures = [trial for trial in self.trials if not trial.ok]
        return min(failures, key=lambda trial: trial.size) if failures else None

    def fitting_phrase(self) -> str:
        """``fits up to N``, or ``fits at least up to N`` when the search stopped on time."""
        return f"fits at least up to {self.best_size}" if self.time_limited else f"fits up to {self.best_size}"


@dataclass(frozen=True)
class BatchDecision:
    """The timed batch: the report's ``record`` of the decision and its evidence, beside the ``search``."""

    record: BatchSearchResult
    search: BatchSearch

    @property
    def verification(self) -> list[BatchTrial]:
        return [trial for trial in self.record.trials if trial.phase == "verify"]


def is_oom(exc: BaseException) -> bool:
    """True when ``exc`` or its explicit cause is a failed device allocation (``torch.OutOfMemoryError``, or a
    RuntimeError naming one); other CUDA, shape and host-memory errors are not."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, torch.OutOfMemoryError):
            return True
        if isinstance(current, RuntimeError) and any(marker in str(current) for marker in _OOM_MESSAGE_MARKERS):
            return True
        # Not __context__: that is whatever was being handled when an unrelated error occurred.
        current = current.__cause__
    return False


def release_device_memory() -> None:
    """Collect garbage, then return the caching allocator's unused blocks; nothing unless CUDA is initialised."""
    if not torch.cuda.is_initialized():
        return
    # Reference cycles (frames, autograd graphs) can still hold tensors whose blocks empty_cache cannot return.
    gc.collect()
    torch.cuda.empty_cache()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _run_trial(
    try_batch: TryBatch,
    size: int,
    steps: int,
    phase: TrialPhase,
    peak_limit_mb: float | None,
    agree: TrialAgreement = same_trial,
) -> BatchTrial:
    """One ``try_batch(size, steps)``, classified and passed through ``agree``; anything but an OOM re-raised."""
    oom_error: str | None = None
    try:
        outcome = try_batch(size, steps)
    except Exception as exc:
        if not is_oom(exc):
            raise
        # Only the text: the traceback holds the failed trial's tensors.
        oom_error = _first_line(exc)
    release_device_memory()
    if oom_error is not None:
        return agree(BatchTrial(size=size, status="oom", phase=phase, steps=steps, error=oom_error))
    result = TrialResult(peak_reserved_mb=float(outcome)) if isinstance(outcome, int | float) else outcome
    if not isinstance(result, TrialResult):
        raise TypeError(
            f"try_batch({size}, {steps}) returned {outcome!r}: expected the peak reserved MB or a TrialResult"
        )
    over = peak_limit_mb is not None and result.peak_reserved_mb > peak_limit_mb
    status = "over_headroom" if over else "ok"
    return agree(BatchTrial(size=size, status=status, phase=phase, steps=steps, **asdict(result)))


def find_max_batch_size(
    try_batch: TryBatch,
    min_size: int,
    max_size: int,
    *,
    steps: int = SEARCH_STEPS,
    peak_limit_mb: float | None = None,
    trial_max_seconds: float | None = None,
    agree: TrialAgreement = same_trial,
) -> BatchSearch:
    """Largest batch size in [min_size, max_size] whose ``steps``-step trial fits, memory growing with size.

    Doubles from ``2·min_size`` until a trial fails or ``max_size`` fits, then narrows between the last success and
    the first failure. A trial fails on an OOM or a peak reserved memory above ``peak_limit_mb`` (MB); a success
    slower than ``trial_max_seconds`` (s) ends the search (``time_limited``)."""
    if min_size < 1 or max_size < min_size:
        raise ValueError(f"need 1 <= min_size <= max_size, got min_size={min_size}, max_size={max_size}")
    if steps < 2:
        raise ValueError(f"a trial needs at least 2 steps (optimizer state exists from the first), got {steps}")
    trials: list[BatchTrial] = []

    def fits(size: int) -> bool:
        trials.append(_run_trial(try_batch, size, steps, "search", peak_limit_mb, agree))
        return trials[-1].ok

    def too_slow() -> bool:
        seconds = trials[-1].seconds
        return trial_max_seconds is not None and seconds is not None and seconds > trial_max_seconds

    last_ok: int | None = None
    first_fail: int | None = None
    time_limited = False
    size = min(2 * min_size, max_size)
    while fits(size):
        last_ok = size
        if too_slow():
            time_limited = True
            break
        if size == max_size:
            break
        size = min(2 * size, max_size)
    else:
        first_fail = size
    # A first failure tries min_size next: a model that does not fit at all costs two trials, not a bisection.
    if last_ok is None and first_fail is not None and first_fail > min_size:
        if fits(min_size):
            last_ok = min_size
        else:
            first_fail = min_size
    if last_ok is not None and first_fail is not None:
        moved: list[str] = []
        while first_fail - last_ok > 1:
            # Interpolated on the peaks, but halved after two moves of the same end (a curved line makes it creep).
            predicted = (
                None if moved[-2:] in (["ok", "ok"], ["fail", "fail"]) else _interpolated_size(trials, peak_limit_mb)
            )
            middle = (
                (last_ok + first_fail) // 2 if predicted is None else min(max(predicted, last_ok + 1), first_fail - 1)
            )
            if fits(middle):
                last_ok = middle
                moved.append("ok")
                if too_slow():
                    time_limited = True
                    break
            else:
                first_fail = middle
                moved.append("fail")
    return BatchSearch(min_size, max_size, last_ok, trials, steps, peak_limit_mb, time_limited, trial_max_seconds)


def _interpolated_size(trials: list[BatchTrial], peak_limit_mb: float | None) -> int | None:
    """The batch whose peak (MB) lies at ``peak_limit_mb`` on the line through the largest fit and the smallest
    over-limit peak above it (else the two largest fits); None without a limit or two peaks."""
    if peak_limit_mb is None:
        return None
    fitted = sorted((t.size, t.peak_reserved_mb) for t in trials if t.ok and t.peak_reserved_mb is not None)
    over = sorted(
        (t.size, t.peak_reserved_mb) for t in trials if t.status == "over_headroom" and t.peak_reserved_mb is not None
    )
    if not fitted:
        return None
    low = fitted[-1]
    high = next((point for point in over if point[0] > low[0]), None)
    if high is None:
        if len(fitted) < 2:
            return None
        low, high = fitted[-2], fitted[-1]
    slope_mb = (high[1] - low[1]) / (high[0] - low[0])
    if slope_mb <= 0:
        return None
    return math.floor(low[0] + (peak_limit_mb - low[1]) / slope_mb)


def knee_batch_size(throughput_curve: list[tuple[int, float]], fraction: float = KNEE_FRACTION) -> int | None:
    """Smallest sampled batch size reaching ``fraction`` of the best samples/s (None for an empty curve): larger
    batches buy little speed but cost memory and change optimisation."""
    if not throughput_curve:
        return None
    best_samples_per_s = max(samples_per_s for _, samples_per_s in throughput_curve)
    return min(size for size, samples_per_s in throughput_curve if samples_per_s >= fraction * best_samples_per_s)


def gradient_accumulation_steps(batch_size: int, target_effective: int) -> int:
    """Optimizer micro-steps per update so that ``batch_size`` × steps reaches ``target_effective`` (at least 1)."""
    return max(1, math.ceil(target_effective / batch_size))


def _min_size_failure(search: BatchSearch, usable_vram_mb: float | None, headroom: float) -> str:
    trial = next(t for t in search.trials if t.size == search.min_size)
    if trial.status == "oom":
        reason = f"out of memory ({trial.error})"
    else:
        reason = (
            f"peak reserved {trial.peak_reserved_mb:.0f} MB exceeds `batch.headroom` {headroom} × "
            f"{usable_vram_mb:.0f} MB usable = {search.peak_limit_mb:.0f} MB"
        )
    return f"`batch.min_size`={search.min_size} does not fit: {reason}. Lower `batch.min_size` or use a larger GPU."


def _largest_peak_mb(trials: list[BatchTrial], size: int) -> float | None:
    peaks = [t.peak_reserved_mb for t in trials if t.ok and t.size == size and t.peak_reserved_mb is not None]
    return max(peaks, default=None)


def _failure_phrase(trial: BatchTrial) -> str:
    if trial.status == "oom":
        return f"{trial.size} ran out of memory"
    return f"{trial.size} exceeded the headroom limit (peak reserved {trial.peak_reserved_mb:,.0f} MB)"


def policy_target(
    policy: str, search: BatchSearch, knee_size: int | None, configured_size: int | None
) -> tuple[int, str]:
    """The batch ``policy`` times and why: ``configured`` (capped by ``batch.max_size``, stepped down only when a
    trial at or below it failed), ``knee`` (else the largest fit) or ``max`` (the largest fit)."""
    best_size = search.best_size
    if best_size is None:
        raise ValueError("policy_target needs a search that found a fitting size")
    if policy == "max":
        return best_size, f"the largest batch found to fit ({best_size})"
    if policy == "knee":
        if knee_size is None:
            return best_size, f"the largest batch found to fit ({best_size}): no trial measured throughput for a knee"
        return knee_size, f"the throughput knee ({knee_size})"
    if policy != "configured":
        raise ValueError(f"unknown batch policy {policy!r}")
    if configured_size is None:
        raise ValueError("batch.policy=configured needs the configured batch size")
    size, reason = configured_size, f"the configured batch {configured_size}"
    if size > search.max_size:
        size, reason = search.max_size, f"{reason} capped by `batch.max_size` to {search.max_size}"
    failure = search.smallest_failure
    if size > best_size and failure is not None and failure.size <= size:
        reason = f"{reason} stepped down to {best_size}, the largest that fit: {_failure_phrase(failure)}"
        size = best_size
    return size, reason


def choose_batch_size(
    try_batch: TryBatch,
    batch_cfg: BatchConfig,
    usable_vram_mb: float | None,
    *,
    policy: str | None = None,
    configured_size: int | None = None,
    search_steps: int = SEARCH_STEPS,
    verify_repeats: int = 3,
    verify_steps: int = VERIFY_STEPS,
    agree: TrialAgreement = same_trial,
) -> BatchDecision:
    """Search the largest batch under ``batch_cfg.headroom × usable_vram_mb`` (MB; None: no limit), pick the
    ``policy``'s batch and re-verify it ``verify_repeats`` × ``verify_steps`` steps, stepping down through the
    smaller sizes that fit while one fails. Status ``oom`` when ``min_size`` does not fit or nothing verifies."""
    policy = batch_cfg.policy if policy is None else policy
    if verify_repeats < 0:
        raise ValueError(f"verify_repeats must be >= 0, got {verify_repeats}")
    if verify_steps < search_steps:
        raise ValueError(
            f"verify_steps ({verify_steps}) must be at least search_steps ({search_steps}): verification checks "
            "the winner over a longer run than the search"
        )
    peak_limit_mb = None if usable_vram_mb is None else batch_cfg.headroom * usable_vram_mb
    search = find_max_batch_size(
        try_batch,
        batch_cfg.min_size,
        batch_cfg.max_size,
        steps=search_steps,
        peak_limit_mb=peak_limit_mb,
        trial_max_seconds=batch_cfg.trial_max_seconds,
        agree=agree,
    )

    def decision(
        status: Literal["ok", "oom"],
        message: str,
        verification: list[BatchTrial],
        chosen: int | None = None,
        accumulation: int | None = None,
        knee: int | None = None,
        curve: list[tuple[int, float]] | None = None,
        peak_mb: float | None = None,
    ) -> BatchDecision:
        record = BatchSearchResult(
            status=status,
            batch_size=chosen,
            largest_fitting_size=search.best_size,
            gradient_accumulation_steps=accumulation,
            effective_batch_size=None if chosen is None or accumulation is None else accumulation * chosen,
            target_effective_batch_size=batch_cfg.target_effective,
            knee_size=knee,
            knee_fraction=KNEE_FRACTION,
            throughput_curve=[ThroughputPoint(size=size, samples_per_s=rate) for size, rate in curve or []],
            peak_reserved_mb=peak_mb,
            peak_limit_mb=peak_limit_mb,
            search_min_size=search.min_size,
            search_max_size=search.max_size,
            search_steps=search.steps,
            verify_repeats=verify_repeats,
            verify_steps=verify_steps,
            message=message,
            trials=[*search.trials, *verification],
            policy=policy,
            configured_size=configured_size,
            time_limited=search.time_limited,
            trial_max_seconds=search.trial_max_seconds,
        )
        return BatchDecision(record=record, search=search)

    if search.best_size is None:
        return decision("oom", _min_size_failure(search, usable_vram_mb, batch_cfg.headroom), [])

    curve = sorted((t.size, t.samples_per_s) for t in search.trials if t.ok and t.samples_per_s is not None)
    knee = knee_batch_size(curve)
    target, reason = policy_target(policy, search, knee, configured_size)

    verification: list[BatchTrial] = []
    chosen: int | None = None
    # min_size fits by monotonicity even when the search never ran it.
    fallbacks = {t.size for t in search.trials if t.ok and t.size < target}
    if batch_cfg.min_size < target:
        fallbacks.add(batch_cfg.min_size)
    searched_peak_mb = _largest_peak_mb(search.trials, target)
    unverified = (
        peak_limit_mb is not None
        and searched_peak_mb is not None
        and searched_peak_mb <= UNVERIFIED_PEAK_FRACTION * peak_limit_mb
    )
    for candidate in [target, *sorted(fallbacks, reverse=True)]:
        for _ in range(0 if unverified else verify_repeats):
            verification.append(_run_trial(try_batch, candidate, verify_steps, "verify", peak_limit_mb, agree))
            if not verification[-1].ok:
                break
        else:
            chosen = candidate
            break
    if chosen is None:
        return decision(
            "oom",
            f"no batch size passed {verify_repeats} re-runs of {verify_steps} steps: {target} ({reason}) and every "
            "smaller size that fit during the search failed on a re-run (memory use is not reproducible).",
            verification,
        )

    accumulation = 1 if policy == "configured" else gradient_accumulation_steps(chosen, batch_cfg.target_effective)
    message = f"batch size {chosen}: {reason} (batch.policy={policy})"
    if chosen != target:
        failed = next(t for t in verification if t.size == target and not t.ok)
        message += f", stepped down to {chosen}: on re-verification {_failure_phrase(failed)}"
    if unverified:
        message += (
            f"; not re-verified: its peak, {searched_peak_mb:,.0f} MB, is under {UNVERIFIED_PEAK_FRACTION:.0%} of "
            f"the {peak_limit_mb:,.0f} MB limit"
        )
    else:
        message += f"; verified {verify_repeats}x over {verify_steps} steps"
    if accumulation > 1:
        message += (
            f"; {accumulation} accumulation step(s) give an effective batch of {accumulation * chosen} "
            f"(target {batch_cfg.target_effective})"
        )
    message += f"; the search: {search.fitting_phrase()}"
    if search.time_limited:
        message += (
            f" (the search stopped: a trial of {search.steps} steps took longer than `batch.trial_max_seconds` "
            f"= {batch_cfg.trial_max_seconds:g} s)"
        )
    if knee is not None:
        message += f"; throughput knee at {knee}"
    peak_mb = _largest_peak_mb([*search.trials, *verification], chosen)
    return decision("ok", message, verification, chosen, accumulation, knee, curve, peak_mb)


@dataclass(frozen=True)
class TimedBatch:
    """The timed batch (samples), its accumulation steps and how it was chosen (None: the plain configured batch)."""

    batch_size: int
    gradient_accumulation_steps: int
    policy: str | None


def effective_policy(policy: str, *, is_hyperparameter: bool) -> str:
    """``configured`` where the batch is part of the algorithm (RL), else ``policy``."""
    return "configured" if is_hyperparameter else policy


def timed_batch(configured: int, decision: BatchDecision | None, max_size: int, policy: str) -> TimedBatch:
    """The decision's batch, or without a search the ``configured`` batch capped by ``max_size``."""
    if decision is not None:
        record = decision.record
        assert record.batch_size is not None
        return TimedBatch(record.batch_size, record.gradient_accumulation_steps or 1, f"timed at {record.message}")
    size, notes = min(configured, max_size), []
    if configured > max_size:
        notes.append(f"timed at the configured batch {configured} capped by `batch.max_size` to {size}")
    if policy != "configured":
        notes.append(f"batch.policy={policy} needs the batch search (a GPU): the configured batch is timed")
    return TimedBatch(size, 1, "; ".join(notes) or None)


@dataclass(frozen=True)
class HeadroomCheck:
    """The measured run's peak reserved memory against the headroom limit (MB): fragmentation can outgrow a trial."""

    peak_reserved_mb: float
    peak_limit_mb: float
    headroom: float
    usable_vram_mb: float

    @property
    def exceeded(self) -> bool:
        return self.peak_reserved_mb > self.peak_limit_mb

    @property
    def warning(self) -> str | None:
        if not self.exceeded:
            return None
        return (
            f"peak reserved memory during the measured epochs was {self.peak_reserved_mb:,.0f} MB, above the headroom "
            f"limit {self.peak_limit_mb:,.0f} MB (`batch.headroom` {self.headroom} × {self.usable_vram_mb:,.0f} MB "
            "usable): at this batch size the model may run out of memory on the target card"
        )


def step_down_size(current: int, peak_reserved_mb: float, peak_limit_mb: float, min_size: int) -> int | None:
    """The batch to measure again at after ``current`` broke the headroom: proportionally smaller, at least by one,
    not below ``min_size``; None within the limit or at ``min_size``."""
    if peak_reserved_mb <= peak_limit_mb or current <= min_size:
        return None
    proportional = math.floor(current * peak_limit_mb / peak_reserved_mb)
    return max(min_size, min(current - 1, proportional))


def check_headroom(
    peak_reserved_mb: float | None, usable_vram_mb: float | None, headroom: float
) -> HeadroomCheck | None:
    """A measured peak reserved memory (MB) against ``headroom`` × ``usable_vram_mb``; None when either is unknown."""
    if peak_reserved_mb is None or usable_vram_mb is None:
        return None
    return HeadroomCheck(peak_reserved_mb, headroom * usable_vram_mb, headroom, usable_vram_mb)
