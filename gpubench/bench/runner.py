"""The coordinator: probe -> first round -> later rounds -> ranks -> what-ifs -> recommendation.

Each phase yields :class:`RunState` values and the report is written after every step, so an interrupt leaves a
valid partial report.
"""

import gc
import logging
import platform
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import torch
from omegaconf import OmegaConf

from gpubench import __version__
from gpubench.bench.job import RunContext
from gpubench.bench.model_rounds import ModelRounds, first_round_record, merged_result, seconds_since, split_epochs
from gpubench.bench.model_run import EpochObserver, ModelInterrupted, ModelRunContext, run_model
from gpubench.bench.preflight import CheckedInputs, check_inputs
from gpubench.bench.ranks import measure_distributed
from gpubench.bench.round_schedule import RoundSchedule, later_rounds
from gpubench.bench.session import prepare_session
from gpubench.bench.what_if import run_what_ifs, what_if_enabled, what_if_models
from gpubench.config import BenchmarkConfig
from gpubench.decision.recommendation import build_recommendation
from gpubench.errors import GpubenchError
from gpubench.hardware.burn_in import burn_in
from gpubench.hardware.catalog import load_catalog
from gpubench.hardware.host import busy_host_warning, host_load, probe_host_speed
from gpubench.hardware.identity import nvml_index_for
from gpubench.hardware.probe import probe
from gpubench.models import workload_class
from gpubench.output import console, tracking
from gpubench.output.history import job_history
from gpubench.output.html_report import PagePlot, draw_page_plots, write_page
from gpubench.output.plots import save_report_plots
from gpubench.output.redact import install_log_redaction, redact
from gpubench.output.report_file import ReportReadError, ReportWriter, read_report
from gpubench.output.sweep_run import sweep_job
from gpubench.results import MemoryTimeline, ModelResult, RunInfo, RunReport
from gpubench.results.units import MS_PER_S
from gpubench.stats.config import ADAPTIVE_OFF

logger = logging.getLogger(__name__)

#: Batch keys only the GPU's batch-size search reads.
_SEARCH_KEYS = ("batch.search", "batch.max_size", "batch.min_size")
#: The resolved config the job writes in its folder (credentials redacted).
RESOLVED_CONFIG_NAME = "config_resolved.yaml"


def _git_commit() -> str | None:
    """The commit of the gpubench checkout, or None outside a git checkout."""
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
    """A job's final report, each sampled model's memory timeline and the record it appended to the machine's
    history (None: none)."""

    report: RunReport
    memory_timelines: dict[str, MemoryTimeline]
    history_record: dict[str, Any] | None = None


@dataclass(frozen=True)
class RunState:
    """A job between its phases: the report so far, the epochs per round (``plan``), the perf-counter reading of
    round 1's start (``started``, s), each model's rounds and memory samples, the model in progress, and the record
    the finished job appended to the machine's history."""

    report: RunReport
    models: ModelRunContext
    plan: tuple[int, ...]
    started: float = 0.0
    rounds: Mapping[str, ModelRounds] = field(default_factory=dict)
    timelines: Mapping[str, MemoryTimeline] = field(default_factory=dict)
    in_progress: str | None = None
    history_record: dict[str, Any] | None = None


