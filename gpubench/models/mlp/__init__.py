"""The mlp workload: its config dataclass and its training step."""
