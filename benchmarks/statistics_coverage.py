"""Seeded simulation of the epoch-time statistics on AR(1) epochs: does the decision interval cover, how wide is it,
and does adaptive stopping keep its level?

Epoch times are 1000 ms × (1 + CV · x_t) with x an AR(1) process of unit variance and lag-1 correlation ρ
(consecutive epochs share thermal state and clocks). For each cell the script prints the coverage of the true mean
by the nominal-95% interval and the interval's median half-width as a fraction of the mean, for

* ``plain t``: the seed's Student-t interval, which assumes independent epochs;
* ``decision``: :func:`gpubench.stats.intervals.decision_interval` (overlapping batch means);
* ``two-stage``: :func:`gpubench.stats.intervals.two_stage_epochs` then ``two_stage_interval`` from a first stage of
  ``n`` epochs, stopping at the precision target or ``--max-epochs``; coverage at the stop and the mean epochs used.

* ``decision-driven``: ``statistics.adaptive=decision`` for one critical model whose true total is a fraction
  ``--settle-fractions`` of the 24 h local limit: the first stage fixes the count that settles the decision
  (:func:`gpubench.decision.rule.epochs_to_settle` on the model's estimate), capped at ``--max-epochs``; coverage of
  the two-stage interval at the stop, mean epochs used, how often it settled, and how often the decision from the
  final interval is wrong (LOCAL although the true total is over 24 h).

With ``--two-level`` it adds the replicated-rounds section (:mod:`gpubench.stats.rounds`): epochs measured in R
rounds of m, each round with its own host level (``--host-sigmas``), AR(1) epochs carried across the rounds with
``--two-level-gaps`` epochs in between (15: the other models' rounds; 0: one model, back to back), see
:func:`two_level_epochs`; per design, gap, ρ and host level: coverage of the two-level interval and of the total's
upper bound, the median half-width, the share of the between level, the same for the round means taken as
independent, the drift test's false-positive rate and its power on a ramp, the new-training prediction's coverage;
then (unless ``--no-drift-candidates``) the drift candidates on one block of epochs, and the dead band of true
totals where the answer is GRAY more often than not.

With ``--only-joint-stop coverage band`` it simulates ``statistics.adaptive=decision`` over the critical models
(``--joint-shares`` of the true total, ``_joint_stop``) through the real ``decision.stopping.next_round``: the
coverage of the total's bounds at the stop, the verdicts, the epochs used, and the dead band at σ_h = 0.

With ``--only-drift`` it prints the drift test's false-positive rate and power on rounds alone (``--drift-designs``,
``--drift-gaps``: the epochs between a model's rounds, 15 in a four-model run, 0 when one model's later rounds
follow one another), against the same slope with the round means taken as independent.

    python benchmarks/statistics_coverage.py                 # 6,000 runs a cell, about a minute on two cores
    python benchmarks/statistics_coverage.py --runs 2000 --rhos 0 0.5 0.8
    python benchmarks/statistics_coverage.py --two-level --only-two-level   # the rounds section alone
    python benchmarks/statistics_coverage.py --only-two-level --no-drift-candidates --two-level-gaps 0 15 \
        --designs 5x4 4x5 2x10 --host-sigmas 0 0.05 0.1 --two-level-cvs 0.05   # one model against four
    python benchmarks/statistics_coverage.py --only-drift --drift-gaps 15 0  # the drift test on rounds alone
    python benchmarks/statistics_coverage.py --only-joint-stop coverage band --two-level-cvs 0.05  # the joint stop
    python benchmarks/statistics_coverage.py --only-history [--quick]   # issue 33: host drift, history, first epoch

With ``--only-history`` it prints issue 33's cells: a host level drifting as an AR(1) across rounds (φ 0.9, σ_h 5%
and 10%) with and without earlier runs of the machine in the history (the bound, validate's interval, the joint
stop's wrong verdicts at 25 h and 47 h), a slow first epoch after each gap (+3.75%) at ρ = 0.9, and the cells that
held before (coverage, drift false positives, wrong verdicts without drift). ``--quick``: a smoke run of each.
"""

