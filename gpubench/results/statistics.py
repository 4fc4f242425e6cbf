"""Epoch-time statistics (ms): one round's summary and the whole measurement's, with the seed's headline figures."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

from gpubench.results.codec import Record


@dataclass(frozen=True)
class RoundStatistics(Record):
    """The two variance levels of epochs measured in replicated rounds (:mod:`gpubench.stats.rounds`); ms and ms².

    ``epochs_per_round`` and ``round_means_ms`` in measurement order. ``within_variance_ms2`` is the within level's
    long-run variance per epoch, estimated as ``within_method`` says (``overlapping_batch_means_pooled`` when every
    round has enough epochs for it, else ``anova_within``, the within-round mean square, which cannot see
    autocorrelation inside a round, whose part then shows as between); ``between_variance_ms2`` the host level's
    variance σ̂_a², what the round means spread beyond the within level (truncated at 0); ``between_share`` the
    fraction of the mean's variance from the between level and ``dominant`` (``between`` | ``within``) the level
    contributing more. ``between_p_value`` is the ANOVA F test of σ_a² = 0 (it takes epochs within a round as
    independent). ``degrees_of_freedom``: the decision interval's, Satterthwaite's under the round means'
    correlation (R − 1 with the rounds far apart; reports before 2026-12-03: R − 1). ``gaps_epochs``: the time
    between consecutive rounds in the model's epochs that the interval counted; None (reports before 2026-12-03)
    is read as back to back.
    """

    epochs_per_round: tuple[int, ...]
    round_means_ms: tuple[float, ...]
    within_variance_ms2: float
    within_method: str
    between_variance_ms2: float
    between_p_value: float
    between_share: float
    dominant: Literal["between", "within"]
    degrees_of_freedom: float
    gaps_epochs: tuple[float, ...] | None = None


@dataclass(frozen=True)
class EpochTimeStatistics(Record):
    """Summary of one model's measured epoch times; every ``*_ms`` figure is in milliseconds.

    ``mean_ms``, ``confidence_interval_ms`` (plain Student-t on all ``n`` epochs), ``coefficient_of_variation``
    and ``p95_ms``/``p99_ms`` are the seed tool's legacy figures, computed over exactly the epochs given.
    ``decision_interval_ms`` is the autocorrelation-aware interval for the mean that decisions use, by
    ``decision_interval_method`` (see :mod:`gpubench.stats.epoch_times`); ``effective_sample_size`` is n·s²/σ̂²∞ for
    the long-run variance σ̂²∞ that interval uses. Outliers (``outlier_indices``, positions in the input) are
    flagged only; they stay in every estimate. ``lag1_autocorrelation`` is the plain sample estimate;
    ``lag1_autocorrelation_adjusted`` is the bias-corrected, clipped value, reported only.

    Drift (:func:`gpubench.stats.rounds.drift_test`): ``drift_slope_ms_per_epoch`` the fitted slope,
    ``drift_shift_ms`` the level change it implies across the measured epochs (slope × (n − 1)), ``drift_p_value``
    its two-sided p-value by ``drift_method``, ``drift_detected`` when p < 1 − ``confidence_level``. Reports written
    before 2026-12 carry Kendall's tau (``drift_kendall_tau``) instead of the slope, shift and method.
    ``rounds``: the two variance levels when the epochs were measured in two rounds or more.
    """

    n: int
    mean_ms: float
    std_ms: float
    confidence_level: float
    confidence_interval_ms: tuple[float, float]
    coefficient_of_variation: float
    cv_threshold: float
    cv_ok: bool
    p95_ms: float
    p99_ms: float
    p95_reliable: bool
    p99_reliable: bool
    median_ms: float
    median_interval_ms: tuple[float, float]
    median_interval_coverage: float
    outlier_rule: str
    outlier_indices: tuple[int, ...]
    lag1_autocorrelation: float
    lag1_autocorrelation_adjusted: float
    decision_interval_ms: tuple[float, float]
    decision_interval_method: str
    effective_sample_size: float
    relative_halfwidth: float
    target_rel_halfwidth: float
    meets_precision_target: bool
    required_epochs: int
    drift_p_value: float
    drift_detected: bool
    warnings: tuple[str, ...]
    drift_slope_ms_per_epoch: float | None = None
    drift_shift_ms: float | None = None
    drift_method: str | None = None
    #: Only in reports written before 2026-12, whose drift test was Kendall's tau of time against epoch index.
    drift_kendall_tau: float | None = None
    #: An adaptive (two-stage) run's first stage: the epochs whose variance fixed the count; None (and absent from
    #: the report) for a fixed count.
    first_stage_epochs: int | None = None
    rounds: RoundStatistics | None = None

    _OMITTED_WHEN_EMPTY: ClassVar[tuple[str, ...]] = (
        "drift_slope_ms_per_epoch",
        "drift_shift_ms",
        "drift_method",
        "drift_kendall_tau",
        "first_stage_epochs",
        "rounds",
    )

    @property
    def decision_halfwidth_ms(self) -> float:
        """Half-width of the decision interval (ms), from its upper end: the interval is centred on the mean and
        its lower end may be cut at zero (an epoch time is positive)."""
        return self.decision_interval_ms[1] - self.mean_ms

    @property
    def drift_description(self) -> str:
        """The drift test's result in words, e.g. "slope +10 ms/epoch, +110 ms over the run, p = 3.2e-11" (an older
        report's: "Kendall tau = 0.62, p = 0.0001")."""
        if self.drift_slope_ms_per_epoch is None or self.drift_shift_ms is None:
            tau = self.drift_kendall_tau if self.drift_kendall_tau is not None else float("nan")
            return f"Kendall tau = {tau:.2f}, p = {self.drift_p_value:.2g}"
        return (
            f"slope {self.drift_slope_ms_per_epoch:+.3g} ms/epoch, {self.drift_shift_ms:+.3g} ms over the run, "
            f"p = {self.drift_p_value:.2g}"
        )
