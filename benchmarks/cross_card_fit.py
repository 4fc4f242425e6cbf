"""Fit the projected step's interval, part by part, from measured cross-card pairs and the hosts' probes, and
write it to ``gpubench/decision/cross_card_calibration.json`` (read by :mod:`gpubench.decision.projection`).

    python benchmarks/cross_card_fit.py [--pairs REPORT ...] [--probes REPORT ...] [--out JSON]

A step projected from a GPU is a card part ``c`` (compute and memory traffic, scaled to the card) and a host part
``h`` (kernel launches and host work, kept as measured): the card runs the same kernels, but the rented machine's
CPU is another one. The interval is ``[c (1 - e) + h / r, c (1 + e) + h r]``:

- ``r``, the host part's machine-to-machine spread, comes from the host probe each report's rounds read (the
  median ``torch_cpu_op_ms`` of one model's run): over every pair of runs in two different reports (two machines,
  or one machine at two times), the ratio ``max / min``; ``r`` is its :data:`LEVEL` quantile. The probe is the
  same fixed work everywhere, so it measures the machines and nothing of the models or cards paired.
- ``e``, the card part's relative error, comes from the pairs whose card part is at least half the projected
  step (:data:`CARD_BOUND_SHARE`; where the host part is most of the step, the card part's error cannot be told
  from the hosts' difference): the smallest that puts each such pair's measured step ``m`` inside ``[c (1 - e) +
  h, c (1 + e) + h]``, the host part as measured, i.e. ``|m - c - h| / c``, and ``e`` is their maximum. The
  hosts' difference of those pairs is thereby charged to the card part, not left out.

Pairs are two reports of the same training (model, workload factory, batch) on two catalog cards, both
directions (``benchmarks/cross_card_check.py``). The held-out coverage is the share of pairs inside an interval
fitted without them: leave one model out (its two directions held out, ``e`` fitted on the rest) and leave one
card out (``e`` fitted on the pairs projected onto one card, checked on those projected onto the other). ``r``
comes from the probes of every report given, the held-out pairs' included: it is a property of machines, read on
each.

The H100 and the H200 have the same compute peaks (the H200 more memory bandwidth), so these pairs check little of
the card part's scaling by the peak ratio. The stored precision check (``benchmarks/projection_check.py`` on the
H200: fp32 steps projected to tf32 and bf16, peak ratios up to 15) is therefore checked too, against the same
interval, and its coverage printed and stored beside the pairs' (``precision_check_coverage``); it does not enter
the fit.
"""

import argparse
import json
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cross_card_check import PairCheck, host_probe_ms, pairs

from gpubench.decision.projection import part_interval_ms
from gpubench.output.report_file import read_report

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
OUT = ROOT / "gpubench" / "decision" / "cross_card_calibration.json"
#: The quantile of the machine-to-machine probe ratios taken as the host part's spread.
LEVEL = 0.9
#: A pair's card part is this share of its projected step or more for its error to fit the card part's.
CARD_BOUND_SHARE = 0.5
PRECISION_CHECK = RESULTS / "2026-12-01-h200-s6-projection-check.json"
DEFAULT_PAIR_REPORTS = tuple(
    RESULTS / name / "report.json"
    for name in (
        "2026-12-03-h200-s10-default",
        "2026-12-06-h100-default",
        "2026-12-03-h200-s10-lm",
        "2026-12-06-h100-lm",
        "2026-12-03-h200-s10-resnet",
        "2026-12-06-h100-resnet",
    )
)


@dataclass(frozen=True)
class Probe:
    """One model's run in one report: the median of its rounds' host probe (``torch_cpu_op_ms``, ms)."""

    path: str
    model: str
    torch_cpu_op_ms: float


@dataclass(frozen=True)
class Coverage:
    """Held-out pairs inside their interval: ``inside`` of ``total``."""

    inside: int
    total: int

    @property
    def share(self) -> float:
        return self.inside / self.total if self.total else float("nan")


def stored_reports() -> list[Path]:
    """Every stored report under benchmarks/results: the ``*-report.json`` files and the run folders' reports."""
    return sorted([*RESULTS.glob("*-report.json"), *RESULTS.glob("*/report.json")])


def read_probes(paths: Sequence[Path]) -> list[Probe]:
    """Each model run's median host probe in the reports at ``paths`` (runs without one left out)."""
    probes = []
    for path in paths:
        for name, result in read_report(path).models.items():
            reading = host_probe_ms(result)
            if reading is not None:
                probes.append(Probe(relative(path), name, reading))
    return probes