import argparse
import functools
import math
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
from scipy import stats as sps

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _joint_stop import joint_stop_cell
from _two_level import (
    Design,
    dead_band,
    drift_candidates,
    drift_cell,
    exact_drift_fpr,
    floored_bounds,
    gray_rates,
    history_cell,
    relative_bounds,
    two_level_bounds,
    two_level_cell,
    two_level_epochs,
)

from gpubench.decision.config import DecisionConfig
from gpubench.decision.estimate import TimeEstimate, combine_estimates
from gpubench.decision.rule import LOCAL_GPU_VIABLE, classify, epochs_to_settle, interval_settled
from gpubench.stats.config import StatisticsConfig
from gpubench.stats.intervals import decision_interval, two_stage_epochs, two_stage_interval

MEAN_MS = 1000.0


def ar1_epochs(rng: np.random.Generator, runs: int, n: int, rho: float, cv: float) -> np.ndarray:
    """``runs`` × ``n`` epoch times (ms) of a stationary AR(1) process with marginal CV ``cv``."""
    shocks = rng.standard_normal((runs, n))
    x = np.empty_like(shocks)
    x[:, 0] = shocks[:, 0]
    scale = np.sqrt(1.0 - rho**2)
    for t in range(1, n):
        x[:, t] = rho * x[:, t - 1] + scale * shocks[:, t]
    return MEAN_MS * (1.0 + cv * x)


def plain_t(times_ms: np.ndarray, level: float) -> tuple[float, float]:
    n = times_ms.size
    half = sps.t.ppf(0.5 + level / 2, n - 1) * times_ms.std(ddof=1) / np.sqrt(n)
    return times_ms.mean() - half, times_ms.mean() + half


def fixed_n_cell(
    rng: np.random.Generator, method: Callable, runs: int, n: int, rho: float, cv: float, level: float
) -> tuple[float, float]:
    """(coverage, median relative half-width) of ``method`` over ``runs`` simulated runs of ``n`` epochs."""
    epochs = ar1_epochs(rng, runs, n, rho, cv)
    covered, halfwidths = 0, []
    for run in epochs:
        low, high = method(run, level)
        covered += low <= MEAN_MS <= high
        halfwidths.append((high - low) / 2.0 / run.mean())
    return covered / runs, float(np.median(halfwidths))


def two_stage_cell(
    rng: np.random.Generator, runs: int, n0: int, rho: float, cv: float, level: float, target: float, max_epochs: int
) -> tuple[float, float, float]:
    """(coverage at the stop, median relative half-width, mean epochs used) of the two-stage rule."""
    epochs = ar1_epochs(rng, runs, max_epochs, rho, cv)
    covered, halfwidths, used = 0, [], []
    for run in epochs:
        total = two_stage_epochs(run[:n0], target, level, max_epochs)
        low, high = two_stage_interval(run[:n0], run[:total], level)
        covered += low <= MEAN_MS <= high
        halfwidths.append((high - low) / 2.0 / run[:total].mean())
        used.append(total)
    return covered / runs, float(np.median(halfwidths)), float(np.mean(used))


#: The decision-driven cell's plan: the default 10 M environment steps at 800 per epoch.
PLANNED_EPOCHS = 12_500


def _estimate(epochs_ms: np.ndarray, halfwidth_ms: float, mean_scale: float, level: float) -> TimeEstimate:
    """One critical model's estimate from ``epochs_ms`` (scaled by ``mean_scale`` into hours of training)."""
    mean_ms = float(epochs_ms.mean()) * mean_scale
    return TimeEstimate(
        model="m",
        sample_unit="env_step",
        plan_samples=PLANNED_EPOCHS * 800.0,
        plan_basis="simulated",
        samples_per_epoch=800.0,
        samples_per_second=None,
        steps_per_epoch=100,
        step_ms=mean_ms / 100,
        planned_epochs=PLANNED_EPOCHS,
        measured_epochs=epochs_ms.size,
        mean_epoch_ms=mean_ms,
        halfwidth_ms=halfwidth_ms * mean_scale,
        confidence_level=level,
        one_off_seconds=0.0,
        drift_flags=(),
        drift_ms_per_epoch=0.0,
    )


