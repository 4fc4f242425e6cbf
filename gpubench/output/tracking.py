"""MLflow tracking: the only module that imports mlflow, and only when a run is logged.

One MLflow run per job: the flattened config as params, tags for the models, device, versions, git commit and
sweep, per-epoch series (time, loss, memory) and summary metrics sent in batches (one ``log_batch`` per chunk of
at most 1000 entities rather than a call per value: on SQLite 1000 single calls cost seconds, one batch a
tenth of a second), and the report and resolved config as artifacts.

Tracking never costs a measurement: any failure (unreachable store, bad URI, locked database) becomes a warning
returned to the caller, and the JSON report is written regardless.
"""

import logging
import math
import time
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from gpubench.output.config import TrackingConfig

#: MLflow's per-request limits: entities in one log_batch, and params/tags among them.
_MAX_ENTITIES_PER_BATCH = 1000
_MAX_PARAMS_PER_BATCH = 100
#: MLflow rejects longer param values.
_MAX_PARAM_CHARS = 6000

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

    # MLflow's SQLite store logs its schema set-up and migrations at INFO, and SQLAlchemy warns about MLflow's own
    # deprecated loader options: neither is the user's concern.
    for logger_name in ("alembic", "mlflow.store.db.utils"):
        logging.getLogger(logger_name).setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", module=r"mlflow\.store\..*")
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

        _quiet_store_logs()
        _experiment_id(MlflowClient(tracking_uri=config.uri), config)
    # Any tracking failure must leave the benchmark's results intact; the jobs report their own tracking failures.
    except Exception as exc:
        reason = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
        return f"MLflow store at {config.uri!r} could not be prepared before the sweep ({reason})."
    return None


def _quiet_store_logs() -> None:
    """Silence MLflow's SQLite schema set-up at INFO and SQLAlchemy's warnings about MLflow's own loader options."""
    for logger_name in ("alembic", "mlflow.store.db.utils"):
        logging.getLogger(logger_name).setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", module=r"mlflow\.store\..*")
