"""``python -m gpubench.validate REPORT [--factor K]``: check a report's predictions against real trainings.

For each model the report measured, a fresh process rebuilds it exactly as measured — the job's resolved config
(``config_resolved.yaml`` beside the report), the batch the report timed, its execution mode and VRAM cap, the
same seed and data — and trains it for real: every step the benchmark ran for that model, with the measured epochs
multiplied by K (the calibration steps, the warmup epochs, then K × n epochs of the measured size), one block
timed from the first step to the last, synchronised at both ends. That is a training whose time the report
predicts: its one-off costs plus K·n × the mean epoch time, with the same prediction bounds the decision uses
(:class:`gpubench.decision.estimate.TimeEstimate` for K·n planned epochs). ``validation.json`` beside the report
holds, per model, ``predicted_s``, ``actual_s``, ``error_pct`` and ``inside_bound``; a table is printed.

A fresh process per model, so that no compiled graph, allocator cache or warm clock of an earlier model (or of
the benchmark) helps the training being timed. Building the model and its data is not timed, in the training as in
the benchmark. The training runs the stability monitor as the benchmark did (one host sync per epoch) but no memory
or device sampling. Exit codes: 0 when every model was checked, 1 when a training failed, 2 for bad input.
"""

import argparse
import json
import math
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from gpubench.errors import GpubenchError

#: The config the job ran with, written beside its report.
RESOLVED_CONFIG_NAME = "config_resolved.yaml"
VALIDATION_FILE_NAME = "validation.json"
#: The default multiple of the measured work each real training runs.
DEFAULT_FACTOR = 4.0
#: What the issue asks of a prediction: |error| within this many percent.
ERROR_GOAL_PCT = 3.0


class ValidationInputError(GpubenchError):
    """The report (or its config) cannot be validated: missing, unreadable, or without what a replay needs."""


@dataclass(frozen=True)
class ReplaySpec:
    """What the fresh process trains: model ``model`` at ``batch_size`` from the config at ``config_path``,
    ``steps`` optimizer steps, the stability monitor read every ``steps_per_epoch`` of them, on ``torch_threads``
    intra-op threads (the benchmark's, from its report; None: chosen as the runner chooses)."""

    config_path: str
    model: str
    batch_size: int
    steps_per_epoch: int
    steps: int
    torch_threads: int | None = None


# ------------------------------------------------------------------------------------------------ the replay


def load_config(config_path: Path):
    """The typed config from a job's ``config_resolved.yaml``."""
    from omegaconf import OmegaConf

    from gpubench.config import BenchmarkConfig, register_configs, typed_config

    register_configs()
    merged = OmegaConf.merge(OmegaConf.structured(BenchmarkConfig), OmegaConf.load(config_path))
    return typed_config(merged)


def replay(spec: ReplaySpec) -> float:
    """Build the model as measured and train it ``spec.steps`` steps; return the wall seconds of the training."""
    import torch

    from gpubench.data.loader import load_features
    from gpubench.hardware.host import choose_cpu_threads
    from gpubench.hardware.selection import resolve_device, synchronizer
    from gpubench.hardware.vram import apply_vram_limit
    from gpubench.measure.stability import StabilityMonitor
    from gpubench.measure.timing import BlockTimer
    from gpubench.model_run import ModelRunContext, build_workload

    cfg = load_config(Path(spec.config_path))
    device, _ = resolve_device(cfg.hardware)
    # The thread count decides a CPU step's speed, and the runner's automatic choice follows the host's load at the
    # time: the benchmark's own count is replayed.
    choose_cpu_threads(cfg.hardware.cpu_threads if spec.torch_threads is None else spec.torch_threads, device)
    budget = apply_vram_limit(device, cfg.hardware.vram_limit_gb)
    # As the runner sets it, before anything runs.
    torch.set_float32_matmul_precision(cfg.execution.matmul_precision)
    torch.manual_seed(cfg.seed)
    features, _ = load_features(cfg.data, device)
    timer = BlockTimer(synchronizer(device))
    context = ModelRunContext(
        cfg=cfg,
        device=device,
        features=features,
        timer=timer,
        usable_vram_mb=None if budget is None else budget.usable_vram_mb,
        reference_sm_clock_mhz=None,
    )
    workload = build_workload(spec.model, context, spec.batch_size)
    monitor = StabilityMonitor(cfg.stability, device)

    def train() -> None:
        for step in range(1, spec.steps + 1):
            monitor.observe(workload.train_step())
            if step % spec.steps_per_epoch == 0:
                monitor.end_epoch()

    return timer.time_block(train)


def _worker(spec_path: Path, result_path: Path) -> int:
    """The fresh process: replay the spec in ``spec_path``, write ``{"actual_s": ...}`` to ``result_path``."""
    spec = ReplaySpec(**json.loads(spec_path.read_text()))
    result_path.write_text(json.dumps({"actual_s": replay(spec)}))
    return 0


