"""``python -m gpubench.validate REPORT [--factor K | --minutes M] [--repeats R]``: check a report's predictions
against real trainings, measured independently of the benchmark.

For each model the report measured, a fresh process builds it exactly as measured — the job's resolved config
(``config_resolved.yaml`` beside the report), prepared as the benchmark prepared its process
(:func:`gpubench.session.prepare_session`: the device, the thread count the report recorded, the VRAM cap, the
matmul precision, the seed, the data), at the batch the report timed — and trains it: every step the benchmark ran
for that model, with the measured epochs multiplied by K (the calibration steps, the warmup epochs, then K × n
epochs of the measured size). The training is a plain loop around the workload's step, timed by its own clock
(:func:`timed_training`: ``time.perf_counter`` with the device synchronised right before the first step and right
after the last), with none of the benchmark's epoch machinery: no block timer, no epoch boundaries, no stability
monitor, no loss read (each would add host synchronisations a real training does not have). Building the model
and its data is not timed, in the training as in the benchmark.

The prediction is the report's own: :func:`gpubench.decision.estimate.estimate_training_time` for a plan of exactly
the replay's epochs, without the plan's validation passes and checkpoints (the replay runs none): the one-off costs
plus K·n × the mean epoch time. Its bounds are those of one new training
(:func:`gpubench.decision.estimate.new_training_bounds_seconds`): for a report measured in rounds, the prediction
interval from the same two variance levels the decision's bounds come from, with a host level of the training's
own. ``--factor K`` takes K in (0, 10]; ``--minutes
M`` chooses each model's K so that its training lasts about M minutes by that prediction (at least one epoch; no
upper limit on K, the minutes bound the time). ``--repeats R`` trains every model R times, interleaved (repeat 1 of
every model, then repeat 2, ...) so that the repeats of one model are spread out in time, and checks each training
against its bound on its own.

``validation.json`` (beside the report, or ``--output``) holds a row per training — ``predicted_s``,
``lower_s``/``upper_s``, ``actual_s``, ``error_pct``, ``inside_bound``, and the host's speed read by the rounds'
fixed probe (:func:`gpubench.hardware.host.probe_host_speed`) in the training's process just before and just after
its timed region, ``host_probe_before``/``host_probe_after``, so that a miss can be set beside the host states the
report's rounds saw — and one per model that could not be checked, with the reason; it is rewritten after every
training, and a table is printed at the end.

Exit codes: 0 when every training ran and landed inside its bound; 1 when any landed outside, or a training failed;
2 for bad input — the command line, an unwritable ``--output`` (checked before any training), a report or its
``config_resolved.yaml`` that cannot be read or holds invalid values, a custom model whose factory does not import
from the current folder — and when nothing could be checked (no model of the report has two measured epochs, or
gpubench does not know its models): that is a property of the report given, not an outcome of a training. Ctrl-C
or SIGTERM (or SIGHUP) stops the training in progress, writes ``validation.json`` with status ``interrupted`` and
the trainings finished before it, and exits 128 + the signal's number: 130 for SIGINT, 143 for SIGTERM.
"""

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import NoReturn

from gpubench.decision.config import TrainingPlanConfig
from gpubench.decision.estimate import new_training_bounds_seconds
from gpubench.errors import GpubenchError
from gpubench.models import KNOWN_MODELS
from gpubench.results import HostProbe, ModelResult, ValidationCheck, ValidationReport

#: The config the job ran with, written beside its report.
RESOLVED_CONFIG_NAME = "config_resolved.yaml"
VALIDATION_FILE_NAME = "validation.json"
#: The default multiple of the measured work each real training runs.
DEFAULT_FACTOR = 4.0
#: The largest ``--factor``: longer checks are asked for in minutes (``--minutes``), which bound their time.
MAX_FACTOR = 10.0
#: A prediction needs an interval, and an interval two measured epochs.
MIN_MEASURED_EPOCHS = 2
#: What the issue asks of a prediction: |error| within this many percent (reported, not the pass criterion).
ERROR_GOAL_PCT = 3.0
#: A training is stopped past this many times its upper bound, plus a minute to start and build.
_TIMEOUT_BOUNDS = 10.0
_TIMEOUT_START_S = 60.0


class ValidationInputError(GpubenchError):
    """The command line, the report or its config cannot be validated: missing, unreadable, invalid values, or
    nothing in it that can be checked."""


