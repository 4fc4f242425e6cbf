"""MLflow tracking: the only module that imports mlflow, and only when a run is logged or read.

One MLflow run per job (:func:`run_record` builds it from the report): the flattened config as params, tags for
the models, device, versions, git commit and sweep, per-epoch series (time, loss, memory) and summary metrics sent
in batches (one ``log_batch`` per chunk of at most 1000 entities rather than a call per value: on SQLite 1000
single calls cost seconds, one batch a tenth of a second), and the report and resolved config as artifacts.
:func:`load_run_report` reads a logged run's report back, for ``gpubench.compare``.

Tracking never costs a measurement: any failure while logging (unreachable store, bad URI, locked database)
becomes a warning returned to the caller, and the JSON report is written regardless.
"""

import logging
import math
import tempfile
import time
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from gpubench.errors import GpubenchError
from gpubench.output.config import TrackingConfig
from gpubench.output.report_file import REPORT_FILE_NAME, ReportReadError, read_report
from gpubench.results import RunReport

#: MLflow's per-request limits: entities in one log_batch, and params/tags among them.
_MAX_ENTITIES_PER_BATCH = 1000
_MAX_PARAMS_PER_BATCH = 100
#: MLflow rejects longer param values.
_MAX_PARAM_CHARS = 6000
_SQLITE_PREFIX = "sqlite:///"

T = TypeVar("T")


@dataclass
class RunRecord:
    """Everything one job logs.

    Attributes:
        run_name: shown in the MLflow UI.
        params: flattened config, dotted keys -> values (stringified).
        tags: run tags (models, device, versions, git commit, sweep id).
        metrics: summary metrics, key -> value (NaN/None dropped).
        series: per-epoch metrics, key -> values in epoch order (logged with step = epoch index from 0).
        artifacts: files to attach (the report, the resolved config).
    """

    run_name: str
    params: dict[str, Any] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    metrics: dict[str, float | None] = field(default_factory=dict)
    series: dict[str, Sequence[float | None]] = field(default_factory=dict)
    artifacts: list[Path] = field(default_factory=list)


class TrackingError(GpubenchError):
    """A tracking store cannot give what was asked of it: the store, the run, or the run's report."""


@dataclass(frozen=True)
class TrackingOutcome:
    """The run id when logging succeeded, else a warning that says what failed."""

    run_id: str | None
    warning: str | None = None


def flatten(tree: Any, prefix: str = "") -> dict[str, Any]:
    """Dotted-key view of nested dicts/lists: ``{"a": {"b": 1}}`` -> ``{"a.b": 1}``; lists stay whole values."""
    if not isinstance(tree, dict):
        return {prefix: tree}
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        dotted = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, dict):
            flat.update(flatten(value, dotted))
        else:
            flat[dotted] = value
    return flat


def run_record(
    report: RunReport, params: dict[str, Any], *, run_name: str, sweep_dir: str | None, job_num: int | None
) -> RunRecord:
    """The MLflow view of a finished job: ``params`` (the flattened config) as given, tags, summary metrics and
    per-epoch series from ``report``; ``sweep_dir`` and ``job_num`` tag a job of a sweep (None for a single run).

    Metrics per model (``<model>/...``): ``status_ok`` (1 or 0), the mean epoch time, p95, p99 and the t
    interval's ends (ms), the CV, the decision interval's ends (ms), ``samples_per_second`` (the mean),
    ``memory_usage_mb`` and ``batch_size``. Series per model, one value per measured epoch: ``epoch_time_ms``,
    ``epoch_loss`` and, where measured, ``epoch_peak_reserved_mb``. The artifacts are the caller's to add.
    """
    run = report.run
    tags = {
        "gpubench.models": ",".join(run.models),
        "gpubench.device": report.hardware.device_name or run.device,
        "gpubench.version": report.benchmark_version,
        "gpubench.status": report.status,
    }
    if run.torch_version is not None:
        tags["torch.version"] = run.torch_version
    if run.python_version is not None:
        tags["python.version"] = run.python_version
    if run.git_commit:
        tags["mlflow.source.git.commit"] = run.git_commit
    if sweep_dir:
        tags["gpubench.sweep"] = sweep_dir
        tags["gpubench.job_num"] = str(job_num)
    metrics: dict[str, float | None] = {}
    series: dict[str, Sequence[float | None]] = {}
    for name, result in report.models.items():
        stats = result.statistics
        throughput = result.samples_per_second
        metrics[f"{name}/status_ok"] = 1.0 if result.status == "ok" else 0.0
        metrics[f"{name}/mean_epoch_time_ms"] = result.mean_epoch_time_ms
        metrics[f"{name}/p95_latency_ms"] = result.p95_latency_ms
        metrics[f"{name}/p99_latency_ms"] = result.p99_latency_ms
        metrics[f"{name}/coefficient_of_variation"] = result.coefficient_of_variation
        if stats is not None:
            metrics[f"{name}/ci_low_ms"], metrics[f"{name}/ci_high_ms"] = stats.confidence_interval_ms
            metrics[f"{name}/decision_ci_low_ms"], metrics[f"{name}/decision_ci_high_ms"] = stats.decision_interval_ms
        if throughput is not None:
            metrics[f"{name}/samples_per_second"] = throughput.mean
        metrics[f"{name}/memory_usage_mb"] = result.memory_usage_mb
        metrics[f"{name}/batch_size"] = result.batch_size
        series[f"{name}/epoch_time_ms"] = result.raw_epoch_times_ms
        series[f"{name}/epoch_loss"] = result.epoch_losses
        if result.memory is not None and result.memory.peak_reserved_mb_per_epoch:
            series[f"{name}/epoch_peak_reserved_mb"] = result.memory.peak_reserved_mb_per_epoch
    return RunRecord(run_name=run_name, params=params, tags=tags, metrics=metrics, series=series)


