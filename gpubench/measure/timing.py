"""Timing of step blocks with device synchronisation at the block edges only, and sizing of benchmark epochs.

Nothing inside a block synchronises, so kernels queue as in a real training loop. Epochs hold whole iterations of
``steps_per_iteration`` steps (PPO collects its rollout in one step of each), so every epoch holds the same number of
rollouts."""

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

Clock = Callable[[], float]

#: A probe sizes the epoch once it lasts this fraction of ``min_seconds``: shorter ones are clock resolution and jitter.
_PROBE_FRACTION_OF_TARGET = 0.25
_MAX_PROBE_GROWTH = 8


class BlockTimer:
    """Times a block of work between two device synchronisations; ``clock`` (s) is a fake in tests."""

    def __init__(self, synchronize: Callable[[], None], clock: Clock = time.perf_counter) -> None:
        self._synchronize = synchronize
        self._clock = clock

    def time_block(self, work: Callable[[], None]) -> float:
        """Wall seconds from a synchronised start to a synchronised end of ``work``."""
        self._synchronize()
        start_s = self._clock()
        work()
        # The block's only sync point: it waits for every kernel the block queued.
        self._synchronize()
        return self._clock() - start_s


@dataclass(frozen=True)
class EpochSizing:
    """Steps per benchmark epoch, the first step's seconds (one-off costs), the calibration blocks after it and
    whether it was sized to ``min_seconds`` (``automatic``)."""

    steps_per_epoch: int
    first_step_s: float
    probe_steps: tuple[int, ...] = field(default_factory=tuple)
    probe_seconds: tuple[float, ...] = field(default_factory=tuple)
    automatic: bool = True

    @property
    def calibration_seconds(self) -> float:
        return self.first_step_s + sum(self.probe_seconds)

    @property
    def calibration_steps(self) -> int:
        return 1 + sum(self.probe_steps)


def round_up_to_iterations(steps: int, steps_per_iteration: int) -> int:
    """``steps`` rounded up to whole iterations, at least one."""
    return max(1, math.ceil(steps / steps_per_iteration)) * steps_per_iteration


def _step_cap(max_steps: int, steps_per_iteration: int) -> int:
    """``max_steps`` rounded down to whole iterations, at least one."""
    return max(1, max_steps // steps_per_iteration) * steps_per_iteration


def size_epoch(
    time_steps: Callable[[int], float],
    *,
    min_seconds: float,
    max_steps: int,
    fixed_steps: int | None = None,
    steps_per_iteration: int = 1,
    steps_into_iteration: int = 0,
) -> EpochSizing:
    """The steps per benchmark epoch, whole iterations; ``time_steps(n)`` times ``n`` steps (s).

    The first step is timed alone, then one block finishes its iteration. ``fixed_steps`` is rounded up; otherwise
    blocks grow until one lasts a quarter of ``min_seconds``, whose per-step time sizes the epoch (at most
    ``max_steps``)."""
    first_step_s = time_steps(1)
    probe_steps: list[int] = []
    probe_seconds: list[float] = []
    steps_to_boundary = -(steps_into_iteration + 1) % steps_per_iteration
    if steps_to_boundary:
        probe_steps.append(steps_to_boundary)
        probe_seconds.append(time_steps(steps_to_boundary))
    if fixed_steps is not None:
        return EpochSizing(
            steps_per_epoch=round_up_to_iterations(fixed_steps, steps_per_iteration),
            first_step_s=first_step_s,
            probe_steps=tuple(probe_steps),
            probe_seconds=tuple(probe_seconds),
            automatic=False,
        )

    cap_steps = _step_cap(max_steps, steps_per_iteration)
    steps = steps_per_iteration
    while True:
        seconds = time_steps(steps)
        probe_steps.append(steps)
        probe_seconds.append(seconds)
        enough = seconds >= _PROBE_FRACTION_OF_TARGET * min_seconds
        if enough or steps >= cap_steps:
            break
        # An integer factor keeps the block whole iterations.
        wanted = _PROBE_FRACTION_OF_TARGET * min_seconds / max(seconds, 1e-9)
        steps = min(cap_steps, steps * max(2, min(_MAX_PROBE_GROWTH, math.ceil(wanted))))
    per_step_s = probe_seconds[-1] / probe_steps[-1]
    wanted_steps = math.ceil(min_seconds / max(per_step_s, 1e-12))
    return EpochSizing(
        steps_per_epoch=min(cap_steps, round_up_to_iterations(wanted_steps, steps_per_iteration)),
        first_step_s=first_step_s,
        probe_steps=tuple(probe_steps),
        probe_seconds=tuple(probe_seconds),
    )


def resize_after_warmup(
    steps_per_epoch: int, last_warmup_s: float, min_seconds: float, max_steps: int, steps_per_iteration: int = 1
) -> int:
    """The epoch grown (never shrunk) when the last warmup epoch was shorter than ``min_seconds``."""
    if last_warmup_s >= min_seconds or last_warmup_s <= 0:
        return steps_per_epoch
    wanted_steps = math.ceil(steps_per_epoch * min_seconds / last_warmup_s)
    return min(_step_cap(max_steps, steps_per_iteration), round_up_to_iterations(wanted_steps, steps_per_iteration))