def decision_cell(
    rng: np.random.Generator, runs: int, n0: int, rho: float, cv: float, level: float, fraction: float, max_epochs: int
) -> tuple[float, float, float, float]:
    """(coverage at the stop, mean epochs used, fraction settled, fraction decided wrongly) of decision-driven
    stopping for a critical model whose true total is ``fraction`` of the local limit."""
    decision = DecisionConfig()
    # Epochs of MEAN_MS scaled so that the true total (N × true mean) is fraction × local_max_hours.
    scale = fraction * decision.local_max_hours * 3.6e6 / (PLANNED_EPOCHS * MEAN_MS)
    epochs = ar1_epochs(rng, runs, max_epochs, rho, cv)
    covered = settled = wrong = 0
    used = []
    for run in epochs:
        first = run[:n0]
        low, high = decision_interval(first, level)
        estimate = _estimate(first, (high - low) / 2.0, scale, level)
        count = epochs_to_settle([estimate], lambda total: interval_settled(total, decision), varying="m")["m"]
        total = n0 if count is None else min(max(count, n0), max_epochs)
        low, high = two_stage_interval(first, run[:total], level)
        covered += low <= MEAN_MS <= high
        final = _estimate(run[:total], (high - low) / 2.0, scale, level)
        verdict, _ = classify(combine_estimates([final]), decision)
        settled += count is not None and count <= max_epochs
        wrong += verdict == LOCAL_GPU_VIABLE and fraction > 1.0
        used.append(total)
    return covered / runs, float(np.mean(used)), settled / runs, wrong / runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=6000, help="simulated runs per cell")
    parser.add_argument("--rhos", type=float, nargs="+", default=[0.0, 0.3, 0.5, 0.8])
    parser.add_argument("--ns", type=int, nargs="+", default=[10, 20, 40])
    parser.add_argument("--cv", type=float, default=0.05, help="coefficient of variation of one epoch's time")
    parser.add_argument("--level", type=float, default=0.95)
    parser.add_argument("--target", type=float, default=0.02, help="two-stage precision target (fraction of mean)")
    parser.add_argument("--max-epochs", type=int, default=50)
    parser.add_argument(
        "--settle-fractions", type=float, nargs="+", default=[0.8, 0.9, 0.93, 1.07], help="true total / local limit"
    )
    parser.add_argument("--seed", type=int, default=20261201)
    parser.add_argument("--two-level", action="store_true", help="add the replicated-rounds section")
    parser.add_argument("--only-two-level", action="store_true", help="print the replicated-rounds section alone")
    parser.add_argument("--two-level-runs", type=int, default=2000, help="simulated runs per two-level cell")
    parser.add_argument("--designs", nargs="+", default=["4x5", "5x4", "2x10", "1x20"], help="R x m per model")
    parser.add_argument(
        "--band-designs", nargs="+", default=["4x5", "5x4", "2x10", "1x20", "6x5", "10x5"], help="for the dead band"
    )
    parser.add_argument("--host-sigmas", type=float, nargs="+", default=[0.0, 0.05, 0.1, 0.2])
    parser.add_argument("--two-level-rhos", type=float, nargs="+", default=[0.0, 0.5, 0.8])
    parser.add_argument("--two-level-cvs", type=float, nargs="+", default=[0.05, 0.02])
    parser.add_argument(
        "--two-level-gaps",
        type=int,
        nargs="+",
        default=[15],
        help="epochs between two rounds of one model: 15 in a four-model run, 0 for one model (back to back)",
    )
    parser.add_argument("--ramp", type=float, default=0.10, help="drift for the power column: rise over the run")
    parser.add_argument(
        "--no-drift-candidates", action="store_true", help="the rounds table alone: no drift candidates, no dead band"
    )
    parser.add_argument("--new-run-factor", type=int, default=4, help="a new training is this many times N epochs")
    parser.add_argument("--only-drift", action="store_true", help="print the drift test's rates on rounds alone")
    parser.add_argument("--drift-runs", type=int, default=10_000, help="simulated runs per drift cell")
    parser.add_argument("--drift-designs", nargs="+", default=["5x4"], help="R x m per model, for the drift cells")
    parser.add_argument("--drift-gaps", type=int, nargs="+", default=[15], help="epochs between rounds, drift cells")
    parser.add_argument("--drift-host-sigmas", type=float, nargs="+", default=[0.0, 0.05, 0.1])
    parser.add_argument(
        "--only-joint-stop",
        nargs="+",
        choices=["coverage", "band"],
        help="print the joint decision-driven stop alone: its coverage cells, its dead band, or both",
    )
    parser.add_argument("--joint-runs", type=int, default=400, help="simulated jobs per joint-stop coverage cell")
    parser.add_argument("--joint-totals", type=float, nargs="+", default=[22.0, 26.0, 50.0], help="true totals (h)")
    parser.add_argument("--joint-shares", type=float, nargs="+", default=[0.6, 0.4], help="the critical models' split")
    parser.add_argument("--band-runs", type=int, default=150, help="simulated jobs per true total, dead band")
    parser.add_argument("--band-step", type=float, default=0.25, help="the dead band's grid of true totals (h)")
    parser.add_argument("--band-reach", type=float, nargs=2, default=[3.0, 4.0], help="h scanned below / above")
    parser.add_argument("--only-history", action="store_true", help="issue 33: host drift, history, first epoch")
    parser.add_argument("--quick", action="store_true", help="with --only-history: a smoke run (under a minute)")
    args = parser.parse_args()
    if args.only_history:
        history_section(args)
        return
    if args.only_drift:
        drift_section(args)
        return
    if args.only_joint_stop:
        joint_stop_section(args)
        return
    if not args.only_two_level:
        single_level_section(args)
    if args.two_level or args.only_two_level:
        two_level_section(args)


