"""MLflow tracking against a real SQLite store in a temp folder, and the warning path when the store fails."""

import json

from gpubench.output.config import TrackingConfig
from gpubench.output.tracking import RunRecord, flatten, log_run


def test_flatten_uses_dotted_keys_and_keeps_lists_whole():
    assert flatten({"a": {"b": 1, "c": {"d": [1, 2]}}, "e": None}) == {"a.b": 1, "a.c.d": [1, 2], "e": None}


def test_log_run_writes_params_series_metrics_and_artifacts(tmp_path):
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    config = TrackingConfig(uri=uri, artifact_location=str(tmp_path / "artifacts"), experiment="t")
    report_path = tmp_path / "report.json"
    report_path.write_text(json.dumps({"ok": True}))
    params = {f"group.key_{i}": i for i in range(250)}  # more than one params batch (100 per batch)
    series = {"mlp/epoch_time_ms": [10.0 + i for i in range(1500)]}  # more than one metrics batch (1000)
    series["mlp/epoch_loss"] = [1.0, float("nan"), 0.5]
    record = RunRecord(
        run_name="mlp",
        params=params,
        tags={"gpubench.models": "mlp"},
        metrics={"mlp/mean_epoch_time_ms": 12.5, "mlp/missing": None},
        series=series,
        artifacts=[report_path],
    )
    outcome = log_run(config, record)
    assert outcome.warning is None and outcome.run_id
    client = MlflowClient(tracking_uri=uri)
    run = client.get_run(outcome.run_id)
    assert run.info.status == "FINISHED"
    assert run.data.params["group.key_249"] == "249" and len(run.data.params) == 250
    assert run.data.tags["gpubench.models"] == "mlp"
    assert run.data.metrics["mlp/mean_epoch_time_ms"] == 12.5
    assert "mlp/missing" not in run.data.metrics
    history = client.get_metric_history(outcome.run_id, "mlp/epoch_time_ms")
    assert sorted(m.step for m in history) == list(range(1500))
    loss = {m.step: m.value for m in client.get_metric_history(outcome.run_id, "mlp/epoch_loss")}
    assert loss == {0: 1.0, 2: 0.5}  # the NaN is skipped and the later value keeps its epoch index
    artifacts = [a.path for a in client.list_artifacts(outcome.run_id)]
    assert artifacts == ["report.json"]


def test_unreachable_store_returns_a_warning_instead_of_raising(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    config = TrackingConfig(uri=f"sqlite:///{blocker}/sub/mlflow.db", artifact_location=str(tmp_path / "a"))
    outcome = log_run(config, RunRecord(run_name="x", metrics={"m": 1.0}))
    assert outcome.run_id is None
    assert outcome.warning and "tracking" in outcome.warning and "report was still written" in outcome.warning


def test_disabled_tracking_logs_nothing(tmp_path):
    config = TrackingConfig(enabled=False, uri=f"sqlite:///{tmp_path / 'db'}")
    assert log_run(config, RunRecord(run_name="x")).run_id is None
    assert not (tmp_path / "db").exists()
