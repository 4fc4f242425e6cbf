"""The user's own training (``model=custom``) on a real CUDA GPU: the batch search tries the user's build at every
size (a build that cannot allocate is a batch that does not fit, not a bad factory), and the recipe's batch is the
one timed."""

import pytest
import torch
from conftest import make_learnable_features
from hydra import compose, initialize_config_dir
from torch import nn

from gpubench.bench.model_run import ModelRunContext, run_model
from gpubench.conf import CONF_DIR
from gpubench.config import register_configs, typed_config
from gpubench.hardware.selection import synchronizer
from gpubench.hardware.vram import apply_vram_limit
from gpubench.measure.timing import BlockTimer
from gpubench.models.custom import registry

pytestmark = pytest.mark.gpu

DEVICE = torch.device("cuda", 0)
#: Device memory the build below holds per unit of batch: 256 MiB, so batch 1024 needs 256 GiB (more than any card).
BYTES_PER_BATCH_ROW = 256 * 2**20


def build(batch_size: int, device: torch.device):
    """A user's build whose state grows with the batch (as activations and a data cache would): at a batch the card
    cannot hold, allocating it raises torch.OutOfMemoryError inside build."""
    cache = torch.empty(batch_size * BYTES_PER_BATCH_ROW // 4, dtype=torch.float32, device=device)
    model = nn.Linear(1024, 1).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def step():
        rows = cache[: 64 * 1024].view(64, 1024).normal_()
        loss = model(rows).pow(2).mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        return loss.detach()

    return step


def test_the_search_tries_the_users_build_and_the_recipes_batch_is_timed(tmp_path) -> None:
    register_configs()
    factory = registry.register(build)
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            cfg = compose(
                config_name="config",
                overrides=[
                    f"output={tmp_path / 'report.json'}",
                    "model=custom",
                    f"workloads.custom.factory={factory}",
                    "workloads.custom.batch_size=16",
                    "epochs=3",
                    "warmup_epochs=1",
                    "epoch.min_seconds=0.05",
                    "batch.min_size=8",
                    "batch.max_size=1024",
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
        result = run_model("custom", context).result
    finally:
        registry.unregister(factory)
    assert result.status == "ok", result.error
    search = result.batch_search
    assert search is not None and search.batch_size is not None
    # 1024 rows would hold 256 GiB: the search saw that batch fail (OOM or over the headroom) and kept a smaller one.
    assert any(trial.status != "ok" for trial in search.trials)
    assert 16 <= search.batch_size < 1024
    # The user's batch is their recipe: it is timed, with no gradient accumulation, whatever else fits.
    assert result.batch_size == 16 and result.gradient_accumulation_steps == 1
    assert result.memory is not None and result.memory.peak_reserved_mb >= 16 * BYTES_PER_BATCH_ROW / 2**20
    assert result.stability == "STABLE" or result.stability == "UNSTABLE"
