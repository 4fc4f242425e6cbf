"""Timing helpers shared by the benchmark scripts: warm up, synchronise at the edges, repeat, take the median."""

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class StepTiming:
    """Per-step wall time of a callable, over several timed blocks."""

    median_ms: float
    min_ms: float
    max_ms: float
    blocks: int
    steps_per_block: int


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_per_step(
    step: Callable[[], object],
    device: torch.device,
    *,
    warmup_steps: int = 10,
    steps_per_block: int = 20,
    blocks: int = 5,
) -> StepTiming:
    """Median milliseconds per call of ``step``: warm up, then time ``blocks`` blocks of ``steps_per_block`` calls.

    The device is synchronised before and after each block only, so asynchronous kernel launches overlap the way
    they do in training.
    """
    for _ in range(warmup_steps):
        step()
    _synchronize(device)
    per_step_ms: list[float] = []
    for _ in range(blocks):
        _synchronize(device)
        start = time.perf_counter()
        for _ in range(steps_per_block):
            step()
        _synchronize(device)
        per_step_ms.append((time.perf_counter() - start) * 1e3 / steps_per_block)
    return StepTiming(
        median_ms=statistics.median(per_step_ms),
        min_ms=min(per_step_ms),
        max_ms=max(per_step_ms),
        blocks=blocks,
        steps_per_block=steps_per_block,
    )
