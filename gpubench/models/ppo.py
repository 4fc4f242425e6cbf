"""PPO with the clipped surrogate objective (Schulman et al. 2017) and GAE (Schulman et al. 2016), on the
vectorised trading environment.

One iteration collects a rollout of ``num_envs × num_steps`` environment steps with the current policy, computes
GAE advantages, then makes ``update_epochs × num_minibatches`` minibatch updates over it (a fresh shuffle each
epoch). One workload step is **one minibatch update**; the rollout is collected by the first step of each
iteration, so its time is counted in the iteration it feeds, and ``samples_per_step`` is
``num_envs × num_steps / (update_epochs × num_minibatches)`` environment steps.

Batch size: ``context.batch_size`` is the minibatch size. The rollout is ``batch_size × num_minibatches``
environment steps, so the number of parallel environments is ``batch_size × num_minibatches / num_steps``
(rounded down, at least 1; ``describe()`` reports the minibatch actually used). A larger batch therefore means more
environments in parallel, with the horizon, epochs and minibatch count unchanged — how a GPU-resident PPO scales.

Training details (as in the paper and its reference implementation):

* separate actor and critic MLPs (``hidden_sizes``, Tanh), orthogonal initialisation with gain √2, 0.01 for the
  policy head (a near-uniform initial policy) and 1 for the value head, zero biases;
* actions sampled from the softmax policy by the Gumbel-max trick, with the workload's generator on the device;
* truncated episodes (time limit) are bootstrapped by adding ``γ V(final observation)`` to the last reward, and
  every episode end (terminated or truncated) stops GAE from bootstrapping into the next, reset, episode;
* advantages normalised per minibatch; clipped surrogate; optionally clipped value loss; entropy bonus;
  gradient-norm clipping; one Adam (ε = 1e-5) over both networks, its learning rate annealed linearly to 0 over
  ``total_timesteps``.

Execution modes (``execution.compile``): ``false`` eager; ``true`` compiles the policy step, the environment
transition and the minibatch loss with ``torch.compile``; ``reduce-overhead`` on CUDA also captures the rollout
(with GAE and the shuffles) and the minibatch update as two CUDA graphs. On the CPU ``reduce-overhead`` is ``true``.
"""

import math
from dataclasses import dataclass, replace

import torch
from torch import nn

from gpubench.config import PPOConfig
from gpubench.data.tensors import FeatureTensors
from gpubench.errors import ConfigError
from gpubench.models.trading_env import (
    NUM_ACTIONS,
    CudaGraphStep,
    TradingEnv,
    compile_piece,
    execution_label,
    uses_cuda_graph,
)
from gpubench.workload import ExecutionContext, StepResult, Workload


