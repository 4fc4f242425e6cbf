"""A real sweep end to end: the CLI sweep, its summaries and its jobs' MLflow runs (one per confidence level, nested
under the sweep's parent), then the same store served by `mlflow server` on 127.0.0.1, its runs and metrics checked
through the REST API and in the MLflow UI in headless Chromium (driven through the DevTools protocol,
tests/cdp_browser.py): the run list with the sweep's jobs nested under its parent and named with their verdicts, the
runs' metric charts, a job's page with its description, parent and dataset, and its system metrics drawn as charts.

Every wait is bounded (the sweep, the server's start, each page) and the server's and the browser's process groups
are ended in finalizers, so a broken server or browser fails the test instead of hanging it. The screenshots are
kept under the tests' temp folders and, when GPUBENCH_TEST_ARTIFACTS names a folder, copied there.
"""

import contextlib
import csv
import hashlib
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
from scipy import stats as sps

from gpubench.output import sweep
from gpubench.output.plots import save_report_plots
from gpubench.output.report_file import read_report
from gpubench.output.tracking_record import format_hours
from gpubench.results import RunReport
from tests.cdp_browser import Browser, chromium_path

pytestmark = pytest.mark.slow

#: Ten epochs: the fewest the decision rule decides on, so that each job's run is named with its verdict. System
#: metrics every second: a job of a few seconds draws lines.
SWEEP_ARGS = [
    "-m",
    "model=mlp",
    "statistics.confidence_level=0.9,0.99",
    "epochs=10",
    "warmup_epochs=0",
    "hardware=cpu",
    "data.days=3",
    "data.symbols=[SYNA,SYNB]",
    "hardware.burn_in_max_seconds=0",
    "epoch.min_seconds=0.05",
    "tracking.system_metrics_interval_s=1",
]
#: The confidence level each job sweeps, by job number.
LEVELS = {0: "0.9", 1: "0.99"}
PARENT_NAME = "sweep · statistics.confidence_level=0.9,0.99 · 2/2 jobs ok"
SERVER_START_TIMEOUT_S = 90
#: How long a page may take to show what is waited for (s).
PAGE_TIMEOUT_S = 90
SCREENSHOT_SIZE = (1600, 1000)
#: A tall viewport for the charts: they render only when scrolled into view, and every one of them is checked.
TALL_SIZE = (1600, 4200)
#: The MLflow UI's model-training view (its default is GenAI's).
WORKFLOW = "workflowType=machine_learning"
SHORT_DECISIONS = {"LOCAL_GPU_VIABLE": "LOCAL", "GRAY_ZONE": "GRAY ZONE", "CLOUD_GPU_RECOMMENDED": "CLOUD"}


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


def test_each_job_is_its_own_mlflow_run_under_the_parent_at_its_level(cli_sweep):
    # Different jobs have different epoch times, so compare the intervals' widths relative to each job's standard
    # deviation: their ratio is the t quantiles' at 0.99 and 0.9 with n - 1 degrees of freedom.
    by_level = {report.models["mlp"].statistics.confidence_level: report for report in cli_sweep.reports.values()}
    assert set(by_level) == {0.9, 0.99}

    def relative_width(level: float) -> float:
        result = by_level[level].models["mlp"]
        low, high = result.confidence_interval_ms
        return (high - low) / result.statistics.std_ms

    (n,) = {len(report.models["mlp"].raw_epoch_times_ms) for report in cli_sweep.reports.values()}
    assert n == 10
    assert relative_width(0.99) / relative_width(0.9) == pytest.approx(
        sps.t.ppf(0.995, n - 1) / sps.t.ppf(0.95, n - 1), rel=1e-9
    )

    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{cli_sweep.workdir / 'mlruns' / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("gpubench").experiment_id])
    jobs = [run for run in runs if "gpubench.job_num" in run.data.tags]
    (parent,) = [run for run in runs if run.data.tags.get("gpubench.sweep_parent") == "true"]
    assert len(jobs) == 2 and len(runs) == 3
    assert {run.data.tags["mlflow.parentRunId"] for run in jobs} == {parent.info.run_id}
    assert len({run.data.tags["gpubench.sweep"] for run in runs}) == 1
    assert {run.data.tags["gpubench.job_num"]: run.data.params["statistics.confidence_level"] for run in jobs} == {
        str(num): level for num, level in LEVELS.items()
    }


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


