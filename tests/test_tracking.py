"""MLflow tracking against a real SQLite store in a temp folder, the warning path when the store fails, the run
record built from a report written by main, and reading a logged run's report back."""

import json
from dataclasses import replace
from pathlib import Path

import pytest

from gpubench.output import tracking
from gpubench.output.config import TrackingConfig
from gpubench.output.sqlite_store import store_lock
from gpubench.output.tracking import (
    RunRecord,
    SweepJob,
    TrackingError,
    flatten,
    load_run_report,
    log_run,
    run_record,
)
from gpubench.output.tracking_record import description
from gpubench.output.tracking_store import _experiment_id, open_store
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
    record = run_record(report)
    assert record.params == {} and record.artifacts == []
    assert record.tags == {
        "gpubench.models": "dqn,ppo,mamba2,tft",
        "gpubench.device": "AMD EPYC",
        "gpubench.version": "0.1.0",
        "gpubench.status": "complete",
        "torch.version": "2.13.0+cpu",
        "python.version": "3.11.7",
        "mlflow.source.git.commit": report.run.git_commit,
        "gpubench.decision": "LOCAL_GPU_VIABLE",
        # The report is an experiment=quick run: its MLflow run says it is a smoke test, as its description does.
        "gpubench.preset": "quick",
        "gpubench.preset_note": "smoke test: tiny shapes, not your training",
        "mlflow.note.content": description(report),
    }
    recommendation = report.recommendation
    assert record.metrics["recommendation/estimated_hours"] == recommendation.estimated_full_training_hours
    assert record.metrics["recommendation/estimated_hours_upper"] == recommendation.estimated_full_training_hours_upper
    cost = recommendation.cost_analysis
    assert record.metrics["recommendation/cloud_cost_usd_per_training"] == cost.cloud_cost_usd_per_training
    assert record.metrics["recommendation/annual_savings_usd"] == cost.annual_savings_usd
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
    assert {key.split("/")[0] for key in record.metrics} == {"dqn", "ppo", "mamba2", "tft", "recommendation"}


def test_the_hosts_noise_is_a_metric_of_each_model_comparable_across_runs():
    # The H200 default run of session 10: its rounds' between share and probe share; its card's waiting share is set
    # here (the run predates the field), and a model without one logs none.
    results = Path(__file__).resolve().parents[1] / "benchmarks" / "results"
    report = RunReport.from_dict(json.loads((results / "2026-12-03-h200-s10-default" / "report.json").read_text()))
    models = {**report.models, "tft": replace(report.models["tft"], gpu_wait_explained_share=0.9)}
    metrics = run_record(replace(report, models=models)).metrics
    for name, result in report.models.items():
        assert metrics[f"{name}/between_round_share"] == result.statistics.rounds.between_share
        assert metrics[f"{name}/host_probe_explained_share"] == result.host_probe_explained_share
    assert (metrics["dqn/host_probe_explained_share"], metrics["mamba2/host_probe_explained_share"]) == (
        pytest.approx(0.80, abs=0.005),
        pytest.approx(0.034, abs=0.0005),
    )
    assert metrics["tft/gpu_wait_explained_share"] == 0.9 and metrics["dqn/gpu_wait_explained_share"] is None


def test_run_record_of_a_sweep_job_carries_the_sweep_and_a_failed_model_has_no_figures():
    report = cpu_report()
    failed = replace(report.models["tft"], status="failed", error="ValueError: window", statistics=None)
    report = replace(report, models={**report.models, "tft": failed})
    record = run_record(report, sweep=SweepJob(sweep_dir="multirun/a", job_num=1, parent_run_id="p" * 32))
    assert record.tags["gpubench.sweep"] == "multirun/a" and record.tags["gpubench.job_num"] == "1"
    assert record.tags["mlflow.parentRunId"] == "p" * 32
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


# ------------------------------------------------------------------------------------------- issue 14, items 4-6, 9


def _log_at_the_barrier(uri: str, artifacts: str, name: str, barrier, results) -> None:
    barrier.wait()
    outcome = log_run(TrackingConfig(uri=uri, artifact_location=artifacts, experiment="t"), RunRecord(run_name=name))
    results.put((name, outcome.run_id, outcome.warning))


