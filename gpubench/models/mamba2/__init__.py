"""The mamba2 workload: its config dataclass and its training step."""
