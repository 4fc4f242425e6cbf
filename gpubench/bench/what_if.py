"""Measured what-ifs: each model measured again briefly (:func:`~gpubench.bench.model_run.run_model`, no batch
search, ``decision.what_if_epochs`` epochs) in the alternatives its recommendation would offer (bf16, tf32,
``torch.compile`` modes, the knee batch), so that the recommended actions quote measured figures."""

import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, fields, replace

import torch

from gpubench.bench.model_run import ModelRunContext, run_model
from gpubench.config import BenchmarkConfig, ExecutionConfig
from gpubench.decision.rule import critical_models
from gpubench.models import workload_class
from gpubench.output import console
from gpubench.results import LOCAL_GPU_VIABLE, ModelResult, WhatIf
from gpubench.stats.config import ADAPTIVE_OFF

#: Warmup epochs before a what-if's measured epochs: its first epoch holds compilation and allocator growth.
WHAT_IF_WARMUP_EPOCHS = 1


@dataclass(frozen=True)
class Variant:
    """One alternative to measure: its name, what it changes in words, the execution and the batch it runs with."""

    name: str
    description: str
    execution: ExecutionConfig
    batch_size: int


def what_if_enabled(cfg: BenchmarkConfig, device: torch.device) -> bool:
    """``decision.what_if``, its default (null) being on for a GPU and off for the CPU."""
    return device.type == "cuda" if cfg.decision.what_if is None else bool(cfg.decision.what_if)


def what_if_models(cfg: BenchmarkConfig, models: Mapping[str, ModelResult], decision: str | None) -> list[str]:
    """The measured models whose what-ifs run: all with ``decision.what_if=true``; by default the critical ones,
    unless the ``decision`` is LOCAL_GPU_VIABLE already, which a faster variant cannot change."""
    measured = [name for name, result in models.items() if result.status == "ok"]
    if cfg.decision.what_if:
        return measured
    if decision == LOCAL_GPU_VIABLE:
        return []
    critical = critical_models(cfg.decision.critical_models, cfg.model_names)
    return [name for name in measured if name in critical]


def variants(main: ModelResult, cfg: BenchmarkConfig) -> list[Variant]:
    """The ``decision.what_if_variants`` that differ from the main run ``main``."""
    execution = cfg.execution
    batch = main.batch_size
    assert batch is not None
    knee = main.batch_search.knee_size if main.batch_search is not None else None
    fp32_highest = execution.precision == "fp32" and execution.matmul_precision == "highest"
    candidates = {
        "bf16": (execution.precision != "bf16", "bf16 autocast", {"precision": "bf16"}, batch),
        "tf32": (fp32_highest, "tf32 matmuls (execution.matmul_precision=high)", {"matmul_precision": "high"}, batch),
        "compile": (execution.compile != "true", "torch.compile (default mode)", {"compile": "true"}, batch),
        "reduce-overhead": (
            execution.compile != "reduce-overhead",
            "torch.compile reduce-overhead (CUDA graphs)",
            {"compile": "reduce-overhead"},
            batch,
        ),
        "knee": (knee is not None and knee != batch, f"the knee batch {knee} (instead of {batch})", {}, knee or batch),
    }
    return [
        Variant(name=name, description=description, execution=replace(execution, **changes), batch_size=size)
        for name in cfg.decision.what_if_variants
        for applies, description, changes, size in [candidates[name]]
        if applies
    ]


def what_if_config(cfg: BenchmarkConfig, name: str, variant: Variant) -> BenchmarkConfig:
    """The job's config for measuring ``variant`` of model ``name`` briefly."""
    workload = getattr(cfg.workloads, name)
    # PPO's batch is a property of its rollout, not a field.
    if "batch_size" in {f.name for f in fields(workload)}:
        workload = replace(workload, batch_size=variant.batch_size)
    return replace(
        cfg,
        execution=variant.execution,
        workloads=replace(cfg.workloads, **{name: workload}),
        batch=replace(cfg.batch, search=False, max_step_downs=0),
        epoch=replace(cfg.epoch, min_seconds=cfg.decision.what_if_epoch_seconds),
        statistics=replace(cfg.statistics, adaptive=ADAPTIVE_OFF),
        epochs=cfg.decision.what_if_epochs,
        warmup_epochs=WHAT_IF_WARMUP_EPOCHS,
    )


@contextlib.contextmanager
def matmul_precision(setting: str) -> Iterator[None]:
    """``torch.set_float32_matmul_precision(setting)`` (process-wide) while active; the previous setting after."""
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(setting)
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(previous)


def run_what_ifs(name: str, context: ModelRunContext, main: ModelResult) -> list[WhatIf]:
    """Measure model ``name`` briefly in each of its :func:`variants`; a failing variant is recorded as such."""
    cfg = context.cfg
    records = []
    # Timing an algorithm's own batch at the knee would time another training.
    batch_is_recipe = workload_class(name).batch_size_is_hyperparameter
    for variant in variants(main, cfg):
        if variant.name == "knee" and batch_is_recipe:
            continue
        console.notice(f"{name}: what-if {variant.description}")
        variant_cfg = what_if_config(cfg, name, variant)
        with matmul_precision(variant.execution.matmul_precision):
            result = run_model(name, replace(context, cfg=variant_cfg)).result
        records.append(
            WhatIf(
                variant=variant.name,
                description=variant.description,
                precision=variant.execution.precision,
                compile=variant.execution.compile,
                matmul_precision=variant.execution.matmul_precision,
                batch_size=variant.batch_size,
                epochs=variant_cfg.epochs,
                epoch_min_seconds=variant_cfg.epoch.min_seconds,
                result=result,
            )
        )
    return records
