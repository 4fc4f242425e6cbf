"""Timing of step blocks with device synchronisation at the block edges only, and sizing of benchmark epochs.

The host clock is read after synchronising the device before and after a block of steps, and nothing inside the
block synchronises (kernels queue as in a real training loop). Clock and synchronisation are injected, so the logic
has known-answer tests with a fake clock. Epochs hold whole iterations of
:attr:`gpubench.workload.Workload.steps_per_iteration` steps (PPO: one step of each iteration also collects the
rollout): after the first step and one block finishing its iteration, every timed block starts at an iteration
boundary, so every epoch holds the same number of rollouts.
"""

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

#: A monotonic clock in seconds.
Clock = Callable[[], float]

#: A calibration probe must last at least this fraction of ``min_seconds`` before its per-step time is trusted
#: to size the epoch: shorter blocks are dominated by clock resolution and launch jitter.
_PROBE_FRACTION_OF_TARGET = 0.25
#: Largest growth factor between consecutive calibration probes (bounds the overshoot of one probe).
_MAX_PROBE_GROWTH = 8


class BlockTimer:
    """Times a block of work between two device synchronisations: ``synchronize`` waits for queued work (a no-op on
    the CPU), ``clock`` is monotonic seconds (a fake in tests)."""

    def __init__(self, synchronize: Callable[[], None], clock: Clock = time.perf_counter) -> None:
        self._synchronize = synchronize
        self._clock = clock

    def time_block(self, work: Callable[[], None]) -> float:
        """Wall seconds from a synchronised start to a synchronised end of ``work``."""
        self._synchronize()
        start_s = self._clock()
        work()
        # This is the block's only sync point: it waits for every kernel the block queued.
        self._synchronize()
        return self._clock() - start_s


@dataclass(frozen=True)
class EpochSizing:
    """How many steps make one benchmark epoch (``steps_per_epoch``), the first step's wall seconds
    (``first_step_s``: one-off costs), the calibration blocks after it (``probe_steps`` / ``probe_seconds``; a first
    block may only finish the first step's iteration) and whether it was sized to ``min_seconds`` (``automatic``)."""

    steps_per_epoch: int
    first_step_s: float
    probe_steps: tuple[int, ...] = field(default_factory=tuple)
    probe_seconds: tuple[float, ...] = field(default_factory=tuple)
    automatic: bool = True

    @property
    def calibration_seconds(self) -> float:
        """Total time spent calibrating, first step included."""
        return self.first_step_s + sum(self.probe_seconds)

    @property
    def calibration_steps(self) -> int:
        """Steps run while calibrating, first step included."""
        return 1 + sum(self.probe_steps)


def round_up_to_iterations(steps: int, steps_per_iteration: int) -> int:
    """The smallest multiple of ``steps_per_iteration`` that is at least ``steps`` (and at least one iteration)."""
    return max(1, math.ceil(steps / steps_per_iteration)) * steps_per_iteration


def _step_cap(max_steps: int, steps_per_iteration: int) -> int:
    """``max_steps`` rounded down to whole iterations, but never below one iteration: an epoch of part of an
    iteration would time a rollout in some epochs and not in others."""
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
    """The steps per benchmark epoch, a whole number of the workload's iterations.

    ``time_steps(n)`` runs ``n`` steps as one synchronised block and returns its wall seconds. The first step is
    timed alone; if it leaves its iteration (``steps_into_iteration`` of ``steps_per_iteration``) unfinished, one
    block finishes it. ``fixed_steps`` is rounded up to whole iterations; otherwise blocks grow geometrically until
    one lasts a quarter of ``min_seconds``, and its per-step time sizes the epoch to ``min_seconds``, capped at
    ``max_steps`` (at least one iteration).
    """
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
        # Grow towards the probe target in one jump when the time is known, by at most _MAX_PROBE_GROWTH; an
        # integer factor keeps the block whole iterations.
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
    """Grow the epoch (never shrink it) when the last warmup epoch came out shorter than ``min_seconds``: whole
    iterations, capped as :func:`size_epoch` caps it."""
    if last_warmup_s >= min_seconds or last_warmup_s <= 0:
        return steps_per_epoch
    wanted_steps = math.ceil(steps_per_epoch * min_seconds / last_warmup_s)
    return min(_step_cap(max_steps, steps_per_iteration), round_up_to_iterations(wanted_steps, steps_per_iteration))
