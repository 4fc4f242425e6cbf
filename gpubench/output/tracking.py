"""MLflow tracking: the only module that imports mlflow, and only when a run is logged or read.

One MLflow run per job, live (:class:`LiveRun`): created with status RUNNING when the job starts, the flattened
config as its params; each measured epoch's time and loss are buffered as the epoch completes and sent in one
``log_batch`` per model, or every :data:`FLUSH_INTERVAL_S` seconds during a long model (never a call per value: on
SQLite 1000 single calls cost seconds, one batch a tenth of a second); when the job ends, :func:`run_record`
(built from the report) adds the tags (``gpubench.decision`` among them), the summary and recommendation metrics,
the series not streamed and the artifacts, and the run is ended FINISHED, FAILED (a model failed, or the job
raised) or KILLED (interrupted). :func:`log_run` logs a finished record in one go (the sweep's parent run).
:func:`load_run_report` reads a logged run's report back, for ``gpubench.compare``.

Tracking never costs a measurement: any failure while logging (unreachable server, bad URI, damaged or locked
store) becomes one warning, logging stops for the rest of the job (a dead server would otherwise cost its timeout
on every batch), and the JSON report is written regardless.

* **Concurrent jobs on one SQLite store.** MLflow creates and migrates a new SQLite store on first use, and two
  processes doing so at once break it (one loses its run, or leftover ``_alembic_tmp_*`` tables stop every later
  run). Every access to a SQLite store therefore holds an exclusive ``flock`` on ``<database>.lock`` beside the
  database file (:mod:`gpubench.output.sqlite_store`): the first process creates the store, the others wait and then
  find it ready; SQLite takes one writer at a time anyway. A store found half-created (leftover ``_alembic_tmp_*``
  tables) that holds no runs is moved aside and created anew; one that holds runs is reported with the tables and
  the fix.
* **Unreachable servers.** MLflow retries an HTTP request 7 times with exponential backoff (about 4 minutes on a
  closed port). Unless the user set them, :func:`bound_http_retries` sets MLflow's own environment variables for
  this process: :data:`HTTP_RETRY_DEFAULTS` (2 retries, backoff factor 1 s, 5 s timeout), so a refused connection fails
  in seconds.
* **Credentials.** The configured URI is used as given (MLflow needs its credentials); every param, tag and warning
  passes through :func:`gpubench.redact.redact` first. MLflow's own "View run ... at: <URI>" lines, printed as a
  run on a server ends, would carry the URI's credentials: they are switched off, and gpubench shows its own link
  (:func:`run_link`), without them.
* **Artifacts.** With a local store (SQLite, file) the experiment's artifacts go to ``tracking.artifact_location``;
  with a tracking server the server's artifact store holds them (no ``file:`` path of the submitting machine).
"""

import logging
import math
import os
import tempfile
import textwrap
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

from gpubench.output import console
from gpubench.output.config import TrackingConfig
from gpubench.output.report_file import REPORT_FILE_NAME, ReportReadError, read_report
from gpubench.output.sqlite_store import (
    SQLITE_PREFIX,
    SqliteStoreState,
    TrackingError,
    read_sqlite_state,
    repair_sqlite_store,
    sqlite_database,
    store_lock,
)
from gpubench.redact import redact
from gpubench.results import RunReport
from gpubench.units import MS_PER_S

#: MLflow's per-request limits: entities in one log_batch, and params/tags among them.
_MAX_ENTITIES_PER_BATCH = 1000
_MAX_PARAMS_PER_BATCH = 100
#: MLflow rejects longer param values.
_MAX_PARAM_CHARS = 6000
#: A failure's reason in a warning is shortened (at a word) to this many characters.
_MAX_REASON_CHARS = 400
#: URI schemes of tracking servers, whose own artifact store holds a run's files.
_SERVER_SCHEMES = ("http", "https", "databricks")
#: Streamed epochs are sent at the latest this many seconds after the previous batch (and at each model's end).
FLUSH_INTERVAL_S = 10.0
#: MLflow's HTTP retry settings (its environment variables) for this process, where the user has not set them.
HTTP_RETRY_DEFAULTS = {
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
    "MLFLOW_HTTP_REQUEST_BACKOFF_JITTER": "0.5",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "5",
}
#: MLflow's switch for the "View run ... at: <tracking URI>/#/..." lines it prints when a run on a server ends.
_SUPPRESS_URL_PRINTING = "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT"
#: MLflow's run statuses, as a job ends: every model measured, a model failed (or the job raised), interrupted.
FINISHED, FAILED, KILLED = "FINISHED", "FAILED", "KILLED"

