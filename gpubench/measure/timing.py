"""Timing of step blocks with device synchronisation at the block edges only, and sizing of benchmark epochs.

The host clock is read after synchronising the device, before and after a block of training steps, so the block
time covers every kernel the steps launched and none launched before. Nothing inside the block synchronises: CUDA
kernels queue asynchronously, as in a real training loop. The clock and the synchronisation are injected, so the
logic has exact known-answer tests on the CPU with a fake clock.

Epochs hold whole iterations. A workload whose cost repeats over ``steps_per_iteration`` steps (PPO: the first
minibatch update of an iteration also collects the rollout) declares it
(:attr:`gpubench.workload.Workload.steps_per_iteration`). The sizing keeps this invariant: after the first step
(timed alone) and one block that finishes that step's iteration, every block the benchmark times — each
calibration probe, each warmup and measured epoch — starts at an iteration boundary and is a whole number of
iterations, so every epoch holds the same number of rollouts and its time does not swing with where they fall.
With ``steps_per_iteration`` 1 (every other workload) there is no finishing block and no rounding.
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
    """Times a block of work between two device synchronisations.

    Args:
        synchronize: waits until the device has finished all queued work (``torch.cuda.synchronize`` on a GPU,
            a no-op on the CPU).
        clock: monotonic clock in seconds (``time.perf_counter`` by default; a fake in tests).
    """

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
    """How many steps make one benchmark epoch, and the probes that decided it.

    Attributes:
        steps_per_epoch: steps in every warmup and measured epoch of this model.
        first_step_s: wall seconds of the very first step (compilation, autotuning, allocation: one-off costs).
        probe_steps / probe_seconds: the calibration blocks after the first step, in order. When the first step
            leaves its iteration unfinished, the first block finishes it (it has no rollout, so the epoch is never
            sized from it); every later block is whole iterations.
        automatic: True when sized to ``min_seconds``, False when fixed by ``epoch.steps``.
    """

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
    """Decide the steps per benchmark epoch, a whole number of the workload's iterations.

    ``time_steps(n)`` runs ``n`` training steps as one synchronised block and returns its wall seconds. The first
    step is timed alone (its one-off costs are reported, not folded into the epoch). The workload is
    ``steps_into_iteration`` steps into an iteration of ``steps_per_iteration`` steps when this is called (not 0
    when something ran a step before, as the FLOP count does in eager mode); when the first step leaves that
    iteration unfinished, one block of the steps it lacks follows, so every later block starts at an iteration
    boundary. With ``fixed_steps`` that count is used, rounded up to whole iterations (``epoch.steps=100`` for a
    PPO of 16-step iterations: epochs of 112 steps; the report's ``steps_per_epoch`` says so). Otherwise blocks of
    whole iterations grow geometrically until one lasts at least a quarter of ``min_seconds``; its per-step time
    gives the smallest whole number of iterations whose block should last ``min_seconds``, capped at ``max_steps``
    rounded down to whole iterations (one iteration at the least).
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
    """Grow the epoch when the last warmup epoch came out shorter than ``min_seconds`` (the model sped up).

    Returns the step count unchanged when the warmup epoch already lasted ``min_seconds``; the epoch is never
    shrunk, so a cold calibration can only make measured epochs longer than needed, not too short. A grown epoch
    is whole iterations of ``steps_per_iteration`` steps, capped as :func:`size_epoch` caps it, so the measured
    epochs still start at iteration boundaries.
    """
    if last_warmup_s >= min_seconds or last_warmup_s <= 0:
        return steps_per_epoch
    wanted_steps = math.ceil(steps_per_epoch * min_seconds / last_warmup_s)
    return min(_step_cap(max_steps, steps_per_iteration), round_up_to_iterations(wanted_steps, steps_per_iteration))
