"""The replicated-rounds section of ``benchmarks/statistics_coverage.py`` (``--two-level``): a seeded simulation of
epochs measured in rounds with a host level per round, for :mod:`gpubench.stats.rounds`.

Epoch times are 1000 ms × (1 + h_r + CV · x_t) + a linear ramp, h_r ~ N(0, σ_h) the round's host level and x a
stationary AR(1) process of unit variance carried across the model's rounds with ``gap`` epochs (the other models'
rounds) between them. The true long-run mean is 1000 ms (the host levels average out over a long training).
"""

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import integrate
from scipy import stats as sps

from gpubench.stats.intervals import decision_interval
from gpubench.stats.rounds import (
    DRIFT_AR1_BOUND,
    ar1_timeline_correlation,
    drift_test,
    new_run_interval,
    two_level_interval,
)

MEAN_MS = 1000.0
#: Host levels of 20% can (rarely) push an epoch to zero or below; a real epoch takes time, so it is floored here.
_MIN_EPOCH_MS = 0.01 * MEAN_MS
#: Today's rule, for the dead band's comparison: the margin on the total is never under 12% of the epochs' time.
_OLD_RELATIVE_MARGIN_FLOOR = 0.12


@dataclass(frozen=True)
class Design:
    """R rounds of m epochs for one model."""

    rounds: int
    epochs: int

    @property
    def label(self) -> str:
        return f"{self.rounds}x{self.epochs}"

    @property
    def counts(self) -> list[int]:
        return [self.epochs] * self.rounds

    def gaps(self, gap: float) -> list[float]:
        """The drift test's gaps between the rounds: ``gap`` epochs each."""
        return [float(gap)] * (self.rounds - 1)


def ar1(rng: np.random.Generator, runs: int, n: int, rho: float) -> np.ndarray:
    """``runs`` × ``n`` stationary AR(1) series of unit variance and lag-1 correlation ``rho``."""
    shocks = rng.standard_normal((runs, n))
    x = np.empty_like(shocks)
    x[:, 0] = shocks[:, 0]
    scale = math.sqrt(1.0 - rho**2)
    for t in range(1, n):
        x[:, t] = rho * x[:, t - 1] + scale * shocks[:, t]
    return x


def two_level_epochs(
    rng: np.random.Generator,
    runs: int,
    design: Design,
    rho: float,
    cv: float,
    host_sigma: float,
    gap: int,
    ramp: float = 0.0,
    host_phi: float = 0.0,
    first_excess: float = 0.0,
) -> np.ndarray:
    """``runs`` × R × m epoch times (ms); ``ramp`` is the drift's rise over the model's measured epochs, as a
    fraction of the mean (0: stationary); ``host_phi`` the host level's AR(1) coefficient from round to round
    (stationary, marginal σ_h; 0: independent rounds); ``first_excess`` how much slower (fraction) each later round's
    first epoch after a gap is."""
    r, m = design.rounds, design.epochs
    x = ar1(rng, runs, r * (m + gap), rho).reshape(runs, r, m + gap)[:, :, :m]
    host = host_sigma * ar1(rng, runs, r, host_phi)[:, :, None]
    own_index = np.arange(r * m, dtype=float).reshape(r, m)
    drift = ramp * own_index / max(r * m - 1, 1)
    slow = np.zeros((r, m))
    if gap > 0:
        slow[1:, 0] = first_excess
    return np.maximum(MEAN_MS * (1.0 + host + cv * x + drift) * (1.0 + slow), _MIN_EPOCH_MS)


@dataclass(frozen=True)
class HistoryCell:
    """One cell of a drifting host: the bound's coverage (both ends, upper end alone) and median half-width without
    and with ``earlier`` earlier runs in the history, validate's coverage with the history, and the drift test's
    false-positive rate."""

    coverage: float
    upper_coverage: float
    halfwidth: float
    history_coverage: float
    history_upper_coverage: float
    history_halfwidth: float
    new_run_coverage: float
    drift_fpr: float


