"""The ``workloads.tft`` keys."""

from dataclasses import dataclass, field

from gpubench.errors import require, require_positive_fields


@dataclass
class TFTConfig:
    """Temporal Fusion Transformer (Lim et al. 2021); defaults follow the paper's volatility configuration."""

    batch_size: int = 64
    encoder_length: int = 252
    decoder_length: int = 5
    hidden_size: int = 160
    num_heads: int = 4
    dropout: float = 0.1
    quantiles: list[float] = field(default_factory=lambda: [0.1, 0.5, 0.9])
    learning_rate: float = 1e-3
    max_grad_norm: float = 1.0

    def __post_init__(self) -> None:
        require_positive_fields(self, "workloads.tft", "batch_size encoder_length decoder_length hidden_size num_heads")
        multiple = f"a multiple of workloads.tft.num_heads ({self.num_heads})"
        require(self.hidden_size % self.num_heads == 0, "workloads.tft.hidden_size", self.hidden_size, multiple)
        require(0.0 <= self.dropout < 1.0, "workloads.tft.dropout", self.dropout, "in [0, 1)")
        levels_ok = len(self.quantiles) > 0 and all(0.0 < q < 1.0 for q in self.quantiles)
        levels = "a non-empty list of levels strictly between 0 and 1"
        require(levels_ok, "workloads.tft.quantiles", self.quantiles, levels)
        require_positive_fields(self, "workloads.tft", "learning_rate max_grad_norm")
