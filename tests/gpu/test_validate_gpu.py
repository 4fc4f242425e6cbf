"""``python -m gpubench.validate`` on a real CUDA GPU: a quick MLP job, then its prediction checked by a real
training twice as long in a fresh process (the GPU's steady epochs make the check decisive: inside the bound)."""

import json
import os
import subprocess
import sys

import pytest

from gpubench.results import ValidationReport

pytestmark = pytest.mark.gpu


def test_a_gpu_job_s_prediction_holds_for_a_training_twice_as_long(tmp_path) -> None:
    environment = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    job = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpubench",
            "model=mlp",
            "tracking.enabled=false",
            "epochs=10",
            "epoch.min_seconds=0.2",
            "batch.search=false",
            f"hydra.run.dir={tmp_path}",
        ],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert job.returncode == 0, job.stderr
    check = subprocess.run(
        [sys.executable, "-m", "gpubench.validate", str(tmp_path / "report.json"), "--factor", "2"],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert check.returncode == 0, check.stderr
    validation = ValidationReport.from_dict(json.loads((tmp_path / "validation.json").read_text()))
    (mlp,) = validation.checks
    assert (mlp.model, mlp.status) == ("mlp", "ok"), mlp.error
    assert mlp.inside_bound, check.stdout
