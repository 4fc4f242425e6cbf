"""Cross-card truth: each model's step and training hours projected from one card's report onto another card that
measured the same training, against what that card measured.

    python benchmarks/cross_card_check.py REPORT [REPORT ...] [--json OUT]

Each REPORT is a report.json with its config_resolved.yaml beside it. Two reports measured the same training when
a model of the same name ran at the same batch with the same workload factory (custom models) on two different
catalog cards. For every such pair and both directions it prints the projected step (ms) with its interval, the
measured step, the error and whether the measured step lies inside the interval, then the same for the training's
hours. Projections are today's code over the stored measurements: the recommendation is rebuilt from the source
report with that model as the only critical model.

The projected step is a card part (compute and memory traffic, scaled to the card) and a host part (launches and
host work, kept). Each pair also prints the error with the host part scaled by the ratio of the two machines' host
probes (the rounds' ``torch_cpu_op_ms``, median per run: target over source) where the host part is most of the
step, the card model's own error once the hosts' difference is taken out, and the interval's coverage held out of
the fit (``benchmarks/cross_card_fit.py``).

The FLOPs by precision are a property of the step, not of the card: where the two reports count the same FLOPs
(within 1%) and one of them splits them more finely (fp32 convolutions counted as tf32), both use that split.
"""

import argparse
import json
import math
import sys
from dataclasses import dataclass, replace
from datetime import date
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "user_models"))  # the custom factories the configs name

from gpubench.config import load_resolved_config
from gpubench.decision.recommendation import build_recommendation
from gpubench.hardware.catalog import load_catalog, match_catalog_card
from gpubench.output.report_file import read_report
from gpubench.results import ModelResult, RunReport

CATALOG = load_catalog()


@dataclass(frozen=True)
class Measured:
    """One model of one report: the card, the report and its config, and the training's identity."""

    path: Path
    card: str
    name: str
    report: RunReport
    config_path: Path
    identity: tuple

    @property
    def result(self) -> ModelResult:
        return self.report.models[self.name]

    @property
    def step_ms(self) -> float:
        return self.result.mean_epoch_time_ms / self.result.steps_per_epoch

    @property
    def host_probe_ms(self) -> float | None:
        """The median of the rounds' host probe (``torch_cpu_op_ms``, ms); None without one."""
        return host_probe_ms(self.result)


