"""The ``tracking`` group (MLflow) and the ``sweep`` keys (how a multirun treats the jobs it ran before)."""

from dataclasses import dataclass

from gpubench.errors import require

#: Seconds between two system-metrics samples by default (see ``TrackingConfig``).
SYSTEM_METRICS_INTERVAL_S = 10.0


@dataclass
class TrackingConfig:
    """MLflow tracking. The default SQLite store lives in ``mlruns/`` beside the artifacts.

    ``system_metrics`` (on by default) samples the CPU, memory and, on a GPU, the job's GPU (use, memory, power)
    into the job's run, every ``system_metrics_interval_s`` seconds (10: MLflow's own default), on a thread of its
    own: each sample takes the GIL briefly and writes one batch, so a shorter interval gives denser charts at a
    proportionally higher cost to the timed epochs (``benchmarks/system_metrics_overhead.py`` measures it; see
    ``gpubench/output/tracking_system.py``). A job shorter than one interval still gets a sample, taken as it ends.
    """

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
    """How a multirun treats jobs it ran before. ``resume``: a job whose folder already holds a complete report
    (status ``complete``, no failed model) of the same overrides is skipped, and the summary reads that report;
    give the earlier sweep's folder as ``hydra.sweep.dir`` (the default folder is new at every launch)."""

    resume: bool = False
