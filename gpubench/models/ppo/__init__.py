"""The ppo workload: its config dataclass and its training step."""
