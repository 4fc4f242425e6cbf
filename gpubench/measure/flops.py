"""Floating-point operations, kernel launches and bytes moved of one training step, counted by torch's flop
counter and :class:`gpubench.workload.OpCounter` on real steps (an iteration's average).

The counts let the decision split a measured step into compute (FLOPs at the card's attainable rate), kernel
launches (a per-launch host cost), memory traffic (bytes at the card's memory bandwidth) and the host work that
remains, and project it onto other cards, also from a CPU measurement, whose time says nothing of a GPU's but whose
FLOPs, launches and bytes are the same: every workload's optimizer runs its fused implementation on every device,
so the CPU dispatches the operations a GPU would launch (PyTorch's default on the CPU is a loop over the parameters,
which counted 1,512 operations for a TFT step that launches 470).
"""

from dataclasses import dataclass

from torch.utils.flop_counter import FlopCounterMode

from gpubench.workload import OpCounter, Workload


@dataclass(frozen=True)
class StepCounts:
    """One step's floating-point operations, its kernel-launching tensor operations and the bytes of those
    operations' tensor inputs and outputs (an upper bound on its DRAM traffic; None: not counted)."""

    flops: float | None
    launches: int | None
    bytes: int | None = None


def count_step(workload: Workload) -> StepCounts:
    """FLOPs (forward + backward, as torch's flop counter sees them), kernel launches and bytes moved of one
    training step, averaged over one iteration of the workload's steps.

    Runs one uncounted step, then :attr:`~gpubench.workload.Workload.steps_per_iteration` real steps under
    ``FlopCounterMode`` (it counts matmuls, convolutions and attention; elementwise work and the optimizer are not
    counted) with an :class:`OpCounter` inside it (every dispatched operation that launches a kernel in eager mode,
    optimizer and elementwise ones included, and the bytes of their tensor inputs and outputs), and divides by the
    steps counted. The uncounted step takes the one-off work out of the count (an optimizer creating its state on
    its first update: 118 operations for Mamba-2's 59 parameters). The whole iteration goes in because steps can
    differ by their place in it: a PPO step that also collects the rollout launched 1,116 kernels and did 2.8
    GFLOP in the default config, each of the other 319 minibatch updates 131 and 0.13 GFLOP; counting that one
    step alone overstated the average step's launches 8-fold and its FLOPs 20-fold. Any run of
    ``steps_per_iteration`` consecutive steps holds the iteration's work once, wherever it starts. Launches and
    bytes are rounded to whole numbers. All are None when the step cannot be counted (e.g. a compiled graph the
    counters cannot see into).
    """
    steps = workload.steps_per_iteration
    flop_counter = FlopCounterMode(display=False)
    try:
        workload.train_step()
        with flop_counter, OpCounter() as ops:
            for _ in range(steps):
                workload.train_step()
    except Exception:  # the counters are a diagnostic; the measurement must not depend on them
        return StepCounts(flops=None, launches=None, bytes=None)
    total = flop_counter.get_total_flops()
    return StepCounts(
        flops=total / steps if total > 0 else None,
        launches=round(ops.count / steps) or None,
        bytes=round(ops.bytes / steps) or None,
    )


def count_step_flops(workload: Workload) -> float | None:
    """Floating-point operations of one training step (:func:`count_step`'s ``flops``)."""
    return count_step(workload).flops
