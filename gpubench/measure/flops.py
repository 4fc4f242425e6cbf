"""Floating-point operations of one training step, counted by torch's flop counter on a real step.

The count lets the decision split a measured step into compute (FLOPs at the card's attainable rate) and the rest
(launches, memory traffic), and project it onto other cards.
"""

from torch.utils.flop_counter import FlopCounterMode

from gpubench.workload import Workload


def count_step_flops(workload: Workload) -> float | None:
    """Floating-point operations of one training step (forward + backward, as torch's flop counter sees them).

    Runs one real step under ``FlopCounterMode`` (it counts matmuls, convolutions and attention; elementwise work
    and the optimizer are not counted). Returns None when the step cannot be counted (e.g. a compiled graph the
    counter cannot see into).
    """
    counter = FlopCounterMode(display=False)
    try:
        with counter:
            workload.train_step()
    except Exception:  # the counter is a diagnostic; the measurement must not depend on it
        return None
    total = counter.get_total_flops()
    return float(total) if total > 0 else None
