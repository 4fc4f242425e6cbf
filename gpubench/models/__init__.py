"""The model registry: every workload gpubench can time (a folder per model, a YAML file and an entry in
:data:`MODELS`)."""

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpubench.models.custom.config import CustomConfig
from gpubench.models.dqn.config import DQNConfig
from gpubench.models.mamba2.config import Mamba2Config
from gpubench.models.mlp.config import MLPConfig
from gpubench.models.ppo.config import PPOConfig
from gpubench.models.tft.config import TFTConfig

if TYPE_CHECKING:
    from gpubench.workload import Workload


@dataclass(frozen=True)
class ModelSpec:
    """One registered model: its workload ``module:Class``, VRAM budget (MiB), plan and whether ``model=all`` runs
    it."""

    name: str
    config: type
    workload: str
    memory_budget_mb: float | None
    plan_passes: float | None = None
    plan_env_steps: float | None = None
    seed_model: bool = True


#: Every model, in the order ``model=all`` runs them (10M env steps is CleanRL's DQN and PPO budget).
MODELS: tuple[ModelSpec, ...] = (
    ModelSpec("mlp", MLPConfig, "gpubench.models.mlp.workload:MLPWorkload", 256.0, plan_passes=50.0, seed_model=False),
    ModelSpec("dqn", DQNConfig, "gpubench.models.dqn.workload:DQNWorkload", 512.0, plan_env_steps=1e7),
    ModelSpec("ppo", PPOConfig, "gpubench.models.ppo.workload:PPOWorkload", 512.0, plan_env_steps=1e7),
    ModelSpec("mamba2", Mamba2Config, "gpubench.models.mamba2.workload:Mamba2Workload", 1280.0, plan_passes=50.0),
    ModelSpec("tft", TFTConfig, "gpubench.models.tft.workload:TFTWorkload", 1024.0, plan_passes=50.0),
    # The user's own training (workloads.custom.factory): no budget or plan gpubench could know.
    ModelSpec("custom", CustomConfig, "gpubench.models.custom.workload:CustomWorkload", None, seed_model=False),
)

KNOWN_MODELS: tuple[str, ...] = tuple(spec.name for spec in MODELS)
#: The set ``model=all`` runs: the four seed models.
SEED_MODELS: tuple[str, ...] = tuple(spec.name for spec in MODELS if spec.seed_model)


_SPECS: dict[str, ModelSpec] = {spec.name: spec for spec in MODELS}


def model_spec(name: str) -> ModelSpec:
    """The registered model ``name``; KeyError for an unknown name (the config rejects those first)."""
    return _SPECS[name]


def workload_class(name: str) -> "type[Workload]":
    """The workload class of model ``name`` (imports its module, and torch, on first use)."""
    module_name, class_name = model_spec(name).workload.split(":")
    return getattr(importlib.import_module(module_name), class_name)
