"""The H200 memory-fit check (benchmarks/memory_fit_check.py) on the CPU: its logic against a fake device whose
peak reserved memory is exactly a + b·B and whose allocator cap raises an out-of-memory error, as torch's does."""

import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from gpubench.hardware.vram import VramBudget
from gpubench.measure.batch_search import TrialResult, TryBatch
from gpubench.measure.memory_split import StateBytes
from gpubench.results.units import BYTES_PER_MB, MB_PER_GB

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "memory_fit_check.py"


def load_script():
    spec = importlib.util.spec_from_file_location("memory_fit_check", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


check_script = load_script()


class LinearDevice:
    """A 141 GB card whose process holds ``overhead_mb`` outside the allocator; model ``name``'s trial peaks at
    ``fixed + per_sample × B`` MB, and a trial over the allocator's cap (the cap less the overhead) runs out of
    memory."""

    total_mb = 141 * MB_PER_GB

    def __init__(self, lines: dict[str, tuple[float, float]], overhead_mb: float = 520.0) -> None:
        self.lines = lines
        self.overhead_mb = overhead_mb
        self.caps: list[float | None] = []

    def cap(self, cap_gb: float | None) -> VramBudget:
        self.caps.append(cap_gb)
        limit_mb = self.total_mb if cap_gb is None else cap_gb * MB_PER_GB
        return VramBudget(
            vram_limit_mb=limit_mb,
            non_allocator_overhead_mb=self.overhead_mb,
            usable_vram_mb=limit_mb - self.overhead_mb,
            overhead_source="nvml_process",
        )

    def try_batch(self, model: str, budget: VramBudget) -> TryBatch:
        fixed_mb, per_sample_mb = self.lines[model]

        def run(size: int, steps: int) -> TrialResult:
            peak_mb = fixed_mb + per_sample_mb * size
            if peak_mb > budget.usable_vram_mb:
                raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 MiB")
            return TrialResult(peak_reserved_mb=peak_mb, samples_per_s=1000.0, seconds=0.01)

        return run

    def state(self, model: str) -> StateBytes:
        return StateBytes(
            parameters_bytes=100 * BYTES_PER_MB, gradients_bytes=100 * BYTES_PER_MB, optimizer_state_bytes=0
        )


def run(device: LinearDevice, models: list[str], caps: list[float] | None, max_size: int = 1 << 16):
    return check_script.run_checks(
        models, device, caps, headroom=0.9, min_size=32, max_size=max_size, trial_max_seconds=2.0, show=lambda _: None
    )


def test_under_an_exact_line_every_prediction_is_the_finders_batch() -> None:
    device = LinearDevice({"tft": (1_450.0, 2.6), "mlp": (610.0, 0.731)})
    checks = run(device, ["tft", "mlp"], [4.0, 8.0, 16.0])
    rows = [row for check in checks for row in check.rows]
    assert len(rows) == 6
    for row in rows:
        fixed_mb, per_sample_mb = device.lines[row.model]
        limit_mb = 0.9 * (row.cap_gb * MB_PER_GB - device.overhead_mb)
        assert row.limit_mb == pytest.approx(limit_mb)
        assert row.predicted_batch == row.measured_batch == math.floor((limit_mb - fixed_mb) / per_sample_mb)
        assert row.error_percent == 0.0 and row.note is None
    tft = checks[0]
    assert tft.split.remainder_mb == pytest.approx(1_450.0 - 200.0)
    # Every cap is lifted when a model is done.
    assert device.caps[-1] is None


def test_auto_caps_land_the_prediction_between_the_uncapped_searchs_trials() -> None:
    device = LinearDevice({"mamba2": (2_000.0, 11.0)})
    (check,) = run(device, ["mamba2"], None, max_size=4096)
    assert check.uncapped_largest == 4096
    # 0.35 × 4,096 = 1,433.6 and 0.7 × 4,096 = 2,867.2, rounded: between the trials at 1,024, 2,048 and 4,096.
    assert [row.predicted_batch for row in check.rows] == [1434, 2867]
    assert [row.measured_batch for row in check.rows] == [1434, 2867]


def test_a_finder_stopped_at_max_size_is_not_compared() -> None:
    device = LinearDevice({"mlp": (600.0, 0.01)})
    (check,) = run(device, ["mlp"], [8.0], max_size=4096)
    (row,) = check.rows
    assert row.measured_batch == 4096 and row.predicted_batch > 4096
    assert row.error_percent is None and "--max-size" in row.note


def test_the_table_and_the_json_carry_every_row(tmp_path: Path) -> None:
    device = LinearDevice({"tft": (1_450.0, 2.6)})
    checks = run(device, ["tft"], [4.0, 8.0])
    table = check_script._table(checks)
    assert table[0].split() == ["model", "cap", "GB", "limit", "MB", "predicted", "B", "measured", "B", "error", "%"]
    assert table[-1].startswith("max |error| 0.00% over 2 caps")
    data = json.loads(json.dumps(check_script.report(checks, "fake", 0.9)))
    (model,) = data["models"]
    assert [row["cap_gb"] for row in model["rows"]] == [4.0, 8.0]
    assert model["split"]["activations_mb_per_sample"] == pytest.approx(2.6)


def test_the_script_refuses_bad_caps_and_a_machine_without_cuda() -> None:
    bad = subprocess.run([sys.executable, str(SCRIPT), "--caps", "-4"], capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and "--caps must be positive GB" in bad.stderr
    if not torch.cuda.is_available():
        no_gpu = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=300)
        assert no_gpu.returncode == 2 and "needs a CUDA device" in no_gpu.stderr


def test_stored_h200_reports_compare_without_a_gpu(tmp_path: Path) -> None:
    # The H200's uncapped default run (session 7) predicts the RTX 3050 Ti run's (session 6, 4 GB cap) batches.
    results = SCRIPT.parent / "results"
    output = tmp_path / "check.json"
    completed = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--from-reports",
            str(results / "2026-12-02-h200-s7-default-report.json"),
            str(results / "2026-12-01-h200-s6-rtx3050ti-report.json"),
            "--json",
            str(output),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert completed.returncode == 0, completed.stderr
    rows = {model["model"]: model["rows"][0] for model in json.loads(output.read_text())["models"]}
    # TFT: 0.9 × (4,096 − 676) = 3,078 MB lies between the trials at 128 (2,508 MB) and 256 (5,732 MB): 150.
    assert (rows["tft"]["predicted_batch"], rows["tft"]["measured_batch"]) == (150, 158)
    assert rows["tft"]["error_percent"] == pytest.approx(100 * (150 - 158) / 158)
    # DQN and PPO fit the whole search range under the cap: nothing to compare.
    assert rows["dqn"]["error_percent"] is None and "--max-size" in rows["dqn"]["note"]
    assert "tft" in completed.stdout and "-5.06" in completed.stdout


def test_a_model_whose_peaks_do_not_grow_is_skipped_with_the_reason_and_the_others_checked() -> None:
    # The MLP on the H200 (session 9): its trials' peaks did not grow with the batch, and the script stopped there.
    device = LinearDevice({"mlp": (610.0, 0.0), "tft": (1_450.0, 2.6)})
    shown: list[str] = []
    checks = check_script.run_checks(
        ["mlp", "tft"],
        device,
        None,
        headroom=0.9,
        min_size=32,
        max_size=1 << 16,
        trial_max_seconds=2.0,
        show=shown.append,
    )
    assert [check.model for check in checks] == ["tft"] and checks[0].rows
    assert shown[0].startswith("mlp: skipped, no line through the uncapped trials (")
