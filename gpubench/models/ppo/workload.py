"""PPO (Schulman et al. 2017) with GAE (Schulman et al. 2016) on the vectorised trading environment.

One step is one minibatch update; each iteration's first step also collects the rollout. A larger minibatch
(``context.batch_size``) runs more environments. Values and GAE are computed once over the rollout."""

import itertools
import math
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
from torch import nn

from gpubench.data.tensors import FeatureTensors
from gpubench.errors import ConfigError
from gpubench.models.ppo.config import PPOConfig
from gpubench.models.trading_env.env import NUM_ACTIONS, GreedyEvaluation, TradingEnv
from gpubench.workload import CudaGraphStep, ExecutionContext, RLSignals, StepResult, Workload


def compute_gae(
    rewards: torch.Tensor, values: torch.Tensor, dones: torch.Tensor, next_value: torch.Tensor, gamma: float, lam: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """GAE advantages and returns ``(num_steps, num_envs)`` from rewards, values and dones of that shape."""
    not_done = 1.0 - dones.to(rewards.dtype)
    following_values = torch.cat([values[1:], next_value.unsqueeze(0)])
    # A_t = δ_t + γλ (1 − d_t) A_{t+1} is linear: a Hillis-Steele scan takes ⌈log2 num_steps⌉ rounds, not num_steps.
    advantages = torch.addcmul(rewards - values, following_values, not_done, value=gamma)
    decay = (gamma * lam) * not_done
    num_steps = rewards.shape[0]
    span = 1
    while span < num_steps:
        advantages[:-span].add_(decay[:-span] * advantages[span:])
        if 2 * span < num_steps:
            decay[:-span] = decay[:-span] * decay[span:]
        span *= 2
    return advantages, advantages + values


def clipped_surrogate_loss(ratio: torch.Tensor, advantages: torch.Tensor, clip_coef: float) -> torch.Tensor:
    """PPO's policy loss ``−mean(min(ρ A, clip(ρ, 1 − ε, 1 + ε) A))`` for probability ratios ``ρ = π_new / π_old``."""
    unclipped = ratio * advantages
    clipped = torch.clamp(ratio, 1.0 - clip_coef, 1.0 + clip_coef) * advantages
    # torch.where, not torch.minimum: same values and gradients, a cheaper backward.
    return -torch.where(unclipped < clipped, unclipped, clipped).mean()


@dataclass(frozen=True)
class PPOLosses:
    """One minibatch's loss and diagnostics (``approx_kl``, ``clip_fraction``) as 0-d device tensors."""

    total: torch.Tensor
    policy: torch.Tensor
    value: torch.Tensor
    entropy: torch.Tensor
    approx_kl: torch.Tensor
    clip_fraction: torch.Tensor


@dataclass(frozen=True)
class Rollout:
    """Rollout storage ``(num_steps, num_envs, ...)`` on the device, packed so one forward serves each use."""

    observation_buffer: torch.Tensor
    logits: torch.Tensor
    actions: torch.Tensor
    rewards: torch.Tensor
    terminated: torch.Tensor
    truncated: torch.Tensor
    dones: torch.Tensor
    samples: torch.Tensor
    minibatch_order: torch.Tensor

    @classmethod
    def allocate(
        cls, num_steps: int, num_envs: int, observation_size: int, update_epochs: int, device: torch.device
    ) -> "Rollout":
        def zeros(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
            return torch.zeros(*shape, dtype=dtype, device=device)

        return cls(
            observation_buffer=zeros(2 * num_steps + 1, num_envs, observation_size),
            logits=zeros(num_steps, num_envs, NUM_ACTIONS),
            actions=zeros(num_steps, num_envs, dtype=torch.int64),
            rewards=zeros(num_steps, num_envs),
            terminated=zeros(num_steps, num_envs, dtype=torch.bool),
            truncated=zeros(num_steps, num_envs, dtype=torch.bool),
            dones=zeros(num_steps, num_envs),
            samples=zeros(num_steps, num_envs, 5),
            minibatch_order=zeros(update_epochs, num_steps * num_envs, dtype=torch.int64),
        )

    @property
    def num_steps(self) -> int:
        return self.actions.shape[0]

    @property
    def observations(self) -> torch.Tensor:
        return self.observation_buffer[: self.num_steps]

    @property
    def next_observation(self) -> torch.Tensor:
        return self.observation_buffer[self.num_steps]

    @property
    def final_observations(self) -> torch.Tensor:
        return self.observation_buffer[self.num_steps + 1 :]

    @property
    def logprobs(self) -> torch.Tensor:
        return self.samples[..., 1]

    @property
    def values(self) -> torch.Tensor:
        return self.samples[..., 2]

    @property
    def advantages(self) -> torch.Tensor:
        return self.samples[..., 3]

    @property
    def returns(self) -> torch.Tensor:
        return self.samples[..., 4]


def _layer(in_features: int, out_features: int, gain: float) -> nn.Linear:
    layer = nn.Linear(in_features, out_features)
    nn.init.orthogonal_(layer.weight, gain)
    nn.init.zeros_(layer.bias)
    return layer


class TanhMLP(nn.Module):
    """MLP with Tanh between layers, orthogonal weights (gain √2; ``head_gain`` for the last layer), zero biases."""

    def __init__(self, in_features: int, hidden_sizes: list[int], out_features: int, head_gain: float) -> None:
        super().__init__()
        widths = [in_features, *hidden_sizes]
        self.hidden = nn.ModuleList(_layer(a, b, math.sqrt(2.0)) for a, b in itertools.pairwise(widths))
        self.head = _layer(widths[-1], out_features, head_gain)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Called directly, not through __call__: a launch-bound step pays for the hook handling.
        for layer in self.hidden:
            x = torch.tanh(F.linear(x, layer.weight, layer.bias))
        return F.linear(x, self.head.weight, self.head.bias)


class ActorCritic(nn.Module):
    """Separate policy and value MLPs over the same observation."""

    def __init__(self, observation_size: int, hidden_sizes: list[int], num_actions: int = NUM_ACTIONS) -> None:
        super().__init__()
        self.actor = TanhMLP(observation_size, hidden_sizes, num_actions, head_gain=0.01)
        self.critic = TanhMLP(observation_size, hidden_sizes, 1, head_gain=1.0)

    def value(self, observation: torch.Tensor) -> torch.Tensor:
        """State values ``(n,)``."""
        return self.critic(observation).squeeze(-1)

    def log_policy(self, observation: torch.Tensor) -> torch.Tensor:
        """Log-probabilities of every action ``(n, num_actions)``."""
        return torch.log_softmax(self.actor(observation), dim=-1)

    def forward(self, observation: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(log_policy, value)`` in one call, so a DistributedDataParallel wrapper sees the whole forward."""
        return self.log_policy(observation), self.value(observation)


def ppo_loss(
    agent: nn.Module,
    observations: torch.Tensor,
    actions: torch.Tensor,
    old_logprobs: torch.Tensor,
    old_values: torch.Tensor,
    advantages: torch.Tensor,
    returns: torch.Tensor,
    config: PPOConfig,
) -> PPOLosses:
    """PPO loss on one minibatch: clipped surrogate − ``ent_coef`` × entropy + ``vf_coef`` × value loss."""
    log_policy, values = agent(observations)
    new_logprobs = log_policy.gather(1, actions.unsqueeze(1)).squeeze(1).float()
    entropy = -(log_policy.exp() * log_policy).sum(dim=1).float().mean()
    std, mean = torch.std_mean(advantages)
    normalised = (advantages - mean) / (std + 1e-8)
    log_ratio = new_logprobs - old_logprobs
    ratio = log_ratio.exp()
    policy_loss = clipped_surrogate_loss(ratio, normalised, config.clip_coef)
    new_values = values.float()
    if config.clip_value_loss:
        clipped_values = old_values + torch.clamp(new_values - old_values, -config.clip_coef, config.clip_coef)
        unclipped_error, clipped_error = (new_values - returns) ** 2, (clipped_values - returns) ** 2
        # torch.where, not torch.maximum, for a cheaper backward (they differ only on exact ties).
        value_loss = 0.5 * torch.where(unclipped_error > clipped_error, unclipped_error, clipped_error).mean()
    else:
        value_loss = 0.5 * ((new_values - returns) ** 2).mean()
    total = policy_loss.sub(entropy, alpha=config.ent_coef).add(value_loss, alpha=config.vf_coef)
    with torch.no_grad():
        ratio_change = ratio - 1.0
        approx_kl = (ratio_change - log_ratio).mean()
        clip_fraction = (ratio_change.abs() > config.clip_coef).float().mean()
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
    batch_size_is_hyperparameter = True

    def __init__(self, config: PPOConfig, data: FeatureTensors, context: ExecutionContext) -> None:
        self.config = config
        self.context = context
        self._data = data
        self._evaluation: GreedyEvaluation | None = None
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
        self.env = TradingEnv(config.env, data, num_envs, context.generator, compile_fn=context.compile_step_piece)
        self.agent = ActorCritic(self.env.observation_size, config.hidden_sizes).to(device)
        # DDP-wrapped for the minibatch loss; the rollout uses the plain agent.
        self._trained_agent = context.parallel(self.agent)
        self._parameters = list(self.agent.parameters())
        # The learning rate is a device tensor that annealing rewrites in place, so a captured CUDA graph reads it.
        self.optimizer = torch.optim.Adam(
            self._parameters,
            lr=torch.tensor(config.learning_rate, device=device),
            eps=1e-5,
            fused=True,
            capturable=context.captures_steps,
        )
        self.rollout = Rollout.allocate(
            config.num_steps, num_envs, self.env.observation_size, config.update_epochs, device
        )
        self.rollout.next_observation.copy_(self.env.reset())
        # Views made once, so a captured CUDA graph reads fixed tensors.
        self._minibatch_slices = [order.split(self.minibatch_size) for order in self.rollout.minibatch_order.unbind(0)]
        self._minibatch_indices = torch.zeros(self.minibatch_size, dtype=torch.int64, device=device)
        self._policy_step = context.compile_step_piece(self._policy_step_impl)
        self._finish_rollout = context.compile_step_piece(self._finish_rollout_impl)
        self._minibatch_loss = context.compile_step_piece(self._minibatch_loss_impl)
        graphs = context.captures_steps
        self._collect = CudaGraphStep(self._collect_impl, context.generator) if graphs else self._collect_impl
        self._update = CudaGraphStep(self._update_impl, context.generator) if graphs else self._update_impl
        self.iteration = 0
        self.updates_done = 0
        #: Loss and diagnostics of the latest minibatch update.
        self.last_losses: PPOLosses | None = None
        # A sane critic errs by at most twice the return bound B: 0.5 (2 B)².
        self.value_loss_ceiling = 2.0 * self.env.discounted_return_bound(config.gamma) ** 2

    @property
    def observation(self) -> torch.Tensor:
        """``(num_envs, observation_size)``: what the next rollout acts on first."""
        return self.rollout.next_observation

    @property
    def samples_per_step(self) -> float:
        return self.rollout_size / self.updates_per_iteration

    @property
    def steps_per_iteration(self) -> int:
        """``update_epochs × num_minibatches``: one rollout and its minibatch updates."""
        return self.updates_per_iteration

    @property
    def steps_into_iteration(self) -> int:
        """Minibatch updates made from the current rollout (0 when the next step collects a new one)."""
        return self.updates_done % self.updates_per_iteration

    @property
    def eval_samples_per_call(self) -> float:
        return float(self.env.num_envs)

    def evaluate(self) -> torch.Tensor:
        """One greedy step in every evaluation environment; the mean reward."""
        if self._evaluation is None:
            self._evaluation = GreedyEvaluation(self.config.env, self._data, self.env.num_envs, self.context.seed)
        return self._evaluation.step(lambda observation: self.agent.log_policy(observation).argmax(dim=1))

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
            "execution": self.context.execution_label(),
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
        self._minibatch_indices.copy_(self._minibatch_slices[epoch][minibatch])
        outputs = self._update()
        self.updates_done += 1
        figures = outputs[0].unbind(0) if len(outputs) == 1 else outputs
        loss, grad_norm, value_loss, approx_kl, clip_fraction = figures
        signals = RLSignals(
            critic_loss=value_loss,
            critic_loss_name="value loss",
            critic_loss_ceiling=self.value_loss_ceiling,
            approx_kl=approx_kl,
            clip_fraction=clip_fraction,
        )
        return StepResult(loss=loss, grad_norm=grad_norm, rl=signals)

    def _collect_impl(self) -> tuple[torch.Tensor, ...]:
        """Roll the policy out for ``num_steps``, then compute values, advantages and this iteration's shuffles."""
        rollout, generator, device = self.rollout, self.context.generator, self.context.device
        num_steps, num_envs = self.config.num_steps, self.env.num_envs
        rollout.observations[0].copy_(rollout.next_observation)
        # Gumbel-max: argmax(logits + noise) samples the softmax policy on the device.
        uniform = torch.rand(num_steps, num_envs, NUM_ACTIONS, generator=generator, device=device)
        gumbel_noise = -torch.log(-torch.log(uniform))
        observation = rollout.observations[0]
        logits_steps, action_steps, env_steps = [], [], []
        for noise in gumbel_noise.unbind(0):
            logits, action = self._policy_step(observation, noise)
            step = self.env.step(action)
            logits_steps.append(logits)
            action_steps.append(action)
            env_steps.append(step)
            observation = step.observation
        torch.stack(logits_steps, out=rollout.logits)
        torch.stack(action_steps, out=rollout.actions)
        torch.stack([step.reward for step in env_steps], out=rollout.rewards)
        torch.stack([step.terminated for step in env_steps], out=rollout.terminated)
        torch.stack([step.truncated for step in env_steps], out=rollout.truncated)
        torch.stack([step.observation for step in env_steps], out=rollout.observation_buffer[1 : num_steps + 1])
        torch.stack([step.final_observation for step in env_steps], out=rollout.final_observations)
        self._finish_rollout()
        shuffle_keys = torch.rand(self.config.update_epochs, self.rollout_size, generator=generator, device=device)
        rollout.minibatch_order.copy_(shuffle_keys.argsort(dim=1))
        return ()

    def _policy_step_impl(
        self, observation: torch.Tensor, gumbel_noise: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        # Noise comes in as a tensor: torch.compile cannot trace a torch.Generator.
        with torch.no_grad(), self.context.autocast():
            logits = self.agent.actor(observation)
        return logits, (logits.float() + gumbel_noise).argmax(dim=1)

    def _finish_rollout_impl(self) -> None:
        """Everything the rollout's loop left for afterwards, over all its steps at once."""
        rollout, config = self.rollout, self.config
        num_steps = config.num_steps
        with torch.no_grad(), self.context.autocast():
            critic_values = self.agent.value(rollout.observation_buffer.flatten(0, 1)).float()
        critic_values = critic_values.unflatten(0, rollout.observation_buffer.shape[:2])
        values, next_value = critic_values[:num_steps], critic_values[num_steps]
        # A time limit is not part of the task: the value of the state it cut off is still owed (Pardo et al. 2018).
        rollout.rewards.addcmul_(critic_values[num_steps + 1 :], rollout.truncated, value=config.gamma)
        rollout.dones.copy_(rollout.terminated | rollout.truncated)
        advantages, returns = compute_gae(
            rollout.rewards, values, rollout.dones, next_value, config.gamma, config.gae_lambda
        )
        log_policy = torch.log_softmax(rollout.logits, dim=-1)
        logprobs = log_policy.gather(2, rollout.actions.unsqueeze(2)).squeeze(2)
        rollout.samples.copy_(torch.stack([rollout.actions, logprobs, values, advantages, returns], dim=2))

    def _update_impl(self) -> tuple[torch.Tensor, ...]:
        """One minibatch update; its loss, gradient norm, value loss, KL and clip fraction (0-d tensors)."""
        with self.context.autocast():
            losses = self._minibatch_loss(self._minibatch_indices)
        grad_norm = self.context.optimize(losses.total, self.optimizer, self._parameters, self.config.max_grad_norm)
        # Under a CUDA graph this runs once, at capture; replays overwrite the tensors it keeps.
        self.last_losses = replace(losses, total=losses.total.detach())
        figures = (self.last_losses.total, grad_norm, losses.value, losses.approx_kl, losses.clip_fraction)
        # A replayed graph clones each output: one stacked output costs one clone.
        if self.context.captures_steps:
            return (torch.stack([figure.float() for figure in figures]),)
        return figures

    def _minibatch_loss_impl(self, indices: torch.Tensor) -> PPOLosses:
        rollout = self.rollout
        samples = rollout.samples.flatten(0, 1)[indices]
        return ppo_loss(
            self._trained_agent,
            rollout.observations.flatten(0, 1)[indices],
            samples[:, 0].long(),
            samples[:, 1],
            samples[:, 2],
            samples[:, 3],
            samples[:, 4],
            self.config,
        )
