"""``python -m gpubench.validate``: a report's predictions checked by real trainings in fresh processes.

One quick CPU job is run once for the module; the checks replay its model, recompute the prediction by hand from
the report, count the steps a replay trains, and pin the errors of bad input.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from gpubench import validate
from gpubench.decision.estimate import RELATIVE_MARGIN_FLOOR
from gpubench.results import RunReport, ValidationReport
from gpubench.workload import StepResult


def _python(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    environment["OMP_NUM_THREADS"] = "1"
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, env=environment, capture_output=True, text=True, timeout=600
    )


@pytest.fixture(scope="module")
def job(quick_mlp_job) -> Path:
    """A completed quick job of the MLP on the CPU; its folder (report.json, config_resolved.yaml). The session's
    quick job (tests/conftest.py), which other modules read too."""
    assert quick_mlp_job.completed.returncode == 0, quick_mlp_job.completed.stderr
    return quick_mlp_job.folder


def test_a_replay_of_the_report_writes_its_prediction_and_the_real_time(job: Path, tmp_path: Path) -> None:
    output = tmp_path / "validation.json"
    completed = _python(
        "-m", "gpubench.validate", str(job / "report.json"), "--factor", "2", "--output", str(output), cwd=tmp_path
    )
    assert completed.returncode == 0, completed.stderr
    assert "mlp" in completed.stdout and "predicted s" in completed.stdout
    validation = ValidationReport.from_dict(json.loads(output.read_text()))
    check = validation.models["mlp"]
    assert check.status == "ok", check.error
    # By hand from the report: every step the benchmark ran, with the measured epochs doubled.
    result = RunReport.from_dict(json.loads((job / "report.json").read_text())).models["mlp"]
    epochs = 2 * len(result.raw_epoch_times_ms)
    assert check.epochs == epochs
    assert check.steps == result.calibration_steps + result.steps_per_epoch * (
        len(result.warmup_epoch_times_ms) + epochs
    )
    one_off_s = result.calibration_seconds + sum(result.warmup_epoch_times_ms) / 1e3
    assert check.predicted_s == pytest.approx(one_off_s + epochs * result.statistics.mean_ms / 1e3)
    # The bounds are the decision's: at least the relative floor on the epochs' time, either side.
    epochs_s = epochs * result.statistics.mean_ms / 1e3
    assert check.upper_s - check.predicted_s >= RELATIVE_MARGIN_FLOOR * epochs_s * (1 - 1e-9)
    assert check.lower_s <= check.predicted_s
    assert check.actual_s > 0
    assert check.error_pct == pytest.approx(100 * (check.actual_s - check.predicted_s) / check.predicted_s)
    assert check.inside_bound == (check.lower_s <= check.actual_s <= check.upper_s)


class CountingWorkload:
    """Counts the steps it is asked for."""

    def __init__(self) -> None:
        self.steps = 0

    def train_step(self) -> StepResult:
        self.steps += 1
        return StepResult(loss=torch.tensor(1.0), grad_norm=torch.tensor(0.5))


def test_a_replay_trains_exactly_the_steps_of_its_spec(job: Path, monkeypatch) -> None:
    built: list[tuple[str, int]] = []
    workload = CountingWorkload()

    def build(name, context, batch_size, **kwargs):
        built.append((name, batch_size))
        return workload

    monkeypatch.setattr("gpubench.model_run.build_workload", build)
    # The thread count the benchmark recorded: its report's, which the replay must train with.
    recorded = RunReport.from_dict(json.loads((job / "report.json").read_text())).run.host.torch_num_threads
    spec = validate.ReplaySpec(
        config_path=str(job / "config_resolved.yaml"),
        model="mlp",
        batch_size=48,
        steps_per_epoch=7,
        steps=75,
        torch_threads=recorded,
    )
    threads_before = torch.get_num_threads()
    try:
        torch.set_num_threads(recorded + 1)
        seconds = validate.replay(spec)
        assert torch.get_num_threads() == recorded
    finally:
        torch.set_num_threads(threads_before)
    assert built == [("mlp", 48)]
    assert workload.steps == 75
    assert seconds >= 0


def test_a_model_that_was_not_measured_is_skipped_with_the_reason(job: Path, tmp_path: Path) -> None:
    copy = tmp_path / "job"
    shutil.copytree(job, copy)
    report = json.loads((copy / "report.json").read_text())
    report["models"]["mlp"]["status"] = "oom"
    (copy / "report.json").write_text(json.dumps(report))
    validation = validate.validate_report(copy / "report.json", factor=2.0)
    assert validation.models["mlp"].status == "skipped"
    assert "status oom" in validation.models["mlp"].error


def test_repeated_trainings_are_judged_on_their_median_and_report_their_spread(job: Path, monkeypatch) -> None:
    # Three identical trainings that took 10, 12 and 11 s (a fake clock for the fresh processes; the real replay is
    # checked above): the actual is the median, 11 s, and they spread by (12 - 10) / 11 = 18.18%.
    times_s = iter([10.0, 12.0, 11.0])
    monkeypatch.setattr(validate, "_run_fresh", lambda spec, timeout_s: next(times_s))
    validation = validate.validate_report(job / "report.json", factor=2.0, repeats=3)
    check = validation.models["mlp"]
    assert check.actual_runs_s == [10.0, 12.0, 11.0]
    assert check.actual_s == 11.0
    assert check.replay_spread_pct == pytest.approx(100 * 2 / 11)
    assert check.error_pct == pytest.approx(100 * (11.0 - check.predicted_s) / check.predicted_s)
    assert "3 identical trainings took 10.0, 12.0, 11.0 s, a spread of 18.18%" in validate.format_table(validation)
    assert ValidationReport.from_dict(validation.to_dict()) == validation


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["missing.json"], "missing.json"),
        (["{job}/report.json", "--factor", "0"], "--factor 0 is not valid"),
        (["{job}/report.json", "--models", "tft"], "--models names tft, which the report did not run"),
        (["{job}/report.json", "--repeats", "0"], "--repeats 0 is not valid"),
        ([], "give the report to validate"),
    ],
)
def test_bad_input_is_a_one_paragraph_error_and_exit_2(job: Path, capsys, arguments, message) -> None:
    assert validate.main([a.format(job=job) for a in arguments]) == 2
    assert message in " ".join(capsys.readouterr().err.split())


def test_a_report_without_its_config_names_the_file_it_needs(job: Path, tmp_path: Path, capsys) -> None:
    shutil.copy(job / "report.json", tmp_path / "report.json")
    report = json.loads((tmp_path / "report.json").read_text())
    report["run"]["output_dir"] = str(tmp_path)
    (tmp_path / "report.json").write_text(json.dumps(report))
    assert validate.main([str(tmp_path / "report.json")]) == 2
    assert "no config_resolved.yaml beside" in " ".join(capsys.readouterr().err.split())
