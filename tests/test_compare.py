"""``python -m gpubench.compare``: ratio intervals against hand-computed values, p-values against scipy called
independently, verdicts for planted changes (``gpubench.stats.compare``), and the reports, the rendering and the
command line on report files and MLflow run ids (``gpubench.output.compare``)."""

import json
import math
import subprocess
import sys
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import stats as sps

from gpubench.output.compare import CompareError, compare_reports, main, render_markdown, unmatched_models
from gpubench.results import HardwareReport, ModelResult, RunInfo, RunReport
from gpubench.stats.compare import (
    AMBIGUOUS,
    FASTER,
    SAME,
    SLOWER,
    compare_epoch_times,
    epochs_to_decide,
    ratio_interval,
    verdict,
)


def epoch_times_ms(mean_ms: float, cv: float, n: int, seed: int, stall_at: int | None = None) -> np.ndarray:
    """GPU-like epoch times: Gaussian jitter of relative size ``cv``, and optionally one 15% stall."""
    times = mean_ms * (1 + cv * np.random.default_rng(seed).standard_normal(n))
    if stall_at is not None:
        times[stall_at] *= 1.15
    return times


def make_report(times_by_model: dict[str, np.ndarray | list[float]], device: str = "Test GPU") -> RunReport:
    """A complete report whose models measured the given epoch times (ms), as the runner writes it."""
    run = RunInfo(
        device="cuda",
        models=list(times_by_model),
        epochs=10,
        warmup_epochs=2,
        precision="fp32",
        compile="false",
        seed=0,
    )
    return RunReport(
        timestamp="2026-01-01T00:00:00+00:00",
        benchmark_version="0.1.0",
        report_schema_version=1,
        status="complete",
        run=run,
        hardware=HardwareReport(measured_on="cuda", device_name=device),
        data=None,
        models={
            name: ModelResult(raw_epoch_times_ms=[float(t) for t in times]) for name, times in times_by_model.items()
        },
    )


def scaled(report: RunReport, factor: float) -> RunReport:
    """``report`` with every model's epoch times multiplied by ``factor``."""
    return make_report({name: np.array(r.raw_epoch_times_ms) * factor for name, r in report.models.items()})


def with_exact_moments(mean_ms: float, std_ms: float, n: int, seed: int) -> np.ndarray:
    """n epoch times whose sample mean and sample standard deviation (ddof 1) are exactly the given ones."""
    z = np.random.default_rng(seed).standard_normal(n)
    return mean_ms + std_ms * (z - z.mean()) / z.std(ddof=1)


@pytest.fixture
def gpu_report() -> RunReport:
    return make_report(
        {
            "dqn": epoch_times_ms(1200.0, 0.015, 15, seed=1, stall_at=7),
            "ppo": epoch_times_ms(800.0, 0.01, 12, seed=2),
            "mlp": epoch_times_ms(95.0, 0.02, 20, seed=3, stall_at=0),
        }
    )


# --------------------------------------------------------------------------------------------------- verdicts


def test_a_report_against_itself_is_same_for_every_model_with_ratio_one_and_p_values_one(gpu_report):
    comparisons = compare_reports(gpu_report, gpu_report)
    assert [c.model for c in comparisons] == ["dqn", "ppo", "mlp"]
    for comparison in comparisons:
        assert comparison.result.verdict == SAME, comparison
        assert comparison.result.ratio_b_over_a == pytest.approx(1.0, abs=1e-12)
        low, high = comparison.result.ratio_interval
        assert 0.95 <= low < 1 < high <= 1.05
        assert comparison.result.welch_p_value == pytest.approx(1.0, abs=1e-12)
        assert comparison.result.mann_whitney_p_value == pytest.approx(1.0, abs=1e-12)
        assert comparison.result.yuen_p_value == pytest.approx(1.0, abs=1e-12)
        assert comparison.result.epochs_to_decide is None
    assert unmatched_models(gpu_report, gpu_report) == []


