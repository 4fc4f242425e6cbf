"""A vectorised trading environment on the benchmark device.

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
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import torch

from gpubench.data.tensors import FeatureTensors
from gpubench.models.trading_env.config import TradingEnvConfig

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

    A step is launch-bound on a GPU (a few dozen tiny kernels), so it is written in few tensor operations: an
    observation is two indexed reads and a concatenation, from tables built once here.
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
        self.observation_size = window * data.n_features + NUM_ACTIONS
        self._data = data
        self._generator = generator
        device = data.device
        # A bar t can be stood on when its observation window t-window+1..t and the next bar t+1 (whose return the
        # step earns) all lie in one symbol's training split: the windows of window + 1 bars starting at t-window+1.
        self._start_bars = data.window_starts(window + 1, "train") + (window - 1)
        # is_last[t]: bar t + 1 does not continue bar t's symbol inside the training split, so an episode standing
        # on bar t has run out of data.
        same_symbol = data.symbol_id[1:] == data.symbol_id[:-1]
        is_last = torch.ones(data.n_bars, dtype=torch.bool, device=device)
        is_last[:-1] = ~(same_symbol & data.is_train[:-1] & data.is_train[1:])
        self._is_last = is_last
        # Row t of _windows is the flattened window of bars t-window+1..t: an overlapping strided view of a copy
        # of the features led by window-1 zero rows, so that the row index is the bar index (those rows precede
        # every start bar and are never read). One indexed read then gathers a whole batch of windows.
        padded = torch.cat([data.values.new_zeros(window - 1, data.n_features), data.values])
        self._windows = padded.as_strided((data.n_bars, window * data.n_features), (data.n_features, 1))
        # Tables indexed by position p put short (-1) in the last row, which a negative index reaches from the end
        # as in Python: row p of _one_hots is the one-hot of position p, and _trade_costs[p, a] the cost of trading
        # from p into action a's position. One indexed read each, and no range check (no host sync).
        row_positions = torch.tensor([0, 1, -1], device=device)
        self._one_hots = torch.eye(NUM_ACTIONS, dtype=data.values.dtype, device=device)[row_positions + 1]
        action_positions = torch.arange(NUM_ACTIONS, device=device) - 1
        trade_sizes = (action_positions.unsqueeze(0) - row_positions.unsqueeze(1)).abs()
        self._trade_costs = config.transaction_cost * trade_sizes.to(data.values.dtype)
        # The largest reward any step can earn or lose: a full position over the largest training-split return, less
        # the cost of the largest trade (short to long). One host read, at construction.
        train_returns = data.log_return[data.is_train]
        largest_return = float(train_returns.abs().max()) if train_returns.numel() else 0.0
        #: Largest |reward| of a step, in log-return units.
        self.max_abs_reward = largest_return + config.transaction_cost * float(trade_sizes.max())
        self._zeros = torch.zeros(num_envs, dtype=torch.int64, device=device)
        self.bar_index = torch.zeros(num_envs, dtype=torch.int64, device=device)
        self.position = torch.zeros(num_envs, dtype=torch.int64, device=device)
        self.episode_step = torch.zeros(num_envs, dtype=torch.int64, device=device)
        self._transition = compile_fn(self._transition_impl)

    def discounted_return_bound(self, gamma: float) -> float:
        """The largest |discounted return| any policy can reach, ``max_abs_reward / (1 − γ)`` (log-return units): a
        critic whose values leave ``±`` this has left the range of anything it could be fitting."""
        return self.max_abs_reward / (1.0 - gamma)

    def observe(self, bar_index: torch.Tensor, position: torch.Tensor) -> torch.Tensor:
        """Observations ``(n, observation_size)`` at bars ``bar_index`` holding ``position`` (−1, 0 or +1).

        The window ends at the bar itself, so the observation holds bars up to ``bar_index`` only.
        """
        return torch.cat([self._windows[bar_index], self._one_hots[position]], dim=-1)

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
        # The action is chosen at bar t; the position then earns the return from t to t + 1, less the cost of
        # trading into it.
        reward = new_position * self._data.log_return[next_bar] - self._trade_costs[self.position, action]
        self.episode_step.add_(1)
        terminated = self._is_last[next_bar]
        done = terminated | (self.episode_step >= self.episode_length)
        truncated = done ^ terminated  # done but not terminated: terminated implies done
        # where(..., out=) writes the new state in place: one kernel each instead of a where and a copy.
        torch.where(done, reset_bars, next_bar, out=self.bar_index)
        torch.where(done, self._zeros, new_position, out=self.position)
        self.episode_step.masked_fill_(done, 0)
        # One observe for both the observation the step reached and the one to act on next (after any reset).
        final_observation, observation = self.observe(
            torch.stack([next_bar, self.bar_index]), torch.stack([new_position, self.position])
        ).unbind(0)
        return observation, reward, terminated, truncated, final_observation


class GreedyEvaluation:
    """Evaluation of a policy on ``num_envs`` episodes of its own: each :meth:`step` acts with ``act`` (the greedy
    policy) in every environment and returns the mean reward (0-d device tensor).

    The evaluation environment has its own generator (seeded with ``seed``), so evaluating never shifts the random
    streams training draws from, and its own state, so the training episodes continue where they were.
    """

    def __init__(self, config: TradingEnvConfig, data: FeatureTensors, num_envs: int, seed: int) -> None:
        generator = torch.Generator(device=data.device)
        generator.manual_seed(seed)
        self.env = TradingEnv(config, data, num_envs, generator)
        self._observation = self.env.reset()

    def step(self, act: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
        """One greedy step in every evaluation environment (``num_envs`` environment steps)."""
        with torch.no_grad():
            step = self.env.step(act(self._observation))
        self._observation = step.observation
        return step.reward.mean()
