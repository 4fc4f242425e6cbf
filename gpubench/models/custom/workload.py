"""The user's own training step as a workload; its step returns a loss tensor, ``(loss, grad_norm)`` or None."""

from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch import nn

from gpubench.data.tensors import FeatureTensors
from gpubench.models.custom.config import CustomConfig
from gpubench.models.custom.factory import describe_factory, factory_error, load_factory
from gpubench.workload import ExecutionContext, StepResult, Workload


def _candidates(step: Callable[..., Any]) -> Iterable[Any]:
    """Objects a step callable holds directly: itself, its bound object, closure variables, attributes."""
    yield step
    owner = getattr(step, "__self__", None)
    if owner is not None:
        yield owner
        yield from vars(owner).values() if hasattr(owner, "__dict__") else ()
    for cell in getattr(step, "__closure__", None) or ():
        try:
            yield cell.cell_contents
        except ValueError:  # an empty cell (a variable not yet bound)
            continue
    if owner is None and not hasattr(step, "__code__") and hasattr(step, "__dict__"):
        yield from vars(step).values()


def reachable_modules(step: Callable[..., Any]) -> list[nn.Module]:
    """The ``nn.Module``\\ s a step callable holds directly, each once (for the parameter count)."""
    found: dict[int, nn.Module] = {}
    for candidate in _candidates(step):
        if isinstance(candidate, nn.Module):
            found.setdefault(id(candidate), candidate)
    return list(found.values())


def reachable_optimizers(step: Callable[..., Any]) -> list[torch.optim.Optimizer]:
    """The optimizers a step callable holds directly, each once (for checkpoints and the memory split)."""
    found: dict[int, torch.optim.Optimizer] = {}
    for candidate in _candidates(step):
        if isinstance(candidate, torch.optim.Optimizer):
            found.setdefault(id(candidate), candidate)
    return list(found.values())


class CustomWorkload(Workload):
    """One optimizer update of the user's training (the user wraps it in DDP under ``distributed.nproc`` > 1)."""

    name = "custom"
    # The user's batch is part of their recipe: time it, not the largest that fits.
    batch_size_is_hyperparameter = True

    def __init__(self, config: CustomConfig, data: FeatureTensors, context: ExecutionContext) -> None:
        assert config.factory is not None  # CustomConfig.check_runnable requires it for model=custom
        self.config = config
        self.context = context
        self.batch_size = context.batch_size
        self.sample_unit = config.sample_unit
        self._build = load_factory(config.factory)
        call = f"{describe_factory(self._build)}({context.batch_size}, {context.device})"
        try:
            step = self._build(context.batch_size, context.device)
        except torch.OutOfMemoryError:
            # The batch does not fit: the batch search and the report classify that, it is not a bad factory.
            raise
        # SystemExit too: a build calling sys.exit would otherwise end gpubench with status 0.
        except (Exception, SystemExit) as exc:
            raise factory_error(config.factory, f"{call} raised {type(exc).__name__}: {exc}") from exc
        if not callable(step):
            raise factory_error(config.factory, f"{call} returned no step callable (its type is {type(step).__name__})")
        self._step: Callable[[], Any] = step
        self._modules = reachable_modules(step)
        self._optimizers = reachable_optimizers(step)

    @property
    def samples_per_step(self) -> float:
        if self.config.samples_per_step is None:
            return float(self.batch_size)
        return self.config.samples_per_step * self.batch_size / self.config.batch_size

    def modules(self) -> list[nn.Module]:
        return list(self._modules)

    def optimizers(self) -> list[torch.optim.Optimizer]:
        return list(self._optimizers)

    def _device_scalar(self, value: object, what: str) -> torch.Tensor | None:
        """The step's ``what`` (loss or gradient norm) as a detached 0-d tensor on the device, or None."""
        if value is None:
            return None
        assert self.config.factory is not None
        if not isinstance(value, torch.Tensor):
            raise factory_error(
                self.config.factory,
                f"the step returned its {what} as a {type(value).__name__}; return the tensor itself "
                "(e.g. `return loss.detach()`, not `loss.item()`, which synchronises the device every step)",
            )
        if value.numel() != 1:
            raise factory_error(
                self.config.factory, f"the step returned a {what} of shape {tuple(value.shape)}; it must be a scalar"
            )
        # reshape and a same-device .to are views/no-ops: no copy, no synchronisation on the common path.
        return value.detach().reshape(()).to(self.context.device)

    def train_step(self) -> StepResult:
        try:
            output = self._step()
        except SystemExit as exc:
            # The step's failure is the model's (status failed, the next model still runs), not the end of gpubench.
            raise RuntimeError(f"the step called sys.exit({exc.code!r})") from exc
        loss, grad_norm = output if isinstance(output, tuple) and len(output) == 2 else (output, None)
        return StepResult(
            loss=self._device_scalar(loss, "loss"), grad_norm=self._device_scalar(grad_norm, "gradient norm")
        )

    def describe(self) -> dict[str, object]:
        return {
            "parameters": self.parameter_count() if self._modules else None,
            "sample_unit": self.sample_unit,
            "factory": self.config.factory,
            "build": describe_factory(self._build),
            "configured_batch_size": self.config.batch_size,
        }
