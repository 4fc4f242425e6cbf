"""``gpubench rent REPORT [REPORT ...] [--json OUT] [--rows N]``: one cost table from reports of the same training
measured on different machines: a measured card gets its report's rows, every other card is projected from the
nearest report (:func:`gpubench.decision.rent.measured_cost_table`). Exit 0, or 2 for bad input."""

import argparse
import json
from dataclasses import replace
from pathlib import Path

from gpubench.decision.config import DecisionConfig
from gpubench.decision.recommendation import build_recommendation
from gpubench.decision.rent import MeasuredReport, measured_cost_table
from gpubench.errors import GpubenchError
from gpubench.hardware.catalog import load_catalog, match_catalog_card
from gpubench.results import CostRow, RunReport, fitting_rentals

#: How many of the cheapest fitting rows are printed by default.
DEFAULT_ROWS = 10


class RentInputError(GpubenchError):
    """A report cannot be read, or the reports are not of one training."""


def _training(report: RunReport) -> dict[str, tuple[int | None, float | None]]:
    """What makes two reports the same training: each decided model's batch and samples per step."""
    decided = report.recommendation.decided_on if report.recommendation is not None else list(report.models)
    return {
        name: (report.models[name].batch_size, report.models[name].samples_per_step)
        for name in decided
        if name in report.models
    }


def _decision(path: Path, report: RunReport) -> DecisionConfig:
    """The report's own job's decision config (the ``decision`` section of the config beside it; the rest, such as
    a custom model's factory, is not needed to price it), deciding on the models its recommendation decided on."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    from gpubench.config import RETIRED_KEYS

    beside = path.parent / "config_resolved.yaml"
    decision = DecisionConfig()
    if beside.is_file():
        try:
            section = OmegaConf.load(beside).get("decision") or {}
            for dotted in RETIRED_KEYS:
                group, key = dotted.split(".", 1)
                if group == "decision":
                    section.pop(key, None)
            decision = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(DecisionConfig), section))
        except (OSError, OmegaConfBaseException, ValueError) as exc:
            raise RentInputError(f"{beside}: its decision section cannot be read ({exc}).") from None
    decided = report.recommendation.decided_on if report.recommendation is not None else None
    return replace(decision, critical_models=decided) if decided else decision


def measured_reports(paths: list[Path]) -> list[MeasuredReport]:
    """Each report at ``paths`` with its card and rebuilt recommendation; raises :class:`RentInputError` when one
    cannot be read or the reports are not of one training."""
    from gpubench.output.report_file import ReportReadError, read_report

    catalog = load_catalog()
    loaded: list[tuple[Path, RunReport]] = []
    for path in paths:
        try:
            loaded.append((path, read_report(path)))
        except ReportReadError as exc:
            raise RentInputError(str(exc)) from None
    first_path, first = loaded[0]
    for path, report in loaded[1:]:
        if _training(report) != _training(first):
            raise RentInputError(
                f"{path} measured another training than {first_path}: models, batches and samples per step "
                f"{_training(report)} against {_training(first)}. Give reports of one training, measured on "
                "different machines."
            )
    measured = []
    for path, report in loaded:
        recommendation = build_recommendation(report, _decision(path, report), catalog)
        card = match_catalog_card(report.hardware.device_name, catalog) if report.hardware.on_gpu else None
        device = report.hardware.device_name or report.run.device
        measured.append(
            MeasuredReport(str(path), card, device, recommendation, recommendation.estimated_full_training_hours)
        )
    return measured


def row_line(row: CostRow) -> str:
    """One row: card, provider, kind, hours and USD with their bounds, price date, and measured or projected."""
    kind = "spot" if row.spot else "on-demand"
    return (
        f"  {row.gpu} at {row.provider} ({kind}): {row.hours or 0.0:,.2f} h ({row.hours_lower or 0.0:,.2f} to "
        f"{row.hours_upper or 0.0:,.2f}), ${row.usd or 0.0:,.2f} (${row.usd_lower or 0.0:,.2f} to "
        f"${row.usd_upper or 0.0:,.2f}), price of {row.price_date}; {row.basis}"
    )


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="gpubench rent",
        description="One cost table from reports of the same training measured on different machines: measured rows "
        "for the cards they ran on, the rest projected from the nearest measured card.",
    )
    parser.add_argument("reports", nargs="+", type=Path, help="report.json files of one training")
    parser.add_argument("--json", type=Path, help="also write the table's rows here")
    parser.add_argument("--rows", type=int, default=DEFAULT_ROWS, help=f"rows printed (default {DEFAULT_ROWS})")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """The command line; returns the exit code."""
    args = _parse(argv)
    if args.rows < 1:
        raise RentInputError(f"--rows {args.rows} is not valid: give a whole number >= 1")
    rows = measured_cost_table(measured_reports(args.reports))
    fitting = fitting_rentals(rows)
    print(f"Rentals that fit, cheapest first ({len(fitting)} of {len(rows)} priced options):")
    for row in fitting[: args.rows]:
        print(row_line(row))
    if args.json is not None:
        from gpubench.output.report_file import write_text_atomic

        try:
            write_text_atomic(args.json, json.dumps([row.to_dict() for row in rows], indent=1) + "\n")
        except OSError as exc:
            raise RentInputError(f"--json {args.json} cannot be written ({exc.strerror or exc})") from None
        print(f"cost table: {args.json}")
    return 0
