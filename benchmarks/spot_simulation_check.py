"""Print, as markdown tables, the shipped spot lifetimes, the spot simulation against Daly's closed form for
exponential lifetimes, and the billed hours of trainings on the trace's lifetimes against an exponential of the same
mean and the former assumed rate (0.1 interruptions per hour).

Usage: ``PYTHONPATH=. python benchmarks/spot_simulation_check.py [--simulations N] [--seed S]``
"""

import argparse

import numpy as np

from gpubench.decision.spot import daly_interval_hours, expected_wall_hours
from gpubench.decision.spot_simulation import (
    ExponentialLifetimes,
    load_spot_trace,
    simulate_billed_hours,
    spot_billed_hours,
)

#: (work h, checkpoint h, restart h, mean lifetime h) for the check against Daly.
DALY_CASES = [
    (100.0, 0.05, 0.1, 10.0),
    (50.0, 0.1, 0.25, 5.0),
    (200.0, 0.02, 0.05, 20.0),
    (24.0, 0.1, 0.2, 2.0),
    (10.0, 0.05, 0.1, 1.0),
    (8.0, 0.02, 0.05, 2.134),
]
#: (work h, checkpoint h, restart h) of trainings priced on the trace's lifetimes.
TRAININGS = [(1.0, 0.01, 0.05), (10.0, 0.02, 0.1), (100.0, 0.05, 0.1), (100.0, 0.1, 0.5)]
#: The rate gpubench assumed before the trace (interruptions per hour).
ASSUMED_RATE_PER_HOUR = 0.1


def lifetimes_table() -> str:
    """The shipped families: n, running hours, λ, 1/λ and the lifetime's quantiles."""
    trace = load_spot_trace()
    lines = [
        "| family | interruptions n | running h | λ (/h) | 1/λ (h) | table mean (h) | p10 | median | p90 (h) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, rate in trace.interruptions_per_hour.items():
        lifetimes = trace.families.get(name)
        if lifetimes is None:
            lines.append(f"| {name} (rate only) | | | {rate:.4f} | {1 / rate:.2f} | | | | |")
            continue
        levels, hours = np.asarray(lifetimes.quantile_levels), np.asarray(lifetimes.quantile_hours)
        p10, p50, p90 = np.interp([0.1, 0.5, 0.9], levels, hours)
        lines.append(
            f"| {name} | {lifetimes.interruptions} | {lifetimes.interruptions / rate:.1f} | {rate:.4f} | "
            f"{1 / rate:.2f} | {lifetimes.mean_hours:.2f} | {p10:.3f} | {p50:.3f} | {p90:.2f} |"
        )
    return "\n".join(lines)


def daly_table(simulations: int, seed: int) -> str:
    """Exponential lifetimes: the simulated mean billed hours against Daly's expected wall hours."""
    lines = [
        "| W (h) | δ (h) | R (h) | M (h) | τ (h) | Daly (h) | simulated mean (h) | std. error (h) | difference |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for work, checkpoint, restart, mtbf in DALY_CASES:
        interval = min(work, daly_interval_hours(checkpoint, mtbf))
        daly = expected_wall_hours(work, interval, checkpoint, restart, mtbf)
        result = simulate_billed_hours(
            work, interval, checkpoint, restart, ExponentialLifetimes(mtbf), simulations, seed
        )
        difference = 100 * (result.mean_hours / daly - 1)
        lines.append(
            f"| {work:g} | {checkpoint:g} | {restart:g} | {mtbf:g} | {interval:.3f} | {daly:.3f} | "
            f"{result.mean_hours:.3f} | {result.standard_error_hours:.3f} | {difference:+.2f}% |"
        )
    return "\n".join(lines)


def trace_table(simulations: int, seed: int) -> str:
    """Billed hours on the default family's lifetimes, an exponential of their mean, and the former assumed rate."""
    trace = load_spot_trace()
    lifetimes = trace.families[trace.default_family]
    exponential = ExponentialLifetimes(lifetimes.mean_hours)
    assumed = ExponentialLifetimes(1.0 / ASSUMED_RATE_PER_HOUR)
    lines = [
        f"| W (h) | δ (h) | R (h) | τ (h) | trace mean / median / p90 (h) | interruptions | "
        f"exponential M={lifetimes.mean_hours:.2f} h mean / median / p90 (h) | Daly (h) | "
        f"assumed 0.1/h mean / p90 (h) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for work, checkpoint, restart in TRAININGS:
        real = spot_billed_hours(work, checkpoint, restart, lifetimes, simulations, seed)
        expo = spot_billed_hours(work, checkpoint, restart, exponential, simulations, seed)
        old = spot_billed_hours(work, checkpoint, restart, assumed, simulations, seed)
        daly = expected_wall_hours(work, real.interval_hours, checkpoint, restart, lifetimes.mean_hours)
        lines.append(
            f"| {work:g} | {checkpoint:g} | {restart:g} | {real.interval_hours:.3f} | "
            f"{real.mean_hours:.2f} / {real.median_hours:.2f} / {real.p90_hours:.2f} | {real.mean_interruptions:.1f} | "
            f"{expo.mean_hours:.2f} / {expo.median_hours:.2f} / {expo.p90_hours:.2f} | {daly:.2f} | "
            f"{old.mean_hours:.2f} / {old.p90_hours:.2f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--simulations", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print("Shipped lifetimes\n")
    print(lifetimes_table())
    print(f"\nExponential lifetimes against Daly ({args.simulations} simulations, seed {args.seed})\n")
    print(daly_table(args.simulations, args.seed))
    print(f"\nTrace lifetimes ({args.simulations} simulations, seed {args.seed})\n")
    print(trace_table(args.simulations, args.seed))


if __name__ == "__main__":
    main()