class TrainingFailed(Exception):
    """A training process exited without a time (it raised, was killed, or ran past its limit)."""


@dataclass(frozen=True)
class TimedTraining:
    """One training's wall time (s, its timed region) and the host's speed read in its process just before and just
    after that region (:func:`gpubench.hardware.host.probe_host_speed`; None where not read)."""

    actual_s: float
    probe_before: HostProbe | None = None
    probe_after: HostProbe | None = None


@dataclass(frozen=True)
class ReplaySpec:
    """What the fresh process trains: model ``model`` at ``batch_size`` from the config at ``config_path``,
    ``steps`` optimizer steps, on ``torch_threads`` intra-op threads (the benchmark's, from its report; None:
    chosen as the runner chooses)."""

    config_path: str
    model: str
    batch_size: int
    steps: int
    torch_threads: int | None = None


# ------------------------------------------------------------------------------------------------ the training


def timed_training(
    step: Callable[[], object], steps: int, wait: Callable[[], None], clock: Callable[[], float] = time.perf_counter
) -> float:
    """Run ``step`` ``steps`` times; the seconds from the first step to the end of the last, by ``clock``, with
    ``wait`` (the device's synchronisation) right before the clock starts and right after the last step, so that
    the time holds every step's device work and nothing queued before it."""
    wait()
    start_s = clock()
    for _ in range(steps):
        step()
    wait()
    return clock() - start_s


def replay(spec: ReplaySpec) -> TimedTraining:
    """Build the model as measured and train it ``spec.steps`` steps; return the wall seconds of the training, with
    the host probe read just before and just after it (outside the timed region, like the rounds' probes)."""
    import torch

    from gpubench.config import load_resolved_config
    from gpubench.hardware.host import probe_host_speed
    from gpubench.model_run import build_workload
    from gpubench.session import prepare_session

    cfg = load_resolved_config(Path(spec.config_path))
    # The thread count decides a CPU step's speed, and the runner's automatic choice follows the host's load at the
    # time: the benchmark's own count is replayed.
    session = prepare_session(cfg, cpu_threads=spec.torch_threads)
    workload = build_workload(spec.model, session.model_run_context(), spec.batch_size)
    device = session.device

    def wait() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    before = probe_host_speed()
    actual_s = timed_training(workload.train_step, spec.steps, wait)
    return TimedTraining(actual_s, before, probe_host_speed())


def _worker(spec_path: Path, result_path: Path) -> int:
    """The fresh process: replay the spec in ``spec_path``, write ``{"actual_s": ..., "probe_before": ...,
    "probe_after": ...}`` to ``result_path``."""
    from gpubench import signals

    spec = ReplaySpec(**json.loads(spec_path.read_text()))
    try:
        training = replay(spec)
    except KeyboardInterrupt:  # the parent stops it (or the terminal's Ctrl-C reached it too): no time to report
        return signals.interrupt_exit_code()
    probes = {"probe_before": training.probe_before, "probe_after": training.probe_after}
    result = {"actual_s": training.actual_s, **{k: None if v is None else v.to_dict() for k, v in probes.items()}}
    result_path.write_text(json.dumps(result))
    return 0


def _run_fresh(spec: ReplaySpec, timeout_s: float) -> TimedTraining:
    """Replay ``spec`` in a fresh Python process; its training's wall seconds and host probes. Raises
    TrainingFailed."""
    with tempfile.TemporaryDirectory(prefix="gpubench-validate-") as folder:
        spec_path, result_path = Path(folder) / "spec.json", Path(folder) / "result.json"
        spec_path.write_text(json.dumps(spec.__dict__))
        command = [sys.executable, "-m", "gpubench.validate", "--worker", str(spec_path), str(result_path)]
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            stdout, stderr = process.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()
            raise TrainingFailed(f"the training ran past its limit of {timeout_s:,.0f} s and was stopped") from None
        except BaseException:  # an interrupt: the training must not outlive the check
            process.kill()
            process.communicate()
            raise
        if process.returncode != 0 or not result_path.is_file():
            tail = (stderr or stdout).strip().splitlines()[-3:]
            raise TrainingFailed(f"the training process exited {process.returncode}: {' / '.join(tail)}")
        result = json.loads(result_path.read_text())
        probes = {
            k: None if result[k] is None else HostProbe.from_dict(result[k]) for k in ("probe_before", "probe_after")
        }
        return TimedTraining(float(result["actual_s"]), **probes)


