"""report.html: the page holds the verdict and its reasoning, every model's figures, every row of the cost table, the
plots, the host notes and the config; user text is escaped; a partial report says so; the page loads nothing; every
run leaves one beside report.json (and in MLflow); and headless Chromium shows its verdict and plots.

The figures on the page are checked against the stored H200 default report read as plain JSON (not through the
typed report the page is rendered from), the epoch-time figures recomputed from the raw epochs with numpy/scipy.
"""

import dataclasses
import json
import os
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
import scipy.stats as sps
from matplotlib.image import imread

from gpubench.bench import runner as runner_module
from gpubench.bench.model_run import ModelRun, ModelRunContext
from gpubench.bench.runner import Runner
from gpubench.output import html_report
from gpubench.output.html_report import PAGE_FILE_NAME, draw_page_plots, page_path, render_page
from gpubench.output.report_file import read_report
from gpubench.results import MemoryTimeline, RunInfo, RunReport, WhatIfEstimate
from tests.cdp_browser import chromium_path
from tests.test_runner import MAIN_REPORT, cpu_runner  # noqa: F401  (cpu_runner is a fixture)

#: The H200's default four-model run (benchmarks/results/2026-12-02-h200-session7.md).
H200_DEFAULT = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "2026-12-02-h200-s7-default-report.json"
RAW = json.loads(H200_DEFAULT.read_text())
#: A model name that would be markup if it were not escaped.
HOSTILE = "<script>alert(\"x\")</script><img src=x onerror=alert(1)>&amp; 'q'"
#: The page's size limit (issue 25): 2 MB for the default four-model run.
MAX_PAGE_BYTES = 2_000_000


