"""The workload contract: what the runner times, whichever model it is.

A workload is built from its config, the feature tensors, a batch size and an :class:`ExecutionContext` (device,
precision, compilation). It exposes one training step — one optimizer update, including whatever data sampling or
environment work that update needs — and says how many samples one step consumes. The runner never knows which
model it times.

``train_step`` must not synchronise the device: it returns the loss and gradient norm as 0-d tensors that stay on
the device, so the runner can time a block of steps with synchronisation only at its edges and the stability
monitor can accumulate health checks without a host round-trip per step.

Beside the steps, a real training validates and checkpoints: :meth:`Workload.evaluate` runs one piece of a
validation pass (a batch of validation windows, or one greedy step of evaluation environments) and
:meth:`Workload.checkpoint_state` is what a checkpoint saves (modules and :meth:`Workload.optimizers`); the
runner measures both after the epochs and the plan adds them (``gpubench/measure/recurring.py``).
:attr:`Workload.updates_per_step` states the gradient updates a step makes, so an RL plan can state its
update-to-data ratio.

Beside the contract, helpers for workloads whose steps are launch-bound on a GPU (the RL ones, whose networks are
tiny): :class:`CudaGraphStep` captures a whole step in one CUDA graph (``execution.compile=reduce-overhead``), and
:class:`OpCounter` counts the tensor operations a step dispatches, which sets its eager speed there.
"""

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
    """What a reinforcement-learning update reports beside its loss: the health signals that mean something for
    RL, whose loss trend does not (PPO's clipped surrogate normally rises toward zero).

    ``critic_loss`` is the critic's loss of the update (PPO's value loss, DQN's TD loss), a 0-d device tensor, and
    ``critic_loss_name`` says which. ``critic_loss_ceiling`` (a host float, fixed for the workload) is the largest
    that loss can be while the critic's predictions and targets stay within the discounted returns the rewards
    allow, ``±max |reward| / (1 − γ)``. ``approx_kl`` and ``clip_fraction`` are PPO's per-update figures (0-d
    device tensors; None for DQN). ``value_abs_max`` is the largest |value| the critic predicted in the update
    (DQN: ``|Q(s, a)|`` over the minibatch's taken actions; a 0-d device tensor, None where not reported), and
    ``return_bound`` that same ``max |reward| / (1 − γ)``: no policy's discounted return, hence no accurate value,
    lies beyond it. Like :class:`StepResult`'s, the tensors must not be written again.
    """

    critic_loss: torch.Tensor
    critic_loss_name: str
    critic_loss_ceiling: float
    approx_kl: torch.Tensor | None = None
    clip_fraction: torch.Tensor | None = None
    value_abs_max: torch.Tensor | None = None
    return_bound: float | None = None


@dataclass(frozen=True)
class StepResult:
    """What one training step reports, as device tensors (reading them on the host is a sync point).

    The stability monitor keeps these tensors and reads them steps later, so a workload must return tensors it
    will not write again (fresh results, or clones of a buffer it reuses). ``loss`` is None only for a workload
    that cannot see its loss (a user's step that returns none): the monitor then checks no loss for that step.
    ``rl`` carries a reinforcement-learning update's own health signals (None for supervised training).

    ``reference_loss`` is the same loss of a fixed naive forecast on the step's own batch (for MSE on normalised
    returns, the zero forecast's: the batch targets' mean square), or None. Batches sampled at random differ in how
    hard their targets are (a window from a volatile stretch has a large mean square), and that alone moved
    Mamba-2's epoch loss by 15% from epoch to epoch while its ratio to this reference stayed within 1.01-1.04; the
    stability monitor therefore judges the loss trend on the loss relative to this reference where it is given.
    """

    loss: torch.Tensor | None
    grad_norm: torch.Tensor | None
    rl: RLSignals | None = None
    reference_loss: torch.Tensor | None = None