@pytest.mark.slow
def test_two_processes_creating_one_new_sqlite_store_at_once_both_log_their_run(tmp_path):
    # Issue 14: two runs at once on a new store lost their records (3 trials: 2 lost both runs, 1 lost one).
    import multiprocessing

    from mlflow.tracking import MlflowClient

    context = multiprocessing.get_context("fork")  # mlflow is imported already: both children start at once
    for trial in range(3):
        uri = f"sqlite:///{tmp_path / f'trial{trial}' / 'mlflow.db'}"
        barrier, results = context.Barrier(2), context.Queue()
        processes = [
            context.Process(target=_log_at_the_barrier, args=(uri, str(tmp_path / "artifacts"), name, barrier, results))
            for name in ("first", "second")
        ]
        for process in processes:
            process.start()
        outcomes = [results.get(timeout=120) for _ in processes]
        for process in processes:
            process.join(timeout=60)
        assert [warning for _, _, warning in outcomes] == [None, None], outcomes
        client = MlflowClient(tracking_uri=uri)
        runs = client.search_runs([client.get_experiment_by_name("t").experiment_id])
        assert sorted(run.info.run_name for run in runs) == ["first", "second"]
        assert not [path for path in (tmp_path / f"trial{trial}").iterdir() if ".damaged-" in path.name]


def _log_in(queue, config: TrackingConfig, name: str) -> None:
    outcome = log_run(config, RunRecord(run_name=name, metrics={"m": 2.0}))
    queue.put((outcome.run_id, outcome.warning))


def log_in_a_new_process(config: TrackingConfig, name: str) -> tracking.TrackingOutcome:
    """``log_run`` in a fresh interpreter, as a later job would: MLflow caches each store it opened in-process."""
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    process = context.Process(target=_log_in, args=(queue, config, name))
    process.start()
    run_id, warning = queue.get(timeout=180)
    process.join(timeout=60)
    return tracking.TrackingOutcome(run_id=run_id, warning=warning)


def _half_created_store(database: Path, *, with_run: bool) -> None:
    """A store whose schema migration was interrupted, as two concurrent creations left it: a leftover
    ``_alembic_tmp_`` table and an older schema revision recorded."""
    import sqlite3

    config = TrackingConfig(uri=f"sqlite:///{database}", artifact_location=str(database.parent / "a"), experiment="t")
    if with_run:
        assert log_run(config, RunRecord(run_name="kept", metrics={"m": 1.0})).warning is None
    else:
        with store_lock(config.uri):
            open_store(config)
    with sqlite3.connect(database) as connection:
        connection.execute("CREATE TABLE _alembic_tmp_latest_metrics (key VARCHAR(250))")
        connection.execute("UPDATE alembic_version SET version_num = 'a8c4a736bde6'")


def test_a_half_created_store_without_runs_is_set_aside_and_created_anew(tmp_path):
    import sqlite3

    database = tmp_path / "mlflow.db"
    _half_created_store(database, with_run=False)
    config = TrackingConfig(uri=f"sqlite:///{database}", artifact_location=str(tmp_path / "a"), experiment="t")
    outcome = log_in_a_new_process(config, "after")
    assert outcome.run_id is not None
    (backup,) = tmp_path.glob("mlflow.db.damaged-*")
    assert "_alembic_tmp_latest_metrics" in outcome.warning and str(backup) in outcome.warning
    # Read with sqlite3: this process's MLflow still caches the store it opened before the file was moved.
    with sqlite3.connect(database) as connection:
        status = connection.execute("SELECT status FROM runs WHERE run_uuid = ?", (outcome.run_id,)).fetchone()
    assert status == ("FINISHED",)
    # Later runs log normally, and say nothing.
    assert log_in_a_new_process(config, "later").warning is None


def test_a_half_created_store_with_runs_is_left_alone_with_a_clear_message(tmp_path):
    database = tmp_path / "mlflow.db"
    _half_created_store(database, with_run=True)
    before = database.read_bytes()
    config = TrackingConfig(uri=f"sqlite:///{database}", artifact_location=str(tmp_path / "a"), experiment="t")
    outcome = log_in_a_new_process(config, "after")
    assert outcome.run_id is None
    assert "holds 1 run(s)" in outcome.warning and "_alembic_tmp_latest_metrics" in outcome.warning
    assert "mlflow db upgrade" in outcome.warning and "the JSON report is still written" in outcome.warning
    assert database.read_bytes() == before and not list(tmp_path.glob("*.damaged-*"))


def test_a_damaged_store_file_gets_a_clear_message(tmp_path):
    database = tmp_path / "mlflow.db"
    database.write_bytes(b"this is not a SQLite database, just some bytes" * 50)
    config = TrackingConfig(uri=f"sqlite:///{database}", artifact_location=str(tmp_path / "a"), experiment="t")
    outcome = log_run(config, RunRecord(run_name="x"))
    assert outcome.run_id is None
    assert f"the MLflow store {database} is damaged or not a SQLite database" in outcome.warning


