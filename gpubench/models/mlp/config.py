"""The ``workloads.mlp`` keys."""

from dataclasses import dataclass, field

from gpubench.errors import require, require_positive_fields


@dataclass
class MLPConfig:
    """MLP forecaster: a flattened window of features -> the next bar's (normalised) return."""

    batch_size: int = 256
    window: int = 64
    hidden_sizes: list[int] = field(default_factory=lambda: [256, 256])
    learning_rate: float = 1e-3
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0

    def __post_init__(self) -> None:
        require_positive_fields(self, "workloads.mlp", "batch_size window")
        widths_ok = len(self.hidden_sizes) > 0 and all(h > 0 for h in self.hidden_sizes)
        widths = "a non-empty list of positive layer widths"
        require(widths_ok, "workloads.mlp.hidden_sizes", self.hidden_sizes, widths)
        require_positive_fields(self, "workloads.mlp", "learning_rate max_grad_norm")