# ------------------------------------------------------------------------------------------------ the plan


@dataclass(frozen=True)
class PlannedCheck:
    """One model's training (``spec``: ``epochs`` epochs of ``steps_per_epoch`` steps after the one-off steps, K =
    ``factor`` × the measured epochs) and the report's prediction of its time with the bounds (seconds)."""

    spec: ReplaySpec
    factor: float
    epochs: int
    steps_per_epoch: int
    predicted_s: float
    lower_s: float
    upper_s: float

    def row(self, repeat: int, training: TimedTraining | None = None, error: str | None = None) -> ValidationCheck:
        """The check of repeat ``repeat``: its ``training`` (time and host probes), or failed with ``error``."""
        row = ValidationCheck(
            model=self.spec.model,
            status="failed" if training is None else "ok",
            repeat=repeat,
            factor=self.factor,
            batch_size=self.spec.batch_size,
            steps_per_epoch=self.steps_per_epoch,
            epochs=self.epochs,
            steps=self.spec.steps,
            predicted_s=self.predicted_s,
            lower_s=self.lower_s,
            upper_s=self.upper_s,
            error=error,
        )
        if training is None:
            return row
        actual_s = training.actual_s
        return replace(
            row,
            actual_s=actual_s,
            error_pct=100.0 * (actual_s - self.predicted_s) / self.predicted_s,
            inside_bound=self.lower_s <= actual_s <= self.upper_s,
            host_probe_before=training.probe_before,
            host_probe_after=training.probe_after,
        )


def _skipped(name: str, why: str) -> ValidationCheck:
    return ValidationCheck(model=name, status="skipped", error=why)


def replay_estimate(name: str, result: ModelResult, plan: TrainingPlanConfig, epochs: int):
    """The report's prediction (:class:`~gpubench.decision.estimate.TimeEstimate`) of a replay of ``epochs``
    measured-size epochs of model ``name``: the job's training ``plan`` with the model's training set to exactly
    those epochs' samples, and no validation passes or checkpoints (the replay runs none). An interrupted model's
    measured epochs predict as a complete model's do. Raises ValueError when the result cannot be extrapolated."""
    from gpubench.decision.estimate import estimate_training_time

    replay_plan = replace(
        plan,
        samples={**plan.samples, name: epochs * result.samples_per_epoch},
        eval_every_steps=None,
        checkpoint_every_steps=None,
    )
    return estimate_training_time(name, replace(result, status="ok", error=None), replay_plan)


def plan_check(
    name: str,
    result: ModelResult,
    plan: TrainingPlanConfig,
    config_path: Path,
    *,
    factor: float | None = None,
    minutes: float | None = None,
    torch_threads: int | None = None,
) -> PlannedCheck | ValidationCheck:
    """Model ``name``'s replay at ``factor`` × its measured epochs (or as many epochs as make about ``minutes``
    minutes by the prediction), and the report's prediction of it, as a :class:`PlannedCheck`; or a skipped
    :class:`~gpubench.results.ValidationCheck` saying why it cannot be checked."""
    if name not in KNOWN_MODELS:
        return _skipped(
            name,
            f"gpubench does not know a model named {name!r} (it knows {', '.join(KNOWN_MODELS)}), so it cannot "
            "rebuild it: the report comes from another version of gpubench, or was edited",
        )
    measured = len(result.raw_epoch_times_ms)
    if result.status not in ("ok", "interrupted") or measured < MIN_MEASURED_EPOCHS or result.statistics is None:
        error = f" ({result.error})" if result.error else ""
        return _skipped(
            name,
            f"status {result.status}{error} with {measured} measured epoch(s): a prediction needs at least "
            f"{MIN_MEASURED_EPOCHS}",
        )
    if result.calibration_steps is None or result.batch_size is None or not result.steps_per_epoch:
        return _skipped(name, "the report does not record the steps it ran (written before gpubench.validate)")
    if result.samples_per_epoch is None:
        return _skipped(name, "the report does not record the samples per step, so it has no estimate to check")
    try:
        if minutes is not None:
            one_epoch = replay_estimate(name, result, plan, 1)
            epochs = max(1, round((60.0 * minutes - one_epoch.fixed_seconds) / one_epoch.epochs_seconds))
        else:
            epochs = math.ceil((DEFAULT_FACTOR if factor is None else factor) * measured)
        estimate = replay_estimate(name, result, plan, epochs)
        bounds_s = new_training_bounds_seconds(estimate, result)
    except ValueError as exc:
        return _skipped(name, f"no estimate to check: {exc}")
    steps_per_epoch = result.steps_per_epoch
    spec = ReplaySpec(
        config_path=str(config_path),
        model=name,
        batch_size=result.batch_size,
        steps=result.calibration_steps + steps_per_epoch * (len(result.warmup_epoch_times_ms) + epochs),
        torch_threads=torch_threads,
    )
    return PlannedCheck(
        spec=spec,
        factor=epochs / measured,
        epochs=epochs,
        steps_per_epoch=steps_per_epoch,
        predicted_s=estimate.hours * 3600.0,
        lower_s=bounds_s[0],
        upper_s=bounds_s[1],
    )


