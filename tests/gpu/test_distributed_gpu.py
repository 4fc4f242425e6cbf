"""Data-parallel measurement on real GPUs (issue 15): ``distributed.nproc=2`` under torchrun with NCCL, the batch
search agreed across the ranks, each rank on its own GPU. Skipped unless two CUDA GPUs are visible."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from gpubench.results import RunReport

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 CUDA GPUs"),
]


def run_job(folder: Path, *overrides: str) -> RunReport:
    environment = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    # NVLink multicast stays off here too (the condition for the lent machines).
    environment.update({"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1"})
    job = subprocess.run(
        [sys.executable, "-m", "gpubench", "tracking.enabled=false", f"hydra.run.dir={folder}", *overrides],
        cwd=folder,
        env=environment,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert job.returncode == 0, job.stderr[-4000:]
    print(job.stdout)
    return RunReport.from_dict(json.loads((folder / "report.json").read_text()))


def test_two_gpus_measure_the_mlp_with_an_agreed_search(tmp_path) -> None:
    report = run_job(tmp_path, "model=mlp", "experiment=quick", "distributed.nproc=2")
    mlp = report.models["mlp"]
    assert mlp.status == "ok"
    scaling = mlp.distributed
    assert scaling is not None and scaling.status == "ok", scaling
    assert (scaling.world_size, scaling.backend) == (2, "nccl")
    assert [len(times) for times in scaling.per_rank_epoch_times_ms] == [len(mlp.raw_epoch_times_ms)] * 2
    assert len(scaling.peak_reserved_mb_per_rank) == 2 and min(scaling.peak_reserved_mb_per_rank) > 0
    # The search ran on both ranks and they agreed (the batch search runs on a GPU by default).
    assert scaling.batch_search is not None and scaling.batch_search.status == "ok"
    assert scaling.scaling_efficiency is not None and scaling.scaling_efficiency > 0
    assert scaling.scaling_efficiency_interval is not None


def test_two_gpus_measure_the_four_seed_models(tmp_path) -> None:
    report = run_job(tmp_path, "model=all", "experiment=quick", "distributed.nproc=2")
    for name in ("dqn", "ppo", "mamba2", "tft"):
        result = report.models[name]
        assert result.status == "ok", (name, result.error)
        assert result.distributed is not None and result.distributed.status == "ok", (name, result.distributed)
        assert result.distributed.scaling_efficiency is not None