T = TypeVar("T")


@dataclass
class RunRecord:
    """Everything one job logs.

    Attributes:
        run_name: shown in the MLflow UI.
        params: flattened config, dotted keys -> values (stringified).
        tags: run tags (models, device, versions, git commit, sweep id, the decision).
        metrics: summary metrics, key -> value (NaN/None dropped).
        series: per-epoch metrics, key -> values in epoch order (logged with step = epoch index from 0).
        artifacts: files to attach (the report, the resolved config).
        tables: table artifacts, file name -> columns (name -> values, one per row), shown as tables in the UI.
    """

    run_name: str
    params: dict[str, Any] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    metrics: dict[str, float | None] = field(default_factory=dict)
    series: dict[str, Sequence[float | None]] = field(default_factory=dict)
    artifacts: list[Path] = field(default_factory=list)
    tables: dict[str, dict[str, list[Any]]] = field(default_factory=dict)


#: The cost table's artifact and the row fields it shows, in order.
COST_TABLE_ARTIFACT = "cost_table.json"
COST_TABLE_FIELDS: tuple[str, ...] = (
    *("gpu", "provider", "spot", "gpu_count", "fits_in_vram", "hours", "hours_lower", "hours_upper", "usd"),
    *("usd_lower", "usd_upper", "price_usd_per_hour", "price_date", "instance", "checkpoint_interval_hours", "note"),
)


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


def job_tags(models: Sequence[str], version: str, *, sweep_dir: str | None, job_num: int | None) -> dict[str, str]:
    """The tags a job's run carries from its start: the models, gpubench's version, status ``running``, and for a
    job of a sweep the sweep folder and job number."""
    tags = {"gpubench.models": ",".join(models), "gpubench.version": version, "gpubench.status": "running"}
    if sweep_dir:
        tags["gpubench.sweep"] = sweep_dir
        tags["gpubench.job_num"] = str(job_num)
    return tags


