"""The ``tracking`` group (MLflow) and the ``sweep`` keys (how a multirun treats the jobs it ran before)."""

from dataclasses import dataclass

from gpubench.errors import require

#: Seconds between two system-metrics samples by default (see ``TrackingConfig``).
SYSTEM_METRICS_INTERVAL_S = 10.0


@dataclass
class TrackingConfig:
    """MLflow tracking (default store in ``mlruns/``); ``system_metrics`` samples every ``system_metrics_interval_s``
    s."""

    enabled: bool = True
    uri: str = "sqlite:///mlruns/mlflow.db"
    artifact_location: str = "mlruns/artifacts"
    experiment: str = "gpubench"
    system_metrics: bool = True
    system_metrics_interval_s: float = SYSTEM_METRICS_INTERVAL_S

    def __post_init__(self) -> None:
        require(
            self.system_metrics_interval_s >= 0.1,
            "tracking.system_metrics_interval_s",
            self.system_metrics_interval_s,
            "at least 0.1 (seconds between two system-metrics samples; tracking.system_metrics=false turns them off)",
        )


@dataclass
class SweepConfig:
    """How a multirun treats earlier jobs: ``resume`` skips one whose folder holds a complete report."""

    resume: bool = False