def relative(path: Path) -> str:
    resolved = Path(path).resolve()
    return str(resolved.relative_to(ROOT)) if resolved.is_relative_to(ROOT) else str(resolved)


def quantile(values: Sequence[float], level: float) -> float:
    """The ``level`` quantile of ``values``, linear between order statistics (numpy's default)."""
    ordered = sorted(values)
    position = level * (len(ordered) - 1)
    below = math.floor(position)
    above = min(below + 1, len(ordered) - 1)
    return ordered[below] + (ordered[above] - ordered[below]) * (position - below)


def probe_ratios(probes: Sequence[Probe]) -> list[float]:
    """``max / min`` of the probes of every two runs in different reports."""
    return [
        max(a.torch_cpu_op_ms, b.torch_cpu_op_ms) / min(a.torch_cpu_op_ms, b.torch_cpu_op_ms)
        for i, a in enumerate(probes)
        for b in probes[i + 1 :]
        if a.path != b.path
    ]


def host_spread(probes: Sequence[Probe], level: float = LEVEL) -> float:
    """The host part's machine-to-machine ratio spread ``r``: the ``level`` quantile of :func:`probe_ratios`."""
    return quantile(probe_ratios(probes), level)


def required_card_error(check: PairCheck, spread: float) -> float:
    """The smallest card-part error ``e`` that puts the pair's measured step inside ``[c (1 - e) + h / r,
    c (1 + e) + h r]``; infinite where even ``e`` = 1 leaves it under (a measured step below the host part's low
    end)."""
    card, host, measured = check.card_ms, check.host_ms, check.measured_step_ms
    needed_above = measured - host * spread
    needed_below = measured - host / spread
    if card <= 0:
        return 0.0 if needed_above <= 0 <= needed_below else math.inf
    return max(0.0, needed_above / card - 1.0, 1.0 - needed_below / card)


def card_bound(check: PairCheck) -> bool:
    """Whether the pair's card part is at least :data:`CARD_BOUND_SHARE` of its projected step."""
    return check.card_ms >= CARD_BOUND_SHARE * check.projected_step_ms


def card_error(checks: Sequence[PairCheck]) -> float:
    """The card part's relative error ``e``: the largest :func:`required_card_error` with the host part as
    measured (``r`` = 1) over the card-bound ``checks``; ValueError when none is card-bound."""
    bound = [check for check in checks if card_bound(check)]
    if not bound:
        raise ValueError("no pair whose card part is most of its step: the card part's error cannot be fitted")
    return max(required_card_error(check, 1.0) for check in bound)


def inside(check: PairCheck, error: float, spread: float) -> bool:
    """Whether the pair's measured step lies in its part-by-part interval with card error ``error`` and host spread
    ``spread`` (the product's :func:`~gpubench.decision.projection.part_interval_ms`)."""
    step, host = check.card_ms + check.host_ms, check.host_ms
    low, high = part_interval_ms(step, host, step, host, error, spread)
    return low <= check.measured_step_ms <= high


def leave_one_out(checks: Sequence[PairCheck], spread: float, group: Callable[[PairCheck], str]) -> Coverage:
    """Each group's pairs checked against ``e`` fitted on the other groups' pairs."""
    covered = total = 0
    for name in sorted({group(c) for c in checks}):
        held = [c for c in checks if group(c) == name]
        error = card_error([c for c in checks if group(c) != name])
        covered += sum(inside(c, error, spread) for c in held)
        total += len(held)
    return Coverage(covered, total)


def leave_one_model_out(checks: Sequence[PairCheck], spread: float) -> Coverage:
    """Each model's pairs checked against ``e`` fitted on the other models' pairs."""
    return leave_one_out(checks, spread, lambda check: check.model)


def leave_one_card_out(checks: Sequence[PairCheck], spread: float) -> Coverage:
    """The pairs projected onto each card checked against ``e`` fitted on those projected onto the others."""
    return leave_one_out(checks, spread, lambda check: check.target)


def precision_check_rows(path: Path, error: float, spread: float) -> list[dict]:
    """The precision check's rows (fp32 steps projected to tf32 and bf16 on one card) against the interval with
    ``error`` and ``spread``: each with its card part ``c`` (the projection less launches and host work), host
    part ``h``, measured step and whether it lies inside."""
    rows = []
    for row in json.loads(path.read_text())["precision"]["rows"]:
        host = row["launch_ms"] + row["host_ms"]
        card = row["projected_ms"] - host
        low, high = card * (1 - error) + host / spread, card * (1 + error) + host * spread
        rows.append(
            {
                "model": row["model"],
                "variant": row["variant"],
                "card_ms": card,
                "host_ms": host,
                "measured_step_ms": row["measured_ms"],
                "inside": low <= row["measured_ms"] <= high,
            }
        )
    return rows


