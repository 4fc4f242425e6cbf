"""The root of the typed configuration: :class:`BenchmarkConfig`, composed of each group's dataclass (which lives
with the code it configures), registered in Hydra's ConfigStore. ``${gpubench_env:NAME}`` reads ``GPU_BENCHMARK_*``
variables. No torch, mlflow or NVML imports, so that composing the config stays fast."""

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
#: torch.set_float32_matmul_precision's settings (``high``: tf32 tensor cores).
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


#: Hyperparameters of every registered workload (:data:`gpubench.models.MODELS`), under ``workloads.<name>``.
WorkloadsConfig = make_dataclass(
    "WorkloadsConfig", [(spec.name, spec.config, field(default_factory=spec.config)) for spec in MODELS]
)
# So that pickling (a sweep's job sent to a joblib worker) finds this class again.
WorkloadsConfig.__module__ = __name__


@dataclass
class ExecutionConfig:
    """Numerical precision (autocast), compilation and fp32 matmul precision applied to every workload."""

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
    # The decision interval needs many epochs more than long ones.
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
    """The schema with its defaults as an OmegaConf tree, built once."""
    return OmegaConf.structured(BenchmarkConfig)


def _schema_default(key: str) -> Any:
    """The schema's default value of the dotted ``key`` (e.g. ``batch.min_size``)."""
    return OmegaConf.select(_schema(), key, throw_on_missing=True)


def _env_or_default(variable: str, *, _node_: Node) -> Any:
    """``${gpubench_env:NAME}``: the variable ``NAME`` (YAML-decoded unless the key is a string) when set, else the
    schema's default for the key."""
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
    """The dotted keys of ``node`` that ``schema`` does not have."""
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
    """The terminal log handler's level: DEBUG when ``hydra.verbose`` is set, else WARNING."""
    return "DEBUG" if verbose not in (False, None, "", "false", "False") else "WARNING"


def _non_finite_keys(tree: Any, prefix: str = "") -> list[tuple[str, float]]:
    """The dotted keys of ``tree`` whose value is a non-finite float, with it."""
    if isinstance(tree, float):
        return [] if math.isfinite(tree) else [(prefix, tree)]
    items = tree.items() if isinstance(tree, dict) else enumerate(tree) if isinstance(tree, list) else ()
    found = []
    for key, value in items:
        found += _non_finite_keys(value, f"{prefix}.{key}" if prefix else str(key))
    return found


def _synthetic_only(value: Any, *, _parent_: DictConfig) -> Any:
    """``${gpubench_synthetic_only:VALUE}`` under ``data``: VALUE when ``data.source`` is synthetic, else null (a
    preset's synthetic symbols pick none from a user's files)."""
    return value if _parent_.get("source") == "synthetic" else None


def _job_dir(runtime_output_dir: Any, run_dir: Any) -> Any:
    """The job's folder: Hydra's runtime one, else (``--cfg job --resolve``) the one a run would write to."""
    return run_dir if runtime_output_dir is None else runtime_output_dir


def typed_config(cfg: DictConfig) -> BenchmarkConfig:
    """Resolve and validate the composed config into :class:`BenchmarkConfig`; errors name the key."""
    unknown = _unknown_keys(cfg, _schema())
    if unknown:
        raise ConfigError(unknown_key_message(unknown[0]))
    try:
        # inf passes range checks like `> 0` only to overflow where it is used; no key means "no limit" by it.
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
    """Register the schema and the resolvers."""
    resolvers = {"env": _env_or_default, "job_dir": _job_dir, "synthetic_only": _synthetic_only}
    resolvers["console_log_level"] = _console_log_level
    for name, resolver in resolvers.items():
        if not OmegaConf.has_resolver(f"gpubench_{name}"):
            OmegaConf.register_new_resolver(f"gpubench_{name}", resolver)
    store = ConfigStore.instance()
    # Only the root: a group's dataclass stored in its group would be a choice listed in --help.
    store.store(name="benchmark_schema", node=BenchmarkConfig)


#: Retired keys a stored ``config_resolved.yaml`` may hold; loading drops them.
RETIRED_KEYS = ("hardware.hourly_price_usd", "decision.cloud_hourly_price_usd", "decision.spot_interruptions_source")


def load_resolved_config(path: Path) -> BenchmarkConfig:
    """The typed config of a job from its resolved YAML, checked as a composed config is; a
    :class:`ConfigError` names the file and the key."""
    register_configs()
    where = f"the job's config {path}"
    try:
        loaded = OmegaConf.load(path)
    except OSError as exc:
        raise ConfigError(f"{where} cannot be read ({exc.strerror or exc}).") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{where} is not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start}); gpubench "
            "writes it as UTF-8 when the job starts: restore that file."
        ) from None
    except yaml.YAMLError as exc:
        detail = " ".join(str(exc).split())
        raise ConfigError(
            f"{where} is not valid YAML ({detail}); it is the file gpubench wrote when the job started."
        ) from None
    if not isinstance(loaded, DictConfig):
        raise ConfigError(f"{where} is not a gpubench config (a YAML mapping of keys to values).")
    if not loaded:
        raise ConfigError(
            f"{where} is empty: replayed, it would run the default config, not the job's. Restore the file "
            "gpubench wrote when the job started."
        )
    for dotted in RETIRED_KEYS:
        group, key = dotted.rsplit(".", 1)
        section = OmegaConf.select(loaded, group)
        if isinstance(section, DictConfig) and key in section:
            section.pop(key)
    try:
        # Before the merge, which would word the error its own way.
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
