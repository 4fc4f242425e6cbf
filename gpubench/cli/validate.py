"""``gpubench validate REPORT [--factor K | --minutes M] [--repeats R]``: check a report's predictions against real
trainings (:mod:`gpubench.bench.replay`) and write ``validation.json``. Exit 0 all inside their bounds, 1 not, 2 bad
input or an ``--output`` that cannot be written (the validation then printed as JSON), 128 + the signal's number
when interrupted."""

import argparse
import math
import os
import tempfile
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import NoReturn

from gpubench.bench.replay import DEFAULT_FACTOR, MAX_FACTOR, PlannedCheck, ValidationInputError, prepare, run_checks
from gpubench.errors import GpubenchError
from gpubench.results import ValidationCheck, ValidationReport
from gpubench.results.units import HOURS_PER_DAY, SECONDS_PER_HOUR

VALIDATION_FILE_NAME = "validation.json"
#: |error| within this many percent is counted in the summary line (not the pass criterion).
ERROR_GOAL_PCT = 3.0
#: What one validation may plan: a week of predicted training in all (--minutes at most a week a training), and
#: enough repeats for a spread (a longer or larger check is several runs, each keeping its own validation.json).
MAX_TOTAL_HOURS = 7 * HOURS_PER_DAY
MAX_MINUTES = MAX_TOTAL_HOURS * 60
MAX_REPEATS = 100


def format_table(validation: ValidationReport) -> str:
    """The validation as a plain-text table (seconds and percent), then what it adds up to."""
    how = f"x{validation.factor:g} the work" if validation.factor else f"about {validation.minutes:g} min a training"
    lines = [
        f"Predictions of {validation.report_path} on {validation.device}, {how}, {validation.repeats} repeat(s):",
        f"{'model':<8} {'rep':>3} {'K':>6} {'batch':>6} {'epochs':>6} {'predicted s':>12} {'bound s':>21} "
        f"{'actual s':>10} {'error':>8}  in  {'probe ms':>11}",
    ]
    trained = [check for check in validation.checks if check.status != "skipped"]
    for check in trained:
        head = f"{check.model:<8} {check.repeat:>3} {check.factor:>6.3g} {check.batch_size:>6} {check.epochs:>6}"
        bound = f"[{check.lower_s:,.1f}, {check.upper_s:,.1f}]"
        if check.status != "ok":
            lines.append(f"{head} {check.predicted_s:>12,.1f} {bound:>21}  failed: {check.error}")
            continue
        inside = "yes" if check.inside_bound else "NO "
        lines.append(
            f"{head} {check.predicted_s:>12,.1f} {bound:>21} {check.actual_s:>10,.1f} {check.error_pct:>+7.2f}%  "
            f"{inside} {_probes_text(check):>11}"
        )
    lines += [f"{check.model}: not checked: {check.error}" for check in validation.checks if check.status == "skipped"]
    errors = [abs(check.error_pct) for check in trained if check.error_pct is not None]
    if errors:
        inside = sum(bool(check.inside_bound) for check in trained)
        within = sum(error <= ERROR_GOAL_PCT for error in errors)
        lines.append(
            f"{inside} of {len(trained)} trainings inside their bounds; {within} of {len(errors)} within "
            f"{ERROR_GOAL_PCT:g}% of the prediction; largest |error| {max(errors):.2f}%"
        )
    if any(check.host_probe_before is not None for check in trained):
        lines.append(
            "probe ms: the host's fixed Python loop (the rounds' host probe) before / after each training, outside "
            "its timed region; compare with the report's rounds (models.<name>.rounds[].host_probe)"
        )
    if validation.status == "interrupted":
        lines.append("interrupted: the trainings above are those that finished before the signal")
    return "\n".join(lines)


def _probes_text(check: ValidationCheck) -> str:
    """The host probes as ``before/after`` Python-loop ms, ``-`` where not read."""
    readings = (check.host_probe_before, check.host_probe_after)
    return "/".join("-" if p is None else f"{p.python_loop_ms:.1f}" for p in readings)


class _Parser(argparse.ArgumentParser):
    """argparse whose errors are gpubench's one paragraph (exit 2), not a usage dump."""

    def error(self, message: str) -> NoReturn:
        from gpubench.output import console

        console.error(f"{message}. `python -m gpubench.validate --help` lists the options.")
        raise SystemExit(2)


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = _Parser(
        prog="gpubench validate",
        description="Train each model of a gpubench report for real, in a fresh process and in a plain loop with its "
        "own clock, and compare the wall time with the report's prediction and its bounds. Writes validation.json "
        "beside the report. Exit 0: every training inside its bound; 1: one outside, or failed; 2: bad input or "
        "nothing to check; 130/143: interrupted.",
    )
    parser.add_argument("report", nargs="?", type=Path, help="a report.json written by gpubench")
    length = parser.add_mutually_exclusive_group()
    length.add_argument(
        "--factor",
        type=float,
        help=f"train K times the measured epochs, 0 < K <= {MAX_FACTOR:g} (default {DEFAULT_FACTOR:g})",
    )
    length.add_argument(
        "--minutes", type=float, help="instead of --factor: choose K per model for a training of about M minutes"
    )
    parser.add_argument("--models", help="comma-separated models to check (default: every model the report ran)")
    parser.add_argument(
        "--repeats",
        type=int,
        default=1,
        help="train each model this many times, interleaved across the models, each checked against its bound "
        "(default 1)",
    )
    parser.add_argument(
        "--output", type=Path, help=f"where to write the result (default: {VALIDATION_FILE_NAME} beside the report)"
    )
    return parser.parse_args(argv)