def run_record(
    report: RunReport, params: dict[str, Any], *, run_name: str, sweep_dir: str | None, job_num: int | None
) -> RunRecord:
    """The MLflow view of a job's report (complete, or partial after an interrupt): ``params`` (the flattened
    config) as given, tags, summary metrics and per-epoch series from ``report``; ``sweep_dir`` and ``job_num`` tag
    a job of a sweep (None for a single run).

    Metrics per model (``<model>/...``): ``status_ok`` (1 or 0), the mean epoch time, p95, p99 and the t
    interval's ends (ms), the CV, the decision interval's ends (ms), ``samples_per_second`` (the mean),
    ``memory_usage_mb`` and ``batch_size``; after a data-parallel run (``distributed.nproc`` > 1) also
    ``world_size``, ``distributed_status_ok``, ``global_samples_per_second``, ``scaling_efficiency`` and its
    interval's ends (``scaling_efficiency_low`` / ``_high``). Series per model, one value per measured epoch:
    ``epoch_time_ms``, ``epoch_loss`` and, where measured, ``epoch_peak_reserved_mb``. With a recommendation: the tags
    ``gpubench.decision`` (``none`` when withheld) and ``gpubench.decision_basis``, and the metrics
    ``recommendation/estimated_hours`` with its ``_lower`` and ``_upper`` bounds (h), ``cloud_training_hours`` and
    the cost figures (``cloud_cost_usd_per_training``, ``local_energy_cost_usd_per_training``,
    ``annual_savings_usd``), the cloud figures for ``decision.cloud_gpus`` cards (a param), and the cheapest
    catalog option on as many cards (``cheapest_cloud_hours``, ``cheapest_cloud_cost_usd_per_training``). With a
    cost table: the table artifact :data:`COST_TABLE_ARTIFACT` (every row, :data:`COST_TABLE_FIELDS`) and the
    metric ``recommendation/cheapest_rental_usd`` (the cheapest row that fits). The file artifacts are the caller's
    to add.
    """
    run = report.run
    tags = job_tags(run.models, report.benchmark_version, sweep_dir=sweep_dir, job_num=job_num)
    tags["gpubench.device"] = report.hardware.device_name or run.device
    tags["gpubench.status"] = report.status
    optional = {
        "gpubench.preset": run.preset,
        "gpubench.preset_note": run.preset_note,
        # MLflow shows this tag as the run's description: a smoke test's run page says so.
        "mlflow.note.content": run.preset_note,
        "torch.version": run.torch_version,
        "python.version": run.python_version,
        "mlflow.source.git.commit": run.git_commit or None,
    }
    tags.update({key: value for key, value in optional.items() if value is not None})
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
        scaling = result.distributed
        if scaling is not None:
            metrics[f"{name}/world_size"] = float(scaling.world_size)
            metrics[f"{name}/distributed_status_ok"] = 1.0 if scaling.status == "ok" else 0.0
            metrics[f"{name}/global_samples_per_second"] = scaling.global_samples_per_second
            metrics[f"{name}/scaling_efficiency"] = scaling.scaling_efficiency
            if scaling.scaling_efficiency_interval is not None:
                low, high = scaling.scaling_efficiency_interval
                metrics[f"{name}/scaling_efficiency_low"], metrics[f"{name}/scaling_efficiency_high"] = low, high
        series[f"{name}/epoch_time_ms"] = result.raw_epoch_times_ms
        series[f"{name}/epoch_loss"] = result.epoch_losses
        if result.memory is not None and result.memory.peak_reserved_mb_per_epoch:
            series[f"{name}/epoch_peak_reserved_mb"] = result.memory.peak_reserved_mb_per_epoch
    recommendation = report.recommendation
    if recommendation is not None:
        tags["gpubench.decision"] = recommendation.decision or "none"
        if recommendation.decision_basis:
            tags["gpubench.decision_basis"] = recommendation.decision_basis
        metrics["recommendation/estimated_hours"] = recommendation.estimated_full_training_hours
        metrics["recommendation/estimated_hours_lower"] = recommendation.estimated_full_training_hours_lower
        metrics["recommendation/estimated_hours_upper"] = recommendation.estimated_full_training_hours_upper
        cost = recommendation.cost_analysis
        if cost is not None:
            metrics["recommendation/cloud_training_hours"] = cost.cloud_training_hours
            metrics["recommendation/cloud_cost_usd_per_training"] = cost.cloud_cost_usd_per_training
            metrics["recommendation/local_energy_cost_usd_per_training"] = cost.local_energy_cost_usd_per_training
            metrics["recommendation/annual_savings_usd"] = cost.annual_savings_usd
            metrics["recommendation/cheapest_cloud_hours"] = cost.cheapest_card_training_hours
            metrics["recommendation/cheapest_cloud_cost_usd_per_training"] = cost.cheapest_card_cost_usd_per_training
    tables: dict[str, dict[str, list[Any]]] = {}
    if recommendation is not None and recommendation.cost_table:
        rows = recommendation.cost_table
        tables[COST_TABLE_ARTIFACT] = {name: [getattr(row, name) for row in rows] for name in COST_TABLE_FIELDS}
        fitting = [row.usd for row in rows if row.usd is not None and row.fits_in_vram is not False]
        metrics["recommendation/cheapest_rental_usd"] = fitting[0] if fitting else None
    return RunRecord(run_name=run_name, params=params, tags=tags, metrics=metrics, series=series, tables=tables)


