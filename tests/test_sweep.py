"""Sweep summaries: aggregation from hand-made job folders, the Hydra callback's hooks, the MLflow parent run, and a
real CLI sweep with a failing job. The callback on a real successful sweep (and its MLflow UI) is in
test_mlflow_ui.py."""

import csv
import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from unittest import mock

import pytest
from hydra.core.utils import JobReturn, JobStatus
from hydra.types import RunMode
from omegaconf import OmegaConf

from gpubench.output import sweep
from gpubench.output.config import TrackingConfig
from gpubench.output.sweep_run import PARENT_RUN_FILE, sweep_job
from gpubench.output.tracking import LiveRun, RunRecord, SweepJob, job_tags, starting_run_name
from gpubench.results import CostRow, HardwareReport, ModelResult, RunInfo, RunReport
from gpubench.stats.epoch_times import summarize_epoch_times

COMMON = ["model=mlp", "epochs=4", "hardware=cpu"]


def report(times_ms: list[float] | None, *, status: str = "ok", run_id: str | None = None) -> RunReport:
    """A complete report with one model (``mlp``), as the runner writes it."""
    result = ModelResult(
        status=status,
        error="RuntimeError: boom" if status == "failed" else None,
        batch_size=256,
        steps_per_epoch=5,
        samples_per_step=256.0,
        raw_epoch_times_ms=times_ms or [],
        statistics=summarize_epoch_times(times_ms, confidence_level=0.9) if times_ms else None,
    )
    run = RunInfo(
        device="cpu",
        models=["mlp"],
        epochs=4,
        warmup_epochs=0,
        precision="fp32",
        compile="false",
        seed=0,
        mlflow_run_id=run_id,
    )
    started = RunReport.start(run, HardwareReport(measured_on="cpu", device_name="cpu"), None)
    return replace(started, status="complete", models={"mlp": result})


def make_job(sweep_dir: Path, num: int, overrides: list[str], content: RunReport | None) -> Path:
    """A job folder as Hydra and the runner leave it: ``.hydra/overrides.yaml``, ``.hydra/hydra.yaml`` and the
    report (none when ``content`` is None)."""
    job_dir = sweep_dir / str(num)
    (job_dir / ".hydra").mkdir(parents=True)
    OmegaConf.save(OmegaConf.create(overrides), job_dir / ".hydra" / "overrides.yaml")
    OmegaConf.save(OmegaConf.create({"hydra": {"job": {"num": num}}}), job_dir / ".hydra" / "hydra.yaml")
    if content is not None:
        (job_dir / "report.json").write_text(json.dumps(content.to_dict()))
    return job_dir


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def test_two_ok_jobs_and_one_without_a_report_give_three_rows_and_a_listed_failure(tmp_path):
    fast, slow = [10.0, 11.0, 10.4, 10.2], [20.0, 21.0, 19.5, 20.4]
    make_job(tmp_path, 0, [*COMMON, "batch.max_size=256"], report(fast))
    make_job(tmp_path, 1, [*COMMON, "batch.max_size=1024"], report(slow))
    make_job(tmp_path, 2, [*COMMON, "batch.max_size=4096"], None)

    summary = sweep.write_sweep_summary(tmp_path)

    assert summary.varying_keys == ["batch.max_size"]
    assert [job["job_num"] for job in summary.failed_jobs] == [2]
    rows = read_csv(tmp_path / sweep.SWEEP_CSV_FILE)
    assert [(r["job_num"], r["job_status"], r["batch.max_size"]) for r in rows] == [
        ("0", "ok", "256"),
        ("1", "ok", "1024"),
        ("2", "failed", "4096"),
    ]
    # Every override is a column, the constant ones too; the figures are the report's, at full precision.
    assert all(r["model"] == "mlp" and r["epochs"] == "4" and r["hardware"] == "cpu" for r in rows)
    assert float(rows[0]["mean_epoch_time_ms"]) == sum(fast) / 4
    assert float(rows[1]["mean_epoch_time_ms"]) == sum(slow) / 4
    expected_ci = summarize_epoch_times(slow, confidence_level=0.9).confidence_interval_ms
    assert [float(rows[1]["ci_low_ms"]), float(rows[1]["ci_high_ms"])] == list(expected_ci)
    assert rows[0]["confidence_level"] == "0.9" and rows[0]["model_name"] == "mlp" and rows[0]["model_status"] == "ok"
    assert rows[2]["model_name"] == "" and rows[2]["mean_epoch_time_ms"] == ""
    assert "no readable report" in rows[2]["job_error"]

    markdown = (tmp_path / sweep.SWEEP_MARKDOWN_FILE).read_text()
    table = [line for line in markdown.splitlines() if line.startswith("| ")]
    assert table[0].startswith("| job | job status | batch.max_size | model |")
    assert table[1].startswith("| 0 | ok | 256 | mlp | ok | 10.4 |")
    assert table[3].startswith("| 2 | failed | 4096 | – |")
    assert "3 jobs: 2 ok, 1 failed." in markdown
    assert "Common overrides: `model=mlp` `epochs=4` `hardware=cpu`" in markdown
    failures = markdown.split("## Failed jobs")[1]
    assert "job 2 (`model=mlp epochs=4 hardware=cpu batch.max_size=4096`)" in failures
    assert "job 0" not in failures and "job 1" not in failures


