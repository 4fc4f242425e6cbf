"""The coordinator: phases in order, each model isolated, results saved as they complete.

hardware probe + burn-in -> market data -> per model :func:`gpubench.model_run.run_model` (batch -> build ->
measure -> step down -> result) -> the report written after every model -> recommendation -> status complete ->
MLflow run, plots, summary. The coordinator holds no maths: each phase returns a value the next takes, and the
report is a :class:`~gpubench.results.RunReport` replaced, never mutated, as results arrive. A model that fails
gets a status and an error and the next model still runs; an interrupted run leaves a valid partial report.
"""

import platform
import subprocess
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from gpubench import __version__
from gpubench.config import BenchmarkConfig, DecisionConfig
from gpubench.data.loader import DataProvenance as LoadedDataProvenance
from gpubench.data.loader import load_features
from gpubench.decision.recommendation import build_recommendation
from gpubench.errors import ConfigError
from gpubench.hardware.burn_in import burn_in
from gpubench.hardware.catalog import Card, load_catalog
from gpubench.hardware.probe import probe
from gpubench.hardware.selection import resolve_device, synchronizer
from gpubench.hardware.vram import apply_vram_limit
from gpubench.measure.memory import MemoryTimeline
from gpubench.measure.timing import BlockTimer
from gpubench.model_run import ModelRunContext, run_model
from gpubench.output import console, tracking
from gpubench.output.plots import save_report_plots
from gpubench.output.report_file import ReportWriter
from gpubench.results import DataProvenance, Recommendation, RunInfo, RunReport


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


@dataclass(frozen=True)
class CompletedRun:
    """A job's report once every model has run, and per model the NVML memory samples of its measured run (for the
    VRAM plots; models without samples are absent)."""

    report: RunReport
    memory_timelines: dict[str, MemoryTimeline]


class Runner:
    """Runs one job: every selected model on one device, writing the report as results complete."""

    def __init__(self, cfg: BenchmarkConfig, context: RunContext) -> None:
        self.cfg = cfg
        self.context = context
        self.writer = ReportWriter(cfg.output)
        self.device, device_notice = resolve_device(cfg.hardware)
        if device_notice:
            console.notice(device_notice)
        #: The emulated card's VRAM less what the CUDA context holds outside the allocator; None on the CPU.
        self.vram_budget = apply_vram_limit(self.device, cfg.hardware.vram_limit_gb)
        self.timer = BlockTimer(synchronizer(self.device))

    def run(self) -> CompletedRun:
        """Probe and burn in the device, load the data, run every model, decide; the report is on disk after each
        phase, and on KeyboardInterrupt it is written with status ``interrupted`` before the interrupt goes on."""
        cfg = self.cfg
        torch.manual_seed(cfg.seed)
        probed = probe(self.device, self.vram_budget)
        warmup = burn_in(self.device, max_seconds=cfg.hardware.burn_in_max_seconds)
        features, provenance = load_features(cfg.data, self.device)
        report = RunReport.start(self._run_info(), replace(probed, warmup_stats=warmup), _legacy_provenance(provenance))
        models = ModelRunContext(
            cfg=cfg,
            device=self.device,
            features=features,
            timer=self.timer,
            usable_vram_mb=None if self.vram_budget is None else self.vram_budget.usable_vram_mb,
            reference_sm_clock_mhz=warmup.peak_sm_clock_mhz,
        )
        timelines: dict[str, MemoryTimeline] = {}
        _legacy_write(self.writer, report)
        try:
            for name in cfg.model_names:
                model = run_model(name, models)
                report = replace(report, models={**report.models, name: model.result})
                if model.memory_timeline is not None:
                    timelines[name] = model.memory_timeline
                _legacy_write(self.writer, report)
            # The models' sections are on disk already: the recommendation is computed from them.
            recommendation = _legacy_recommendation(report, cfg.decision, load_catalog())
            report = replace(report, recommendation=recommendation, status="complete")
        except KeyboardInterrupt:
            report = replace(report, status="interrupted")
            raise
        finally:
            _legacy_write(self.writer, report)
        return CompletedRun(report=report, memory_timelines=timelines)

    def _run_info(self) -> RunInfo:
        cfg = self.cfg
        return RunInfo(
            device=str(self.device),
            models=cfg.model_names,
            epochs=cfg.epochs,
            warmup_epochs=cfg.warmup_epochs,
            precision=cfg.execution.precision,
            compile=cfg.execution.compile,
            seed=cfg.seed,
            hardware_config=asdict(cfg.hardware),
            overrides=list(self.context.overrides),
            choices=self.context.choices,
            output_dir=str(self.context.run_dir),
            sweep_dir=self.context.sweep_dir,
            job_num=self.context.job_num,
            versions={
                "gpubench": __version__,
                "torch": torch.__version__,
                "torch_cuda": torch.version.cuda,
                "python": platform.python_version(),
            },
            git_commit=_git_commit(),
        )


