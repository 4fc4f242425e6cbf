"""MLflow tracking, the public face: what the runner, the sweep and ``gpubench.compare`` use. The work is done in
modules beside this one, and mlflow is imported only inside their functions, when a run is logged or read:

* :mod:`gpubench.output.tracking_record`: what a job logs (params, path tags, metrics, its name with the verdict,
  its description, its dataset input), built from the config and the report; no mlflow;
* :mod:`gpubench.output.tracking_store`: the store (a client bound to it, the experiment marked for model training,
  HTTP retry bounds, the warnings failures become), with :mod:`gpubench.output.sqlite_store` for a SQLite file's
  cross-platform lock and repair;
* :mod:`gpubench.output.tracking_live`: the live run, from the job's start to its status (and a sweep's parent run),
  with :mod:`gpubench.output.tracking_system` for its system metrics;
* :mod:`gpubench.output.tracking_read`: a logged run's report read back.

Tracking never costs a measurement: any failure while logging becomes one warning, and the JSON report is written
regardless.
"""

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