def _verdict(report: RunReport) -> str:
    """The verdict the report holds, as the run list shows it (format_hours has known answers in
    test_tracking_record.py)."""
    recommendation = report.recommendation
    if recommendation.decision is None:
        return "no verdict"
    return f"{SHORT_DECISIONS[recommendation.decision]} {format_hours(recommendation.estimated_full_training_hours)}"


def _job_name(report: RunReport, num: int) -> str:
    return f"statistics.confidence_level={LEVELS[num]} · mlp · CPU · {_verdict(report)}"


def test_rest_api_serves_the_sweep_runs_their_metrics_and_the_parent_link(cli_sweep, mlflow_server):
    runs = _runs_by_name(mlflow_server)
    job_names = {num: _job_name(report, num) for num, report in cli_sweep.reports.items()}
    assert set(runs) == {*job_names.values(), PARENT_NAME}
    parent = runs[PARENT_NAME]
    parent_tags = {tag["key"]: tag["value"] for tag in parent["data"]["tags"]}
    assert parent_tags["gpubench.sweep_parent"] == "true" and parent_tags["gpubench.sweep_status"] == "ok"
    assert {m["key"]: m["value"] for m in parent["data"]["metrics"]}["sweep/jobs"] == 2
    # The parent spans the sweep: created before the first job, ended after the last.
    children = [runs[name] for name in job_names.values()]
    assert int(parent["info"]["start_time"]) <= min(int(run["info"]["start_time"]) for run in children)
    assert int(parent["info"]["end_time"]) >= max(int(run["info"]["end_time"]) for run in children)
    # The synthetic market's digest: its seed and shape (data.seed 7, two symbols, three days from 2024-01-02).
    shape = {"days": 3, "generator": "gpubench-synthetic-market-v1", "seed": 7, "start_date": "2024-01-02"}
    shape_json = json.dumps({**shape, "symbols": ["SYNA", "SYNB"]}, sort_keys=True)
    digest = hashlib.blake2b(shape_json.encode(), digest_size=16).hexdigest()
    for num, report in cli_sweep.reports.items():
        run = runs[job_names[num]]
        assert run["info"]["run_id"] == report.run.mlflow_run_id
        tags = {tag["key"]: tag["value"] for tag in run["data"]["tags"]}
        assert tags["mlflow.parentRunId"] == parent["info"]["run_id"]
        assert tags["gpubench.sweep"] == parent_tags["gpubench.sweep"]
        assert tags["mlflow.note.content"].startswith(report.recommendation.reasoning)
        params = {param["key"]: param["value"] for param in run["data"]["params"]}
        # The preset is a param; paths are tags.
        assert params["experiment"] == "none" and "output" not in params
        assert tags["output"].endswith(f"/{num}/report.json")
        metrics = {m["key"]: m["value"] for m in run["data"]["metrics"]}
        result = report.models["mlp"]
        assert metrics["mlp/mean_epoch_time_ms"] == pytest.approx(result.mean_epoch_time_ms, rel=1e-12)
        assert [metrics["mlp/ci_low_ms"], metrics["mlp/ci_high_ms"]] == pytest.approx(
            list(result.confidence_interval_ms), rel=1e-12
        )
        assert 0 < metrics["system/cpu_utilization_percentage"] <= 100
        (dataset,) = run["inputs"]["dataset_inputs"]
        assert dataset["dataset"]["digest"] == digest
    artifacts = _get_json(
        f"{mlflow_server}/api/2.0/mlflow/artifacts/list?" + urllib.parse.urlencode({"run_id": parent["info"]["run_id"]})
    )
    assert {f["path"] for f in artifacts["files"]} == {sweep.SWEEP_CSV_FILE, sweep.SWEEP_MARKDOWN_FILE}


# --------------------------------------------------------------------------------------------------- browser


class _VisibleText(HTMLParser):
    """The text a reader sees: data outside <script>/<style>, one chunk per text node (SVG text included)."""

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


