"""The recurring costs of a real training beside its steps: one evaluation call and one checkpoint save."""

import tempfile
from pathlib import Path

import torch

from gpubench.measure.timing import BlockTimer
from gpubench.results import CheckpointCost, EvaluationCost
from gpubench.results.units import BYTES_PER_MB, MS_PER_S
from gpubench.workload import Workload

#: Seconds an evaluation block lasts at least, so clock resolution and jitter do not dominate it.
EVAL_MIN_SECONDS = 0.05
EVAL_MAX_CALLS = 256
#: Timed saves after a warmup save, which pays the pages' first-touch costs.
CHECKPOINT_REPEATS = 2


def measure_evaluation(
    workload: Workload, timer: BlockTimer, *, min_seconds: float = EVAL_MIN_SECONDS, max_calls: int = EVAL_MAX_CALLS
) -> EvaluationCost | None:
    """Milliseconds per ``evaluate`` call (None without one), timed in blocks of 1, 2, 4, ... calls after a warmup."""
    if workload.evaluate() is None:
        return None
    calls = 1
    while True:
        seconds = timer.time_block(lambda n=calls: [workload.evaluate() for _ in range(n)])
        if seconds >= min_seconds or calls >= max_calls:
            break
        calls = min(2 * calls, max_calls)
    return EvaluationCost(seconds * MS_PER_S / calls, workload.eval_samples_per_call, calls)


def measure_checkpoint(workload: Workload, timer: BlockTimer, *, repeats: int = CHECKPOINT_REPEATS) -> CheckpointCost:
    """Milliseconds per ``torch.save`` of the checkpoint state (no fsync; mean of ``repeats``) and its size in MB."""
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    with tempfile.TemporaryDirectory(prefix="gpubench-checkpoint-") as folder:
        path = Path(folder) / "checkpoint.pt"
        torch.save(workload.checkpoint_state(), path)
        seconds = timer.time_block(lambda: [torch.save(workload.checkpoint_state(), path) for _ in range(repeats)])
        size_mb = path.stat().st_size / BYTES_PER_MB
    return CheckpointCost(ms_per_save=seconds * MS_PER_S / repeats, size_mb=size_mb, saves_timed=repeats)
