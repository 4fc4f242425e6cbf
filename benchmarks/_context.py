"""The model-run context the benchmark scripts build their workloads in: the composed config, its data on the
device, a synchronising block timer."""

import torch
from hydra import compose, initialize_config_dir

from gpubench.config import CONF_DIR, register_configs, typed_config
from gpubench.data.loader import load_features
from gpubench.hardware.selection import synchronizer
from gpubench.measure.timing import BlockTimer
from gpubench.model_run import ModelRunContext


def model_run_context(
    overrides: list[str], device: torch.device, usable_vram_mb: float | None = None
) -> ModelRunContext:
    """The context of the config composed with ``overrides`` on ``device``, as if ``usable_vram_mb`` (None: no
    budget) had been measured. No run is written: ``output`` only has to resolve without Hydra's run directory."""
    register_configs()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = typed_config(
            compose(config_name="config", overrides=["output=report.json", "tracking.enabled=false", *overrides])
        )
    features, _ = load_features(cfg.data, device)
    return ModelRunContext(
        cfg=cfg,
        device=device,
        features=features,
        timer=BlockTimer(synchronizer(device)),
        usable_vram_mb=usable_vram_mb,
        reference_sm_clock_mhz=None,
    )
