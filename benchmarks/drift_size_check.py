"""The drift test's size and power with ρ bounded from the run (issue 33): the product's test (the largest p over
ρ's 99.5% upper confidence set, plus 0.005: Berger & Boos 1994) against the test at the 97.5% bound alone (the rule
it replaces), on seeded runs of ``_two_level.two_level_epochs``: 5 rounds of 4 epochs, CV 5%, AR(1) epochs carried
through the gaps, a host level per round, and each later round's first epoch after a gap 3.75% slower or not.

    python benchmarks/drift_size_check.py            # about 15 min of CPU
    python benchmarks/drift_size_check.py --quick    # 500 runs a cell

Results: benchmarks/results/2026-12-06-drift-size.md.
"""

import argparse
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _two_level import Design, two_level_epochs

from gpubench.stats.rounds import drift_test, split_rounds, steady_rounds
from gpubench.stats.serial import rho_upper_bound

#: The cells: (ρ, σ_h, gap, slow first epoch); the first is the one issue 33 found at its level.
CELLS = [
    (0.9, 0.0, 15, 0.0375),
    (0.9, 0.05, 15, 0.0375),
    (0.9, 0.0, 15, 0.0),
    (0.8, 0.0, 15, 0.0),
    (0.5, 0.0, 15, 0.0375),
    (0.0, 0.0, 15, 0.0),
    (0.0, 0.1, 15, 0.0),
    (0.8, 0.0, 0, 0.0),
    (0.0, 0.05, 0, 0.0),
]


def rates(runs: np.ndarray, design: Design, gaps: list[float], level: float) -> tuple[float, float]:
    """(the product's rate, the rate of the test at the 97.5% bound alone) over ``runs``."""
    product = at_bound = 0
    for run in runs:
        product += drift_test(run, level, design.counts, gaps).detected
        parts, steady_gaps, _ = steady_rounds(split_rounds(run, design.counts), gaps)
        rho = rho_upper_bound(parts, steady_gaps, level)
        at_bound += drift_test(run, level, design.counts, gaps, rho=rho).detected
    return product / len(runs), at_bound / len(runs)


def rate(p: float, n: int) -> str:
    return f"{p:.4f} ± {math.sqrt(p * (1 - p) / n):.4f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5000, help="runs a cell")
    parser.add_argument("--first-cell-runs", type=int, default=40_000, help="runs in the first cell")
    parser.add_argument("--ramp", type=float, default=0.10, help="the drift for the power columns")
    parser.add_argument("--seed", type=int, default=20261207)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.runs = args.first_cell_runs = 500
    design, level = Design(5, 4), 0.95
    print(
        f"Drift test, 5 rounds x 4 epochs, CV 5%, level {level:.0%}, seed {args.seed}; FPR on stationary runs, "
        f"power on a {args.ramp:.0%} ramp over the measured epochs; ± the binomial standard error.\n"
    )
    print(
        "| ρ | σ_h | gap | slow first epoch | runs | FPR | FPR at the bound alone | power | power at the bound alone |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for i, (rho, sigma, gap, slow) in enumerate(CELLS):
        rng = np.random.default_rng([args.seed, i])
        n = args.first_cell_runs if i == 0 else args.runs
        gaps = design.gaps(gap)
        stationary = two_level_epochs(rng, n, design, rho, 0.05, sigma, gap, 0.0, 0.0, slow).reshape(n, -1)
        fpr, fpr_bound = rates(stationary, design, gaps, level)
        m = min(n, args.runs)
        ramped = two_level_epochs(rng, m, design, rho, 0.05, sigma, gap, args.ramp, 0.0, slow).reshape(m, -1)
        power, power_bound = rates(ramped, design, gaps, level)
        print(
            f"| {rho:g} | {sigma:.0%} | {gap} | {slow:.2%} | {n} | {rate(fpr, n)} | {rate(fpr_bound, n)} "
            f"| {rate(power, m)} | {rate(power_bound, m)} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