def compute_gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    dones: torch.Tensor,
    next_value: torch.Tensor,
    gamma: float,
    lam: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimates and returns for a rollout, vectorised over environments.

    Args:
        rewards, values, dones: ``(num_steps, num_envs)``; ``dones[t] = 1`` when the episode ended at step ``t``,
            so nothing is bootstrapped past it.
        next_value: ``(num_envs,)`` value of the state after the last step.
        gamma: discount factor; lam: GAE λ (0: one-step TD error, 1: Monte-Carlo return minus the value).

    Returns:
        ``(advantages, returns)``, both ``(num_steps, num_envs)``, with ``returns = advantages + values``.
    """
    not_done = 1.0 - dones.to(rewards.dtype)
    advantages = torch.empty_like(rewards)
    running = torch.zeros_like(next_value)
    following_value = next_value
    # A loop over time only (num_steps iterations), each a vector operation over all environments.
    for t in reversed(range(rewards.shape[0])):
        td_error = rewards[t] + gamma * following_value * not_done[t] - values[t]
        running = td_error + gamma * lam * not_done[t] * running
        advantages[t] = running
        following_value = values[t]
    return advantages, advantages + values


def clipped_surrogate_loss(
    new_logprob: torch.Tensor, old_logprob: torch.Tensor, advantages: torch.Tensor, clip_coef: float
) -> torch.Tensor:
    """PPO's policy loss ``−mean(min(ρ A, clip(ρ, 1 − ε, 1 + ε) A))`` with ``ρ = exp(new − old)``.

    Its gradient is zero for samples whose ratio is already past the clip in the advantage's direction.
    """
    ratio = torch.exp(new_logprob - old_logprob)
    unclipped = ratio * advantages
    clipped = torch.clamp(ratio, 1.0 - clip_coef, 1.0 + clip_coef) * advantages
    return -torch.min(unclipped, clipped).mean()


@dataclass(frozen=True)
class PPOLosses:
    """One minibatch's loss and diagnostics, as 0-d device tensors (``total`` carries the gradient).

    ``approx_kl`` is the estimator ``mean((ρ − 1) − log ρ)`` of KL(old ‖ new) (zero exactly when every ratio is 1);
    ``clip_fraction`` the share of samples whose ratio lies outside ``1 ± clip_coef``.
    """

    total: torch.Tensor
    policy: torch.Tensor
    value: torch.Tensor
    entropy: torch.Tensor
    approx_kl: torch.Tensor
    clip_fraction: torch.Tensor


@dataclass(frozen=True)
class Rollout:
    """Rollout storage, ``(num_steps, num_envs, ...)``, preallocated on the device and rewritten every iteration.

    ``rewards`` include the truncation bootstrap; ``dones`` are 1.0 where an episode ended (either way);
    ``minibatch_order`` ``(update_epochs, num_steps × num_envs)`` holds each epoch's shuffle of the flattened rollout.
    """

    observations: torch.Tensor
    actions: torch.Tensor
    logprobs: torch.Tensor
    values: torch.Tensor
    rewards: torch.Tensor
    dones: torch.Tensor
    advantages: torch.Tensor
    returns: torch.Tensor
    minibatch_order: torch.Tensor

    @classmethod
    def allocate(
        cls, num_steps: int, num_envs: int, observation_size: int, update_epochs: int, device: torch.device
    ) -> "Rollout":
        def zeros(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
            return torch.zeros(*shape, dtype=dtype, device=device)

        return cls(
            observations=zeros(num_steps, num_envs, observation_size),
            actions=zeros(num_steps, num_envs, dtype=torch.int64),
            logprobs=zeros(num_steps, num_envs),
            values=zeros(num_steps, num_envs),
            rewards=zeros(num_steps, num_envs),
            dones=zeros(num_steps, num_envs),
            advantages=zeros(num_steps, num_envs),
            returns=zeros(num_steps, num_envs),
            minibatch_order=zeros(update_epochs, num_steps * num_envs, dtype=torch.int64),
        )


def _layer(in_features: int, out_features: int, gain: float) -> nn.Linear:
    layer = nn.Linear(in_features, out_features)
    nn.init.orthogonal_(layer.weight, gain)
    nn.init.zeros_(layer.bias)
    return layer


def _tanh_mlp(in_features: int, hidden_sizes: list[int], out_features: int, head_gain: float) -> nn.Sequential:
    layers: list[nn.Module] = []
    width = in_features
    for hidden in hidden_sizes:
        layers += [_layer(width, hidden, math.sqrt(2.0)), nn.Tanh()]
        width = hidden
    layers.append(_layer(width, out_features, head_gain))
    return nn.Sequential(*layers)


class ActorCritic(nn.Module):
    """Separate policy and value MLPs over the same observation."""

    def __init__(self, observation_size: int, hidden_sizes: list[int], num_actions: int = NUM_ACTIONS) -> None:
        super().__init__()
        self.actor = _tanh_mlp(observation_size, hidden_sizes, num_actions, head_gain=0.01)
        self.critic = _tanh_mlp(observation_size, hidden_sizes, 1, head_gain=1.0)

    def value(self, observation: torch.Tensor) -> torch.Tensor:
        """State values ``(n,)``."""
        return self.critic(observation).squeeze(-1)

    def log_policy(self, observation: torch.Tensor) -> torch.Tensor:
        """Log-probabilities of every action ``(n, num_actions)``."""
        return torch.log_softmax(self.actor(observation), dim=-1)


def ppo_loss(
    agent: ActorCritic,
    observations: torch.Tensor,
    actions: torch.Tensor,
    old_logprobs: torch.Tensor,
    old_values: torch.Tensor,
    advantages: torch.Tensor,
    returns: torch.Tensor,
    config: PPOConfig,
) -> PPOLosses:
    """PPO loss on one minibatch: clipped surrogate − ``ent_coef`` × entropy + ``vf_coef`` × value loss."""
    log_policy = agent.log_policy(observations)
    new_logprobs = log_policy.gather(1, actions.unsqueeze(1)).squeeze(1).float()
    entropy = -(log_policy.exp() * log_policy).sum(dim=1).float().mean()
    normalised = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
    policy_loss = clipped_surrogate_loss(new_logprobs, old_logprobs, normalised, config.clip_coef)
    new_values = agent.value(observations).float()
    if config.clip_value_loss:
        clipped_values = old_values + torch.clamp(new_values - old_values, -config.clip_coef, config.clip_coef)
        value_loss = 0.5 * torch.max((new_values - returns) ** 2, (clipped_values - returns) ** 2).mean()
    else:
        value_loss = 0.5 * ((new_values - returns) ** 2).mean()
    total = policy_loss - config.ent_coef * entropy + config.vf_coef * value_loss
    with torch.no_grad():
        log_ratio = new_logprobs - old_logprobs
        ratio = log_ratio.exp()
        approx_kl = ((ratio - 1.0) - log_ratio).mean()
        clip_fraction = ((ratio - 1.0).abs() > config.clip_coef).float().mean()
    return PPOLosses(
        total=total,
        policy=policy_loss.detach(),
        value=value_loss.detach(),
        entropy=entropy.detach(),
        approx_kl=approx_kl,
        clip_fraction=clip_fraction,
    )


class PPOWorkload(Workload):
    """PPO on the trading environment; one step = one minibatch update (plus the rollout, once per iteration)."""

    name = "ppo"
    sample_unit = "env_step"

    def __init__(self, config: PPOConfig, data: FeatureTensors, context: ExecutionContext) -> None:
        self.config = config
        self.context = context
        num_envs = max(1, context.batch_size * config.num_minibatches // config.num_steps)
        self.rollout_size = num_envs * config.num_steps
        if self.rollout_size % config.num_minibatches != 0:
            raise ConfigError(
                f"`workloads.ppo.num_minibatches` = {config.num_minibatches} does not divide the rollout of "
                f"{num_envs} envs × {config.num_steps} steps that batch size {context.batch_size} implies."
            )
        self.minibatch_size = self.rollout_size // config.num_minibatches
        self.updates_per_iteration = config.update_epochs * config.num_minibatches
        self.num_iterations = max(1, config.total_timesteps // self.rollout_size)
        device = context.device
        self.env = TradingEnv(
            config.env, data, num_envs, context.generator, compile_fn=lambda fn: compile_piece(context, fn)
        )
        self.agent = ActorCritic(self.env.observation_size, config.hidden_sizes).to(device)
        # Fused Adam (one kernel for all parameters) with the learning rate as a device tensor: annealing rewrites
        # it in place, which a captured CUDA graph then reads. `capturable` admits it into a capture.
        self.optimizer = torch.optim.Adam(
            self.agent.parameters(),
            lr=torch.tensor(config.learning_rate, device=device),
            eps=1e-5,
            fused=True,
            capturable=uses_cuda_graph(context),
        )
        self.rollout = Rollout.allocate(
            config.num_steps, num_envs, self.env.observation_size, config.update_epochs, device
        )
        self.observation = self.env.reset()
        self._minibatch_indices = torch.zeros(self.minibatch_size, dtype=torch.int64, device=device)
        self._act = compile_piece(context, self._act_impl)
        self._bootstrap_truncated = compile_piece(context, self._bootstrap_truncated_impl)
        self._minibatch_loss = compile_piece(context, self._minibatch_loss_impl)
        graphs = uses_cuda_graph(context)
        self._collect = CudaGraphStep(self._collect_impl, context.generator) if graphs else self._collect_impl
        self._update = CudaGraphStep(self._update_impl, context.generator) if graphs else self._update_impl
        #: Rollouts collected so far (iterations started).
        self.iteration = 0
        #: Minibatch updates so far.
        self.updates_done = 0
        #: Loss and diagnostics of the latest minibatch update (overwritten by the next one).
        self.last_losses: PPOLosses | None = None

    @property
    def samples_per_step(self) -> float:
        return self.rollout_size / self.updates_per_iteration

    def modules(self) -> list[nn.Module]:
        return [self.agent]

    def describe(self) -> dict[str, object]:
        return {
            **super().describe(),
            "num_envs": self.env.num_envs,
            "num_steps": self.config.num_steps,
            "rollout_size": self.rollout_size,
            "minibatch_size": self.minibatch_size,
            "updates_per_iteration": self.updates_per_iteration,
            "observation_size": self.env.observation_size,
            "execution": execution_label(self.context),
        }

    def train_step(self) -> StepResult:
        position = self.updates_done % self.updates_per_iteration
        if position == 0:
            if self.config.anneal_lr:
                fraction_left = max(0.0, 1.0 - self.iteration / self.num_iterations)
                self.optimizer.param_groups[0]["lr"].fill_(fraction_left * self.config.learning_rate)
            self._collect()
            self.iteration += 1
        epoch, minibatch = divmod(position, self.config.num_minibatches)
        first = minibatch * self.minibatch_size
        self._minibatch_indices.copy_(self.rollout.minibatch_order[epoch, first : first + self.minibatch_size])
        loss, grad_norm = self._update()
        self.updates_done += 1
        return StepResult(loss=loss, grad_norm=grad_norm)

    def _collect_impl(self) -> tuple[torch.Tensor, ...]:
        """Roll the policy out for ``num_steps``, then compute advantages and this iteration's shuffles."""
        rollout, generator, device = self.rollout, self.context.generator, self.context.device
        for t in range(self.config.num_steps):
            rollout.observations[t].copy_(self.observation)
            gumbel_draw = torch.rand(self.env.num_envs, NUM_ACTIONS, generator=generator, device=device)
            action, logprob, value = self._act(self.observation, gumbel_draw)
            step = self.env.step(action)
            rollout.actions[t].copy_(action)
            rollout.logprobs[t].copy_(logprob)
            rollout.values[t].copy_(value)
            rollout.rewards[t].copy_(self._bootstrap_truncated(step.reward, step.final_observation, step.truncated))
            rollout.dones[t].copy_(step.terminated | step.truncated)
            self.observation.copy_(step.observation)
        with torch.no_grad(), self.context.autocast():
            next_value = self.agent.value(self.observation).float()
        advantages, returns = compute_gae(
            rollout.rewards, rollout.values, rollout.dones, next_value, self.config.gamma, self.config.gae_lambda
        )
        rollout.advantages.copy_(advantages)
        rollout.returns.copy_(returns)
        # Sorting uniform draws gives a random permutation per epoch, in one vectorised call.
        shuffle_keys = torch.rand(self.config.update_epochs, self.rollout_size, generator=generator, device=device)
        rollout.minibatch_order.copy_(shuffle_keys.argsort(dim=1))
        return ()

    def _act_impl(
        self, observation: torch.Tensor, gumbel_draw: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        # Gumbel-max: argmax(log π + Gumbel noise) is a draw from π. The uniform draws come in as a tensor because
        # torch.compile cannot trace a call that takes a torch.Generator; the sampling never leaves the device.
        with torch.no_grad(), self.context.autocast():
            log_policy = self.agent.log_policy(observation).float()
            value = self.agent.value(observation).float()
        action = (log_policy - torch.log(-torch.log(gumbel_draw))).argmax(dim=1)
        logprob = log_policy.gather(1, action.unsqueeze(1)).squeeze(1)
        return action, logprob, value

    def _bootstrap_truncated_impl(
        self, reward: torch.Tensor, final_observation: torch.Tensor, truncated: torch.Tensor
    ) -> torch.Tensor:
        # A time limit is not part of the task: the value of the state it cut off is still owed (Pardo et al. 2018).
        with torch.no_grad(), self.context.autocast():
            final_value = self.agent.value(final_observation).float()
        return reward + self.config.gamma * final_value * truncated

    def _update_impl(self) -> tuple[torch.Tensor, torch.Tensor]:
        with self.context.autocast():
            losses = self._minibatch_loss(self._minibatch_indices)
        grad_norm = self.context.optimize(
            losses.total, self.optimizer, self.agent.parameters(), self.config.max_grad_norm
        )
        # Under a CUDA graph this assignment runs once, at capture; the tensors it keeps are the graph's outputs,
        # which every replay overwrites, so it still names the latest update's figures.
        self.last_losses = replace(losses, total=losses.total.detach())
        return self.last_losses.total, grad_norm

    def _minibatch_loss_impl(self, indices: torch.Tensor) -> PPOLosses:
        rollout = self.rollout
        return ppo_loss(
            self.agent,
            rollout.observations.flatten(0, 1)[indices],
            rollout.actions.flatten()[indices],
            rollout.logprobs.flatten()[indices],
            rollout.values.flatten()[indices],
            rollout.advantages.flatten()[indices],
            rollout.returns.flatten()[indices],
            self.config,
        )
