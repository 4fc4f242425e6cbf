"""Replicated rounds: the mean epoch time's bound from two variance levels, a prediction for one new training, and a
drift test that knows autocorrelation.

Why rounds. The host's CPU speed moves between states on a timescale of a second to tens of seconds, inside one
process, so identical trainings of a host-bound model differ by 16-24% on the H200's host. One block of epochs sees
one or two host states; its within-run interval cannot see the rest. So each model is measured in R rounds of m
epochs, interleaved across models, and its epoch times are modelled as a one-way random-effects layout
(Kalibera & Jones 2013, "Rigorous benchmarking in reasonable time", ISMM):

    y_ij = μ + a_i + e_ij,     a_i ~ N(0, σ_a²) the round's host level,  e_ij stationary within the round,

with σ_e² the epoch-to-epoch variance and σ²∞ the within level's long-run variance (consecutive epochs correlate).

* :func:`variance_components`: the classical ANOVA (method of moments) estimates of σ_a² and σ_e², the F test of
  σ_a² = 0 and the intraclass correlation; unbalanced rounds allowed.
* :func:`two_level_interval`: the interval for the long-run mean epoch time (what the training's total rests on),
  the round means' correlation across short gaps counted (one model's rounds follow one another at once).
* :func:`halfwidth_after`: its half-width after R' rounds of m' epochs, its scale held (for a stop rule).
* :func:`new_run_interval`: a prediction interval for the mean epoch of one new, independent training (for
  ``gpubench.validate``).
* :func:`drift_test`: a slope test whose false-positive rate stays at its level on autocorrelated epochs, the
  rounds' gaps (:func:`round_gaps_epochs`) counted.

The evidence for each choice is ``benchmarks/statistics_coverage.py --two-level`` (seeded; its table is quoted in the
docstrings). Pure numpy/scipy: nothing here imports torch.
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import special
from scipy import stats as sps

from gpubench.stats import intervals
from gpubench.stats.config import MIN_EPOCHS
from gpubench.stats.correlated import (
    ar1_timeline_correlation,
    balanced_mean_shape,
    correlated_estimate,
    round_means_correlation,
)

#: The two-level interval's method: Student-t on the round means, their variance and degrees of freedom under the
#: correlation AR(1) epochs at ρ = DRIFT_AR1_BOUND carry through the gaps between rounds. (Reports written before
#: 2026-12-03 carry ``round_means_t``: Student-t on the round means taken as independent, R − 1 df.)
METHOD_ROUND_MEANS_AR1 = "round_means_t_ar1_bound"
#: Drift, three rounds or more: OLS slope of the round means on the rounds' centre epochs, its variance under the
#: round means' correlation when AR(1) epochs at ρ = DRIFT_AR1_BOUND run on through the gaps between rounds.
#: (Reports of 2026-12-02 carry ``round_means_ols_slope``: the same slope, the round means taken as independent.)
METHOD_DRIFT_ROUND_MEANS = "round_means_slope_ar1_bound"
#: Drift, one or two rounds: OLS slope on the epoch index, its variance under AR(1) epochs at ρ = DRIFT_AR1_BOUND.
METHOD_DRIFT_AR1_BOUND = "ols_slope_ar1_bound"
#: Drift with too few epochs to estimate a slope's standard error.
METHOD_DRIFT_TOO_FEW = "too_few_epochs"
#: The strongest lag-1 autocorrelation of consecutive epochs the drift test is built for. The stored H200 reports
#: show 0.35-0.70; at ρ = 0.8 its false-positive rate is at its level, below it under (see :func:`drift_test`).
DRIFT_AR1_BOUND = 0.8

BETWEEN = "between"
WITHIN = "within"


# ----------------------------------------------------------------------------------------------- validation


def _rounds(rounds_ms: Sequence[Sequence[float]], *, min_epochs: int = 1) -> list[np.ndarray]:
    """``rounds_ms`` as a list of 1-D float arrays, checked: at least one round, each of at least ``min_epochs``
    finite, positive epoch times."""
    rounds = [np.asarray(r, dtype=float) for r in rounds_ms]
    if not rounds:
        raise ValueError("need at least one round of epoch times, got none")
    for i, values in enumerate(rounds):
        if values.ndim != 1:
            raise ValueError(f"round {i} must be a 1-D sequence of epoch times, got shape {values.shape}")
        if values.size < min_epochs:
            raise ValueError(f"round {i} has {values.size} epoch(s); every round needs at least {min_epochs}")
        if not np.all(np.isfinite(values)) or np.any(values <= 0):
            raise ValueError(f"round {i}: epoch times must be finite, positive milliseconds")
    return rounds


def _check_level(confidence_level: float) -> None:
    if not 0.0 < confidence_level < 1.0:
        raise ValueError(f"confidence_level must be strictly between 0 and 1, got {confidence_level!r}")


def split_rounds(times_ms: Sequence[float], epochs_per_round: Sequence[int]) -> list[np.ndarray]:
    """``times_ms`` (in measurement order) cut into consecutive rounds of ``epochs_per_round`` epochs each."""
    counts = [int(c) for c in epochs_per_round]
    values = np.asarray(times_ms, dtype=float)
    if any(c < 1 for c in counts) or sum(counts) != values.size:
        raise ValueError(
            f"rounds {counts} must be positive epoch counts that sum to the {values.size} epoch times given"
        )
    return np.split(values, np.cumsum(counts)[:-1])


# ---------------------------------------------------------------------------------------- variance components


@dataclass(frozen=True)
class VarianceComponents:
    """One-way random-effects ANOVA of epoch times (ms) in rounds, by the method of moments.

    ``ms_between`` = Σ n_i (ȳ_i − ȳ)² / (R − 1) and ``ms_within`` = Σ Σ (y_ij − ȳ_i)² / (N − R) (ms²);
    ``within_variance_ms2`` σ̂_e² = MS_within; ``between_variance_ms2`` σ̂_a² = (MS_between − MS_within) / n0,
    truncated at 0, with n0 = (N − Σ n_i² / N) / (R − 1) (``effective_epochs_per_round``; m when balanced).
    ``f_statistic`` = MS_between / MS_within and ``f_p_value`` its upper tail on (R − 1, N − R) degrees of freedom
    (the test of σ_a² = 0; it takes the epochs within a round as independent, so autocorrelation within rounds
    makes it reject too often). ``intraclass_correlation`` = σ̂_a² / (σ̂_a² + σ̂_e²). ``dominant`` says which level
    contributes more to the variance of the grand mean, σ̂_a² Σ n_i² / N² against σ̂_e² / N.
    """

    rounds: int
    epochs_per_round: tuple[int, ...]
    grand_mean_ms: float
    round_means_ms: tuple[float, ...]
    ms_between: float
    ms_within: float
    effective_epochs_per_round: float
    within_variance_ms2: float
    between_variance_ms2: float
    f_statistic: float
    f_p_value: float
    intraclass_correlation: float
    dominant: str


def variance_components(rounds_ms: Sequence[Sequence[float]]) -> VarianceComponents:
    """The ANOVA variance components of epoch times (ms) measured in rounds; see :class:`VarianceComponents`.

    Needs at least two rounds and one more epoch than rounds (a round of one epoch is allowed, but some round must
    have two). All epochs equal within every round (MS_within = 0) gives F = inf and p = 0 when the round means
    differ, F = 0 and p = 1 when they do not.
    """
    rounds = _rounds(rounds_ms)
    r = len(rounds)
    counts = np.array([v.size for v in rounds], dtype=float)
    n_total = float(counts.sum())
    if r < 2 or n_total - r < 1:
        raise ValueError(
            f"variance components need at least 2 rounds and more epochs than rounds; got {r} round(s) of "
            f"{[int(c) for c in counts]} epochs"
        )
    means = np.array([v.mean() for v in rounds])
    grand = float(np.concatenate(rounds).mean())
    ms_between = float(counts @ (means - grand) ** 2) / (r - 1)
    ms_within = sum(float(((v - v.mean()) ** 2).sum()) for v in rounds) / (n_total - r)
    n0 = (n_total - float(counts @ counts) / n_total) / (r - 1)
    between = max((ms_between - ms_within) / n0, 0.0)
    if ms_within > 0:
        f_statistic = ms_between / ms_within
        f_p_value = float(sps.f.sf(f_statistic, r - 1, n_total - r))
    else:
        f_statistic, f_p_value = (math.inf, 0.0) if ms_between > 0 else (0.0, 1.0)
    total = between + ms_within
    between_part = between * float(counts @ counts) / n_total**2
    return VarianceComponents(
        rounds=r,
        epochs_per_round=tuple(int(c) for c in counts),
        grand_mean_ms=grand,
        round_means_ms=tuple(float(m) for m in means),
        ms_between=ms_between,
        ms_within=ms_within,
        effective_epochs_per_round=n0,
        within_variance_ms2=ms_within,
        between_variance_ms2=between,
        f_statistic=f_statistic,
        f_p_value=f_p_value,
        intraclass_correlation=between / total if total > 0 else 0.0,
        dominant=BETWEEN if between_part > ms_within / n_total else WITHIN,
    )


# ------------------------------------------------------------------------------------------ the two-level interval


@dataclass(frozen=True)
class TwoLevelInterval:
    """The interval (ms) for the long-run mean epoch time from epochs measured in rounds.

    ``mean_ms`` is the mean of all epochs; ``interval_ms`` = mean ± ``halfwidth_ms`` (the lower end cut at zero);
    ``variance_of_mean_ms2`` the estimated variance of that mean, on ``degrees_of_freedom``. The split of that
    variance: ``within_variance_ms2`` is the within level's long-run variance per epoch (σ̂²∞, ms²; its part of the
    mean's variance is σ̂²∞ / N) and ``between_variance_ms2`` the host level's σ̂_a² (ms²), what the round means
    spread beyond it, truncated at 0; ``between_share`` the fraction of ``variance_of_mean_ms2`` from the between
    level and ``dominant`` the level that contributes more. ``within_method`` names how σ̂²∞ was estimated:
    overlapping batch means pooled over the rounds when every round has
    :data:`~gpubench.stats.config.MIN_EPOCHS` epochs, else the ANOVA within mean square (``anova_within``), which
    cannot see autocorrelation inside a round: that part of the round means' spread is then counted as between.
    ``gaps_epochs``: the time between consecutive rounds (model epochs) the interval counted, None for back to back
    (and for one round).
    """

    rounds: int
    epochs_per_round: tuple[int, ...]
    mean_ms: float
    interval_ms: tuple[float, float]
    halfwidth_ms: float
    degrees_of_freedom: float
    variance_of_mean_ms2: float
    within_variance_ms2: float
    within_degrees_of_freedom: float
    within_method: str
    between_variance_ms2: float
    between_share: float
    method: str
    gaps_epochs: tuple[float, ...] | None = None

    @property
    def dominant(self) -> str:
        """``between`` when the host level contributes more than half the mean's variance, else ``within``."""
        return BETWEEN if self.between_share > 0.5 else WITHIN


