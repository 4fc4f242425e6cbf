"""The ``tracking`` group: MLflow."""

from dataclasses import dataclass


@dataclass
class TrackingConfig:
    """MLflow tracking. The default SQLite store lives in ``mlruns/`` beside the artifacts."""

    enabled: bool = True
    uri: str = "sqlite:///mlruns/mlflow.db"
    artifact_location: str = "mlruns/artifacts"
    experiment: str = "gpubench"