def _chunks(items: Sequence[T], size: int) -> Iterator[Sequence[T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _is_finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)


def log_run(config: TrackingConfig, record: RunRecord) -> TrackingOutcome:
    """Log ``record`` as one MLflow run; never raises for tracking failures (returns a warning instead)."""
    if not config.enabled:
        return TrackingOutcome(run_id=None)
    try:
        return TrackingOutcome(run_id=_log_run(config, record))
    # Any tracking failure must leave the benchmark's results intact.
    except Exception as exc:
        reason = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
        return TrackingOutcome(
            run_id=None,
            warning=(
                f"MLflow tracking at {config.uri!r} failed ({reason}); the JSON report was still written. "
                "Fix tracking.uri or run with tracking.enabled=false."
            ),
        )


def _experiment_id(client: Any, config: TrackingConfig) -> str:
    experiment = client.get_experiment_by_name(config.experiment)
    if experiment is not None:
        return experiment.experiment_id
    artifact_uri = Path(config.artifact_location).expanduser().resolve().as_uri()
    return client.create_experiment(config.experiment, artifact_location=artifact_uri)


def _log_run(config: TrackingConfig, record: RunRecord) -> str:
    from mlflow.entities import Metric, Param, RunTag
    from mlflow.tracking import MlflowClient

    quiet_store_logs()
    # A client bound to the URI, not mlflow.set_tracking_uri: that also sets MLFLOW_TRACKING_URI in os.environ,
    # which every later job and child process would inherit as its default store.
    client = MlflowClient(tracking_uri=config.uri)
    experiment_id = _experiment_id(client, config)
    run = client.create_run(experiment_id, run_name=record.run_name, tags=record.tags)
    run_id = run.info.run_id
    try:
        now_ms = int(time.time() * 1000)
        params = [Param(key, str(value)[:_MAX_PARAM_CHARS]) for key, value in record.params.items()]
        metrics = [Metric(key, float(value), now_ms, 0) for key, value in record.metrics.items() if _is_finite(value)]
        for key, values in record.series.items():
            # A non-finite value is skipped; the others keep their epoch index as the step.
            metrics += [
                Metric(key, float(value), now_ms, step) for step, value in enumerate(values) if _is_finite(value)
            ]
        for chunk in _chunks(params, _MAX_PARAMS_PER_BATCH):
            client.log_batch(run_id, params=list(chunk), synchronous=True)
        for chunk in _chunks(metrics, _MAX_ENTITIES_PER_BATCH):
            client.log_batch(run_id, metrics=list(chunk), synchronous=True)
        for path in record.artifacts:
            if path.exists():
                client.log_artifact(run_id, str(path))
        client.log_batch(run_id, tags=[RunTag("gpubench.complete", "true")], synchronous=True)
    except BaseException:
        client.set_terminated(run_id, status="FAILED")
        raise
    client.set_terminated(run_id, status="FINISHED")
    return run_id


def log_sweep_run(config: TrackingConfig, record: RunRecord, child_run_ids: Sequence[str]) -> TrackingOutcome:
    """Log a sweep's parent run (``record``) and nest the sweep's job runs under it; never raises for tracking
    failures (returns a warning instead).

    The jobs log their runs before the sweep ends, so none can name its parent when it is created: afterwards each
    child in ``child_run_ids`` that is in this store, in the parent's experiment and tagged with the same
    ``gpubench.output.sweep`` as ``record`` gets the tag ``mlflow.parentRunId`` (what the MLflow UI nests runs by).
    Children not linked are named in the warning.
    """
    if not config.enabled:
        return TrackingOutcome(run_id=None)
    try:
        parent_run_id = _log_run(config, record)
        unlinked = _link_children(config, parent_run_id, record.tags.get("gpubench.sweep"), child_run_ids)
    # Any tracking failure must leave the sweep summary files intact.
    except Exception as exc:
        reason = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
        return TrackingOutcome(
            run_id=None,
            warning=f"MLflow sweep run at {config.uri!r} failed ({reason}); the summary files were written.",
        )
    warning = None
    if unlinked:
        warning = (
            f"{len(unlinked)} job run(s) of the sweep were not found in {config.uri!r} (experiment "
            f"{config.experiment!r}) and are not nested under its parent run: {', '.join(unlinked)}"
        )
    return TrackingOutcome(run_id=parent_run_id, warning=warning)


def _link_children(
    config: TrackingConfig, parent_run_id: str, sweep_tag: str | None, child_run_ids: Sequence[str]
) -> list[str]:
    """Tag each child run with ``mlflow.parentRunId``; return the ids that were not linked."""
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=config.uri)
    experiment_id = client.get_run(parent_run_id).info.experiment_id
    unlinked = []
    for run_id in child_run_ids:
        try:
            child = client.get_run(run_id)
        except MlflowException:
            unlinked.append(run_id)
            continue
        if child.info.experiment_id != experiment_id or child.data.tags.get("gpubench.sweep") != sweep_tag:
            unlinked.append(run_id)
            continue
        client.set_tag(run_id, "mlflow.parentRunId", parent_run_id)
    return unlinked


