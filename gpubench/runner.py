"""The coordinator: phases in order, each model isolated, results saved as they complete.

hardware probe + burn-in -> market data -> per model: batch size -> warmup + measured epochs (again at a smaller
batch while the measured peak breaks the headroom) -> statistics -> report section (written at once) -> MLflow run.
The coordinator holds no maths: each phase returns a value the next takes. A model that fails gets a status and an
error and the next model still runs; an interrupted run leaves a valid partial report.
"""

import platform
import subprocess
import traceback
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from gpubench import __version__
from gpubench.config import BenchmarkConfig
from gpubench.data.loader import load_features
from gpubench.data.tensors import FeatureTensors
from gpubench.decision.recommendation import build_recommendation
from gpubench.errors import ConfigError
from gpubench.hardware import device as hardware
from gpubench.hardware.catalog import load_catalog
from gpubench.measure.batch_search import (
    BatchDecision,
    HeadroomCheck,
    TrialResult,
    check_headroom,
    choose_batch_size,
    gradient_accumulation_steps,
    is_oom,
    release_device_memory,
    step_down_size,
)
from gpubench.measure.epochs import Measurement, measure_workload
from gpubench.measure.memory import BYTES_PER_MB, MemoryProfiler, TorchCudaAllocator
from gpubench.measure.stability import StabilityMonitor, stability_verdict
from gpubench.measure.timing import BlockTimer
from gpubench.output import console, tracking
from gpubench.output.plots import save_report_plots
from gpubench.output.report_file import ModelResult, ReportWriter, new_report
from gpubench.stats.epoch_times import summarize_epoch_times
from gpubench.workload import ExecutionContext, Workload, workload_class


@dataclass(frozen=True)
class RunContext:
    """What Hydra knows about this job: where it writes, whether it is one job of a sweep, what was overridden."""

    run_dir: Path
    multirun: bool = False
    sweep_dir: str | None = None
    job_num: int | None = None
    overrides: tuple[str, ...] = ()
    choices: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_hydra(cls, cfg: DictConfig) -> "RunContext":
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode

        hydra_cfg = HydraConfig.get()
        multirun = hydra_cfg.mode == RunMode.MULTIRUN
        return cls(
            run_dir=Path(hydra_cfg.runtime.output_dir),
            multirun=multirun,
            sweep_dir=str(hydra_cfg.sweep.dir) if multirun else None,
            job_num=int(hydra_cfg.job.num) if multirun else None,
            overrides=tuple(hydra_cfg.overrides.task),
            choices={k: str(v) for k, v in hydra_cfg.runtime.choices.items() if not k.startswith("hydra")},
        )


def typed_config(cfg: DictConfig) -> BenchmarkConfig:
    """Resolve and validate the composed config into :class:`BenchmarkConfig` (errors name the key)."""
    try:
        typed = OmegaConf.to_object(cfg)
    except OmegaConfBaseException as exc:
        cause = exc.__cause__ if isinstance(exc.__cause__, ConfigError) else None
        if cause is not None:
            raise cause from None
        key = getattr(exc, "full_key", None)
        message = str(exc).splitlines()[0]
        raise ConfigError(f"`{key}`: {message}" if key else message) from None
    assert isinstance(typed, BenchmarkConfig)
    return typed


def _git_commit() -> str | None:
    """The commit of the gpubench checkout this code runs from, or None outside a git checkout."""
    try:
        completed = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=Path(__file__).resolve().parent,
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return completed.stdout.strip() or None


def _synchronizer(device: torch.device):
    if device.type == "cuda":
        return lambda: torch.cuda.synchronize(device)
    return lambda: None


def timed_batch(configured: int, decision: BatchDecision, *, is_hyperparameter: bool) -> tuple[int, int, str]:
    """The batch a model is timed at after a successful search: (batch size, accumulation steps, why).

    Supervised models train at the largest batch that fits, with gradient accumulation to the target effective
    batch. Where the batch is part of the algorithm (RL), the configured size is kept, capped by what fits.
    """
    assert decision.batch_size is not None
    if is_hyperparameter:
        batch_size = min(configured, decision.batch_size)
        why = (
            f"timed at the configured batch size {configured} capped by the largest that fits "
            f"({decision.batch_size}): the batch is part of this algorithm"
        )
        return batch_size, 1, why
    accumulation = decision.gradient_accumulation_steps or 1
    return decision.batch_size, accumulation, "timed at the largest batch that fits, with gradient accumulation"


