"""The root of the typed configuration: the job's schema, composed of each group's dataclass.

Each group's dataclass lives with the code it configures (``hardware/config.py``, ``measure/config.py``,
``stats/config.py``, ``decision/config.py``, ``data/config.py``, ``output/config.py``, ``models/<name>/config.py``);
this module assembles them into :class:`BenchmarkConfig` and registers it in Hydra's ConfigStore. The dataclasses
hold the types, defaults and range checks (a :class:`ConfigError` names the dotted key); the YAML files under
``gpubench/conf/`` choose between options.

Environment variables (``GPU_BENCHMARK_*``) set defaults through the ``${gpubench_env:NAME}`` resolver: the
variable's value when it is set, else the schema's default for the key the resolver stands at.

This module imports no torch, mlflow or NVML, so composing the config (and ``--help``) stays fast.
"""

import dataclasses
import difflib
import functools
import math
import os
from dataclasses import dataclass, field, make_dataclass
from pathlib import Path
from typing import Any

import yaml
from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, Node, OmegaConf, StringNode
from omegaconf.errors import OmegaConfBaseException

from gpubench.bench.ranks_config import DistributedConfig
from gpubench.conf import CONF_DIR
from gpubench.data.config import DataConfig
from gpubench.decision.config import DecisionConfig
from gpubench.decision.rule import critical_models
from gpubench.errors import ConfigError, require, require_choice
from gpubench.hardware.config import HardwareConfig
from gpubench.measure.config import BatchConfig, EpochConfig, MemoryConfig
from gpubench.models import KNOWN_MODELS, MODELS, SEED_MODELS
from gpubench.output.config import SweepConfig, TrackingConfig
from gpubench.stats.config import StabilityConfig, StatisticsConfig

__all__ = [
    "CONF_DIR",
    "KNOWN_MODELS",
    "SEED_MODELS",
    "BenchmarkConfig",
    "ExecutionConfig",
    "load_resolved_config",
    "register_configs",
]

PRECISIONS: tuple[str, ...] = ("fp32", "bf16", "fp16")
COMPILE_MODES: tuple[str, ...] = ("false", "true", "reduce-overhead")
#: torch.set_float32_matmul_precision's settings: ``highest`` keeps fp32 matmuls in fp32 (PyTorch's default),
#: ``high`` lets them use tf32 tensor cores (Ampere and newer), ``medium`` also bf16 passes.
MATMUL_PRECISIONS: tuple[str, ...] = ("highest", "high", "medium")


@dataclass
class ModelSelection:
    """Which workloads this job runs (``model=all`` or one name)."""

    name: str = "all"
    names: list[str] = field(default_factory=lambda: list(SEED_MODELS))

    def __post_init__(self) -> None:
        require(len(self.names) > 0, "model.names", self.names, "a non-empty list")
        for name in self.names:
            require_choice("model", name, ("all", *KNOWN_MODELS))


#: Hyperparameters of every registered workload, under ``workloads.<name>`` whichever models this job runs: a field
#: per entry of :data:`gpubench.models.MODELS`, so registering a model adds its keys here.
WorkloadsConfig = make_dataclass(
    "WorkloadsConfig",
    [(spec.name, spec.config, field(default_factory=spec.config)) for spec in MODELS],
)
# A generated class names its module ``types`` (Python < 3.12): name this one, so that pickling (a sweep's job sent to
# a joblib worker) finds the same class again rather than a second one that fails the schema's type check.
WorkloadsConfig.__module__ = __name__


