"""The test suite collects where mlflow is not installed: a GPU machine runs ``pytest -m gpu`` without the tracking
extra, and a module that imports mlflow at its top must skip itself rather than stop the collection."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: ``pytest -m gpu --collect-only`` with ``import mlflow`` failing as it does where mlflow is not installed.
COLLECT_WITHOUT_MLFLOW = """
import sys
sys.modules["mlflow"] = None  # `import mlflow` (and mlflow.anything) now raises ModuleNotFoundError
import pytest
sys.exit(pytest.main(["--collect-only", "-q", "-rs", "-m", "gpu", "-p", "no:cacheprovider", "tests"]))
"""


@pytest.mark.slow
def test_pytest_m_gpu_collects_without_mlflow() -> None:
    completed = subprocess.run(
        [sys.executable, "-c", COLLECT_WITHOUT_MLFLOW], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert completed.returncode == 0, completed.stdout[-3000:]
    assert "error" not in completed.stdout.lower().split("short test summary info")[-1]
    assert "tests/test_tracking_live.py" in completed.stdout and "needs mlflow" in completed.stdout
    assert "tests/gpu/test_validate_gpu.py::" in completed.stdout