def history_cell(
    rng: np.random.Generator,
    runs: int,
    design: Design,
    rho: float,
    cv: float,
    host_sigma: float,
    host_phi: float,
    gap: int,
    level: float,
    earlier: int,
    new_run_factor: int,
    first_excess: float = 0.0,
) -> HistoryCell:
    """Each run's ``earlier`` earlier runs are independent runs of the same process (hours apart: their own host
    levels), summarised as the history stores them; the new training has its own host level and AR(1) epochs."""
    gaps = design.gaps(gap)
    epochs = two_level_epochs(rng, runs, design, rho, cv, host_sigma, gap, 0.0, host_phi, first_excess)
    history = two_level_epochs(rng, runs * earlier, design, rho, cv, host_sigma, gap, 0.0, host_phi, first_excess)
    new_epochs = new_run_factor * design.rounds * design.epochs
    new_means = MEAN_MS * (1.0 + rng.normal(0.0, host_sigma, runs) + cv * ar1(rng, runs, new_epochs, rho).mean(axis=1))
    summaries = []
    for run in history:
        interval = two_level_interval(run, level, gaps, from_run=True)
        summaries.append((interval.mean_ms, interval.variance_of_mean_ms2 / interval.mean_ms**2))
    rates = np.zeros(7)
    halfwidths: list[list[float]] = [[], []]
    for k, (run, new_mean) in enumerate(zip(epochs, new_means, strict=True)):
        earlier_runs = summaries[k * earlier : (k + 1) * earlier]
        alone = two_level_interval(run, level, gaps, from_run=True)
        told = two_level_interval(run, level, gaps, from_run=True, earlier_runs=earlier_runs)
        for i, interval in enumerate((alone, told)):
            low, high = interval.interval_ms
            rates[2 * i] += low <= MEAN_MS <= high
            rates[2 * i + 1] += high >= MEAN_MS
            halfwidths[i].append(interval.halfwidth_ms / interval.mean_ms)
        p_low, p_high = new_run_interval(run, new_epochs, level, gaps, from_run=True, earlier_runs=earlier_runs)
        rates[4] += p_low <= new_mean <= p_high
        rates[5] += drift_test(run.ravel(), level, design.counts, gaps).detected
    rates /= runs
    return HistoryCell(
        coverage=rates[0],
        upper_coverage=rates[1],
        halfwidth=float(np.median(halfwidths[0])),
        history_coverage=rates[2],
        history_upper_coverage=rates[3],
        history_halfwidth=float(np.median(halfwidths[1])),
        new_run_coverage=rates[4],
        drift_fpr=rates[5],
    )


def satterthwaite_interval(rounds: np.ndarray, level: float, gaps: list[float]) -> tuple[float, float]:
    """The rejected candidate: within level (pooled σ̂²∞ / N) plus between level (σ̂_a², truncated at 0), Satterthwaite
    degrees of freedom. Untruncated it is the round-means interval; truncated, the within level alone."""
    interval = two_level_interval(rounds, level, gaps)
    within = interval.within_variance_ms2 / rounds.size
    if interval.variance_of_mean_ms2 >= within:
        return interval.interval_ms
    half = float(sps.t.ppf(0.5 + level / 2.0, interval.within_degrees_of_freedom)) * math.sqrt(within)
    return interval.mean_ms - half, interval.mean_ms + half


@dataclass(frozen=True)
class Cell:
    """Rates over the runs of one cell (fractions) and medians (fractions of the mean)."""

    coverage: float
    upper_coverage: float
    halfwidth: float
    between_share: float
    independent_coverage: float
    independent_upper_coverage: float
    independent_halfwidth: float
    satterthwaite_coverage: float
    satterthwaite_halfwidth: float
    one_level_coverage: float
    drift_fpr: float
    drift_power: float
    new_run_coverage: float | None