def _check_arguments(args: argparse.Namespace) -> None:
    if args.report is None:
        raise ValidationInputError("give the report to validate: python -m gpubench.validate path/to/report.json")
    if args.factor is not None and not (math.isfinite(args.factor) and 0 < args.factor <= MAX_FACTOR):
        raise ValidationInputError(
            f"--factor {args.factor:g} is not valid: give a multiple of the measured work above 0 and at most "
            f"{MAX_FACTOR:g}, e.g. 4; for a longer check give its length, --minutes M"
        )
    if args.minutes is not None and not (math.isfinite(args.minutes) and 0 < args.minutes <= MAX_MINUTES):
        raise ValidationInputError(
            f"--minutes {args.minutes:g} is not valid: give a training's length in minutes, above 0 and at most "
            f"{MAX_MINUTES:g} (a week), e.g. 5"
        )
    if not 1 <= args.repeats <= MAX_REPEATS:
        raise ValidationInputError(
            f"--repeats {args.repeats} is not valid: give a whole number from 1 to {MAX_REPEATS}, e.g. 3"
        )


def _check_total(planned: list[PlannedCheck], repeats: int) -> float:
    """The predicted hours of every planned training, all repeats; ValidationInputError past a week."""
    from gpubench.output.console import fmt_hours

    hours = repeats * sum(check.predicted_s for check in planned) / SECONDS_PER_HOUR
    if hours > MAX_TOTAL_HOURS:
        raise ValidationInputError(
            f"the planned trainings ({len(planned)} model(s) × {repeats} repeat(s)) are predicted to take "
            f"{fmt_hours(hours)}, more than the {MAX_TOTAL_HOURS:g} h (a week) one validation may plan: give a "
            "smaller --factor or --minutes, fewer --repeats or fewer --models, and run the rest as another validation"
        )
    return hours


def _check_output(path: Path) -> None:
    """Refuse an ``--output`` that cannot be written, before any training (a device, ``/dev/stdout``, is written in
    place: only its permission counts)."""
    if path.exists() and not path.is_file() and not path.is_dir():
        if not os.access(path, os.W_OK):
            raise ValidationInputError(f"--output {path} cannot be written: permission denied. Give a writable path.")
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=".write-check-"):
            pass
    except OSError as exc:
        raise ValidationInputError(
            f"--output {path} cannot be written: {exc.strerror or exc} (folder {path.parent}). Give a path in a "
            "writable folder."
        ) from None
    if path.is_dir():
        raise ValidationInputError(f"--output {path} is a folder; give a file path such as {path / 'validation.json'}")


def main(argv: list[str] | None = None) -> int:
    """The command line; returns the exit code (see the module docstring)."""
    args = _parse(argv)
    from gpubench import signals
    from gpubench.cli.errors import EXIT_BAD_INPUT
    from gpubench.output import console
    from gpubench.output.console import fmt_hours
    from gpubench.output.report_file import json_text, write_json_atomic

    try:
        _check_arguments(args)
        output = args.output or args.report.parent / VALIDATION_FILE_NAME
        _check_output(output)
        models = [m.strip() for m in args.models.split(",") if m.strip()] if args.models else None
        factor = None if args.minutes is not None else (args.factor or DEFAULT_FACTOR)
        preparation = prepare(args.report, factor=factor, minutes=args.minutes, models=models)
        total_hours = _check_total(preparation.planned, args.repeats)
    except GpubenchError as exc:
        console.error(str(exc))
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        console.notice(f"interrupted ({signals.signal_name(signals.received_signal())}) before any training.")
        return signals.interrupt_exit_code()
    validation = ValidationReport(
        report_path=str(args.report),
        device=preparation.device,
        created_utc=datetime.now(UTC).isoformat(timespec="seconds"),
        status="running",
        repeats=args.repeats,
        factor=factor,
        minutes=args.minutes,
        checks=list(preparation.skipped),
    )

    unwritable: list[OSError] = []

    def write() -> bool:
        """Write the validation to ``output``; False where it cannot be (a full disk): the trainings go on."""
        try:
            write_json_atomic(output, validation.to_dict())
        except OSError as exc:
            if not unwritable:
                reason = exc.strerror or exc
                console.notice(f"--output {output} cannot be written ({reason}); the trainings go on, shown at the end")
            unwritable.append(exc)
            return False
        return True

    def record(row: ValidationCheck) -> None:
        nonlocal validation
        validation = replace(validation, checks=[*validation.checks, row])
        write()
        preparation.record(row)

    trainings = len(preparation.planned) * args.repeats
    print(f"gpubench validate: {trainings} training(s) planned, predicted {fmt_hours(total_hours)} in all", flush=True)
    try:
        run_checks(preparation.planned, args.repeats, record)
        validation = replace(validation, status="complete")
    except KeyboardInterrupt:
        validation = replace(validation, status="interrupted")
    written = write()
    print(format_table(validation))
    if written:
        print(f"validation: {output}")
    else:
        print(json_text(validation.to_dict()), end="")
        error = unwritable[-1]
        console.error(
            f"--output {output} cannot be written ({error.strerror or error}): the validation is printed above as "
            "JSON, every training kept; save it, then free space there or give another --output next time."
        )
    if validation.status == "interrupted":
        console.notice(
            f"interrupted ({signals.signal_name(signals.received_signal())}); "
            f"{output if written else 'the JSON above'} holds the "
            f"{sum(c.status != 'skipped' for c in validation.checks)} training(s) that finished."
        )
        return signals.interrupt_exit_code()
    if not written:
        return EXIT_BAD_INPUT
    return 0 if validation.passed else 1
