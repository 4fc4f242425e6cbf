"""The workload contract: one training step, its samples, evaluation and checkpoint state, whichever model it is.
``train_step`` never synchronises the device, so the runner synchronises only at a timed block's edges."""

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from gpubench.data.tensors import FeatureTensors

_AUTOCAST_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}

_Fn = TypeVar("_Fn", bound=Callable)


@dataclass(frozen=True)
class RLSignals:
    """An RL update's health signals: critic loss and its ceiling, PPO's KL and clip fraction, and the largest
    |value| against ``return_bound`` = ``max |reward| / (1 − γ)``."""

    critic_loss: torch.Tensor
    critic_loss_name: str
    critic_loss_ceiling: float
    approx_kl: torch.Tensor | None = None
    clip_fraction: torch.Tensor | None = None
    value_abs_max: torch.Tensor | None = None
    return_bound: float | None = None


@dataclass(frozen=True)
class StepResult:
    """One step's device tensors, not written again; ``reference_loss`` (a naive forecast's loss on the same batch)
    lets the stability monitor judge the loss trend across batches of different difficulty."""

    loss: torch.Tensor | None
    grad_norm: torch.Tensor | None
    rl: RLSignals | None = None
    reference_loss: torch.Tensor | None = None


@dataclass
class ExecutionContext:
    """Device, batch size, precision, compile mode and VRAM (MB; None on the CPU) shared by every workload;
    ``gradient_sync`` False (a rank's batch-search trial) runs no collective, so an OOM rank blocks no other."""

    device: torch.device
    batch_size: int
    precision: str = "fp32"
    compile_mode: str = "false"
    seed: int = 0
    usable_vram_mb: float | None = None
    data_parallel: bool = False
    gradient_sync: bool = True

    def __post_init__(self) -> None:
        use_scaler = self.precision == "fp16" and self.device.type == "cuda"
        self.grad_scaler = torch.amp.GradScaler(self.device.type, enabled=use_scaler)
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(self.seed)
        self._no_sync = contextlib.ExitStack()

    def parallel(self, module: nn.Module) -> nn.Module:
        """``module`` wrapped in DistributedDataParallel when ``data_parallel`` (no broadcast, ``no_sync`` without
        ``gradient_sync``)."""
        if not self.data_parallel:
            return module
        from torch.nn.parallel import DistributedDataParallel

        device_ids = [self.device.index] if self.device.type == "cuda" else None
        wrapped = DistributedDataParallel(module, device_ids=device_ids, init_sync=self.gradient_sync)
        if not self.gradient_sync:
            self._no_sync.enter_context(wrapped.no_sync())
        return wrapped

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

    @property
    def captures_steps(self) -> bool:
        """Whether self-capturing workloads replay CUDA graphs: ``reduce-overhead`` on CUDA."""
        return self.compile_mode == "reduce-overhead" and self.device.type == "cuda"

    def compile_step_piece(self, fn: _Fn) -> _Fn:
        """Compile a pure step function; default mode under whole-step capture, where CUDA-graph trees cannot nest."""
        if self.captures_steps:
            return torch.compile(fn)
        return self.compile(fn)

    def execution_label(self) -> str:
        """How steps run, for the report: eager, torch.compile, or torch.compile + CUDA graph."""
        if self.compile_mode == "false":
            return "eager"
        if self.captures_steps:
            return "torch.compile + CUDA graph"
        if self.compile_mode == "reduce-overhead":
            return f"torch.compile (no CUDA graphs on {self.device.type})"
        return "torch.compile"

    def optimize(
        self,
        loss: torch.Tensor,
        optimizer: torch.optim.Optimizer,
        parameters: Iterable[nn.Parameter],
        max_grad_norm: float | None,
    ) -> torch.Tensor:
        """Backward, optional clipping and optimizer step; the pre-clip gradient norm (true units) on the device."""
        params = [p for p in parameters if p.requires_grad]
        optimizer.zero_grad(set_to_none=True)
        self.grad_scaler.scale(loss).backward()
        self.grad_scaler.unscale_(optimizer)
        limit = max_grad_norm if max_grad_norm is not None else float("inf")
        grad_norm = torch.nn.utils.clip_grad_norm_(params, limit, foreach=True)
        self.grad_scaler.step(optimizer)
        self.grad_scaler.update()
        return grad_norm.detach()