def two_level_cell(
    rng: np.random.Generator,
    runs: int,
    design: Design,
    rho: float,
    cv: float,
    host_sigma: float,
    gap: int,
    level: float,
    ramp: float,
    new_run_factor: int,
) -> Cell:
    """One cell: the two-level interval told the rounds' gaps, the same interval with the round means taken as
    independent (infinite gaps: Student-t on R − 1 degrees of freedom, 2026-12-02's), the rejected Satterthwaite
    candidate, the one-level OBM interval that ignores the rounds, the drift test without and with a ramp, and the
    prediction for a new training of ``new_run_factor`` × N epochs (its own host level and AR(1) epochs)."""
    epochs = two_level_epochs(rng, runs, design, rho, cv, host_sigma, gap)
    ramped = two_level_epochs(rng, runs, design, rho, cv, host_sigma, gap, ramp)
    n_total = design.rounds * design.epochs
    new_epochs = new_run_factor * n_total
    new_means = MEAN_MS * (1.0 + rng.normal(0.0, host_sigma, runs) + cv * ar1(rng, runs, new_epochs, rho).mean(axis=1))
    gaps = design.gaps(gap)
    covered = upper = satterthwaite = one_level = flagged = power = predicted = 0
    independent = independent_upper = 0
    halfwidths, shares, satterthwaite_halfwidths, independent_halfwidths = [], [], [], []
    for run, ramp_run, new_mean in zip(epochs, ramped, new_means, strict=True):
        interval = two_level_interval(run, level, gaps, from_run=True)
        low, high = interval.interval_ms
        covered += low <= MEAN_MS <= high
        upper += high >= MEAN_MS
        halfwidths.append(interval.halfwidth_ms / interval.mean_ms)
        shares.append(interval.between_share)
        as_independent = two_level_interval(run, level, design.gaps(math.inf))
        i_low, i_high = as_independent.interval_ms
        independent += i_low <= MEAN_MS <= i_high
        independent_upper += i_high >= MEAN_MS
        independent_halfwidths.append(as_independent.halfwidth_ms / as_independent.mean_ms)
        s_low, s_high = satterthwaite_interval(run, level, gaps)
        satterthwaite += s_low <= MEAN_MS <= s_high
        satterthwaite_halfwidths.append((s_high - s_low) / 2.0 / interval.mean_ms)
        o_low, o_high = decision_interval(run.ravel(), level)
        one_level += o_low <= MEAN_MS <= o_high
        flagged += drift_test(run.ravel(), level, design.counts, gaps).detected
        power += drift_test(ramp_run.ravel(), level, design.counts, gaps).detected
        if design.rounds >= 2:
            p_low, p_high = new_run_interval(run, new_epochs, level, gaps, from_run=True)
            predicted += p_low <= new_mean <= p_high
    return Cell(
        coverage=covered / runs,
        upper_coverage=upper / runs,
        halfwidth=float(np.median(halfwidths)),
        between_share=float(np.median(shares)),
        independent_coverage=independent / runs,
        independent_upper_coverage=independent_upper / runs,
        independent_halfwidth=float(np.median(independent_halfwidths)),
        satterthwaite_coverage=satterthwaite / runs,
        satterthwaite_halfwidth=float(np.median(satterthwaite_halfwidths)),
        one_level_coverage=one_level / runs,
        drift_fpr=flagged / runs,
        drift_power=power / runs,
        new_run_coverage=predicted / runs if design.rounds >= 2 else None,
    )


# --------------------------------------------------------------------------------- drift false positives, rounds


@dataclass(frozen=True)
class DriftCell:
    """Fractions of runs flagged by :func:`drift_test` with the gaps between rounds counted (``fpr`` on stationary
    epochs, ``power`` on a ramp) and by the same slope with the round means taken as independent (gaps infinite,
    the test of 2026-12-02)."""

    fpr: float
    fpr_independent: float
    power: float
    power_independent: float


def _imhof_positive(eigenvalues: np.ndarray) -> float:
    """P(Σ λ_j z_j² > 0) for independent standard normal z (Imhof 1961, "Computing the distribution of quadratic
    forms in normal variables", Biometrika 48): 1/2 + (1/π) ∫₀^∞ sin θ(u) / (u ρ(u)) du with
    θ(u) = ½ Σ arctan(λ_j u) and ρ(u) = Π (1 + λ_j² u²)^¼."""
    # The sign of the form does not depend on its scale: scaled to a largest |λ| of 1, the integral converges at
    # the same pace whatever the units (at a CV of 2% the raw eigenvalues are ~1e-5 and quad gave up).
    lams = eigenvalues / np.abs(eigenvalues).max()
    lams = lams[np.abs(lams) > 1e-12]

    def integrand(u: float) -> float:
        return math.sin(0.5 * float(np.sum(np.arctan(lams * u)))) / (u * float(np.prod((1 + (lams * u) ** 2) ** 0.25)))

    value, _ = integrate.quad(integrand, 0.0, np.inf, limit=500)
    return 0.5 + value / math.pi