def single_level_section(args: argparse.Namespace) -> None:
    """The one-block tables: interval coverage, two-stage and decision-driven stopping."""
    rng = np.random.default_rng(args.seed)
    print(f"AR(1) epochs, CV {args.cv:.0%}, nominal {args.level:.0%}, {args.runs} runs a cell, seed {args.seed}\n")
    print("| method | rho | " + " | ".join(f"n={n}: coverage, median half-width" for n in args.ns) + " |")
    print("|---|---|" + "---|" * len(args.ns))
    for name, method in (("plain t", plain_t), ("decision", decision_interval)):
        for rho in args.rhos:
            cells = [fixed_n_cell(rng, method, args.runs, n, rho, args.cv, args.level) for n in args.ns]
            print(f"| {name} | {rho:g} | " + " | ".join(f"{c:.3f}, ±{w:.1%}" for c, w in cells) + " |")
    print(f"\nTwo-stage stopping at ±{args.target:.0%} or {args.max_epochs} epochs (first stage = n):\n")
    print("| rho | " + " | ".join(f"n={n}: coverage at stop, half-width, epochs used" for n in args.ns) + " |")
    print("|---|" + "---|" * len(args.ns))
    for rho in args.rhos:
        cells = [
            two_stage_cell(rng, args.runs, n, rho, args.cv, args.level, args.target, args.max_epochs) for n in args.ns
        ]
        print(f"| {rho:g} | " + " | ".join(f"{c:.3f}, ±{w:.1%}, {u:.1f}" for c, w, u in cells) + " |")
    print(
        f"\nDecision-driven stopping (statistics.adaptive=decision), first stage = n, at most {args.max_epochs} "
        "epochs; "
        "coverage at the stop, epochs used, settled, wrong LOCAL:\n"
    )
    print("| true total / 24 h | rho | " + " | ".join(f"n={n}" for n in args.ns) + " |")
    print("|---|---|" + "---|" * len(args.ns))
    for fraction in args.settle_fractions:
        for rho in args.rhos:
            cells = [
                decision_cell(rng, args.runs, n, rho, args.cv, args.level, fraction, args.max_epochs) for n in args.ns
            ]
            print(
                f"| {fraction:g} | {rho:g} | "
                + " | ".join(f"{c:.3f}, {u:.1f}, {s:.2f}, {w:.3f}" for c, u, s, w in cells)
                + " |"
            )


