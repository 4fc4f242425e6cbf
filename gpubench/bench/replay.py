"""Validate's trainings: each model of a report rebuilt as measured in a fresh process (``python -m
gpubench.bench.replay SPEC RESULT``), trained in a plain timed loop, and compared with the report's prediction."""

import json
import math
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from gpubench.decision.config import TrainingPlanConfig
from gpubench.decision.estimate import new_training_bounds_seconds
from gpubench.errors import GpubenchError
from gpubench.models import KNOWN_MODELS
from gpubench.output.history import MachineHistory, job_history
from gpubench.results import HostProbe, ModelResult, ValidationCheck

#: The config the job ran with, written beside its report.
RESOLVED_CONFIG_NAME = "config_resolved.yaml"
#: The default multiple of the measured work each real training runs.
DEFAULT_FACTOR = 4.0
#: The largest ``--factor``; longer checks are asked for with ``--minutes``.
MAX_FACTOR = 10.0
MIN_MEASURED_EPOCHS = 2
#: A training is stopped past this many times its upper bound, plus a minute to start and build.
_TIMEOUT_BOUNDS = 10.0
_TIMEOUT_START_S = 60.0
#: ... and past two weeks in any case: twice the longest plan validate takes, below poll's limit (24.8 days).
_TIMEOUT_MAX_S = 14 * 24 * 3600.0


class ValidationInputError(GpubenchError):
    """The command line, the report or its config cannot be validated."""


class TrainingFailed(Exception):
    """A training process exited without a time (it raised, was killed, or ran past its limit)."""


@dataclass(frozen=True)
class TimedTraining:
    """One training's wall time (s) and the host probes read just before and after it (None where not read)."""

    actual_s: float
    probe_before: HostProbe | None = None
    probe_after: HostProbe | None = None


@dataclass(frozen=True)
class ReplaySpec:
    """What the fresh process trains: ``steps`` steps of ``model`` at ``batch_size`` on ``torch_threads`` threads."""

    config_path: str
    model: str
    batch_size: int
    steps: int
    torch_threads: int | None = None


def timed_training(
    step: Callable[[], object], steps: int, wait: Callable[[], None], clock: Callable[[], float] = time.perf_counter
) -> float:
    """Seconds of ``steps`` calls of ``step``, with ``wait`` (the device sync) before and after the timed region."""
    wait()
    start_s = clock()
    for _ in range(steps):
        step()
    wait()
    return clock() - start_s


def replay(spec: ReplaySpec) -> TimedTraining:
    """Build the model as measured and train it ``spec.steps`` steps, with host probes around the timed region."""
    import torch

    from gpubench.bench.model_run import build_workload
    from gpubench.bench.session import prepare_session
    from gpubench.config import load_resolved_config
    from gpubench.hardware.host import probe_host_speed

    cfg = load_resolved_config(Path(spec.config_path))
    # The automatic thread count follows the host's load: the benchmark's own count is replayed.
    session = prepare_session(cfg, cpu_threads=spec.torch_threads)
    workload = build_workload(spec.model, session.model_run_context(), spec.batch_size)
    device = session.device

    def wait() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    before = probe_host_speed()
    actual_s = timed_training(workload.train_step, spec.steps, wait)
    return TimedTraining(actual_s, before, probe_host_speed())


def worker(spec_path: Path, result_path: Path) -> int:
    """The fresh process: replay the spec in ``spec_path``, write the time and probes to ``result_path``."""
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
    """Replay ``spec`` in a fresh Python process. Raises TrainingFailed."""
    with tempfile.TemporaryDirectory(prefix="gpubench-validate-") as folder:
        spec_path, result_path = Path(folder) / "spec.json", Path(folder) / "result.json"
        spec_path.write_text(json.dumps(spec.__dict__))
        command = [sys.executable, "-m", "gpubench.bench.replay", str(spec_path), str(result_path)]
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


@dataclass(frozen=True)
class PlannedCheck:
    """One model's training (``factor`` × its measured epochs) and the predicted time with its bounds (s)."""

    spec: ReplaySpec
    factor: float
    epochs: int
    steps_per_epoch: int
    predicted_s: float
    lower_s: float
    upper_s: float

    def row(self, repeat: int, training: TimedTraining | None = None, error: str | None = None) -> ValidationCheck:
        """The check of repeat ``repeat``: its ``training``, or failed with ``error``."""
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
    """The report's prediction of a replay of ``epochs`` epochs of model ``name`` (no evaluations or checkpoints).
    Raises ValueError when the result cannot be extrapolated."""
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
    """Model ``name``'s replay at ``factor`` × its measured epochs (or about ``minutes``), or a skipped check."""
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
    """What a validation runs: the report's device, the planned checks, the skipped rows, and the machine's history
    each training is recorded in (None: off)."""

    device: str
    planned: list[PlannedCheck]
    skipped: list[ValidationCheck]
    models: dict[str, ModelResult] = field(default_factory=dict)
    history: MachineHistory | None = None

    def record(self, check: ValidationCheck) -> None:
        """Add a training that ran to the machine's history."""
        if self.history is not None and check.status == "ok":
            self.history.record_validation(self.models[check.model], check)


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
    """Plan a check of every (or each named) model of the report. Raises ValidationInputError for bad input."""
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
        # A bad factory fails here, before any training imports it.
        load_factory(cfg.workloads.custom.factory)
    if not planned:
        reasons = "; ".join(f"{row.model}: {row.error}" for row in skipped) or "it has no models"
        raise ValidationInputError(f"nothing in {report_path} can be checked ({reasons}).")
    return Preparation(report.hardware.device_name, planned, skipped, selected, job_history(cfg, report.hardware))


def run_checks(
    planned: list[PlannedCheck],
    repeats: int,
    record: Callable[[ValidationCheck], None],
    train: Callable[[ReplaySpec, float], TimedTraining] | None = None,
) -> None:
    """Train every planned check ``repeats`` times, interleaved by repeat, passing each row to ``record``;
    ``train(spec, limit_s)`` defaults to a fresh process."""
    train = train or _run_fresh
    for repeat in range(1, repeats + 1):
        for check in planned:
            print(
                f"gpubench.validate: {check.spec.model}, repeat {repeat}/{repeats}: training {check.spec.steps:,} "
                f"steps, predicted {check.predicted_s:,.1f} s [{check.lower_s:,.1f}, {check.upper_s:,.1f}]",
                flush=True,
            )
            try:
                training = train(check.spec, min(_TIMEOUT_START_S + _TIMEOUT_BOUNDS * check.upper_s, _TIMEOUT_MAX_S))
            except TrainingFailed as exc:
                record(check.row(repeat, error=str(exc)))
                continue
            record(check.row(repeat, training))


if __name__ == "__main__":
    from gpubench import signals

    signals.install()
    raise SystemExit(worker(Path(sys.argv[1]), Path(sys.argv[2])))
