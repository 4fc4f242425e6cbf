"""Diagnostic for compare's plan given AMBIGUOUS: the chance of AMBIGUOUS at the measured log ratio (as the product
computes it) against the same at the true log ratio 0, from one seed, on pilots of one process
(``compare_coverage.cell``). Only the log ratio the weights are computed at changes: the product's
``ambiguous_probability`` is wrapped, not copied.

    python benchmarks/compare_plan_diagnostic.py               # 800 pilots at ρ 0, σ_h 0: about 8 min of CPU

Results: benchmarks/results/2026-12-06-compare-simulation.md.
"""

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import compare_coverage

import gpubench.stats.compare as compare


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=800)
    parser.add_argument("--rho", type=float, default=0.0)
    parser.add_argument("--host-sigma", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=7)
    options = parser.parse_args()
    args = argparse.Namespace(pairs=options.pairs, rounds=5, epochs=4, gap=15, cv=0.05, threshold=0.05, level=0.95)
    measured_ratio = compare.ambiguous_probability
    print("| log ratio the weights use | printed epochs' power, AMBIGUOUS pilots | AMBIGUOUS pilots | median epochs |")
    print("|---|---|---|---|")
    for label, at_zero in (("the measured one (the product)", False), ("the true one, 0", True)):

        def chance(log_ratio, *rest, at_zero=at_zero):
            return measured_ratio(0.0 if at_zero else log_ratio, *rest)

        compare.ambiguous_probability = chance
        rng = np.random.default_rng([options.seed, 1])
        cell = compare_coverage.cell(rng, options.rho, options.host_sigma, args)
        power = compare_coverage.rate(cell.planned_power_ambiguous, cell.ambiguous_pilots)
        print(f"| {label} | {power} | {cell.ambiguous_pilots} | {cell.median_planned_epochs:g} |", flush=True)
    compare.ambiguous_probability = measured_ratio


if __name__ == "__main__":
    main()