def host_probe_ms(result: ModelResult) -> float | None:
    """The median over a run's rounds of its host probe's torch CPU operation (ms); None where no round read it."""
    readings = sorted(r.host_probe.torch_cpu_op_ms for r in result.rounds or [] if r.host_probe is not None)
    if not readings:
        return None
    return (readings[(len(readings) - 1) // 2] + readings[len(readings) // 2]) / 2


@dataclass(frozen=True)
class PairCheck:
    """One model projected from ``source`` onto ``target``'s card: step (ms) and hours, each projected with its
    interval and measured, with the relative error ``projected / measured - 1``."""

    model: str
    source: str
    target: str
    projected_step_ms: float
    step_interval_ms: tuple[float, float]
    measured_step_ms: float
    projected_hours: float
    hours_interval: tuple[float, float]
    measured_hours: float
    host_share: float | None
    #: The projected step's host part (launches and host work, kept from the source; ms).
    host_ms: float = 0.0
    #: Target run's host probe over the source run's (None where either lacks one).
    probe_ratio: float | None = None
    source_path: str = ""
    target_path: str = ""

    @property
    def card_ms(self) -> float:
        """The projected step's card part (compute and memory traffic on the target; ms)."""
        return self.projected_step_ms - self.host_ms

    @property
    def probe_scaled_error(self) -> float | None:
        """The step's error with the host part scaled by :attr:`probe_ratio` where it is most of the projected step:
        the card part's own error. Where the card part is most of it the host's launches run ahead of the card's
        work, so a slower host does not lengthen the step, and the error is the step's."""
        if self.probe_ratio is None:
            return None
        if self.host_ms < 0.5 * self.projected_step_ms:
            return self.step_error
        return (self.card_ms + self.host_ms * self.probe_ratio) / self.measured_step_ms - 1.0

    @property
    def step_error(self) -> float:
        return self.projected_step_ms / self.measured_step_ms - 1.0

    @property
    def step_inside(self) -> bool:
        return self.step_interval_ms[0] <= self.measured_step_ms <= self.step_interval_ms[1]

    @property
    def hours_error(self) -> float:
        return self.projected_hours / self.measured_hours - 1.0

    @property
    def hours_inside(self) -> bool:
        return self.hours_interval[0] <= self.measured_hours <= self.hours_interval[1]


def measured_models(path: Path) -> list[Measured]:
    """The models of the report at ``path`` that measured a step on a catalog card."""
    report = read_report(path)
    card = match_catalog_card(report.hardware.device_name, CATALOG) if report.hardware.on_gpu else None
    config_path = path.parent / "config_resolved.yaml"
    if card is None or not config_path.is_file():
        return []
    config = load_resolved_config(config_path)
    found = []
    for name, result in report.models.items():
        if result.status != "ok" or not result.steps_per_epoch or result.mean_epoch_time_ms is None:
            continue
        factory = config.workloads.custom.factory if name == "custom" else None
        identity = (name, factory, result.batch_size)
        found.append(Measured(path, card, name, report, config_path, identity))
    return found


def shared_counts(a: ModelResult, b: ModelResult) -> dict[str, float] | None:
    """The finer FLOPs-by-precision split of two counts of one step (None when they count different FLOPs)."""
    if not a.flops_per_step or not b.flops_per_step or abs(a.flops_per_step / b.flops_per_step - 1.0) > 0.01:
        return None
    splits = [s for s in (a.flops_by_precision, b.flops_by_precision) if s]
    return max(splits, key=len) if splits else None


def with_counts(measured: Measured, counts: dict[str, float] | None) -> RunReport:
    if counts is None:
        return measured.report
    models = {**measured.report.models, measured.name: replace(measured.result, flops_by_precision=counts)}
    return replace(measured.report, models=models)


def card_row(report: RunReport, measured: Measured, card: str):
    """The projection row of ``measured``'s model on ``card`` (its estimate there), deciding on that model."""
    config = load_resolved_config(measured.config_path)
    decision = replace(config.decision, critical_models=[measured.name])
    recommendation = build_recommendation(report, decision, CATALOG, today=date.fromisoformat(report.timestamp[:10]))
    rows = {row.card: row for row in recommendation.projection}
    split = recommendation.per_model[measured.name].step_split
    host_ms = None if split is None else (split.launch_ms or 0.0) + (split.host_ms or 0.0)
    host_share = None if split is None or split.host_ms is None else host_ms / split.step_ms
    return rows[card].models[measured.name], host_share, host_ms or 0.0


def check_pair(source: Measured, target: Measured) -> PairCheck:
    counts = shared_counts(source.result, target.result)
    projected, host_share, host_ms = card_row(with_counts(source, counts), source, target.card)
    own, _, _ = card_row(with_counts(target, counts), target, target.card)
    probes = (source.host_probe_ms, target.host_probe_ms)
    return PairCheck(
        model=source.name if source.name != "custom" else Path(str(source.identity[1])).stem.split(":")[0],
        source=source.card,
        target=target.card,
        projected_step_ms=projected.step_ms,
        step_interval_ms=tuple(projected.step_ms_interval),
        measured_step_ms=target.step_ms,
        projected_hours=projected.hours,
        hours_interval=(projected.hours_lower, projected.hours_upper),
        measured_hours=own.hours,
        host_share=host_share,
        host_ms=host_ms,
        probe_ratio=probes[1] / probes[0] if None not in probes else None,
        source_path=str(source.path),
        target_path=str(target.path),
    )


def pairs(paths: list[Path]) -> list[PairCheck]:
    models = [m for path in paths for m in measured_models(path)]
    checks = []
    for source in models:
        for target in models:
            if source.identity == target.identity and source.card != target.card:
                checks.append(check_pair(source, target))
    return checks


def table(checks: list[PairCheck]) -> str:
    lines = [
        f"{'model':<22} {'from':<6} {'to':<6} {'step ms':>8} {'interval ms':>17} {'measured':>9} {'error':>7} "
        f"{'in':>3}  {'hours':>7} {'interval h':>15} {'measured':>8} {'error':>7} {'in':>3} {'host':>5} "
        f"{'probe':>5} {'card err':>8}"
    ]
    for c in checks:
        host = "-" if c.host_share is None else f"{c.host_share:.0%}"
        probe = "-" if c.probe_ratio is None else f"{c.probe_ratio:.2f}"
        card_error = "-" if c.probe_scaled_error is None else f"{c.probe_scaled_error:+.1%}"
        lines.append(
            f"{c.model:<22} {c.source:<6} {c.target:<6} {c.projected_step_ms:>8.2f} "
            f"{c.step_interval_ms[0]:>8.2f}-{c.step_interval_ms[1]:<8.2f} {c.measured_step_ms:>9.2f} "
            f"{c.step_error:>+7.1%} {'yes' if c.step_inside else 'NO':>3}  {c.projected_hours:>7.3f} "
            f"{c.hours_interval[0]:>7.3f}-{c.hours_interval[1]:<7.3f} {c.measured_hours:>8.3f} "
            f"{c.hours_error:>+7.1%} {'yes' if c.hours_inside else 'NO':>3} {host:>5} {probe:>5} {card_error:>8}"
        )
    if checks:
        inside = sum(c.step_inside for c in checks)
        lines.append(
            f"{len(checks)} pairs; median |step error| {median([abs(c.step_error) for c in checks]):.1%}; {inside} "
            f"of {len(checks)} steps inside their interval; {sum(c.hours_inside for c in checks)} of {len(checks)} "
            "trainings inside their hours' bounds"
        )
        scaled = [abs(c.probe_scaled_error) for c in checks if c.probe_scaled_error is not None]
        if scaled:
            lines.append(
                f"with the host part scaled by the machines' probe ratio where it is most of the step: median "
                f"|step error| {median(scaled):.1%} over {len(scaled)} pairs (the card part's own error)"
            )
    return "\n".join(lines)


def median(values: list[float]) -> float:
    ordered = sorted(values)
    return (ordered[(len(ordered) - 1) // 2] + ordered[len(ordered) // 2]) / 2


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("reports", nargs="+", type=Path)
    parser.add_argument("--json", type=Path, help="also write every pair's figures here")
    args = parser.parse_args(argv)
    checks = pairs(args.reports)
    print(table(checks))
    if checks:
        from cross_card_fit import held_out_text

        print(held_out_text(checks))
    if args.json:
        rows = [{**c.__dict__, "step_error": c.step_error, "hours_error": c.hours_error} for c in checks]
        args.json.write_text(json.dumps(rows, indent=1, default=lambda v: None if math.isnan(v) else v))
    return 0 if checks else 1


if __name__ == "__main__":
    sys.exit(main())
