"""The projection check (benchmarks/projection_check.py) runs on the CPU: a model's fp32 split, a variant projected
and measured, and the error between them, as JSON."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "projection_check.py"


@pytest.mark.slow
def test_the_projection_check_runs_on_the_cpu(tmp_path):
    output = tmp_path / "check.json"
    environment = {**os.environ, "OMP_NUM_THREADS": "1", "GPU_BENCHMARK_CACHE_DIR": str(tmp_path / "cache")}
    completed = subprocess.run(
        [
            *(sys.executable, str(SCRIPT), "--device", "cpu", "--quick"),
            *("--models", "dqn", "--variants", "tf32", "--json", str(output)),
        ],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert completed.returncode == 0, completed.stderr
    assert "mean |error|" in completed.stdout
    (row,) = json.loads(output.read_text())["rows"]
    assert (row["model"], row["variant"]) == ("dqn", "tf32")
    assert row["launches_per_step"] > 0 and row["flops_per_step"] > 0 and row["bytes_per_step"] > 0
    # The CPU is no catalog card: no bandwidth, so the rest after launches is not split into memory and host.
    assert (row["memory_ms"], row["host_ms"]) == (None, None)
    assert "memory bandwidth unknown" in completed.stdout
    parts = row["compute_ms"] + row["launch_ms"] + row["other_ms"]
    assert parts == pytest.approx(row["fp32_eager_ms"])
    assert row["error"] == pytest.approx((row["projected_ms"] - row["measured_ms"]) / row["measured_ms"])