@dataclass(frozen=True)
class Preparation:
    """What a validation runs: the report's device, a check per model that can be checked (in report order), and a
    skipped row per model that cannot."""

    device: str
    planned: list[PlannedCheck]
    skipped: list[ValidationCheck]


def _config_path(report_path: Path, output_dir: str) -> Path:
    """The job's resolved config: beside the report, else in the job's output folder."""
    for folder in (report_path.parent, Path(output_dir)):
        candidate = folder / RESOLVED_CONFIG_NAME
        if candidate.is_file():
            return candidate
    raise ValidationInputError(
        f"no {RESOLVED_CONFIG_NAME} beside {report_path} or in the job's folder {output_dir}: the replay needs the "
        "config the job ran with (gpubench writes it when a job starts). Validate a report gpubench wrote."
    )


def prepare(
    report_path: Path, *, factor: float | None = None, minutes: float | None = None, models: list[str] | None = None
) -> Preparation:
    """Read the report and its config and plan a check of every (or each named) model. Raises
    ValidationInputError (or ConfigError) for bad input, and when no model can be checked."""
    from gpubench.config import load_resolved_config
    from gpubench.models.custom.factory import load_factory
    from gpubench.output.report_file import ReportReadError, measured_values_problem, read_report

    try:
        report = read_report(report_path)
    except ReportReadError as exc:
        raise ValidationInputError(str(exc)) from exc
    unknown = sorted(set(models or ()) - set(report.models))
    if unknown:
        raise ValidationInputError(
            f"--models names {', '.join(unknown)}, which the report did not run; it ran {', '.join(report.models)}"
        )
    selected = {name: result for name, result in report.models.items() if not models or name in models}
    for name, result in selected.items():
        problem = measured_values_problem(result)
        if problem:
            raise ValidationInputError(
                f"{report_path}: model {name}: {problem}. The report's values are what the prediction is computed "
                "from; validate a report as gpubench wrote it."
            )
    config_path = _config_path(report_path, report.run.output_dir)
    cfg = load_resolved_config(config_path)
    threads = None if report.run.host is None else report.run.host.torch_num_threads
    planned: list[PlannedCheck] = []
    skipped: list[ValidationCheck] = []
    for name, result in selected.items():
        check = plan_check(
            name, result, cfg.decision.plan, config_path, factor=factor, minutes=minutes, torch_threads=threads
        )
        (planned if isinstance(check, PlannedCheck) else skipped).append(check)
    if any(check.spec.model == "custom" for check in planned):
        # Imported here, before any training, as each training process will import it (from the current folder).
        load_factory(cfg.workloads.custom.factory)
    if not planned:
        reasons = "; ".join(f"{row.model}: {row.error}" for row in skipped) or "it has no models"
        raise ValidationInputError(f"nothing in {report_path} can be checked ({reasons}).")
    return Preparation(device=report.hardware.device_name, planned=planned, skipped=skipped)


# ------------------------------------------------------------------------------------------------ the run


