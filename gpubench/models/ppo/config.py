"""The ``workloads.ppo`` keys."""

from dataclasses import dataclass, field

from gpubench.errors import require, require_positive, require_positive_fields, require_probability
from gpubench.models.trading_env.config import TradingEnvConfig


@dataclass
class PPOConfig:
    """PPO (Schulman et al. 2017); the batch size is the minibatch, and ``env.num_envs`` follows from it."""

    env: TradingEnvConfig = field(default_factory=TradingEnvConfig)
    num_steps: int = 32
    update_epochs: int = 10
    num_minibatches: int = 32
    hidden_sizes: list[int] = field(default_factory=lambda: [256, 256])
    learning_rate: float = 2.5e-4
    anneal_lr: bool = True
    total_timesteps: int = 10_000_000
    gamma: float = 0.99
    gae_lambda: float = 0.95
    clip_coef: float = 0.2
    clip_value_loss: bool = True
    ent_coef: float = 0.01
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5

    def __post_init__(self) -> None:
        require_positive_fields(self, "workloads.ppo", "num_steps update_epochs num_minibatches total_timesteps")
        rollout = self.env.num_envs * self.num_steps
        divisor = f"a divisor of env.num_envs * num_steps ({rollout})"
        require(rollout % self.num_minibatches == 0, "workloads.ppo.num_minibatches", self.num_minibatches, divisor)
        require_positive("workloads.ppo.learning_rate", self.learning_rate)
        require_probability("workloads.ppo.gamma", self.gamma)
        require_probability("workloads.ppo.gae_lambda", self.gae_lambda, closed=True)
        require_positive("workloads.ppo.clip_coef", self.clip_coef)
        require_positive("workloads.ppo.max_grad_norm", self.max_grad_norm)

    @property
    def batch_size(self) -> int:
        """The configured minibatch size: ``env.num_envs × num_steps / num_minibatches`` environment steps."""
        return self.env.num_envs * self.num_steps // self.num_minibatches