def count_step_flops(workload: Workload) -> float | None:
    """Floating-point operations of one training step (forward + backward, as torch's flop counter sees them).

    Runs one real step under ``FlopCounterMode`` (it counts matmuls, convolutions and attention; elementwise work
    and the optimizer are not counted). Returns None when the step cannot be counted (e.g. a compiled graph the
    counter cannot see into).
    """
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    try:
        with counter:
            workload.train_step()
    except Exception:  # the counter is a diagnostic; the measurement must not depend on it
        return None
    total = counter.get_total_flops()
    return float(total) if total > 0 else None


def energy_summary(device_epochs: list[dict[str, Any]], samples_per_epoch: float) -> dict[str, Any] | None:
    """Mean joules per measured epoch and per sample from NVML's energy counter; None where it is not measured."""
    joules = [e["energy_j"] for e in device_epochs if e.get("phase") == "measured" and e.get("energy_j") is not None]
    if not joules:
        return None
    per_epoch_j = sum(joules) / len(joules)
    return {
        "joules_per_epoch": per_epoch_j,
        "joules_per_sample": per_epoch_j / samples_per_epoch if samples_per_epoch else None,
        "epochs": len(joules),
    }


class _MemoryObserver:
    """The memory profiler seen as an epoch observer (allocator peaks and NVML samples per epoch)."""

    name = "memory"

    def __init__(self, profiler: MemoryProfiler) -> None:
        self.profiler = profiler

    def start_epoch(self) -> None:
        self.profiler.start_epoch()

    def end_epoch(self) -> dict[str, Any]:
        epoch = self.profiler.end_epoch()
        return {} if epoch is None else asdict(epoch)

    def stop_reason(self) -> str | None:
        return None


class _DeviceObserver:
    """The thermal/clock/energy watch seen as an epoch observer; asks to stop when the card passes its stop
    temperature."""

    name = "device"

    def __init__(self, monitor: hardware.DeviceMonitor) -> None:
        self.monitor = monitor
        self.last_status: str | None = None

    def start_epoch(self) -> None:
        self.monitor.start_epoch()

    def end_epoch(self) -> dict[str, Any]:
        stats = self.monitor.end_epoch()
        self.last_status = stats.temperature_status
        return stats.to_dict()

    def stop_reason(self) -> str | None:
        return "thermal_stop" if self.last_status == "stop" else None