@pytest.fixture(scope="module")
def browser(tmp_path_factory) -> Iterator[Browser]:
    """One headless Chromium for the module's pages (a fresh profile)."""
    opened = Browser(chromium_path(), tmp_path_factory.mktemp("chromium-profile"))
    try:
        yield opened
    finally:
        opened.close()


def _chunks(browser: Browser) -> list[str]:
    parser = _VisibleText()
    parser.feed(browser.evaluate("document.documentElement.outerHTML"))
    return parser.chunks


def _chart_values(chunks: list[str], metric: str) -> list[str]:
    """The value labels the UI prints on a metric's bar chart: the chunks after its title, up to the next title."""
    start = chunks.index(metric) + 1
    end = next((i for i in range(start, len(chunks)) if "/" in chunks[i] and " " not in chunks[i]), len(chunks))
    return chunks[start:end]


def _text_holds(*texts: str) -> str:
    """A JavaScript condition: the page's text holds every one of ``texts``."""
    return "document.body !== null && " + " && ".join(
        f"document.body.innerText.includes({json.dumps(t)})" for t in texts
    )


def _keep_screenshot(browser: Browser, path: Path, size: tuple[int, int]) -> None:
    """Save the viewport at ``path`` (copied to GPUBENCH_TEST_ARTIFACTS when set) and check it is a rendered page."""
    browser.screenshot(path)
    pixels = imread(path)[..., :3]
    assert pixels.shape[:2] == (size[1], size[0])
    assert len(np.unique(np.round(pixels * 255).astype(int) @ [65536, 256, 1])) > 200  # a rendered page, not blank
    artifacts = os.environ.get("GPUBENCH_TEST_ARTIFACTS")
    if artifacts:
        Path(artifacts).mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, Path(artifacts) / path.name)


def _close_assistant(browser: Browser) -> None:
    # MLflow's assistant panel opens on a first visit and covers a third of the page.
    browser.evaluate("document.querySelector('button[aria-label=Close]')?.click()")


def test_mlflow_ui_shows_the_sweep_runs_and_their_metrics(cli_sweep, mlflow_server, browser, tmp_path):
    experiment = _experiment_id(mlflow_server)
    # Sorted by a metric, the UI lists the sweep's runs flat (by default it folds children under their parent),
    # and the chart view draws every metric of the listed runs with its value printed on the bars.
    query = urllib.parse.urlencode(
        {"orderByKey": "metrics.`mlp/mean_epoch_time_ms`", "orderByAsc": "true", "compareRunsMode": "CHART"},
        quote_via=urllib.parse.quote,
    )
    browser.open(f"{mlflow_server}/#/experiments/{experiment}/runs?{query}&{WORKFLOW}", TALL_SIZE)
    names = [_job_name(report, num) for num, report in sorted(cli_sweep.reports.items())]
    browser.wait_for(_text_holds(*names, PARENT_NAME, "mlp/mean_epoch_time_ms", "sweep/jobs"), PAGE_TIMEOUT_S)
    _close_assistant(browser)
    means = sorted(f"{cli_sweep.reports[num].models['mlp'].mean_epoch_time_ms:.2f}" for num in (0, 1))
    deadline = time.monotonic() + PAGE_TIMEOUT_S
    # The bars' value labels come after the chart titles.
    while sorted(_chart_values(chunks := _chunks(browser), "mlp/mean_epoch_time_ms")[:2]) != means:
        assert time.monotonic() < deadline, f"bar values not shown; page text: {chunks[:300]}"
        time.sleep(0.5)
    for metric in ("mlp/mean_epoch_time_ms", "mlp/ci_low_ms", "mlp/ci_high_ms", "mlp/samples_per_second"):
        assert metric in chunks, f"{metric} not shown; page text: {chunks[:200]}"
    assert _chart_values(chunks, "sweep/jobs")[0] == "2.00"
    _keep_screenshot(browser, tmp_path / "mlflow_ui_sweep_charts.png", TALL_SIZE)


