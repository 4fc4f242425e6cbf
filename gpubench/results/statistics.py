"""Epoch-time statistics (ms): one round's summary and the whole measurement's, with the seed's headline figures."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from gpubench.results.codec import OMIT_EMPTY, Record


@dataclass(frozen=True)
class RoundStatistics(Record):
    """The two variance levels (ms²) of epochs measured in rounds (:mod:`gpubench.stats.rounds`): within a round and
    between rounds (σ̂_a², ``between_p_value`` of the ANOVA F test); ``gaps_epochs``: None is back to back. ``rho``:
    the run's bound on the epochs' ρ; ``round_correlation``: φ carried between rounds; ``steady_mean_ms``: the mean
    without the first epoch after each gap, whose mean excess a training pays once; ``earlier_runs``: (mean ms,
    relative variance) of this config's earlier runs on this machine, whose run-to-run level is
    ``run_level_variance_ms2`` on ``run_level_dof`` (0 and None below two)."""

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
    rho: float | None = None
    round_correlation: float = 0.0
    steady_mean_ms: float | None = None
    first_epoch_excess_ms: float = 0.0
    variance_of_mean_ms2: float | None = None
    run_level_variance_ms2: float = 0.0
    run_level_dof: float | None = None
    earlier_runs: tuple[tuple[float, float], ...] = ()


@dataclass(frozen=True)
class EpochTimeStatistics(Record):
    """Summary of one model's measured epoch times (ms). ``confidence_interval_ms`` is the plain Student-t interval,
    ``decision_interval_ms`` the autocorrelation-aware one decisions use; ``effective_sample_size`` = n·s²/σ̂²∞.
    Outliers are flagged, never dropped. Drift (:func:`gpubench.stats.rounds.drift_test`): slope, shift over the
    run, p-value; ``drift_kendall_tau`` is read, not written. ``first_stage_epochs``: a two-stage run's first stage."""

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
    drift_slope_ms_per_epoch: float | None = field(default=None, metadata=OMIT_EMPTY)
    drift_shift_ms: float | None = field(default=None, metadata=OMIT_EMPTY)
    drift_method: str | None = field(default=None, metadata=OMIT_EMPTY)
    drift_kendall_tau: float | None = field(default=None, metadata=OMIT_EMPTY)
    first_stage_epochs: int | None = field(default=None, metadata=OMIT_EMPTY)
    rounds: RoundStatistics | None = field(default=None, metadata=OMIT_EMPTY)

    @property
    def decision_mean_ms(self) -> float:
        """The mean (ms) the decision interval is centred on: the steady epochs' over rounds, else every epoch's."""
        steady = None if self.rounds is None else self.rounds.steady_mean_ms
        return self.mean_ms if steady is None else steady

    @property
    def decision_halfwidth_ms(self) -> float:
        """Half-width of the decision interval (ms) from its upper end, about :attr:`decision_mean_ms`."""
        return self.decision_interval_ms[1] - self.decision_mean_ms

    @property
    def drift_description(self) -> str:
        """The drift test's result in words: "slope +10 ms/epoch, +110 ms over the run, p = 3.2e-11"."""
        if self.drift_slope_ms_per_epoch is None or self.drift_shift_ms is None:
            tau = self.drift_kendall_tau if self.drift_kendall_tau is not None else float("nan")
            return f"Kendall tau = {tau:.2f}, p = {self.drift_p_value:.2g}"
        return (
            f"slope {self.drift_slope_ms_per_epoch:+.3g} ms/epoch, {self.drift_shift_ms:+.3g} ms over the run, "
            f"p = {self.drift_p_value:.2g}"
        )