class Runner:
    """Runs one job: every selected model on one device, writing the report as results complete."""

    def __init__(self, cfg: BenchmarkConfig, context: RunContext) -> None:
        self.cfg = cfg
        self.context = context
        self.writer = ReportWriter(cfg.output)
        self.device, device_notice = hardware.resolve_device(cfg.hardware)
        if device_notice:
            console.notice(device_notice)
        #: The emulated card's VRAM less what the CUDA context holds outside the allocator; None on the CPU.
        self.vram_budget = hardware.apply_vram_limit(self.device, cfg.hardware.vram_limit_gb)
        self.usable_vram_mb = None if self.vram_budget is None else self.vram_budget.usable_vram_mb
        self.timer = BlockTimer(_synchronizer(self.device))
        #: Per model, the NVML sampler's memory timeline (for the VRAM plot); empty on the CPU.
        self.memory_timelines: dict[str, dict[str, list[float]]] = {}

    def run(self) -> dict[str, Any]:
        cfg = self.cfg
        torch.manual_seed(cfg.seed)
        info = hardware.probe(self.device)
        self.warmup = hardware.burn_in(self.device, max_seconds=cfg.hardware.burn_in_max_seconds)
        info.warmup_stats = self.warmup
        features, provenance = load_features(cfg.data, self.device)
        # On the CPU the budget's keys are still there, as None (not measured).
        budget = (
            self.vram_budget.to_dict()
            if self.vram_budget is not None
            else dict.fromkeys(f.name for f in fields(hardware.VramBudget))
        )
        hardware_section = {**info.to_dict(), **budget}
        report = new_report(hardware_section, provenance.to_dict(), self._run_section())
        self.writer.write(report)
        try:
            for name in cfg.model_names:
                result = self._benchmark_model(name, features)
                report["models"][name] = result.to_dict()
                self.writer.write(report)
            # The models' sections are on disk already: the recommendation is computed from them.
            report["recommendation"] = build_recommendation(report, cfg.decision, load_catalog())
            report["status"] = "complete"
        except KeyboardInterrupt:
            report["status"] = "interrupted"
            raise
        finally:
            self.writer.write(report)
        return report

    def _run_section(self) -> dict[str, Any]:
        cfg = self.cfg
        return {
            "device": str(self.device),
            "models": cfg.model_names,
            "epochs": cfg.epochs,
            "warmup_epochs": cfg.warmup_epochs,
            "precision": cfg.execution.precision,
            "compile": cfg.execution.compile,
            "seed": cfg.seed,
            "hardware_config": asdict(cfg.hardware),
            "overrides": list(self.context.overrides),
            "choices": self.context.choices,
            "output_dir": str(self.context.run_dir),
            "sweep_dir": self.context.sweep_dir,
            "job_num": self.context.job_num,
            "versions": {
                "gpubench": __version__,
                "torch": torch.__version__,
                "torch_cuda": torch.version.cuda,
                "python": platform.python_version(),
            },
            "git_commit": _git_commit(),
        }

    # ------------------------------------------------------------------------------------------------ one model

    def _build(self, name: str, features: FeatureTensors, batch_size: int, *, eager: bool = False) -> Workload:
        """The workload at ``batch_size`` in the configured execution mode (or eager, for the FLOP count)."""
        cfg = self.cfg
        compile_mode = "false" if eager else cfg.execution.compile
        if compile_mode != "false":
            # Each workload instance compiles its own graphs; without a reset, dynamo's recompile limit (8) is
            # reached during a batch-size search and later instances silently fall back to eager.
            torch._dynamo.reset()
        torch.manual_seed(cfg.seed)
        context = ExecutionContext(
            device=self.device,
            batch_size=batch_size,
            precision=cfg.execution.precision,
            compile_mode=compile_mode,
            seed=cfg.seed,
        )
        return workload_class(name)(getattr(cfg.workloads, name), features, context)

    def _search_enabled(self) -> bool:
        search = self.cfg.batch.search
        return self.device.type == "cuda" if search is None else bool(search)

    def _choose_batch(self, name: str, features: FeatureTensors) -> BatchDecision | None:
        """Largest batch that fits (GPU), or None to use the workload's configured batch size."""
        if not self._search_enabled() or self.usable_vram_mb is None:
            return None

        allocator = TorchCudaAllocator(self.device)

        def try_batch(size: int, steps: int) -> TrialResult:
            allocator.reset_peak()
            workload = self._build(name, features, size)
            seconds = self.timer.time_block(lambda: [workload.train_step() for _ in range(steps)])
            return TrialResult(
                peak_reserved_mb=allocator.snapshot().peak_reserved_bytes / BYTES_PER_MB,
                samples_per_s=workload.samples_per_step * steps / seconds,
            )

        return choose_batch_size(
            try_batch, self.cfg.batch, self.usable_vram_mb, verify_steps=self.cfg.batch.verify_steps
        )

    def _benchmark_model(self, name: str, features: FeatureTensors) -> ModelResult:
        """Choose the batch, measure the model at it, and step a searched batch down while its measured run breaks
        the headroom policy.

        The step-down happens after the measured epochs, not in the search: the search's trials run a few steps
        each, and fragmentation of the caching allocator only shows over the many steps of a measured run. Each
        abandoned measurement stays in the report (``batch_step_downs``), so the user sees what the larger batch
        cost and why it was given up; the reported numbers are those of the last measurement.
        """
        cfg = self.cfg
        result = ModelResult(name=name)
        # The previous model's tensors are gone, but the caching allocator still reserves their memory: release it,
        # or this model's batch search and peaks would start from the previous model's reservation.
        release_device_memory()
        try:
            decision = self._choose_batch(name, features)
            is_hyperparameter = workload_class(name).batch_size_is_hyperparameter
            if decision is not None:
                result.details["batch_search"] = decision.to_dict()
                if decision.batch_size is None:
                    result.status, result.error = "oom", decision.message
                    return result
                result.batch_size, result.gradient_accumulation_steps, result.details["batch_policy"] = timed_batch(
                    getattr(cfg.workloads, name).batch_size, decision, is_hyperparameter=is_hyperparameter
                )
            else:
                result.batch_size = getattr(cfg.workloads, name).batch_size
            headroom = self._measure_at(name, features, result)
            # Only a batch the search set is stepped down: an RL batch below the fitted cap is the algorithm's own
            # choice, and changing it would time a different algorithm.
            chosen_by_search = decision is not None and result.batch_size == decision.batch_size
            for _ in range(cfg.batch.max_step_downs if chosen_by_search else 0):
                stepped = self._step_down(result, headroom, is_hyperparameter=is_hyperparameter)
                if stepped is None:
                    break
                result = stepped
                # The abandoned workload died with the previous measurement; return its cached blocks first, so the
                # new peak starts from a clean cache.
                release_device_memory()
                headroom = self._measure_at(name, features, result)
            if headroom is not None and headroom.warning is not None:
                result.details.setdefault("warnings", []).append(headroom.warning)
                console.notice(f"{name}: {headroom.warning}")
        except Exception as exc:
            result.status = "oom" if is_oom(exc) else "failed"
            result.error = f"{type(exc).__name__}: {exc}".strip()
            result.details["traceback"] = traceback.format_exc(limit=8)
        return result

    def _step_down(
        self, measured: ModelResult, headroom: HeadroomCheck | None, *, is_hyperparameter: bool
    ) -> ModelResult | None:
        """A fresh result at a smaller batch after ``measured`` broke the headroom policy, carrying the search's
        details and a record of the abandoned measurement; None to keep ``measured`` (within the limit, already at
        ``batch.min_size``, nothing measured, or a run that did not finish normally)."""
        if headroom is None or measured.status != "ok" or measured.batch_size is None:
            return None
        batch_size = step_down_size(
            measured.batch_size, headroom.peak_reserved_mb, headroom.peak_limit_mb, self.cfg.batch.min_size
        )
        if batch_size is None:
            return None
        throughput = measured.samples_per_second()
        abandoned = {
            "batch_size": measured.batch_size,
            "peak_reserved_mb": headroom.peak_reserved_mb,
            "headroom_limit_mb": headroom.peak_limit_mb,
            "mean_epoch_time_ms": measured.statistics["mean_ms"] if measured.statistics else None,
            "samples_per_second": throughput["mean"] if throughput else None,
        }
        reason = (
            f"stepped down from {measured.batch_size} to {batch_size} because the measured peak reserved memory "
            f"{headroom.peak_reserved_mb:,.0f} MB exceeded the headroom limit {headroom.peak_limit_mb:,.0f} MB"
        )
        console.notice(f"{measured.name}: {reason}; measuring again")
        return ModelResult(
            name=measured.name,
            batch_size=batch_size,
            gradient_accumulation_steps=(
                1 if is_hyperparameter else gradient_accumulation_steps(batch_size, self.cfg.batch.target_effective)
            ),
            details={
                "batch_search": measured.details["batch_search"],
                "batch_policy": f"{measured.details['batch_policy']}; {reason}",
                "batch_step_downs": [*measured.details.get("batch_step_downs", []), abandoned],
            },
        )

    def _measure_at(self, name: str, features: FeatureTensors, result: ModelResult) -> HeadroomCheck | None:
        """Build the workload at ``result.batch_size``, count its FLOPs, measure it into ``result``, and check the
        measured peak against the headroom (None on the CPU). The workload is unreachable once this returns."""
        cfg = self.cfg
        assert result.batch_size is not None
        if cfg.execution.compile == "false":
            workload = self._build(name, features, result.batch_size)
            result.details["flops_per_step"] = count_step_flops(workload)
        else:
            # The FLOP counter cannot see into compiled graphs, and a CUDA-graph capture must not start under its
            # dispatch mode: count one step of an eager twin (same shapes, same maths), released before the
            # measured workload is built so the two never share the VRAM.
            result.details["flops_per_step"] = count_step_flops(
                self._build(name, features, result.batch_size, eager=True)
            )
            release_device_memory()
            workload = self._build(name, features, result.batch_size)
        result.samples_per_step = workload.samples_per_step
        result.sample_unit = workload.sample_unit
        result.details["workload"] = workload.describe()
        result.details["execution"] = {"precision": cfg.execution.precision, "compile": cfg.execution.compile}
        measurement = self._measure(name, workload, result)
        self._fill_from_measurement(result, measurement)
        # The batch search's trials ran a few steps each; the measured epochs ran many more, and fragmentation can
        # keep growing, so check that the headroom policy held for the run whose numbers are reported.
        headroom = check_headroom(result.memory_usage_mb, self.usable_vram_mb, cfg.batch.headroom)
        result.details["memory"].update(
            headroom.to_dict() if headroom is not None else {"headroom_exceeded": None, "headroom_limit_mb": None}
        )
        return headroom

    def _measure(self, name: str, workload: Workload, result: ModelResult) -> Measurement:
        cfg = self.cfg
        monitor = StabilityMonitor(cfg.stability, self.device)
        memory = MemoryProfiler(
            self.device,
            sample_interval_ms=cfg.memory.sample_interval_ms,
            leak_threshold_mb_per_epoch=cfg.memory.leak_threshold_mb_per_epoch,
            confidence_level=cfg.statistics.confidence_level,
            sampler=cfg.memory.sampler,
        )
        device_watch = hardware.DeviceMonitor(
            self.device, cfg.hardware, reference_sm_clock_mhz=self.warmup.peak_sm_clock_mhz
        )
        observers = [_MemoryObserver(memory), _DeviceObserver(device_watch)]
        with memory, console.model_progress(name, cfg.warmup_epochs, cfg.epochs, verbose=cfg.verbose) as on_epoch:
            measurement = measure_workload(
                workload,
                timer=self.timer,
                epochs=cfg.epochs,
                warmup_epochs=cfg.warmup_epochs,
                epoch_config=cfg.epoch,
                statistics=cfg.statistics,
                monitor=monitor,
                observers=observers,
                on_epoch=on_epoch,
            )
        profile = memory.result()
        if memory.sampler is not None:
            timeline = memory.sampler.timeline()
            self.memory_timelines[name] = {
                "t_s": timeline.times_s.tolist(),
                "device_used_mb": timeline.device_used_mb.tolist(),
                "process_mb": timeline.process_used_mb.tolist(),
            }
        result.memory_usage_mb = profile.peak_reserved_mb
        result.details["memory"] = profile.to_dict()
        result.details["device_epochs"] = measurement.observations.get("device", [])
        verdict = stability_verdict(measurement.health, cfg.stability)
        result.stability = verdict.stability
        result.loss_trend = verdict.loss_trend
        result.details["stability_details"] = verdict.to_dict()
        return measurement

    def _fill_from_measurement(self, result: ModelResult, measurement: Measurement) -> None:
        cfg = self.cfg
        result.steps_per_epoch = measurement.sizing.steps_per_epoch
        result.first_step_ms = measurement.sizing.first_step_s * 1e3
        result.calibration_seconds = measurement.sizing.calibration_seconds
        result.raw_epoch_times_ms = measurement.epoch_times_ms
        result.warmup_epoch_times_ms = measurement.warmup_epoch_times_ms
        result.epoch_losses = measurement.epoch_losses
        result.details["warmup_epoch_losses"] = measurement.warmup_losses
        result.stop_reason = measurement.stop_reason
        result.details["energy"] = energy_summary(
            measurement.observations.get("device", []), measurement.sizing.steps_per_epoch * result.samples_per_step
        )
        if measurement.stop_reason == "diverged":
            result.status = "diverged"
            result.error = "training diverged: a NaN/Inf loss or gradient was seen; measurement stopped there"
        elif measurement.stop_reason == "thermal_stop":
            result.status = "thermal_stop"
            result.error = (
                f"the GPU passed {cfg.hardware.temperature_stop_c:g} °C (hardware.temperature_stop_c); "
                "measurement of this model stopped"
            )
        if len(measurement.epoch_times_ms) >= 2:
            summary = summarize_epoch_times(
                measurement.epoch_times_ms,
                confidence_level=cfg.statistics.confidence_level,
                cv_threshold=cfg.statistics.cv_threshold,
                outlier_rule=cfg.statistics.outlier_rule,
                target_rel_halfwidth=cfg.statistics.target_rel_halfwidth,
            )
            result.statistics = summary.to_dict()
            if cfg.verbose:
                console.model_warnings(result.name, list(summary.warnings))