class Runner:
    """Runs one job: every selected model on one device, writing the report as results complete."""

    def __init__(
        self,
        cfg: BenchmarkConfig,
        context: RunContext,
        epoch_observer: EpochObserver | None = None,
        model_observer: Callable[[str], None] | None = None,
        inputs: CheckedInputs | None = None,
    ) -> None:
        self.cfg = cfg
        self.context = context
        #: The device and the data, checked before the run was started (else here).
        self.inputs = check_inputs(cfg) if inputs is None else inputs
        self.epoch_observer = epoch_observer
        self.model_observer = model_observer
        self.writer = ReportWriter(cfg.output)
        self.config_path = context.run_dir / RESOLVED_CONFIG_NAME
        self.device = self.inputs.device
        if self.inputs.device_notice:
            console.notice(self.inputs.device_notice)
        logger.info("device: %s (hardware=%s)", self.device, cfg.hardware.name)
        self.session = prepare_session(cfg, device=self.device, load_data=False)
        self.host = host_load(self.session.threads_source)
        logger.info("host: %s", console.host_text(self.host))
        busy = busy_host_warning(self.host)
        if busy:
            console.notice(busy)
        if self.device.type == "cpu":
            ignored = [o for o in context.overrides if o.split("=", 1)[0].lstrip("+~") in _SEARCH_KEYS]
            if ignored:
                console.notice(
                    f"{' '.join(ignored)}: the batch-size search runs on a GPU only; on the CPU each model is timed "
                    "at its configured batch size (workloads.<model>.batch_size), capped at batch.max_size."
                )
        self.vram_budget = self.session.vram_budget
        self._written: RunReport | None = None
        self._latest: RunState

    def run(self) -> CompletedRun:
        """Probe, burn in, load the data, run every model, decide; an interrupt writes a partial report first."""
        self._save(self._probe())
        # What is alive now lives for the whole run: the collections between batch trials need not scan it.
        gc.freeze()
        try:
            for phase in (self._first_round, self._later_rounds, self._ranks, self._what_ifs):
                for state in phase(self._latest):
                    self._save(state)
                self._latest = replace(self._latest, in_progress=None)
            self._latest = self._complete(self._latest)
        except KeyboardInterrupt as exc:
            self._interrupted(self._latest, exc)
            raise
        except Exception as exc:
            self._failed(self._latest, exc)
            raise
        finally:
            # A second interrupt may have cut the last write short.
            self._write(self._latest.report)
        return CompletedRun(
            report=self._latest.report,
            memory_timelines=dict(self._latest.timelines),
            history_record=self._latest.history_record,
        )

    def _probe(self) -> RunState:
        """Probe and burn in the device, load the data and check every model's config against it."""
        cfg = self.cfg
        probed = probe(self.device, self.vram_budget)
        logger.info("burn-in: up to %.0f s", cfg.hardware.burn_in_max_seconds)
        warmup = burn_in(self.device, max_seconds=cfg.hardware.burn_in_max_seconds)
        session = self.session.with_data(self.inputs.bars)
        features, provenance = session.features, session.provenance
        logger.info("data: %d bars x %d features, symbols %s", features.n_bars, features.n_features, features.symbols)
        for name in cfg.model_names:
            workload_class(name).check_data(getattr(cfg.workloads, name), features)
        report = RunReport.start(self._run_info(), replace(probed, warmup_stats=warmup), provenance)
        # A store the job's MLflow run could not be created in has had its one warning: it is not searched as well.
        history = job_history(cfg, report.hardware, read_store=self.context.mlflow_run_id is not None)
        models = session.model_run_context(
            reference_sm_clock_mhz=warmup.peak_sm_clock_mhz, epoch_observer=self.epoch_observer, history=history
        )
        return RunState(report=report, models=models, plan=tuple(split_epochs(cfg.epochs, cfg.statistics.rounds)))

    def _first_round(self, state: RunState) -> Iterator[RunState]:
        """Round 1 of every model, alone on the device; yields the state as each model starts and ends."""
        cfg, plan, models = self.cfg, state.plan, state.models
        first_round = models
        if len(plan) > 1:
            first_cfg = replace(cfg, epochs=plan[0], statistics=replace(cfg.statistics, adaptive=ADAPTIVE_OFF))
            first_round = replace(models, cfg=first_cfg, planned_epochs=cfg.epochs)
        state = replace(state, started=time.perf_counter())
        for name in cfg.model_names:
            state = replace(state, in_progress=name)
            yield state
            logger.info("model %s: started", name)
            model = run_model(name, replace(first_round, completed=state.report.models))
            result = model.result
            rounds = state.rounds
            if len(plan) > 1 and result.status == "ok" and model.measurement is not None:
                seconds = sum(result.raw_epoch_times_ms) / MS_PER_S
                start_s = seconds_since(state.started) - seconds
                record = first_round_record(model, len(rounds) + 1, start_s, probe_host_speed())
                rounds = {**rounds, name: ModelRounds(first=model, first_record=record)}
                result = merged_result(rounds[name], models)
            logger.info(
                "model %s: %s, mean epoch %s over %d epochs%s",
                name,
                result.status,
                console.epoch_time_text(result),
                len(result.raw_epoch_times_ms),
                f" ({result.error})" if result.error else "",
            )
            timelines = state.timelines
            if model.memory_timeline is not None:
                timelines = {**timelines, name: model.memory_timeline}
            state = replace(state, report=_with_model(state.report, name, result), rounds=rounds, timelines=timelines)
            yield state
            if self.model_observer is not None:
                self.model_observer(name)

    def _later_rounds(self, state: RunState) -> Iterator[RunState]:
        """Rounds 2 on, interleaved (:mod:`gpubench.bench.round_schedule`)."""
        schedule = RoundSchedule(plan=state.plan, started=state.started, usable_vram_mb=state.models.usable_vram_mb)
        rounds = dict(state.rounds)
        for measured, result in later_rounds(rounds, schedule, state.models, state.report.models):
            state = replace(state, report=_with_model(state.report, measured, result), rounds=rounds)
            yield state

    def _ranks(self, state: RunState) -> Iterator[RunState]:
        """With ``distributed.nproc`` > 1, each measured model's data-parallel run."""
        for name in self.cfg.model_names if self.cfg.distributed.enabled else ():
            state = replace(state, in_progress=name)
            yield state
            section = state.report.models[name]
            if section.status == "ok":
                folder = self.writer.path.parent / "distributed" / name
                scaled = measure_distributed(name, section, self.cfg, self.device, folder)
                state = replace(state, report=_with_model(state.report, name, scaled))
                yield state

    def _what_ifs(self, state: RunState) -> Iterator[RunState]:
        """The what-if variants of the models a faster variant could change the answer for."""
        if not what_if_enabled(self.cfg, self.device):
            return
        first = self._recommend(state).report.recommendation
        assert first is not None
        first_answer = first.decision
        chosen = what_if_models(self.cfg, state.report.models, first_answer)
        if not chosen:
            console.notice(
                f"what-ifs skipped: the answer is {first_answer}, which a faster variant cannot change "
                "(decision.what_if=true measures them anyway)."
            )
        for measured in chosen:
            what_ifs = run_what_ifs(measured, state.models, state.report.models[measured])
            state = replace(state, report=replace(state.report, what_ifs={**state.report.what_ifs, measured: what_ifs}))
            yield state

    def _recommend(self, state: RunState) -> RunState:
        """The state with the decision rule's recommendation from the models in the report."""
        recommendation = build_recommendation(state.report, self.cfg.decision, load_catalog())
        return replace(state, report=replace(state.report, recommendation=recommendation))

    def _complete(self, state: RunState) -> RunState:
        """The finished run: the recommendation, status complete."""
        state = self._recommend(state)
        recommendation = state.report.recommendation
        assert recommendation is not None
        logger.info("recommendation: %s (%s)", recommendation.decision or "no decision", recommendation.reasoning)
        history = state.models.history
        history_record = None if history is None else history.record_run(state.report)
        return replace(state, report=replace(state.report, status="complete"), history_record=history_record)

    def _failed(self, state: RunState, exc: Exception) -> None:
        """Write the report of a run an error ended, keeping the models measured before it."""
        reason = str(exc) if isinstance(exc, GpubenchError) else f"{type(exc).__name__}: {exc}"
        self._save(replace(state, report=replace(state.report, status="failed", error=redact(reason))))
        if self._latest.report.models:
            console.print_summary(self._latest.report, str(self.writer.path))

    def _interrupted(self, state: RunState, exc: KeyboardInterrupt) -> None:
        """Write the report of an interrupted run with a partial recommendation, and show its summary."""
        name = state.in_progress
        if isinstance(exc, ModelInterrupted) and exc.model is not None:
            name = exc.model
        logger.info("interrupted during %s", name or "the recommendation")
        report = replace(state.report, status="interrupted")
        if name is not None and (name not in report.models or isinstance(exc, ModelInterrupted)):
            report = _with_model(report, name, _interrupted_result(exc))
        state = replace(state, report=report)
        # Before the recommendation, so that a second interrupt cannot lose the model.
        self._save(state)
        try:
            if state.report.models:
                state = self._recommend(state)
                self._save(state)
            console.print_summary(state.report, str(self.writer.path))
        except Exception as summary_error:  # the interrupt must go on, and the models are on disk already
            console.notice(f"no partial recommendation ({type(summary_error).__name__}: {summary_error}).")

    def _save(self, state: RunState) -> None:
        """Hold ``state`` as the run's latest and write its report unless that report is on disk already."""
        self._latest = state
        if state.report is not self._written:
            self._write(state.report)

    def _write(self, report: RunReport) -> None:
        """Write the report and its HTML page without plots, so that a killed job still leaves a page."""
        self._written = report
        self.writer.write(report)
        _write_page(report, self.writer.path, self.config_path)

    def _run_info(self) -> RunInfo:
        cfg = self.cfg
        return RunInfo(
            device=str(self.device),
            models=cfg.model_names,
            epochs=cfg.epochs,
            warmup_epochs=cfg.warmup_epochs,
            precision=cfg.execution.precision,
            compile=cfg.execution.compile,
            matmul_precision=cfg.execution.matmul_precision,
            seed=cfg.seed,
            hardware_config=asdict(cfg.hardware),
            overrides=list(self.context.overrides),
            choices=self.context.choices,
            output_dir=str(self.context.run_dir),
            sweep_dir=self.context.sweep_dir,
            job_num=self.context.job_num,
            mlflow_run_id=self.context.mlflow_run_id,
            versions={
                "gpubench": __version__,
                "torch": torch.__version__,
                "torch_cuda": torch.version.cuda,
                "python": platform.python_version(),
            },
            git_commit=_git_commit(),
            host=self.host,
        )