def _rate(p: float, runs: int) -> str:
    """A rate with its Monte-Carlo standard error."""
    return f"{p:.3f}±{math.sqrt(p * (1.0 - p) / runs):.3f}"


def two_level_section(args: argparse.Namespace) -> None:
    """The replicated-rounds tables (``_two_level``): coverage per design, ρ and host level; the drift candidates on
    one block; the dead band."""
    rng = np.random.default_rng(args.seed + 1)
    runs = args.two_level_runs
    designs = [Design(*(int(v) for v in d.split("x"))) for d in args.designs]
    decision = DecisionConfig()
    upper_level = 0.5 + args.level / 2.0
    gaps = ", ".join(str(g) for g in args.two_level_gaps)
    print(
        f"\n## Replicated rounds: epochs = 1000 ms x (1 + h_r + CV x AR1), h_r ~ N(0, sigma_h) per round, AR(1) "
        f"carried across rounds with the gap's epochs between ({gaps}); {runs} runs a cell, seed {args.seed + 1}\n"
    )
    print(
        f"coverage: the two-level interval told the gaps (nominal {args.level:.0%}); upper: its upper end above the "
        f"true mean (the total's bound, nominal {upper_level:.1%}); half-width: median, fraction of the mean; "
        "between: median between_share; independent: the same interval with the round means taken as independent "
        "(t on R - 1 df, 2026-12-02's): coverage, upper, median half-width; Satterthwaite: the rejected candidate's "
        "coverage and median half-width; one-level OBM: the interval on all epochs that ignores the rounds; drift "
        f"FPR: stationary runs flagged; power: runs with a {args.ramp:.0%} ramp over the measured epochs flagged; "
        f"new run: new_run_interval covering a new training of {args.new_run_factor} x N epochs with its own host "
        "level.\n"
    )
    for cv in args.two_level_cvs:
        print(f"CV {cv:.0%}:\n")
        print(
            "| design | gap | rho | sigma_h | coverage | upper | half-width | between | independent | Satterthwaite "
            "| one-level OBM | drift FPR | drift power | new run |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for design in designs:
            for gap in args.two_level_gaps:
                for rho in args.two_level_rhos:
                    for sigma in args.host_sigmas:
                        c = two_level_cell(
                            rng, runs, design, rho, cv, sigma, gap, args.level, args.ramp, args.new_run_factor
                        )
                        new_run = "n/a" if c.new_run_coverage is None else _rate(c.new_run_coverage, runs)
                        print(
                            f"| {design.label} | {gap} | {rho:g} | {sigma:.0%} | {_rate(c.coverage, runs)} | "
                            f"{_rate(c.upper_coverage, runs)} | ±{c.halfwidth:.1%} | {c.between_share:.2f} | "
                            f"{_rate(c.independent_coverage, runs)}, {_rate(c.independent_upper_coverage, runs)}, "
                            f"±{c.independent_halfwidth:.1%} | "
                            f"{_rate(c.satterthwaite_coverage, runs)}, ±{c.satterthwaite_halfwidth:.1%} | "
                            f"{_rate(c.one_level_coverage, runs)} | "
                            f"{_rate(c.drift_fpr, runs)} | {_rate(c.drift_power, runs)} | {new_run} |",
                            flush=True,
                        )
        print()
    if args.no_drift_candidates:
        return
    n_block = designs[-1].rounds * designs[-1].epochs
    print(
        f"Drift candidates on one stationary block of {n_block} AR(1) epochs, CV 5%: false-positive rate at level "
        f"{args.level:.0%}\n"
    )
    rows = {rho: drift_candidates(rng, runs, n_block, rho, args.level) for rho in args.two_level_rhos}
    names = list(next(iter(rows.values())))
    print("| rho | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    for rho, rates in rows.items():
        print(f"| {rho:g} | " + " | ".join(_rate(rates[name], runs) for name in names) + " |")
    local_h, cloud_h = decision.local_max_hours, decision.cloud_min_hours
    totals_h = np.arange(10.0, 80.0 + 1e-9, 0.05)
    cv = args.two_level_cvs[0]
    print(
        f"\nDead band at sigma_h = 0, CV {cv:.0%}: true totals outside [{local_h:g}, {cloud_h:g}] h where GRAY "
        f"happens in more than half of {runs} runs (bounds: the total's, N x the mean's interval, N huge)\n"
    )
    print("| design | bounds | rho | dead band | width |")
    print("|---|---|---|---|---|")
    gap = args.two_level_gaps[0]
    for design in [Design(*(int(v) for v in d.split("x"))) for d in args.band_designs]:
        for rho in args.two_level_rhos:
            epochs = two_level_epochs(rng, runs, design, rho, cv, 0.0, gap)
            methods = [("two-level", functools.partial(two_level_bounds, gaps=design.gaps(gap)))]
            if design.rounds == 1:
                methods.append(("today: one level, 12% floor", floored_bounds))
            for name, method in methods:
                low, high = relative_bounds(epochs, args.level, method)
                band, width = dead_band(totals_h, gray_rates(low, high, totals_h, local_h, cloud_h), local_h, cloud_h)
                print(f"| {design.label} | {name} | {rho:g} | {band} | {width:.1f} h |")


def drift_section(args: argparse.Namespace) -> None:
    """The drift test on stationary and ramped rounds (``_two_level.drift_cell``): with the gaps between rounds
    counted (the runner's test) and with the round means taken as independent (2026-12-02's test)."""
    rng = np.random.default_rng(args.seed + 2)
    runs = args.drift_runs
    print(
        f"## Drift test on rounds: epochs = 1000 ms x (1 + h_r + CV x AR1), h_r ~ N(0, sigma_h) per round, AR(1) "
        f"carried across rounds with the gap's epochs between; {runs} runs a cell, seed {args.seed + 2}, level "
        f"{args.level:.0%}\n"
    )
    print(
        "FPR: stationary runs flagged; power: runs with a "
        f"{args.ramp:.0%} ramp over the measured epochs flagged. counted: drift_test with the gaps (the runner's); "
        "independent: the same slope with the round means taken as independent, R - 2 df (2026-12-02's). exact: the "
        "rate from the test's null distribution under the simulated process (Imhof's integral, no Monte-Carlo "
        "error; _two_level.exact_drift_fpr).\n"
    )
    print(
        "| design | gap | CV | rho | sigma_h | FPR counted | exact | FPR independent | exact | power counted "
        "| power independent |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for label in args.drift_designs:
        design = Design(*(int(v) for v in label.split("x")))
        for gap in args.drift_gaps:
            for cv in args.two_level_cvs:
                for rho in args.two_level_rhos:
                    for sigma in args.drift_host_sigmas:
                        c = drift_cell(rng, runs, design, rho, cv, sigma, gap, args.level, args.ramp)
                        exact = exact_drift_fpr(design, rho, cv, sigma, gap, gap, args.level)
                        exact_independent = exact_drift_fpr(design, rho, cv, sigma, gap, math.inf, args.level)
                        print(
                            f"| {design.label} | {gap} | {cv:.0%} | {rho:g} | {sigma:.0%} | {_rate(c.fpr, runs)} | "
                            f"{exact:.4f} | {_rate(c.fpr_independent, runs)} | {exact_independent:.4f} | "
                            f"{_rate(c.power, runs)} | {_rate(c.power_independent, runs)} |",
                            flush=True,
                        )


def joint_stop_section(args: argparse.Namespace) -> None:
    """``statistics.adaptive=decision`` over two critical models through ``next_round`` (``_joint_stop``): the
    bounds' coverage of the true total at the stop, the verdicts and epochs per cell; the dead band at σ_h = 0."""
    rng = np.random.default_rng(args.seed + 3)
    statistics = StatisticsConfig(confidence_level=args.level, max_epochs=args.max_epochs)
    decision = DecisionConfig()
    shares = "/".join(f"{s:g}" for s in args.joint_shares)
    upper_level = 0.5 + args.level / 2.0
    print(
        f"## Joint decision-driven stop (statistics.adaptive=decision), {len(args.joint_shares)} critical models "
        f"split {shares}, epochs=20 in {statistics.rounds} rounds then rounds of 4 up to max_epochs "
        f"{statistics.max_epochs} a model; epochs = 1000 ms x (1 + h_r + CV x AR1), AR(1) running on in time across "
        f"the models' rounds; seed {args.seed + 3}\n"
    )
    if "coverage" in args.only_joint_stop:
        print(
            f"upper / lower: the total's upper bound over the true total / lower bound under it (nominal "
            f"{upper_level:.1%} each); both: the two together ({args.level:.0%}); LOCAL / CLOUD / GRAY: the verdict "
            f"at the stop; wrong: LOCAL with the truth >= {decision.local_max_hours:g} h or CLOUD with it <= "
            f"{decision.cloud_min_hours:g} h; settled: stopped as decision_settled; epochs: mean per job, both models; "
            f"{args.joint_runs} jobs a cell.\n"
        )
        print(
            "| true total | CV | rho | sigma_h | upper | lower | both | LOCAL | CLOUD | GRAY | wrong | settled "
            "| epochs |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for total in args.joint_totals:
            for cv in args.two_level_cvs:
                for rho in args.two_level_rhos:
                    for sigma in args.drift_host_sigmas:
                        c = joint_stop_cell(
                            rng, args.joint_runs, total, args.joint_shares, rho, cv, sigma, statistics, 20
                        )
                        n = c.runs
                        print(
                            f"| {total:g} h | {cv:.0%} | {rho:g} | {sigma:.0%} | {_rate(c.upper_coverage, n)} | "
                            f"{_rate(c.lower_coverage, n)} | {_rate(c.coverage, n)} | {_rate(c.local, n)} | "
                            f"{_rate(c.cloud, n)} | {_rate(c.gray, n)} | {_rate(c.wrong, n)} | {_rate(c.settled, n)} | "
                            f"{c.mean_epochs:.1f} |",
                            flush=True,
                        )
    if "band" in args.only_joint_stop:
        cv = args.two_level_cvs[0]
        local_h, cloud_h = decision.local_max_hours, decision.cloud_min_hours
        below, above = args.band_reach
        totals_h = np.concatenate(
            (
                np.arange(local_h - below, local_h - 1e-9, args.band_step),
                np.arange(cloud_h + args.band_step, cloud_h + above + 1e-9, args.band_step),
            )
        )
        print(
            f"\nDead band at sigma_h = 0, CV {cv:.0%}: true totals outside [{local_h:g}, {cloud_h:g}] h where GRAY is "
            f"the verdict at the stop in more than half of {args.band_runs} jobs, on a {args.band_step:g} h grid from "
            f"{local_h - below:g} to {cloud_h + above:g} h\n"
        )
        print("| rho | dead band | width | epochs per job inside it |")
        print("|---|---|---|---|")
        for rho in args.two_level_rhos:
            cells = [
                joint_stop_cell(rng, args.band_runs, t, args.joint_shares, rho, cv, 0.0, statistics, 20)
                for t in totals_h
            ]
            gray = np.array([c.gray for c in cells])
            band, width = dead_band(totals_h, gray, local_h, cloud_h)
            dead = gray > 0.5
            epochs = (
                f"{np.mean([c.mean_epochs for c, d in zip(cells, dead, strict=True) if d]):.1f}" if dead.any() else "-"
            )
            print(f"| {rho:g} | {band} | {width:.2f} h | {epochs} |", flush=True)


def history_section(args: argparse.Namespace) -> None:
    """Issue 33's cells (``_two_level.history_cell``, ``_two_level.two_level_cell``, ``_joint_stop``): a drifting
    host with and without a history of earlier runs, the slow first epoch after each gap at ρ = 0.9, and the cells
    that held before."""
    rng = np.random.default_rng(args.seed + 4)
    runs, jobs = (80, 8) if args.quick else (2000, 300)
    level, design, earlier, phi, excess = args.level, Design(5, 4), 3, 0.9, 0.0375
    statistics = StatisticsConfig(confidence_level=level, max_epochs=args.max_epochs)
    print(
        f"## Issue 33: epochs = 1000 ms x (1 + h_r + CV x AR1), CV 5%, design 5x4 with 15 epochs between rounds; "
        f"{runs} runs a cell, {jobs} jobs a joint-stop cell, seed {args.seed + 4}\n"
    )
    print(
        f"Host level AR(1) across rounds, phi {phi:g}, epochs' rho 0.5. alone: the bound from this run; history: with "
        f"{earlier} earlier runs (own host levels) in the history. coverage: the 95% interval; upper: its upper end "
        f"(the total's bound, nominal 97.5%); validate: new_run_interval with the history covering a new training of "
        f"{args.new_run_factor} x N epochs.\n"
    )
    print("| sigma_h | alone: coverage, upper, half-width | history: coverage, upper, half-width | validate |")
    print("|---|---|---|---|")
    for sigma in (0.05, 0.1):
        c = history_cell(rng, runs, design, 0.5, 0.05, sigma, phi, 15, level, earlier, args.new_run_factor)
        print(
            f"| {sigma:.0%} | {_rate(c.coverage, runs)}, {_rate(c.upper_coverage, runs)}, ±{c.halfwidth:.1%} | "
            f"{_rate(c.history_coverage, runs)}, {_rate(c.history_upper_coverage, runs)}, "
            f"±{c.history_halfwidth:.1%} | {_rate(c.new_run_coverage, runs)} |",
            flush=True,
        )
    print(f"\nFirst epoch of each later round {excess:.2%} slower, no history: coverage, upper, drift FPR.\n")
    print("| rho | sigma_h | coverage | upper | half-width | drift FPR |")
    print("|---|---|---|---|---|---|")
    for rho, sigma in ((0.9, 0.0), (0.9, 0.05), (0.5, 0.0)):
        c = history_cell(rng, runs, design, rho, 0.05, sigma, 0.0, 15, level, 0, args.new_run_factor, excess)
        print(
            f"| {rho:g} | {sigma:.0%} | {_rate(c.coverage, runs)} | {_rate(c.upper_coverage, runs)} | "
            f"±{c.halfwidth:.1%} | {_rate(c.drift_fpr, runs)} |",
            flush=True,
        )
    print("\nCells that held before (host level independent per round, no slow first epoch): two_level_cell.\n")
    print("| gap | rho | sigma_h | coverage | upper | half-width | drift FPR | new run |")
    print("|---|---|---|---|---|---|---|---|")
    for gap in (15, 0):
        for rho in (0.0, 0.5, 0.8):
            for sigma in (0.0, 0.05, 0.1):
                c = two_level_cell(rng, runs, design, rho, 0.05, sigma, gap, level, args.ramp, args.new_run_factor)
                print(
                    f"| {gap} | {rho:g} | {sigma:.0%} | {_rate(c.coverage, runs)} | {_rate(c.upper_coverage, runs)} | "
                    f"±{c.halfwidth:.1%} | {_rate(c.drift_fpr, runs)} | {_rate(c.new_run_coverage or 0.0, runs)} |",
                    flush=True,
                )
    print(
        f"\nJoint stop (statistics.adaptive=decision), 2 critical models split 0.6/0.4, epochs' rho 0.5: wrong = "
        f"LOCAL at >= 24 h or CLOUD at <= 48 h; history: {earlier} earlier fixed runs; drift: the host's phi.\n"
    )
    print("| true total | sigma_h | phi | history | upper | lower | LOCAL | CLOUD | GRAY | wrong | epochs |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    cells = [(t, s, phi, k) for t in (25.0, 47.0) for s in (0.05, 0.1) for k in (0, earlier)]
    cells += [(t, s, 0.0, 0) for t in (22.0, 26.0, 50.0) for s in (0.0, 0.1)]
    for total, sigma, host_phi, history in cells:
        c = joint_stop_cell(
            rng, jobs, total, [0.6, 0.4], 0.5, 0.05, sigma, statistics, 20, host_phi=host_phi, earlier=history
        )
        print(
            f"| {total:g} h | {sigma:.0%} | {host_phi:g} | {history} | {_rate(c.upper_coverage, jobs)} | "
            f"{_rate(c.lower_coverage, jobs)} | {_rate(c.local, jobs)} | {_rate(c.cloud, jobs)} | "
            f"{_rate(c.gray, jobs)} | {_rate(c.wrong, jobs)} | {c.mean_epochs:.1f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