@dataclass
class ExecutionConfig:
    """Numerical precision (autocast), compilation and fp32 matmul precision applied to every workload.

    ``matmul_precision`` is :func:`torch.set_float32_matmul_precision`'s setting for the whole job: PyTorch's
    default ``highest`` keeps fp32 matmuls off the tf32 tensor cores, which teams usually turn on (``high``) on
    Ampere and newer cards; it changes a compute-bound model's speed, so it is a key and is reported.
    """

    precision: str = "fp32"
    compile: str = "false"
    matmul_precision: str = "highest"

    def __post_init__(self) -> None:
        self.precision = str(self.precision).lower()
        self.compile = str(self.compile).lower()
        self.matmul_precision = str(self.matmul_precision).lower()
        require_choice("execution.precision", self.precision, PRECISIONS)
        require_choice("execution.compile", self.compile, COMPILE_MODES)
        require_choice("execution.matmul_precision", self.matmul_precision, MATMUL_PRECISIONS)


@dataclass
class BenchmarkConfig:
    """The whole job. Groups and keys are documented in README.md and DESIGN.md."""

    model: ModelSelection = field(default_factory=ModelSelection)
    workloads: WorkloadsConfig = field(default_factory=WorkloadsConfig)  # type: ignore[valid-type]
    hardware: HardwareConfig = field(default_factory=HardwareConfig)
    data: DataConfig = field(default_factory=DataConfig)
    statistics: StatisticsConfig = field(default_factory=StatisticsConfig)
    decision: DecisionConfig = field(default_factory=DecisionConfig)
    tracking: TrackingConfig = field(default_factory=TrackingConfig)
    batch: BatchConfig = field(default_factory=BatchConfig)
    epoch: EpochConfig = field(default_factory=EpochConfig)
    execution: ExecutionConfig = field(default_factory=ExecutionConfig)
    stability: StabilityConfig = field(default_factory=StabilityConfig)
    memory: MemoryConfig = field(default_factory=MemoryConfig)
    sweep: SweepConfig = field(default_factory=SweepConfig)
    distributed: DistributedConfig = field(default_factory=DistributedConfig)
    # 20 epochs (of epoch.min_seconds = 0.5 s): the decision interval needs many epochs more than long ones.
    epochs: int = 20
    warmup_epochs: int = 2
    seed: int = 0
    output: str = "report.json"
    verbose: bool = False

    def __post_init__(self) -> None:
        require(self.epochs >= 2, "epochs", self.epochs, "an integer >= 2 (an interval needs two epochs)")
        require(self.warmup_epochs >= 0, "warmup_epochs", self.warmup_epochs, "an integer >= 0")
        if self.statistics.is_adaptive:
            require(
                self.statistics.max_epochs >= self.epochs,
                "statistics.max_epochs",
                self.statistics.max_epochs,
                f">= epochs ({self.epochs}) when statistics.adaptive={self.statistics.adaptive}",
            )
        require(bool(self.output), "output", self.output, "a file path for the JSON report")
        require(math.isfinite(float(self.seed)), "seed", self.seed, "an integer")
        self.decision.critical_models = critical_models(self.decision.critical_models, self.model_names)
        if "custom" in self.model_names:
            self.workloads.custom.check_runnable(self.execution.precision, self.execution.compile)
        self.distributed.check_execution(self.execution.compile)

    @property
    def model_names(self) -> list[str]:
        """The workloads to run, in order, with ``all`` expanded to the seed models."""
        names: list[str] = []
        for name in self.model.names:
            for expanded in SEED_MODELS if name == "all" else (name,):
                if expanded not in names:
                    names.append(expanded)
        return names


@functools.cache
def _schema() -> DictConfig:
    """The schema with its defaults as an OmegaConf tree, built once (building it takes tens of milliseconds, and
    every composition resolves a dozen environment keys)."""
    return OmegaConf.structured(BenchmarkConfig)


def _schema_default(key: str) -> Any:
    """The schema's default value of the dotted ``key`` (e.g. ``batch.min_size``)."""
    return OmegaConf.select(_schema(), key, throw_on_missing=True)