def _closed_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_an_unreachable_server_fails_within_15_s_with_a_complete_redacted_warning(tmp_path, monkeypatch):
    # Issue 14: MLflow's default retries stalled the exit for 257 s, and the warning was cut mid-phrase.
    import time

    for name in tracking.HTTP_RETRY_DEFAULTS:
        monkeypatch.delenv(name, raising=False)
    uri = f"http://alice:SECRETPW42@127.0.0.1:{_closed_port()}"
    started = time.monotonic()
    outcome = log_run(TrackingConfig(uri=uri, artifact_location=str(tmp_path / "a")), RunRecord(run_name="x"))
    assert time.monotonic() - started < 15
    assert outcome.run_id is None
    assert outcome.warning == (
        f"MLflow tracking at 'http://alice:***@127.0.0.1:{uri.rsplit(':', 1)[1]}' failed while creating the run "
        "(cannot reach it: ConnectionRefusedError: [Errno 111] Connection refused); nothing more is logged to MLflow "
        "for this job, and the JSON report is still written. Fix tracking.uri or run with tracking.enabled=false."
    )


def test_http_retry_settings_are_set_only_where_the_user_has_not(monkeypatch):
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "5")
    monkeypatch.delenv("MLFLOW_HTTP_REQUEST_TIMEOUT", raising=False)
    tracking.bound_http_retries()
    import os

    assert os.environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] == "5"
    assert os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] == tracking.HTTP_RETRY_DEFAULTS["MLFLOW_HTTP_REQUEST_TIMEOUT"]


class _RecordingClient:
    """Stands in for MlflowClient where only the experiment's creation is of interest."""

    def __init__(self) -> None:
        self.created: list[tuple[str, str | None]] = []

    def get_experiment_by_name(self, name: str) -> None:
        return None

    def create_experiment(self, name: str, artifact_location: str | None = None, tags=None) -> str:
        self.created.append((name, artifact_location))
        return "1"


def test_a_tracking_server_keeps_the_artifacts_and_a_local_store_puts_them_in_artifact_location(tmp_path):
    # Issue 14: with a server, runs were created with a file: path of the submitting machine as artifact location.
    client = _RecordingClient()
    _experiment_id(client, TrackingConfig(uri="http://mlflow.example:5000", artifact_location="mlruns/a"))
    local = TrackingConfig(uri=f"sqlite:///{tmp_path / 'db'}", artifact_location=str(tmp_path / "art"))
    _experiment_id(client, local)
    assert client.created == [("gpubench", None), ("gpubench", (tmp_path / "art").as_uri())]


def test_params_and_tags_are_logged_with_credentials_redacted(tmp_path):
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    config = TrackingConfig(uri=uri, artifact_location=str(tmp_path / "a"), experiment="t")
    record = RunRecord(
        run_name="x",
        params={"tracking.uri": "http://alice:SECRETPW42@host:5000", "data.url": "https://h/x?token=SECRETTOKEN"},
        tags={"gpubench.sweep": "multirun/a", "note": "see https://bob:SECRETPW42@h/"},
    )
    run = MlflowClient(tracking_uri=uri).get_run(log_run(config, record).run_id)
    assert run.data.params == {"tracking.uri": "http://alice:***@host:5000", "data.url": "https://h/x?token=***"}
    assert run.data.tags["note"] == "see https://bob:***@h/"


def test_the_cost_table_is_a_table_artifact_of_the_run(tmp_path):
    from mlflow.tracking import MlflowClient

    from gpubench.decision.config import DecisionConfig
    from gpubench.decision.recommendation import build_recommendation
    from gpubench.hardware.catalog import load_catalog
    from gpubench.output.tracking import COST_TABLE_ARTIFACT, COST_TABLE_FIELDS

    fixture = Path(__file__).parent / "fixtures" / "report_main_2026-11-29_h200_rtx3050ti.json"
    stored = RunReport.from_dict(json.loads(fixture.read_text()))
    report = replace(stored, recommendation=build_recommendation(stored, DecisionConfig(), load_catalog()))
    record = run_record(report)
    rows = report.recommendation.cost_table
    assert list(record.tables[COST_TABLE_ARTIFACT]) == list(COST_TABLE_FIELDS)
    assert record.tables[COST_TABLE_ARTIFACT]["usd"] == [row.usd for row in rows]
    cheapest = next(row for row in rows if row.usd is not None and row.fits_in_vram is not False)
    assert record.metrics["recommendation/cheapest_rental_usd"] == cheapest.usd
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    outcome = log_run(TrackingConfig(uri=uri, artifact_location=str(tmp_path / "a"), experiment="t"), record)
    client = MlflowClient(tracking_uri=uri)
    assert COST_TABLE_ARTIFACT in [a.path for a in client.list_artifacts(outcome.run_id)]
    logged = json.loads(Path(client.download_artifacts(outcome.run_id, COST_TABLE_ARTIFACT, str(tmp_path))).read_text())
    assert logged["columns"] == list(COST_TABLE_FIELDS) and len(logged["data"]) == len(rows)