def held_out_text(checks: Sequence[PairCheck], probe_reports: Sequence[Path] | None = None) -> str:
    """The held-out coverage of ``checks``, in words, with ``r`` from the probes of ``probe_reports`` (None: every
    stored report)."""
    probes = read_probes(stored_reports() if probe_reports is None else probe_reports)
    spread = host_spread(probes)
    by_model, by_card = leave_one_model_out(checks, spread), leave_one_card_out(checks, spread)
    return (
        f"held-out coverage of the step's interval (r {spread:.3f}, the {LEVEL:g} quantile of {len(probes)} "
        f"probed runs' ratios; e fitted without the pairs checked): leave one model out {by_model.inside} of "
        f"{by_model.total} ({by_model.share:.2f}), leave one card out {by_card.inside} of {by_card.total} "
        f"({by_card.share:.2f})"
    )


def fit(pair_reports: Sequence[Path], probe_reports: Sequence[Path], level: float = LEVEL) -> dict:
    """The calibration: ``r`` from the probes, ``e`` from the pairs, the held-out coverage, and what they came
    from (the document written to ``cross_card_calibration.json``)."""
    checks = pairs(list(pair_reports))
    probes = read_probes(probe_reports)
    spread = host_spread(probes, level)
    error = card_error(checks)
    by_model, by_card = leave_one_model_out(checks, spread), leave_one_card_out(checks, spread)
    return {
        "card_relative_error": error,
        "host_ratio_spread": spread,
        "level": level,
        "method": (
            "step = card part c (compute + memory traffic, projected) + host part h (launches + host work, kept); "
            "interval [c (1 - e) + h / r, c (1 + e) + h r]. r: the level quantile of max/min of the median "
            "torch_cpu_op_ms host probe over every two model runs in different reports. e: the largest |m - c - h| / c "
            "over the pairs whose card part is at least half the projected step (m: the measured step). Fitted "
            "by benchmarks/cross_card_fit.py."
        ),
        "held_out_coverage": {
            "leave_one_model_out": {"inside": by_model.inside, "pairs": by_model.total, "share": by_model.share},
            "leave_one_card_out": {"inside": by_card.inside, "pairs": by_card.total, "share": by_card.share},
        },
        "precision_check_file": relative(PRECISION_CHECK),
        "precision_check_coverage": precision_check_rows(PRECISION_CHECK, error, spread),
        "pairs": [
            {
                "model": c.model,
                "source": c.source,
                "target": c.target,
                "source_file": relative(Path(c.source_path)),
                "target_file": relative(Path(c.target_path)),
                "card_ms": c.card_ms,
                "host_ms": c.host_ms,
                "measured_step_ms": c.measured_step_ms,
                "probe_ratio": c.probe_ratio,
                "card_bound": card_bound(c),
                "card_error_host_as_measured": required_card_error(c, 1.0),
                "card_error_needed_at_r": required_card_error(c, spread),
            }
            for c in checks
        ],
        "probes": [{"file": p.path, "model": p.model, "torch_cpu_op_ms": p.torch_cpu_op_ms} for p in probes],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", nargs="+", type=Path, default=list(DEFAULT_PAIR_REPORTS))
    parser.add_argument("--probes", nargs="+", type=Path, help="reports whose host probes give r (default: all)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    calibration = fit(args.pairs, args.probes or stored_reports())
    args.out.write_text(json.dumps(calibration, indent=1) + "\n")
    print(
        f"e (card part) {calibration['card_relative_error']:.4f}; r (host part) {calibration['host_ratio_spread']:.4f} "
        f"at level {calibration['level']:g} over {len(calibration['probes'])} probed runs; "
        f"{len(calibration['pairs'])} pairs"
    )
    for name, coverage in calibration["held_out_coverage"].items():
        print(f"held-out coverage, {name.replace('_', ' ')}: {coverage['inside']} of {coverage['pairs']}")
    precision = calibration["precision_check_coverage"]
    print(
        f"precision check (fp32 projected to tf32/bf16 on the H200, not fitted): {sum(r['inside'] for r in precision)}"
        f" of {len(precision)} inside; outside: "
        + (", ".join(f"{r['model']} {r['variant']}" for r in precision if not r["inside"]) or "none")
    )
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
