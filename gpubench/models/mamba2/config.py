"""The ``workloads.mamba2`` keys."""

from dataclasses import dataclass

from gpubench.errors import require, require_choice, require_positive, require_positive_fields

#: ``workloads.mamba2.recompute_scan``: recompute only when the batch would not fit otherwise, always, never.
RECOMPUTE_SETTINGS: tuple[str, ...] = ("auto", "true", "false")


@dataclass
class Mamba2Config:
    """Mamba-2 stack (Dao & Gu 2024) forecasting the next ``horizon`` returns from a window."""

    batch_size: int = 32
    seq_len: int = 512
    horizon: int = 8
    d_model: int = 256
    n_layers: int = 6
    expand: int = 2
    headdim: int = 64
    d_state: int = 64
    ngroups: int = 1
    d_conv: int = 4
    chunk_size: int = 64
    #: Recompute the scan in backward rather than keep its intermediates; ``auto``: only when the step would not fit.
    recompute_scan: str = "auto"
    learning_rate: float = 1e-3
    weight_decay: float = 0.01
    max_grad_norm: float = 1.0

    def __post_init__(self) -> None:
        self.recompute_scan = str(self.recompute_scan).lower()
        require_choice("workloads.mamba2.recompute_scan", self.recompute_scan, RECOMPUTE_SETTINGS)
        sizes = "batch_size seq_len horizon d_model n_layers expand headdim d_state ngroups d_conv chunk_size"
        require_positive_fields(self, "workloads.mamba2", sizes)
        d_inner = self.expand * self.d_model
        divides = d_inner % self.headdim == 0
        require(divides, "workloads.mamba2.headdim", self.headdim, f"a divisor of expand * d_model ({d_inner})")
        nheads = d_inner // self.headdim
        divides = nheads % self.ngroups == 0
        require(divides, "workloads.mamba2.ngroups", self.ngroups, f"a divisor of the number of heads ({nheads})")
        require_positive("workloads.mamba2.learning_rate", self.learning_rate)
        require_positive("workloads.mamba2.max_grad_norm", self.max_grad_norm)
