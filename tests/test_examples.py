"""The examples under examples/ run as a user runs them (on the CPU, the quick experiment), in a fresh folder."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
QUICK = ["hardware=cpu", "experiment=quick", "hardware.burn_in_max_seconds=0", "tracking.enabled=false"]


def run_in(folder: Path, cache: Path, *command: str) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    environment.update({"OMP_NUM_THREADS": "1", "GPU_BENCHMARK_CACHE_DIR": str(cache)})
    return subprocess.run(
        [sys.executable, *command], cwd=folder, env=environment, capture_output=True, text=True, timeout=600
    )


def custom_section(folder: Path) -> dict:
    reports = sorted(folder.glob("outputs/*/*/report.json"))
    assert len(reports) == 1, reports
    report = json.loads(reports[0].read_text())
    assert report["status"] == "complete"
    return report["models"]["custom"]


@pytest.fixture
def example_folder(tmp_path) -> Path:
    shutil.copy(EXAMPLES / "transformer_forecaster.py", tmp_path)
    return tmp_path


@pytest.mark.slow
def test_the_transformer_example_runs_through_the_python_api(example_folder, tmp_path_factory):
    completed = run_in(example_folder, tmp_path_factory.mktemp("cache"), "transformer_forecaster.py", *QUICK)
    assert completed.returncode == 0, completed.stderr
    assert "status ok" in completed.stdout and "series/s" in completed.stdout
    section = custom_section(example_folder)
    assert section["status"] == "ok" and section["batch_size"] == 64
    # nn.Transformer's parameters, counted from the step's closure: far more than the embedding and head alone.
    assert section["workload"]["parameters"] > 100_000
    assert section["stability_details"]["max_grad_norm"] > 0


@pytest.mark.slow
def test_the_transformer_example_runs_from_the_command_line(example_folder, tmp_path_factory):
    completed = run_in(
        example_folder,
        tmp_path_factory.mktemp("cache"),
        "-m",
        "gpubench",
        "model=custom",
        "workloads.custom.factory=transformer_forecaster:build",
        "workloads.custom.batch_size=32",
        "decision.plan.samples.custom=5e6",
        *QUICK,
    )
    assert completed.returncode == 0, completed.stderr
    section = custom_section(example_folder)
    assert section["status"] == "ok" and section["batch_size"] == 32
    assert section["workload"]["build"] == "transformer_forecaster.build"


@pytest.mark.slow
def test_the_cnn_example_runs_as_a_training_class_through_the_python_api(tmp_path, tmp_path_factory):
    shutil.copy(EXAMPLES / "cnn_classifier.py", tmp_path)
    completed = run_in(tmp_path, tmp_path_factory.mktemp("cache"), "cnn_classifier.py", *QUICK)
    assert completed.returncode == 0, completed.stderr
    assert "status ok" in completed.stdout and "images/s" in completed.stdout
    section = custom_section(tmp_path)
    assert section["status"] == "ok" and (section["batch_size"], section["sample_unit"]) == (128, "image")
    # The network the Trainer holds, counted by hand: two convolutions and two linear layers with their biases.
    assert section["workload"]["parameters"] == (32 * 9 + 32) + (64 * 32 * 9 + 64) + (64 * 49 * 128 + 128) + 1290
