"""``gpubench launch REPORT --target skypilot|dstack [--run CMD] [--out FILE] [--force]``: a task file for the
report's recommended rental (the cheapest fitting row), asking for every fitting GPU, cheapest first, and carrying
the projected hours. By default the task reruns the report's benchmark there (writing :data:`MEASURED_REPORT`);
``--run CMD`` runs your training instead."""

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
#: Where the measuring task writes the rented card's report, relative to the task's working folder.
MEASURED_REPORT = "gpubench-measured/report.json"
TARGETS: tuple[str, ...] = ("skypilot", "dstack")


class LaunchInputError(ValueError):
    """The report cannot give a task file: unreadable, not a gpubench report, or no priced option that fits."""


@dataclass(frozen=True)
class Choice:
    """The rental the task asks for: the cheapest fitting row, every fitting GPU cheapest first, and their names."""

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


def refusal(report: RunReport) -> str | None:
    """Why a task should not be written from ``report`` (a smoke test, an interrupted or failed run, no decision),
    or None."""
    if report.run.preset is not None:
        return (
            f"it is a {report.run.preset_note or report.run.preset} run (experiment={report.run.preset}): its hours "
            "and costs are not your training's; launch from a report of the real job"
        )
    if report.status != "complete":
        return (
            f"its status is {report.status}: the hours and costs cover only the models measured before it stopped; "
            "launch from a complete report"
        )
    if report.recommendation is None or report.recommendation.decision is None:
        return "it holds no decision (the measurements did not support one): the hours it would carry are unsettled"
    return None


def training_command(report: RunReport) -> str:
    """The command that measures on the rented machine: the report's own job (``python -m gpubench`` with its
    overrides, less those that describe the measuring machine, :data:`_MACHINE_KEYS`), tracking off, its report
    written to :data:`MEASURED_REPORT`."""
    kept = [o for o in report.run.overrides if not o.lstrip("+~").startswith(_MACHINE_KEYS)]
    return " ".join(
        ["python -m gpubench", *(shlex.quote(o) for o in kept), "tracking.enabled=false", f"output={MEASURED_REPORT}"]
    )


def _bring_back_comment(run: str | None) -> list[str]:
    if run is not None:
        return ["# The task runs your command (--run); the hours above are gpubench's projection of it."]
    return [
        f"# The task measures the training on the rented card and writes {MEASURED_REPORT}. Copy it back (SkyPilot:",
        f"#   scp <cluster>:sky_workdir/{MEASURED_REPORT} rented.json; dstack: from the run's working folder)",
        "# and build the cost table from both machines' reports: gpubench rent THIS_REPORT rented.json",
    ]


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


def skypilot_task(report: RunReport, choice: Choice, run: str | None = None) -> str:
    """The SkyPilot task YAML (text) for ``choice``: measuring there, or running ``run``."""
    gpus = choice.best.gpus_used
    task = {
        "name": "gpubench-training",
        "workdir": ".",
        "resources": {
            "use_spot": choice.spot,
            "ordered": [{"accelerators": f"{choice.skypilot[row.gpu]}:{gpus}"} for row in choice.rows],
        },
        "setup": "pip install -e .",
        "run": run if run is not None else training_command(report),
    }
    header = _hours_comment(choice) + _estimator_snippet(choice) + _bring_back_comment(run)
    return "\n".join(header) + "\n" + yaml.safe_dump(task, sort_keys=False)


def dstack_task(report: RunReport, choice: Choice, run: str | None = None) -> str:
    """The dstack task configuration YAML (text) for ``choice``: measuring there, or running ``run``."""
    names = list(dict.fromkeys(choice.dstack[row.gpu][0] for row in choice.rows))
    memory_gb = min(choice.dstack[row.gpu][1] for row in choice.rows)
    upper = max(row.hours_upper or 0.0 for row in choice.rows)
    task = {
        "type": "task",
        "name": "gpubench-training",
        "commands": ["pip install -e .", run if run is not None else training_command(report)],
        "resources": {"gpu": {"name": names, "memory": f"{memory_gb}GB..", "count": choice.best.gpus_used}},
        "spot_policy": "spot" if choice.spot else "on-demand",
        # The upper bound with room, so a run that overruns its prediction is stopped rather than billed forever.
        "max_duration": f"{max(1, int(upper * 1.5 + 1))}h",
    }
    header = _hours_comment(choice) + _bring_back_comment(run)
    return "\n".join(header) + "\n" + yaml.safe_dump(task, sort_keys=False)


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="gpubench launch",
        description="Write a SkyPilot or dstack task file for the report's recommended rental, with its hours: by "
        "default it measures the training there (for gpubench rent), with --run it runs your command.",
    )
    parser.add_argument("report", type=Path, help="a report.json written by a completed gpubench job")
    parser.add_argument("--target", choices=TARGETS, default="skypilot", help="the launcher (default skypilot)")
    parser.add_argument("--out", type=Path, help="where to write it (default: print it)")
    parser.add_argument("--run", metavar="CMD", help="the command the task runs (default: measure there)")
    parser.add_argument(
        "--force", action="store_true", help="write a task from a smoke-test, interrupted or undecided report"
    )
    return parser.parse_args(argv)


def _write(path: Path, text: str) -> None:
    """Write the task file atomically; raises :class:`LaunchInputError` naming the path when it cannot be written."""
    from gpubench.output.report_file import write_text_atomic

    if path.is_dir():
        raise LaunchInputError(f"--out {path} is a folder: give a file path such as {path / 'task.yaml'}")
    if not path.parent.is_dir():
        raise LaunchInputError(f"--out {path}: the folder {path.parent} does not exist; create it or give another path")
    try:
        write_text_atomic(path, text)
    except OSError as exc:
        raise LaunchInputError(
            f"--out {path} cannot be written ({exc.strerror or exc}); nothing was written there. Give a path in a "
            "writable folder with free space, or leave --out out to print the task"
        ) from None


def main(argv: list[str] | None = None) -> int:
    """The command line; returns the exit code."""
    args = _parse(argv)
    from gpubench.output import console

    try:
        report = read_report(args.report)
        refused = None if args.force else refusal(report)
        if refused is not None:
            raise LaunchInputError(f"{args.report} is refused: {refused}. --force writes the task all the same.")
        choice = choose(report)
        if args.run is not None and not args.run.strip():
            raise LaunchInputError("--run is empty: give the command the task runs, e.g. --run 'python train.py'")
        build = skypilot_task if args.target == "skypilot" else dstack_task
        text = build(report, choice, args.run)
        if args.out is not None:
            _write(args.out, text)
    except LaunchInputError as exc:
        console.error(str(exc))
        return 2
    if args.out is None:
        print(text, end="")
    else:
        print(f"{args.target} task: {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