def test_jobs_whose_epochs_differ_in_steps_are_compared_per_sample(tmp_path):
    # Job 1's epochs take twice as long as job 0's, but hold four times the steps: per sample it is the faster.
    small = report([10.0, 11.0, 10.4, 10.2])
    large = report([20.0, 21.0, 20.4, 20.2])
    large = replace(large, models={"mlp": replace(large.models["mlp"], steps_per_epoch=20, sample_unit="samples")})
    make_job(tmp_path, 0, [*COMMON, "batch.max_size=256"], small)
    make_job(tmp_path, 1, [*COMMON, "batch.max_size=1024"], large)
    sweep.write_sweep_summary(tmp_path)
    rows = read_csv(tmp_path / sweep.SWEEP_CSV_FILE)
    # Mean epoch over the epoch's samples (steps × 256 samples per step), in µs.
    assert [(r["steps_per_epoch"], r["sample_unit"]) for r in rows] == [("5", ""), ("20", "samples")]
    per_sample_us = [float(r["time_per_sample_us"]) for r in rows]
    assert per_sample_us == pytest.approx([10.4 * 1000 / (5 * 256), 20.4 * 1000 / (20 * 256)], rel=1e-12)
    table = [line for line in (tmp_path / sweep.SWEEP_MARKDOWN_FILE).read_text().splitlines() if "| ok |" in line]
    assert table[0].startswith("| 0 | ok | 256 | mlp | ok | 10.4 | 5 | 8.125 | ")
    assert table[1].startswith("| 1 | ok | 1024 | mlp | ok | 20.4 | 20 | 3.984 | ")


def test_a_failed_model_fails_its_job_but_an_out_of_memory_model_does_not(tmp_path):
    make_job(tmp_path, 0, ["batch.min_size=99999"], report(None, status="oom"))
    make_job(tmp_path, 1, ["batch.min_size=32"], report(None, status="failed"))
    jobs = {job["job_num"]: job for job in sweep.write_sweep_summary(tmp_path).jobs}
    assert jobs[0]["status"] == "ok" and jobs[0]["models"]["mlp"]["model_status"] == "oom"
    assert jobs[1]["status"] == "failed" and jobs[1]["job_error"] == "model mlp failed: RuntimeError: boom"


def test_a_job_still_running_after_the_sweep_is_failed_even_with_a_complete_report(tmp_path):
    job_dir = make_job(tmp_path, 0, COMMON, report([10.0, 11.0]))
    running = {"job_num": 0, "overrides": COMMON, "status": "running", "started_at": "2026-01-01T00:00:00+00:00"}
    (job_dir / sweep.JOB_SUMMARY_FILE).write_text(json.dumps(running))
    (job,) = sweep.write_sweep_summary(tmp_path).jobs
    assert job["status"] == "failed" and job["job_error"].startswith("the job did not finish")
    assert job["started_at"] == running["started_at"] and job["models"]["mlp"]["model_status"] == "ok"


