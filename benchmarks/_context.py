"""The model-run context the benchmark scripts build their workloads in: the composed config, prepared as a job's
(:func:`gpubench.bench.session.prepare_session`: threads, VRAM cap, matmul precision, seed, its data on the device, a
synchronising block timer)."""

import dataclasses

import torch
from hydra import compose, initialize_config_dir

from gpubench.bench.model_run import ModelRunContext
from gpubench.bench.session import prepare_session
from gpubench.config import CONF_DIR, register_configs, typed_config


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
    context = prepare_session(cfg, device=device).model_run_context()
    # The scripts state the budget they emulate (seed_memory.py: the RTX 3050 Ti's) rather than measure one.
    return dataclasses.replace(context, usable_vram_mb=usable_vram_mb)
