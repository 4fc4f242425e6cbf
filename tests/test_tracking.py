"""MLflow tracking against a real SQLite store in a temp folder, the warning path when the store fails, the run
record built from a report written by main, and reading a logged run's report back."""

import json
from dataclasses import replace
from pathlib import Path

import pytest

from gpubench.output.config import TrackingConfig
from gpubench.output.tracking import RunRecord, TrackingError, flatten, load_run_report, log_run, run_record
from gpubench.results import RunReport

CPU_REPORT = Path(__file__).parent / "fixtures" / "report_main_1092cdc_cpu_quick.json"


def cpu_report() -> RunReport:
    return RunReport.from_dict(json.loads(CPU_REPORT.read_text()))


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
    assert outcome.warning and "tracking" in outcome.warning and "report is still written" in outcome.warning


def test_disabled_tracking_logs_nothing(tmp_path):
    config = TrackingConfig(enabled=False, uri=f"sqlite:///{tmp_path / 'db'}")
    assert log_run(config, RunRecord(run_name="x")).run_id is None
    assert not (tmp_path / "db").exists()


def test_run_record_tags_metrics_and_series_come_from_the_report():
    report = cpu_report()
    record = run_record(report, {"epochs": 2}, run_name="dqn-ppo", sweep_dir=None, job_num=None)
    assert record.run_name == "dqn-ppo" and record.params == {"epochs": 2} and record.artifacts == []
    assert record.tags == {
        "gpubench.models": "dqn,ppo,mamba2,tft",
        "gpubench.device": "AMD EPYC",
        "gpubench.version": "0.1.0",
        "gpubench.status": "complete",
        "torch.version": "2.13.0+cpu",
        "python.version": "3.11.7",
        "mlflow.source.git.commit": report.run.git_commit,
    }
    dqn = report.models["dqn"]
    assert record.metrics["dqn/status_ok"] == 1.0
    assert record.metrics["dqn/mean_epoch_time_ms"] == dqn.statistics.mean_ms
    assert record.metrics["dqn/p95_latency_ms"] == dqn.statistics.p95_ms
    assert record.metrics["dqn/p99_latency_ms"] == dqn.statistics.p99_ms
    assert record.metrics["dqn/coefficient_of_variation"] == dqn.statistics.coefficient_of_variation
    assert (record.metrics["dqn/ci_low_ms"], record.metrics["dqn/ci_high_ms"]) == dqn.statistics.confidence_interval_ms
    decision = (record.metrics["dqn/decision_ci_low_ms"], record.metrics["dqn/decision_ci_high_ms"])
    assert decision == dqn.statistics.decision_interval_ms
    # 75 steps of 8 env steps per epoch, over the mean epoch time in seconds.
    assert record.metrics["dqn/samples_per_second"] == pytest.approx(600 / (dqn.statistics.mean_ms / 1e3))
    assert record.metrics["dqn/batch_size"] == 32 and record.metrics["dqn/memory_usage_mb"] is None
    assert record.series["dqn/epoch_time_ms"] == dqn.raw_epoch_times_ms
    assert record.series["dqn/epoch_loss"] == dqn.epoch_losses
    # The CPU measures no device memory: no per-epoch memory series.
    assert "dqn/epoch_peak_reserved_mb" not in record.series
    assert {key.split("/")[0] for key in record.metrics} == {"dqn", "ppo", "mamba2", "tft"}


def test_run_record_of_a_sweep_job_carries_the_sweep_and_a_failed_model_has_no_figures():
    report = cpu_report()
    failed = replace(report.models["tft"], status="failed", error="ValueError: window", statistics=None)
    report = replace(report, models={**report.models, "tft": failed})
    record = run_record(report, {}, run_name="tft-job1", sweep_dir="multirun/a", job_num=1)
    assert record.tags["gpubench.sweep"] == "multirun/a" and record.tags["gpubench.job_num"] == "1"
    assert record.metrics["tft/status_ok"] == 0.0 and record.metrics["tft/mean_epoch_time_ms"] is None
    assert "tft/ci_low_ms" not in record.metrics and "tft/samples_per_second" not in record.metrics


def test_load_run_report_reads_back_the_report_a_run_logged(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    config = TrackingConfig(uri=uri, artifact_location=str(tmp_path / "artifacts"), experiment="t")
    outcome = log_run(config, RunRecord(run_name="cpu", artifacts=[CPU_REPORT]))
    with pytest.raises(TrackingError, match=r"has no report\.json artifact"):
        load_run_report(outcome.run_id, uri)
    report_path = tmp_path / "report.json"
    report_path.write_text(CPU_REPORT.read_text())
    outcome = log_run(config, RunRecord(run_name="cpu", artifacts=[report_path]))
    assert load_run_report(outcome.run_id, uri) == cpu_report()


def test_load_run_report_refuses_a_missing_store_without_creating_it(tmp_path):
    with pytest.raises(TrackingError, match="does not exist"):
        load_run_report("0" * 32, f"sqlite:///{tmp_path / 'mlflow.db'}")
    assert not (tmp_path / "mlflow.db").exists()