@dataclass
class ExecutionContext:
    """Device, batch size, precision and compilation shared by every workload, applied the same way to each.

    ``precision`` is ``fp32``, ``bf16`` or ``fp16`` (autocast; fp16 adds a gradient scaler). ``compile_mode`` is
    ``false``, ``true`` (``torch.compile`` default mode) or ``reduce-overhead`` (CUDA graphs through
    ``torch.compile``). ``usable_vram_mb`` is the VRAM the workload may use (the emulated card's cap less the CUDA
    context; None on the CPU): a workload that trades speed for memory (Mamba-2's scan recompute) decides with it.

    ``data_parallel`` (one rank of a ``distributed.nproc`` > 1 run, inside an initialised process group): each
    workload passes its trained network through :meth:`parallel` before making its optimizer, which wraps it in
    ``DistributedDataParallel``, so that every backward pass all-reduces the gradients across the ranks.
    ``gradient_sync`` False (a batch-search trial) builds those wrappers without their initial broadcast and keeps
    them in ``no_sync`` for the context's life: the trial, build included, then runs no collective, and a rank that
    runs out of memory leaves no other rank blocked in one. In one process (the default) :meth:`parallel` is the
    identity.
    """

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
        #: The no_sync regions of the wrappers :meth:`parallel` made, held open while ``gradient_sync`` is False.
        self._no_sync = contextlib.ExitStack()

    def parallel(self, module: nn.Module) -> nn.Module:
        """``module`` (already on the device) for the training forward pass: wrapped in DistributedDataParallel
        when ``data_parallel``, else ``module`` itself. Call the returned module for the forward whose loss is
        backpropagated; the optimizer and anything else keep using ``module``'s parameters (they are the same).

        DDP broadcasts rank 0's parameters on construction, so every rank starts from the same network; not in a
        trial (``gradient_sync`` False), which must run no collective: a rank that ran out of memory before its
        wrapper was built would leave the others in that broadcast. The built-in networks have no buffers, so DDP's
        forward runs no collective of its own.
        """
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
        """Whether a workload that captures its own steps (:class:`CudaGraphStep`) replays them as CUDA graphs:
        ``reduce-overhead`` on CUDA. The RL workloads do; on the CPU ``reduce-overhead`` is plain compilation."""
        return self.compile_mode == "reduce-overhead" and self.device.type == "cuda"

    def compile_step_piece(self, fn: _Fn) -> _Fn:
        """Compile one pure tensor function of a step that :class:`CudaGraphStep` may capture whole.

        When :attr:`captures_steps`, the workload captures its *whole* step (environment, sampling, forward,
        backward, optimizer) in one CUDA graph itself, so its pieces are compiled in ``torch.compile``'s default
        mode: the ``reduce-overhead`` mode's own CUDA-graph trees cannot nest inside that capture. Otherwise this is
        :meth:`compile`.
        """
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


class CudaGraphStep:
    """A tensor-only step function captured into one CUDA graph on its first call, then replayed.

    ``fn`` returns a tuple of tensors, keeps its state in tensors it updates in place, uses fixed shapes and never
    synchronises with the host; its Python code runs only while warming up and capturing, not on replay. The first
    call runs ``warmup_calls`` eager calls on a side stream (real steps, not counted by the caller's counters:
    capture needs optimizer state, gradients, library workspaces and compiled kernels to exist already), records
    one call, then replays it. Registering ``generator`` with the graph makes every replay draw fresh random
    numbers. Each call returns clones of the outputs, so callers may keep them across steps.
    """

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
            # thread_local: only this thread must avoid capture-unsafe CUDA calls; the runner's monitoring threads
            # keep sampling while the first step captures.
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
    """The identity of the storage ``tensor`` views: views of one storage share it; a tensor without a storage
    (a sparse or a wrapper tensor) is its own."""
    try:
        return tensor.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):
        return id(tensor)


def tensor_bytes(tensors: Iterable[object]) -> int:
    """Bytes of the tensors among ``tensors`` as one operation touches them: each distinct storage once, at the
    largest size it is viewed at there (``numel × element_size`` of the view, not the whole storage), so an
    in-place operation's output, which is its input, is not counted twice."""
    sizes: dict[int, int] = {}
    for value in tensors:
        if isinstance(value, torch.Tensor):
            key = _storage_key(value)
            sizes[key] = max(sizes.get(key, 0), value.numel() * value.element_size())
    return sum(sizes.values())


