"""The ``statistics`` group (how epoch times are summarised) and the ``stability`` group (training-health checks)."""

from dataclasses import dataclass

from gpubench.errors import require, require_choice, require_positive, require_probability

# The interval's limits live here, not in intervals.py, so that composing a config does not import scipy.
MIN_BATCH_EPOCHS = 5
#: Two batches: fewer epochs leave OBM under 1.5 degrees of freedom.
MIN_EPOCHS = 2 * MIN_BATCH_EPOCHS
OUTLIER_RULES: tuple[str, ...] = ("mad", "sigma", "iqr", "none")
ADAPTIVE_OFF = "off"
ADAPTIVE_PRECISION = "precision"
ADAPTIVE_DECISION = "decision"
ADAPTIVE_MODES: tuple[str, ...] = (ADAPTIVE_OFF, ADAPTIVE_PRECISION, ADAPTIVE_DECISION)
#: ``ModelResult.stop_reason``: why a model's measuring stopped.
FIXED_EPOCHS = "epochs"
PRECISION_TARGET_MET = "precision_target_met"
DECISION_SETTLED = "decision_settled"
DECISION_CANNOT_SETTLE = "decision_cannot_settle"
MAX_EPOCHS_REACHED = "max_epochs_reached"
TIME_BUDGET_SPENT = "max_round_seconds_reached"
#: OmegaConf hands a boolean ``statistics.adaptive`` to the string key as text.
_ADAPTIVE_BOOLEANS = {"true": ADAPTIVE_PRECISION, "false": ADAPTIVE_OFF}


@dataclass
class StatisticsConfig:
    """How epoch times are summarised. ``adaptive``: ``off`` measures ``epochs`` epochs; ``precision`` and
    ``decision`` run Stein's two-stage rule from ``epochs`` epochs up to ``max_epochs``, until the decision interval
    is within ``target_rel_halfwidth`` of the mean or settles the recommendation (``true``/``false``: precision/off)."""

    confidence_level: float = 0.95
    cv_threshold: float = 0.15
    outlier_rule: str = "mad"
    target_rel_halfwidth: float = 0.02
    adaptive: str = ADAPTIVE_OFF
    max_epochs: int = 50
    #: Rounds of each model's epochs, interleaved round-robin across the models (1: one block).
    rounds: int = 5
    #: An adaptive run stops adding rounds after this many seconds of rounds (null: no limit).
    max_round_seconds: float | None = None
    #: Earlier runs of the config on this machine (``<data.cache_dir>/history``) add their run-to-run spread.
    history: bool = True

    def __post_init__(self) -> None:
        self.adaptive = str(self.adaptive).lower()
        self.adaptive = _ADAPTIVE_BOOLEANS.get(self.adaptive, self.adaptive)
        require_choice("statistics.adaptive", self.adaptive, ADAPTIVE_MODES)
        require_probability("statistics.confidence_level", self.confidence_level)
        require_positive("statistics.cv_threshold", self.cv_threshold)
        require_choice("statistics.outlier_rule", self.outlier_rule, OUTLIER_RULES)
        require_positive("statistics.target_rel_halfwidth", self.target_rel_halfwidth)
        require_positive("statistics.max_epochs", self.max_epochs)
        require(isinstance(self.rounds, int) and self.rounds >= 1, "statistics.rounds", self.rounds, "an integer >= 1")
        require(isinstance(self.history, bool), "statistics.history", self.history, "true or false")
        if self.max_round_seconds is not None:
            require_positive("statistics.max_round_seconds", self.max_round_seconds)
        if self.is_adaptive:
            require(
                self.max_epochs >= MIN_EPOCHS,
                "statistics.max_epochs",
                self.max_epochs,
                f">= {MIN_EPOCHS} when statistics.adaptive={self.adaptive} (a first stage of the decision interval's "
                "minimum)",
            )

    @property
    def is_adaptive(self) -> bool:
        return self.adaptive != ADAPTIVE_OFF


@dataclass
class StabilityConfig:
    """Training health checks (:func:`gpubench.stats.stability.stability_verdict`): NaN/Inf, gradient norms (in the
    loss's units; growth against the run's first quarter), a significant supervised loss rise above
    ``loss_trend_rel_slope`` of its mean per epoch, and the RL critic, KL and clip-fraction bounds."""

    enabled: bool = True
    grad_norm_exploding: float = 1000.0
    grad_norm_vanishing: float = 1e-7
    grad_norm_growth_factor: float = 100.0
    loss_trend_rel_slope: float = 0.01
    critic_loss_ceiling_factor: float = 10.0
    critic_loss_growth_factor: float = 10.0
    max_approx_kl: float = 0.1
    max_clip_fraction: float = 0.5

    def __post_init__(self) -> None:
        require_positive("stability.grad_norm_exploding", self.grad_norm_exploding)
        require_positive("stability.grad_norm_vanishing", self.grad_norm_vanishing)
        require(
            self.grad_norm_growth_factor > 1,
            "stability.grad_norm_growth_factor",
            self.grad_norm_growth_factor,
            "a factor above 1",
        )
        require_positive("stability.loss_trend_rel_slope", self.loss_trend_rel_slope)
        require_positive("stability.critic_loss_ceiling_factor", self.critic_loss_ceiling_factor)
        require(
            self.critic_loss_growth_factor > 1,
            "stability.critic_loss_growth_factor",
            self.critic_loss_growth_factor,
            "a factor above 1",
        )
        require_positive("stability.max_approx_kl", self.max_approx_kl)
        require(0 < self.max_clip_fraction <= 1, "stability.max_clip_fraction", self.max_clip_fraction, "in (0, 1]")