def _chunks(items: Sequence[T], size: int) -> Iterator[Sequence[T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _is_finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)


# --------------------------------------------------------------------------------------------------- the store


def bound_http_retries() -> None:
    """Set :data:`HTTP_RETRY_DEFAULTS` in this process's environment, each only where the user has not set it.

    MLflow reads these variables at every request, so they apply from the next request on; child processes started
    later (a sweep's workers) inherit them, which is what they need too.
    """
    for name, value in HTTP_RETRY_DEFAULTS.items():
        os.environ.setdefault(name, value)


def _damaged_store_error(database: Path, state: SqliteStoreState, exc: Exception) -> TrackingError:
    return TrackingError(
        f"the MLflow store {database} holds {state.run_count} run(s) but an interrupted schema migration left the "
        f"tables {', '.join(state.leftover_tables)} at revision {state.revision} ({_reason(exc)}); back the file up, "
        f"drop those tables (sqlite3 {database} 'DROP TABLE <name>') and run 'mlflow db upgrade sqlite:///{database}'"
    )


def run_link(uri: str, experiment_id: str, run_id: str) -> str | None:
    """The MLflow UI's page of the run on the tracking server at ``uri`` (None for a local store), without the URI's
    user info and query string, where credentials travel."""
    parts = urlsplit(uri)
    if parts.scheme not in ("http", "https"):
        return None
    host = parts.netloc.rpartition("@")[2]
    return redact(f"{parts.scheme}://{host}{parts.path.rstrip('/')}/#/experiments/{experiment_id}/runs/{run_id}")


def _artifact_location(config: TrackingConfig) -> str | None:
    """Where a new experiment keeps its artifacts: ``tracking.artifact_location`` for a local store, None (the
    server's artifact store) for a tracking server."""
    if urlsplit(config.uri).scheme in _SERVER_SCHEMES:
        return None
    return Path(config.artifact_location).expanduser().resolve().as_uri()


def _experiment_id(client: Any, config: TrackingConfig) -> str:
    experiment = client.get_experiment_by_name(config.experiment)
    if experiment is not None:
        return experiment.experiment_id
    return client.create_experiment(config.experiment, artifact_location=_artifact_location(config))


def _open_store(config: TrackingConfig) -> tuple[Any, str, str | None]:
    """A client bound to the store, the experiment's id (created if new) and a notice when the store was repaired;
    call it holding :func:`store_lock`."""
    from mlflow.tracking import MlflowClient

    quiet_store_logs()
    bound_http_retries()
    # Forced, not a default: MLflow's lines would print the URI with its credentials (gpubench prints run_link).
    os.environ[_SUPPRESS_URL_PRINTING] = "true"
    database = sqlite_database(config.uri)
    notice = repair_sqlite_store(database) if database is not None else None
    state = read_sqlite_state(database) if database is not None else None
    # A client bound to the URI, not mlflow.set_tracking_uri: that also sets MLFLOW_TRACKING_URI in os.environ,
    # which every later job and child process would inherit as its default store.
    try:
        client = MlflowClient(tracking_uri=config.uri)
        experiment_id = _experiment_id(client, config)
    except Exception as exc:
        if database is not None and state is not None and state.leftover_tables:
            raise _damaged_store_error(database, state, exc) from exc
        raise
    return client, experiment_id, notice


def _reason(exc: BaseException) -> str:
    """Why ``exc`` happened, in one complete phrase: the network error at the root of a failed request (MLflow's
    own message repeats the whole URL and urllib3's retry story), else the exception's message shortened at a
    word."""
    if isinstance(exc, TrackingError):
        return str(exc)
    root: BaseException = exc
    seen = {id(root)}
    while (cause := root.__cause__ or root.__context__) is not None and id(cause) not in seen:
        seen.add(id(cause))
        root = cause
    if root is not exc and isinstance(root, OSError):
        return f"cannot reach it: {type(root).__name__}: {root}"
    text = " ".join(str(exc).split()) or "no message"
    return f"{type(exc).__name__}: {textwrap.shorten(text, _MAX_REASON_CHARS, placeholder=' …')}"


#: What a job's tracking warning says is kept regardless.
REPORT_KEPT = "the JSON report is still written"


def _warning(config: TrackingConfig, action: str, exc: BaseException, kept: str = REPORT_KEPT) -> str:
    return redact(
        f"MLflow tracking at {config.uri!r} failed while {action} ({_reason(exc)}); nothing more is logged to MLflow "
        f"for this job, and {kept}. Fix tracking.uri or run with tracking.enabled=false."
    )


# --------------------------------------------------------------------------------------------------- the run


class LiveRun:
    """One job's MLflow run, open while the job runs (see the module docstring); never raises for tracking failures.

    :meth:`start` creates the run; :meth:`on_epoch` is the measurement loop's per-epoch hook (it buffers, and sends
    a batch when :data:`FLUSH_INTERVAL_S` has passed: between epochs, outside their timed blocks); :meth:`end_model`
    sends a model's remaining epochs when it ends; :meth:`finish` logs the job's record and ends the run. After a
    batch step-down (GPU) the streamed series holds every measured epoch of every attempt in order, the report's
    ``raw_epoch_times_ms`` the final attempt's. The first failure ends logging; :meth:`new_messages` hands out that
    warning (and any store repair notice) once.
    """

    def __init__(
        self,
        config: TrackingConfig,
        *,
        flush_interval_s: float = FLUSH_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
        kept: str = REPORT_KEPT,
    ) -> None:
        self.config = config
        self._kept = kept
        self.run_id: str | None = None
        self._experiment_id: str | None = None
        self.failed = False
        self._client: Any = None
        self._flush_interval_s = flush_interval_s
        self._clock = clock
        self._last_flush = clock()
        self._pending: list[tuple[str, float, int, int]] = []  # key, value, timestamp (ms), step
        self._steps: dict[str, int] = {}
        self._streamed: set[str] = set()
        self._model: str | None = None
        self._messages: list[str] = []
        self._shown = 0

    @classmethod
    def start(
        cls,
        config: TrackingConfig,
        *,
        run_name: str,
        params: dict[str, Any],
        tags: dict[str, str],
        flush_interval_s: float = FLUSH_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
        kept: str = REPORT_KEPT,
    ) -> "LiveRun":
        """Create the run (status RUNNING) with ``params`` and ``tags``, both redacted; a disabled config or a
        failure gives a run that logs nothing (the failure is in :meth:`new_messages`)."""
        live = cls(config, flush_interval_s=flush_interval_s, clock=clock, kept=kept)
        if config.enabled:
            live._guard("creating the run", live._create, run_name, params, tags)
        return live

    @property
    def active(self) -> bool:
        """Whether the run exists and no failure has stopped its logging."""
        return self.run_id is not None and not self.failed

    def new_messages(self) -> list[str]:
        """The warnings and notices not handed out yet (each is handed out once)."""
        messages, self._shown = self._messages[self._shown :], len(self._messages)
        return messages

    def on_epoch(self, model: str, phase: str, number: int, seconds: float, loss: float | None) -> None:
        """Buffer a measured epoch of ``model`` (its time in s, its mean loss) as ``<model>/epoch_time_ms`` and
        ``<model>/epoch_loss`` at the next step of that model; warmup epochs are not streamed."""
        if not self.active or phase != "measured":
            return
        if self._model is not None and model != self._model:
            self.flush()
        self._model = model
        step = self._steps.get(model, 0)
        self._steps[model] = step + 1
        now_ms = int(time.time() * MS_PER_S)
        time_key, loss_key = f"{model}/epoch_time_ms", f"{model}/epoch_loss"
        self._streamed.update((time_key, loss_key))
        self._pending.append((time_key, seconds * MS_PER_S, now_ms, step))
        if _is_finite(loss):
            self._pending.append((loss_key, float(loss), now_ms, step))
        if self._clock() - self._last_flush >= self._flush_interval_s:
            self.flush()

    def end_model(self, model: str) -> None:
        """``model`` has finished: send its buffered epochs now."""
        self.flush()

    def flush(self) -> None:
        """Send the buffered epochs now (one ``log_batch`` per 1000)."""
        pending, self._pending = self._pending, []
        self._last_flush = self._clock()
        if pending and self.active:
            self._guard("streaming epoch metrics", self._send_metrics, pending)

    def finish(self, record: RunRecord, status: str) -> TrackingOutcome:
        """Log ``record``'s tags, metrics, the series not streamed and the artifacts, and end the run with
        ``status`` (:data:`FINISHED`, :data:`FAILED` or :data:`KILLED`); ``record.params`` were logged at the start.
        The outcome's warning joins the messages not handed out yet."""
        if not self.config.enabled:
            return TrackingOutcome(run_id=None)
        self.flush()
        if self.active:
            self._guard("logging the results", self._finish, record, status)
        messages = self.new_messages()
        return TrackingOutcome(run_id=self.run_id, warning=" ".join(messages) if messages else None)

    def _guard(self, action: str, operation: Callable[..., None], *args: Any) -> None:
        try:
            operation(*args)
        # Any tracking failure must leave the benchmark and its report intact.
        except Exception as exc:
            self.failed = True
            self._messages.append(_warning(self.config, action, exc, self._kept))

    def _create(self, run_name: str, params: dict[str, Any], tags: dict[str, str]) -> None:
        from mlflow.entities import Param

        with store_lock(self.config.uri):
            client, experiment_id, notice = _open_store(self.config)
            if notice:
                self._messages.append(notice)
            run = client.create_run(
                experiment_id, run_name=redact(run_name), tags={key: redact(value) for key, value in tags.items()}
            )
            self._client, self.run_id, self._experiment_id = client, run.info.run_id, experiment_id
            entities = [Param(key, redact(str(value))[:_MAX_PARAM_CHARS]) for key, value in params.items()]
            for chunk in _chunks(entities, _MAX_PARAMS_PER_BATCH):
                client.log_batch(self.run_id, params=list(chunk), synchronous=True)

    def _send_metrics(self, entries: Sequence[tuple[str, float, int, int]]) -> None:
        from mlflow.entities import Metric

        metrics = [Metric(key, value, timestamp_ms, step) for key, value, timestamp_ms, step in entries]
        with store_lock(self.config.uri):
            for chunk in _chunks(metrics, _MAX_ENTITIES_PER_BATCH):
                self._client.log_batch(self.run_id, metrics=list(chunk), synchronous=True)

    def _finish(self, record: RunRecord, status: str) -> None:
        from mlflow.entities import RunTag

        now_ms = int(time.time() * MS_PER_S)
        entries = [(key, float(value), now_ms, 0) for key, value in record.metrics.items() if _is_finite(value)]
        for key, values in record.series.items():
            if key in self._streamed:
                continue
            # A non-finite value is skipped; the others keep their epoch index as the step.
            entries += [(key, float(value), now_ms, step) for step, value in enumerate(values) if _is_finite(value)]
        tags = [RunTag(key, redact(str(value))) for key, value in record.tags.items()]
        if entries:
            self._send_metrics(entries)
        with store_lock(self.config.uri):
            for chunk in _chunks(tags, _MAX_PARAMS_PER_BATCH):
                self._client.log_batch(self.run_id, tags=list(chunk), synchronous=True)
            for path in record.artifacts:
                if path.exists():
                    self._client.log_artifact(self.run_id, str(path))
            for name, columns in record.tables.items():
                self._client.log_table(self.run_id, data=columns, artifact_file=name)
            self._client.log_batch(self.run_id, tags=[RunTag("gpubench.complete", "true")], synchronous=True)
            self._client.set_terminated(self.run_id, status=status)
        link = run_link(self.config.uri, str(self._experiment_id), str(self.run_id))
        if link:
            console.notice(f"MLflow run {record.run_name}: {link}")


def log_run(
    config: TrackingConfig, record: RunRecord, *, kept: str = REPORT_KEPT, status: str = FINISHED
) -> TrackingOutcome:
    """Log ``record`` as one MLflow run, created and ended at once with ``status``; never raises for tracking
    failures (returns a warning instead, which says that ``kept`` was kept regardless)."""
    live = LiveRun.start(config, run_name=record.run_name, params=record.params, tags=record.tags, kept=kept)
    return live.finish(record, status)


def log_sweep_run(
    config: TrackingConfig, record: RunRecord, child_run_ids: Sequence[str], *, status: str = FINISHED
) -> TrackingOutcome:
    """Log a sweep's parent run (``record``), ended with ``status``, and nest the sweep's job runs under it; never
    raises for tracking failures (returns a warning instead).

    The jobs log their runs before the sweep ends, so none can name its parent when it is created: afterwards each
    child in ``child_run_ids`` that is in this store, in the parent's experiment and tagged with the same
    ``gpubench.output.sweep`` as ``record`` gets the tag ``mlflow.parentRunId`` (what the MLflow UI nests runs by).
    Children not linked are named in the warning.
    """
    if not config.enabled:
        return TrackingOutcome(run_id=None)
    kept = "the summary files were written"
    outcome = log_run(config, record, kept=kept, status=status)
    if outcome.run_id is None:
        return outcome
    try:
        with store_lock(config.uri):
            unlinked = _link_children(config, outcome.run_id, record.tags.get("gpubench.sweep"), child_run_ids)
    # Any tracking failure must leave the sweep summary files intact.
    except Exception as exc:
        return TrackingOutcome(
            run_id=outcome.run_id,
            warning=_warning(config, "nesting the jobs' runs under the sweep's run", exc, kept),
        )
    warning = outcome.warning
    if unlinked:
        warning = redact(
            f"{len(unlinked)} job run(s) of the sweep were not found in {config.uri!r} (experiment "
            f"{config.experiment!r}) and are not nested under its parent run: {', '.join(unlinked)}"
        )
    return TrackingOutcome(run_id=outcome.run_id, warning=warning)


def _link_children(
    config: TrackingConfig, parent_run_id: str, sweep_tag: str | None, child_run_ids: Sequence[str]
) -> list[str]:
    """Tag each child run with ``mlflow.parentRunId``; return the ids that were not linked."""
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=config.uri)
    experiment_id = client.get_run(parent_run_id).info.experiment_id
    # The runs' tags were stored redacted.
    expected_tag = None if sweep_tag is None else redact(sweep_tag)
    unlinked = []
    for run_id in child_run_ids:
        try:
            child = client.get_run(run_id)
        except MlflowException:
            unlinked.append(run_id)
            continue
        if child.info.experiment_id != experiment_id or child.data.tags.get("gpubench.sweep") != expected_tag:
            unlinked.append(run_id)
            continue
        client.set_tag(run_id, "mlflow.parentRunId", parent_run_id)
    return unlinked