def test_a_noisy_report_against_itself_is_same_but_a_noisy_rerun_is_ambiguous():
    # Like the CPU run in the issue: 6 epochs with a 12% coefficient of variation.
    report = make_report({"mlp": epoch_times_ms(100.0, 0.12, 6, seed=4)})
    (itself,) = compare_reports(report, report)
    assert itself.result.verdict == SAME and itself.result.identical_measurements
    assert (
        itself.result.ratio_interval[0] < 0.95 and itself.result.ratio_interval[1] > 1.05
    )  # the interval is still honest
    assert "compared with itself" in itself.explanation
    # A rerun drawn from the same distribution cannot show agreement within 5% with so few epochs.
    rerun = make_report({"mlp": epoch_times_ms(100.0, 0.12, 6, seed=5)})
    (comparison,) = compare_reports(report, rerun)
    assert comparison.result.verdict == AMBIGUOUS and not comparison.result.identical_measurements
    assert comparison.result.ratio_interval[0] < 0.95 and comparison.result.ratio_interval[1] > 1.05
    assert comparison.result.epochs_to_decide is not None and comparison.result.epochs_to_decide > 6
    assert f"about {comparison.result.epochs_to_decide} epochs per run" in comparison.explanation


@pytest.mark.parametrize(("factor", "expected"), [(1.2, SLOWER), (0.8, FASTER)])
def test_a_planted_20_percent_change_is_slower_or_faster(gpu_report, factor, expected):
    candidate = make_report(
        {
            name: np.array(result.raw_epoch_times_ms)
            * factor
            * (1 + 0.01 * np.random.default_rng(9).standard_normal(len(result.raw_epoch_times_ms)))
            for name, result in gpu_report.models.items()
        }
    )
    for comparison in compare_reports(gpu_report, candidate):
        assert comparison.result.verdict == expected, comparison
        assert comparison.result.ratio_b_over_a == pytest.approx(factor, abs=0.02)
        low, high = comparison.result.ratio_interval
        assert low < comparison.result.ratio_b_over_a < high
        assert (low > 1.05) if expected == SLOWER else (high < 0.95)
        assert (
            max(comparison.result.welch_p_value, comparison.result.mann_whitney_p_value, comparison.result.yuen_p_value)
            < 1e-3
        )
        direction = "longer" if expected == SLOWER else "shorter"
        assert comparison.explanation.startswith(
            f"B's epochs are {abs(comparison.result.ratio_b_over_a - 1):.1%} {direction}"
        )


def test_a_small_noisy_difference_with_few_epochs_is_ambiguous():
    baseline = make_report({"tft": epoch_times_ms(500.0, 0.05, 4, seed=5)})
    candidate = make_report({"tft": epoch_times_ms(530.0, 0.05, 4, seed=6)})
    (comparison,) = compare_reports(baseline, candidate)
    assert comparison.result.verdict == AMBIGUOUS
    low, high = comparison.result.ratio_interval
    assert low < 1.05 < high


@pytest.mark.parametrize(
    ("interval", "expected"),
    [
        ((0.80, 0.949), FASTER),
        ((0.951, 1.049), SAME),
        ((0.97, 1.0), SAME),
        ((1.051, 1.3), SLOWER),
        ((0.90, 0.97), AMBIGUOUS),  # faster, but perhaps by less than the threshold
        ((1.02, 1.08), AMBIGUOUS),  # significantly slower, perhaps within the noise
        ((0.90, 1.10), AMBIGUOUS),
        ((-math.inf, math.inf), AMBIGUOUS),
    ],
)
def test_verdict_compares_the_whole_interval_with_the_threshold_band(interval, expected):
    assert verdict(interval, 0.05) == expected


def test_a_wider_threshold_turns_a_slowdown_into_same(gpu_report):
    candidate = scaled(gpu_report, 1.1)
    assert {c.result.verdict for c in compare_reports(gpu_report, candidate, threshold=0.05)} == {SLOWER}
    assert {c.result.verdict for c in compare_reports(gpu_report, candidate, threshold=0.15)} == {SAME}


# --------------------------------------------------------------------------------------------------- statistics