def prepare_store(config: TrackingConfig) -> str | None:
    """Create the tracking store and the experiment now; return a warning when that fails (None when it worked or
    tracking is disabled).

    MLflow creates and migrates a new SQLite store on first use. Jobs of a parallel sweep (joblib launcher) that
    do so at the same moment collide ("Online migration expected to match one row ... 0 found") and one of them
    loses its run, so a sweep prepares the store once before its jobs start.
    """
    if not config.enabled:
        return None
    try:
        from mlflow.tracking import MlflowClient

        quiet_store_logs()
        _experiment_id(MlflowClient(tracking_uri=config.uri), config)
    # Any tracking failure must leave the benchmark's results intact; the jobs report their own tracking failures.
    except Exception as exc:
        reason = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
        return f"MLflow store at {config.uri!r} could not be prepared before the sweep ({reason})."
    return None


def quiet_store_logs() -> None:
    """Silence MLflow's SQLite schema set-up and migrations, logged at INFO, and SQLAlchemy's warnings about
    MLflow's own deprecated loader options: neither is the user's concern."""
    for logger_name in ("alembic", "mlflow.store.db.utils"):
        logging.getLogger(logger_name).setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", module=r"mlflow\.store\..*")


def _check_store_exists(tracking_uri: str) -> None:
    # Opening a SQLite URI whose file is missing would silently create an empty store: refuse instead.
    if tracking_uri.startswith(_SQLITE_PREFIX):
        database = Path(tracking_uri[len(_SQLITE_PREFIX) :])
        if not database.is_file():
            raise TrackingError(
                f"the MLflow tracking store {tracking_uri} does not exist (no file {database.resolve()}); run from "
                "the folder that holds mlruns/, or pass --tracking-uri"
            )


def load_run_report(run_id: str, tracking_uri: str) -> RunReport:
    """The report.json artifact of the MLflow run ``run_id`` in the store at ``tracking_uri``.

    Raises :class:`TrackingError` when the store does not exist (a SQLite file is not created by reading), the
    run is not in it, it has no report.json, or that file is not a gpubench report.
    """
    _check_store_exists(tracking_uri)
    quiet_store_logs()
    from mlflow.artifacts import download_artifacts
    from mlflow.tracking import MlflowClient

    try:
        MlflowClient(tracking_uri=tracking_uri).get_run(run_id)
    # Any store failure (unknown run, unreachable server, bad URI) is the user's environment, not a bug here.
    except Exception as exc:
        reason = str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__
        raise TrackingError(f"no MLflow run {run_id} in the tracking store {tracking_uri} ({reason})") from exc
    with tempfile.TemporaryDirectory() as folder:
        try:
            path = download_artifacts(
                run_id=run_id, artifact_path=REPORT_FILE_NAME, dst_path=folder, tracking_uri=tracking_uri
            )
        except Exception as exc:
            raise TrackingError(
                f"MLflow run {run_id} has no {REPORT_FILE_NAME} artifact that can be downloaded"
            ) from exc
        try:
            return read_report(Path(path))
        except ReportReadError as exc:
            raise TrackingError(f"MLflow run {run_id}'s {REPORT_FILE_NAME} {exc.reason}") from exc
