"""Reading a logged run back: the report.json artifact of an MLflow run, for ``gpubench compare``."""

import tempfile
from pathlib import Path

from gpubench.output.redact import redact
from gpubench.output.report_file import REPORT_FILE_NAME, ReportReadError, read_report
from gpubench.output.sqlite_store import SQLITE_PREFIX, TrackingError
from gpubench.output.tracking_store import quiet_store_logs, reason
from gpubench.results import RunReport


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
