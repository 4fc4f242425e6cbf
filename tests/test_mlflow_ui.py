"""A real sweep end to end: the CLI sweep and its summaries, then the same store served by `mlflow server` on
127.0.0.1, its runs and metrics checked through the REST API and in the MLflow UI rendered by headless Chromium.

Every wait is bounded (the sweep, the server's start, each browser call) and the server's process group is ended
in a finalizer, so a broken server or browser fails the test instead of hanging it. The screenshot is kept under
the test's temp folder and, when GPUBENCH_TEST_ARTIFACTS names a folder, copied there.
"""

import contextlib
import csv
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from matplotlib.image import imread

from gpubench.output import sweep
from gpubench.output.plots import save_report_plots
from gpubench.output.report_file import read_report
from gpubench.results import RunReport

pytestmark = pytest.mark.slow

SWEEP_ARGS = [
    "-m",
    "model=mlp",
    "statistics.confidence_level=0.9,0.99",
    "epochs=2",
    "warmup_epochs=0",
    "hardware=cpu",
    "data.days=3",
    "data.symbols=[SYNA,SYNB]",
    "hardware.burn_in_max_seconds=0",
    "epoch.min_seconds=0.05",
]
SERVER_START_TIMEOUT_S = 90
BROWSER_TIMEOUT_S = 120
#: Virtual time for the UI's requests and rendering; the second is a retry for a slow machine.
VIRTUAL_TIME_BUDGETS_MS = (15_000, 45_000)
SCREENSHOT_SIZE = (1600, 1000)


@dataclass(frozen=True)
class SweepRun:
    workdir: Path
    sweep_dir: Path
    reports: dict[int, RunReport]  # by job number
    stderr: str