#: Operations that gather rows of their first argument (the source) by index: they read as many of its bytes as
#: they write, not the whole source (a replay buffer's or a dataset's tensor, many times the batch).
_GATHER_OPS = frozenset({"index", "index_select", "gather", "embedding", "take"})


class OpCounter(TorchDispatchMode):
    """Counts the tensor operations run while active (as a context manager) that launch a kernel, and the bytes
    they move.

    On a GPU each counted operation is about one kernel launch, the cost that bounds the steps of tiny networks
    (the RL workloads'), so the count tracks eager speed there even when measured on the CPU. It counts what
    reaches the dispatcher, backward operations included and composite functions by their parts, less views and
    the operations in ``_KERNEL_FREE_OPS``. For the same operations it adds up the bytes of their tensor inputs
    and outputs (:func:`tensor_bytes`): every counted kernel reading its inputs from and writing its outputs to
    memory, the usual upper bound on a step's DRAM traffic (no reuse in caches), the same on every device; a
    gather (``_GATHER_OPS``) reads at most as much of its source as it writes. For
    tests, benchmarks and the one counted step of a measurement; it slows what it counts.
    """

    def __init__(self) -> None:
        super().__init__()
        #: Operations counted so far.
        self.count = 0
        #: Bytes of the counted operations' tensor inputs and outputs so far.
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

    #: Short name used in reports (``mlp``, ``dqn``, ...).
    name: str = ""
    #: What a sample is for this workload (``window`` or ``env_step``), for throughput units in the report.
    sample_unit: str = "window"
    #: True when the batch size is part of the algorithm (an RL replay or PPO minibatch): the batch-size search
    #: then reports what fits, but the model is timed at its configured batch size (or the largest that fits, if
    #: smaller), since a larger batch would time a different training run.
    batch_size_is_hyperparameter: bool = False

    @classmethod
    def check_data(cls, config: Any, data: FeatureTensors) -> None:
        """Raise a ConfigError naming the key when ``config`` cannot run on ``data`` (a window longer than the
        data); called for every selected model before any is measured. The default accepts any data."""
        return

    @property
    @abstractmethod
    def samples_per_step(self) -> float:
        """Samples consumed by one optimizer step (windows, or environment steps for RL)."""

    @property
    def updates_per_step(self) -> float:
        """Gradient updates one :meth:`train_step` makes (1 unless a step bundles several, as DQN's
        ``gradient_steps`` do). With :attr:`samples_per_step` it gives the update-to-data ratio."""
        return 1.0

    @property
    def eval_samples_per_call(self) -> float:
        """Samples one :meth:`evaluate` call covers (windows, or environment steps for RL)."""
        return self.samples_per_step

    def evaluate(self) -> torch.Tensor | None:
        """One piece of a validation pass: a forward pass without gradients over :attr:`eval_samples_per_call`
        samples, returning its loss (or score) as a device tensor, without synchronising. None: this workload has
        no evaluation, and the plan's evaluations cost it nothing."""
        return None

    def optimizers(self) -> list[torch.optim.Optimizer]:
        """The optimizers whose state a checkpoint saves beside :meth:`modules`."""
        return []

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
        """Steps over which the step cost repeats: a benchmark epoch is a whole number of them.

        1 when every step costs the same. A workload whose steps differ by their place in a cycle (PPO: the first
        minibatch update of an iteration also collects the rollout) returns the cycle's length, so that every epoch
        holds the same work (see :mod:`gpubench.measure.timing`).
        """
        return 1

    @property
    def steps_into_iteration(self) -> int:
        """Steps run since the current iteration began: 0 at an iteration boundary, always 0 when
        :attr:`steps_per_iteration` is 1. The epoch sizing reads it to start the timed blocks at a boundary."""
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
