"""DQN (Mnih et al. 2015) with Double DQN targets (van Hasselt et al. 2016), on the vectorised trading environment.

One workload step is one training iteration: ``train_freq`` vectorised environment steps (each one action per
environment, ε-greedy from the online Q-network, stored in the replay buffer) followed by ``gradient_steps``
gradient steps on replay minibatches of ``context.batch_size`` transitions. With the defaults (``train_freq`` 1,
``gradient_steps`` 1) a step is one env step across all environments plus one gradient step, so
``samples_per_step`` is ``num_envs × train_freq`` environment steps.

Training details:

* Q-network: MLP (``hidden_sizes``, ReLU) from the observation to one value per action.
* Replay buffer: preallocated circular tensors on the device. Each transition stores the observation the step
  reached *before* any auto-reset (``EnvStep.final_observation``) and whether the episode terminated: targets
  bootstrap through truncated episodes (a time limit) but not through terminated ones (the data ran out).
* Target: ``r + γ (1 − terminated) Q_target(s', a*)`` with ``a*`` the online network's argmax (Double DQN) or the
  target network's own (``double_dqn: false``). Huber loss (δ = 1), gradient-norm clipping, Adam.
* Target network: every ``target_update_interval`` gradient steps, ``θ⁻ ← τ θ + (1 − τ) θ⁻`` (τ = 1: a hard copy).
  When one workload step makes several gradient steps, the update is applied after the step's last one.
* Exploration: ε falls linearly from ``exploration_initial`` to ``exploration_final`` over ``exploration_steps``
  environment transitions (summed over environments), then stays.

Benchmarking choice: the constructor fills the buffer with ``learning_starts`` transitions of the uniform random
policy (ε = 1, as at the start of training), so every timed step includes its gradient steps; those prefill
transitions count towards the ε schedule. Step counters are Python integers (deterministic), never read from the
device.

Execution modes (``execution.compile``): ``false`` runs eagerly; ``true`` compiles the action selection, the
environment transition and the TD loss with ``torch.compile``; ``reduce-overhead`` on CUDA does the same and
captures the whole step in one CUDA graph (:class:`~gpubench.models.trading_env.CudaGraphStep`), which this
launch-bound workload needs: hundreds of tiny kernels per step. On the CPU ``reduce-overhead`` is ``true``.
"""

import copy
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from gpubench.config import DQNConfig
from gpubench.data.tensors import FeatureTensors
from gpubench.models.trading_env import (
    NUM_ACTIONS,
    CudaGraphStep,
    TradingEnv,
    compile_piece,
    execution_label,
    uses_cuda_graph,
)
from gpubench.workload import ExecutionContext, StepResult, Workload


class QNetwork(nn.Module):
    """MLP from an observation ``(n, observation_size)`` to action values ``(n, num_actions)``."""

    def __init__(self, observation_size: int, hidden_sizes: list[int], num_actions: int = NUM_ACTIONS) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        width = observation_size
        for hidden in hidden_sizes:
            layers += [nn.Linear(width, hidden), nn.ReLU()]
            width = hidden
        layers.append(nn.Linear(width, num_actions))
        self.net = nn.Sequential(*layers)

    def forward(self, observation: torch.Tensor) -> torch.Tensor:
        return self.net(observation)


@dataclass(frozen=True)
class ReplayBatch:
    """A minibatch of transitions: observations ``(n, obs)``, actions ``(n,)`` int64, rewards ``(n,)``,
    next observations ``(n, obs)`` and terminated flags ``(n,)`` as 0.0 / 1.0."""

    observations: torch.Tensor
    actions: torch.Tensor
    rewards: torch.Tensor
    next_observations: torch.Tensor
    terminated: torch.Tensor