def _with_model(report: RunReport, name: str, result: ModelResult) -> RunReport:
    return replace(report, models={**report.models, name: result})


def _interrupted_result(exc: KeyboardInterrupt) -> ModelResult:
    """The section of the model an interrupt stopped."""
    if isinstance(exc, ModelInterrupted):
        return exc.run.result
    return ModelResult(
        status="interrupted",
        error="interrupted before its measured epochs began (during the batch search, the build or the epoch sizing)",
    )


def _page_plots(report: RunReport, timelines: dict[str, MemoryTimeline] | None = None) -> tuple[list[PagePlot], str]:
    """The report's page plots, and a note saying why drawing them failed (empty if it did not)."""
    try:
        return draw_page_plots(report, timelines), ""
    except Exception as exc:  # the plots illustrate the report; failing to draw one must not lose the page
        return [], f"The plots could not be drawn ({type(exc).__name__}: {exc})."


def _write_page(
    report: RunReport, report_path: Path, config_path: Path, plots: list[PagePlot] | None = None, plots_note: str = ""
) -> Path | None:
    """Write the report's HTML page beside it; None, with a notice, when it cannot be written."""
    try:
        return write_page(report, report_path, plots=plots, plots_note=plots_note or None, config_path=config_path)
    except Exception as exc:
        console.notice(f"the HTML page could not be written ({type(exc).__name__}: {exc}); report.json is complete.")
        return None


