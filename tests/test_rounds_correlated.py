"""The two-level interval under the round means' correlation (gpubench.stats.rounds, gpubench.stats.correlated):
the round means' AR(1) correlation in closed form against the averaged timeline, its O(R) balanced form against the
matrix algebra, a hand-worked interval, the reduction to Student-t on independent round means, the host level's
conservative reading, and a seeded coverage simulation of one model's back-to-back rounds."""

import math

import numpy as np
import pytest
from scipy import stats as sps

from gpubench.stats.correlated import (
    ar1_timeline_correlation,
    balanced_mean_shape,
    round_means_correlation,
    variance_shape,
)
from gpubench.stats.epoch_times import summarize_epoch_times
from gpubench.stats.rounds import DRIFT_AR1_BOUND, split_rounds, two_level_interval


def _averaging(counts: list[int]) -> np.ndarray:
    return np.repeat(np.eye(len(counts)), counts, axis=1) / np.array(counts, dtype=float)[:, None]


@pytest.mark.parametrize(
    ("counts", "gaps", "rho"),
    [
        ([4, 4, 4, 4, 4], [0.0] * 4, 0.8),
        ([6, 6, 5, 5], [3.0, 15.0, 2.5], 0.5),
        ([3, 4, 2], [math.inf, 1.0], 0.8),
        ([4, 4], [0.0], 0.0),
        ([1, 2, 3], [math.inf, math.inf], 0.8),
    ],
)
def test_round_means_correlation_is_the_averaged_timeline_correlation(
    counts: list[int], gaps: list[float], rho: float
) -> None:
    averaging = _averaging(counts)
    expected = averaging @ ar1_timeline_correlation(counts, gaps, rho) @ averaging.T
    assert round_means_correlation(counts, gaps, rho) == pytest.approx(expected, abs=1e-14)


@pytest.mark.parametrize(("rounds", "epochs", "gap"), [(5, 4, 0.0), (7, 3, 2.5), (3, 10, math.inf), (2, 10, 0.0)])
def test_the_balanced_shape_is_the_matrix_algebra_on_the_balanced_design(rounds: int, epochs: int, gap: float) -> None:
    correlation = round_means_correlation([epochs] * rounds, [gap] * (rounds - 1), DRIFT_AR1_BOUND)
    w_c_w, _, dof = variance_shape(np.ones((rounds, 1)), np.full((1, rounds), 1.0 / rounds), correlation)
    fast_w_c_w, fast_dof = balanced_mean_shape(rounds, epochs, gap, DRIFT_AR1_BOUND)
    assert fast_w_c_w == pytest.approx(w_c_w, rel=1e-12) and fast_dof == pytest.approx(dof, rel=1e-12)
    # Two rounds leave one residual: one degree of freedom whatever the correlation.
    if rounds == 2:
        assert fast_dof == pytest.approx(1.0)


def test_a_hand_worked_interval_of_three_back_to_back_rounds() -> None:
    # Rounds of 2 epochs back to back, AR(1) at 0.8: positions 0-5. By hand, the round means' correlation:
    #   a round's own: (2 + 2·0.8) / 4 = 0.9;
    #   neighbours: epochs 2, 3, 1 and 2 apart, (0.64 + 0.512 + 0.8 + 0.64) / 4 = 0.648;
    #   two apart: epochs 4, 5, 3 and 4 apart, (0.4096 + 0.32768 + 0.512 + 0.4096) / 4 = 0.41472.
    c = np.array([[0.9, 0.648, 0.41472], [0.648, 0.9, 0.648], [0.41472, 0.648, 0.9]])
    assert round_means_correlation([2, 2, 2], [0.0, 0.0], DRIFT_AR1_BOUND) == pytest.approx(c, rel=1e-12)
    # Round means 11, 15, 13: ȳ = 13, RSS = 8. 1'C1 = 2.7 + 2 (0.648 + 0.648 + 0.41472) = 6.12144, so
    # w'Cw = 6.12144 / 9 and tr(MC) = 2.7 − 6.12144 / 3 = 0.65952; V = 8 · 0.680160 / 0.65952.
    rounds = [[10.0, 12.0], [14.0, 16.0], [12.5, 13.5]]
    interval = two_level_interval(rounds, 0.95, [0.0, 0.0])
    variance = 8.0 * (6.12144 / 9.0) / 0.65952
    m_c = (np.eye(3) - np.full((3, 3), 1.0 / 3.0)) @ c
    dof = 0.65952**2 / np.trace(m_c @ m_c)
    assert interval.mean_ms == pytest.approx(13.0)
    assert interval.variance_of_mean_ms2 == pytest.approx(variance, rel=1e-10)
    assert interval.degrees_of_freedom == pytest.approx(dof, rel=1e-10)
    assert interval.halfwidth_ms == pytest.approx(sps.t.ppf(0.975, dof) * math.sqrt(variance), rel=1e-10)
    # No gaps given: back to back, the same interval.
    assert two_level_interval(rounds, 0.95).interval_ms == pytest.approx(interval.interval_ms, rel=1e-12)


