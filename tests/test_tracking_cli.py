"""``python -m gpubench`` with tracking on, end to end in a temp folder (issue 14, items 5, 6 and 9): a credential in
``tracking.uri`` is nowhere in clear text, an unreachable server costs seconds and one complete warning, and a
tracked run is a live MLflow run that spans the benchmark and carries the decision."""

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

FAST = [
    "hardware=cpu",
    "model=mlp",
    "epochs=3",
    "warmup_epochs=1",
    "data.days=3",
    "data.symbols=[SYNA,SYNB]",
    "epoch.min_seconds=0.1",
    "hardware.burn_in_max_seconds=0",
]
SECRET = "SECRETPW42"


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("cache")


def gpubench(cwd: Path, cache: Path, *args: str) -> subprocess.CompletedProcess:
    # The user's own MLflow settings must not change what is tested: the store and the HTTP retry defaults.
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    environment = {**inherited, "OMP_NUM_THREADS": "1", "GPU_BENCHMARK_CACHE_DIR": str(cache)}
    return subprocess.run(
        [sys.executable, "-m", "gpubench", *args],
        cwd=cwd,
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
    )


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.slow
def test_credentials_in_the_tracking_uri_never_appear_and_a_dead_server_costs_seconds(tmp_path, cache_dir):
    port = closed_port()
    uri = f"http://alice:{SECRET}@127.0.0.1:{port}"
    started = time.monotonic()
    completed = gpubench(tmp_path, cache_dir, *FAST, f"tracking.uri={uri}")
    elapsed_s = time.monotonic() - started
    assert completed.returncode == 0, completed.stderr
    # MLflow's default retries made this 257 s longer than the run; the run itself takes well under a minute here.
    assert elapsed_s < 120
    warning = next(line for line in completed.stderr.splitlines() if "MLflow tracking at" in line)
    assert warning == (
        f"gpubench: MLflow tracking at 'http://alice:***@127.0.0.1:{port}' failed while creating the run (cannot "
        "reach it: ConnectionRefusedError: [Errno 111] Connection refused); nothing more is logged to MLflow for "
        "this job, and the JSON report is still written. Fix tracking.uri or run with tracking.enabled=false."
    )
    assert SECRET not in completed.stdout + completed.stderr
    (run_dir,) = (tmp_path / "outputs").glob("*/*")
    written = [path for path in tmp_path.rglob("*") if path.is_file() and cache_dir not in path.parents]
    hydra_files = {path.name for path in (run_dir / ".hydra").iterdir()}
    assert {"config.yaml", "overrides.yaml", "hydra.yaml"} <= hydra_files
    for path in written:
        assert SECRET.encode() not in path.read_bytes(), path
    report = json.loads((run_dir / "report.json").read_text())
    assert report["status"] == "complete"
    assert f"tracking.uri=http://alice:***@127.0.0.1:{port}" in report["run"]["overrides"]
    assert f"uri: http://alice:***@127.0.0.1:{port}" in (run_dir / "config_resolved.yaml").read_text()
    assert f"http://alice:***@127.0.0.1:{port}" in (run_dir / ".hydra" / "overrides.yaml").read_text()


def test_a_tracked_run_spans_the_benchmark_and_carries_the_decision(tracked_mlp_job):
    # The session's tracked job (tests/conftest.py): 6 epochs after 1 warmup, 99.5% intervals, the default store.
    from mlflow.tracking import MlflowClient

    completed = tracked_mlp_job.completed
    assert completed.returncode == 0, completed.stderr
    assert "99.5% CI (t)" in completed.stdout
    report = json.loads(tracked_mlp_job.report_path().read_text())
    client = MlflowClient(tracking_uri=f"sqlite:///{tracked_mlp_job.folder / 'mlruns' / 'mlflow.db'}")
    run = client.get_run(report["run"]["mlflow_run_id"])
    assert run.info.status == "FINISHED"
    mlp = report["models"]["mlp"]
    # Created at the job's start: the run lasts at least as long as the epochs it measured (it lasted 26-116 ms
    # when it was created after the benchmark).
    measured_ms = sum(mlp["raw_epoch_times_ms"]) + sum(mlp["warmup_epoch_times_ms"])
    assert run.info.end_time - run.info.start_time >= measured_ms
    history = sorted(client.get_metric_history(run.info.run_id, "mlp/epoch_time_ms"), key=lambda m: m.step)
    assert [m.step for m in history] == [0, 1, 2, 3, 4, 5]
    assert [m.value for m in history] == pytest.approx(mlp["raw_epoch_times_ms"])
    recommendation = report["recommendation"]
    assert run.data.tags["gpubench.decision"] == (recommendation["decision"] or "none")
    assert run.data.tags["gpubench.decision_basis"] == recommendation["decision_basis"]
    assert run.data.metrics["recommendation/estimated_hours"] == pytest.approx(
        recommendation["estimated_full_training_hours"]
    )
    experiment = client.get_experiment(run.info.experiment_id)
    assert experiment.artifact_location == (tracked_mlp_job.folder / "mlruns" / "artifacts").as_uri()


@pytest.mark.slow
def test_ctrl_c_ends_the_mlflow_run_killed_with_the_partial_report(tmp_path, cache_dir):
    import signal

    from mlflow.tracking import MlflowClient

    inherited = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    environment = {**inherited, "OMP_NUM_THREADS": "1", "GPU_BENCHMARK_CACHE_DIR": str(cache_dir)}
    args = [*FAST, "epochs=500", "model.names=[mlp]"]
    stderr_path = tmp_path / "stderr.txt"
    with stderr_path.open("w") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "gpubench", *args],
            cwd=tmp_path,
            env=environment,
            stdout=subprocess.PIPE,
            stderr=stderr,
        )
        try:
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline and "mlp measured epoch 3/" not in stderr_path.read_text():
                assert process.poll() is None, stderr_path.read_text()
                time.sleep(0.2)
            process.send_signal(signal.SIGINT)
            process.communicate(timeout=120)
        finally:
            if process.poll() is None:
                process.kill()
    assert process.returncode == 130, stderr_path.read_text()
    assert "Traceback" not in stderr_path.read_text()
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlruns' / 'mlflow.db'}")
    (run,) = client.search_runs([client.get_experiment_by_name("gpubench").experiment_id])
    assert run.info.status == "KILLED" and run.data.tags["gpubench.status"] == "interrupted"
    assert "report.json" in {a.path for a in client.list_artifacts(run.info.run_id)}
