"""The dqn workload: its config dataclass and its training step."""