def test_an_incomplete_or_unreadable_report_fails_the_job(tmp_path):
    interrupted = replace(report([10.0, 11.0]), status="interrupted")
    make_job(tmp_path, 0, ["seed=1"], interrupted)
    (make_job(tmp_path, 1, ["seed=2"], None) / "report.json").write_text('{"status": "comp')
    (make_job(tmp_path, 2, ["seed=3"], None) / "report.json").write_text('{"status": "complete"}')
    jobs = sweep.write_sweep_summary(tmp_path).jobs
    assert jobs[0]["job_error"] == "report status is 'interrupted', not 'complete'"
    assert jobs[1]["job_error"].startswith("no readable report at") and "is not valid JSON" in jobs[1]["job_error"]
    assert jobs[2]["job_error"].startswith("no readable report at") and "not a gpubench report" in jobs[2]["job_error"]
    assert jobs[2]["models"] == {} and jobs[2]["mlflow_run_id"] is None


def test_overrides_keep_their_keys_without_hydra_prefixes():
    jobs = [
        {"status": "ok", "overrides": ["+extra.key=1", "~tracking", "data.symbols=[A,B]", "output=a=b.json"]},
        {"status": "ok", "overrides": ["++extra.key=2"]},
    ]
    rows, keys, varying = sweep.sweep_rows(jobs)
    assert keys == ["extra.key", "tracking", "data.symbols", "output"]
    assert rows[0]["tracking"] == "(deleted)" and rows[0]["output"] == "a=b.json"
    assert rows[1]["extra.key"] == "2" and rows[1]["data.symbols"] == ""
    assert varying == keys


# --------------------------------------------------------------------------------------------------- callback


def hydra_config(tmp_path: Path, num: int = 0, mode: RunMode = RunMode.MULTIRUN, overrides=("seed=1",)):
    """The parts of a composed job config the callback reads."""
    return OmegaConf.create(
        {
            "output": str(tmp_path / str(num) / "report.json"),
            "tracking": {"enabled": False, "uri": f"sqlite:///{tmp_path / 'db'}", "experiment": "t"},
            "hydra": {
                "mode": mode,
                "sweep": {"dir": str(tmp_path)},
                "runtime": {"output_dir": str(tmp_path / str(num))},
                "job": {"num": num},
                "overrides": {"task": list(overrides)},
            },
        }
    )


def job_return(status: JobStatus, value: object) -> JobReturn:
    returned = JobReturn(status=status)
    returned.return_value = value
    return returned


def run_job(callback, tmp_path: Path, num: int, content: RunReport | None, returned: JobReturn) -> dict:
    """What Hydra does around one job: on_job_start, the job writes its report, on_job_end."""
    config = hydra_config(tmp_path, num, overrides=(f"seed={num}",))
    callback.on_job_start(config=config, task_function=None)
    started = json.loads((tmp_path / str(num) / sweep.JOB_SUMMARY_FILE).read_text())
    assert started["status"] == "running" and started["overrides"] == [f"seed={num}"]
    if content is not None:
        (tmp_path / str(num) / "report.json").write_text(json.dumps(content.to_dict()))
    callback.on_job_end(config=config, job_return=returned)
    return json.loads((tmp_path / str(num) / sweep.JOB_SUMMARY_FILE).read_text())


def test_on_job_end_records_success_an_exception_and_an_exit_code(tmp_path):
    callback = sweep.SweepSummaryCallback()
    ok = run_job(callback, tmp_path, 0, report([10.0, 12.0], run_id="abc"), job_return(JobStatus.COMPLETED, None))
    assert ok["status"] == "ok" and ok["job_error"] is None and ok["mlflow_run_id"] == "abc"
    assert ok["models"]["mlp"]["mean_epoch_time_ms"] == 11.0 and ok["started_at"]

    raised = run_job(callback, tmp_path, 1, None, job_return(JobStatus.FAILED, ValueError("bad window")))
    assert raised["status"] == "failed"
    assert raised["job_error"].startswith("ValueError: bad window; no readable report at")

    exited = run_job(callback, tmp_path, 2, report([10.0, 12.0]), job_return(JobStatus.COMPLETED, 2))
    assert exited["status"] == "failed" and exited["exit_code"] == 2
    assert exited["job_error"].startswith("exit code 2 (bad input")