def _tracking_record(
    report: RunReport | None,
    cfg: BenchmarkConfig,
    sweep: tracking.SweepJob | None,
    name: str,
    artifacts: list[Path],
    history_record: dict[str, Any] | None = None,
) -> tracking.RunRecord:
    """The MLflow record of the job's report (or of no report, named ``name``) and of the record it appended to the
    machine's history."""
    if report is None:
        return tracking.RunRecord(run_name=name, artifacts=artifacts)
    record = tracking.run_record(report, sweep=sweep, data_config=cfg.data)
    return replace(record, artifacts=artifacts, history_record=history_record)


def _end_run_early(
    live: tracking.LiveRun,
    cfg: BenchmarkConfig,
    sweep: tracking.SweepJob | None,
    name: str,
    status: str,
    config_path: Path,
) -> None:
    """End the MLflow run of a job that raised or was interrupted, with its partial report and config."""
    files = [config_path]
    report_path = Path(cfg.output).expanduser()
    try:
        report = read_report(report_path)
    except ReportReadError:
        report = None
    if report is not None:
        plots, note = _page_plots(report)
        page = _write_page(report, report_path, config_path, plots, note)
        files = files if page is None else [page, *files]
    outcome = live.finish(_tracking_record(report, cfg, sweep, name, [report_path, *files]), status)
    if outcome.warning:
        console.notice(outcome.warning)


