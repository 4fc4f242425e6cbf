"""The ``tracking`` group (MLflow) and the ``sweep`` keys (how a multirun treats the jobs it ran before)."""

from dataclasses import dataclass


@dataclass
class TrackingConfig:
    """MLflow tracking. The default SQLite store lives in ``mlruns/`` beside the artifacts."""

    enabled: bool = True
    uri: str = "sqlite:///mlruns/mlflow.db"
    artifact_location: str = "mlruns/artifacts"
    experiment: str = "gpubench"


@dataclass
class SweepConfig:
    """How a multirun treats jobs it ran before. ``resume``: a job whose folder already holds a complete report
    (status ``complete``, no failed model) of the same overrides is skipped, and the summary reads that report;
    give the earlier sweep's folder as ``hydra.sweep.dir`` (the default folder is new at every launch)."""

    resume: bool = False