@pytest.fixture(scope="module")
def cli_sweep(tmp_path_factory) -> SweepRun:
    """The two-job sweep of the CLI (confidence level 0.9 and 0.99) in a temp folder, with its MLflow store."""
    workdir = tmp_path_factory.mktemp("sweep")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "GPU_BENCHMARK_CACHE_DIR": str(workdir / "cache")}
    env.pop("MLFLOW_TRACKING_URI", None)
    completed = subprocess.run(
        [sys.executable, "-m", "gpubench", *SWEEP_ARGS],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert completed.returncode == 0, completed.stderr
    (sweep_dir,) = (workdir / "multirun").glob("*/*")
    reports = {int(path.parent.name): read_report(path) for path in sweep_dir.glob("*/report.json")}
    return SweepRun(workdir, sweep_dir, reports, completed.stderr)


def test_cli_sweep_writes_job_summaries_and_the_sweep_summary(cli_sweep):
    assert sorted(cli_sweep.reports) == [0, 1]
    for num, report in cli_sweep.reports.items():
        job = json.loads((cli_sweep.sweep_dir / str(num) / sweep.JOB_SUMMARY_FILE).read_text())
        assert job["status"] == "ok" and job["job_num"] == num
        assert job["mlflow_run_id"] == report.run.mlflow_run_id
        assert job["models"]["mlp"]["mean_epoch_time_ms"] == report.models["mlp"].mean_epoch_time_ms
    with (cli_sweep.sweep_dir / sweep.SWEEP_CSV_FILE).open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [(r["job_num"], r["statistics.confidence_level"], r["model_name"]) for r in rows] == [
        ("0", "0.9", "mlp"),
        ("1", "0.99", "mlp"),
    ]
    for row in rows:
        result = cli_sweep.reports[int(row["job_num"])].models["mlp"]
        assert float(row["mean_epoch_time_ms"]) == result.mean_epoch_time_ms
        assert (float(row["ci_low_ms"]), float(row["ci_high_ms"])) == result.confidence_interval_ms
        assert float(row["confidence_level"]) == float(row["statistics.confidence_level"])
    markdown = (cli_sweep.sweep_dir / sweep.SWEEP_MARKDOWN_FILE).read_text()
    assert "2 jobs: 2 ok, 0 failed." in markdown and "| statistics.confidence_level |" in markdown
    assert f"Sweep summary: {cli_sweep.sweep_dir.relative_to(cli_sweep.workdir)}" in cli_sweep.stderr


def test_real_cpu_report_gets_its_plots_and_no_gpu_ones(cli_sweep, tmp_path):
    written = save_report_plots(cli_sweep.reports[0], tmp_path)
    # No VRAM timeline and no batch search on the CPU; the projection to the catalog cards is there.
    assert [path.name for path in written] == ["mlp_epoch_times.png", "mlp_loss.png", "cost_by_card.png"]
    assert all(path.stat().st_size > 20_000 for path in written)


# --------------------------------------------------------------------------------------------------- server


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _get_json(url: str, payload: dict | None = None) -> dict:
    data = None if payload is None else json.dumps(payload).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def _stop(process: subprocess.Popen) -> None:
    """End the server's whole process group (the mlflow CLI runs uvicorn in it): politely, then by force, so no
    worker outlives the test even when the CLI process has already exited."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=15)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=15)


@pytest.fixture(scope="module")
def mlflow_server(cli_sweep, tmp_path_factory) -> Iterator[str]:
    """``mlflow server`` on a free port of 127.0.0.1 over the sweep's store; yields its base URL."""
    folder = tmp_path_factory.mktemp("server")
    port = _free_port()
    log_path = folder / "server.log"
    # The job runner (a Huey consumer pool for GenAI jobs) is not needed to browse runs and slows the start.
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    with log_path.open("w") as log:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "mlflow",
                "server",
                "--backend-store-uri",
                f"sqlite:///{cli_sweep.workdir / 'mlruns' / 'mlflow.db'}",
                "--default-artifact-root",
                str(folder / "art"),
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--workers",
                "1",
            ],
            cwd=folder,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + SERVER_START_TIMEOUT_S
        while True:
            if process.poll() is not None:
                pytest.fail(f"mlflow server exited with {process.returncode}:\n{log_path.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"mlflow server did not answer within {SERVER_START_TIMEOUT_S} s:\n{log_path.read_text()}")
            time.sleep(0.25)
        yield url
    finally:
        _stop(process)


def _experiment_id(url: str) -> str:
    query = urllib.parse.urlencode({"experiment_name": "gpubench"})
    return _get_json(f"{url}/api/2.0/mlflow/experiments/get-by-name?{query}")["experiment"]["experiment_id"]


def _runs_by_name(url: str) -> dict[str, dict]:
    found = _get_json(
        f"{url}/api/2.0/mlflow/runs/search", {"experiment_ids": [_experiment_id(url)], "max_results": 100}
    )
    return {run["info"]["run_name"]: run for run in found["runs"]}


def _parent_name(sweep_dir: Path) -> str:
    return f"sweep {sweep_dir.parent.name}/{sweep_dir.name}"


def test_rest_api_serves_the_sweep_runs_their_metrics_and_the_parent_link(cli_sweep, mlflow_server):
    runs = _runs_by_name(mlflow_server)
    parent_name = _parent_name(cli_sweep.sweep_dir)
    assert set(runs) == {"mlp-job0", "mlp-job1", parent_name}
    parent = runs[parent_name]
    parent_tags = {tag["key"]: tag["value"] for tag in parent["data"]["tags"]}
    assert parent_tags["gpubench.sweep_parent"] == "true" and parent_tags["gpubench.sweep_status"] == "ok"
    assert {m["key"]: m["value"] for m in parent["data"]["metrics"]}["sweep/jobs"] == 2
    for num, report in cli_sweep.reports.items():
        run = runs[f"mlp-job{num}"]
        assert run["info"]["run_id"] == report.run.mlflow_run_id
        tags = {tag["key"]: tag["value"] for tag in run["data"]["tags"]}
        assert tags["mlflow.parentRunId"] == parent["info"]["run_id"]
        assert tags["gpubench.sweep"] == parent_tags["gpubench.sweep"]
        metrics = {m["key"]: m["value"] for m in run["data"]["metrics"]}
        result = report.models["mlp"]
        assert metrics["mlp/mean_epoch_time_ms"] == pytest.approx(result.mean_epoch_time_ms, rel=1e-12)
        assert [metrics["mlp/ci_low_ms"], metrics["mlp/ci_high_ms"]] == pytest.approx(
            list(result.confidence_interval_ms), rel=1e-12
        )
    artifacts = _get_json(
        f"{mlflow_server}/api/2.0/mlflow/artifacts/list?" + urllib.parse.urlencode({"run_id": parent["info"]["run_id"]})
    )
    assert {f["path"] for f in artifacts["files"]} == {sweep.SWEEP_CSV_FILE, sweep.SWEEP_MARKDOWN_FILE}


# --------------------------------------------------------------------------------------------------- browser


class _VisibleText(HTMLParser):
    """The text a reader sees: data outside <script>/<style>, one chunk per text node."""

    def __init__(self) -> None:
        super().__init__()
        self.chunks: list[str] = []
        self._hidden_depth = 0

    def handle_starttag(self, tag: str, attrs) -> None:
        if tag in ("script", "style"):
            self._hidden_depth += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style"):
            self._hidden_depth -= 1

    def handle_data(self, data: str) -> None:
        if not self._hidden_depth and data.strip():
            self.chunks.append(data.strip())


def _chromium() -> str:
    """Debian's chromium; a missing browser skips the UI test, unless GPUBENCH_REQUIRE_BROWSER=1 (CI) fails it."""
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        message = "headless Chromium not found (Debian: apt-get install -y chromium)"
        if os.environ.get("GPUBENCH_REQUIRE_BROWSER") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return path


def _chromium_command(browser: str, profile: Path, budget_ms: int, size: tuple[int, int]) -> list[str]:
    return [
        browser,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
        f"--user-data-dir={profile}",
        f"--virtual-time-budget={budget_ms}",
        f"--window-size={size[0]},{size[1]}",
    ]


def _page_text(browser: str, profile: Path, url: str, budget_ms: int) -> list[str]:
    # A tall window: the run charts render only when scrolled into view, and every one of them should be checked
    # (the recommendation metrics come before the sweep's, alphabetically).
    command = [*_chromium_command(browser, profile, budget_ms, (1600, 4200)), "--dump-dom", url]
    completed = subprocess.run(command, capture_output=True, text=True, timeout=BROWSER_TIMEOUT_S)
    assert completed.returncode == 0, completed.stderr[-3000:]
    parser = _VisibleText()
    parser.feed(completed.stdout)
    return parser.chunks


def _chart_values(chunks: list[str], metric: str) -> list[str]:
    """The value labels the UI prints on a metric's bar chart: the chunks after its title, up to the next title."""
    start = chunks.index(metric) + 1
    end = next((i for i in range(start, len(chunks)) if "/" in chunks[i] and " " not in chunks[i]), len(chunks))
    return chunks[start:end]


def test_mlflow_ui_shows_the_sweep_runs_and_their_metrics(cli_sweep, mlflow_server, tmp_path):
    browser = _chromium()
    experiment = _experiment_id(mlflow_server)
    # Sorted by a metric, the UI lists the sweep's runs flat (by default it folds children under their parent),
    # and the chart view draws every metric of the listed runs with its value printed on the bars.
    query = urllib.parse.urlencode(
        {"orderByKey": "metrics.`mlp/mean_epoch_time_ms`", "orderByAsc": "true", "compareRunsMode": "CHART"},
        quote_via=urllib.parse.quote,
    )
    url = f"{mlflow_server}/#/experiments/{experiment}/runs?{query}"
    expected_names = {"mlp-job0", "mlp-job1", _parent_name(cli_sweep.sweep_dir)}
    for attempt, budget_ms in enumerate(VIRTUAL_TIME_BUDGETS_MS):
        chunks = _page_text(browser, tmp_path / f"profile-{attempt}", url, budget_ms)
        if expected_names <= set(chunks) and "mlp/mean_epoch_time_ms" in chunks:
            break
    missing = sorted(expected_names - set(chunks))
    assert not missing, f"runs not shown: {missing}; page text: {chunks[:200]}"
    for metric in ("mlp/mean_epoch_time_ms", "mlp/ci_low_ms", "mlp/ci_high_ms", "mlp/samples_per_second"):
        assert metric in chunks, f"{metric} not shown; page text: {chunks[:200]}"
    means = [cli_sweep.reports[num].models["mlp"].mean_epoch_time_ms for num in (0, 1)]
    assert sorted(_chart_values(chunks, "mlp/mean_epoch_time_ms")[:2]) == sorted(f"{m:.2f}" for m in means)
    assert "sweep/jobs" in chunks and _chart_values(chunks, "sweep/jobs")[0] == "2.00"

    screenshot = tmp_path / "mlflow_ui_sweep.png"
    command = [
        *_chromium_command(browser, tmp_path / "profile-shot", VIRTUAL_TIME_BUDGETS_MS[0], SCREENSHOT_SIZE),
        f"--screenshot={screenshot}",
        url,
    ]
    completed = subprocess.run(command, capture_output=True, text=True, timeout=BROWSER_TIMEOUT_S)
    assert completed.returncode == 0 and screenshot.exists(), completed.stderr[-3000:]
    pixels = imread(screenshot)[..., :3]
    assert pixels.shape[:2] == (SCREENSHOT_SIZE[1], SCREENSHOT_SIZE[0])
    assert len(np.unique(np.round(pixels * 255).astype(int) @ [65536, 256, 1])) > 200  # a rendered page, not blank
    artifacts = os.environ.get("GPUBENCH_TEST_ARTIFACTS")
    if artifacts:
        Path(artifacts).mkdir(parents=True, exist_ok=True)
        shutil.copy2(screenshot, Path(artifacts) / screenshot.name)
