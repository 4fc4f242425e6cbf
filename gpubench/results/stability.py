"""Training stability: the loss trend and divergence checks, and an RL policy's health."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from gpubench.results.codec import OMIT_EMPTY, Record


@dataclass(frozen=True)
class RLHealth(Record):
    """An RL model's health signals (its loss trend is not one): the critic's loss per epoch against the return
    range ``±max |reward| / (1 − γ)``; PPO's approximate KL and clip fraction; DQN's mean largest |Q|."""

    critic_loss_name: str
    epoch_mean_critic_losses: list[float | None]
    critic_loss_ceiling: float
    critic_loss_ceiling_factor: float
    critic_loss_growth_factor: float
    steps: int
    epoch_mean_approx_kls: list[float | None] | None = None
    max_approx_kl: float | None = None
    approx_kl_bound: float | None = None
    epoch_mean_clip_fractions: list[float | None] | None = None
    max_clip_fraction: float | None = None
    clip_fraction_bound: float | None = None
    epoch_mean_value_abs_maxima: list[float | None] | None = field(default=None, metadata=OMIT_EMPTY)
    max_value_abs: float | None = field(default=None, metadata=OMIT_EMPTY)
    return_bound: float | None = field(default=None, metadata=OMIT_EMPTY)


@dataclass(frozen=True)
class StabilityReport(Record):
    """A model's training health over its epochs: ``stability`` DIVERGING (a NaN/Inf loss or gradient norm),
    UNSTABLE (bad gradient norms, an INCREASING judged loss trend, an RL signal out of bounds), STABLE or NOT_CHECKED.
    ``loss_rel_slope_per_epoch``: a fraction of the mean per epoch. Totals are step counts, None when not checked."""

    stability: Literal["STABLE", "UNSTABLE", "DIVERGING", "NOT_CHECKED"]
    loss_trend: Literal["DECREASING", "STABLE", "INCREASING"] | None
    loss_rel_slope_per_epoch: float | None
    diverged: bool
    reasons: list[str]
    epochs: int
    steps: int
    epoch_mean_losses: list[float | None]
    max_grad_norm: float | None
    nonfinite_loss_steps: int | None
    nonfinite_grad_steps: int | None
    exploding_steps: int | None
    vanishing_steps: int | None
    first_nonfinite_epoch: int | None
    loss_slope_p_value: float | None = None
    rl: RLHealth | None = field(default=None, metadata=OMIT_EMPTY)
    epoch_max_grad_norms: list[float | None] | None = field(default=None, metadata=OMIT_EMPTY)
    grad_norm_growth_factor: float | None = field(default=None, metadata=OMIT_EMPTY)
    epoch_relative_losses: list[float | None] | None = field(default=None, metadata=OMIT_EMPTY)

    @property
    def loss_trend_judged(self) -> bool:
        """Whether the loss trend counts toward ``stability``: not for RL, whose loss is a surrogate or a TD loss."""
        return self.rl is None
