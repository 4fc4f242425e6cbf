"""A vectorised trading environment on the benchmark device, and the execution helpers the RL workloads share.

``TradingEnv`` runs ``num_envs`` independent episodes at once, entirely as tensor operations on the device of the
feature data (no Python loop over environments, no host round-trip). Each environment holds a position in one
instrument and walks forward through the training split of the market data one bar per step:

* **state** — the current bar ``t`` (a row of :class:`~gpubench.data.tensors.FeatureTensors`), the position held
  (−1 short, 0 flat, +1 long) and the number of steps taken in this episode;
* **observation** — the features of the last ``observation_window`` bars, ``t - window + 1 .. t``, flattened,
  followed by a one-hot of the position held: bars after ``t`` are never visible (no look-ahead);
* **action** — 0 short, 1 flat, 2 long; the new position is ``action - 1``;
* **reward** — ``position × log_return[t + 1] − transaction_cost × |position change|``: the log return earned by
  holding the chosen position over the next bar, net of the cost of trading into it;
* **episode end** — *termination* when bar ``t + 1`` is the last one of its symbol's training split (the data ran
  out: there is no next return to earn), *truncation* (a time limit, so a learner should bootstrap) after
  ``episode_length`` steps. When both happen on the same step the episode counts as terminated.

Finished environments restart at once (auto-reset, with ``torch.where``) at a random valid bar, flat. The step
result carries both the observation to act on next (after any reset) and ``final_observation``, the observation the
step actually reached, which a learner needs to bootstrap truncated episodes.

The second half of the module holds what DQN and PPO both need to run one training step as compiled code or as a
replayed CUDA graph (``execution.compile``).
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import torch

from gpubench.config import TradingEnvConfig
from gpubench.data.tensors import FeatureTensors
from gpubench.workload import ExecutionContext

#: Actions and the positions they set: index 0 short (−1), 1 flat (0), 2 long (+1).
NUM_ACTIONS = 3

_Fn = TypeVar("_Fn", bound=Callable)


def _identity(fn: _Fn) -> _Fn:
    return fn


@dataclass(frozen=True)
class EnvStep:
    """The outcome of one vectorised step, as device tensors with the environment index first.

    Attributes:
        observation: ``(num_envs, observation_size)`` what to act on next; for finished environments this is the
            first observation of the new episode.
        reward: ``(num_envs,)`` float32 reward in log-return units (position × next-bar log return − costs).
        terminated: ``(num_envs,)`` bool, the data ran out: no value beyond this step.
        truncated: ``(num_envs,)`` bool, the episode hit ``episode_length``: its value continues beyond this step.
        final_observation: ``(num_envs, observation_size)`` the observation this step reached, before any reset
            (equal to ``observation`` where the episode goes on). Bootstrap truncated episodes from it.
    """

    observation: torch.Tensor
    reward: torch.Tensor
    terminated: torch.Tensor
    truncated: torch.Tensor
    final_observation: torch.Tensor


class TradingEnv:
    """``num_envs`` trading episodes on the training split of ``data``, stepped together on its device.

    The state tensors ``bar_index``, ``position`` and ``episode_step`` (all ``(num_envs,)`` int64) are updated in
    place, so a CUDA graph that captured a step keeps reading and writing the live state. ``compile_fn`` wraps the
    deterministic part of the step (everything but drawing reset bars), e.g. with ``torch.compile``.
    """

    def __init__(
        self,
        config: TradingEnvConfig,
        data: FeatureTensors,
        num_envs: int,
        generator: torch.Generator,
        compile_fn: Callable[[Callable], Callable] = _identity,
    ) -> None:
        window = config.observation_window
        self.num_envs = num_envs
        self.episode_length = config.episode_length
        self.transaction_cost = config.transaction_cost
        self.observation_size = window * data.n_features + NUM_ACTIONS
        self._data = data
        self._generator = generator
        device = data.device
        # A bar t can be stood on when its observation window t-window+1..t and the next bar t+1 (whose return the
        # step earns) all lie in one symbol's training split: the windows of window + 1 bars starting at t-window+1.
        self._start_bars = data.window_starts(window + 1, "train") + (window - 1)
        # has_next[t]: bar t + 1 continues bar t's symbol inside the training split; an episode standing on a bar
        # without a next one has run out of data.
        same_symbol = data.symbol_id[1:] == data.symbol_id[:-1]
        has_next = torch.zeros(data.n_bars, dtype=torch.bool, device=device)
        has_next[:-1] = same_symbol & data.is_train[:-1] & data.is_train[1:]
        self._has_next = has_next
        self._window_offsets = torch.arange(-(window - 1), 1, device=device)
        self._position_values = torch.arange(-1, NUM_ACTIONS - 1, device=device)
        self.bar_index = torch.zeros(num_envs, dtype=torch.int64, device=device)
        self.position = torch.zeros(num_envs, dtype=torch.int64, device=device)
        self.episode_step = torch.zeros(num_envs, dtype=torch.int64, device=device)
        self._transition = compile_fn(self._transition_impl)

    def observe(self, bar_index: torch.Tensor, position: torch.Tensor) -> torch.Tensor:
        """Observations ``(n, observation_size)`` at bars ``bar_index`` holding ``position`` (−1, 0 or +1).

        The window ends at the bar itself, so the observation holds bars up to ``bar_index`` only.
        """
        rows = bar_index.unsqueeze(1) + self._window_offsets
        window = self._data.values[rows].flatten(1)
        # A comparison instead of F.one_hot, whose range check can read the tensor on the host (a sync point).
        one_hot = (position.unsqueeze(1) == self._position_values).to(window.dtype)
        return torch.cat([window, one_hot], dim=1)

    def reset(self, bar_index: torch.Tensor | None = None) -> torch.Tensor:
        """Start every episode afresh, flat, at random valid bars (or at ``bar_index``); returns the observations."""
        if bar_index is None:
            bar_index = self._data.sample_starts(self._start_bars, self.num_envs, self._generator)
        self.bar_index.copy_(bar_index)
        self.position.zero_()
        self.episode_step.zero_()
        return self.observe(self.bar_index, self.position)

    def step(self, action: torch.Tensor) -> EnvStep:
        """Apply ``action`` (``(num_envs,)`` int64 in {0, 1, 2}) in every environment and auto-reset finished ones."""
        # Reset bars are drawn for every environment and used only where an episode ends: a fixed amount of work
        # per step, with no data-dependent shapes.
        reset_bars = self._data.sample_starts(self._start_bars, self.num_envs, self._generator)
        return EnvStep(*self._transition(action, reset_bars))

    def _transition_impl(
        self, action: torch.Tensor, reset_bars: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        new_position = action - 1
        next_bar = self.bar_index + 1
        # The action is chosen at bar t; the position then earns the return from t to t + 1.
        reward = (
            new_position * self._data.log_return[next_bar]
            - self.transaction_cost * (new_position - self.position).abs()
        )
        episode_step = self.episode_step + 1
        terminated = ~self._has_next[next_bar]
        truncated = (episode_step >= self.episode_length) & ~terminated
        final_observation = self.observe(next_bar, new_position)
        done = terminated | truncated
        self.bar_index.copy_(torch.where(done, reset_bars, next_bar))
        self.position.copy_(torch.where(done, 0, new_position))
        self.episode_step.copy_(torch.where(done, 0, episode_step))
        observation = self.observe(self.bar_index, self.position)
        return observation, reward, terminated, truncated, final_observation


# --------------------------------------------------------------------------------------------------- execution


def uses_cuda_graph(context: ExecutionContext) -> bool:
    """Whether the RL workloads replay their steps as CUDA graphs: ``execution.compile=reduce-overhead`` on CUDA."""
    return context.compile_mode == "reduce-overhead" and context.device.type == "cuda"


def compile_piece(context: ExecutionContext, fn: _Fn) -> _Fn:
    """Compile one pure tensor function of an RL step according to ``execution.compile``.

    Under ``reduce-overhead`` on CUDA the workload captures its *whole* step (environment, sampling, forward,
    backward, optimizer) in one CUDA graph itself (:class:`CudaGraphStep`), so its pieces are compiled in
    ``torch.compile``'s default mode: the mode's own CUDA-graph trees cannot nest inside that capture. Elsewhere this
    is ``context.compile`` (on the CPU, ``reduce-overhead`` is plain ``torch.compile``: there are no CUDA graphs).
    """
    if uses_cuda_graph(context):
        return torch.compile(fn)
    return context.compile(fn)


def execution_label(context: ExecutionContext) -> str:
    """How the RL steps run, for the report: eager, torch.compile, or torch.compile + CUDA graph."""
    if context.compile_mode == "false":
        return "eager"
    if uses_cuda_graph(context):
        return "torch.compile + CUDA graph"
    if context.compile_mode == "reduce-overhead":
        return f"torch.compile (no CUDA graphs on {context.device.type})"
    return "torch.compile"


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