def test_the_run_list_nests_the_sweeps_jobs_under_it_named_with_their_verdicts(
    cli_sweep, mlflow_server, browser, tmp_path
):
    experiment = _experiment_id(mlflow_server)
    parent_id = _runs_by_name(mlflow_server)[PARENT_NAME]["info"]["run_id"]
    # The table, newest first (the UI's default, stated: the page keeps the previous test's order and view).
    query = urllib.parse.urlencode(
        {"orderByKey": "attributes.start_time", "orderByAsc": "false", "compareRunsMode": "TABLE"},
        quote_via=urllib.parse.quote,
    )
    browser.open(f"{mlflow_server}/#/experiments/{experiment}/runs?{query}&{WORKFLOW}", SCREENSHOT_SIZE)
    browser.wait_for(_text_holds(PARENT_NAME, "Model training"), PAGE_TIMEOUT_S)
    _close_assistant(browser)
    names = [_job_name(report, num) for num, report in sorted(cli_sweep.reports.items())]
    # The list folds the jobs under the sweep's run: shown once its expander is clicked.
    assert not any(name in browser.text() for name in names)
    browser.evaluate(
        f"document.querySelector('a[href$={json.dumps(parent_id)}]').closest('.ag-cell').querySelector('button').click()"
    )
    browser.wait_for(_text_holds(*names), PAGE_TIMEOUT_S)
    rows = browser.text()
    # Each job's name, with its verdict, is on the page (waited for above); the jobs' rows follow their parent's.
    assert rows.index(PARENT_NAME) < min(rows.index(name) for name in names)
    assert "synthetic market (seed 7, 2 symbols, 3 days)" in rows  # the Dataset column
    _keep_screenshot(browser, tmp_path / "mlflow_ui_runs_nested.png", SCREENSHOT_SIZE)


def test_a_jobs_page_shows_its_verdict_description_parent_and_dataset(cli_sweep, mlflow_server, browser, tmp_path):
    experiment = _experiment_id(mlflow_server)
    report = cli_sweep.reports[0]
    browser.open(f"{mlflow_server}/#/experiments/{experiment}/runs/{report.run.mlflow_run_id}?{WORKFLOW}", (1600, 1400))
    reasoning_start = report.recommendation.reasoning[:80]
    browser.wait_for(_text_holds(_job_name(report, 0), "Description", reasoning_start, PARENT_NAME), PAGE_TIMEOUT_S)
    _close_assistant(browser)
    text = browser.text()
    assert text.index("Parent run") < text.index(PARENT_NAME)
    assert "synthetic market (seed 7, 2 symbols, 3 days)" in text
    assert "system/cpu_utilization_percentage" in text
    _keep_screenshot(browser, tmp_path / "mlflow_ui_run_description.png", (1600, 1400))


def test_a_jobs_system_metrics_are_drawn_as_charts(cli_sweep, mlflow_server, browser, tmp_path):
    experiment = _experiment_id(mlflow_server)
    run_id = cli_sweep.reports[0].run.mlflow_run_id
    history = _get_json(
        f"{mlflow_server}/api/2.0/mlflow/metrics/get-history?"
        + urllib.parse.urlencode({"run_id": run_id, "metric_key": "system/cpu_utilization_percentage"})
    )["metrics"]
    assert len(history) >= 2  # a point a second over a job of a few seconds, and one as it ended
    browser.open(f"{mlflow_server}/#/experiments/{experiment}/runs/{run_id}/system-metrics?{WORKFLOW}", SCREENSHOT_SIZE)
    titles = ("cpu_utilization_percentage", "system_memory_usage_megabytes", "system_memory_usage_percentage")
    browser.wait_for(
        _text_holds("System metrics", *titles) + " && document.querySelectorAll('.js-plotly-plot').length === 3",
        PAGE_TIMEOUT_S,
    )
    _close_assistant(browser)
    # Each chart draws a line through every point logged.
    browser.wait_for(
        "Array.from(document.querySelectorAll('.js-plotly-plot'))"
        f".every(plot => plot.querySelectorAll('.point').length === {len(history)})",
        PAGE_TIMEOUT_S,
    )
    assert browser.evaluate("document.querySelectorAll('.js-plotly-plot path.js-line').length") >= 3
    _keep_screenshot(browser, tmp_path / "mlflow_ui_system_metrics.png", SCREENSHOT_SIZE)
