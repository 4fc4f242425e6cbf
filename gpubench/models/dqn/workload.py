"""DQN (Mnih et al. 2015) with Double DQN targets (van Hasselt et al. 2016), on the vectorised trading environment.

One step is ``train_freq`` ε-greedy environment steps, then ``gradient_steps`` gradient steps; the buffer is
prefilled so every timed step trains. Launch-bound on a GPU, so written in few tensor operations."""

import copy
import itertools
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from gpubench.data.tensors import FeatureTensors
from gpubench.models.dqn.config import DQNConfig
from gpubench.models.trading_env.env import NUM_ACTIONS, GreedyEvaluation, TradingEnv
from gpubench.workload import CudaGraphStep, ExecutionContext, RLSignals, StepResult, Workload


class QNetwork(nn.Module):
    """MLP from an observation ``(n, observation_size)`` to action values ``(n, num_actions)``."""

    def __init__(self, observation_size: int, hidden_sizes: list[int], num_actions: int = NUM_ACTIONS) -> None:
        super().__init__()
        widths = [observation_size, *hidden_sizes]
        self.hidden = nn.ModuleList(nn.Linear(a, b) for a, b in itertools.pairwise(widths))
        self.head = nn.Linear(widths[-1], num_actions)

    def forward(self, observation: torch.Tensor) -> torch.Tensor:
        # Called directly, not through __call__: a launch-bound step pays for the hook handling.
        hidden = observation
        for layer in self.hidden:
            hidden = torch.relu(F.linear(hidden, layer.weight, layer.bias))
        return F.linear(hidden, self.head.weight, self.head.bias)


@dataclass(frozen=True)
class ReplayBatch:
    """A minibatch of ``n`` transitions (observations, int64 actions, rewards, next observations, 0/1 flags)."""

    observations: torch.Tensor
    actions: torch.Tensor
    rewards: torch.Tensor
    next_observations: torch.Tensor
    terminated: torch.Tensor


class _RingStorage:
    """``capacity`` rows of ``width`` written in a ring on the device, counted by the 0-d device tensor ``added``."""

    def __init__(self, capacity: int, width: int, dtype: torch.dtype, device: torch.device) -> None:
        self.capacity = capacity
        self.transitions = torch.zeros(capacity, width, dtype=dtype, device=device)
        self.added = torch.zeros((), dtype=torch.int64, device=device)
        # Made once: an add takes its first n instead of building an arange each time.
        self._offsets = torch.arange(capacity, device=device)

    @property
    def cursor(self) -> torch.Tensor:
        """Slot the next transition goes to (0-d int64)."""
        return self.added % self.capacity

    @property
    def size(self) -> torch.Tensor:
        """Number of filled slots, at most ``capacity`` (0-d int64)."""
        return self.added.clamp(max=self.capacity)

    @property
    def nbytes(self) -> int:
        """Bytes the stored transitions take on the device."""
        return self.transitions.nbytes

    def _write(self, rows: torch.Tensor) -> None:
        """Write ``rows`` (at most ``capacity``) at the cursor, overwriting the oldest once full."""
        n = rows.shape[0]
        self.transitions.index_copy_(0, (self.added + self._offsets[:n]) % self.capacity, rows)
        self.added.add_(n)

    def sample_indices(self, batch_size: int, generator: torch.Generator) -> torch.Tensor:
        """``batch_size`` slots drawn uniformly with replacement from the filled ones (the buffer must not be empty)."""
        # Modulo the fill level keeps the bound on the device; the bias, size / 2**62, is nil.
        wide = torch.randint(0, 2**62, (batch_size,), generator=generator, device=self.added.device)
        return wide % self.size