def exact_drift_fpr(
    design: Design, rho: float, cv: float, host_sigma: float, gap: float, assumed_gap: float, level: float
) -> float:
    """The exact false-positive rate of the round-means drift test (three rounds or more) on :func:`two_level_epochs`
    without a ramp, the test told the rounds are ``assumed_gap`` epochs apart (``math.inf``: independent).

    The round means y are normal with covariance S = CV² A R_ρ A' + σ_h² I (R_ρ the AR(1) correlation on the
    timeline with the true ``gap``, A the rounds' averaging; in units of the mean). The test rejects when
    (c'y)² > q² · c'Cc · y'My / tr(MC), C its assumed covariance, c the slope's row of the OLS pseudo-inverse,
    M = I − H and q the t quantile on its Satterthwaite degrees of freedom: y'By > 0 with
    B = cc' − q² c'Cc / tr(MC) · M, a quadratic form in normal variables whose tail is Imhof's integral over the
    eigenvalues of L'BL (S = LL')."""
    counts, r = design.counts, design.rounds
    averaging = np.repeat(np.eye(r), counts, axis=1) / design.epochs
    truth = cv**2 * averaging @ ar1_timeline_correlation(counts, design.gaps(gap), rho) @ averaging.T
    truth += host_sigma**2 * np.eye(r)
    assumed = averaging @ ar1_timeline_correlation(counts, design.gaps(assumed_gap), DRIFT_AR1_BOUND) @ averaging.T
    centres = np.arange(r) * design.epochs + (design.epochs - 1) / 2.0
    x = np.column_stack([np.ones(r), centres])
    pinv = np.linalg.pinv(x)
    row = pinv[-1]
    annihilator = np.eye(r) - x @ pinv
    m_c = annihilator @ assumed
    trace = float(np.trace(m_c))
    dof = trace**2 / float(np.trace(m_c @ m_c))
    quantile = float(sps.t.ppf(0.5 + level / 2.0, dof))
    form = np.outer(row, row) - quantile**2 * float(row @ assumed @ row) / trace * annihilator
    root = np.linalg.cholesky(truth)
    return _imhof_positive(np.linalg.eigvalsh(root.T @ form @ root))


def drift_cell(
    rng: np.random.Generator,
    runs: int,
    design: Design,
    rho: float,
    cv: float,
    host_sigma: float,
    gap: int,
    level: float,
    ramp: float,
) -> DriftCell:
    """The drift test's false-positive rate and power on ``runs`` seeded runs of :func:`two_level_epochs`."""
    stationary = two_level_epochs(rng, runs, design, rho, cv, host_sigma, gap).reshape(runs, -1)
    ramped = two_level_epochs(rng, runs, design, rho, cv, host_sigma, gap, ramp).reshape(runs, -1)
    counted, independent = design.gaps(gap), design.gaps(math.inf)

    def rate(epochs: np.ndarray, gaps: list[float]) -> float:
        return float(np.mean([drift_test(run, level, design.counts, gaps).detected for run in epochs]))

    return DriftCell(
        fpr=rate(stationary, counted),
        fpr_independent=rate(stationary, independent),
        power=rate(ramped, counted),
        power_independent=rate(ramped, independent),
    )


# ------------------------------------------------------------------------------------- drift candidates, one block


def mann_kendall_hamed_rao_p(x: np.ndarray) -> float:
    """Two-sided p of Mann-Kendall's S with Hamed & Rao's (1998) variance correction: S's variance times
    n/n* = 1 + 2 / (n(n−1)(n−2)) Σ_k (n−k)(n−k−1)(n−k−2) r_k over the lags whose rank autocorrelation r_k of the
    Sen-detrended series is significant at 5%."""
    n = x.size
    i, j = np.triu_indices(n, 1)
    s = float(np.sum(np.sign(x[j] - x[i])))
    sen_slope = float(np.median((x[j] - x[i]) / (j - i)))
    ranks = sps.rankdata(x - sen_slope * np.arange(n))
    ranks -= ranks.mean()
    lags = np.arange(1, n)
    acf = np.array([ranks[:-k] @ ranks[k:] for k in lags]) / float(ranks @ ranks)
    significant = np.abs(acf) > sps.norm.ppf(0.975) / math.sqrt(n)
    weights = (n - lags) * (n - lags - 1) * (n - lags - 2)
    ratio = 1.0 + 2.0 / (n * (n - 1) * (n - 2)) * float(np.sum((weights * acf)[significant]))
    variance = n * (n - 1) * (2 * n + 5) / 18.0 * max(ratio, 1e-9)
    z = (s - np.sign(s)) / math.sqrt(variance)
    return float(2.0 * sps.norm.sf(abs(z)))


