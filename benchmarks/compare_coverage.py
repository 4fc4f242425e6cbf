"""Seeded simulation of ``gpubench compare`` on pairs of runs measured in rounds, through the product's own
:func:`gpubench.stats.compare.compare_mean_times` and :func:`~gpubench.stats.compare.epochs_for_power`.

Each run's epochs come from ``_two_level.two_level_epochs``: 1000 ms × (1 + h_r + CV · x_t), h_r ~ N(0, σ_h) the
round's host level, x a stationary AR(1) process at ρ carried through ``--gap`` epochs between a model's rounds
(15: the other three models' rounds). B is an independent run times the true ratio B/A. Per (ρ, σ_h) cell:

* **false verdicts**: FASTER or SLOWER for two runs of one process (goal ≤ 5%);
* **coverage**: the ratio interval holds the true ratio, over the pairs at ratio 1 and at 0.9 (goal ≥ 0.93);
* **power**: FASTER at a true 10% speed-up (ratio 0.9) with the measured design;
* **planned power**: the epochs (and rounds) compare prints beside AMBIGUOUS for 80% power (planned given that
  verdict), read from each pilot pair of one process that read AMBIGUOUS, used for a fresh pair at a true 10%
  difference in the harder direction (ratio 1.1 with a ±5% band): the share of those read SLOWER (goal 0.8 ± 0.05),
  the median epochs printed and the FASTER rate of the same epochs at ratio 0.9; beside it the plain plan (no
  conditioning on the verdict) from every pilot.

Rates carry their binomial standard error. Results: benchmarks/results/2026-12-06-compare-simulation.md.

    python benchmarks/compare_coverage.py --quick     # 60 pairs a cell, about 20 s of CPU
    python benchmarks/compare_coverage.py             # 1,000 pairs a cell, about 15 min of CPU
"""

import argparse
import math
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _two_level import MEAN_MS, Design, two_level_epochs

from gpubench.bench.model_rounds import split_epochs
from gpubench.stats.compare import (
    AMBIGUOUS,
    FASTER,
    PLANNED_DIFFERENCE,
    SLOWER,
    compare_mean_times,
    epochs_for_power,
)


@dataclass(frozen=True)
class Cell:
    """Fractions over one cell's pairs; ``planned_power_all`` (the plain plan) over the ``planned_pilots`` whose
    count was found, the printed plan's columns over the ``ambiguous_pilots``."""

    false_verdicts: float
    coverage: float
    power: float
    planned_power_ambiguous: float
    planned_power_all: float
    planned_speed_up_power: float
    median_planned_epochs: float
    pairs: int
    planned_pilots: int
    ambiguous_pilots: int


def pair(
    rng: np.random.Generator, counts: list[int], rho: float, cv: float, host_sigma: float, gap: int, ratio: float, args
):
    """One A/B pair of runs in rounds of ``counts`` epochs (B's times ``ratio`` × an independent run's), compared by
    the product."""
    longest = max(counts)
    a, b = two_level_epochs(rng, 2, Design(len(counts), longest), rho, cv, host_sigma, gap)
    # A round shorter than the longest ends early: the gap after it is longer by the epochs it lacks.
    gaps = [float(gap + longest - c) for c in counts[:-1]]
    return compare_mean_times(
        [r[:c] for r, c in zip(a, counts, strict=True)],
        [ratio * r[:c] for r, c in zip(b, counts, strict=True)],
        threshold=args.threshold,
        confidence_level=args.level,
        gaps_a_epochs=gaps,
        gaps_b_epochs=gaps,
    )


def planned_verdict(
    rng: np.random.Generator, pilot, epochs: int, ratio: float, rho: float, host_sigma: float, args
) -> str:
    """The verdict of a fresh pair at the true ``ratio``, measured with ``epochs`` epochs in the rounds
    ``statistics.rounds=R epochs=E`` gives (E epochs split over R rounds within one epoch)."""
    planned = split_epochs(epochs, pilot.a.planned_rounds(epochs))
    return pair(rng, planned, rho, args.cv, host_sigma, args.gap, ratio, args).verdict


