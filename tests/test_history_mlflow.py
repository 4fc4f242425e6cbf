"""The machine's history in the MLflow store (gpubench/output/history.py, gpubench/output/tracking_read.py): a
tracked run logs the record it appended to the history file (tag ``gpubench.machine``, artifact
``history_record.json``), and a job reads the store's records with the file's, each ``record_id`` once. A real SQLite
store in a temp folder, with one tracked run of a tiny MLP on the CPU for the module (creating a store costs
seconds); runs that only carry a record are logged beside it with ``log_run``."""

import json
import logging
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from conftest import tiny_mlp_config

from gpubench.bench import runner as runner_module
from gpubench.bench.job import RunContext
from gpubench.config import BenchmarkConfig
from gpubench.output.config import TrackingConfig
from gpubench.output.history import MachineHistory, hardware_settings, job_history
from gpubench.output.report_file import read_report
from gpubench.output.tracking import RunRecord, log_run
from gpubench.output.tracking_read import machine_history_records
from gpubench.results import RunReport

MlflowClient = pytest.importorskip("mlflow.tracking", reason="the MLflow store needs mlflow").MlflowClient

#: Two rounds of two epochs (the fewest that give the model a history record) over 3 days of two symbols.
TRACKED_OVERRIDES = ("epochs=4", "data.days=3", "data.symbols=[SYNA,SYNB]", "tracking.system_metrics=false")
#: Machine keys of no real machine: the store's records of other machines.
OTHER_MACHINE, BROKEN_MACHINE = "e" * 16, "f" * 16


@dataclass(frozen=True)
class TrackedJob:
    """The module's tracked run: its config, report, store URI and the one line it appended to its history file."""

    cfg: BenchmarkConfig
    report: RunReport
    uri: str
    line: str


def tracked_config(folder: Path, store: Path, cache_dir: Path, *overrides: str) -> BenchmarkConfig:
    """The tiny MLP over two rounds, tracked in ``store``, its history under ``cache_dir`` and its files in
    ``folder``."""
    return tiny_mlp_config(
        folder,
        *TRACKED_OVERRIDES,
        f"data.cache_dir={cache_dir}",
        "tracking.enabled=true",
        f"tracking.uri=sqlite:///{store}",
        f"tracking.artifact_location={store.parent / 'artifacts'}",
        *overrides,
    )


@pytest.fixture(scope="module")
def tracked_job(tmp_path_factory) -> TrackedJob:
    folder = tmp_path_factory.mktemp("history_mlflow")
    cfg = tracked_config(folder / "run", folder / "store" / "mlflow.db", folder / "cache")
    assert runner_module.run(cfg, RunContext(run_dir=folder / "run")) == 0
    (history_file,) = (folder / "cache" / "history").iterdir()
    (line,) = history_file.read_text().splitlines()
    return TrackedJob(cfg, read_report(Path(cfg.output)), cfg.tracking.uri, line)


def history_of(job: TrackedJob, cache_dir: Path, tracking_uri: str) -> MachineHistory:
    """The tracked job's machine history with its file under ``cache_dir`` and the store at ``tracking_uri``."""
    return MachineHistory.open(
        str(cache_dir), job.report.hardware, hardware_settings(job.cfg.hardware), tracking_uri=tracking_uri
    )


def log_record(job: TrackedJob, folder: Path, record: dict[str, Any]) -> None:
    """Log a run to the module's store that carries ``record`` as its history record."""
    config = TrackingConfig(uri=job.uri, artifact_location=str(folder / "artifacts"), experiment=folder.name)
    outcome = log_run(config, RunRecord(run_name="history record", history_record=record))
    assert outcome.warning is None and outcome.run_id