class ReplayBuffer(_RingStorage):
    """Circular buffer of ``capacity`` transitions, one float32 row each, written and read in one indexed op."""

    def __init__(self, capacity: int, observation_size: int, device: torch.device) -> None:
        super().__init__(capacity, 2 * observation_size + 3, torch.float32, device)
        self.observation_size = observation_size

    @property
    def observations(self) -> torch.Tensor:
        return self.transitions[:, : self.observation_size]

    @property
    def next_observations(self) -> torch.Tensor:
        return self.transitions[:, self.observation_size : 2 * self.observation_size]

    @property
    def actions(self) -> torch.Tensor:
        """Stored actions as int64 (a copy)."""
        return self.transitions[:, -3].long()

    @property
    def rewards(self) -> torch.Tensor:
        return self.transitions[:, -2]

    @property
    def terminated(self) -> torch.Tensor:
        return self.transitions[:, -1]

    def add(
        self,
        observations: torch.Tensor,
        actions: torch.Tensor,
        rewards: torch.Tensor,
        next_observations: torch.Tensor,
        terminated: torch.Tensor,
    ) -> None:
        """Write ``n`` transitions at the cursor."""
        outcome = [actions.unsqueeze(1), rewards.unsqueeze(1), terminated.unsqueeze(1)]
        self._write(torch.cat([observations, next_observations, *outcome], dim=1))

    def batch(self, indices: torch.Tensor) -> ReplayBatch:
        """The transitions in slots ``indices``."""
        rows = self.transitions[indices]
        return ReplayBatch(
            observations=rows[:, : self.observation_size],
            actions=rows[:, -3].long(),
            rewards=rows[:, -2],
            next_observations=rows[:, self.observation_size : 2 * self.observation_size],
            terminated=rows[:, -1],
        )


class IndexReplayBuffer(_RingStorage):
    """Circular buffer of transitions stored as float64 environment states; :meth:`batch` rebuilds observations."""

    def __init__(self, capacity: int, env: TradingEnv, device: torch.device) -> None:
        super().__init__(capacity, 7, torch.float64, device)
        self._env = env

    @property
    def actions(self) -> torch.Tensor:
        """Stored actions as int64 (a copy)."""
        return self.transitions[:, 4].long()

    def add_states(
        self, states: torch.Tensor, actions: torch.Tensor, rewards: torch.Tensor, terminated: torch.Tensor
    ) -> None:
        """Write ``n`` transitions chosen in ``states`` ``(2, n)`` (bars and positions)."""
        bars, positions = states
        # The float64 rewards make the stack float64, which holds the integers exactly.
        self._write(torch.stack([bars, bars + 1, positions, actions - 1, actions, rewards.double(), terminated], dim=1))

    def batch(self, indices: torch.Tensor) -> ReplayBatch:
        """The transitions in slots ``indices``, their observations rebuilt from the feature tensor."""
        rows = self.transitions[indices]
        states = rows[:, :5].long()
        outcome = rows[:, 5:].float()
        # (n, 2) bars and positions -> (n, 2, observation_size): this state's and the next state's observation.
        both = self._env.observe(states[:, 0:2], states[:, 2:4])
        return ReplayBatch(
            observations=both[:, 0],
            actions=states[:, 4],
            rewards=outcome[:, 0],
            next_observations=both[:, 1],
            terminated=outcome[:, 1],
        )


def linear_schedule(start: float, end: float, duration: int, step: int) -> float:
    """Value at ``step`` of a ramp from ``start`` (step 0) to ``end`` (step ``duration`` and after)."""
    return start + (end - start) * min(step / duration, 1.0)


