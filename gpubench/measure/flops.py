"""Floating-point operations, kernel launches and bytes moved of one training step, counted on real steps.

The counts split a step into compute, launches and memory traffic to project it onto other cards, also from the CPU
(optimizers run fused everywhere, so the CPU dispatches what a GPU launches). FLOPs are counted by precision, on
which a card's peak depends by an order of magnitude."""

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils.flop_counter import FlopCounterMode, flop_registry

from gpubench.workload import OpCounter, Workload

_PRECISION_NAMES = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}


@dataclass(frozen=True)
class StepCounts:
    """One step's FLOPs, kernel launches, bytes of their tensors (an upper bound on DRAM traffic) and FLOPs by
    precision (``{"bf16": ..., "fp32": ...}``); None where not counted."""

    flops: float | None
    launches: int | None
    bytes: int | None = None
    flops_by_precision: dict[str, float] | None = None


def precision_name(dtype: torch.dtype) -> str:
    """``fp32``, ``bf16`` or ``fp16`` (``execution.precision``'s names), else torch's name (``float64``)."""
    return _PRECISION_NAMES.get(dtype, str(dtype).removeprefix("torch."))


def _counted_by_precision(
    formula: Callable[..., int], counts: dict[str, int], *, convolution: bool = False
) -> Callable[..., int]:
    """``formula`` that also adds its FLOPs to ``counts`` under its first floating-point operand's precision; an
    fp32 ``convolution`` counts as ``tf32`` under cuDNN's tf32 (torch's default), which uses the tensor cores."""

    def counted(*args: Any, out_val: Any = None, **kwargs: Any) -> int:
        flops = formula(*args, out_val=out_val, **kwargs)
        values = (*args, *kwargs.values())
        operand = next((x for x in values if isinstance(x, torch.Tensor) and x.is_floating_point()), None)
        name = precision_name(operand.dtype) if operand is not None else "unknown"
        if convolution and name == "fp32" and torch.backends.cudnn.allow_tf32:
            name = "tf32"
        counts[name] += flops
        return flops

    # A formula marked raw gets the tensors themselves, whose dtype it needs.
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
    """One training step's counts, averaged over a whole iteration (steps differ by their place in it) after an
    uncounted step (one-off work); all None where the counters cannot see in (a compiled graph)."""
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
    per_step_by_precision = {name: flops / steps for name, flops in sorted(by_precision.items()) if flops > 0}
    return StepCounts(
        flops=total / steps if total > 0 else None,
        launches=round(ops.count / steps) or None,
        bytes=round(ops.bytes / steps) or None,
        flops_by_precision=per_step_by_precision if total > 0 else None,
    )