def cell(rng: np.random.Generator, rho: float, host_sigma: float, args: argparse.Namespace) -> Cell:
    design = [args.epochs] * args.rounds
    speed_up = 1.0 - PLANNED_DIFFERENCE
    false_verdicts = covered = faster = 0
    planned_ambiguous, planned_all, planned_faster, printed = [], [], [], []
    settings = (args.threshold, args.level)
    process = (rho, host_sigma, args)
    for _ in range(args.pairs):
        null = pair(rng, design, rho, args.cv, host_sigma, args.gap, 1.0, args)
        false_verdicts += null.verdict in (FASTER, SLOWER)
        low, high = null.ratio_interval
        covered += low <= 1.0 <= high
        shifted = pair(rng, design, rho, args.cv, host_sigma, args.gap, speed_up, args)
        low, high = shifted.ratio_interval
        covered += low <= speed_up <= high
        faster += shifted.verdict == FASTER
        # The plain plan (no selection) for every pilot; compare prints its plan given AMBIGUOUS beside that verdict.
        plain = epochs_for_power(null.a, null.b, *settings)
        slow_down = 1.0 + PLANNED_DIFFERENCE
        seen_plain = None if plain is None else planned_verdict(rng, null, plain, slow_down, *process) == SLOWER
        if seen_plain is not None:
            planned_all.append(seen_plain)
        printed_epochs = null.epochs_for_power if null.verdict == AMBIGUOUS else None
        if printed_epochs is None:
            continue
        if printed_epochs == plain:
            seen = seen_plain
        else:
            seen = planned_verdict(rng, null, printed_epochs, slow_down, *process) == SLOWER
        planned_ambiguous.append(seen)
        printed.append(printed_epochs)
        planned_faster.append(planned_verdict(rng, null, printed_epochs, speed_up, *process) == FASTER)
    return Cell(
        false_verdicts=false_verdicts / args.pairs,
        coverage=covered / (2 * args.pairs),
        power=faster / args.pairs,
        planned_power_ambiguous=float(np.mean(planned_ambiguous)) if planned_ambiguous else math.nan,
        planned_power_all=float(np.mean(planned_all)) if planned_all else math.nan,
        planned_speed_up_power=float(np.mean(planned_faster)) if planned_faster else math.nan,
        median_planned_epochs=float(np.median(printed)) if printed else math.nan,
        pairs=args.pairs,
        planned_pilots=len(planned_all),
        ambiguous_pilots=len(planned_ambiguous),
    )


def rate(p: float, n: int) -> str:
    """A rate with its binomial standard error."""
    return "–" if math.isnan(p) else f"{p:.3f} ± {math.sqrt(p * (1.0 - p) / n):.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="60 pairs a cell: a smoke run")
    parser.add_argument("--pairs", type=int, default=1000, help="pilot pairs per cell")
    parser.add_argument("--rhos", type=float, nargs="+", default=[0.0, 0.5, 0.8])
    parser.add_argument("--host-sigmas", type=float, nargs="+", default=[0.0, 0.05, 0.10])
    parser.add_argument("--rounds", type=int, default=5, help="rounds per run (statistics.rounds)")
    parser.add_argument("--epochs", type=int, default=4, help="epochs per round")
    parser.add_argument("--gap", type=int, default=15, help="epochs between a model's rounds")
    parser.add_argument("--cv", type=float, default=0.05, help="coefficient of variation of one epoch")
    parser.add_argument("--threshold", type=float, default=0.05)
    parser.add_argument("--level", type=float, default=0.95)
    parser.add_argument("--seed", type=int, default=20261206)
    args = parser.parse_args()
    if args.quick:
        args.pairs = 60
    print(
        f"compare, B against A: {args.rounds} rounds × {args.epochs} epochs a run, {args.gap} epochs between rounds, "
        f"epoch CV {args.cv:.0%} of {MEAN_MS:g} ms, ±{args.threshold:.0%} band, level {args.level:.0%}, "
        f"{args.pairs} pilot pairs a cell, seed {args.seed}\n"
    )
    print(
        "| ρ | σ_h | false FASTER/SLOWER | ratio coverage | power, 10% speed-up | printed epochs' power, AMBIGUOUS "
        "pilots | plain plan's power, all pilots | AMBIGUOUS pilots | median epochs printed | printed epochs, 10% "
        "speed-up |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for rho in args.rhos:
        for host_sigma in args.host_sigmas:
            # Each cell its own stream, so that a cell run alone (or in parallel) reads as in the full table.
            rng = np.random.default_rng([args.seed, round(rho * 100), round(host_sigma * 1000)])
            c = cell(rng, rho, host_sigma, args)
            print(
                f"| {rho:g} | {host_sigma:.0%} | {rate(c.false_verdicts, c.pairs)} | {rate(c.coverage, 2 * c.pairs)} "
                f"| {rate(c.power, c.pairs)} | {rate(c.planned_power_ambiguous, c.ambiguous_pilots)} "
                f"| {rate(c.planned_power_all, c.planned_pilots)} | {c.ambiguous_pilots} | {c.median_planned_epochs:g} "
                f"| {rate(c.planned_speed_up_power, c.ambiguous_pilots)} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
