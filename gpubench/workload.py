"""The workload contract: what the runner times, whichever model it is.

A workload is built from its config, the feature tensors, a batch size and an :class:`ExecutionContext` (device,
precision, compilation). It exposes one training step — one optimizer update, including whatever data sampling or
environment work that update needs — and says how many samples one step consumes. The runner never knows which
model it times.

``train_step`` must not synchronise the device: it returns the loss and gradient norm as 0-d tensors that stay on
the device, so the runner can time a block of steps with synchronisation only at its edges and the stability
monitor can accumulate health checks without a host round-trip per step.
"""

import contextlib
import importlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch
from torch import nn

#: Where each workload class lives; imported only when that model runs.
WORKLOAD_CLASSES: dict[str, str] = {
    "mlp": "gpubench.models.mlp:MLPWorkload",
    "dqn": "gpubench.models.dqn:DQNWorkload",
    "ppo": "gpubench.models.ppo:PPOWorkload",
    "mamba2": "gpubench.models.mamba2:Mamba2Workload",
    "tft": "gpubench.models.tft:TFTWorkload",
}

_AUTOCAST_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


@dataclass(frozen=True)
class StepResult:
    """What one training step reports, as device tensors (reading them on the host is a sync point)."""

    loss: torch.Tensor
    grad_norm: torch.Tensor | None


@dataclass
class ExecutionContext:
    """Device, batch size, precision and compilation shared by every workload, applied the same way to each.

    ``precision`` is ``fp32``, ``bf16`` or ``fp16`` (autocast; fp16 adds a gradient scaler). ``compile_mode`` is
    ``false``, ``true`` (``torch.compile`` default mode) or ``reduce-overhead`` (CUDA graphs through
    ``torch.compile``).
    """

    device: torch.device
    batch_size: int
    precision: str = "fp32"
    compile_mode: str = "false"
    seed: int = 0

    def __post_init__(self) -> None:
        use_scaler = self.precision == "fp16" and self.device.type == "cuda"
        self.grad_scaler = torch.amp.GradScaler(self.device.type, enabled=use_scaler)
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(self.seed)

    def autocast(self) -> contextlib.AbstractContextManager:
        """Autocast region for the forward pass and loss (a no-op for fp32)."""
        dtype = _AUTOCAST_DTYPES.get(self.precision)
        if dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=dtype)

    def compile(self, fn: Callable) -> Callable:
        """Compile a module or function according to ``compile_mode`` (identity when ``false``)."""
        if self.compile_mode == "false":
            return fn
        mode = "reduce-overhead" if self.compile_mode == "reduce-overhead" else None
        return torch.compile(fn, mode=mode)

    def optimize(
        self,
        loss: torch.Tensor,
        optimizer: torch.optim.Optimizer,
        parameters: Iterable[nn.Parameter],
        max_grad_norm: float | None,
    ) -> torch.Tensor:
        """Backward, optional gradient-norm clipping, optimizer step; returns the pre-clip gradient norm.

        The norm is computed by ``clip_grad_norm_`` with ``foreach`` kernels and stays on the device. With fp16
        the gradient scaler unscales before clipping, so the norm is in true units.
        """
        params = [p for p in parameters if p.requires_grad]
        optimizer.zero_grad(set_to_none=True)
        self.grad_scaler.scale(loss).backward()
        self.grad_scaler.unscale_(optimizer)
        limit = max_grad_norm if max_grad_norm is not None else float("inf")
        grad_norm = torch.nn.utils.clip_grad_norm_(params, limit, foreach=True)
        self.grad_scaler.step(optimizer)
        self.grad_scaler.update()
        return grad_norm.detach()


class Workload(ABC):
    """One model's training step, as the runner sees it."""

    #: Short name used in reports (``mlp``, ``dqn``, ...).
    name: str = ""
    #: What a sample is for this workload (``window`` or ``env_step``), for throughput units in the report.
    sample_unit: str = "window"

    @property
    @abstractmethod
    def samples_per_step(self) -> float:
        """Samples consumed by one optimizer step (windows, or environment steps for RL)."""

    @abstractmethod
    def train_step(self) -> StepResult:
        """Run one optimizer update, without synchronising the device."""

    @abstractmethod
    def modules(self) -> list[nn.Module]:
        """The trained networks (for parameter counts and health checks)."""

    def parameter_count(self) -> int:
        """Number of trainable parameters across :meth:`modules` (shared parameters counted once)."""
        seen: set[int] = set()
        total = 0
        for module in self.modules():
            for p in module.parameters():
                if p.requires_grad and id(p) not in seen:
                    seen.add(id(p))
                    total += p.numel()
        return total

    def describe(self) -> dict[str, object]:
        """Workload-specific facts for the report (shapes, derived sizes). Override to add more."""
        return {"parameters": self.parameter_count(), "sample_unit": self.sample_unit}


def workload_class(name: str) -> type[Workload]:
    """Import and return the workload class registered under ``name``."""
    module_name, class_name = WORKLOAD_CLASSES[name].split(":")
    return getattr(importlib.import_module(module_name), class_name)
