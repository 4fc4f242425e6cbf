"""Floating-point operations, kernel launches and bytes moved of one training step, counted by torch's flop
counter and :class:`gpubench.workload.OpCounter` on real steps (an iteration's average).

The counts let the decision split a measured step into compute (FLOPs at the card's attainable rate), kernel
launches (a per-launch host cost), memory traffic (bytes at the card's memory bandwidth) and the host work that
remains, and project it onto other cards, also from a CPU measurement, whose time says nothing of a GPU's but whose
FLOPs, launches and bytes are the same: every workload's optimizer runs its fused implementation on every device,
so the CPU dispatches the operations a GPU would launch (PyTorch's default on the CPU is a loop over the parameters,
which counted 1,512 operations for a TFT step that launches 470).

The FLOPs are also counted by the precision they run in (the dtype of each counted operation's operands, as the
dispatcher sees them: after autocast has cast them), because a card's peak depends on it by an order of
magnitude (an H200: 67 fp32 TFLOP/s, 989 bf16): a user's model that autocasts to bf16 itself, or keeps bf16
weights, computes in bf16 whatever ``execution.precision`` says, and the projection must use that peak.
"""

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils.flop_counter import FlopCounterMode, flop_registry

from gpubench.workload import OpCounter, Workload

#: The report's names of the dtypes a step's FLOPs run in (``execution.precision``'s); any other keeps torch's name
#: (``float64``, ``float8_e4m3fn``), for which the catalog has no peak.
_PRECISION_NAMES = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}


@dataclass(frozen=True)
class StepCounts:
    """One step's floating-point operations, its kernel-launching tensor operations and the bytes of those
    operations' tensor inputs and outputs (an upper bound on its DRAM traffic; None: not counted), and the FLOPs
    by the precision they ran in (``{"bf16": ..., "fp32": ...}``, summing to ``flops``; None: not counted)."""

    flops: float | None
    launches: int | None
    bytes: int | None = None
    flops_by_precision: dict[str, float] | None = None


def precision_name(dtype: torch.dtype) -> str:
    """``fp32``, ``bf16`` or ``fp16`` for those dtypes (the names ``execution.precision`` uses), else torch's name
    without its ``torch.`` prefix."""
    return _PRECISION_NAMES.get(dtype, str(dtype).removeprefix("torch."))


def _counted_by_precision(formula: Callable[..., int], counts: dict[str, int]) -> Callable[..., int]:
    """``formula`` (a flop counter's formula, called with the operation's real arguments) that also adds its FLOPs
    to ``counts`` under the precision of the operation's first floating-point tensor operand (a matmul's,
    convolution's or attention's operands share one dtype)."""

    def counted(*args: Any, out_val: Any = None, **kwargs: Any) -> int:
        flops = formula(*args, out_val=out_val, **kwargs)
        values = (*args, *kwargs.values())
        operand = next((x for x in values if isinstance(x, torch.Tensor) and x.is_floating_point()), None)
        counts[precision_name(operand.dtype) if operand is not None else "unknown"] += flops
        return flops

    # The counter passes the real tensors (not their shapes) to a formula marked raw; the registry's formulas take
    # the tensors themselves and read their shapes.
    counted._get_raw = True  # type: ignore[attr-defined]
    return counted


def precision_counting_flop_counter() -> tuple[FlopCounterMode, dict[str, int]]:
    """A :class:`FlopCounterMode` whose every formula also adds its FLOPs to the returned dict, by precision."""
    counts: dict[str, int] = defaultdict(int)
    mapping = {op: _counted_by_precision(formula, counts) for op, formula in flop_registry.items()}
    return FlopCounterMode(display=False, custom_mapping=mapping), counts


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
    counters cannot see into). ``flops_by_precision`` splits the FLOPs by the dtype they ran in
    (:func:`precision_counting_flop_counter`).
    """
    steps = workload.steps_per_iteration
    flop_counter, by_precision = precision_counting_flop_counter()
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
        flops_by_precision={name: flops / steps for name, flops in sorted(by_precision.items()) if flops > 0}
        if total > 0
        else None,
    )
