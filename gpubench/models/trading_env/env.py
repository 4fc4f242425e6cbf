"""A vectorised trading environment: ``num_envs`` episodes stepped at once as tensor operations on the data's device.

Position −1, 0 or +1 (action 0, 1, 2); the observation is the last ``observation_window`` bars and the position;
reward ``position × log_return[t + 1] − transaction_cost × |position change|``. Episodes terminate when the symbol's
training data runs out, truncate after ``episode_length`` steps, and restart at once."""

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
    """One vectorised step's device tensors: next ``observation``, ``reward``, flags and ``final_observation``
    (before reset)."""

    observation: torch.Tensor
    reward: torch.Tensor
    terminated: torch.Tensor
    truncated: torch.Tensor
    final_observation: torch.Tensor


class TradingEnv:
    """``num_envs`` trading episodes on ``data``'s training split; state tensors are updated in place for CUDA
    graphs."""

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
        # A bar t is a start when its window and bar t + 1 (whose return it earns) lie in one symbol's training split.
        self._start_bars = data.window_starts(window + 1, "train") + (window - 1)
        # is_last[t]: an episode on bar t has run out of training data.
        same_symbol = data.symbol_id[1:] == data.symbol_id[:-1]
        is_last = torch.ones(data.n_bars, dtype=torch.bool, device=device)
        is_last[:-1] = ~(same_symbol & data.is_train[:-1] & data.is_train[1:])
        self._is_last = is_last
        # Row t of _windows is the window ending at bar t: a strided view over features led by window-1 zero rows, so
        # one indexed read gathers a batch.
        padded = torch.cat([data.values.new_zeros(window - 1, data.n_features), data.values])
        self._windows = padded.as_strided((data.n_bars, window * data.n_features), (data.n_features, 1))
        # Short (-1) is the last row, reached by a negative index: one indexed read, no range check, no host sync.
        row_positions = torch.tensor([0, 1, -1], device=device)
        self._one_hots = torch.eye(NUM_ACTIONS, dtype=data.values.dtype, device=device)[row_positions + 1]
        action_positions = torch.arange(NUM_ACTIONS, device=device) - 1
        trade_sizes = (action_positions.unsqueeze(0) - row_positions.unsqueeze(1)).abs()
        self._trade_costs = config.transaction_cost * trade_sizes.to(data.values.dtype)
        # Largest reward: a full position over the largest training return, less the largest trade's cost.
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
        """The largest |discounted return| any policy can reach, ``max_abs_reward / (1 − γ)``, in log-return units."""
        return self.max_abs_reward / (1.0 - gamma)

    def observe(self, bar_index: torch.Tensor, position: torch.Tensor) -> torch.Tensor:
        """Observations ``(n, observation_size)`` at bars ``bar_index`` (inclusive) holding ``position``."""
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
        # Drawn for every environment, used where one ends: fixed work, no data-dependent shapes.
        reset_bars = self._data.sample_starts(self._start_bars, self.num_envs, self._generator)
        return EnvStep(*self._transition(action, reset_bars))

    def _transition_impl(
        self, action: torch.Tensor, reset_bars: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        new_position = action - 1
        next_bar = self.bar_index + 1
        # The position chosen at t earns the return from t to t + 1, less the cost of trading into it.
        reward = new_position * self._data.log_return[next_bar] - self._trade_costs[self.position, action]
        self.episode_step.add_(1)
        terminated = self._is_last[next_bar]
        done = terminated | (self.episode_step >= self.episode_length)
        truncated = done ^ terminated  # done but not terminated: terminated implies done
        # where(..., out=) writes the new state in place: one kernel each instead of a where and a copy.
        torch.where(done, reset_bars, next_bar, out=self.bar_index)
        torch.where(done, self._zeros, new_position, out=self.position)
        self.episode_step.masked_fill_(done, 0)
        final_observation, observation = self.observe(
            torch.stack([next_bar, self.bar_index]), torch.stack([new_position, self.position])
        ).unbind(0)
        return observation, reward, terminated, truncated, final_observation


class GreedyEvaluation:
    """Greedy evaluation of ``act`` on episodes, generator and state of its own, leaving training undisturbed."""

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