# ------------------------------------------------------------------------------------------------ legacy adapters
# The functions below still take and return the report as a dict on this branch; each adapter converts at its one
# call site, so the typed report is all the runner handles.


def _legacy_provenance(provenance: LoadedDataProvenance) -> DataProvenance:
    return DataProvenance.from_dict(provenance.to_dict())


def _legacy_write(writer: ReportWriter, report: RunReport) -> None:
    writer.write(report.to_dict())


def _legacy_recommendation(report: RunReport, decision: DecisionConfig, catalog: dict[str, Card]) -> Recommendation:
    return Recommendation.from_dict(build_recommendation(report.to_dict(), decision, catalog))


def _legacy_save_plots(report: RunReport, folder: Path, memory_timelines: dict[str, MemoryTimeline]) -> list[Path]:
    timelines = {
        name: {
            "t_s": timeline.times_s.tolist(),
            "device_used_mb": timeline.device_used_mb.tolist(),
            "process_mb": timeline.process_used_mb.tolist(),
        }
        for name, timeline in memory_timelines.items()
    }
    return save_report_plots(report.to_dict(), folder, timelines)


def _legacy_print_summary(report: RunReport, path: Path) -> None:
    console.print_summary(report.to_dict(), str(path))


def _tracking_record(
    report: RunReport, params: dict[str, Any], *, run_name: str, sweep_dir: str | None, job_num: int | None
) -> tracking.RunRecord:
    """The MLflow view of a finished job: params from the config, series and summaries from the report."""
    data = report.to_dict()
    run = data["run"]
    tags = {
        "gpubench.models": ",".join(run["models"]),
        "gpubench.device": data["hardware"].get("device_name") or run["device"],
        "gpubench.version": __version__,
        "torch.version": run["versions"]["torch"],
        "python.version": run["versions"]["python"],
        "gpubench.status": data["status"],
    }
    if run.get("git_commit"):
        tags["mlflow.source.git.commit"] = run["git_commit"]
    if sweep_dir:
        tags["gpubench.sweep"] = sweep_dir
        tags["gpubench.job_num"] = str(job_num)
    metrics: dict[str, float | None] = {}
    series: dict[str, list[float | None]] = {}
    for name, section in data["models"].items():
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
    return tracking.RunRecord(run_name=run_name, params=params, tags=tags, metrics=metrics, series=series)


# ------------------------------------------------------------------------------------------------ the job


def run(cfg: BenchmarkConfig, context: RunContext) -> int:
    """Run the job, write the report and the MLflow run, print the summary; return the process exit code."""
    runner = Runner(cfg, context)
    completed = runner.run()
    report = completed.report
    params = tracking.flatten(OmegaConf.to_container(OmegaConf.structured(cfg), resolve=True))
    record = _tracking_record(
        report,
        params,
        run_name="-".join(cfg.model_names) + (f"-job{context.job_num}" if context.multirun else ""),
        sweep_dir=context.sweep_dir if context.multirun else None,
        job_num=context.job_num if context.multirun else None,
    )
    resolved_path = context.run_dir / "config_resolved.yaml"
    resolved_path.parent.mkdir(parents=True, exist_ok=True)
    resolved_path.write_text(OmegaConf.to_yaml(OmegaConf.structured(cfg)))
    artifacts = [runner.writer.path, resolved_path]
    try:
        artifacts += _legacy_save_plots(report, runner.writer.path.parent, completed.memory_timelines)
    except Exception as exc:  # plots illustrate the report; failing to draw one must not lose the run
        console.notice(f"plots could not be drawn ({type(exc).__name__}: {exc}); the report is complete.")
    outcome = tracking.log_run(cfg.tracking, replace(record, artifacts=artifacts))
    if outcome.warning:
        console.notice(outcome.warning)
    if outcome.run_id:
        report = replace(report, run=replace(report.run, mlflow_run_id=outcome.run_id))
        _legacy_write(runner.writer, report)
    _legacy_print_summary(report, runner.writer.path)
    return 1 if any(model.status == "failed" for model in report.models.values()) else 0
