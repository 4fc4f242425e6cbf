"""``python -m gpubench.launch REPORT --target skypilot|dstack [--out FILE]``: a task file for the report's
recommended rental, carrying the measured hours.

The recommended choice is the cost table's cheapest row that fits (:func:`gpubench.results.cheapest_rental`, the
row every other output names); the task asks for every GPU that fits, cheapest first, under the names its card
file gives (``skypilot_name``, ``dstack_name``), spot when the cheapest is spot. Its command re-runs the report's
job there, less the machine-specific overrides. A comment states the projected hours per GPU and, for SkyPilot, a
snippet hands them to ``Task.set_time_estimator``. Bad input is one paragraph and exit code 2.
"""

import argparse
import json
import shlex
from dataclasses import dataclass
from pathlib import Path

import yaml

from gpubench.hardware.catalog import Card, dstack_names, load_catalog, skypilot_names
from gpubench.results import CostRow, ReportFormatError, RunReport, cheapest_rental, fitting_rentals

#: Overrides that describe the machine the report was measured on, not the training: dropped from the command.
_MACHINE_KEYS: tuple[str, ...] = ("output", "hardware", "hydra.", "tracking.uri", "distributed.")
TARGETS: tuple[str, ...] = ("skypilot", "dstack")


class LaunchInputError(ValueError):
    """The report cannot give a task file: unreadable, not a gpubench report, or no priced option that fits."""


@dataclass(frozen=True)
class Choice:
    """The rental the task asks for: the cheapest row that fits (:func:`gpubench.results.cheapest_rental`), every
    GPU that fits, cheapest first (its cheapest row of the same kind, spot or on-demand), and each GPU's SkyPilot
    and dstack names."""

    best: CostRow
    rows: tuple[CostRow, ...]
    skypilot: dict[str, str]
    dstack: dict[str, tuple[str, int]]

    @property
    def spot(self) -> bool:
        return self.best.spot


def read_report(path: Path) -> RunReport:
    """The report at ``path``; raises :class:`LaunchInputError` saying what is wrong."""
    try:
        data = json.loads(path.read_text())
    except OSError as exc:
        raise LaunchInputError(f"cannot read the report {path}: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise LaunchInputError(f"{path} is not a JSON report ({exc}): give a report.json gpubench wrote") from None
    try:
        return RunReport.from_dict(data)
    except (ReportFormatError, TypeError, AttributeError) as exc:
        raise LaunchInputError(f"{path} is not a gpubench report: {exc}") from None


def choose(report: RunReport, catalog: dict[str, Card] | None = None) -> Choice:
    """The recommended rental of a report's cost table, among the cards of ``catalog`` (default: the shipped one)
    with a launcher name."""
    catalog = load_catalog() if catalog is None else catalog
    skypilot, dstack = skypilot_names(catalog), dstack_names(catalog)
    rec = report.recommendation
    table = [row for row in (rec.cost_table if rec is not None else []) if row.gpu in skypilot and row.gpu in dstack]
    best = cheapest_rental(table)
    if best is None:
        raise LaunchInputError(
            "the report has no priced option that fits (recommendation.cost_table is empty or every row is "
            "unpriced or too small): run a complete gpubench job with this version, which writes the cost table"
        )
    per_gpu: dict[str, CostRow] = {}
    for row in fitting_rentals(table):
        if row.spot == best.spot:
            per_gpu.setdefault(row.gpu, row)
    return Choice(best=best, rows=tuple(per_gpu.values()), skypilot=skypilot, dstack=dstack)


def training_command(report: RunReport) -> str:
    """The command that re-runs the report's job on the rented machine: ``python -m gpubench`` with its
    overrides, less those that describe the measuring machine (:data:`_MACHINE_KEYS`)."""
    kept = [o for o in report.run.overrides if not o.lstrip("+~").startswith(_MACHINE_KEYS)]
    return " ".join(["python -m gpubench", *(shlex.quote(o) for o in kept)])


def _hours_comment(choice: Choice) -> list[str]:
    lines = ["# Projected training hours from the gpubench report (expected [lower, upper]), cheapest first:"]
    for row in choice.rows:
        kind = "spot" if row.spot else "on-demand"
        lines.append(
            f"#   {row.gpu} at {row.provider} ({kind}): {row.hours:.3g} h [{row.hours_lower:.3g}, "
            f"{row.hours_upper:.3g}], ${row.usd:,.2f} (price of {row.price_date}"
            + (f"; an instance of {row.gpu_count} GPUs, all paid)" if row.gpu_count > row.gpus_used else ")")
        )
    return lines


def _estimator_snippet(choice: Choice) -> list[str]:
    hours = {choice.skypilot[row.gpu]: round(row.training_hours or row.hours or 0.0, 4) for row in choice.rows}
    return [
        "# To let SkyPilot's optimizer price the measured duration instead of its one-hour default:",
        "#   import sky",
        "#   task = sky.Task.from_yaml('<this file>')",
        f"#   hours = {hours!r}",
        "#   task.set_time_estimator(",
        "#       lambda resources: 3600 * hours[next(iter(resources.accelerators))]",
        "#   )",
        "#   sky.launch(task)",
    ]


def skypilot_task(report: RunReport, choice: Choice) -> str:
    """The SkyPilot task YAML (text) for ``choice``."""
    gpus = choice.best.gpus_used
    task = {
        "name": "gpubench-training",
        "workdir": ".",
        "resources": {
            "use_spot": choice.spot,
            "ordered": [{"accelerators": f"{choice.skypilot[row.gpu]}:{gpus}"} for row in choice.rows],
        },
        "setup": "pip install -e .",
        "run": training_command(report),
    }
    header = _hours_comment(choice) + _estimator_snippet(choice)
    return "\n".join(header) + "\n" + yaml.safe_dump(task, sort_keys=False)


def dstack_task(report: RunReport, choice: Choice) -> str:
    """The dstack task configuration YAML (text) for ``choice``."""
    names = list(dict.fromkeys(choice.dstack[row.gpu][0] for row in choice.rows))
    memory_gb = min(choice.dstack[row.gpu][1] for row in choice.rows)
    upper = max(row.hours_upper or 0.0 for row in choice.rows)
    task = {
        "type": "task",
        "name": "gpubench-training",
        "commands": ["pip install -e .", training_command(report)],
        "resources": {"gpu": {"name": names, "memory": f"{memory_gb}GB..", "count": choice.best.gpus_used}},
        "spot_policy": "spot" if choice.spot else "on-demand",
        # The upper bound with room, so a run that overruns its prediction is stopped rather than billed forever.
        "max_duration": f"{max(1, int(upper * 1.5 + 1))}h",
    }
    return "\n".join(_hours_comment(choice)) + "\n" + yaml.safe_dump(task, sort_keys=False)


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m gpubench.launch",
        description="Write a SkyPilot or dstack task file for the report's recommended rental, with its hours.",
    )
    parser.add_argument("report", type=Path, help="a report.json written by a completed gpubench job")
    parser.add_argument("--target", choices=TARGETS, default="skypilot", help="the launcher (default skypilot)")
    parser.add_argument("--out", type=Path, help="where to write it (default: print it)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """The command line; returns the exit code."""
    args = _parse(argv)
    from gpubench.output import console

    try:
        report = read_report(args.report)
        choice = choose(report)
    except LaunchInputError as exc:
        console.error(str(exc))
        return 2
    text = skypilot_task(report, choice) if args.target == "skypilot" else dstack_task(report, choice)
    if args.out is None:
        print(text, end="")
    else:
        args.out.write_text(text)
        print(f"{args.target} task: {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