def test_fieller_interval_matches_a_hand_computed_example():
    # A = 10..14 ms: mean 12, s^2 = 2.5, se_A^2 = 0.5. B = 12..16 ms: mean 14, se_B^2 = 0.5. R = 14/12 = 7/6.
    # Welch df at R: (0.5 + R^2 0.5)^2 / ((0.5^2 + R^4 0.5^2) / 4) = 28900 / 3697 = 7.8171...
    # Roots of (14 - 12 R)^2 = t^2 (0.5 + 0.5 R^2): R = (168 -+ t sqrt(170 - t^2 / 4)) / (144 - t^2 / 2).
    interval = ratio_interval([10, 11, 12, 13, 14], [12, 13, 14, 15, 16], 0.95)
    assert interval.ratio == pytest.approx(7 / 6, rel=1e-15)
    assert interval.welch_df == pytest.approx(28900 / 3697, rel=1e-12)
    t = sps.t.ppf(0.975, 28900 / 3697)
    assert t == pytest.approx(2.31542690, rel=1e-8)
    half = t * math.sqrt(170 - t**2 / 4)
    assert interval.low == pytest.approx((168 - half) / (144 - t**2 / 2), rel=1e-12)
    assert interval.high == pytest.approx((168 + half) / (144 - t**2 / 2), rel=1e-12)
    assert (interval.low, interval.high) == pytest.approx((0.97601442, 1.40157848), rel=1e-7)
    # Each end is where a Welch-type test of "mean_B = R mean_A" sits exactly at the critical value.
    for ratio in (interval.low, interval.high):
        assert abs(14 - 12 * ratio) / math.sqrt(0.5 + 0.5 * ratio**2) == pytest.approx(t, rel=1e-12)


def test_fieller_agrees_with_the_delta_method_on_log_means_when_noise_is_small():
    a = epoch_times_ms(1000.0, 0.01, 20, seed=7)
    b = epoch_times_ms(900.0, 0.01, 20, seed=8)
    interval = ratio_interval(a, b, 0.95)
    # Delta method: log(mean_B / mean_A) has standard error sqrt(se_A^2 / mean_A^2 + se_B^2 / mean_B^2).
    se_log = math.sqrt(sps.sem(a) ** 2 / a.mean() ** 2 + sps.sem(b) ** 2 / b.mean() ** 2)
    t = sps.t.ppf(0.975, interval.welch_df)
    delta = (b.mean() / a.mean() * math.exp(-t * se_log), b.mean() / a.mean() * math.exp(t * se_log))
    assert (interval.low, interval.high) == pytest.approx(delta, abs=2e-5)
    # Fieller is not symmetric about the estimate: its upper arm is the longer one.
    assert interval.high - interval.ratio > interval.ratio - interval.low


def test_welch_degrees_of_freedom_reduce_to_the_welch_formula_when_the_ratio_is_one():
    a = epoch_times_ms(100.0, 0.02, 8, seed=10)
    b = with_exact_moments(float(a.mean()), 3.0, 14, seed=11)
    interval = ratio_interval(a, b, 0.9)
    assert interval.ratio == pytest.approx(1.0, rel=1e-12)
    assert interval.welch_df == pytest.approx(sps.ttest_ind(b, a, equal_var=False).df, rel=1e-9)


def test_fieller_interval_is_unbounded_when_a_mean_is_indistinguishable_from_zero():
    # Two epochs of 10 and 30 ms: with 1 degree of freedom, t = 12.7 and A's mean (20 ms) is within t * se of 0.
    report_a = make_report({"dqn": [10.0, 30.0]})
    report_b = make_report({"dqn": [20.0, 21.0]})
    (comparison,) = compare_reports(report_a, report_b)
    assert comparison.result.ratio_interval == (-math.inf, math.inf)
    assert comparison.result.verdict == AMBIGUOUS and comparison.result.epochs_to_decide is not None
    assert "bounded" in comparison.explanation


def test_constant_epoch_times_give_an_exact_ratio_and_undefined_t_tests():
    (slower,) = compare_reports(make_report({"mlp": [100.0] * 5}), make_report({"mlp": [110.0] * 5}))
    assert slower.result.ratio_interval == pytest.approx((1.1, 1.1), rel=1e-12) and slower.result.verdict == SLOWER
    (same,) = compare_reports(make_report({"mlp": [100.0] * 5}), make_report({"mlp": [100.0] * 5}))
    assert same.result.ratio_interval == (1.0, 1.0) and same.result.verdict == SAME
    # Welch and Yuen divide zero by zero here; Mann-Whitney still ranks the (all tied) epochs.
    assert (
        math.isnan(same.result.welch_p_value)
        and math.isnan(same.result.yuen_p_value)
        and same.result.mann_whitney_p_value == 1.0
    )
    text = render_markdown([same], [], label_a="a", label_b="b", threshold=0.05, confidence=0.95)
    assert "| 1.000–1.000 | – | 1 | – | SAME |" in text


