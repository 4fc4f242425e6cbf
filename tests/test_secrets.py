"""No secret leaves gpubench (issue 23): against a real ``mlflow server`` on 127.0.0.1, with the tracking URI's
password, a ``?token=`` query and ``DATABENTO_API_KEY`` given, a tracked run, an interrupted run, a sweep and two
runs stopped by a bad value leave none of them in stdout, stderr, the job logs, ``.hydra/``, the reports, the
resolved configs, the sweep summaries, or the server's store (MLflow params, tags and artifacts)."""

import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

PASSWORD, TOKEN, API_KEY = "SECRETPW42", "TOKEN4242", "db-SECRETKEY1234567890"
SECRETS = (PASSWORD, TOKEN, API_KEY)
RUN = ["hardware=cpu", "experiment=quick", "model=mlp", "data.days=3", "hardware.burn_in_max_seconds=0"]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def mlflow_server(tmp_path_factory) -> tuple[int, Path]:
    """A real ``mlflow server`` on 127.0.0.1 (its port, and the folder of its store and artifacts), one worker,
    no job runner: up in about 20 s here."""
    folder, port = tmp_path_factory.mktemp("mlflow_server"), free_port()
    command = ["mlflow", "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1"]
    command += ["--backend-store-uri", f"sqlite:///{folder / 'store.db'}", "--artifacts-destination", str(folder / "a")]
    environment = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    log = (folder / "server.log").open("w")
    server = subprocess.Popen(
        command,
        cwd=folder,
        env={**environment, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"},
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group: the uvicorn worker ends with it
    )
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
                break
            except OSError:
                assert server.poll() is None and time.monotonic() < deadline, (folder / "server.log").read_text()
                time.sleep(0.25)
        yield port, folder
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
        log.close()


def gpubench(cwd: Path, *args: str, signal_after: str | None = None) -> subprocess.CompletedProcess:
    """``python -m gpubench *args`` in ``cwd`` with ``DATABENTO_API_KEY`` set; with ``signal_after``, SIGTERM once
    stderr shows that text."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_") and k != "HYDRA_FULL_ERROR"}
    environment.update(
        {"OMP_NUM_THREADS": "1", "GPU_BENCHMARK_CACHE_DIR": str(cwd.parent / "cache"), "DATABENTO_API_KEY": API_KEY}
    )
    stdout_path, stderr_path = cwd / f"stdout-{len(list(cwd.glob('stdout-*')))}.txt", cwd / "stderr-current.txt"
    with stdout_path.open("w") as stdout, stderr_path.open("w") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "gpubench", *args], cwd=cwd, env=environment, stdout=stdout, stderr=stderr
        )
        try:
            if signal_after is not None:
                deadline = time.monotonic() + 300
                while signal_after not in stderr_path.read_text():
                    assert process.poll() is None and time.monotonic() < deadline, stderr_path.read_text()[-3000:]
                    time.sleep(0.2)
                process.send_signal(signal.SIGTERM)
            process.wait(timeout=600)
        finally:
            if process.poll() is None:
                process.kill()
    completed = subprocess.CompletedProcess(
        process.args, process.returncode, stdout_path.read_text(), stderr_path.read_text()
    )
    stderr_path.rename(stdout_path.with_name(stdout_path.name.replace("stdout", "stderr")))
    return completed


def leaked(folder: Path) -> dict[str, list[str]]:
    """Per secret, the files under ``folder`` whose bytes hold it (a SQLite store included)."""
    found: dict[str, list[str]] = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        content = path.read_bytes()
        for secret in SECRETS:
            if secret.encode() in content:
                found.setdefault(secret, []).append(str(path))
    return found


@dataclass(frozen=True)
class SecretRuns:
    """The five runs of :func:`secret_runs`: the folder they ran in, the server's port and folder, and each one's
    process."""

    work: Path
    port: int
    server_folder: Path
    tracked: subprocess.CompletedProcess
    interrupted: subprocess.CompletedProcess
    swept: subprocess.CompletedProcess
    refused: subprocess.CompletedProcess
    refused_token: subprocess.CompletedProcess


@pytest.fixture(scope="module")
def secret_runs(tmp_path_factory, mlflow_server) -> SecretRuns:
    """A tracked run, an interrupted run, a sweep and two runs stopped by a bad value, one after the other in one
    folder, all tracked on the server with the password (or the ``?token=``) in the URI and the Databento key in
    their environment. The tests below read different facts of the same runs."""
    port, server_folder = mlflow_server
    uri = f"tracking.uri=http://alice:{PASSWORD}@127.0.0.1:{port}"
    token_uri = f"tracking.uri='http://127.0.0.1:{port}/?token={TOKEN}'"
    work = tmp_path_factory.mktemp("secrets") / "work"
    work.mkdir()
    tracked = gpubench(work, *RUN, "tracking.enabled=true", uri)
    interrupted = gpubench(
        work, *RUN, "tracking.enabled=true", uri, "epochs=40", "epoch.min_seconds=0.2", signal_after="epoch 3/40"
    )
    swept = gpubench(work, "-m", *RUN, "tracking.enabled=true", uri, "epochs=2,3")
    refused = gpubench(work, *RUN, "tracking.enabled=true", uri, "epochs=0")
    refused_token = gpubench(work, *RUN, "tracking.enabled=true", token_uri, "epochs=0")
    return SecretRuns(work, port, server_folder, tracked, interrupted, swept, refused, refused_token)


@pytest.mark.slow
def test_each_run_ends_as_it_should_and_links_its_mlflow_run_without_credentials(secret_runs):
    runs = secret_runs
    assert runs.tracked.returncode == 0, runs.tracked.stderr[-3000:]
    assert runs.interrupted.returncode == 143, runs.interrupted.stderr[-3000:]
    assert runs.swept.returncode == 0, runs.swept.stderr[-3000:]
    assert runs.refused.returncode == runs.refused_token.returncode == 2
    for completed in (runs.tracked, runs.interrupted, runs.swept):
        # MLflow's own "View run ... at: <URI>" lines are off; gpubench's link has no credentials.
        assert "View run" not in completed.stdout + completed.stderr
        # A sweep's child runs are named by their swept values first.
        assert re.search(r"MLflow run (epochs=\d · )?quick mlp · CPU · ", completed.stderr)
        assert f": http://127.0.0.1:{runs.port}/#/experiments/" in completed.stderr
    assert "alice:***@" in next((runs.work / "outputs").glob("*/*/config_resolved.yaml")).read_text()


@pytest.mark.slow
def test_no_secret_in_any_output_or_file_of_a_tracked_interrupted_swept_or_refused_run(secret_runs):
    # What was written: the work folder (outputs/, multirun/, the captured stdout and stderr) and the server's
    # store and artifacts (params, tags, the logged report and config).
    assert leaked(secret_runs.work) == {} and leaked(secret_runs.server_folder) == {}


@pytest.mark.slow
def test_the_servers_runs_hold_the_redacted_uri_and_no_secret(secret_runs):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"http://127.0.0.1:{secret_runs.port}")
    runs = client.search_runs([client.get_experiment_by_name("gpubench").experiment_id])
    assert len(runs) == 5  # the tracked, the interrupted, the sweep's two jobs and its parent
    logged = " ".join(f"{run.data.params} {run.data.tags}" for run in runs)
    assert "alice:***@127.0.0.1" in logged and not any(secret in logged for secret in SECRETS)


#: A build whose step raises: the run fails (exit 1) after its model started.
FAILING_BUILD = """
import torch


def build(batch_size, device):
    def step():
        raise RuntimeError("the step failed")

    return step
"""


FAILING_RUN = ["hardware=cpu", "model=custom", "workloads.custom.factory=failing_step:build"]
PASSWORD_URI = f"tracking.uri=http://alice:{PASSWORD}@127.0.0.1:9/"


@pytest.mark.parametrize(
    ("args", "exit_code"),
    [
        (["--cfg", "job", PASSWORD_URI], 0),
        (["--cfg", "job", f"tracking.uri='http://127.0.0.1:9/?token={TOKEN}'"], 0),
        (["--cfg", "hydra", PASSWORD_URI], 0),
        (["--cfg", "all", "--resolve", PASSWORD_URI], 0),
        (["--info", "config", PASSWORD_URI], 0),
        ([*RUN, PASSWORD_URI, "hydra.verbose=true", "epochs=2", "warmup_epochs=0"], 0),
        # Refused: the paragraph suggests `--cfg job`, which must keep the secret too.
        ([*RUN, PASSWORD_URI, "hydra.verbose=true", "epochs=0"], 2),
        ([*FAILING_RUN, PASSWORD_URI, "hydra.verbose=true"], 1),
        pytest.param(
            ["-m", *RUN, PASSWORD_URI, "hydra.verbose=true", "epochs=2,3", "warmup_epochs=0"], 0, marks=pytest.mark.slow
        ),
    ],
)
def test_no_secret_in_the_printed_config_a_verbose_run_a_failed_run_or_a_sweep(tmp_path, args, exit_code):
    # Issue 32: Hydra printed the URI's password on stdout for --cfg job and hydra.verbose=true.
    work = tmp_path / "work"
    work.mkdir()
    (work / "failing_step.py").write_text(FAILING_BUILD)
    completed = gpubench(work, *args, "tracking.enabled=false")
    assert completed.returncode == exit_code, completed.stderr[-3000:]
    shown = completed.stdout + completed.stderr
    assert "alice:***@127.0.0.1" in shown or "token=***" in shown
    assert leaked(work) == {}
