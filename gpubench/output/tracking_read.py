"""Reading logged runs back: the report.json artifact of an MLflow run, for ``gpubench compare``, and the machine's
history records that tracked runs logged, for the job's history."""

import logging
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpubench.output.history_record import machine_records
from gpubench.output.redact import redact
from gpubench.output.report_file import REPORT_FILE_NAME, ReportReadError, read_report
from gpubench.output.sqlite_store import SQLITE_PREFIX, TrackingError, store_lock
from gpubench.output.tracking_record import HISTORY_RECORD_ARTIFACT, MACHINE_TAG
from gpubench.output.tracking_store import bound_http_retries, quiet_store_logs, reason
from gpubench.results import RunReport

logger = logging.getLogger(__name__)


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
    """The report.json artifact of the MLflow run ``run_id`` in the store at ``tracking_uri``; :class:`TrackingError`
    when the store, run or report is missing or not a gpubench report."""
    _check_store_exists(tracking_uri)
    quiet_store_logs()
    from mlflow.artifacts import download_artifacts
    from mlflow.tracking import MlflowClient

    try:
        MlflowClient(tracking_uri=tracking_uri).get_run(run_id)
    # Any store failure (unknown run, unreachable server, bad URI) is the user's environment, not a bug here.
    except Exception as exc:
        raise TrackingError(
            redact(f"no MLflow run {run_id} in the tracking store {tracking_uri} ({reason(exc)})")
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


def machine_history_records(tracking_uri: str, machine: str) -> list[dict[str, Any]]:
    """The history records of ``machine`` that runs in the store at ``tracking_uri`` logged: the
    ``history_record.json`` of each active run tagged ``gpubench.machine`` = ``machine``, in every active experiment.
    A SQLite store whose file does not exist holds none (a machine's first tracked run is not told of it); a record
    that cannot be downloaded or read is skipped, reported once; :class:`TrackingError` when the store cannot be
    searched."""
    try:
        _check_store_exists(tracking_uri)
    # A machine's first tracked run finds no store yet: nothing to read and nothing wrong, so nothing is said.
    except TrackingError:
        return []
    quiet_store_logs()
    bound_http_retries()
    from mlflow.tracking import MlflowClient

    texts: list[str] = []
    missing = 0
    with store_lock(tracking_uri), tempfile.TemporaryDirectory() as folder:
        try:
            client = MlflowClient(tracking_uri=tracking_uri)
            experiment_ids = [e.experiment_id for e in _every_page(lambda t: client.search_experiments(page_token=t))]
            # The machine key is hex, safe inside the filter's quotes.
            query = f"tags.`{MACHINE_TAG}` = '{machine}'"
            runs = _every_page(lambda t: client.search_runs(experiment_ids, filter_string=query, page_token=t))
        # Any store failure (unreachable server, bad URI, damaged file) is the user's environment, not a bug here.
        except Exception as exc:
            raise TrackingError(
                redact(f"the MLflow store {tracking_uri} cannot be searched for the machine's history ({reason(exc)})")
            ) from exc
        for run in runs:
            # Every download lands on the same name in the folder: each is read before the next.
            try:
                path = client.download_artifacts(run.info.run_id, HISTORY_RECORD_ARTIFACT, folder)
                texts.append(Path(path).read_text())
            # One run's missing or unreadable file must not cost the others' records.
            except Exception:
                missing += 1
    records, unreadable = machine_records(texts, machine)
    if missing + unreadable:
        logger.warning(
            "the MLflow store %s has %d unreadable %s record(s) of the machine's history; they are ignored",
            redact(tracking_uri),
            missing + unreadable,
            HISTORY_RECORD_ARTIFACT,
        )
    return records


def _every_page(search: Callable[[str | None], Any]) -> list[Any]:
    """Every item of a paged MLflow search; ``search(page_token)`` returns one page."""
    items: list[Any] = []
    token = None
    while True:
        page = search(token)
        items += page
        token = page.token
        if not token:
            return items
