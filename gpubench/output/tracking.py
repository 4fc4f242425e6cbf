"""MLflow tracking, the public face the runner, the sweep and ``gpubench compare`` use; the work is in
``tracking_record`` (what a job logs), ``tracking_store`` (the store), ``tracking_live`` (the live run) and
``tracking_read`` (reading a run back). Any logging failure becomes one warning; the JSON report is written
regardless."""

from gpubench.output.sqlite_store import TrackingError
from gpubench.output.tracking_live import FAILED, FINISHED, FLUSH_INTERVAL_S, KILLED, LiveRun, log_run, nest_runs
from gpubench.output.tracking_read import load_run_report
from gpubench.output.tracking_record import (
    COST_TABLE_ARTIFACT,
    COST_TABLE_FIELDS,
    DESCRIPTION_TAG,
    PARENT_RUN_TAG,
    DatasetRecord,
    RunRecord,
    SweepJob,
    flatten,
    job_params,
    job_tags,
    path_tags,
    run_record,
    starting_run_name,
)
from gpubench.output.tracking_store import (
    HTTP_RETRY_DEFAULTS,
    REPORT_KEPT,
    TrackingOutcome,
    bound_http_retries,
    quiet_store_logs,
    run_link,
    store_identity,
    tracking_warning,
)

__all__ = [
    "COST_TABLE_ARTIFACT",
    "COST_TABLE_FIELDS",
    "DESCRIPTION_TAG",
    "FAILED",
    "FINISHED",
    "FLUSH_INTERVAL_S",
    "HTTP_RETRY_DEFAULTS",
    "KILLED",
    "PARENT_RUN_TAG",
    "REPORT_KEPT",
    "DatasetRecord",
    "LiveRun",
    "RunRecord",
    "SweepJob",
    "TrackingError",
    "TrackingOutcome",
    "bound_http_retries",
    "flatten",
    "job_params",
    "job_tags",
    "load_run_report",
    "log_run",
    "nest_runs",
    "path_tags",
    "quiet_store_logs",
    "run_link",
    "run_record",
    "starting_run_name",
    "store_identity",
    "tracking_warning",
]