def huber_loss(prediction: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean Huber loss with δ = 1: ½e² for |e| ≤ 1, |e| − ½ beyond (Mnih et al. 2015's error clipping)."""
    return F.huber_loss(prediction, target, delta=1.0)


def dqn_targets(
    rewards: torch.Tensor,
    terminated: torch.Tensor,
    next_q_online: torch.Tensor,
    next_q_target: torch.Tensor,
    gamma: float,
    double_dqn: bool,
) -> torch.Tensor:
    """TD targets ``r + γ (1 − terminated) Q_target(s', a*)``, ``a*`` the online argmax for Double DQN."""
    chooser = next_q_online if double_dqn else next_q_target
    next_values = next_q_target.gather(1, chooser.argmax(dim=1, keepdim=True)).squeeze(1).float()
    return torch.addcmul(rewards, 1.0 - terminated, next_values, value=gamma)


def update_target(target_network: nn.Module, q_network: nn.Module, tau: float) -> None:
    """In place: ``θ⁻ ← τ θ + (1 − τ) θ⁻`` (Polyak averaging); ``tau = 1`` copies exactly."""
    with torch.no_grad():
        target_params = list(target_network.parameters())
        online_params = list(q_network.parameters())
        if tau == 1.0:
            torch._foreach_copy_(target_params, online_params)
        else:
            torch._foreach_lerp_(target_params, online_params, tau)


class DQNWorkload(Workload):
    """DQN on the trading environment; one step = ``train_freq`` env steps + ``gradient_steps`` gradient steps."""

    name = "dqn"
    sample_unit = "env_step"
    batch_size_is_hyperparameter = True

    def __init__(self, config: DQNConfig, data: FeatureTensors, context: ExecutionContext) -> None:
        self.config = config
        self.context = context
        self.batch_size = context.batch_size
        self._data = data
        self._evaluation: GreedyEvaluation | None = None
        device = context.device
        self.env = TradingEnv(
            config.env, data, config.env.num_envs, context.generator, compile_fn=context.compile_step_piece
        )
        self.q_network = QNetwork(self.env.observation_size, config.hidden_sizes).to(device)
        self.target_network = copy.deepcopy(self.q_network).requires_grad_(False)
        # DDP-wrapped for training; acting and the argmax use the plain network.
        self._trained_q = context.parallel(self.q_network)
        self._parameters = list(self.q_network.parameters())
        # Fused and `capturable`, so it can run inside a CUDA graph capture.
        self.optimizer = torch.optim.Adam(
            self._parameters, lr=config.learning_rate, fused=True, capturable=context.captures_steps
        )
        self.replay: ReplayBuffer | IndexReplayBuffer = (
            IndexReplayBuffer(config.buffer_size, self.env, device)
            if config.replay_storage == "indices"
            else ReplayBuffer(config.buffer_size, self.env.observation_size, device)
        )
        self.observation = self.env.reset()
        # ε = 1 while prefilling.
        self._epsilon = torch.ones((), device=device)
        self._select_actions = context.compile_step_piece(self._select_actions_impl)
        self._td_loss = context.compile_step_piece(self._td_loss_impl)
        self.env_steps = 0
        self.gradient_steps_done = 0
        for _ in range(math.ceil(config.learning_starts / self.env.num_envs)):
            self.collect()
            self.env_steps += self.env.num_envs
        self._epsilon.fill_(self.epsilon)
        #: The largest |discounted return| any policy can reach: an accurate Q-value lies within ± this.
        self.return_bound = self.env.discounted_return_bound(config.gamma)
        largest_td_error = 2.0 * self.return_bound
        self.td_loss_ceiling = 0.5 * largest_td_error**2 if largest_td_error <= 1.0 else largest_td_error - 0.5
        self._run_step = (
            CudaGraphStep(self._run_step_impl, context.generator) if context.captures_steps else self._run_step_impl
        )

    @property
    def samples_per_step(self) -> float:
        return float(self.env.num_envs * self.config.train_freq)

    @property
    def epsilon(self) -> float:
        """Exploration rate the next step uses, from the schedule over environment transitions."""
        config = self.config
        return linear_schedule(
            config.exploration_initial, config.exploration_final, config.exploration_steps, self.env_steps
        )

    @property
    def updates_per_step(self) -> float:
        return float(self.config.gradient_steps)

    @property
    def eval_samples_per_call(self) -> float:
        return float(self.env.num_envs)

    def evaluate(self) -> torch.Tensor:
        """One greedy step (ε = 0) in every evaluation environment; the mean reward."""
        if self._evaluation is None:
            self._evaluation = GreedyEvaluation(self.config.env, self._data, self.env.num_envs, self.context.seed)
        return self._evaluation.step(lambda observation: self.q_network(observation).argmax(dim=1))

    def modules(self) -> list[nn.Module]:
        return [self.q_network]

    def describe(self) -> dict[str, object]:
        return {
            **super().describe(),
            "num_envs": self.env.num_envs,
            "observation_size": self.env.observation_size,
            "replay_capacity": self.replay.capacity,
            "replay_storage": self.config.replay_storage,
            "replay_buffer_mb": self.replay.nbytes / 2**20,
            "replay_batch_size": self.batch_size,
            "gradient_steps_per_step": self.config.gradient_steps,
            "double_dqn": self.config.double_dqn,
            "execution": self.context.execution_label(),
        }

    def train_step(self) -> StepResult:
        loss, grad_norm, q_abs_max = self._run_step()
        self.env_steps += self.env.num_envs * self.config.train_freq
        before = self.gradient_steps_done
        self.gradient_steps_done += self.config.gradient_steps
        interval = self.config.target_update_interval
        if self.gradient_steps_done // interval > before // interval:
            update_target(self.target_network, self.q_network, self.config.tau)
        # A fill with a host scalar: queued like any kernel, no sync; a captured graph reads the new value.
        self._epsilon.fill_(self.epsilon)
        # Q-values against the return bound catch divergence the TD loss misses.
        signals = RLSignals(
            critic_loss=loss,
            critic_loss_name="TD loss",
            critic_loss_ceiling=self.td_loss_ceiling,
            value_abs_max=q_abs_max,
            return_bound=self.return_bound,
        )
        return StepResult(loss=loss, grad_norm=grad_norm, rl=signals)

    def _run_step_impl(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        for _ in range(self.config.train_freq):
            self.collect()
        for _ in range(self.config.gradient_steps):
            loss, grad_norm, q_taken = self.gradient_step()
        # The last gradient step's only: one kernel a step.
        return loss, grad_norm, torch.linalg.vector_norm(q_taken, ord=math.inf)

    def gradient_step(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One gradient step; the loss, pre-clip gradient norm and taken actions' Q-values (detached)."""
        indices = self.replay.sample_indices(self.batch_size, self.context.generator)
        with self.context.autocast():
            loss, q_taken = self._td_loss(indices)
        grad_norm = self.context.optimize(loss, self.optimizer, self._parameters, self.config.max_grad_norm)
        return loss.detach(), grad_norm, q_taken.detach()

    def collect(self) -> None:
        """One ε-greedy action per environment, one environment step, its transitions into the buffer."""
        explore_draw = torch.rand(self.env.num_envs, generator=self.context.generator, device=self.context.device)
        random_actions = torch.randint(
            0, NUM_ACTIONS, (self.env.num_envs,), generator=self.context.generator, device=self.context.device
        )
        actions = self._select_actions(self.observation, self._epsilon, explore_draw, random_actions)
        if isinstance(self.replay, IndexReplayBuffer):
            # The state the actions were chosen in, copied before the step overwrites it in place.
            states = torch.stack([self.env.bar_index, self.env.position])
            step = self.env.step(actions)
            self.replay.add_states(states, actions, step.reward, step.terminated)
        else:
            step = self.env.step(actions)
            self.replay.add(self.observation, actions, step.reward, step.final_observation, step.terminated)
        self.observation.copy_(step.observation)

    def _select_actions_impl(
        self, observation: torch.Tensor, epsilon: torch.Tensor, explore_draw: torch.Tensor, random_actions: torch.Tensor
    ) -> torch.Tensor:
        # Random numbers come in as tensors: torch.compile cannot trace a call that takes a torch.Generator.
        with torch.no_grad(), self.context.autocast():
            greedy = self.q_network(observation).argmax(dim=1)
        return torch.where(explore_draw < epsilon, random_actions, greedy)

    def _td_loss_impl(self, indices: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The Huber TD loss of the minibatch in replay slots ``indices``, and the Q-values of its taken actions."""
        batch = self.replay.batch(indices)
        q_taken = self._trained_q(batch.observations).gather(1, batch.actions.unsqueeze(1)).squeeze(1)
        with torch.no_grad():
            next_q_online = self.q_network(batch.next_observations)
            next_q_target = self.target_network(batch.next_observations)
        targets = dqn_targets(
            batch.rewards, batch.terminated, next_q_online, next_q_target, self.config.gamma, self.config.double_dqn
        )
        return huber_loss(q_taken.float(), targets), q_taken