def test_unbalanced_rounds_weight_the_means_by_their_epochs() -> None:
    # Rounds of 2 and 3 and 4 epochs, 1.5 and 0 epochs apart, by plain numpy: positions on the timeline, Σ, C = AΣA',
    # the grand mean w'ȳ (w = n_i / N), residuals r = (I − 1w')ȳ, σ̂² = r'r / tr(BC) with B = M'M, V = σ̂² w'Cw.
    rounds = [[9.0, 11.0], [14.0, 16.0, 18.0], [13.0, 14.0, 15.0, 16.0]]
    counts, gaps = [2, 3, 4], [1.5, 0.0]
    positions = np.array([0.0, 1.0, 3.5, 4.5, 5.5, 6.5, 7.5, 8.5, 9.5])
    sigma = DRIFT_AR1_BOUND ** np.abs(np.subtract.outer(positions, positions))
    averaging = _averaging(counts)
    c = averaging @ sigma @ averaging.T
    means = np.array([10.0, 16.0, 14.5])
    w = np.array(counts) / 9.0
    m = np.eye(3) - np.outer(np.ones(3), w)
    b_c = m.T @ m @ c
    residuals = m @ means
    variance = residuals @ residuals / np.trace(b_c) * (w @ c @ w)
    interval = two_level_interval(rounds, 0.9, gaps)
    assert interval.mean_ms == pytest.approx(14.0)
    assert interval.variance_of_mean_ms2 == pytest.approx(variance, rel=1e-10)
    assert interval.degrees_of_freedom == pytest.approx(np.trace(b_c) ** 2 / np.trace(b_c @ b_c), rel=1e-10)


def test_far_apart_balanced_rounds_give_the_t_interval_on_the_round_means() -> None:
    rng = np.random.default_rng(31)
    rounds = 1000.0 + rng.normal(0.0, 30.0, (5, 1)) + rng.normal(0.0, 10.0, (5, 4))
    means = rounds.mean(axis=1)
    expected = sps.t.interval(0.95, 4, loc=means.mean(), scale=sps.sem(means))
    interval = two_level_interval(rounds.tolist(), 0.95, [math.inf] * 4)
    assert interval.interval_ms == pytest.approx(expected, rel=1e-12)
    assert interval.degrees_of_freedom == pytest.approx(4.0, rel=1e-12)
    # Back to back the same data get a wider interval on fewer degrees of freedom; 15 epochs apart, nearly the t.
    close = two_level_interval(rounds.tolist(), 0.95, [0.0] * 4)
    apart = two_level_interval(rounds.tolist(), 0.95, [15.0] * 4)
    assert close.halfwidth_ms / interval.halfwidth_ms == pytest.approx(2.137, abs=0.001)
    assert apart.halfwidth_ms / interval.halfwidth_ms == pytest.approx(1.020, abs=0.001)
    assert close.degrees_of_freedom < apart.degrees_of_freedom < 4.0


@pytest.mark.parametrize(("counts", "gap"), [([4] * 5, 0.0), ([5] * 4, 4.0), ([10, 10], 0.0), ([6, 6, 5, 5], 0.0)])
def test_a_host_level_is_read_conservatively(counts: list[int], gap: float) -> None:
    # A host level σ_a² per round adds σ_a² tr(B) to E[RSS], so the estimate's host part is σ_a² w'Cw tr(B) / tr(BC),
    # at least the true σ_a² w'w when C's correlations are positive.
    r = len(counts)
    correlation = round_means_correlation(counts, [gap] * (r - 1), DRIFT_AR1_BOUND)
    w = np.array(counts, dtype=float) / sum(counts)
    m = np.eye(r) - np.outer(np.ones(r), w)
    w_c_w, trace, _ = variance_shape(np.ones((r, 1)), w[None, :], correlation)
    assert w_c_w * np.trace(m.T @ m) / trace >= w @ w


def test_summarize_epoch_times_counts_the_gaps_it_is_given() -> None:
    rng = np.random.default_rng(32)
    times = (1000.0 + rng.normal(0.0, 20.0, 20)).tolist()
    summary = summarize_epoch_times(times, rounds=[5] * 4, round_gaps_epochs=[15.0] * 3)
    interval = two_level_interval(split_rounds(times, [5] * 4), 0.95, [15.0] * 3, from_run=True)
    assert summary.decision_interval_ms == pytest.approx(interval.interval_ms, rel=1e-12)
    assert summary.rounds is not None and summary.rounds.gaps_epochs == (15.0, 15.0, 15.0)
    assert summary.rounds.degrees_of_freedom == pytest.approx(interval.degrees_of_freedom)


def test_one_models_back_to_back_rounds_are_covered_at_rho_0_8() -> None:
    # One model, 5 rounds of 4 epochs back to back: one AR(1) series at ρ = 0.8 (CV 5%) cut into rounds, no host
    # level. Round means taken as independent (t on 4 df) cover 0.784 here; the interval told nothing about the gaps
    # (back to back, the default) must cover at its level. 2,000 seeded runs: a coverage's standard error ~0.005.
    rng = np.random.default_rng(2026_12_03)
    runs, rho = 2000, 0.8
    shocks = rng.standard_normal((runs, 20))
    x = np.empty_like(shocks)
    x[:, 0] = shocks[:, 0]
    for t in range(1, 20):
        x[:, t] = rho * x[:, t - 1] + math.sqrt(1.0 - rho**2) * shocks[:, t]
    epochs = (1000.0 * (1.0 + 0.05 * x)).reshape(runs, 5, 4)
    intervals = [two_level_interval(run.tolist(), 0.95).interval_ms for run in epochs]
    covered = np.mean([low <= 1000.0 <= high for low, high in intervals])
    upper = np.mean([high >= 1000.0 for _, high in intervals])
    assert covered >= 0.95 - 3 * math.sqrt(0.95 * 0.05 / runs)
    assert upper >= 0.975 - 3 * math.sqrt(0.975 * 0.025 / runs)
