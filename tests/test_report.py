"""Report writing: atomic, strict JSON, early failure on an unwritable output, seed keys from the statistics; reading
a report back; and the closing summary on the terminal."""

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest

from gpubench.errors import OutputError
from gpubench.output import console
from gpubench.output.report_file import ReportReadError, ReportWriter, read_report, write_json_atomic
from gpubench.results import HardwareReport, ModelResult, RunInfo, RunReport
from gpubench.stats.epoch_times import summarize_epoch_times

CPU_REPORT = Path(__file__).parent / "fixtures" / "report_main_1092cdc_cpu_quick.json"


def empty_report() -> RunReport:
    run = RunInfo(device="cpu", models=["mlp"], epochs=2, warmup_epochs=0, precision="fp32", compile="false", seed=0)
    return RunReport.start(run, HardwareReport(measured_on="cpu", device_name="cpu"), None)


def test_writer_replaces_the_file_atomically_and_leaves_no_temp_files(tmp_path):
    writer = ReportWriter(tmp_path / "sub" / "report.json")
    report = empty_report()
    writer.write(report)
    writer.write(replace(report, models={"mlp": ModelResult(first_step_ms=float("nan"))}))
    loaded = json.loads((tmp_path / "sub" / "report.json").read_text())
    assert loaded["models"]["mlp"]["status"] == "ok"
    assert loaded["models"]["mlp"]["first_step_ms"] is None  # NaN is not JSON: written as null
    assert os.listdir(tmp_path / "sub") == ["report.json"]


def test_json_writer_writes_nan_as_null_and_leaves_no_temp_files(tmp_path):
    path = tmp_path / "new" / "summary.json"
    write_json_atomic(path, {"status": "ok", "value": float("nan"), "pair": (1.0, float("inf"))})
    assert json.loads(path.read_text()) == {"status": "ok", "value": None, "pair": [1.0, None]}
    assert os.listdir(path.parent) == ["summary.json"]


def test_unwritable_output_fails_before_measuring(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    with pytest.raises(OutputError) as excinfo:
        ReportWriter(blocker / "report.json")
    assert "`output`" in str(excinfo.value) and str(blocker) in str(excinfo.value)
    with pytest.raises(OutputError, match="is a folder"):
        ReportWriter(tmp_path)


def test_a_written_report_reads_back_as_the_same_report(tmp_path):
    report = RunReport.from_dict(json.loads(CPU_REPORT.read_text()))
    writer = ReportWriter(tmp_path / "report.json")
    writer.write(report)
    assert read_report(writer.path) == report


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ("{not json", "is not valid JSON"),
        ("[1, 2]", "is not a gpubench report (a JSON object)"),
        ('{"timestamp": "x"}', "is not a gpubench report (`report` lacks required keys: benchmark_version"),
        (
            json.dumps({**json.loads(CPU_REPORT.read_text()), "owner": "me"}),
            "is not a gpubench report (`report` has keys this schema does not know: owner)",
        ),
    ],
)
def test_reading_a_file_that_is_not_a_report_names_the_file_and_why(tmp_path, content, reason):
    path = tmp_path / "report.json"
    path.write_text(content)
    with pytest.raises(ReportReadError) as excinfo:
        read_report(path)
    assert str(excinfo.value).startswith(f"{path} {reason}") and excinfo.value.reason.startswith(reason)
    with pytest.raises(ReportReadError, match="cannot be read"):
        read_report(tmp_path / "missing.json")


def test_model_section_uses_the_statistics_of_its_raw_epochs():
    times_ms = [101.0, 99.0, 100.5, 100.0, 99.5, 102.0]
    summary = summarize_epoch_times(times_ms, confidence_level=0.95)
    result = ModelResult(
        raw_epoch_times_ms=times_ms,
        statistics=summary,
        steps_per_epoch=50,
        samples_per_step=64,
        sample_unit="window",
    )
    section = result.to_dict()
    assert section["mean_epoch_time_ms"] == pytest.approx(sum(times_ms) / 6)
    assert section["confidence_interval_ms"] == pytest.approx(list(summary.confidence_interval_ms))
    assert section["p95_latency_ms"] == pytest.approx(summary.p95_ms)
    throughput = section["samples_per_second"]
    # 50 steps x 64 windows per epoch, over the mean epoch time in seconds.
    assert throughput["mean"] == pytest.approx(3200 / (section["mean_epoch_time_ms"] / 1e3))
    lo_ms, hi_ms = summary.confidence_interval_ms
    assert throughput["confidence_interval"] == pytest.approx([3200 / (hi_ms / 1e3), 3200 / (lo_ms / 1e3)])
    assert throughput["unit"] == "window/s"


def test_a_time_interval_reaching_zero_leaves_throughput_unbounded_above():
    # A ramp of 10: strongly autocorrelated, so the decision interval (ESS 10 · 9.17 / 29.2 = 3.1, half-width 10.3 ms
    # around 5.5 ms) reaches below zero and is cut there; the plain t interval (5.5 ± 2.2 ms) stays positive.
    times_ms = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0]
    summary = summarize_epoch_times(times_ms, confidence_level=0.95)
    assert summary.decision_interval_ms[0] == 0.0 and summary.confidence_interval_ms[0] > 0.0
    result = ModelResult(statistics=summary, steps_per_epoch=10, samples_per_step=64, sample_unit="env_step")
    throughput = result.to_dict()["samples_per_second"]
    assert throughput["decision_interval"] == [pytest.approx(640 / (summary.decision_interval_ms[1] / 1e3)), None]
    assert throughput["mean"] == pytest.approx(640 / 5.5e-3)


def test_summary_table_shows_each_model_and_the_configured_confidence_level(capsys):
    report = RunReport.from_dict(json.loads(CPU_REPORT.read_text()))
    at_90 = {
        name: replace(result, statistics=replace(result.statistics, confidence_level=0.9))
        for name, result in report.models.items()
    }
    console.print_summary(replace(report, models=at_90), "out/report.json")
    shown = capsys.readouterr().out
    assert "90% CI (t)" in shown and "95% CI (t)" not in shown
    dqn = report.models["dqn"]
    low, high = dqn.confidence_interval_ms
    dqn_row = next(line for line in shown.splitlines() if "dqn" in line)
    assert f"{dqn.mean_epoch_time_ms:.1f}" in dqn_row and f"{low:.1f}–{high:.1f}" in dqn_row
    # The fixture is an experiment=quick run: its verdict line says it is a smoke test.
    quick_verdict = f"Recommendation (smoke test: tiny shapes, not your training): {report.recommendation.decision}"
    assert quick_verdict in shown and "Report: out/report.json" in shown
    at_995 = {name: replace(r, statistics=replace(r.statistics, confidence_level=0.995)) for name, r in at_90.items()}
    console.print_summary(replace(report, models=at_995), "out/report.json")
    assert "99.5% CI (t)" in capsys.readouterr().out
    # Without a preset the verdict line is the plain one.
    plain = replace(report, run=replace(report.run, choices={**report.run.choices, "experiment": None}))
    console.print_summary(plain, "out/report.json")
    assert f"Recommendation: {report.recommendation.decision} — " in capsys.readouterr().out