WITHIN_OBM = "overlapping_batch_means_pooled"
WITHIN_ANOVA = "anova_within"


def _within_level(rounds: list[np.ndarray]) -> tuple[float, float, str]:
    """The within level's long-run variance per epoch (ms²), its degrees of freedom and how it was estimated:
    OBM pooled over the rounds (each round centred on its own mean, weighted by its degrees of freedom) when every
    round is long enough for OBM, else the ANOVA within mean square on N − R degrees of freedom."""
    if all(v.size >= MIN_EPOCHS for v in rounds):
        pieces = [intervals.long_run_variance(v) for v in rounds]
        dof = sum(d for _, d in pieces)
        return sum(var * d for var, d in pieces) / dof, dof, WITHIN_OBM
    n_total = sum(v.size for v in rounds)
    if n_total - len(rounds) < 1:
        raise ValueError("the within level needs a round of at least 2 epochs")
    ss = sum(float(((v - v.mean()) ** 2).sum()) for v in rounds)
    return ss / (n_total - len(rounds)), float(n_total - len(rounds)), WITHIN_ANOVA


def round_means_design(
    counts: Sequence[int], gaps_epochs: Sequence[float] | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The round means' regression for the mean of all epochs: design 1 (R × 1), estimator the weights
    w_i = n_i / N (1 × R), and the round means' correlation under AR(1) epochs at :data:`DRIFT_AR1_BOUND` carried
    through ``gaps_epochs`` (None: back to back), :func:`~gpubench.stats.correlated.round_means_correlation`."""
    r = len(counts)
    gaps = [0.0] * (r - 1) if gaps_epochs is None else list(gaps_epochs)
    weights = np.array(counts, dtype=float) / sum(counts)
    return np.ones((r, 1)), weights[None, :], round_means_correlation(counts, gaps, DRIFT_AR1_BOUND)


def two_level_interval(
    rounds_ms: Sequence[Sequence[float]], confidence_level: float, gaps_epochs: Sequence[float] | None = None
) -> TwoLevelInterval:
    """The interval (ms) for the long-run mean epoch time from R rounds: Student-t on the round means, their
    correlation counted. ``gaps_epochs``: the time between consecutive rounds in the model's epochs
    (:func:`round_gaps_epochs`); None: back to back, the case that correlates the rounds most.

    With R >= 2 rounds: the mean of all epochs ȳ = Σ w_i ȳ_i (w_i = n_i / N). Its variance is the drift test's
    algebra with an intercept only (:func:`~gpubench.stats.correlated.correlated_estimate`): the round means' errors
    have covariance σ² C, C = A Σ A' with Σ the AR(1) correlation at ρ = :data:`DRIFT_AR1_BOUND` carried through
    the model's gaps (A averages each round); σ̂² = RSS / tr(BC) (RSS = Σ (ȳ_i − ȳ)², B = M'M, M = I − 1w'),
    V = σ̂² w'Cw, and ȳ ± t(ν) √V with Satterthwaite's ν = tr(BC)² / tr((BC)²).

    Why. A model's AR(1) epochs run on across a short gap, so neighbouring round means correlate positively: their
    spread is smaller, and the mean's variance larger, than for independent means. With one model (every
    ``model=custom`` run) the later rounds follow one another at once, and Student-t on R − 1 degrees of freedom
    (the interval of 2026-12-02, which took the means as independent) covered 0.784 at 5 x 4 and ρ = 0.8 (exact,
    normal means). With the rounds far apart (the four-model round-robin, ~15 epochs between a model's rounds)
    C ≈ c·I and this is that interval: equal to it for balanced rounds and infinite gaps.

    The host level on top (a_i ~ N(0, σ_a²) per round, independent) keeps it conservative: it adds σ_a² tr(B) to
    E[RSS] and σ_a² w'w to Var(ȳ), so the estimate's host part is σ_a² w'Cw tr(B) / tr(BC), at least σ_a² w'w
    whenever C's off-diagonal correlations are positive (balanced: w'Cw tr(M) / tr(MC) >= w'w ⟺ 1'C1 >= tr(C)).
    A true ρ under the bound is covered too, more widely than needed (the price of bounding ρ, not estimating it
    from 4-epoch rounds). The half-width against the independent-means t interval, fixed by the design: 2.14 times
    at 5 x 4 back to back, 1.29 at 4 epochs apart (two models), 1.02 at 15 (four models).
    ``benchmarks/statistics_coverage.py --only-two-level --two-level-gaps 0 15`` (1000 ms × (1 + h_r + CV · AR(1)),
    CV 5%, ρ 0 / 0.5 / 0.8, σ_h 0-10%, 2,000 runs a cell; ``benchmarks/results/2026-12-03-single-model-coverage.md``):
    back to back it covers 0.961-0.998 at 5 x 4 and 4 x 5 and 0.951-0.966 at 2 x 10 (the total's bound, its upper
    end at 97.5%, 0.979-0.998), where the independent-means t covered 0.784-0.959 (its upper end 0.886 at 5 x 4,
    ρ = 0.8); 15 epochs apart 0.945-0.962 (upper 0.968-0.983), its half-width within 2% of that t's. The price back
    to back, 5 x 4, σ_h = 0: a median half-width of ±6.2 / 8.4 / 8.4% at ρ = 0 / 0.5 / 0.8 against ±2.9 / 3.9 /
    3.9%.

    The variance split is reported, not used: σ̂²∞ within (OBM pooled over the rounds, or the ANOVA within mean
    square for short rounds), σ̂_a² = (V − σ̂²∞ / N) / Σ w_i² between (truncated at 0), ``between_share``.

    With one round it is :func:`gpubench.stats.intervals.decision_interval` on that round (needs
    :data:`~gpubench.stats.config.MIN_EPOCHS` epochs), whose between level is invisible (``between_share`` 0).
    Rounds of one epoch are refused (the within level needs two).
    """
    _check_level(confidence_level)
    rounds = _rounds(rounds_ms, min_epochs=2)
    counts = tuple(int(v.size) for v in rounds)
    r = len(rounds)
    gaps = None if gaps_epochs is None else tuple(float(g) for g in gaps_epochs)
    if r == 1:
        (values,) = rounds
        low, high = intervals.decision_interval(values, confidence_level)
        variance, dof = intervals.long_run_variance(values)
        mean_ms = float(values.mean())
        return TwoLevelInterval(
            rounds=1,
            epochs_per_round=counts,
            mean_ms=mean_ms,
            interval_ms=(low, high),
            halfwidth_ms=high - mean_ms,
            degrees_of_freedom=dof,
            variance_of_mean_ms2=variance / values.size,
            within_variance_ms2=variance,
            within_degrees_of_freedom=dof,
            within_method=WITHIN_OBM,
            between_variance_ms2=0.0,
            between_share=0.0,
            method=intervals.METHOD_OVERLAPPING_BATCH_MEANS,
            gaps_epochs=gaps,
        )
    design, estimator, correlation = round_means_design(counts, gaps)
    fit = correlated_estimate(np.array([v.mean() for v in rounds]), design, estimator, correlation)
    mean_ms, variance_of_mean = fit.estimate, fit.variance
    within, within_dof, within_method = _within_level(rounds)
    between_part = max(variance_of_mean - within / sum(counts), 0.0)
    halfwidth_ms = float(sps.t.ppf(0.5 + confidence_level / 2.0, fit.degrees_of_freedom)) * math.sqrt(variance_of_mean)
    return TwoLevelInterval(
        rounds=r,
        epochs_per_round=counts,
        mean_ms=mean_ms,
        interval_ms=(max(mean_ms - halfwidth_ms, 0.0), mean_ms + halfwidth_ms),
        halfwidth_ms=halfwidth_ms,
        degrees_of_freedom=fit.degrees_of_freedom,
        variance_of_mean_ms2=variance_of_mean,
        within_variance_ms2=within,
        within_degrees_of_freedom=within_dof,
        within_method=within_method,
        between_variance_ms2=between_part / float(estimator[0] @ estimator[0]),
        between_share=between_part / variance_of_mean if variance_of_mean > 0 else 0.0,
        method=METHOD_ROUND_MEANS_AR1,
        gaps_epochs=gaps,
    )


def planning_gap_epochs(gaps_epochs: Sequence[float] | None) -> float:
    """The gap (model epochs) the planning puts between a model's rounds: the smallest it measured, the schedule
    at its most correlated (0, back to back, when the gaps are unknown)."""
    return min(gaps_epochs) if gaps_epochs else 0.0


def halfwidth_ratio_after(
    epochs_per_round: Sequence[int],
    gaps_epochs: Sequence[float] | None,
    rounds: int,
    round_epochs: int,
    confidence_level: float,
    *,
    degrees_of_freedom: float | None = None,
) -> float:
    """How many times the measured half-width the two-level interval would have after ``rounds`` rounds of
    ``round_epochs`` epochs, its scale σ̂² held: t(ν') √(w'C'w') / (t(ν) √(w'Cw)), both designs taken balanced
    (the measured one as its R rounds of the mean round length) and evenly spaced at
    :func:`planning_gap_epochs` of the measured ``gaps_epochs``, under the interval's own correlation model
    (:func:`~gpubench.stats.correlated.balanced_mean_shape`, O(R)). ν' is that design's Satterthwaite degrees of
    freedom unless ``degrees_of_freedom`` is given (a two-stage rule that keeps the first stage's variance keeps
    its degrees of freedom). 1 at the measured design. Longer future rounds average more epochs under the AR(1)
    bound but not more host levels: plan more rounds, not longer ones."""
    _check_level(confidence_level)
    measured = len(epochs_per_round)
    if measured < 2 or rounds < 2 or round_epochs < 1:
        raise ValueError(
            f"need at least 2 rounds measured and planned, of at least 1 epoch; got {measured} measured, "
            f"{rounds} round(s) of {round_epochs} planned"
        )
    gap = planning_gap_epochs(gaps_epochs)
    measured_length = max(1, round(sum(epochs_per_round) / measured))
    w_c_w, dof = balanced_mean_shape(measured, measured_length, gap, DRIFT_AR1_BOUND)
    after, dof_after = balanced_mean_shape(rounds, round_epochs, gap, DRIFT_AR1_BOUND)
    if degrees_of_freedom is not None:
        if not degrees_of_freedom > 0:
            raise ValueError(f"degrees_of_freedom must be positive, got {degrees_of_freedom!r}")
        dof_after = degrees_of_freedom
    level = 0.5 + confidence_level / 2.0
    return float(sps.t.ppf(level, dof_after) / sps.t.ppf(level, dof)) * math.sqrt(after / w_c_w)


def halfwidth_after(
    interval: TwoLevelInterval,
    rounds: int,
    epochs_per_round: int,
    confidence_level: float,
    *,
    degrees_of_freedom: float | None = None,
) -> float:
    """The half-width (ms) the two-level ``interval`` would have after ``rounds`` rounds of ``epochs_per_round``
    epochs: its measured half-width times :func:`halfwidth_ratio_after` (the same variance and degrees-of-freedom
    model as the interval, the scale held; the measured half-width at the measured design). A planning figure:
    more rounds estimate the scale anew. Needs an interval of at least two rounds."""
    ratio = halfwidth_ratio_after(
        interval.epochs_per_round,
        interval.gaps_epochs,
        rounds,
        epochs_per_round,
        confidence_level,
        degrees_of_freedom=degrees_of_freedom,
    )
    return interval.halfwidth_ms * ratio


def new_run_interval(
    rounds_ms: Sequence[Sequence[float]],
    epochs: int,
    confidence_level: float,
    gaps_epochs: Sequence[float] | None = None,
) -> tuple[float, float]:
    """A prediction interval (ms) for the mean epoch time of one new, independent training of ``epochs`` epochs,
    from rounds ``gaps_epochs`` apart (as in :func:`two_level_interval`; None: back to back).

    The new training has its own host level and its own epochs, so its mean differs from the measured grand mean
    by the grand mean's error, a new a ~ N(0, σ_a²) and the mean of ``epochs`` epochs: variance
    V + σ_a² + σ²∞ / e, V the two-level interval's (its rounds' correlation counted). The estimate is
    V (1 + 1/Σ w_i²) + σ̂²∞ max(0, 1/e − 1/(N Σ w_i²)): the round means' spread V / Σ w_i² (s² when balanced)
    stands for σ_a² plus a round's own epochs, so for a new training as long as a round (e = m, balanced, rounds
    far apart) it is the classical s² (1 + 1/R) on R − 1 degrees of freedom, exact for normal round means, and for
    a longer one conservative by at most σ̂²∞ (1/m − 1/e). Two readings that looked closer are not used: the
    host level σ̂_a² = (V − σ̂²∞/N) / Σ w_i² truncated at 0 (4 x 5 rounds 15 epochs apart, a 5% host level, 80 new
    epochs: the 8% of runs where it truncated covered 45%, against 70% with the spread;
    ``benchmarks/new_run_truncation.py``), and the negative within part
    kept (Satterthwaite's degrees of freedom for a difference fall to near 0: the H200 GPT LM's ±0.15% epochs got a
    ±23% bound). The degrees of freedom are Satterthwaite's over the two parts, never more than V's: the round
    means carry the host level. ``benchmarks/statistics_coverage.py --only-two-level --two-level-gaps 0 15``
    (5 x 4, 4 x 5, 2 x 10; ρ 0 / 0.5 / 0.8; σ_h 0-10%; CV 5%; 4 x N new epochs; 2,000 runs a cell,
    ``benchmarks/results/2026-12-03-single-model-coverage.md``) covers 0.950-1.000 in every cell (0.961-1.000 back
    to back). The lower end is cut at zero. Needs at least two rounds (one round shows no host level).
    """
    _check_level(confidence_level)
    if epochs < 1:
        raise ValueError(f"epochs must be at least 1, got {epochs}")
    interval = two_level_interval(rounds_ms, confidence_level, gaps_epochs)
    if interval.rounds < 2:
        raise ValueError("a prediction for a new training needs at least 2 rounds: one round shows no host level")
    counts = np.array(interval.epochs_per_round, dtype=float)
    n_total = float(counts.sum())
    sum_w2 = float((counts / n_total) @ (counts / n_total))
    v, w = interval.variance_of_mean_ms2, interval.within_variance_ms2
    # Neither σ̂_a² truncated at 0 nor the negative within part (e > m): the docstring says what each cost.
    pieces = (v * (1.0 + 1.0 / sum_w2), max(1.0 / epochs - 1.0 / (n_total * sum_w2), 0.0) * w)
    variance = sum(pieces)
    dofs = (interval.degrees_of_freedom, interval.within_degrees_of_freedom)
    denominator = sum(p**2 / d for p, d in zip(pieces, dofs, strict=True))
    dof = interval.degrees_of_freedom
    if denominator > 0:
        dof = min(variance**2 / denominator, dof)
    halfwidth = float(sps.t.ppf(0.5 + confidence_level / 2.0, dof)) * math.sqrt(variance)
    return max(interval.mean_ms - halfwidth, 0.0), interval.mean_ms + halfwidth


# ----------------------------------------------------------------------------------------------------- drift


@dataclass(frozen=True)
class DriftTest:
    """A test for a linear trend in epoch times (ms) against the epoch index (the model's own epochs, in order).

    ``slope_ms_per_epoch`` and ``slope_standard_error_ms`` (ms per epoch) on ``degrees_of_freedom``; ``p_value``
    two-sided; ``detected`` when p < 1 − level; ``shift_ms`` = slope × (n − 1), the level change across the measured
    epochs the slope implies. ``method`` is one of the ``METHOD_DRIFT_*`` names.
    """

    slope_ms_per_epoch: float
    slope_standard_error_ms: float
    degrees_of_freedom: float
    p_value: float
    detected: bool
    method: str
    shift_ms: float


def ols_slope_test(y: np.ndarray, design: np.ndarray, covariance: np.ndarray) -> tuple[float, float, float, float]:
    """OLS of ``y`` on ``design`` (whose last column is the regressor tested), with the slope's variance
    under errors of correlation matrix ``covariance`` up to a scale σ²: ``correlated_estimate``
    (:mod:`gpubench.stats.correlated`) with the pseudo-inverse, σ̂² = RSS / tr(MΣ) and Satterthwaite's degrees of
    freedom tr(MΣ)² / tr((MΣ)²). With Σ = I these are the textbook OLS slope, standard error and n − p degrees of
    freedom. Returns (slope, standard error, degrees of freedom, two-sided p-value)."""
    fit = correlated_estimate(y, design, np.linalg.pinv(design), covariance)
    standard_error = math.sqrt(fit.variance)
    slope, dof = fit.estimate, fit.degrees_of_freedom
    if standard_error > 0:
        # Student-t's tail straight from scipy.special: sps.t.sf's argument checks cost 20x the tail itself, and
        # the simulations call this test a million times.
        p_value = float(2.0 * special.stdtr(dof, -abs(slope) / standard_error))
    else:
        p_value = 0.0 if slope != 0 else 1.0
    return slope, standard_error, dof, p_value


def round_gaps_epochs(started_s: Sequence[float], epochs: Sequence[int], mean_epoch_ms: Sequence[float]) -> list[float]:
    """The time between consecutive rounds of one model, in that model's epochs: round i ends at
    ``started_s[i]`` + ``epochs[i]`` × ``mean_epoch_ms[i]`` / 1000 (s), and the gap to round i + 1's start is divided
    by the model's mean epoch over all rounds; negative gaps (clock rounding) count as 0. For :func:`drift_test`."""
    if not len(started_s) == len(epochs) == len(mean_epoch_ms):
        raise ValueError("started_s, epochs and mean_epoch_ms must have one value per round")
    total_ms = sum(e * m for e, m in zip(epochs, mean_epoch_ms, strict=True))
    if sum(epochs) < 1 or not total_ms > 0:
        raise ValueError("the rounds must hold at least one epoch of positive duration")
    epoch_s = total_ms / sum(epochs) / 1000.0
    ends = [s + e * m / 1000.0 for s, e, m in zip(started_s, epochs, mean_epoch_ms, strict=True)]
    return [max(0.0, (later - end) / epoch_s) for end, later in zip(ends[:-1], started_s[1:], strict=True)]


def drift_test(
    times_ms: Sequence[float],
    confidence_level: float = 0.95,
    rounds: Sequence[int] | None = None,
    gaps_epochs: Sequence[float] | None = None,
) -> DriftTest:
    """Test epoch times (ms, in measurement order) for a linear drift, keeping the false-positive rate at or under
    1 − ``confidence_level`` on autocorrelated epochs. ``rounds``: epochs per round, in order, summing to n;
    ``gaps_epochs``: the time between consecutive rounds in the model's epochs (:func:`round_gaps_epochs`; None:
    the rounds followed one another at once, the case that correlates them most).

    The epochs' dependence is bounded, not estimated: an AR(1) process at ρ = :data:`DRIFT_AR1_BOUND` per epoch,
    running on through the gaps between rounds (:func:`ar1_timeline_correlation`), plus, between rounds, any host
    level. Σ below is that AR(1) correlation.

    * Three rounds or more: the OLS slope of the round means on each round's centre epoch index, its standard error
      and Satterthwaite degrees of freedom (:func:`ols_slope_test`) under the round means' correlation A Σ A'
      (A averages each round). A host level per round adds independent noise to the means, which the test counts
      as noise, not drift. Why not independent round means on R − 2 degrees of freedom (versions of 2026-12-02):
      the AR(1) epochs carry across a short gap, so neighbouring round means correlate positively, the slope's
      variance is larger and the residuals' smaller than that test assumes. Its exact false-positive rate at 5 x 4
      with no host level (Imhof's integral over the test's null distribution,
      ``benchmarks/results/2026-12-03-drift-false-positives.md``) is 0.052 at ρ = 0.8 with 15 other epochs between
      rounds (the four-model schedule), but 0.076 / 0.154 at ρ = 0.5 / 0.8 with the rounds back to back (one
      model: its later rounds follow one another at once). With the gaps counted it is 0.048-0.050 at 15 epochs
      apart and 0.010-0.039 back to back (at or under the level: ρ = 0.8 and no host level is the worst case the
      bound allows). The price is power where the rounds are back to back: a 10% ramp over 5 x 4 epochs at CV 5%
      and ρ = 0.8 is flagged in 14% of runs against 39% by the test that takes the means as independent (at 15
      epochs apart, 19% against 20%).
    * One block (or two rounds, each with its own intercept): the OLS slope on the epoch index, its standard error
      under Σ (:func:`ols_slope_test`). At that ρ its level is right, at
      smaller ρ it is conservative. Estimating the dependence instead does not hold the level at n = 20: on
      stationary AR(1) epochs at ρ = 0 / 0.5 / 0.8 (``benchmarks/statistics_coverage.py --two-level``, 2,000 runs)
      Kendall's tau (the test this replaces) flags 4.6 / 18.8 / 45.6% of runs, Mann-Kendall with Hamed & Rao's
      (1998) correction 9.4 / 21.2 / 39.5%, an OLS slope with a Bartlett HAC error at fixed-b critical values
      (Kiefer & Vogelsang 2005, b = 1) 4.3 / 9.3 / 21.2%; this test 0.0 / 0.1 / 3.4%. The price is power: a 10%
      ramp over 20 epochs at CV 5% is flagged in 0.2 / 4.4 / 20% of runs (at CV 2%: 52 / 65 / 82%), against
      33 / 19 / 14% for the round means of 4 x 5 and 46 / 26 / 19% of 5 x 4 (rounds 15 epochs apart).
    * Fewer than four epochs (or too few for the rounds' intercepts): no test (p = 1).

    All epochs equal: slope 0, p = 1.
    """
    _check_level(confidence_level)
    values = np.asarray(times_ms, dtype=float)
    if values.ndim != 1 or not np.all(np.isfinite(values)):
        raise ValueError("epoch times must be a 1-D sequence of finite milliseconds")
    n = values.size
    counts = [n] if rounds is None else [int(c) for c in rounds]
    parts = split_rounds(values, counts)
    gaps = [0.0] * (len(counts) - 1) if gaps_epochs is None else list(gaps_epochs)
    if len(counts) >= 3:
        starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
        centres = starts + (np.array(counts) - 1) / 2.0
        y = np.array([p.mean() for p in parts])
        design = np.column_stack([np.ones(len(counts)), centres])
        correlation, method = round_means_correlation(counts, gaps, DRIFT_AR1_BOUND), METHOD_DRIFT_ROUND_MEANS
    elif n - len(counts) - 1 >= 2:
        y = values
        design = np.column_stack([np.repeat(np.eye(len(counts)), counts, axis=0), np.arange(n, dtype=float)])
        correlation, method = ar1_timeline_correlation(counts, gaps, DRIFT_AR1_BOUND), METHOD_DRIFT_AR1_BOUND
    else:
        return DriftTest(0.0, 0.0, 0.0, 1.0, False, METHOD_DRIFT_TOO_FEW, 0.0)
    if np.ptp(values) == 0:
        # No variation at all: the slope is 0 and rounding must not turn it into a "significant" one.
        return DriftTest(0.0, 0.0, float(design.shape[0] - design.shape[1]), 1.0, False, method, 0.0)
    slope, se, dof, p_value = ols_slope_test(y, design, correlation)
    return DriftTest(
        slope_ms_per_epoch=slope,
        slope_standard_error_ms=se,
        degrees_of_freedom=dof,
        p_value=p_value,
        detected=p_value < 1.0 - confidence_level,
        method=method,
        shift_ms=slope * (n - 1),
    )