def test_p_values_equal_scipy_called_independently():
    a = epoch_times_ms(400.0, 0.03, 11, seed=12, stall_at=3)
    b = epoch_times_ms(410.0, 0.03, 16, seed=13)
    (comparison,) = compare_reports(make_report({"ppo": a}), make_report({"ppo": b}))
    assert comparison.result.welch_p_value == pytest.approx(sps.ttest_ind(a, b, equal_var=False).pvalue, rel=1e-12)
    assert comparison.result.mann_whitney_p_value == pytest.approx(sps.mannwhitneyu(a, b).pvalue, rel=1e-12)
    assert comparison.result.yuen_p_value == pytest.approx(
        sps.ttest_ind(a, b, equal_var=False, trim=0.2).pvalue, rel=1e-12
    )
    # The trim really is applied: the stall moves Welch's p-value but not Yuen's as much.
    assert comparison.result.yuen_p_value != pytest.approx(comparison.result.welch_p_value, rel=1e-3)


def test_epochs_to_decide_is_the_fewest_epochs_per_run_whose_interval_decides():
    mean_a, std_a, mean_b, std_b = 100.0, 6.0, 108.0, 6.0
    needed = epochs_to_decide(mean_a, std_a, mean_b, std_b, threshold=0.05, confidence_level=0.95)
    assert needed is not None and needed > 3

    def verdict_with(n: int) -> str:
        a = with_exact_moments(mean_a, std_a, n, seed=14)
        b = with_exact_moments(mean_b, std_b, n, seed=15)
        (comparison,) = compare_reports(make_report({"m": a}), make_report({"m": b}))
        return comparison.result.verdict

    assert verdict_with(needed) == SLOWER
    assert verdict_with(needed - 1) == AMBIGUOUS
    # A ratio exactly on the threshold edge never decides.
    assert epochs_to_decide(100.0, 5.0, 105.0, 5.0, threshold=0.05, confidence_level=0.95) is None


def test_compare_epoch_times_needs_two_epochs_per_run_and_settings_inside_zero_to_one():
    with pytest.raises(ValueError, match="at least 2 epoch times per run, got 1 and 3"):
        compare_epoch_times([1.0], [1.0, 2.0, 3.0], threshold=0.05, confidence_level=0.95)
    with pytest.raises(ValueError, match="threshold must lie in"):
        compare_epoch_times([1.0, 2.0], [1.0, 2.0], threshold=1.0, confidence_level=0.95)
    with pytest.raises(ValueError, match="confidence must lie in"):
        compare_epoch_times([1.0, 2.0], [1.0, 2.0], threshold=0.05, confidence_level=0.0)


def test_a_report_comparison_is_the_comparison_of_its_models_epoch_times(gpu_report):
    candidate = scaled(gpu_report, 1.03)
    for comparison in compare_reports(gpu_report, candidate, threshold=0.1, confidence=0.9):
        times_a = gpu_report.models[comparison.model].raw_epoch_times_ms
        times_b = candidate.models[comparison.model].raw_epoch_times_ms
        assert comparison.result == compare_epoch_times(times_a, times_b, threshold=0.1, confidence_level=0.9)


# --------------------------------------------------------------------------------------------------- reports


def test_models_in_only_one_report_or_without_epoch_times_are_listed_with_the_reason():
    report_a = make_report(
        {"mlp": epoch_times_ms(95.0, 0.02, 10, 1), "dqn": [], "ppo": epoch_times_ms(800, 0.01, 10, 2)}
    )
    oom = ModelResult(status="oom", error="CUDA out of memory at batch 32")
    report_a = replace(report_a, models={**report_a.models, "dqn": oom})
    report_b = make_report(
        {
            "mlp": epoch_times_ms(95.0, 0.02, 10, 3),
            "dqn": epoch_times_ms(1200, 0.01, 10, 4),
            "tft": [500.0, math.nan, 510.0],
        }
    )
    assert [c.model for c in compare_reports(report_a, report_b)] == ["mlp"]
    reasons = {u.model: u.reason for u in unmatched_models(report_a, report_b)}
    assert reasons == {
        "dqn": "A: 0 measured epoch time(s), status oom: CUDA out of memory at batch 32",
        "ppo": "only in A",
        "tft": "only in B",
    }