def _env_or_default(variable: str, *, _node_: Node) -> Any:
    """``${gpubench_env:NAME}``: the environment variable ``NAME`` when it is set, else the schema's default for the
    key this interpolation stands at. For a key that is not a string the variable is decoded as YAML (``10``,
    ``true``, ``null``, ``0.9``); a string key takes it verbatim (a glob such as ``*.dbn`` is no YAML)."""
    value = os.environ.get(variable)
    if value is None:
        return _schema_default(_node_._get_full_key(None))
    return value if isinstance(_node_, StringNode) else yaml.safe_load(value)


def schema_keys(node: DictConfig | None = None, prefix: str = "") -> list[str]:
    """Every dotted key of the schema (groups and their fields), in schema order."""
    node = _schema() if node is None else node
    keys = []
    for key in node:
        dotted = f"{prefix}{key}"
        keys.append(dotted)
        child = node._get_node(key)
        if isinstance(child, DictConfig) and dataclasses.is_dataclass(OmegaConf.get_type(child)):
            keys.extend(schema_keys(child, dotted + "."))
    return keys


def _unknown_keys(node: DictConfig, schema: DictConfig, prefix: str = "") -> list[str]:
    """The dotted keys of ``node`` that ``schema`` does not have (``+key=value`` adds them past the schema)."""
    unknown = []
    known = set(schema.keys())
    for key in node:
        dotted = f"{prefix}{key}"
        if key not in known:
            unknown.append(dotted)
            continue
        child, schema_child = node._get_node(key), schema._get_node(key)
        if (
            isinstance(child, DictConfig)
            and isinstance(schema_child, DictConfig)
            and dataclasses.is_dataclass(OmegaConf.get_type(schema_child))
        ):
            unknown.extend(_unknown_keys(child, schema_child, dotted + "."))
    return unknown


def unknown_key_message(key: str) -> str:
    """The error for a key the schema does not know, with the nearest known keys."""
    near = difflib.get_close_matches(key, schema_keys(), n=3, cutoff=0.6)
    hint = f" Did you mean {', '.join(f'`{k}`' for k in near)}?" if near else ""
    return (
        f"`{key}` is not a gpubench config key, so the value given for it would be ignored.{hint} "
        "`python -m gpubench --cfg job` lists every key with its value."
    )


def _console_log_level(verbose: Any) -> str:
    """``${gpubench_console_log_level:${hydra.verbose}}``: the level of the log's terminal handler, DEBUG when
    ``hydra.verbose`` names loggers (or is true), else WARNING (the terminal has gpubench's own output)."""
    return "DEBUG" if verbose not in (False, None, "", "false", "False") else "WARNING"


def _non_finite_keys(tree: Any, prefix: str = "") -> list[tuple[str, float]]:
    """The dotted keys of ``tree`` (nested dicts and lists) whose value is a float that is not finite, with it."""
    if isinstance(tree, float):
        return [] if math.isfinite(tree) else [(prefix, tree)]
    items = tree.items() if isinstance(tree, dict) else enumerate(tree) if isinstance(tree, list) else ()
    found = []
    for key, value in items:
        found += _non_finite_keys(value, f"{prefix}.{key}" if prefix else str(key))
    return found


def _job_dir(runtime_output_dir: Any, run_dir: Any) -> Any:
    """``${gpubench_job_dir:${hydra:runtime.output_dir},${hydra:run.dir}}``: the job's folder, Hydra's runtime one
    while a job runs; before any job (``--cfg job --resolve``) the folder a run would write to, not ``None``."""
    return run_dir if runtime_output_dir is None else runtime_output_dir


