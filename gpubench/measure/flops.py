"""Floating-point operations, kernel launches and bytes moved of one training step, counted by torch's flop
counter and :class:`gpubench.workload.OpCounter` on real steps (an iteration's average).

The counts split a measured step into compute, launches, memory traffic and host work, and project it onto other
cards, also from a CPU measurement: every workload's optimizer runs fused on every device, so the CPU dispatches the
operations a GPU would launch. FLOPs are also counted by the precision they run in (after autocast), because a
card's peak depends on it by an order of magnitude.
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


def _counted_by_precision(
    formula: Callable[..., int], counts: dict[str, int], *, convolution: bool = False
) -> Callable[..., int]:
    """``formula`` (a flop counter's formula, called with the operation's real arguments) that also adds its FLOPs
    to ``counts`` under the precision of the operation's first floating-point tensor operand (a matmul's,
    convolution's or attention's operands share one dtype). An fp32 ``convolution`` counts as ``tf32`` while
    ``torch.backends.cudnn.allow_tf32`` is set (torch's default): cuDNN then runs it on the tensor cores, whatever
    the matmul precision, so its peak is the card's tf32 figure."""

    def counted(*args: Any, out_val: Any = None, **kwargs: Any) -> int:
        flops = formula(*args, out_val=out_val, **kwargs)
        values = (*args, *kwargs.values())
        operand = next((x for x in values if isinstance(x, torch.Tensor) and x.is_floating_point()), None)
        name = precision_name(operand.dtype) if operand is not None else "unknown"
        if convolution and name == "fp32" and torch.backends.cudnn.allow_tf32:
            name = "tf32"
        counts[name] += flops
        return flops

    # The counter passes the real tensors (not their shapes) to a formula marked raw; the registry's formulas take
    # the tensors themselves and read their shapes.
    counted._get_raw = True  # type: ignore[attr-defined]
    return counted


def precision_counting_flop_counter() -> tuple[FlopCounterMode, dict[str, int]]:
    """A :class:`FlopCounterMode` whose every formula also adds its FLOPs to the returned dict, by precision."""
    counts: dict[str, int] = defaultdict(int)
    mapping = {
        op: _counted_by_precision(formula, counts, convolution="convolution" in str(op))
        for op, formula in flop_registry.items()
    }
    return FlopCounterMode(display=False, custom_mapping=mapping), counts


def count_step(workload: Workload) -> StepCounts:
    """FLOPs (forward + backward, as torch's flop counter sees them), kernel launches and bytes moved of one
    training step, averaged over one iteration of the workload's steps.

    One uncounted step first (one-off work such as creating optimizer state), then
    :attr:`~gpubench.workload.Workload.steps_per_iteration` steps under ``FlopCounterMode`` (matmuls, convolutions,
    attention) with an :class:`OpCounter` inside (every kernel-launching operation and its bytes): a whole
    iteration, because steps differ by their place in it (a PPO step that collects the rollout). All None when the
    step cannot be counted (a compiled graph the counters cannot see into).
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