class ReplayBuffer:
    """Circular buffer of ``capacity`` transitions in preallocated tensors on ``device``.

    The write cursor and the fill level are device tensors, so adding and sampling never read the device from the
    host and a captured CUDA graph keeps advancing them on replay.
    """

    def __init__(self, capacity: int, observation_size: int, device: torch.device) -> None:
        self.capacity = capacity
        self.observations = torch.empty(capacity, observation_size, device=device)
        self.actions = torch.zeros(capacity, dtype=torch.int64, device=device)
        self.rewards = torch.zeros(capacity, device=device)
        self.next_observations = torch.empty(capacity, observation_size, device=device)
        self.terminated = torch.zeros(capacity, device=device)
        #: Slot the next transition goes to (0-d int64).
        self.cursor = torch.zeros((), dtype=torch.int64, device=device)
        #: Number of filled slots, at most ``capacity`` (0-d int64).
        self.size = torch.zeros((), dtype=torch.int64, device=device)

    def add(
        self,
        observations: torch.Tensor,
        actions: torch.Tensor,
        rewards: torch.Tensor,
        next_observations: torch.Tensor,
        terminated: torch.Tensor,
    ) -> None:
        """Write ``n`` transitions (``n <= capacity``) at the cursor, overwriting the oldest once full."""
        n = observations.shape[0]
        slots = (self.cursor + torch.arange(n, device=self.cursor.device)) % self.capacity
        self.observations.index_copy_(0, slots, observations)
        self.actions.index_copy_(0, slots, actions)
        self.rewards.index_copy_(0, slots, rewards)
        self.next_observations.index_copy_(0, slots, next_observations)
        self.terminated.index_copy_(0, slots, terminated.to(self.terminated.dtype))
        self.cursor.add_(n).remainder_(self.capacity)
        self.size.add_(n).clamp_(max=self.capacity)

    def sample_indices(self, batch_size: int, generator: torch.Generator) -> torch.Tensor:
        """``batch_size`` slots drawn uniformly with replacement from the filled ones (the buffer must not be empty)."""
        # A draw from a wide integer range reduced modulo the fill level keeps the bound on the device; the modulo
        # bias is size / 2**62, nil at any buffer size.
        wide = torch.randint(0, 2**62, (batch_size,), generator=generator, device=self.size.device)
        return wide % self.size

    def batch(self, indices: torch.Tensor) -> ReplayBatch:
        """The transitions in slots ``indices``."""
        return ReplayBatch(
            observations=self.observations[indices],
            actions=self.actions[indices],
            rewards=self.rewards[indices],
            next_observations=self.next_observations[indices],
            terminated=self.terminated[indices],
        )


def linear_schedule(start: float, end: float, duration: int, step: int) -> float:
    """Value at ``step`` of a ramp from ``start`` (step 0) to ``end`` (step ``duration`` and after)."""
    return start + (end - start) * min(step / duration, 1.0)