def test_a_report_without_epoch_times_is_an_error_naming_the_report(tmp_path, gpu_report, capsys):
    one_epoch = make_report({"dqn": [1.0]})
    failed = replace(one_epoch, models={"dqn": replace(one_epoch.models["dqn"], status="failed")})
    with pytest.raises(CompareError, match=r"report B: .*at least 2 measured epoch times.*dqn: 1 measured .*failed"):
        compare_reports(gpu_report, failed)
    # A file that is JSON but not a report is refused when it is read, naming the argument and the file.
    not_a_report = write_json(tmp_path / "a.json", {"timestamp": "x"})
    assert main([not_a_report, write_report(tmp_path / "b.json", gpu_report)]) == 2
    assert f"argument A '{not_a_report}': {not_a_report} is not a gpubench report" in capsys.readouterr().err


def test_render_markdown_has_a_header_a_row_per_model_and_the_notes(gpu_report):
    slower = scaled(gpu_report, 1.2)
    slower = replace(slower, models={name: result for name, result in slower.models.items() if name != "mlp"})
    comparisons = compare_reports(gpu_report, slower)
    text = render_markdown(
        comparisons,
        unmatched_models(gpu_report, slower),
        label_a="a.json",
        label_b="b.json",
        threshold=0.05,
        confidence=0.9,
    )
    lines = text.splitlines()
    header = next(line for line in lines if line.startswith("| model |"))
    assert "ratio B/A" in header and "90% interval B/A" in header and header.endswith("| verdict: B vs A |")
    rows = [line.split(" | ") for line in lines if line.startswith(("| dqn ", "| ppo "))]
    assert [row[0] for row in rows] == ["| dqn", "| ppo"] and all(row[-1] == "SLOWER |" for row in rows)
    assert all(len(row) == header.count(" | ") + 1 for row in rows)
    assert "- **mlp**: only in A" in lines and "- **A**: a.json" in lines


def test_compare_reports_rejects_a_threshold_or_confidence_outside_zero_to_one(gpu_report):
    with pytest.raises(CompareError, match="threshold must lie in"):
        compare_reports(gpu_report, gpu_report, threshold=0.0)
    with pytest.raises(CompareError, match="confidence must lie in"):
        compare_reports(gpu_report, gpu_report, confidence=1.0)


# --------------------------------------------------------------------------------------------------- command line


def write_json(path: Path, content: Any) -> str:
    path.write_text(json.dumps(content))
    return str(path)


def write_report(path: Path, report: RunReport) -> str:
    return write_json(path, report.to_dict())


def test_cli_compares_two_report_files_and_writes_markdown(tmp_path, gpu_report, capsys):
    slower = scaled(gpu_report, 1.2)
    a = write_report(tmp_path / "a.json", gpu_report)
    b = write_report(tmp_path / "b.json", slower)
    markdown = tmp_path / "out.md"
    assert main([a, b, "--markdown", str(markdown)]) == 0
    rows = [line for line in markdown.read_text().splitlines() if line.startswith("| ") and "---" not in line]
    assert [row.split(" | ")[0] for row in rows] == ["| model", "| dqn", "| ppo", "| mlp"]
    assert all(row.endswith("| SLOWER |") for row in rows[1:])
    terminal = capsys.readouterr().out
    assert "gpubench compare: B against A" in terminal and terminal.count("SLOWER") >= 3