def prepare_store(config: TrackingConfig) -> str | None:
    """Create the tracking store and the experiment now; return a warning (or a store repair notice) when there is
    something to say, None when it worked or tracking is disabled.

    Jobs wait for each other on a SQLite store's lock (:func:`store_lock`), so this is not needed for safety; a
    sweep calls it once before its jobs start so that a broken store is reported once, not by every job.
    """
    if not config.enabled:
        return None
    try:
        with store_lock(config.uri):
            notice = _open_store(config)[2]
    # Any tracking failure must leave the benchmark's results intact; the jobs report their own tracking failures.
    except Exception as exc:
        return redact(f"MLflow store at {config.uri!r} could not be prepared before the sweep ({_reason(exc)}).")
    return notice


def quiet_store_logs() -> None:
    """Silence MLflow's SQLite schema set-up and migrations, logged at INFO, SQLAlchemy's warnings about MLflow's own
    deprecated loader options, and urllib3's retry warnings: none is the user's concern."""
    for logger_name in ("alembic", "mlflow.store.db.utils"):
        logging.getLogger(logger_name).setLevel(logging.WARNING)
    # urllib3 logs each retry of an unreachable server at WARNING (on stdout, through Hydra's console handler); the
    # one tracking warning says what failed.
    logging.getLogger("urllib3.connectionpool").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", module=r"mlflow\.store\..*")


def _check_store_exists(tracking_uri: str) -> None:
    # Opening a SQLite URI whose file is missing would silently create an empty store: refuse instead.
    if tracking_uri.startswith(SQLITE_PREFIX):
        database = Path(tracking_uri[len(SQLITE_PREFIX) :])
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
        raise TrackingError(
            redact(f"no MLflow run {run_id} in the tracking store {tracking_uri} ({_reason(exc)})")
        ) from exc
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
