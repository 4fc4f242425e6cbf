"""Measured what-ifs: after the main measurements, each model measured again briefly in the alternatives its
recommendation would offer (bf16 autocast, tf32 matmuls, ``torch.compile`` modes, the knee batch), so that the
recommended actions quote measured figures instead of guessed speed-ups.

A what-if is :func:`gpubench.bench.model_run.run_model` with a modified config: the variant's execution (or batch), no
batch search (the main run's batch, or the knee), no step-downs, one warmup epoch and
``decision.what_if_epochs`` epochs of at least ``decision.what_if_epoch_seconds`` s, not adaptive. Its result has
the same statistics, memory profile and stability checks as the main one; the decision extrapolates it to the plan
(:mod:`gpubench.decision.what_ifs`). ``torch.set_float32_matmul_precision`` is process-wide, so the tf32 variant
sets it for its own run and restores the job's setting after.
"""

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
    """The measured models whose what-ifs run, given the ``decision`` the main measurements gave: every model with
    ``decision.what_if=true``; by default (null) only the critical models, and only when the answer is not
    LOCAL_GPU_VIABLE already, which a faster variant cannot change."""
    measured = [name for name, result in models.items() if result.status == "ok"]
    if cfg.decision.what_if:
        return measured
    if decision == LOCAL_GPU_VIABLE:
        return []
    critical = critical_models(cfg.decision.critical_models, cfg.model_names)
    return [name for name in measured if name in critical]


def variants(main: ModelResult, cfg: BenchmarkConfig) -> list[Variant]:
    """The ``decision.what_if_variants`` that differ from the main run ``main`` (measured with ``cfg``): bf16 unless
    the run is bf16 already, tf32 only for fp32 runs at ``highest``, each compile mode other than the run's, the knee
    when the batch search found one other than the measured batch."""
    execution = cfg.execution
    batch = main.batch_size
    assert batch is not None  # only a measured model gets what-ifs
    knee = main.batch_search.knee_size if main.batch_search is not None else None
    candidates = {
        "bf16": (execution.precision != "bf16", "bf16 autocast", replace(execution, precision="bf16"), batch),
        "tf32": (
            execution.precision == "fp32" and execution.matmul_precision == "highest",
            "tf32 matmuls (execution.matmul_precision=high)",
            replace(execution, matmul_precision="high"),
            batch,
        ),
        "compile": (
            execution.compile != "true",
            "torch.compile (default mode)",
            replace(execution, compile="true"),
            batch,
        ),
        "reduce-overhead": (
            execution.compile != "reduce-overhead",
            "torch.compile reduce-overhead (CUDA graphs)",
            replace(execution, compile="reduce-overhead"),
            batch,
        ),
        "knee": (
            knee is not None and knee != batch,
            f"the knee batch {knee} (instead of {batch})",
            execution,
            knee or batch,
        ),
    }
    return [
        Variant(name=name, description=description, execution=variant_execution, batch_size=size)
        for name in cfg.decision.what_if_variants
        for applies, description, variant_execution, size in [candidates[name]]
        if applies
    ]


def what_if_config(cfg: BenchmarkConfig, name: str, variant: Variant) -> BenchmarkConfig:
    """The job's config for measuring ``variant`` of model ``name`` briefly (see the module docstring)."""
    workload = getattr(cfg.workloads, name)
    # Only a model whose config sets a batch size gets the variant's (PPO's is a property of its rollout, envs x
    # steps, not a field).
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
    """``torch.set_float32_matmul_precision(setting)`` while active; the previous setting afterwards."""
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(setting)
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(previous)


def run_what_ifs(name: str, context: ModelRunContext, main: ModelResult) -> list[WhatIf]:
    """Measure model ``name`` briefly in each of its :func:`variants` (``main`` is its main result); a variant that
    fails is recorded with its status and error, and the next one still runs."""
    cfg = context.cfg
    records = []
    # An RL model's (or the user's) batch is the algorithm's own: timing it at the knee would time another training.
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
