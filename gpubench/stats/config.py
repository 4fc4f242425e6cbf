"""The ``statistics`` group: how epoch times are summarised."""

from dataclasses import dataclass

from gpubench.config_checks import require, require_choice, require_positive, require_probability
from gpubench.stats.intervals import MIN_EPOCHS

OUTLIER_RULES: tuple[str, ...] = ("mad", "sigma", "iqr", "none")


@dataclass
class StatisticsConfig:
    """How epoch times are summarised; see ``gpubench/stats/`` for the formulas.

    ``adaptive``: measure by Stein's two-stage rule (``gpubench/measure/epochs.py``): a first stage of ``epochs``
    epochs (at least the decision interval's minimum) fixes the total that brings the decision interval within
    ``target_rel_halfwidth`` of the mean, at most ``max_epochs``.
    """

    confidence_level: float = 0.95
    cv_threshold: float = 0.15
    outlier_rule: str = "mad"
    target_rel_halfwidth: float = 0.02
    adaptive: bool = False
    max_epochs: int = 50

    def __post_init__(self) -> None:
        require_probability("statistics.confidence_level", self.confidence_level)
        require_positive("statistics.cv_threshold", self.cv_threshold)
        require_choice("statistics.outlier_rule", self.outlier_rule, OUTLIER_RULES)
        require_positive("statistics.target_rel_halfwidth", self.target_rel_halfwidth)
        require_positive("statistics.max_epochs", self.max_epochs)
        if self.adaptive:
            # The first stage needs the decision interval's minimum of epochs to estimate its variance.
            require(
                self.max_epochs >= MIN_EPOCHS,
                "statistics.max_epochs",
                self.max_epochs,
                f">= {MIN_EPOCHS} when statistics.adaptive=true (a first stage of the decision interval's minimum)",
            )