# ------------------------------------------------------------------------------------------------ the check


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


def _skipped(name: str, why: str):
    from gpubench.results import ModelValidation

    return ModelValidation(model=name, status="skipped", error=why)


def plan_check(name: str, result, factor: float, config_path: Path, plan, torch_threads: int | None = None):
    """The replay of model ``name`` at ``factor`` × its measured work, and the report's prediction of it: (spec,
    estimate for K·n planned epochs, from the job's training ``plan`` with its planned epochs replaced); or a
    skipped :class:`~gpubench.results.ModelValidation` saying why."""
    from gpubench.decision.estimate import RecurringPlan, estimate_training_time

    if result.status != "ok" or result.statistics is None:
        return _skipped(name, f"status {result.status}: nothing measured to check")
    if result.calibration_steps is None or result.batch_size is None or not result.steps_per_epoch:
        return _skipped(name, "the report does not record the steps it ran (written before gpubench.validate)")
    epochs = math.ceil(factor * len(result.raw_epoch_times_ms))
    steps_per_epoch = result.steps_per_epoch
    steps = result.calibration_steps + steps_per_epoch * (len(result.warmup_epoch_times_ms) + epochs)
    try:
        estimate = estimate_training_time(name, result, plan)
    except ValueError as exc:
        return _skipped(name, f"no estimate to check: {exc}")
    # The job's plan gives the estimate its form; the replay's length replaces the planned training's, and the replay
    # trains without the plan's validation passes and checkpoints, so their measured costs are left out.
    estimate = replace(estimate, planned_epochs=float(epochs), recurring=RecurringPlan())
    spec = ReplaySpec(
        config_path=str(config_path),
        model=name,
        batch_size=result.batch_size,
        steps_per_epoch=steps_per_epoch,
        steps=steps,
        torch_threads=torch_threads,
    )
    return spec, estimate


def _run_fresh(spec: ReplaySpec, timeout_s: float) -> float:
    """Replay ``spec`` in a fresh Python process; the wall seconds of its training. Raises RuntimeError on failure."""
    with tempfile.TemporaryDirectory(prefix="gpubench-validate-") as folder:
        spec_path, result_path = Path(folder) / "spec.json", Path(folder) / "result.json"
        spec_path.write_text(json.dumps(spec.__dict__))
        command = [sys.executable, "-m", "gpubench.validate", "--worker", str(spec_path), str(result_path)]
        completed = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
        if completed.returncode != 0 or not result_path.is_file():
            tail = (completed.stderr or completed.stdout).strip().splitlines()[-3:]
            raise RuntimeError(f"the training process exited {completed.returncode}: {' / '.join(tail)}")
        return float(json.loads(result_path.read_text())["actual_s"])


def validate_report(report_path: Path, factor: float, models: list[str] | None = None, repeats: int = 1):
    """Check every (or each named) model of the report at ``report_path``, each training run ``repeats`` times;
    the :class:`ValidationReport`."""
    from gpubench.output.report_file import ReportReadError, read_report
    from gpubench.results import ModelValidation, ValidationReport

    try:
        report = read_report(report_path)
    except ReportReadError as exc:
        raise ValidationInputError(str(exc)) from exc
    unknown = sorted(set(models or ()) - set(report.models))
    if unknown:
        raise ValidationInputError(
            f"--models names {', '.join(unknown)}, which the report did not run; it ran {', '.join(report.models)}"
        )
    config_path = _config_path(report_path, report.run.output_dir)
    plan = load_config(config_path).decision.plan
    checks: dict[str, ModelValidation] = {}
    for name, result in report.models.items():
        if models and name not in models:
            continue
        threads = None if report.run.host is None else report.run.host.torch_num_threads
        planned = plan_check(name, result, factor, config_path, plan, threads)
        if isinstance(planned, ModelValidation):
            checks[name] = planned
            continue
        spec, estimate = planned
        predicted_s = estimate.hours * 3600.0
        lower_s, upper_s = estimate.lower_hours * 3600.0, estimate.upper_hours * 3600.0
        base = ModelValidation(
            model=name,
            status="ok",
            factor=factor,
            batch_size=spec.batch_size,
            steps_per_epoch=spec.steps_per_epoch,
            epochs=int(estimate.planned_epochs),
            steps=spec.steps,
            predicted_s=predicted_s,
            lower_s=lower_s,
            upper_s=upper_s,
        )
        print(f"gpubench.validate: {name}: training {spec.steps:,} steps (predicted {predicted_s:,.1f} s)", flush=True)
        try:
            # A generous limit: ten times the upper bound, and a minute for the process to start and build.
            runs_s = [_run_fresh(spec, timeout_s=60.0 + 10.0 * upper_s) for _ in range(repeats)]
        except (RuntimeError, subprocess.TimeoutExpired) as exc:
            checks[name] = replace(base, status="failed", error=str(exc))
            continue
        actual_s = statistics.median(runs_s)
        checks[name] = replace(
            base,
            actual_s=actual_s,
            error_pct=100.0 * (actual_s - predicted_s) / predicted_s,
            inside_bound=lower_s <= actual_s <= upper_s,
            actual_runs_s=runs_s,
            replay_spread_pct=100.0 * (max(runs_s) - min(runs_s)) / actual_s if repeats > 1 else None,
        )
    return ValidationReport(
        report_path=str(report_path),
        device=report.hardware.device_name,
        factor=factor,
        created_utc=datetime.now(UTC).isoformat(timespec="seconds"),
        models=checks,
    )


