"""MLflow tracking as the runner, the sweep and ``gpubench compare`` use it: what a job logs (``tracking_record``),
the store, the live run and reading a run back. A logging failure becomes one warning; the report is written anyway."""

from gpubench.output.sqlite_store import TrackingError
from gpubench.output.tracking_live import FAILED, FINISHED, KILLED, LiveRun, log_run, nest_runs
from gpubench.output.tracking_read import load_run_report
from gpubench.output.tracking_record import (
    COST_TABLE_ARTIFACT,
    COST_TABLE_FIELDS,
    DESCRIPTION_TAG,
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
    TrackingOutcome,
    bound_http_retries,
    store_identity,
    tracking_warning,
)
