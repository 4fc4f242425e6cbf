"""The MLflow store a job logs to: a bound client, its experiment, HTTP retry bounds and the warnings failures
become."""

import logging
import os
import textwrap
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from gpubench.output.config import TrackingConfig
from gpubench.output.redact import redact
from gpubench.output.sqlite_store import (
    SQLITE_PREFIX,
    SqliteStoreState,
    TrackingError,
    read_sqlite_state,
    repair_sqlite_store,
    sqlite_database,
)
from gpubench.output.tracking_record import EXPERIMENT_KIND_TAG, MODEL_TRAINING_KIND

#: A failure's reason in a warning is shortened (at a word) to this many characters.
_MAX_REASON_CHARS = 400
#: URI schemes of tracking servers, whose own artifact store holds a run's files.
_SERVER_SCHEMES = ("http", "https", "databricks")
#: MLflow's HTTP retry settings (its environment variables) for this process, where the user has not set them.
HTTP_RETRY_DEFAULTS = {
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
    "MLFLOW_HTTP_REQUEST_BACKOFF_JITTER": "0.5",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "5",
}
#: MLflow's switch for the "View run ... at: <tracking URI>/#/..." lines it prints when a run on a server ends.
_SUPPRESS_URL_PRINTING = "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT"
#: The MLflow UI's model-training view: the UI follows a global switch, not the experiment's tag.
UI_WORKFLOW = "workflowType=machine_learning"
#: What a job's tracking warning says is kept regardless.
REPORT_KEPT = "the JSON report is still written"


@dataclass(frozen=True)
class TrackingOutcome:
    """The run id when logging succeeded, else a warning that says what failed."""

    run_id: str | None
    warning: str | None = None


def bound_http_retries() -> None:
    """Set :data:`HTTP_RETRY_DEFAULTS` in the environment where unset, so an unreachable server fails in seconds."""
    for name, value in HTTP_RETRY_DEFAULTS.items():
        os.environ.setdefault(name, value)


def quiet_store_logs() -> None:
    """Silence MLflow's schema migrations, SQLAlchemy's deprecation warnings and urllib3's retry warnings."""
    for logger_name in ("alembic", "mlflow.store.db.utils"):
        logging.getLogger(logger_name).setLevel(logging.WARNING)
    # The one tracking warning says what failed; urllib3's retries would print on the console.
    logging.getLogger("urllib3.connectionpool").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", module=r"mlflow\.store\..*")


def store_identity(uri: str) -> str:
    """The store a URI names, without credentials: a SQLite database's absolute path, else the redacted URI."""
    database = sqlite_database(uri)
    if database is not None:
        return SQLITE_PREFIX + str(database.expanduser().absolute())
    return redact(uri)


def damaged_store_error(database: Path, state: SqliteStoreState, exc: Exception) -> TrackingError:
    """The error for a store that holds runs and leftover migration tables: what is wrong and the fix."""
    return TrackingError(
        f"the MLflow store {database} holds {state.run_count} run(s) but an interrupted schema migration left the "
        f"tables {', '.join(state.leftover_tables)} at revision {state.revision} ({reason(exc)}); back the file up, "
        f"drop those tables (sqlite3 {database} 'DROP TABLE <name>') and run 'mlflow db upgrade sqlite:///{database}'"
    )


def run_link(uri: str, experiment_id: str, run_id: str) -> str | None:
    """The MLflow UI's page of the run on the server at ``uri``, without credentials; None for a local store."""
    parts = urlsplit(uri)
    if parts.scheme not in ("http", "https"):
        return None
    host = parts.netloc.rpartition("@")[2]
    page = f"#/experiments/{experiment_id}/runs/{run_id}?{UI_WORKFLOW}"
    return redact(f"{parts.scheme}://{host}{parts.path.rstrip('/')}/{page}")


def artifact_location(config: TrackingConfig) -> str | None:
    """A new experiment's artifact location: ``tracking.artifact_location`` locally, None for a server."""
    if urlsplit(config.uri).scheme in _SERVER_SCHEMES:
        return None
    return Path(config.artifact_location).expanduser().resolve().as_uri()


def _experiment_id(client: Any, config: TrackingConfig) -> str:
    """The id of ``tracking.experiment``, created when new, tagged for model training."""
    experiment = client.get_experiment_by_name(config.experiment)
    if experiment is None:
        return client.create_experiment(
            config.experiment,
            artifact_location=artifact_location(config),
            tags={EXPERIMENT_KIND_TAG: MODEL_TRAINING_KIND},
        )
    if EXPERIMENT_KIND_TAG not in experiment.tags:
        client.set_experiment_tag(experiment.experiment_id, EXPERIMENT_KIND_TAG, MODEL_TRAINING_KIND)
    return experiment.experiment_id


def open_store(config: TrackingConfig) -> tuple[Any, str, str | None]:
    """A bound client, the experiment's id and any repair notice; call it holding the store lock."""
    from mlflow.tracking import MlflowClient

    quiet_store_logs()
    bound_http_retries()
    # Forced, not a default: MLflow's lines would print the URI with its credentials (gpubench prints run_link).
    os.environ[_SUPPRESS_URL_PRINTING] = "true"
    database = sqlite_database(config.uri)
    notice = repair_sqlite_store(database) if database is not None else None
    state = read_sqlite_state(database) if database is not None else None
    # Not mlflow.set_tracking_uri, which sets MLFLOW_TRACKING_URI for every later job and child process.
    try:
        client = MlflowClient(tracking_uri=config.uri)
        experiment_id = _experiment_id(client, config)
    except Exception as exc:
        if database is not None and state is not None and state.leftover_tables:
            raise damaged_store_error(database, state, exc) from exc
        raise
    return client, experiment_id, notice


def reason(exc: BaseException) -> str:
    """Why ``exc`` happened, in one phrase: a failed request's root network error, else its message shortened."""
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


def tracking_warning(config: TrackingConfig, action: str, exc: BaseException, kept: str = REPORT_KEPT) -> str:
    """The one warning a tracking failure becomes: the store, what failed while ``action``, and what was ``kept``."""
    return redact(
        f"MLflow tracking at {config.uri!r} failed while {action} ({reason(exc)}); nothing more is logged to MLflow "
        f"for this job, and {kept}. Fix tracking.uri or run with tracking.enabled=false."
    )
