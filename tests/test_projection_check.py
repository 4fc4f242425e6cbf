"""The projection check (benchmarks/projection_check.py) runs on the CPU: a model's fp32 split, a variant projected
and measured, and the error between them, as JSON."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "projection_check.py"


def _run(tmp_path: Path, script: Path, *args: str) -> subprocess.CompletedProcess:
    """Run a benchmark script on one CPU thread in ``tmp_path``, its feature cache there too."""
    environment = {**os.environ, "OMP_NUM_THREADS": "1", "GPU_BENCHMARK_CACHE_DIR": str(tmp_path / "cache")}
    return subprocess.run(
        [sys.executable, str(script), *args], cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=600
    )


@pytest.mark.slow
def test_the_projection_check_runs_on_the_cpu(tmp_path):
    output = tmp_path / "check.json"
    completed = _run(
        tmp_path, SCRIPT, "--device", "cpu", "--quick", "--models", "dqn", "--variants", "tf32", "--json", str(output)
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


@pytest.mark.slow
def test_the_cpu_rebuild_check_compares_the_rebuilt_step_with_the_measured_one(tmp_path):
    measured = tmp_path / "measured.json"
    measured.write_text(json.dumps({"rows": [{"model": "dqn", "variant": "tf32", "fp32_eager_ms": 10.0}]}))
    completed = _run(
        tmp_path, SCRIPT.parent / "cpu_rebuild_check.py", str(measured), "--card", "h100", "experiment=quick"
    )
    assert completed.returncode == 0, completed.stderr
    (row,) = [line.split() for line in completed.stdout.splitlines() if line.startswith("dqn")]
    rebuilt_ms, measured_ms, ratio = float(row[4]), float(row[5]), float(row[-1])
    assert measured_ms == 10.0 and ratio == pytest.approx(10.0 / rebuilt_ms, abs=0.01)
    assert f"from {ratio:.2f} to {ratio:.2f} over 1 steps" in completed.stdout
