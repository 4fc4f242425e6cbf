"""The ``statistics`` group (how epoch times are summarised) and the ``stability`` group (training-health checks)."""

from dataclasses import dataclass

from gpubench.errors import require, require_choice, require_positive, require_probability

# The interval's limits live here, not in intervals.py, so that composing a config does not import scipy.
#: Fewest epochs a batch mean may average (shorter batches are strongly correlated with their neighbours).
MIN_BATCH_EPOCHS = 5
#: Fewest epochs an interval is computed from: two batches' worth. With fewer, OBM's degrees of freedom
#: 1.5 (n/m − 1) fall below 1.5 (0.3 at six epochs: a t quantile of 6,600) and the interval means nothing.
MIN_EPOCHS = 2 * MIN_BATCH_EPOCHS
OUTLIER_RULES: tuple[str, ...] = ("mad", "sigma", "iqr", "none")
#: How many epochs a model is measured over: ``off`` a fixed ``epochs``; ``precision`` Stein's two-stage rule to
#: the precision target; ``decision`` the two-stage rule to the count that settles the recommendation.
ADAPTIVE_OFF = "off"
ADAPTIVE_PRECISION = "precision"
ADAPTIVE_DECISION = "decision"
ADAPTIVE_MODES: tuple[str, ...] = (ADAPTIVE_OFF, ADAPTIVE_PRECISION, ADAPTIVE_DECISION)
#: Why a model's measuring stopped (``ModelResult.stop_reason``): the fixed count, or an adaptive rule's outcome —
#: its goal met, no count under ``max_epochs`` could meet it, the count it asked for was past ``max_epochs``, or the
#: job's ``max_round_seconds`` was spent.
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

    ``adaptive``: ``off`` measures ``epochs`` epochs. ``precision`` and ``decision`` measure by Stein's two-stage
    rule (``gpubench/measure/epochs.py``): a first stage of ``epochs`` epochs (at least the decision interval's
    minimum) fixes the total, at most ``max_epochs``, that brings the decision interval within
    ``target_rel_halfwidth`` of the mean (``precision``) or that settles the recommendation — the critical total's
    prediction interval wholly on one side of each threshold (``decision``). ``true`` and ``false`` are read as
    ``precision`` and ``off``.
    """

    confidence_level: float = 0.95
    cv_threshold: float = 0.15
    outlier_rule: str = "mad"
    target_rel_halfwidth: float = 0.02
    adaptive: str = ADAPTIVE_OFF
    max_epochs: int = 50
    #: The measured epochs of each model come in this many rounds, interleaved round-robin across the models (see
    #: ``gpubench/model_rounds.py``); 1 measures each model in one block, as versions before rounds did. Five rounds
    #: of four beat four of five at 20 epochs (t on 4 degrees of freedom against 3): a dead band of 2.1-3.7 h against
    #: 2.3-4.5 h at the same coverage (``benchmarks/results/2026-12-02-two-level-coverage.md``).
    rounds: int = 5
    #: An adaptive run adds rounds until its goal or ``max_epochs``, or until the job has spent this many seconds
    #: measuring rounds (null: no time limit).
    max_round_seconds: float | None = None

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

    Every model: NaN/Inf, gradient norms above ``grad_norm_exploding`` or below ``grad_norm_vanishing``, and an
    epoch whose largest gradient norm is ``grad_norm_growth_factor`` times the largest of the run's first measured
    epochs (the first quarter, at least one: a scale-free explosion test, two orders of magnitude, where the later
    epochs of healthy quick CPU runs of all five models stayed within 1.5 times it, and DQN's at a learning rate of
    10, where they spiked, reached 3e4 to 7e4 times; ``grad_norm_exploding`` is in the loss's own units, which
    differ by model). Supervised
    models: a loss rising by more than ``loss_trend_rel_slope`` of its mean per epoch (and significantly). RL
    models, whose loss trend is no health signal: the critic's loss (PPO's value loss, DQN's TD loss) above
    ``critic_loss_ceiling_factor`` times the largest a critic within the rewards' return range can have, or grown
    ``critic_loss_growth_factor`` times over an earlier epoch to above that ceiling; PPO epochs whose updates' mean
    approximate KL exceeds ``max_approx_kl`` (five times the 0.02 of a policy whose every probability ratio sits on
    the edge of the default 0.2 clip; healthy default runs stay near 0.005) or whose mean clip fraction exceeds
    ``max_clip_fraction`` (more than half the samples pushed past the clip; healthy quick runs: 0.01 to 0.16).
    Epoch means, not single updates: one minibatch of 64 samples can clip 45% of them in a healthy run. DQN: an
    epoch whose updates' largest |Q| averages beyond the discounted return bound ``max |reward| / (1 − γ)``, which
    no accurate value can pass (van Hasselt et al. 2018's "soft divergence"); no key, the bound is the run's own.
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
