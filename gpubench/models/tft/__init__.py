"""The tft workload: its config dataclass and its training step."""