def _tracking_record(cfg: BenchmarkConfig, context: RunContext, report: dict[str, Any]) -> tracking.RunRecord:
    """The MLflow view of a finished job: params from the config, series and summaries from the report."""
    params = tracking.flatten(OmegaConf.to_container(OmegaConf.structured(cfg), resolve=True))
    run = report["run"]
    tags = {
        "gpubench.models": ",".join(cfg.model_names),
        "gpubench.device": report["hardware"].get("device_name") or run["device"],
        "gpubench.version": __version__,
        "torch.version": run["versions"]["torch"],
        "python.version": run["versions"]["python"],
        "gpubench.status": report["status"],
    }
    if run.get("git_commit"):
        tags["mlflow.source.git.commit"] = run["git_commit"]
    if context.multirun and context.sweep_dir:
        tags["gpubench.sweep"] = context.sweep_dir
        tags["gpubench.job_num"] = str(context.job_num)
    metrics: dict[str, float | None] = {}
    series: dict[str, list[float | None]] = {}
    for name, section in report["models"].items():
        metrics[f"{name}/status_ok"] = 1.0 if section["status"] == "ok" else 0.0
        for key in ("mean_epoch_time_ms", "p95_latency_ms", "p99_latency_ms", "coefficient_of_variation"):
            metrics[f"{name}/{key}"] = section.get(key)
        if section.get("confidence_interval_ms"):
            metrics[f"{name}/ci_low_ms"], metrics[f"{name}/ci_high_ms"] = section["confidence_interval_ms"]
        stats = section.get("statistics") or {}
        if stats.get("decision_interval_ms"):
            metrics[f"{name}/decision_ci_low_ms"], metrics[f"{name}/decision_ci_high_ms"] = stats[
                "decision_interval_ms"
            ]
        if section.get("samples_per_second"):
            metrics[f"{name}/samples_per_second"] = section["samples_per_second"]["mean"]
        metrics[f"{name}/memory_usage_mb"] = section.get("memory_usage_mb")
        metrics[f"{name}/batch_size"] = section.get("batch_size")
        series[f"{name}/epoch_time_ms"] = section.get("raw_epoch_times_ms") or []
        series[f"{name}/epoch_loss"] = section.get("epoch_losses") or []
        memory = section.get("memory") or {}
        if memory.get("peak_reserved_mb_per_epoch"):
            series[f"{name}/epoch_peak_reserved_mb"] = memory["peak_reserved_mb_per_epoch"]
    run_name = "-".join(cfg.model_names) + (f"-job{context.job_num}" if context.multirun else "")
    return tracking.RunRecord(run_name=run_name, params=params, tags=tags, metrics=metrics, series=series)


def run(cfg: BenchmarkConfig, context: RunContext) -> int:
    """Run the job, write the report and the MLflow run, print the summary; return the process exit code."""
    runner = Runner(cfg, context)
    report = runner.run()
    record = _tracking_record(cfg, context, report)
    resolved_path = context.run_dir / "config_resolved.yaml"
    resolved_path.parent.mkdir(parents=True, exist_ok=True)
    resolved_path.write_text(OmegaConf.to_yaml(OmegaConf.structured(cfg)))
    record.artifacts = [runner.writer.path, resolved_path]
    try:
        record.artifacts += save_report_plots(report, runner.writer.path.parent, runner.memory_timelines)
    except Exception as exc:  # plots illustrate the report; failing to draw one must not lose the run
        console.notice(f"plots could not be drawn ({type(exc).__name__}: {exc}); the report is complete.")
    outcome = tracking.log_run(cfg.tracking, record)
    if outcome.warning:
        console.notice(outcome.warning)
    if outcome.run_id:
        report["run"]["mlflow_run_id"] = outcome.run_id
        runner.writer.write(report)
    console.print_summary(report, str(runner.writer.path))
    return 1 if any(section["status"] == "failed" for section in report["models"].values()) else 0
