"""Report writing: atomic, strict JSON, early failure on an unwritable output, seed keys from the statistics."""

import json
import os

import pytest

from gpubench.errors import OutputError
from gpubench.output.report_file import ModelResult, ReportWriter, new_report
from gpubench.stats.epoch_times import summarize_epoch_times


def test_writer_replaces_the_file_atomically_and_leaves_no_temp_files(tmp_path):
    writer = ReportWriter(tmp_path / "sub" / "report.json")
    report = new_report({"device_name": "cpu"}, None, {"device": "cpu"})
    writer.write(report)
    report["models"]["mlp"] = {"status": "ok", "value": float("nan")}
    writer.write(report)
    loaded = json.loads((tmp_path / "sub" / "report.json").read_text())
    assert loaded["models"]["mlp"] == {"status": "ok", "value": None}  # NaN is not JSON: written as null
    assert os.listdir(tmp_path / "sub") == ["report.json"]


def test_unwritable_output_fails_before_measuring(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    with pytest.raises(OutputError) as excinfo:
        ReportWriter(blocker / "report.json")
    assert "`output`" in str(excinfo.value) and str(blocker) in str(excinfo.value)
    with pytest.raises(OutputError, match="is a folder"):
        ReportWriter(tmp_path)


def test_model_section_uses_the_statistics_of_its_raw_epochs():
    times_ms = [101.0, 99.0, 100.5, 100.0, 99.5, 102.0]
    summary = summarize_epoch_times(times_ms, confidence_level=0.95)
    result = ModelResult(
        name="mlp",
        raw_epoch_times_ms=times_ms,
        statistics=summary.to_dict(),
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
    # A ramp: strongly autocorrelated, so the decision interval (ESS 2) reaches below zero and is cut there; the
    # plain t interval stays positive.
    times_ms = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    summary = summarize_epoch_times(times_ms, confidence_level=0.95)
    assert summary.decision_interval_ms[0] == 0.0
    result = ModelResult(
        name="dqn", statistics=summary.to_dict(), steps_per_epoch=10, samples_per_step=64, sample_unit="env_step"
    )
    throughput = result.to_dict()["samples_per_second"]
    assert throughput["decision_interval"] == [pytest.approx(640 / (summary.decision_interval_ms[1] / 1e3)), None]
    assert throughput["mean"] == pytest.approx(640 / 3.5e-3)