def format_table(validation) -> str:
    """The validation as a plain-text table (seconds and percent)."""
    header = (
        f"{'model':<8} {'batch':>6} {'epochs':>6} {'predicted s':>12} {'bound s':>21} {'actual s':>10} {'error':>8}  in"
    )
    lines = [
        f"Predictions of {validation.report_path} on {validation.device}, x{validation.factor:g} the work:",
        header,
    ]
    for check in validation.models.values():
        if check.status != "ok":
            lines.append(f"{check.model:<8} {check.status}: {check.error}")
            continue
        bound = f"[{check.lower_s:,.1f}, {check.upper_s:,.1f}]"
        inside = "yes" if check.inside_bound else "NO"
        lines.append(
            f"{check.model:<8} {check.batch_size:>6} {check.epochs:>6} {check.predicted_s:>12,.1f} {bound:>21} "
            f"{check.actual_s:>10,.1f} {check.error_pct:>+7.2f}%  {inside}"
        )
    errors = [abs(c.error_pct) for c in validation.models.values() if c.error_pct is not None]
    if errors:
        within = sum(e <= ERROR_GOAL_PCT for e in errors)
        lines.append(f"{within} of {len(errors)} within {ERROR_GOAL_PCT:g}%; largest |error| {max(errors):.2f}%")
    for check in validation.models.values():
        if check.replay_spread_pct is not None:
            runs = ", ".join(f"{run_s:,.1f}" for run_s in check.actual_runs_s)
            lines.append(
                f"{check.model}: {len(check.actual_runs_s)} identical trainings took {runs} s, a spread of "
                f"{check.replay_spread_pct:.2f}% (the actual above is their median)"
            )
    return "\n".join(lines)


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m gpubench.validate",
        description="Train each model of a gpubench report for real, K times the measured work, in a fresh process, "
        "and compare the wall time with the report's prediction and its bounds. Writes validation.json beside the "
        "report.",
    )
    parser.add_argument("report", nargs="?", type=Path, help="a report.json written by a completed gpubench job")
    parser.add_argument(
        "--factor",
        type=float,
        default=DEFAULT_FACTOR,
        help=f"multiple of the measured epochs (default {DEFAULT_FACTOR:g})",
    )
    parser.add_argument("--models", help="comma-separated models to check (default: every model the report ran)")
    parser.add_argument(
        "--repeats",
        type=int,
        default=1,
        help="run each training this many times, each in a fresh process, to see how far identical trainings "
        "differ on this host (default 1)",
    )
    parser.add_argument(
        "--output", type=Path, help=f"where to write the result (default: {VALIDATION_FILE_NAME} beside the report)"
    )
    parser.add_argument("--worker", nargs=2, type=Path, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """The command line; returns the exit code."""
    args = _parse(argv)
    if args.worker:
        return _worker(*args.worker)
    from gpubench.output import console
    from gpubench.output.report_file import write_json_atomic

    try:
        if args.report is None:
            raise ValidationInputError("give the report to validate: python -m gpubench.validate path/to/report.json")
        if not (math.isfinite(args.factor) and args.factor > 0):
            raise ValidationInputError(f"--factor {args.factor:g} is not valid: give a positive multiple, e.g. 4")
        if args.repeats < 1:
            raise ValidationInputError(f"--repeats {args.repeats} is not valid: give a whole number >= 1, e.g. 3")
        models = [m.strip() for m in args.models.split(",") if m.strip()] if args.models else None
        validation = validate_report(args.report, args.factor, models, repeats=args.repeats)
    except ValidationInputError as exc:
        console.error(str(exc))
        return 2
    output = args.output or args.report.parent / VALIDATION_FILE_NAME
    write_json_atomic(output, validation.to_dict())
    print(format_table(validation))
    print(f"validation: {output}")
    return 1 if any(check.status == "failed" for check in validation.models.values()) else 0


if __name__ == "__main__":
    raise SystemExit(main())