def _sampled_gpus(cfg: BenchmarkConfig, device: torch.device) -> list[int] | None:
    """The NVML indices of the job's GPUs; None (every GPU) when NVML cannot match a device."""
    if device.type != "cuda":
        return []
    torch_indices = range(cfg.distributed.nproc) if cfg.distributed.enabled else [device.index or 0]
    indices = [nvml_index_for(index) for index in torch_indices]
    return None if None in indices else [index for index in indices if index is not None]


def run(cfg: BenchmarkConfig, context: RunContext, inputs: CheckedInputs | None = None) -> int:
    """Run the job, write the report and the MLflow run, print the summary; return the process exit code.

    The MLflow run starts RUNNING and ends FINISHED, FAILED (a model or the job failed) or KILLED (interrupted).
    """
    install_log_redaction()
    # Bad input stops the job here, before its MLflow run and its files exist.
    inputs = check_inputs(cfg) if inputs is None else inputs
    config_tree = OmegaConf.to_container(OmegaConf.structured(cfg), resolve=True)
    resolved_path = context.run_dir / RESOLVED_CONFIG_NAME
    resolved_path.parent.mkdir(parents=True, exist_ok=True)
    resolved_path.write_text(redact(OmegaConf.to_yaml(config_tree)))
    sweep = None
    if context.multirun and context.sweep_dir is not None:
        sweep = sweep_job(context.sweep_dir, context.job_num, context.overrides, cfg.tracking)
    run_name = tracking.starting_run_name(cfg.model_names, context.choices, sweep)
    live = tracking.LiveRun.start(
        cfg.tracking,
        run_name=run_name,
        params=tracking.job_params(config_tree, context.choices),
        tags=tracking.job_tags(cfg.model_names, __version__, sweep=sweep, paths=tracking.path_tags(config_tree)),
    )
    for message in live.new_messages():
        console.notice(message)
    try:
        job = replace(context, mlflow_run_id=live.run_id)
        runner = Runner(cfg, job, epoch_observer=live.on_epoch, model_observer=live.end_model, inputs=inputs)
        if live.active and cfg.tracking.system_metrics:
            live.watch_system(_sampled_gpus(cfg, runner.device))
            for message in live.new_messages():
                console.notice(message)
        completed = runner.run()
    # Whatever ends the job early, the MLflow run must not stay RUNNING.
    except BaseException as exc:
        status = tracking.KILLED if isinstance(exc, KeyboardInterrupt | SystemExit) else tracking.FAILED
        _end_run_early(live, cfg, sweep, run_name, status, resolved_path)
        raise
    report = completed.report
    artifacts = [runner.writer.path, resolved_path]
    try:
        artifacts += save_report_plots(report, runner.writer.path.parent, completed.memory_timelines)
    except Exception as exc:  # plots illustrate the report; failing to draw one must not lose the run
        console.notice(f"plots could not be drawn ({type(exc).__name__}: {exc}); the report is complete.")
    plots, plots_note = _page_plots(report, completed.memory_timelines)
    page = _write_page(report, runner.writer.path, resolved_path, plots, plots_note)
    if page is not None:
        artifacts.insert(1, page)
    model_failed = any(
        model.status == "failed" or (model.distributed is not None and model.distributed.status == "failed")
        for model in report.models.values()
    )
    record = _tracking_record(report, cfg, sweep, run_name, artifacts, completed.history_record)
    outcome = live.finish(record, tracking.FAILED if model_failed else tracking.FINISHED)
    if outcome.warning:
        console.notice(outcome.warning)
    if outcome.run_id:
        report = replace(report, run=replace(report.run, mlflow_run_id=outcome.run_id))
        runner.writer.write(report)
        _write_page(report, runner.writer.path, resolved_path, plots, plots_note)
    console.print_summary(report, str(runner.writer.path))
    return 1 if model_failed else 0