def test_a_single_run_writes_no_job_summary(tmp_path):
    callback = sweep.SweepSummaryCallback()
    config = hydra_config(tmp_path, mode=RunMode.RUN)
    callback.on_job_start(config=config, task_function=None)
    callback.on_job_end(config=config, job_return=job_return(JobStatus.COMPLETED, None))
    assert not (tmp_path / "0").exists()


def test_multirun_end_writes_the_summary_once_and_exits_1_when_a_job_failed(tmp_path):
    callback = sweep.SweepSummaryCallback()
    sweep_config = hydra_config(tmp_path)
    with mock.patch.object(sweep, "atexit") as fake_atexit:
        callback.on_multirun_start(config=sweep_config)
        fake_atexit.register.assert_called_once_with(callback._finish, aborted=True)
        run_job(callback, tmp_path, 0, report([10.0, 12.0]), job_return(JobStatus.COMPLETED, None))
        run_job(callback, tmp_path, 1, None, job_return(JobStatus.FAILED, ValueError("x")))
        with pytest.raises(SystemExit) as exited:
            callback.on_multirun_end(config=sweep_config)
        fake_atexit.unregister.assert_called_once_with(callback._finish)
    assert exited.value.code == 1
    assert [r["job_status"] for r in read_csv(tmp_path / sweep.SWEEP_CSV_FILE)] == ["ok", "failed"]
    # The exit handler finds the work done and does nothing (no second summary, no second parent run).
    (tmp_path / sweep.SWEEP_CSV_FILE).unlink()
    assert callback._finish(aborted=True) is None
    assert not (tmp_path / sweep.SWEEP_CSV_FILE).exists()


def test_multirun_end_returns_normally_when_every_job_is_ok(tmp_path):
    callback = sweep.SweepSummaryCallback()
    with mock.patch.object(sweep, "atexit"):
        callback.on_multirun_start(config=hydra_config(tmp_path))
        run_job(callback, tmp_path, 0, report([10.0, 12.0]), job_return(JobStatus.COMPLETED, 0))
        callback.on_multirun_end(config=hydra_config(tmp_path))
    assert "1 jobs: 1 ok, 0 failed." in (tmp_path / sweep.SWEEP_MARKDOWN_FILE).read_text()


# --------------------------------------------------------------------------------------------------- MLflow


def tracked(config, tmp_path: Path, uri: str | None = None):
    """``config`` with tracking on, into the SQLite store ``mlflow.db`` under ``tmp_path`` (or ``uri``)."""
    store = {"uri": uri or f"sqlite:///{tmp_path / 'mlflow.db'}", "artifact_location": str(tmp_path / "art")}
    return OmegaConf.merge(config, {"tracking": {"enabled": True, "experiment": "t", **store}})


SWEPT = ("model=mlp", "statistics.confidence_level=0.9,0.99")


def start_job(tmp_path: Path, num: int, overrides: list[str], settings: TrackingConfig) -> LiveRun:
    """A job's run as the runner starts it: the sweep's parent read from the sweep folder, the start tags and name."""
    job = sweep_job(str(tmp_path), num, overrides, settings)
    name = starting_run_name(["mlp"], {}, job)
    return LiveRun.start(settings, run_name=name, params={}, tags=job_tags(["mlp"], "0.1.0", sweep=job))