class CudaGraphStep:
    """A tensor-only, in-place, fixed-shape step captured into one CUDA graph on its first call (after
    ``warmup_calls`` steps on a side stream), then replayed; outputs are returned as clones."""

    def __init__(
        self, fn: Callable[[], tuple[torch.Tensor, ...]], generator: torch.Generator, warmup_calls: int = 3
    ) -> None:
        self._fn = fn
        self._generator = generator
        self._warmup_calls = warmup_calls
        self._graph: torch.cuda.CUDAGraph | None = None
        self._outputs: tuple[torch.Tensor, ...] = ()

    def __call__(self) -> tuple[torch.Tensor, ...]:
        if self._graph is None:
            self._graph = self._capture()
        self._graph.replay()
        return tuple(output.clone() for output in self._outputs)

    def _capture(self) -> torch.cuda.CUDAGraph:
        with torch.cuda.device(self._generator.device):
            side_stream = torch.cuda.Stream()
            side_stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side_stream):
                for _ in range(self._warmup_calls):
                    self._fn()
            torch.cuda.current_stream().wait_stream(side_stream)
            graph = torch.cuda.CUDAGraph()
            graph.register_generator_state(self._generator)
            # thread_local: the runner's monitoring threads keep sampling while the first step captures.
            with torch.cuda.graph(graph, capture_error_mode="thread_local"):
                self._outputs = self._fn()
        return graph


#: Operations that run no kernel: allocations (served by the caching allocator) and the profiler's markers.
_KERNEL_FREE_OPS = frozenset(
    {
        "empty",
        "empty_like",
        "empty_strided",
        "new_empty",
        "new_empty_strided",
        "_record_function_enter_new",
        "_record_function_exit",
    }
)


def _storage_key(tensor: torch.Tensor) -> int:
    """The identity of the storage ``tensor`` views (the tensor itself when it has none)."""
    try:
        return tensor.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):
        return id(tensor)


def tensor_bytes(tensors: Iterable[object]) -> int:
    """Bytes of the tensors among ``tensors``, each storage once at its largest view."""
    sizes: dict[int, int] = {}
    for value in tensors:
        if isinstance(value, torch.Tensor):
            key = _storage_key(value)
            sizes[key] = max(sizes.get(key, 0), value.numel() * value.element_size())
    return sum(sizes.values())


#: Operations that gather rows of their first argument by index: they read only as many of its bytes as they write.
_GATHER_OPS = frozenset({"index", "index_select", "gather", "embedding", "take"})


class OpCounter(TorchDispatchMode):
    """Counts the kernel-launching tensor operations run while active (launches bound tiny networks' steps), and an
    upper bound on the bytes they move."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0
        self.bytes = 0

    def __torch_dispatch__(
        self, func: torch._ops.OpOverload, types: tuple, args: tuple = (), kwargs: dict | None = None
    ) -> object:
        output = func(*args, **(kwargs or {}))
        if not func.is_view and func.overloadpacket.__name__ not in _KERNEL_FREE_OPS:
            self.count += 1
            inputs, _ = tree_flatten((args, kwargs or {}))
            outputs, _ = tree_flatten(output)
            source = args[0] if args else None
            if func.overloadpacket.__name__ in _GATHER_OPS and isinstance(source, torch.Tensor):
                inputs = [value for value in inputs if value is not source]
                self.bytes += min(tensor_bytes([source]), tensor_bytes(outputs))
            self.bytes += tensor_bytes([*inputs, *outputs])
        return output


class Workload(ABC):
    """One model's training step, as the runner sees it."""

    name: str = ""
    #: What a sample is (``window`` or ``env_step``), for throughput units.
    sample_unit: str = "window"
    #: True when the batch size is part of the algorithm (RL), so that no search changes it.
    batch_size_is_hyperparameter: bool = False

    @classmethod
    def check_data(cls, config: Any, data: FeatureTensors) -> None:
        """Raise a ConfigError naming the key when ``config`` cannot run on ``data``; the default accepts any data."""
        return

    @property
    @abstractmethod
    def samples_per_step(self) -> float:
        """Samples consumed by one optimizer step (windows, or environment steps for RL)."""

    @property
    def updates_per_step(self) -> float:
        """Gradient updates one :meth:`train_step` makes (DQN bundles ``gradient_steps``)."""
        return 1.0

    @property
    def eval_samples_per_call(self) -> float:
        """Samples one :meth:`evaluate` call covers (windows, or environment steps for RL)."""
        return self.samples_per_step

    def evaluate(self) -> torch.Tensor | None:
        """One piece of a validation pass, its loss as a device tensor; None without evaluation."""
        return None

    def optimizers(self) -> list[torch.optim.Optimizer]:
        """The optimizers whose state a checkpoint saves beside :meth:`modules`: ``self.optimizer``, if set."""
        optimizer = getattr(self, "optimizer", None)
        return [] if optimizer is None else [optimizer]

    def checkpoint_state(self) -> dict[str, object]:
        """What a training checkpoint saves: every module's and optimizer's ``state_dict``."""
        return {
            "modules": [module.state_dict() for module in self.modules()],
            "optimizers": [optimizer.state_dict() for optimizer in self.optimizers()],
        }

    @abstractmethod
    def train_step(self) -> StepResult:
        """Run one optimizer update, without synchronising the device."""

    @property
    def steps_per_iteration(self) -> int:
        """Steps over which the step cost repeats (PPO: rollout plus updates); epochs hold whole iterations."""
        return 1

    @property
    def steps_into_iteration(self) -> int:
        """Steps run since the current iteration began (0 at a boundary)."""
        return 0

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
