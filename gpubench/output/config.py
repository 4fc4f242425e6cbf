"""The ``tracking`` group (MLflow) and the ``sweep`` keys (how a multirun treats the jobs it ran before)."""

from dataclasses import dataclass

from gpubench.errors import require

#: Seconds between two system-metrics samples by default (see ``TrackingConfig``).
SYSTEM_METRICS_INTERVAL_S = 10.0


@dataclass
class TrackingConfig:
    """MLflow tracking; the default SQLite store lives in ``mlruns/``. ``system_metrics`` samples CPU, memory and the
    job's GPU into the run every ``system_metrics_interval_s`` seconds (:mod:`gpubench.output.tracking_system`); a
    shorter interval costs the timed epochs more."""

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
    """How a multirun treats jobs it ran before: with ``resume``, a job whose folder already holds a complete report
    of the same overrides is skipped (give the earlier ``hydra.sweep.dir``)."""

    resume: bool = False
