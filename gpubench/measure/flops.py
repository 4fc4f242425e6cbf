"""Floating-point operations, kernel launches and bytes moved of one training step, counted by torch's flop
counter and :class:`gpubench.workload.OpCounter` on a real step.

The counts let the decision split a measured step into compute (FLOPs at the card's attainable rate), kernel
launches (a per-launch host cost), memory traffic (bytes at the card's memory bandwidth) and the host work that
remains, and project it onto other cards, also from a CPU measurement, whose time says nothing of a GPU's but whose
FLOPs, launches and bytes are the same.
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
    training step.

    Runs one real step under ``FlopCounterMode`` (it counts matmuls, convolutions and attention; elementwise work
    and the optimizer are not counted) with an :class:`OpCounter` inside it (every dispatched operation that
    launches a kernel in eager mode, optimizer and elementwise ones included, and the bytes of their tensor inputs
    and outputs). All are None when the step cannot be counted (e.g. a compiled graph the counters cannot see
    into).
    """
    flop_counter = FlopCounterMode(display=False)
    try:
        with flop_counter, OpCounter() as ops:
            workload.train_step()
    except Exception:  # the counters are a diagnostic; the measurement must not depend on them
        return StepCounts(flops=None, launches=None, bytes=None)
    total = flop_counter.get_total_flops()
    return StepCounts(flops=float(total) if total > 0 else None, launches=ops.count or None, bytes=ops.bytes or None)


def count_step_flops(workload: Workload) -> float | None:
    """Floating-point operations of one training step (:func:`count_step`'s ``flops``)."""
    return count_step(workload).flops