def typed_config(cfg: DictConfig) -> BenchmarkConfig:
    """Resolve and validate the composed config into :class:`BenchmarkConfig` (errors name the key); a key the
    schema does not know (added with ``+key=value``) is refused by name."""
    unknown = _unknown_keys(cfg, _schema())
    if unknown:
        raise ConfigError(unknown_key_message(unknown[0]))
    try:
        # No key takes infinity or NaN as a meaning (no limit, unset): each is a time, a size, a rate or a plan, and
        # inf passes the range checks (`> 0`) only to overflow where it is used (int(inf) sizing an epoch, a plan of
        # inf samples). One check here holds for every numeric key, whichever group declares it.
        non_finite = _non_finite_keys(OmegaConf.to_container(cfg, resolve=True))
        if non_finite:
            key, value = non_finite[0]
            raise ConfigError(
                f"`{key}` = {value!r} is not valid: it must be a finite number (inf and nan are none); for no limit, "
                "give a large finite value."
            )
        typed = OmegaConf.to_object(cfg)
    except OmegaConfBaseException as exc:
        cause = exc.__cause__ if isinstance(exc.__cause__, ConfigError) else None
        if cause is not None:
            raise cause from None
        key = getattr(exc, "full_key", None)
        message = str(exc).splitlines()[0]
        raise ConfigError(f"`{key}`: {message}" if key else message) from None
    assert isinstance(typed, BenchmarkConfig)
    return typed


def register_configs() -> None:
    """Register the schema so YAML files can name it in their defaults lists, and the environment resolver."""
    if not OmegaConf.has_resolver("gpubench_env"):
        OmegaConf.register_new_resolver("gpubench_env", _env_or_default)
    if not OmegaConf.has_resolver("gpubench_job_dir"):
        OmegaConf.register_new_resolver("gpubench_job_dir", _job_dir)
    if not OmegaConf.has_resolver("gpubench_console_log_level"):
        OmegaConf.register_new_resolver("gpubench_console_log_level", _console_log_level)
    store = ConfigStore.instance()
    # Only the root: a group's dataclass stored in its group would be a choice (``model=model_schema``) and listed
    # in --help; the root schema types every group already.
    store.store(name="benchmark_schema", node=BenchmarkConfig)


#: Keys an earlier version wrote into ``config_resolved.yaml`` that no longer exist; a stored job's config drops them
#: (undated prices, now the snapshot's alone; the assumed spot rate's source, now the trace's).
RETIRED_KEYS = (
    "hardware.hourly_price_usd",
    "decision.cloud_hourly_price_usd",
    "decision.spot_interruptions_source",
)


def load_resolved_config(path: Path) -> BenchmarkConfig:
    """The typed config of a job from the YAML it was resolved to (``config_resolved.yaml``, or a data-parallel
    run's spec config), checked as a composed config is: a key the schema does not know, a value of the wrong type
    and a value out of range are each a :class:`ConfigError` naming the file and the key, as is a file that is
    missing, unreadable or not YAML."""
    register_configs()
    where = f"the job's config {path}"
    try:
        loaded = OmegaConf.load(path)
    except OSError as exc:
        raise ConfigError(f"{where} cannot be read ({exc.strerror or exc}).") from None
    except yaml.YAMLError as exc:
        detail = " ".join(str(exc).split())
        raise ConfigError(
            f"{where} is not valid YAML ({detail}); it is the file gpubench wrote when the job started."
        ) from None
    if not isinstance(loaded, DictConfig):
        raise ConfigError(f"{where} is not a gpubench config (a YAML mapping of keys to values).")
    for dotted in RETIRED_KEYS:
        group, key = dotted.rsplit(".", 1)
        section = OmegaConf.select(loaded, group)
        if isinstance(section, DictConfig) and key in section:
            section.pop(key)
    try:
        # Unknown keys first: merged into the schema, they would fail with OmegaConf's wording instead.
        unknown = _unknown_keys(loaded, _schema())
        if unknown:
            raise ConfigError(unknown_key_message(unknown[0]))
        try:
            merged = OmegaConf.merge(_schema(), loaded)
        except OmegaConfBaseException as exc:
            key = getattr(exc, "full_key", None)
            message = str(exc).splitlines()[0]
            raise ConfigError(f"`{key}`: {message}" if key else message) from None
        return typed_config(merged)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None