def test_a_tracked_run_logs_the_record_it_appended_and_the_next_run_reads_it_without_the_file(tracked_job, tmp_path):
    record = json.loads(tracked_job.line)
    assert re.fullmatch(r"[0-9a-f]{32}", record["record_id"])
    client = MlflowClient(tracking_uri=tracked_job.uri)
    run = client.get_run(tracked_job.report.run.mlflow_run_id)
    assert run.data.tags["gpubench.machine"] == record["machine"]
    logged = Path(client.download_artifacts(run.info.run_id, "history_record.json", str(tmp_path)))
    assert json.loads(logged.read_text()) == record
    # A second run whose cache folder holds no history file: its bound still counts the first run, from the store.
    cfg = tracked_config(tmp_path / "run", Path(tracked_job.uri.removeprefix("sqlite:///")), tmp_path / "cache")
    assert runner_module.run(cfg, RunContext(run_dir=tmp_path / "run")) == 0
    # The earlier run's mean step time, at this run's epoch size (sized anew from the step time).
    second = read_report(Path(cfg.output)).models["mlp"]
    entry = record["models"]["mlp"]
    (earlier,) = second.statistics.rounds.earlier_runs
    assert earlier == pytest.approx((entry["mean_step_ms"] * second.steps_per_epoch, entry["relative_variance"]))
    # Tracking off, the store is not read: no file, no history.
    untracked = replace(
        cfg, tracking=replace(cfg.tracking, enabled=False), data=replace(cfg.data, cache_dir=str(tmp_path / "none"))
    )
    assert job_history(untracked, tracked_job.report.hardware).records == ()


def test_a_record_in_both_the_file_and_the_store_counts_once(tracked_job):
    record = json.loads(tracked_job.line)
    history = job_history(tracked_job.cfg, tracked_job.report.hardware)
    ids = [r.get("record_id") for r in history.records]
    assert ids.count(record["record_id"]) == 1 and len(ids) == len(set(ids))
    assert history.records[0] == record
    result = tracked_job.report.models["mlp"]
    assert len(history.earlier_runs(result)) == len(history.records)


def test_another_machines_record_in_the_store_is_ignored(tracked_job, tmp_path):
    record = json.loads(tracked_job.line)
    other = {**record, "machine": OTHER_MACHINE, "record_id": "0" * 32}
    log_record(tracked_job, tmp_path, other)
    assert machine_history_records(tracked_job.uri, OTHER_MACHINE) == [other]
    history = history_of(tracked_job, tmp_path / "cache", tracked_job.uri)
    assert record in history.records and all(r["machine"] == record["machine"] for r in history.records)


def test_an_unreadable_stored_record_is_skipped_with_one_warning(tracked_job, tmp_path, caplog):
    bad = {"machine": BROKEN_MACHINE, "models": {"mlp": {"mean_step_ms": -1.0, "relative_variance": 0.0}}}
    good = {"machine": BROKEN_MACHINE, "record_id": "1" * 32, "models": {}}
    log_record(tracked_job, tmp_path, bad)
    log_record(tracked_job, tmp_path, bad)
    log_record(tracked_job, tmp_path, good)
    with caplog.at_level(logging.WARNING):
        assert machine_history_records(tracked_job.uri, BROKEN_MACHINE) == [good]
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert "has 2 unreadable history_record.json record(s)" in warning


def test_a_store_that_cannot_be_read_leaves_the_file_with_one_redacted_warning(tracked_job, tmp_path, caplog):
    cache_dir = Path(tracked_job.cfg.data.cache_dir)
    with caplog.at_level(logging.WARNING):
        history = history_of(tracked_job, cache_dir, "unknown-scheme://alice:SECRET@store.example/db")
    assert history.records == (json.loads(tracked_job.line),)
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert "alice:***@store.example" in warning and "SECRET" not in warning
    assert warning.endswith("the machine's history is read from its file alone")


def test_a_missing_sqlite_store_has_no_records_and_is_not_created(tracked_job, tmp_path, caplog):
    database = tmp_path / "mlflow.db"
    with caplog.at_level(logging.WARNING):
        assert history_of(tracked_job, tmp_path, f"sqlite:///{database}").records == ()
    assert not database.exists() and not caplog.records


def test_a_job_whose_mlflow_run_could_not_be_created_does_not_search_the_store(tmp_path, caplog):
    # The failed run's warning says what is wrong with the store; searching it too would say it twice.
    cfg = tiny_mlp_config(
        tmp_path,
        "epochs=2",
        f"data.cache_dir={tmp_path / 'cache'}",
        "tracking.enabled=true",
        "tracking.uri=unknown-scheme://store",
    )
    with caplog.at_level(logging.WARNING):
        assert runner_module.run(cfg, RunContext(run_dir=tmp_path / "run")) == 0
    assert read_report(Path(cfg.output)).run.mlflow_run_id is None
    assert not [r for r in caplog.records if r.name == "gpubench.output.history"]
