"""One model end to end on a real CUDA GPU: the batch search, the measured run's memory profile and NVML timeline,
and the device's per-epoch readings all reach the frozen result."""

import pytest
import torch
from conftest import make_learnable_features
from hydra import compose, initialize_config_dir

from gpubench.bench.model_run import ModelRunContext, run_model
from gpubench.conf import CONF_DIR
from gpubench.config import register_configs, typed_config
from gpubench.hardware.selection import synchronizer
from gpubench.hardware.vram import apply_vram_limit
from gpubench.measure.timing import BlockTimer

pytestmark = pytest.mark.gpu

DEVICE = torch.device("cuda", 0)


def test_the_mlp_on_the_gpu_is_searched_profiled_and_watched(tmp_path) -> None:
    register_configs()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(
            config_name="config",
            overrides=[
                f"output={tmp_path / 'report.json'}",
                "model=mlp",
                "epochs=3",
                "warmup_epochs=1",
                "epoch.min_seconds=0.05",
                "batch.max_size=256",
            ],
        )
    budget = apply_vram_limit(DEVICE, None)
    assert budget is not None
    context = ModelRunContext(
        cfg=typed_config(cfg),
        device=DEVICE,
        features=make_learnable_features(device="cuda"),
        timer=BlockTimer(synchronizer(DEVICE)),
        usable_vram_mb=budget.usable_vram_mb,
        reference_sm_clock_mhz=None,
    )
    run = run_model("mlp", context)
    result = run.result
    assert result.status == "ok", result.error
    assert result.batch_search is not None and result.batch_search.status == "ok"
    assert result.batch_size == result.batch_search.batch_size == 256  # a small MLP fits the whole range
    assert result.memory is not None and result.memory.measured
    assert result.memory.peak_reserved_mb is not None and result.memory.headroom_exceeded is False
    assert result.memory_usage_mb == result.memory.peak_reserved_mb
    assert [epoch.phase for epoch in result.device_epochs] == ["warmup", "measured", "measured", "measured"]
    assert all(epoch.temperature_c is not None for epoch in result.device_epochs)
    assert run.memory_timeline is not None and run.memory_timeline.times_s.size == result.memory.nvml_samples > 0
