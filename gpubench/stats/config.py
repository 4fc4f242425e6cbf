"""The ``statistics`` group (how epoch times are summarised) and the ``stability`` group (training-health checks)."""

from dataclasses import dataclass

from gpubench.errors import require, require_choice, require_positive, require_probability

# The interval's limits live here, not in intervals.py, so that composing a config does not import scipy.
#: Fewest epochs a batch mean may average (shorter batches are strongly correlated with their neighbours).
MIN_BATCH_EPOCHS = 5
#: Fewest epochs an interval is computed from: two batches' worth (fewer leave OBM under 1.5 degrees of freedom).
MIN_EPOCHS = 2 * MIN_BATCH_EPOCHS
OUTLIER_RULES: tuple[str, ...] = ("mad", "sigma", "iqr", "none")
#: How many epochs a model is measured over: ``off`` a fixed ``epochs``; ``precision`` Stein's two-stage rule to
#: the precision target; ``decision`` the two-stage rule to the count that settles the recommendation.
ADAPTIVE_OFF = "off"
ADAPTIVE_PRECISION = "precision"
ADAPTIVE_DECISION = "decision"
ADAPTIVE_MODES: tuple[str, ...] = (ADAPTIVE_OFF, ADAPTIVE_PRECISION, ADAPTIVE_DECISION)
#: Why a model's measuring stopped (``ModelResult.stop_reason``): the fixed count, or an adaptive rule's outcome.
FIXED_EPOCHS = "epochs"
PRECISION_TARGET_MET = "precision_target_met"
DECISION_SETTLED = "decision_settled"
DECISION_CANNOT_SETTLE = "decision_cannot_settle"
MAX_EPOCHS_REACHED = "max_epochs_reached"
TIME_BUDGET_SPENT = "max_round_seconds_reached"
#: The booleans ``statistics.adaptive`` took before it had modes (OmegaConf hands them to a string key as text).
_ADAPTIVE_BOOLEANS = {"true": ADAPTIVE_PRECISION, "false": ADAPTIVE_OFF}


@dataclass
class StatisticsConfig:
    """How epoch times are summarised; see ``gpubench/stats/`` for the formulas.

    ``adaptive``: ``off`` measures ``epochs`` epochs; ``precision`` and ``decision`` run Stein's two-stage rule from
    a first stage of ``epochs`` epochs to the total (at most ``max_epochs``) that brings the decision interval within
    ``target_rel_halfwidth`` of the mean (``precision``) or settles the recommendation (``decision``). ``true`` and
    ``false`` read as ``precision`` and ``off``.
    """

    confidence_level: float = 0.95
    cv_threshold: float = 0.15
    outlier_rule: str = "mad"
    target_rel_halfwidth: float = 0.02
    adaptive: str = ADAPTIVE_OFF
    max_epochs: int = 50
    #: The measured epochs of each model come in this many rounds, interleaved round-robin across the models (1: one
    #: block); more rounds give the two-level interval more degrees of freedom
    #: (benchmarks/results/2026-12-02-two-level-coverage.md).
    rounds: int = 5
    #: An adaptive run adds rounds until its goal or ``max_epochs``, or until the job has spent this many seconds
    #: measuring rounds (null: no time limit).
    max_round_seconds: float | None = None
    #: Earlier runs of a model's config on this machine (``<data.cache_dir>/history``) widen or confirm its bound by
    #: their run-to-run spread; false: the bound rests on this run alone, and nothing is recorded.
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
            # The first stage needs the decision interval's minimum of epochs to estimate its variance.
            require(
                self.max_epochs >= MIN_EPOCHS,
                "statistics.max_epochs",
                self.max_epochs,
                f">= {MIN_EPOCHS} when statistics.adaptive={self.adaptive} (a first stage of the decision interval's "
                "minimum)",
            )

    @property
    def is_adaptive(self) -> bool:
        """Whether the epoch count is set by a two-stage rule (``precision`` or ``decision``)."""
        return self.adaptive != ADAPTIVE_OFF


@dataclass
class StabilityConfig:
    """Gradient and loss health checks, and the reinforcement-learning ones.

    Every model: NaN/Inf, gradient norms above ``grad_norm_exploding`` or below ``grad_norm_vanishing`` (in the
    loss's own units), and an epoch whose largest norm is ``grad_norm_growth_factor`` times the largest of the run's
    first quarter (scale-free). Supervised: a significant loss rise above ``loss_trend_rel_slope`` of its mean per
    epoch. RL: the critic's loss above ``critic_loss_ceiling_factor`` × the largest a critic within the rewards'
    return range can have, or grown ``critic_loss_growth_factor`` times to above it; PPO epochs whose mean
    approximate KL exceeds ``max_approx_kl`` or mean clip fraction ``max_clip_fraction``; DQN epochs whose largest
    |Q| averages beyond ``max |reward| / (1 − γ)``.
    """

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