class Page(HTMLParser):
    """A page parsed as a browser reads it: every start tag with its attributes, the text of each section (by id),
    and each section's table rows (the cells' text; a cell's parts, such as a figure and its bounds, joined by
    `` | ``)."""

    def __init__(self, markup: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: dict[str, list[str]] = {}
        self.rows: dict[str, list[list[str]]] = {}
        self._section = ""
        self._style_depth = 0
        self._cell: list[str] | None = None
        self._row: list[str] | None = None
        self.feed(markup)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        self.tags.append((tag, attributes))
        if tag == "section":
            self._section = attributes.get("id") or ""
        elif tag == "style":
            self._style_depth += 1
        elif tag == "tr":
            self._row = []
        elif tag == "td":
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "section":
            self._section = ""
        elif tag == "style":
            self._style_depth -= 1
        elif tag == "td" and self._cell is not None and self._row is not None:
            self._row.append(" | ".join(self._cell))
            self._cell = None
        elif tag == "tr" and self._row:
            self.rows.setdefault(self._section, []).append(self._row)
            self._row = None

    def handle_data(self, data: str) -> None:
        if self._style_depth or not data.strip():
            return
        self.text.setdefault(self._section, []).append(data.strip())
        if self._cell is not None:
            self._cell.append(data.strip())

    def section_text(self, section: str) -> str:
        return " ".join(self.text.get(section, []))

    def with_class(self, css: str) -> list[dict[str, str | None]]:
        return [attrs for _, attrs in self.tags if css in (attrs.get("class") or "").split()]


@pytest.fixture(scope="module")
def h200() -> RunReport:
    return read_report(H200_DEFAULT)


@pytest.fixture(scope="module")
def h200_page(h200: RunReport) -> Page:
    return Page(render_page(h200, config_text="seed: 0\n"))


def _hours(hours: float) -> str:
    return f"{hours * 60:.1f} min" if hours < 1 else f"{hours:,.2f} h"


# --------------------------------------------------------------------------------------------------- content


def test_the_page_states_the_verdict_with_its_reasoning_bounds_and_actions(h200_page: Page) -> None:
    recommendation = RAW["recommendation"]
    assert [attrs["class"] for attrs in h200_page.with_class("verdict")] == ["verdict local"]
    verdict = h200_page.text["verdict"]
    assert verdict[:2] == ["Verdict", "LOCAL_GPU_VIABLE"] == ["Verdict", recommendation["decision"]]
    assert recommendation["reasoning"] in verdict
    hours = recommendation["estimated_full_training_hours"]
    lower = recommendation["estimated_full_training_hours_lower"]
    upper = recommendation["estimated_full_training_hours_upper"]
    assert f"{_hours(hours)} ({_hours(lower)} to {_hours(upper)}), 97.5% bounds" in verdict
    assert verdict[verdict.index("Decided on") + 1] == "dqn, ppo"
    for action in recommendation["recommended_actions"]:
        assert action in verdict


def test_the_summary_table_has_each_models_figures_recomputed_from_its_epochs(h200_page: Page) -> None:
    rows = {row[0]: row for row in h200_page.rows["summary"]}
    assert list(rows) == ["dqn", "ppo", "mamba2", "tft"]
    for name, section in RAW["models"].items():
        times = np.array(section["raw_epoch_times_ms"])
        lo, hi = sps.t.interval(0.95, times.size - 1, loc=times.mean(), scale=sps.sem(times))
        row = rows[name]
        decision_lo, decision_hi = section["statistics"]["decision_interval_ms"]
        assert row[1:5] == ["ok", str(times.size), f"{times.mean():,.1f}", f"{lo:,.1f}–{hi:,.1f}"]
        assert row[5] == f"{decision_lo:,.1f}–{decision_hi:,.1f}"
        assert row[6] == f"{times.std(ddof=1) / times.mean():.3f}"
        assert row[8:10] == [str(section["batch_size"]), f"{section['memory_usage_mb']:,.0f}"]
        assert row[10].startswith(section["stability"])
    assert rows["dqn"][10] == "STABLE · (DECREASING)"  # an RL model's loss trend: shown, not judged


def test_every_row_of_the_cost_table_is_on_the_page_with_its_price_and_bounds(h200_page: Page) -> None:
    table = RAW["recommendation"]["cost_table"]
    rows = h200_page.rows["cost"]
    assert len(rows) == len(table) == 22
    text = h200_page.section_text("cost")
    chunks = h200_page.text["cost"]
    # The sources are named once, under the table, in the order the rows first cite them.
    distinct = list(dict.fromkeys(row["price_source"] for row in table))
    start = chunks.index("Price sources:") + 1
    sources = chunks[start : start + len(distinct)]
    assert sources == distinct
    for row, expected in zip(rows, table, strict=True):
        assert row[0].split(" | ")[0] == expected["gpu"] and row[1] == expected["provider"]
        assert row[2] == ("spot" if expected["spot"] else "on-demand")
        assert row[3] == f"{expected['instance']} · {expected['location']}"
        usd, bounds = row[6].split(" | ")
        assert usd == f"${expected['usd']:,.2f}"
        assert bounds == f"${expected['usd_lower']:,.2f} to ${expected['usd_upper']:,.2f}"
        assert row[7] == f"{expected['price_usd_per_hour']:,.2f}"
        date, number = row[8].split(" [")
        assert date == expected["price_date"] and sources[int(number.rstrip("]")) - 1] == expected["price_source"]
        if expected["gpu_count"] > 1:
            assert row[0].endswith(f"{expected['gpu_count']} on the instance") and expected["note"] in row[9]
    local = RAW["recommendation"]["local_cost"]
    assert f"{local['energy_kwh']:.3g} kWh (nvml), ${local['usd']:,.2f} of energy at 0.17 USD/kWh" in text
    assert "Prices from the snapshot of 2026-12-02 (1 day old when the report was written)." in text
    for note in RAW["recommendation"]["cost_table_notes"]:
        assert note in chunks


def test_the_host_section_has_the_load_the_noisy_host_sentence_and_every_round_with_its_probe(h200_page: Page) -> None:
    text = h200_page.section_text("host")
    assert "0.15 / 0.03 / 0.01 over 16 CPUs available" in text
    assert "The host's speed moved during the run (a fixed Python loop took 6.6 to 13.6 ms across the rounds)" in text
    rounds = h200_page.rows["host"]
    expected = [r for section in RAW["models"].values() for r in section["rounds"]]
    assert len(rounds) == len(expected) == 20
    for row, measured in zip(rounds, expected, strict=True):
        assert row[:3] == [str(measured["index"]), str(measured["epochs"]), f"{measured['mean_epoch_ms']:,.2f}"]
        assert row[4] == f"{measured['host_probe']['python_loop_ms']:.2f}"


def test_the_rounds_caption_gives_the_probes_and_the_cards_waiting_shares(h200: RunReport) -> None:
    models = dict(h200.models)
    models["tft"] = dataclasses.replace(models["tft"], gpu_wait_explained_share=0.91)
    text = Page(render_page(dataclasses.replace(h200, models=models))).section_text("host")
    probe = h200.models["tft"].host_probe_explained_share
    assert (
        f"the probe tracks {probe:.0%} of the spread between rounds; the card's power, falling in the slower " in text
    )
    assert "rounds at a steady clock (the card waiting on its host), tracks 91% of it" in text
    assert text.count("the card waiting on its host") == 1  # the other models' shares are unknown in this report


def test_the_config_is_shown_escaped_and_redacted(h200: RunReport) -> None:
    config = "tracking:\n  uri: http://alice:SECRETPW42@mlflow.example:5000\nnote: <b>bold</b>\n"
    page = render_page(h200, config_text=config)
    parsed = Page(page)
    assert "SECRETPW42" not in page and "http://alice:***@mlflow.example:5000" in parsed.section_text("config")
    assert "<b>bold</b>" in parsed.section_text("config") and "b" not in {tag for tag, _ in parsed.tags}
    missing = Page(render_page(h200, config_text=None, config_name="config_resolved.yaml"))
    assert "config_resolved.yaml could not be read." in missing.section_text("config")


@pytest.mark.parametrize(
    ("status", "error", "says"),
    [
        ("interrupted", None, "Partial report: the run was interrupted. It holds 4 of the 4 models planned"),
        ("failed", "ValueError: a step returned a float", "Partial report: the run failed."),
        ("running", None, "the run had not finished when this page was written"),
    ],
)
def test_a_report_that_is_not_complete_says_it_is_partial(h200: RunReport, status, error, says) -> None:
    partial = dataclasses.replace(h200, status=status, error=error)
    page = Page(render_page(partial))
    banner = page.section_text("status")
    assert banner.startswith(status.upper()) and says in banner
    if error:
        assert f"Error: {error}" in banner
    assert not Page(render_page(h200)).with_class("banner")


def test_a_report_without_a_recommendation_says_there_is_no_verdict_yet(h200: RunReport) -> None:
    running = dataclasses.replace(h200, status="running", recommendation=None)
    page = Page(render_page(running))
    assert page.text["verdict"][:3] == [
        "Verdict",
        "No verdict",
        "the run ended before the recommendation was computed.",
    ]
    assert page.section_text("cost") == "Renting No cost table: no recommendation yet."


def test_a_measured_what_if_is_a_row_beside_the_main_answer(h200: RunReport) -> None:
    what_if = WhatIfEstimate(
        model="dqn",
        variant="reduce-overhead",
        description="CUDA graphs",
        status="ok",
        step_ms=20.0,
        main_step_ms=39.3,
        speedup=1.965,
        hours=1.8,
        hours_lower=1.7,
        hours_upper=1.95,
        main_hours=3.53,
        peak_reserved_mb=120.0,
        main_peak_reserved_mb=106.0,
    )
    recommendation = dataclasses.replace(h200.recommendation, what_ifs=[what_if])
    page = Page(render_page(dataclasses.replace(h200, recommendation=recommendation)))
    (row,) = page.rows["what-ifs"]
    assert row[:6] == ["dqn", "reduce-overhead", "CUDA graphs", "20", "39.3", "1.97"]
    assert row[6:] == ["1.80 h | 1.70 h to 1.95 h", "3.53 h", "120", "106", "ok"]
    assert "what-ifs" not in Page(render_page(h200)).rows


def test_the_page_goes_beside_the_report_under_its_name() -> None:
    assert page_path(Path("out/report.json")) == Path("out") / PAGE_FILE_NAME
    assert page_path(Path("out/h200.json")) == Path("out/h200.html")
    # Never over the report itself.
    assert page_path(Path("out/report.html")) == Path("out/report.html.html")


def test_a_run_without_a_preset_has_none() -> None:
    # Hydra names an unset config group None, which the job records as the string "None".
    run = RunInfo(device="cpu", models=["mlp"], epochs=1, warmup_epochs=0, precision="fp32", compile="false", seed=0)
    assert dataclasses.replace(run, choices={"experiment": "None"}).preset is None
    assert dataclasses.replace(run, choices={"experiment": "quick"}).preset == "quick"


# --------------------------------------------------------------------------------------------------- plots, escaping


def _dense_timeline(samples: int, seed: int = 0) -> MemoryTimeline:
    """A VRAM timeline of ``samples`` readings 10 ms apart, a seeded random walk (every point distinct), the process
    read on one sample in ten as the sampler does."""
    rng = np.random.default_rng(seed)
    device_mb = 2000.0 + np.cumsum(rng.normal(0.0, 5.0, samples))
    process_mb = device_mb - 500.0
    process_mb[np.arange(samples) % 10 != 0] = np.nan
    return MemoryTimeline(1000.0 + 0.01 * np.arange(samples), device_mb, process_mb)


@pytest.fixture(scope="module")
def hostile() -> tuple[RunReport, list[html_report.PagePlot], str]:
    """The H200's ppo under a name that is markup, in a failed run whose error and folder are markup too, drawn
    with a VRAM timeline of 100,000 samples; its plots and page."""
    report = read_report(H200_DEFAULT)
    run = dataclasses.replace(report.run, models=[HOSTILE], output_dir=f"/tmp/{HOSTILE}")
    report = dataclasses.replace(
        report,
        status="failed",
        error=f"bad step in {HOSTILE}",
        run=run,
        models={HOSTILE: report.models["ppo"]},
        recommendation=None,
    )
    plots = draw_page_plots(report, {HOSTILE: _dense_timeline(100_000)})
    return report, plots, render_page(report, plots=plots, config_text=f"name: {HOSTILE}\n")


def test_a_name_that_is_markup_reads_as_itself_and_adds_no_element(hostile) -> None:
    _, _, page = hostile
    parsed = Page(page)
    tags = {tag for tag, _ in parsed.tags}
    assert "script" not in tags
    assert not [attrs for _, attrs in parsed.tags if any(name.startswith("on") for name in attrs)]
    images = [attrs.get("src") or "" for tag, attrs in parsed.tags if tag == "img"]
    assert len(images) == 1 and images[0].startswith("data:image/png;base64,")
    assert parsed.rows["summary"][0][0] == HOSTILE
    assert f"Error: bad step in {HOSTILE}" in parsed.section_text("status")
    assert f"/tmp/{HOSTILE}" in parsed.section_text("run") and f"name: {HOSTILE}" in parsed.section_text("config")


def test_plots_are_inline_svg_and_a_dense_one_a_smaller_png(hostile) -> None:
    _, plots, page = hostile
    assert [(plot.subject, plot.format) for plot in plots] == [
        ("epoch times", "svg"),
        ("loss", "svg"),
        ("vram", "png"),
        ("batch search", "svg"),
    ]
    assert all(plot.size_bytes < html_report.SVG_MAX_BYTES for plot in plots)
    parsed = Page(page)
    figures = [attrs["data-plot"] for attrs in parsed.with_class("plot")]
    assert figures == [plot.stem for plot in plots]
    assert sum(tag == "svg" for tag, _ in parsed.tags) == 3 and sum(tag == "img" for tag, _ in parsed.tags) == 1


def test_the_page_loads_nothing_from_anywhere(hostile) -> None:
    _, _, page = hostile
    parsed = Page(page)
    (policy,) = [attrs for tag, attrs in parsed.tags if tag == "meta" and attrs.get("http-equiv")]
    assert policy["content"] == "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
    for tag, attrs in parsed.tags:
        for key in ("src", "href", "xlink:href"):
            value = attrs.get(key)
            assert value is None or value.startswith(("data:", "#")), (tag, key, value)
    assert not {"script", "link", "iframe", "object", "embed"} & {tag for tag, _ in parsed.tags}


# --------------------------------------------------------------------------------------------------- the runs


def test_the_runner_leaves_a_page_after_every_model_and_one_that_says_it_was_interrupted(
    cpu_runner: Runner,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    page = cpu_runner.writer.path.parent / PAGE_FILE_NAME
    seen: list[str] = []

    def interrupted_at_ppo(name: str, context: ModelRunContext) -> ModelRun:
        if name == "ppo":
            seen.append(Page(page.read_text()).section_text("status"))
            raise KeyboardInterrupt
        return ModelRun(MAIN_REPORT.models[name], None)

    monkeypatch.setattr(runner_module, "run_model", interrupted_at_ppo)
    with pytest.raises(KeyboardInterrupt):
        cpu_runner.run()
    assert seen and "It holds 1 of the 2 models planned: dqn (ok)." in seen[0] and seen[0].startswith("RUNNING")
    final = Page(page.read_text())
    assert final.section_text("status").startswith("INTERRUPTED")
    assert "It holds 2 of the 2 models planned: dqn (ok), ppo (interrupted)." in final.section_text("status")
    assert [row[0] for row in final.rows["summary"]] == ["dqn", "ppo"]


def test_a_cli_run_writes_its_page_beside_the_report_and_logs_it_to_mlflow(tracked_mlp_job) -> None:
    # The job (tests/conftest.py): model=mlp epochs=6 on the CPU, tracked in mlruns/ under its folder.
    assert tracked_mlp_job.completed.returncode == 0, tracked_mlp_job.completed.stderr
    report_path = tracked_mlp_job.report_path()
    report = json.loads(report_path.read_text())
    page = Page((report_path.parent / PAGE_FILE_NAME).read_text())
    # Six epochs may be too few to decide on: the page then says there is no decision, and the reasoning says why.
    assert page.text["verdict"][1] == (report["recommendation"]["decision"] or "No decision")
    assert report["recommendation"]["reasoning"] in page.text["verdict"]
    assert not page.with_class("banner")
    # Every plot drawn as a PNG beside the report is on the page, inline.
    pngs = sorted(path.stem for path in report_path.parent.glob("*.png"))
    assert (
        sorted(attrs["data-plot"] for attrs in page.with_class("plot"))
        == pngs
        == [
            "cost_by_card",
            "mlp_epoch_times",
            "mlp_loss",
        ]
    )
    assert "epochs: 6" in page.section_text("config")

    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{tracked_mlp_job.folder / 'mlruns' / 'mlflow.db'}")
    assert PAGE_FILE_NAME in {a.path for a in client.list_artifacts(report["run"]["mlflow_run_id"])}


# --------------------------------------------------------------------------------------------------- in a browser


def _browse(browser: str, profile: Path, *args: str) -> subprocess.CompletedProcess:
    """Chromium, headless, offline: the network off (``--host-resolver-rules`` sends every name nowhere)."""
    command = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--hide-scrollbars"]
    command += ["--disable-background-networking", "--disable-component-update", "--disable-sync"]
    command += ["--host-resolver-rules=MAP * ~NOTFOUND", f"--user-data-dir={profile}", "--virtual-time-budget=5000"]
    completed = subprocess.run([*command, *args], capture_output=True, text=True, timeout=120)
    assert completed.returncode == 0, completed.stderr[-3000:]
    return completed


#: Run in a copy of the page (the page itself forbids scripts): the rendered size of the verdict and of every plot.
_PROBE = """<script>addEventListener("load", () => {
  const seen = [...document.querySelectorAll(".verdict .decision, figure.plot > svg, figure.plot > img")].map(el => {
    const box = el.getBoundingClientRect(), style = getComputedStyle(el);
    return [el.closest("figure") ? el.closest("figure").dataset.plot : el.textContent, Math.round(box.width),
      Math.round(box.height), Math.round(box.top), style.visibility, el.tagName === "IMG" ? el.naturalWidth : -1];
  });
  document.body.dataset.probe = JSON.stringify(seen);
});</script>"""


@pytest.mark.slow
def test_chromium_shows_the_default_runs_verdict_and_every_plot_and_the_page_is_under_2_mb(h200, tmp_path) -> None:
    browser = chromium_path()
    # The default run, its mamba2 (not a model the verdict is decided on) under a name that is markup, with the VRAM
    # timelines its sampler read (the report keeps their sample counts, not them).
    models = {HOSTILE if name == "mamba2" else name: result for name, result in h200.models.items()}
    run = dataclasses.replace(h200.run, models=list(models))
    report = dataclasses.replace(h200, models=models, run=run)
    timelines = {
        name: _dense_timeline(r.memory.nvml_samples, seed=i) for i, (name, r) in enumerate(report.models.items())
    }
    plots = draw_page_plots(report, timelines)
    assert len(plots) == 17
    path = html_report.write_page(report, tmp_path / "report.json", plots=plots)
    assert path.stat().st_size < MAX_PAGE_BYTES

    probed = tmp_path / "probed.html"
    markup = path.read_text()
    probed.write_text(
        markup.replace('<meta http-equiv="Content-Security-Policy"', "<meta name=csp").replace(
            "</body>", _PROBE + "</body>"
        )
    )
    dom = _browse(browser, tmp_path / "profile-dom", "--window-size=1280,1000", "--dump-dom", probed.as_uri()).stdout
    rendered = Page(dom)
    body = next(attrs for tag, attrs in rendered.tags if tag == "body")
    seen = json.loads(body["data-probe"])
    # The browser read the name as text: the probe is the one script, and no element carries a handler.
    assert [row[0] for row in rendered.rows["summary"]] == ["dqn", "ppo", HOSTILE, "tft"]
    assert sum(tag == "script" for tag, _ in rendered.tags) == 1
    assert not [attrs for _, attrs in rendered.tags if any(name.startswith("on") for name in attrs)]
    # The verdict on the first screen (a 1280 x 1000 window).
    decision, width, height, top, visibility, _ = seen[0]
    assert decision == "LOCAL_GPU_VIABLE" and width > 100 and height > 20 and 0 < top < 1000 - height
    assert visibility == "visible"
    assert [entry[0] for entry in seen[1:]] == [plot.stem for plot in plots]
    for stem, width, height, _, visibility, natural_width in seen[1:]:
        # The layout's width (1000 px at most), at the figure's aspect (10 x 5.5 in), and a PNG that decoded.
        assert 900 <= width <= 1000 and height == pytest.approx(width * 0.55, abs=3), stem
        assert visibility == "visible" and natural_width != 0, stem

    # The page itself, script-free and offline, in a browser: a rendered screen, not a blank one.
    screenshot = tmp_path / "report_html.png"
    _browse(browser, tmp_path / "profile-shot", "--window-size=1280,2400", f"--screenshot={screenshot}", path.as_uri())
    pixels = np.round(imread(screenshot)[..., :3] * 255).astype(int)
    assert pixels.shape[:2] == (2400, 1280)
    assert len(np.unique(pixels @ [65536, 256, 1])) > 200
    artifacts = os.environ.get("GPUBENCH_TEST_ARTIFACTS")
    if artifacts:
        Path(artifacts).mkdir(parents=True, exist_ok=True)
        shutil.copy2(screenshot, Path(artifacts) / screenshot.name)
