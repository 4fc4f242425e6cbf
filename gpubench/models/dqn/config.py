"""The ``workloads.dqn`` keys."""

from dataclasses import dataclass, field

from gpubench.errors import require, require_choice, require_positive, require_positive_fields, require_probability
from gpubench.models.trading_env.config import TradingEnvConfig


@dataclass
class DQNConfig:
    """DQN (Mnih et al. 2015) with Double DQN on by default."""

    env: TradingEnvConfig = field(default_factory=TradingEnvConfig)
    batch_size: int = 256
    hidden_sizes: list[int] = field(default_factory=lambda: [256, 256])
    buffer_size: int = 100_000
    learning_rate: float = 1e-4
    gamma: float = 0.99
    double_dqn: bool = True
    target_update_interval: int = 1000
    tau: float = 1.0
    exploration_initial: float = 1.0
    exploration_final: float = 0.05
    exploration_steps: int = 100_000
    learning_starts: int = 1000
    train_freq: int = 1
    gradient_steps: int = 16
    max_grad_norm: float = 10.0
    #: ``indices``: store environment states and rebuild observations when sampling; ``observations``: store copies.
    replay_storage: str = "indices"

    def __post_init__(self) -> None:
        sizes = "batch_size buffer_size target_update_interval exploration_steps train_freq gradient_steps"
        require_positive_fields(self, "workloads.dqn", sizes)
        require(self.learning_starts >= 0, "workloads.dqn.learning_starts", self.learning_starts, ">= 0")
        require_positive("workloads.dqn.learning_rate", self.learning_rate)
        require_probability("workloads.dqn.gamma", self.gamma)
        require(0.0 < self.tau <= 1.0, "workloads.dqn.tau", self.tau, "in (0, 1] (1 = hard target update)")
        require_probability("workloads.dqn.exploration_initial", self.exploration_initial, closed=True)
        require_probability("workloads.dqn.exploration_final", self.exploration_final, closed=True)
        require_positive("workloads.dqn.max_grad_norm", self.max_grad_norm)
        require_choice("workloads.dqn.replay_storage", self.replay_storage, ("indices", "observations"))
        per_step = f">= env.num_envs ({self.env.num_envs}): one env step adds a transition per environment"
        require(self.buffer_size >= self.env.num_envs, "workloads.dqn.buffer_size", self.buffer_size, per_step)
