"""Training stability: the loss trend and divergence checks, and an RL policy's health."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

from gpubench.results.codec import Record


@dataclass(frozen=True)
class RLHealth(Record):
    """The health signals of a reinforcement-learning model, whose loss trend is not one (PPO's clipped surrogate
    normally rises toward zero; a DQN's TD loss rises while its values bootstrap up).

    ``critic_loss_name`` names the critic's loss (``value loss`` for PPO, ``TD loss`` for DQN);
    ``epoch_mean_critic_losses`` its mean per measured epoch (None where no step had a finite one);
    ``critic_loss_ceiling`` the largest that loss can be for a critic whose predictions and targets stay within the
    discounted returns the rewards allow (``±max |reward| / (1 − γ)``). The critic has blown up above
    ``critic_loss_ceiling_factor`` times the ceiling, or when an epoch's mean rose ``critic_loss_growth_factor``
    times over an earlier one to above the ceiling. PPO only (None for DQN): the per-epoch means of the updates'
    approximate KL and clip fraction, judged against ``approx_kl_bound`` and ``clip_fraction_bound``, and the
    largest single update's. ``steps`` counts the updates that reported these signals. DQN only (None for PPO):
    ``epoch_mean_value_abs_maxima``, per epoch the mean over its updates of each one's largest |Q(s, a)|, judged
    against ``return_bound`` (``max |reward| / (1 − γ)``: no return, hence no accurate value, lies beyond it), and
    ``max_value_abs``, the largest |Q| of any update.
    """

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
    epoch_mean_value_abs_maxima: list[float | None] | None = None
    max_value_abs: float | None = None
    return_bound: float | None = None

    _OMITTED_WHEN_EMPTY: ClassVar[tuple[str, ...]] = ("epoch_mean_value_abs_maxima", "max_value_abs", "return_bound")


@dataclass(frozen=True)
class StabilityReport(Record):
    """A model's training health over its epochs.

    ``stability``: DIVERGING (a NaN/Inf loss or gradient norm was seen; ``diverged`` is true), UNSTABLE
    (exploding or vanishing gradient norms; an INCREASING loss trend where the loss trend is judged; for RL a
    critic-loss blow-up or growth, or PPO's approximate KL or clip fraction beyond their bounds), STABLE, or
    NOT_CHECKED (``stability.enabled=false``, or steps that reported neither a loss nor a gradient norm: a
    ``model=custom`` step may return no loss). ``loss_trend`` and ``loss_rel_slope_per_epoch`` (fraction of the
    mean loss per epoch) use the epochs with a finite mean loss and are None with fewer than two;
    :attr:`loss_trend_judged` is False for RL, whose loss trend is reported but says nothing about health (``rl``
    holds the signals that do). Totals are step counts, None when not checked; ``first_nonfinite_epoch`` is the 0-based
    index of the first epoch with a NaN/Inf. ``epoch_max_grad_norms`` is each epoch's largest finite gradient norm
    (None where it had none); an epoch's above ``grad_norm_growth_factor`` times the largest of the run's first
    measured epochs is a gradient-norm explosion (None where not checked). ``epoch_relative_losses`` is each epoch's
    loss relative to the workload's reference forecast on the same batches (the sum of the step losses over the sum
    of the reference losses; :class:`~gpubench.workload.StepResult`), None where the steps report no reference: where
    present, ``loss_trend``, ``loss_rel_slope_per_epoch`` and ``loss_slope_p_value`` are read from it, not from
    ``epoch_mean_losses``, whose epoch-to-epoch changes are mostly the sampled batches'.
    """

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
    rl: RLHealth | None = None
    epoch_max_grad_norms: list[float | None] | None = None
    grad_norm_growth_factor: float | None = None
    epoch_relative_losses: list[float | None] | None = None

    _OMITTED_WHEN_EMPTY: ClassVar[tuple[str, ...]] = (
        "rl",
        "epoch_max_grad_norms",
        "grad_norm_growth_factor",
        "epoch_relative_losses",
    )

    @property
    def loss_trend_judged(self) -> bool:
        """Whether the loss trend counts toward ``stability``: not for RL (``rl`` is set), whose loss is a surrogate
        or a TD loss."""
        return self.rl is None