def hac_slope_t(y: np.ndarray, bandwidth_fraction: float) -> np.ndarray:
    """t statistics (one per row of ``y``) of the OLS slope on the epoch index with a Bartlett-kernel HAC
    variance at bandwidth M = b·n (Kiefer & Vogelsang 2005's fixed-b setting)."""
    n = y.shape[1]
    t = np.arange(n) - (n - 1) / 2.0
    slopes = (y @ t) / float(t @ t)
    residuals = y - y.mean(axis=1, keepdims=True) - np.outer(slopes, t)
    scores = residuals * t
    bandwidth = bandwidth_fraction * n
    omega = np.sum(scores * scores, axis=1) / n
    for lag in range(1, n):
        weight = 1.0 - lag / bandwidth
        if weight <= 0:
            break
        omega += 2.0 * weight * np.sum(scores[:, lag:] * scores[:, :-lag], axis=1) / n
    variance = omega / (float(t @ t) / n) ** 2 / n
    return slopes / np.sqrt(variance)


def drift_candidates(rng: np.random.Generator, runs: int, n: int, rho: float, level: float) -> dict[str, float]:
    """False-positive rates of the drift candidates on one stationary block of ``n`` AR(1) epochs."""
    x = MEAN_MS * (1.0 + 0.05 * ar1(rng, runs, n, rho))
    # Fixed-b critical value: the statistic's quantile under independent epochs at the same n (seeded, its own rng).
    null = hac_slope_t(np.random.default_rng(0).standard_normal((20_000, n)), 1.0)
    critical = float(np.quantile(np.abs(null), level))
    alpha = 1.0 - level
    index = np.arange(n)
    return {
        "Kendall tau (today)": float(np.mean([sps.kendalltau(index, row).pvalue < alpha for row in x])),
        "Mann-Kendall, Hamed-Rao": float(np.mean([mann_kendall_hamed_rao_p(row) < alpha for row in x])),
        "OLS + Bartlett HAC, fixed-b (b=1)": float(np.mean(np.abs(hac_slope_t(x, 1.0)) > critical)),
        "OLS, AR(1) bound (chosen, one block)": float(np.mean([drift_test(row, level).detected for row in x])),
    }


# --------------------------------------------------------------------------------------------------- dead band


def gray_rates(
    relative_low: np.ndarray, relative_high: np.ndarray, totals_h: np.ndarray, local_h: float, cloud_h: float
):
    """Per true total (hours): the fraction of runs whose bounds (relative to the true total) give GRAY: neither
    upper < ``local_h`` (LOCAL) nor lower > ``cloud_h`` (CLOUD)."""
    upper = np.outer(totals_h, relative_high)
    lower = np.outer(totals_h, relative_low)
    return np.mean(~(upper < local_h) & ~(lower > cloud_h), axis=1)


def dead_band(totals_h: np.ndarray, gray: np.ndarray, local_h: float, cloud_h: float) -> tuple[str, float]:
    """The true totals outside [local, cloud] where GRAY is above 50%, as text, and their width in hours."""
    dead = (gray > 0.5) & ((totals_h < local_h) | (totals_h > cloud_h))
    step = float(totals_h[1] - totals_h[0])
    below, above = totals_h[dead & (totals_h < local_h)], totals_h[dead & (totals_h > cloud_h)]
    parts = []
    if below.size:
        parts.append(f"{below.min():.1f}-{local_h:g} h")
    if above.size:
        parts.append(f"{cloud_h:g}-{above.max():.1f} h")
    return (", ".join(parts) or "none"), float(dead.sum()) * step


def relative_bounds(epochs: np.ndarray, level: float, method: Callable) -> tuple[np.ndarray, np.ndarray]:
    """Each run's (lower, upper) bound on the total as a fraction of the true total (= bounds of the mean / mean)."""
    bounds = np.array([method(run, level) for run in epochs])
    return bounds[:, 0] / MEAN_MS, bounds[:, 1] / MEAN_MS


def floored_bounds(run: np.ndarray, level: float) -> tuple[float, float]:
    """Today's bounds of the mean: the one-level decision interval on all epochs, its margin at least 12%."""
    values = run.ravel()
    _, high = decision_interval(values, level)
    mean = float(values.mean())
    margin = max(_OLD_RELATIVE_MARGIN_FLOOR * mean, high - mean)
    return mean - margin, mean + margin


def two_level_bounds(run: np.ndarray, level: float, gaps: list[float]) -> tuple[float, float]:
    return two_level_interval(run, level, gaps, from_run=True).interval_ms