def run_checks(
    planned: list[PlannedCheck],
    repeats: int,
    record: Callable[[ValidationCheck], None],
    train: Callable[[ReplaySpec, float], TimedTraining] | None = None,
) -> None:
    """Train every planned check ``repeats`` times, interleaved: repeat 1 of every model, then repeat 2, ...; each
    training's row goes to ``record`` as it completes. ``train`` runs one training with a time limit (seconds);
    by default in a fresh process (:func:`_run_fresh`), returning its time and host probes."""
    train = train or _run_fresh
    for repeat in range(1, repeats + 1):
        for check in planned:
            print(
                f"gpubench.validate: {check.spec.model}, repeat {repeat}/{repeats}: training {check.spec.steps:,} "
                f"steps, predicted {check.predicted_s:,.1f} s [{check.lower_s:,.1f}, {check.upper_s:,.1f}]",
                flush=True,
            )
            try:
                training = train(check.spec, _TIMEOUT_START_S + _TIMEOUT_BOUNDS * check.upper_s)
            except TrainingFailed as exc:
                record(check.row(repeat, error=str(exc)))
                continue
            record(check.row(repeat, training))


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
    """The training's host probes as ``before/after`` Python-loop milliseconds, ``-`` where not read."""
    readings = (check.host_probe_before, check.host_probe_after)
    return "/".join("-" if p is None else f"{p.python_loop_ms:.1f}" for p in readings)


# ------------------------------------------------------------------------------------------------ the command


class _Parser(argparse.ArgumentParser):
    """argparse whose errors are gpubench's one paragraph (exit 2), not a usage dump."""

    def error(self, message: str) -> NoReturn:
        from gpubench.output import console

        console.error(f"{message}. `python -m gpubench.validate --help` lists the options.")
        raise SystemExit(2)


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = _Parser(
        prog="python -m gpubench.validate",
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
    parser.add_argument("--worker", nargs=2, type=Path, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def _check_arguments(args: argparse.Namespace) -> None:
    if args.report is None:
        raise ValidationInputError("give the report to validate: python -m gpubench.validate path/to/report.json")
    if args.factor is not None and not (math.isfinite(args.factor) and 0 < args.factor <= MAX_FACTOR):
        raise ValidationInputError(
            f"--factor {args.factor:g} is not valid: give a multiple of the measured work above 0 and at most "
            f"{MAX_FACTOR:g}, e.g. 4; for a longer check give its length, --minutes M"
        )
    if args.minutes is not None and not (math.isfinite(args.minutes) and args.minutes > 0):
        raise ValidationInputError(f"--minutes {args.minutes:g} is not valid: give a positive number, e.g. 5")
    if args.repeats < 1:
        raise ValidationInputError(f"--repeats {args.repeats} is not valid: give a whole number >= 1, e.g. 3")


def _check_output(path: Path) -> None:
    """Refuse an ``--output`` that cannot be written, before any training: its folder is created if missing and a
    file is written in it."""
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
    if args.worker:
        return _worker(*args.worker)
    from gpubench import signals
    from gpubench.output import console
    from gpubench.output.report_file import write_json_atomic

    try:
        _check_arguments(args)
        output = args.output or args.report.parent / VALIDATION_FILE_NAME
        _check_output(output)
        models = [m.strip() for m in args.models.split(",") if m.strip()] if args.models else None
        factor = None if args.minutes is not None else (args.factor or DEFAULT_FACTOR)
        preparation = prepare(args.report, factor=factor, minutes=args.minutes, models=models)
    except GpubenchError as exc:
        console.error(str(exc))
        return 2
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

    def record(row: ValidationCheck) -> None:
        nonlocal validation
        validation = replace(validation, checks=[*validation.checks, row])
        write_json_atomic(output, validation.to_dict())

    try:
        run_checks(preparation.planned, args.repeats, record)
        validation = replace(validation, status="complete")
    except KeyboardInterrupt:
        validation = replace(validation, status="interrupted")
    write_json_atomic(output, validation.to_dict())
    print(format_table(validation))
    print(f"validation: {output}")
    if validation.status == "interrupted":
        console.notice(
            f"interrupted ({signals.signal_name(signals.received_signal())}); {output} holds the "
            f"{sum(c.status != 'skipped' for c in validation.checks)} training(s) that finished."
        )
        return signals.interrupt_exit_code()
    return 0 if validation.passed else 1


if __name__ == "__main__":
    from gpubench import signals as _signals

    # Before anything heavy runs: an interrupt then meets the handlers wherever it comes, in the checker as in a
    # training process.
    _signals.install()
    raise SystemExit(main())