def test_the_parent_run_exists_from_the_sweeps_start_and_each_job_is_nested_as_it_starts(tmp_path):
    from mlflow.tracking import MlflowClient

    callback = sweep.SweepSummaryCallback()
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    settings = TrackingConfig(uri=uri, artifact_location=str(tmp_path / "art"), experiment="t")
    with mock.patch.object(sweep, "atexit"):
        callback.on_multirun_start(config=tracked(hydra_config(tmp_path, overrides=SWEPT), tmp_path))
        parent_file = json.loads((tmp_path / PARENT_RUN_FILE).read_text())
        assert parent_file["swept_keys"] == ["statistics.confidence_level"]
        client = MlflowClient(tracking_uri=settings.uri)
        parent = client.get_run(parent_file["run_id"])
        assert (
            parent.info.status == "RUNNING" and parent.info.run_name == "sweep · statistics.confidence_level=0.9,0.99"
        )
        # Job 0 runs: nested from its start, its name saying which value it sweeps.
        live = start_job(tmp_path, 0, ["model=mlp", "statistics.confidence_level=0.9"], settings)
        child = client.get_run(live.run_id)
        assert child.data.tags["mlflow.parentRunId"] == parent.info.run_id
        assert child.info.run_name == "statistics.confidence_level=0.9 · mlp · running"
        assert client.get_run(parent.info.run_id).info.status == "RUNNING"
        live.finish(RunRecord(run_name="mlp · CPU · LOCAL 0.1 h"), "FINISHED")
        run_job(callback, tmp_path, 0, report([10.0, 12.0], run_id=live.run_id), job_return(JobStatus.COMPLETED, 0))
        # Job 1 fails before it writes a report: the sweep is FAILED, as its exit code 1 says.
        run_job(callback, tmp_path, 1, None, job_return(JobStatus.FAILED, ValueError("x")))
        with pytest.raises(SystemExit):
            callback.on_multirun_end(config=tracked(hydra_config(tmp_path, overrides=SWEPT), tmp_path))
    ended = client.get_run(parent.info.run_id)
    assert ended.info.status == "FAILED" and ended.data.tags["gpubench.sweep_status"] == "partial"
    assert ended.info.run_name == "sweep · statistics.confidence_level=0.9,0.99 · 1/2 jobs ok"
    assert ended.data.metrics == {"sweep/jobs": 2.0, "sweep/jobs_ok": 1.0, "sweep/jobs_failed": 1.0}
    assert ended.data.tags["mlflow.note.content"] == (tmp_path / sweep.SWEEP_MARKDOWN_FILE).read_text()
    assert ended.info.end_time >= client.get_run(live.run_id).info.end_time >= ended.info.start_time
    artifacts = {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert artifacts == {sweep.SWEEP_CSV_FILE, sweep.SWEEP_MARKDOWN_FILE}


def test_a_job_is_nested_only_under_a_parent_in_its_own_store_and_experiment(tmp_path):
    settings = TrackingConfig(uri=f"sqlite:///{tmp_path / 'mlflow.db'}", experiment="t")
    saved = {"run_id": "p" * 32, "store": f"sqlite:///{tmp_path / 'mlflow.db'}", "experiment": "t"}
    (tmp_path / PARENT_RUN_FILE).write_text(json.dumps({**saved, "swept_keys": ["seed"]}))
    job = sweep_job(str(tmp_path), 3, ["model=mlp", "seed=2"], settings)
    assert job == SweepJob(str(tmp_path), 3, "p" * 32, ("seed=2",))
    other = TrackingConfig(uri=f"sqlite:///{tmp_path / 'other.db'}", experiment="t")
    assert sweep_job(str(tmp_path), 3, ["seed=2"], other).parent_run_id is None
    assert sweep_job(str(tmp_path), 3, ["seed=2"], replace(settings, experiment="u")).parent_run_id is None
    # Without the file (the parent could not be created) the job is a sweep's job all the same, named by number.
    (tmp_path / PARENT_RUN_FILE).unlink()
    job = sweep_job(str(tmp_path), 3, ["seed=2"], settings)
    assert job == SweepJob(str(tmp_path), 3) and starting_run_name(["mlp"], {}, job) == "job 3 · mlp · running"


def test_a_launch_forgets_an_earlier_launchs_parent_and_a_tracking_failure_is_a_notice(tmp_path, capsys):
    (tmp_path / PARENT_RUN_FILE).write_text(json.dumps({"run_id": "old"}))
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    config = tracked(hydra_config(tmp_path, overrides=SWEPT), tmp_path, uri=f"sqlite:///{blocker}/mlflow.db")
    callback = sweep.SweepSummaryCallback()
    with mock.patch.object(sweep, "atexit"):
        callback.on_multirun_start(config=config)
        assert not (tmp_path / PARENT_RUN_FILE).exists()
        assert "the sweep runs and its summary files are written" in capsys.readouterr().err
        run_job(callback, tmp_path, 0, report([10.0, 12.0]), job_return(JobStatus.COMPLETED, 0))
        callback.on_multirun_end(config=config)
    assert "the summary files were written" in capsys.readouterr().err
    assert (tmp_path / sweep.SWEEP_MARKDOWN_FILE).exists()


# --------------------------------------------------------------------------------------------------- real sweep


@pytest.mark.slow
@pytest.mark.parametrize("launcher", ["basic", "joblib"])
def test_cli_sweep_with_a_failing_job_still_writes_the_summary_and_exits_1(tmp_path, launcher):
    # Job 1's TFT window is longer than the data: bad input, refused before measuring (exit 2, no report); the sweep
    # exits 1 and job 0 keeps its results.
    # With joblib the jobs run in worker processes: the summary can only come from the files they wrote.
    env = {**os.environ, "OMP_NUM_THREADS": "1", "GPU_BENCHMARK_CACHE_DIR": str(tmp_path / "cache")}
    launcher_args = ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"] if launcher == "joblib" else []
    args = [
        "-m",
        *launcher_args,
        "model.names=[mlp],[tft]",
        "workloads.tft.encoder_length=100000",
        "epochs=2",
        "warmup_epochs=0",
        "tracking=none",
        "hardware=cpu",
        "data.days=3",
        "data.symbols=[SYNA,SYNB]",
        "hardware.burn_in_max_seconds=0",
        "epoch.min_seconds=0.05",
    ]
    completed = subprocess.run(
        [sys.executable, "-m", "gpubench", *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert completed.returncode == 1, completed.stderr
    (sweep_dir,) = (tmp_path / "multirun").glob("*/*")
    rows = read_csv(sweep_dir / sweep.SWEEP_CSV_FILE)
    assert [(r["job_num"], r["model.names"], r["job_status"], r["model_status"]) for r in rows] == [
        ("0", "[mlp]", "ok", "ok"),
        ("1", "[tft]", "failed", ""),
    ]
    assert "exit code 2 (bad input" in rows[1]["job_error"] and "no readable report" in rows[1]["job_error"]
    assert float(rows[0]["mean_epoch_time_ms"]) > 0
    assert "Sweep summary:" in completed.stderr
    assert "## Failed jobs" in (sweep_dir / sweep.SWEEP_MARKDOWN_FILE).read_text()


def test_the_summary_shows_the_cheapest_rental_that_fits(tmp_path):
    fixture = Path(__file__).parent / "fixtures" / "report_main_1092cdc_cpu_quick.json"
    decided = RunReport.from_dict(json.loads(fixture.read_text()))

    def row(gpu: str, usd: float, fits: bool | None) -> CostRow:
        return CostRow(
            gpu, "runpod", False, 1, 1, fits, 2.0, 1.5, 2.5, usd, usd * 0.75, usd * 1.25, "2026-09-25", usd / 2.0,
            "https://example.org", "1x", "secure",
        )  # fmt: skip

    table = [row("t4", 0.5, False), row("l40s", 1.58, True), row("h100", 5.38, None)]
    make_job(
        tmp_path,
        0,
        [*COMMON, "seed=1"],
        replace(decided, recommendation=replace(decided.recommendation, cost_table=table)),
    )
    sweep.write_sweep_summary(tmp_path)
    rows = read_csv(tmp_path / sweep.SWEEP_CSV_FILE)  # one per model, the job's columns repeated
    first = rows[0]
    assert {row["cheapest_rental"] for row in rows} == {"l40s at runpod (on-demand)"}
    assert first["cheapest_rental"] == "l40s at runpod (on-demand)" and float(first["cheapest_rental_usd"]) == 1.58
    assert "| l40s at runpod (on-demand): 1.58 |" in (tmp_path / sweep.SWEEP_MARKDOWN_FILE).read_text()


def test_the_summary_has_the_decision_columns_and_no_credentials(tmp_path):
    # Issue 14: the sweep summary had no decision column; a credential in an override must not reach it either.
    fixture = Path(__file__).parent / "fixtures" / "report_main_1092cdc_cpu_quick.json"
    decided = RunReport.from_dict(json.loads(fixture.read_text()))
    recommendation = decided.recommendation
    secret_uri = "tracking.uri=http://alice:SECRETPW42@127.0.0.1:5000"
    make_job(tmp_path, 0, [*COMMON, secret_uri, "seed=1"], decided)
    make_job(tmp_path, 1, [*COMMON, secret_uri, "seed=2"], report([10.0, 11.0, 10.4, 10.2]))
    sweep.write_sweep_summary(tmp_path)
    rows = read_csv(tmp_path / sweep.SWEEP_CSV_FILE)
    first = rows[0]
    assert first["decision"] == recommendation.decision == "LOCAL_GPU_VIABLE"
    assert float(first["estimated_hours"]) == recommendation.estimated_full_training_hours
    assert float(first["estimated_hours_upper"]) == recommendation.estimated_full_training_hours_upper
    cost = recommendation.cost_analysis.cloud_cost_usd_per_training
    assert float(first["cloud_cost_usd_per_training"]) == cost
    # A report without a recommendation leaves the decision cells empty.
    assert rows[-1]["decision"] == "" and rows[-1]["estimated_hours"] == ""
    assert {row["tracking.uri"] for row in rows} == {"http://alice:***@127.0.0.1:5000"}
    markdown = (tmp_path / sweep.SWEEP_MARKDOWN_FILE).read_text()
    header = next(line for line in markdown.splitlines() if line.startswith("| job"))
    assert header.endswith("| decision | training time (bounds) | cloud USD | cheapest rental (USD) |")
    # This report predates the lower bound: its upper bound alone is shown, in hours with two decimals as the console
    # shows them (3.2446 h, at most 4.7967 h); and the cost table: no rental.
    assert f"| LOCAL_GPU_VIABLE | 3.24 h (≤ 4.80 h) | {cost:.4g} | – |" in markdown
    for path in tmp_path.rglob("*"):
        if path.is_file() and path.name.startswith("sweep_summary"):
            assert "SECRETPW42" not in path.read_text(), path


def test_an_interrupted_sweep_blames_the_interrupt_and_leaves_no_job_running(tmp_path):
    import signal

    finished = make_job(tmp_path, 0, [*COMMON, "seed=1"], report([10.0, 11.0]))
    cut = make_job(tmp_path, 1, [*COMMON, "seed=2"], replace(report([10.0, 11.0]), status="interrupted"))
    for job_dir, num in ((finished, 0), (cut, 1)):
        running = {"job_num": num, "overrides": [*COMMON, f"seed={num + 1}"], "status": "running"}
        (job_dir / sweep.JOB_SUMMARY_FILE).write_text(json.dumps(running))
    jobs = sweep.write_sweep_summary(tmp_path, aborted=True, interrupted_by=int(signal.SIGTERM)).jobs
    # The signal came after job 0's report was complete: its work is whole.
    assert jobs[0]["status"] == "ok" and jobs[0]["job_error"] is None
    assert jobs[1]["status"] == "failed"
    assert jobs[1]["job_error"] == (
        "interrupted by SIGTERM while the job ran; report status is 'interrupted', not 'complete'"
    )
    markdown = (tmp_path / sweep.SWEEP_MARKDOWN_FILE).read_text()
    assert "sys.exit" not in markdown and "killed for time or memory" not in markdown
    # Nothing is left `running` on disk.
    for job_dir, status in ((finished, "ok"), (cut, "failed")):
        assert json.loads((job_dir / sweep.JOB_SUMMARY_FILE).read_text())["status"] == status


@pytest.mark.parametrize(("code", "meaning"), [(130, "SIGINT"), (143, "SIGTERM"), (129, "SIGHUP")])
def test_a_job_that_returned_a_signals_exit_code_is_said_interrupted_by_it(tmp_path, code, meaning):
    make_job(tmp_path, 0, COMMON, replace(report([10.0, 11.0]), status="interrupted"))
    summary = sweep.job_summary(
        job_num=0,
        overrides=COMMON,
        output_dir=tmp_path / "0",
        report_path=tmp_path / "0" / "report.json",
        exit_code=code,
    )
    assert summary["job_error"].startswith(f"exit code {code} (interrupted by {meaning})")