def test_cli_as_a_module_prints_markdown_on_stdout_and_the_table_on_stderr(tmp_path, gpu_report):
    a = write_report(tmp_path / "a.json", gpu_report)
    completed = subprocess.run(
        [sys.executable, "-m", "gpubench.compare", a, a, "--markdown", "-", "--threshold", "0.1"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.startswith("## gpubench compare: B against A\n")
    assert "±10% noise threshold" in completed.stdout and completed.stdout.count("| SAME |") == 3
    assert "┃ model" in completed.stderr and "┃" not in completed.stdout


def log_report_run(tmp_path: Path, content: Any) -> tuple[str, str]:
    """An MLflow run in a temp SQLite store holding ``content`` as its report.json artifact (none when ``content``
    is None); (uri, run id)."""
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    experiment_id = client.create_experiment("compare", artifact_location=(tmp_path / "artifacts").as_uri())
    run_id = client.create_run(experiment_id).info.run_id
    if content is not None:
        folder = tmp_path / "to_log"
        folder.mkdir()
        client.log_artifact(run_id, write_json(folder / "report.json", content))
    client.set_terminated(run_id)
    return uri, run_id


def test_cli_compares_an_mlflow_run_id_with_a_report_file(tmp_path, gpu_report):
    uri, run_id = log_report_run(tmp_path, gpu_report.to_dict())
    faster = scaled(gpu_report, 0.8)
    b = write_report(tmp_path / "b.json", faster)
    markdown = tmp_path / "out.md"
    assert main([run_id, b, "--tracking-uri", uri, "--markdown", str(markdown)]) == 0
    text = markdown.read_text()
    assert f"- **A**: {run_id} (Test GPU, 2026-01-01T00:00:00+00:00)" in text
    assert text.count("| FASTER |") == 3


def test_cli_reads_the_tracking_uri_from_the_environment(tmp_path, gpu_report, monkeypatch):
    uri, run_id = log_report_run(tmp_path, gpu_report.to_dict())
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    markdown = tmp_path / "out.md"
    assert main([run_id, run_id, "--markdown", str(markdown)]) == 0
    assert markdown.read_text().count("| SAME |") == 3


def test_cli_unknown_run_id_or_run_without_report_exits_2_naming_the_argument(tmp_path, capsys):
    uri, run_id = log_report_run(tmp_path, None)
    unknown = uuid.uuid4().hex
    assert main([unknown, run_id, "--tracking-uri", uri]) == 2
    assert f"argument A '{unknown}': no MLflow run {unknown}" in capsys.readouterr().err
    existing = write_report(tmp_path / "a.json", make_report({"mlp": [1.0, 2.0]}))
    assert main([existing, run_id, "--tracking-uri", uri]) == 2
    assert f"argument B '{run_id}': MLflow run {run_id} has no report.json artifact" in capsys.readouterr().err


def test_cli_run_whose_report_is_not_a_gpubench_report_exits_2_naming_the_run(tmp_path, gpu_report, capsys):
    uri, run_id = log_report_run(tmp_path, {"timestamp": "x"})
    good = write_report(tmp_path / "good.json", gpu_report)
    assert main([good, run_id, "--tracking-uri", uri]) == 2
    err = capsys.readouterr().err
    assert f"argument B '{run_id}': MLflow run {run_id}'s report.json is not a gpubench report" in err
    assert "Traceback" not in err


def test_cli_refuses_a_missing_sqlite_store_instead_of_creating_one(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    run_id = uuid.uuid4().hex
    assert main([run_id, run_id]) == 2
    assert f"argument A '{run_id}': the MLflow tracking store sqlite:///mlruns/mlflow.db does not exist" in (
        capsys.readouterr().err
    )
    assert not (tmp_path / "mlruns").exists()


def test_cli_bad_report_arguments_exit_2_with_the_argument_named(tmp_path, gpu_report, capsys):
    good = write_report(tmp_path / "good.json", gpu_report)
    no_times = replace(make_report({}), models={"dqn": ModelResult(status="failed", error="boom")})
    cases = {
        str(tmp_path / "missing.json"): "neither an existing report file nor an MLflow run id",
        write_report(tmp_path / "no_times.json", no_times): "no model with at least 2 measured epoch times",
        write_json(tmp_path / "list.json", [1, 2]): "is not a gpubench report",
    }
    (tmp_path / "broken.json").write_text("{not json")
    cases[str(tmp_path / "broken.json")] = "is not valid JSON"
    for bad, message in cases.items():
        assert main([good, bad]) == 2
        err = capsys.readouterr().err
        assert f"argument B '{bad}'" in err and message in err and "Traceback" not in err
    other = write_report(tmp_path / "other.json", make_report({"tft": [1.0, 2.0, 3.0]}))
    assert main([good, other]) == 2
    assert "no model has measured epoch times in both A" in capsys.readouterr().err


@pytest.mark.parametrize(("option", "value"), [("--threshold", "1.5"), ("--confidence", "0"), ("--threshold", "x")])
def test_cli_bad_options_exit_2_naming_the_option(tmp_path, gpu_report, capsys, option, value):
    good = write_report(tmp_path / "good.json", gpu_report)
    with pytest.raises(SystemExit) as exited:
        main([good, good, option, value])
    assert exited.value.code == 2
    assert option in capsys.readouterr().err


def test_cli_missing_file_as_a_module_exits_2_without_traceback(tmp_path):
    completed = subprocess.run(
        [sys.executable, "-m", "gpubench.compare", "nope.json", "also_nope.json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 2
    assert "argument A 'nope.json'" in completed.stderr and "Traceback" not in completed.stderr
