"""The recurring costs of a real training beside its steps, measured on the timed workload: one evaluation call
(:func:`measure_evaluation`) and one checkpoint save (:func:`measure_checkpoint`), which the plan adds at
``decision.plan.eval_every_steps`` and ``checkpoint_every_steps``."""

import tempfile
from pathlib import Path

import torch

from gpubench.measure.timing import BlockTimer
from gpubench.results import CheckpointCost, EvaluationCost
from gpubench.units import BYTES_PER_MB, MS_PER_S
from gpubench.workload import Workload

#: An evaluation block lasts at least this long (s), so clock resolution and launch jitter do not dominate it.
EVAL_MIN_SECONDS = 0.05
#: At most this many evaluation calls in the block (a fast call on a GPU reaches the time in fewer).
EVAL_MAX_CALLS = 256
#: Timed checkpoint saves after the warmup save (the warmup one pays first-touch costs of the files' pages).
CHECKPOINT_REPEATS = 2


def measure_evaluation(
    workload: Workload,
    timer: BlockTimer,
    *,
    min_seconds: float = EVAL_MIN_SECONDS,
    max_calls: int = EVAL_MAX_CALLS,
) -> EvaluationCost | None:
    """Milliseconds per :meth:`~gpubench.workload.Workload.evaluate` call (None without one): after a warmup call,
    blocks of 1, 2, 4, ... calls until one lasts ``min_seconds`` or reaches ``max_calls``."""
    if workload.evaluate() is None:
        return None
    calls = 1
    while True:
        seconds = timer.time_block(lambda n=calls: [workload.evaluate() for _ in range(n)])
        if seconds >= min_seconds or calls >= max_calls:
            break
        calls = min(2 * calls, max_calls)
    return EvaluationCost(
        ms_per_call=seconds * MS_PER_S / calls,
        samples_per_call=workload.eval_samples_per_call,
        calls_timed=calls,
    )


def measure_checkpoint(workload: Workload, timer: BlockTimer, *, repeats: int = CHECKPOINT_REPEATS) -> CheckpointCost:
    """Milliseconds per checkpoint (``torch.save`` of modules and optimizers into a temporary folder, device-to-host
    copy included, no fsync; the mean of ``repeats`` after a warmup save) and the file's size in MB."""
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    with tempfile.TemporaryDirectory(prefix="gpubench-checkpoint-") as folder:
        path = Path(folder) / "checkpoint.pt"
        torch.save(workload.checkpoint_state(), path)
        seconds = timer.time_block(lambda: [torch.save(workload.checkpoint_state(), path) for _ in range(repeats)])
        size_mb = path.stat().st_size / BYTES_PER_MB
    return CheckpointCost(ms_per_save=seconds * MS_PER_S / repeats, size_mb=size_mb, saves_timed=repeats)