def huber_loss(prediction: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean Huber loss with δ = 1: ½e² for |e| ≤ 1, |e| − ½ beyond (Mnih et al. 2015's error clipping)."""
    return F.huber_loss(prediction, target, delta=1.0)


def dqn_targets(
    rewards: torch.Tensor,
    next_observations: torch.Tensor,
    terminated: torch.Tensor,
    q_network: nn.Module,
    target_network: nn.Module,
    gamma: float,
    double_dqn: bool,
) -> torch.Tensor:
    """TD targets ``r + γ (1 − terminated) Q_target(s', a*)``, without gradient.

    ``a*`` is ``argmax_a Q_online(s', a)`` for Double DQN (the online network chooses, the target network
    evaluates, which curbs the max operator's overestimation), else ``argmax_a Q_target(s', a)``.
    """
    with torch.no_grad():
        next_q_target = target_network(next_observations)
        if double_dqn:
            next_actions = q_network(next_observations).argmax(dim=1, keepdim=True)
        else:
            next_actions = next_q_target.argmax(dim=1, keepdim=True)
        next_values = next_q_target.gather(1, next_actions).squeeze(1).float()
        return rewards + gamma * (1.0 - terminated) * next_values


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

    def __init__(self, config: DQNConfig, data: FeatureTensors, context: ExecutionContext) -> None:
        self.config = config
        self.context = context
        self.batch_size = context.batch_size
        device = context.device
        self.env = TradingEnv(
            config.env,
            data,
            config.env.num_envs,
            context.generator,
            compile_fn=lambda fn: compile_piece(context, fn),
        )
        self.q_network = QNetwork(self.env.observation_size, config.hidden_sizes).to(device)
        self.target_network = copy.deepcopy(self.q_network).requires_grad_(False)
        # Fused Adam: one kernel for all parameters, its step count on the device. `capturable` admits it into a
        # CUDA graph capture.
        self.optimizer = torch.optim.Adam(
            self.q_network.parameters(),
            lr=config.learning_rate,
            fused=True,
            capturable=uses_cuda_graph(context),
        )
        self.replay = ReplayBuffer(config.buffer_size, self.env.observation_size, device)
        self.observation = self.env.reset()
        # ε = 1 while prefilling: the uniform random policy of the start of training.
        self._epsilon = torch.ones((), device=device)
        self._select_actions = compile_piece(context, self._select_actions_impl)
        self._td_loss = compile_piece(context, self._td_loss_impl)
        #: Environment transitions so far (all environments), which drive the ε schedule.
        self.env_steps = 0
        #: Gradient steps so far (the target-update clock).
        self.gradient_steps_done = 0
        for _ in range(math.ceil(config.learning_starts / self.env.num_envs)):
            self._collect()
            self.env_steps += self.env.num_envs
        self._epsilon.fill_(self.epsilon)
        self._run_step = (
            CudaGraphStep(self._run_step_impl, context.generator) if uses_cuda_graph(context) else self._run_step_impl
        )

    @property
    def samples_per_step(self) -> float:
        return float(self.env.num_envs * self.config.train_freq)

    @property
    def epsilon(self) -> float:
        """Exploration rate the next step uses, from the schedule over environment transitions."""
        return linear_schedule(
            self.config.exploration_initial,
            self.config.exploration_final,
            self.config.exploration_steps,
            self.env_steps,
        )

    def modules(self) -> list[nn.Module]:
        return [self.q_network]

    def describe(self) -> dict[str, object]:
        return {
            **super().describe(),
            "num_envs": self.env.num_envs,
            "observation_size": self.env.observation_size,
            "replay_capacity": self.replay.capacity,
            "replay_batch_size": self.batch_size,
            "gradient_steps_per_step": self.config.gradient_steps,
            "double_dqn": self.config.double_dqn,
            "execution": execution_label(self.context),
        }

    def train_step(self) -> StepResult:
        loss, grad_norm = self._run_step()
        self.env_steps += self.env.num_envs * self.config.train_freq
        before = self.gradient_steps_done
        self.gradient_steps_done += self.config.gradient_steps
        interval = self.config.target_update_interval
        if self.gradient_steps_done // interval > before // interval:
            update_target(self.target_network, self.q_network, self.config.tau)
        # A fill with a host scalar: queued like any kernel, no sync; a captured graph reads the new value.
        self._epsilon.fill_(self.epsilon)
        return StepResult(loss=loss, grad_norm=grad_norm)

    def _run_step_impl(self) -> tuple[torch.Tensor, torch.Tensor]:
        for _ in range(self.config.train_freq):
            self._collect()
        for _ in range(self.config.gradient_steps):
            indices = self.replay.sample_indices(self.batch_size, self.context.generator)
            with self.context.autocast():
                loss = self._td_loss(indices)
            grad_norm = self.context.optimize(
                loss, self.optimizer, self.q_network.parameters(), self.config.max_grad_norm
            )
        return loss.detach(), grad_norm

    def _collect(self) -> None:
        """One ε-greedy action per environment, one environment step, its transitions into the buffer."""
        explore_draw = torch.rand(self.env.num_envs, generator=self.context.generator, device=self.context.device)
        random_actions = torch.randint(
            0, NUM_ACTIONS, (self.env.num_envs,), generator=self.context.generator, device=self.context.device
        )
        actions = self._select_actions(self.observation, self._epsilon, explore_draw, random_actions)
        step = self.env.step(actions)
        self.replay.add(self.observation, actions, step.reward, step.final_observation, step.terminated)
        self.observation.copy_(step.observation)

    def _select_actions_impl(
        self,
        observation: torch.Tensor,
        epsilon: torch.Tensor,
        explore_draw: torch.Tensor,
        random_actions: torch.Tensor,
    ) -> torch.Tensor:
        # Random numbers come in as tensors: torch.compile cannot trace a call that takes a torch.Generator.
        with torch.no_grad(), self.context.autocast():
            greedy = self.q_network(observation).argmax(dim=1)
        return torch.where(explore_draw < epsilon, random_actions, greedy)

    def _td_loss_impl(self, indices: torch.Tensor) -> torch.Tensor:
        batch = self.replay.batch(indices)
        q_taken = self.q_network(batch.observations).gather(1, batch.actions.unsqueeze(1)).squeeze(1)
        targets = dqn_targets(
            batch.rewards,
            batch.next_observations,
            batch.terminated,
            self.q_network,
            self.target_network,
            self.config.gamma,
            self.config.double_dqn,
        )
        return huber_loss(q_taken.float(), targets)
