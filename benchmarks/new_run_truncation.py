"""Why ``new_run_interval`` no longer truncates the host level at zero: coverage of a new training's mean, split by
whether the measured rounds' host-level estimate σ̂_a² came out positive or truncated at 0.

The rule before 2026-12-03 (session 9) predicted V (1 + 1/Σw²) + σ̂²∞ (1/e − 1/m) when σ̂_a² > 0 and V + σ̂²∞/e
when it truncated; today's predicts V (1 + 1/Σw²) + max(0, 1/e − 1/m) σ̂²∞ either way, on V's degrees of freedom.
Seeded; epochs 1000 ms × (1 + h_r + CV · AR(1)) as in ``benchmarks/_two_level.py``.

    python benchmarks/new_run_truncation.py [--runs 6000]
"""

import argparse
import math

import numpy as np
from _two_level import MEAN_MS, Design, ar1, two_level_epochs
from scipy import stats as sps

from gpubench.stats.rounds import new_run_interval, two_level_interval


def old_halfwidth(run: np.ndarray, epochs: int, level: float, gaps: list[float]) -> tuple[float, float, bool]:
    """(mean, half-width, truncated) of the rule before session 9, Satterthwaite's degrees of freedom included."""
    interval = two_level_interval(run, level, gaps)
    counts = np.array(interval.epochs_per_round, dtype=float)
    n_total = float(counts.sum())
    sum_w2 = float((counts / n_total) @ (counts / n_total))
    v, w = interval.variance_of_mean_ms2, interval.within_variance_ms2
    truncated = not interval.between_variance_ms2 > 0
    coefficients = (1.0, 1.0 / epochs) if truncated else (1.0 + 1.0 / sum_w2, 1.0 / epochs - 1.0 / (n_total * sum_w2))
    pieces = (coefficients[0] * v, coefficients[1] * w)
    variance = sum(pieces)
    denominator = sum(
        p**2 / d for p, d in zip(pieces, (interval.degrees_of_freedom, interval.within_degrees_of_freedom), strict=True)
    )
    dof = (
        min(variance**2 / denominator, interval.degrees_of_freedom) if denominator > 0 else interval.degrees_of_freedom
    )
    return interval.mean_ms, float(sps.t.ppf(0.5 + level / 2, dof)) * math.sqrt(variance), truncated


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=6000)
    parser.add_argument("--seed", type=int, default=11)
    args = parser.parse_args()
    level, cv, factor = 0.95, 0.05, 4
    print("design gap  rho  sigma_h | share truncated | old: truncated  positive  all | today: truncated  all")
    rng = np.random.default_rng(args.seed)
    for design, gap, rho, host_sigma in [
        (Design(4, 5), 15, 0.0, 0.05),
        (Design(5, 4), 15, 0.0, 0.05),
        (Design(4, 5), 15, 0.5, 0.05),
        (Design(5, 4), 0, 0.0, 0.05),
    ]:
        epochs = factor * design.rounds * design.epochs
        runs = two_level_epochs(rng, args.runs, design, rho, cv, host_sigma, gap)
        noise = ar1(rng, args.runs, epochs, rho).mean(axis=1)
        new_means = MEAN_MS * (1.0 + rng.normal(0.0, host_sigma, args.runs) + cv * noise)
        gaps = design.gaps(gap)
        old_in = {True: [], False: []}
        today_in = {True: [], False: []}
        for run, new_mean in zip(runs, new_means, strict=True):
            mean, half, truncated = old_halfwidth(run, epochs, level, gaps)
            old_in[truncated].append(abs(new_mean - mean) <= half)
            low, high = new_run_interval(run, epochs, level, gaps)
            today_in[truncated].append(low <= new_mean <= high)
        share = len(old_in[True]) / args.runs
        print(
            f"{design.label:>6} {gap:>3} {rho:>4} {host_sigma:>7.0%} | {share:15.3f} | "
            f"{np.mean(old_in[True]):14.3f} {np.mean(old_in[False]):9.3f} "
            f"{np.mean(old_in[True] + old_in[False]):4.3f} | {np.mean(today_in[True]):16.3f} "
            f"{np.mean(today_in[True] + today_in[False]):4.3f}"
        )


if __name__ == "__main__":
    main()
