"""The ``workloads.<rl model>.env`` keys of the vectorised trading environment."""

from dataclasses import dataclass

from gpubench.errors import require, require_positive_fields


@dataclass
class TradingEnvConfig:
    """The vectorised trading environment shared by the RL workloads."""

    num_envs: int = 64
    observation_window: int = 64
    episode_length: int = 1024
    transaction_cost: float = 1e-4

    def __post_init__(self) -> None:
        require_positive_fields(self, "workloads.*.env", "num_envs observation_window episode_length")
        require(self.transaction_cost >= 0, "workloads.*.env.transaction_cost", self.transaction_cost, ">= 0")
