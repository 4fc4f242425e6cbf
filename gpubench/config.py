"""Typed configuration: the schema of every key, registered in Hydra's ConfigStore.

The dataclasses hold the types, documented defaults and range checks; the YAML files under ``conf/`` choose
between options (a model set, a hardware card, a data source, an experiment). ``OmegaConf.to_object`` turns the
composed config into these objects, whose ``__post_init__`` rejects bad values with a :class:`ConfigError` that
names the dotted key and says what would be valid.

This module imports no torch, mlflow or NVML, so composing the config (and ``--help``) stays fast.
"""

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hydra.core.config_store import ConfigStore

from gpubench.errors import ConfigError

#: The Hydra config tree shipped inside the package (so wheels and the ``gpubench`` command carry it).
CONF_DIR = Path(__file__).resolve().parent / "conf"

#: Models that have a workload implementation, in the order ``model=all`` runs them.
KNOWN_MODELS: tuple[str, ...] = ("mlp", "dqn", "ppo", "mamba2", "tft")
#: The set ``model=all`` runs: the four seed models.
SEED_MODELS: tuple[str, ...] = ("dqn", "ppo", "mamba2", "tft")
PRECISIONS: tuple[str, ...] = ("fp32", "bf16", "fp16")
COMPILE_MODES: tuple[str, ...] = ("false", "true", "reduce-overhead")
OUTLIER_RULES: tuple[str, ...] = ("mad", "sigma", "iqr", "none")
DATA_SOURCES: tuple[str, ...] = ("synthetic", "dbn", "parquet")
#: Where the NVML memory sampler runs: a child process (no GIL shared with training) or a thread of the benchmark.
MEMORY_SAMPLERS: tuple[str, ...] = ("process", "thread")


def _require(condition: bool, key: str, value: Any, valid: str) -> None:
    """Raise a ConfigError naming ``key`` when ``condition`` is false."""
    if not condition:
        raise ConfigError(f"`{key}` = {value!r} is not valid: it must be {valid}.")


def _require_positive(key: str, value: float) -> None:
    _require(value > 0, key, value, "greater than 0")


def _require_choice(key: str, value: Any, options: tuple[str, ...]) -> None:
    _require(value in options, key, value, "one of " + ", ".join(options))


def _require_probability(key: str, value: float, *, closed: bool = False) -> None:
    if closed:
        _require(0.0 <= value <= 1.0, key, value, "in [0, 1]")
    else:
        _require(0.0 < value < 1.0, key, value, "strictly between 0 and 1")


# --------------------------------------------------------------------------------------------------- hardware


@dataclass
class HardwareConfig:
    """The device to benchmark on, and what is known of the card it stands for.

    ``name`` is ``auto`` (CUDA when present, else CPU), ``cpu``, or a catalog card from ``conf/hardware/``. A
    catalog card on a larger GPU caps usable VRAM at ``vram_limit_gb`` so the batch-size search finds that card's
    limits; its peak throughput, bandwidth and price feed the projection and cost analysis.
    """

    name: str = "auto"
    vram_gb: float | None = None
    vram_limit_gb: float | None = None
    peak_fp32_tflops: float | None = None
    peak_bf16_tflops: float | None = None
    memory_bandwidth_gbps: float | None = None
    hourly_price_usd: float | None = None
    board_power_w: float | None = None
    burn_in_max_seconds: float = 30.0
    temperature_warn_c: float = 70.0
    temperature_throttle_c: float = 80.0
    temperature_stop_c: float = 90.0

    def __post_init__(self) -> None:
        for key in (
            "vram_gb",
            "vram_limit_gb",
            "peak_fp32_tflops",
            "peak_bf16_tflops",
            "memory_bandwidth_gbps",
            "board_power_w",
        ):
            value = getattr(self, key)
            if value is not None:
                _require_positive(f"hardware.{key}", value)
        _require(self.burn_in_max_seconds >= 0, "hardware.burn_in_max_seconds", self.burn_in_max_seconds, ">= 0")
        if self.hourly_price_usd is not None:
            _require(self.hourly_price_usd >= 0, "hardware.hourly_price_usd", self.hourly_price_usd, ">= 0")
        _require(
            self.temperature_warn_c < self.temperature_throttle_c < self.temperature_stop_c,
            "hardware.temperature_warn_c/temperature_throttle_c/temperature_stop_c",
            (self.temperature_warn_c, self.temperature_throttle_c, self.temperature_stop_c),
            "strictly increasing (default 70 < 80 < 90 °C)",
        )

    @property
    def is_catalog_card(self) -> bool:
        return self.name not in ("auto", "cpu")


# --------------------------------------------------------------------------------------------------- models


@dataclass
class ModelSelection:
    """Which workloads this job runs (``model=all`` or one name)."""

    name: str = "all"
    names: list[str] = field(default_factory=lambda: list(SEED_MODELS))

    def __post_init__(self) -> None:
        _require(len(self.names) > 0, "model.names", self.names, "a non-empty list")
        for name in self.names:
            _require_choice("model", name, ("all", *KNOWN_MODELS))


@dataclass
class MLPConfig:
    """MLP forecaster: a flattened window of features -> the next bar's (normalised) return."""

    batch_size: int = 256
    window: int = 64
    hidden_sizes: list[int] = field(default_factory=lambda: [256, 256])
    learning_rate: float = 1e-3
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0

    def __post_init__(self) -> None:
        _require_positive("workloads.mlp.batch_size", self.batch_size)
        _require_positive("workloads.mlp.window", self.window)
        _require(
            len(self.hidden_sizes) > 0 and all(h > 0 for h in self.hidden_sizes),
            "workloads.mlp.hidden_sizes",
            self.hidden_sizes,
            "a non-empty list of positive layer widths",
        )
        _require_positive("workloads.mlp.learning_rate", self.learning_rate)
        _require_positive("workloads.mlp.max_grad_norm", self.max_grad_norm)


@dataclass
class TFTConfig:
    """Temporal Fusion Transformer (Lim et al. 2021); defaults follow the paper's volatility configuration."""

    batch_size: int = 64
    encoder_length: int = 252
    decoder_length: int = 5
    hidden_size: int = 160
    num_heads: int = 4
    dropout: float = 0.1
    quantiles: list[float] = field(default_factory=lambda: [0.1, 0.5, 0.9])
    learning_rate: float = 1e-3
    max_grad_norm: float = 1.0

    def __post_init__(self) -> None:
        for key in ("batch_size", "encoder_length", "decoder_length", "hidden_size", "num_heads"):
            _require_positive(f"workloads.tft.{key}", getattr(self, key))
        _require(
            self.hidden_size % self.num_heads == 0,
            "workloads.tft.hidden_size",
            self.hidden_size,
            f"a multiple of workloads.tft.num_heads ({self.num_heads})",
        )
        _require(0.0 <= self.dropout < 1.0, "workloads.tft.dropout", self.dropout, "in [0, 1)")
        _require(
            len(self.quantiles) > 0 and all(0.0 < q < 1.0 for q in self.quantiles),
            "workloads.tft.quantiles",
            self.quantiles,
            "a non-empty list of levels strictly between 0 and 1",
        )
        _require_positive("workloads.tft.learning_rate", self.learning_rate)
        _require_positive("workloads.tft.max_grad_norm", self.max_grad_norm)


@dataclass
class Mamba2Config:
    """Mamba-2 stack (Dao & Gu 2024) forecasting the next ``horizon`` returns from a window."""

    batch_size: int = 32
    seq_len: int = 512
    horizon: int = 8
    d_model: int = 256
    n_layers: int = 6
    expand: int = 2
    headdim: int = 64
    d_state: int = 64
    ngroups: int = 1
    d_conv: int = 4
    chunk_size: int = 64
    #: Recompute the scan and gated norm in backward instead of keeping their (batch, chunks, heads, chunk,
    #: chunk)-sized intermediates: ~60% less activation memory, for one extra scan forward per step.
    recompute_scan: bool = True
    learning_rate: float = 1e-3
    weight_decay: float = 0.01
    max_grad_norm: float = 1.0

    def __post_init__(self) -> None:
        for key in (
            "batch_size",
            "seq_len",
            "horizon",
            "d_model",
            "n_layers",
            "expand",
            "headdim",
            "d_state",
            "ngroups",
            "d_conv",
            "chunk_size",
        ):
            _require_positive(f"workloads.mamba2.{key}", getattr(self, key))
        d_inner = self.expand * self.d_model
        _require(
            d_inner % self.headdim == 0,
            "workloads.mamba2.headdim",
            self.headdim,
            f"a divisor of expand * d_model ({d_inner})",
        )
        nheads = d_inner // self.headdim
        _require(
            nheads % self.ngroups == 0,
            "workloads.mamba2.ngroups",
            self.ngroups,
            f"a divisor of the number of heads ({nheads})",
        )
        _require_positive("workloads.mamba2.learning_rate", self.learning_rate)
        _require_positive("workloads.mamba2.max_grad_norm", self.max_grad_norm)


@dataclass
class TradingEnvConfig:
    """The vectorised trading environment shared by the RL workloads."""

    num_envs: int = 64
    observation_window: int = 64
    episode_length: int = 1024
    transaction_cost: float = 1e-4

    def __post_init__(self) -> None:
        for key in ("num_envs", "observation_window", "episode_length"):
            _require_positive(f"workloads.*.env.{key}", getattr(self, key))
        _require(self.transaction_cost >= 0, "workloads.*.env.transaction_cost", self.transaction_cost, ">= 0")


@dataclass
class DQNConfig:
    """DQN (Mnih et al. 2015) with Double DQN (van Hasselt et al. 2016) on by default."""

    env: TradingEnvConfig = field(default_factory=TradingEnvConfig)
    batch_size: int = 256
    hidden_sizes: list[int] = field(default_factory=lambda: [256, 256])
    buffer_size: int = 100_000
    learning_rate: float = 1e-4
    gamma: float = 0.99
    double_dqn: bool = True
    target_update_interval: int = 1000
    tau: float = 1.0
    exploration_initial: float = 1.0
    exploration_final: float = 0.05
    exploration_steps: int = 100_000
    learning_starts: int = 1000
    train_freq: int = 1
    gradient_steps: int = 1
    max_grad_norm: float = 10.0

    def __post_init__(self) -> None:
        for key in (
            "batch_size",
            "buffer_size",
            "target_update_interval",
            "exploration_steps",
            "train_freq",
            "gradient_steps",
        ):
            _require_positive(f"workloads.dqn.{key}", getattr(self, key))
        _require(self.learning_starts >= 0, "workloads.dqn.learning_starts", self.learning_starts, ">= 0")
        _require_positive("workloads.dqn.learning_rate", self.learning_rate)
        _require_probability("workloads.dqn.gamma", self.gamma)
        _require(0.0 < self.tau <= 1.0, "workloads.dqn.tau", self.tau, "in (0, 1] (1 = hard target update)")
        _require_probability("workloads.dqn.exploration_initial", self.exploration_initial, closed=True)
        _require_probability("workloads.dqn.exploration_final", self.exploration_final, closed=True)
        _require_positive("workloads.dqn.max_grad_norm", self.max_grad_norm)
        _require(
            self.buffer_size >= self.env.num_envs,
            "workloads.dqn.buffer_size",
            self.buffer_size,
            f">= env.num_envs ({self.env.num_envs}): one env step adds a transition per environment",
        )


@dataclass
class PPOConfig:
    """PPO (Schulman et al. 2017), clipped surrogate with GAE.

    The batch size is the minibatch size in environment steps. The workload keeps ``num_steps``,
    ``update_epochs`` and ``num_minibatches`` and runs ``batch size × num_minibatches / num_steps`` environments in
    parallel, so a batch size chosen by the runner (the batch-size search) scales the number of environments; the
    configured one (:attr:`batch_size`) reproduces ``env.num_envs``.
    """

    env: TradingEnvConfig = field(default_factory=TradingEnvConfig)
    num_steps: int = 128
    update_epochs: int = 4
    num_minibatches: int = 4
    hidden_sizes: list[int] = field(default_factory=lambda: [256, 256])
    learning_rate: float = 2.5e-4
    anneal_lr: bool = True
    total_timesteps: int = 10_000_000
    gamma: float = 0.99
    gae_lambda: float = 0.95
    clip_coef: float = 0.2
    clip_value_loss: bool = True
    ent_coef: float = 0.01
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5

    def __post_init__(self) -> None:
        for key in ("num_steps", "update_epochs", "num_minibatches", "total_timesteps"):
            _require_positive(f"workloads.ppo.{key}", getattr(self, key))
        rollout = self.env.num_envs * self.num_steps
        _require(
            rollout % self.num_minibatches == 0,
            "workloads.ppo.num_minibatches",
            self.num_minibatches,
            f"a divisor of env.num_envs * num_steps ({rollout})",
        )
        _require_positive("workloads.ppo.learning_rate", self.learning_rate)
        _require_probability("workloads.ppo.gamma", self.gamma)
        _require_probability("workloads.ppo.gae_lambda", self.gae_lambda, closed=True)
        _require_positive("workloads.ppo.clip_coef", self.clip_coef)
        _require_positive("workloads.ppo.max_grad_norm", self.max_grad_norm)

    @property
    def batch_size(self) -> int:
        """The configured minibatch size: ``env.num_envs × num_steps / num_minibatches`` environment steps."""
        return self.env.num_envs * self.num_steps // self.num_minibatches


@dataclass
class WorkloadsConfig:
    """Hyperparameters of every workload, under ``workloads.<name>`` whichever models this job runs."""

    mlp: MLPConfig = field(default_factory=MLPConfig)
    dqn: DQNConfig = field(default_factory=DQNConfig)
    ppo: PPOConfig = field(default_factory=PPOConfig)
    mamba2: Mamba2Config = field(default_factory=Mamba2Config)
    tft: TFTConfig = field(default_factory=TFTConfig)


# --------------------------------------------------------------------------------------------------- measurement


@dataclass
class BatchConfig:
    """Batch-size search bounds and policy. ``search: null`` means: search on a GPU, not on the CPU.

    ``verify_steps`` is the length of each re-verification trial of the winner (search trials are 3 steps): long
    enough for the caching allocator to reach its fragmented steady state, so the chosen batch still fits later.
    ``max_step_downs`` is how many times a searched batch whose measured epochs still exceeded the headroom is
    stepped down and measured again (0: keep it, with a warning).
    """

    search: bool | None = None
    min_size: int = 32
    max_size: int = 4096
    headroom: float = 0.9
    target_effective: int = 512
    verify_steps: int = 20
    max_step_downs: int = 2

    def __post_init__(self) -> None:
        _require_positive("batch.min_size", self.min_size)
        _require(
            self.max_size >= self.min_size,
            "batch.max_size",
            self.max_size,
            f">= batch.min_size ({self.min_size})",
        )
        _require(0.0 < self.headroom <= 1.0, "batch.headroom", self.headroom, "in (0, 1]")
        _require_positive("batch.target_effective", self.target_effective)
        # Verification trials must reach the allocator's steady state, and be at least as long as search trials.
        _require(self.verify_steps >= 3, "batch.verify_steps", self.verify_steps, "an integer >= 3")
        _require(self.max_step_downs >= 0, "batch.max_step_downs", self.max_step_downs, "an integer >= 0")


@dataclass
class EpochConfig:
    """A benchmark epoch is a timing block of ``steps`` optimizer steps (``auto``: sized to ``min_seconds``)."""

    steps: str = "auto"
    min_seconds: float = 1.0
    max_auto_steps: int = 100_000

    def __post_init__(self) -> None:
        self.steps = str(self.steps).strip().lower()
        if self.steps != "auto":
            _require(
                self.steps.isdigit() and int(self.steps) > 0,
                "epoch.steps",
                self.steps,
                "`auto` or a positive integer",
            )
        _require_positive("epoch.min_seconds", self.min_seconds)
        _require_positive("epoch.max_auto_steps", self.max_auto_steps)

    @property
    def fixed_steps(self) -> int | None:
        """The fixed step count, or None when the block is sized automatically."""
        return None if self.steps == "auto" else int(self.steps)


@dataclass
class StatisticsConfig:
    """How epoch times are summarised; see ``gpubench/stats.py`` for the formulas."""

    confidence_level: float = 0.95
    cv_threshold: float = 0.15
    outlier_rule: str = "mad"
    target_rel_halfwidth: float = 0.02
    adaptive: bool = False
    max_epochs: int = 50

    def __post_init__(self) -> None:
        _require_probability("statistics.confidence_level", self.confidence_level)
        _require_positive("statistics.cv_threshold", self.cv_threshold)
        _require_choice("statistics.outlier_rule", self.outlier_rule, OUTLIER_RULES)
        _require_positive("statistics.target_rel_halfwidth", self.target_rel_halfwidth)
        _require_positive("statistics.max_epochs", self.max_epochs)


@dataclass
class ExecutionConfig:
    """Numerical precision (autocast) and compilation applied to every workload."""

    precision: str = "fp32"
    compile: str = "false"

    def __post_init__(self) -> None:
        self.precision = str(self.precision).lower()
        self.compile = str(self.compile).lower()
        _require_choice("execution.precision", self.precision, PRECISIONS)
        _require_choice("execution.compile", self.compile, COMPILE_MODES)


@dataclass
class StabilityConfig:
    """Gradient and loss health checks."""

    enabled: bool = True
    grad_norm_exploding: float = 1000.0
    grad_norm_vanishing: float = 1e-7
    loss_trend_rel_slope: float = 0.01

    def __post_init__(self) -> None:
        _require_positive("stability.grad_norm_exploding", self.grad_norm_exploding)
        _require_positive("stability.grad_norm_vanishing", self.grad_norm_vanishing)
        _require_positive("stability.loss_trend_rel_slope", self.loss_trend_rel_slope)


@dataclass
class MemoryConfig:
    """VRAM sampling and leak detection.

    NVML is sampled every ``sample_interval_ms`` ms by a ``sampler`` that is a child ``process`` (it shares no GIL
    with training: as a ``thread`` it cost a launch-bound loop about 1.2% of its time on an H200) or a ``thread``
    of the benchmark process. A leak is flagged above ``leak_threshold_mb_per_epoch`` MB of growth per epoch.
    """

    sample_interval_ms: float = 10.0
    leak_threshold_mb_per_epoch: float = 5.0
    sampler: str = "process"

    def __post_init__(self) -> None:
        _require_positive("memory.sample_interval_ms", self.sample_interval_ms)
        _require_positive("memory.leak_threshold_mb_per_epoch", self.leak_threshold_mb_per_epoch)
        _require_choice("memory.sampler", self.sampler, MEMORY_SAMPLERS)


@dataclass
class TrainingPlanConfig:
    """The full training each model's time is extrapolated to, in samples (see ``gpubench/decision.py``).

    Supervised models (sample unit ``window``) train ``passes[model]`` passes over a dataset of
    ``trading_days × bars_per_day × symbols`` windows (one window ends at every one-minute bar). The default is the
    seed's dataset: 360 trading days of 390 one-minute bars (a US equity session) of one symbol, 50 passes.
    RL models (unit ``env_step``) train ``env_steps[model]`` environment steps; 10M each is CleanRL's default
    budget for DQN and PPO and the PPO workload's ``total_timesteps`` (its learning-rate annealing horizon).
    """

    trading_days: int = 360
    bars_per_day: int = 390
    symbols: int = 1
    passes: dict[str, float] = field(default_factory=lambda: {"mlp": 50.0, "tft": 50.0, "mamba2": 50.0})
    env_steps: dict[str, float] = field(default_factory=lambda: {"dqn": 1e7, "ppo": 1e7})

    def __post_init__(self) -> None:
        for key in ("trading_days", "bars_per_day", "symbols"):
            _require_positive(f"decision.plan.{key}", getattr(self, key))
        for group in ("passes", "env_steps"):
            for name, value in getattr(self, group).items():
                _require_positive(f"decision.plan.{group}.{name}", value)

    @property
    def windows_per_pass(self) -> int:
        """Training windows in one pass over the dataset."""
        return self.trading_days * self.bars_per_day * self.symbols


@dataclass
class DecisionConfig:
    """The local-vs-cloud decision: thresholds on the upper bound of the estimated training time, the training
    plan, VRAM budgets, and the prices the cost analysis uses (see ``gpubench/decision.py``).

    ``memory_budget_mb`` holds each model's VRAM target (MiB); the defaults sum to 3.3 GiB for the four seed models,
    under 85% of a 4 GiB card. ``local_hardware_cost_usd`` (null: no amortisation) is spread over
    ``amortisation_months``. ``cloud_card`` names the catalog card (``conf/hardware/``) rented in the cloud; its
    ``hourly_price_usd`` is used unless ``cloud_hourly_price_usd`` overrides it. ``assumed_matmul_efficiency`` is
    the fraction of a card's peak FLOP/s its matmuls reach, used by the projection only where the benchmark could
    not measure it (a source device that is not a catalog card).
    """

    local_max_hours: float = 24.0
    cloud_min_hours: float = 48.0
    critical_models: list[str] = field(default_factory=lambda: ["dqn", "ppo"])
    plan: TrainingPlanConfig = field(default_factory=TrainingPlanConfig)
    memory_budget_mb: dict[str, float] = field(
        default_factory=lambda: {"mlp": 256.0, "dqn": 512.0, "ppo": 512.0, "mamba2": 1280.0, "tft": 1024.0}
    )
    electricity_usd_per_kwh: float = 0.17
    local_hardware_cost_usd: float | None = None
    amortisation_months: int = 36
    trainings_per_month: float = 4.0
    cloud_card: str = "h100"
    cloud_hourly_price_usd: float | None = None
    assumed_matmul_efficiency: float = 0.7

    def __post_init__(self) -> None:
        _require_positive("decision.local_max_hours", self.local_max_hours)
        _require(
            self.cloud_min_hours >= self.local_max_hours,
            "decision.cloud_min_hours",
            self.cloud_min_hours,
            f">= decision.local_max_hours ({self.local_max_hours})",
        )
        for name in self.critical_models:
            _require_choice("decision.critical_models", name, KNOWN_MODELS)
        for name, budget_mb in self.memory_budget_mb.items():
            _require_positive(f"decision.memory_budget_mb.{name}", budget_mb)
        _require(
            self.electricity_usd_per_kwh >= 0,
            "decision.electricity_usd_per_kwh",
            self.electricity_usd_per_kwh,
            ">= 0",
        )
        if self.local_hardware_cost_usd is not None:
            _require(
                self.local_hardware_cost_usd >= 0,
                "decision.local_hardware_cost_usd",
                self.local_hardware_cost_usd,
                ">= 0 or null (no amortisation)",
            )
        _require_positive("decision.amortisation_months", self.amortisation_months)
        _require_positive("decision.trainings_per_month", self.trainings_per_month)
        _require(bool(self.cloud_card), "decision.cloud_card", self.cloud_card, "a catalog card name such as h100")
        if self.cloud_hourly_price_usd is not None:
            _require(
                self.cloud_hourly_price_usd >= 0,
                "decision.cloud_hourly_price_usd",
                self.cloud_hourly_price_usd,
                ">= 0 or null (the catalog card's price)",
            )
        _require(
            0.0 < self.assumed_matmul_efficiency <= 1.0,
            "decision.assumed_matmul_efficiency",
            self.assumed_matmul_efficiency,
            "in (0, 1]",
        )


# --------------------------------------------------------------------------------------------------- data


@dataclass
class DataConfig:
    """Where market data comes from and how it becomes features.

    ``synthetic`` generates DBN files (one per trading day) into ``cache_dir`` and reads them back like a user's
    download; ``dbn`` reads ``path`` (a folder or glob of ``.dbn``/``.dbn.zst`` files); ``parquet`` reads ``path``
    (a Parquet file or folder of them with the bar columns).
    """

    source: str = "synthetic"
    path: str | None = None
    cache_dir: str = "~/.cache/gpubench"
    symbols: list[str] = field(default_factory=lambda: ["SYNA", "SYNB", "SYNC", "SYND"])
    days: int = 20
    start_date: str = "2024-01-02"
    seed: int = 7
    train_fraction: float = 0.8
    volatility_window: int = 30

    def __post_init__(self) -> None:
        _require_choice("data.source", self.source, DATA_SOURCES)
        if self.source in ("dbn", "parquet"):
            _require(
                bool(self.path),
                "data.path",
                self.path,
                f"a folder or glob of files when data={self.source}",
            )
        _require(len(self.symbols) > 0, "data.symbols", self.symbols, "a non-empty list")
        _require_positive("data.days", self.days)
        _require_probability("data.train_fraction", self.train_fraction)
        _require(self.volatility_window >= 2, "data.volatility_window", self.volatility_window, ">= 2")


# --------------------------------------------------------------------------------------------------- tracking


@dataclass
class TrackingConfig:
    """MLflow tracking. The default SQLite store lives in ``mlruns/`` beside the artifacts."""

    enabled: bool = True
    uri: str = "sqlite:///mlruns/mlflow.db"
    artifact_location: str = "mlruns/artifacts"
    experiment: str = "gpubench"


# --------------------------------------------------------------------------------------------------- top level


@dataclass
class BenchmarkConfig:
    """The whole job. Groups and keys are documented in README.md and DESIGN.md."""

    model: ModelSelection = field(default_factory=ModelSelection)
    workloads: WorkloadsConfig = field(default_factory=WorkloadsConfig)
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
    epochs: int = 10
    warmup_epochs: int = 2
    seed: int = 0
    output: str = "report.json"
    verbose: bool = False

    def __post_init__(self) -> None:
        _require(self.epochs >= 2, "epochs", self.epochs, "an integer >= 2 (an interval needs two epochs)")
        _require(self.warmup_epochs >= 0, "warmup_epochs", self.warmup_epochs, "an integer >= 0")
        if self.statistics.adaptive:
            _require(
                self.statistics.max_epochs >= self.epochs,
                "statistics.max_epochs",
                self.statistics.max_epochs,
                f">= epochs ({self.epochs}) when statistics.adaptive=true",
            )
        _require(bool(self.output), "output", self.output, "a file path for the JSON report")
        _require(math.isfinite(float(self.seed)), "seed", self.seed, "an integer")

    @property
    def model_names(self) -> list[str]:
        """The workloads to run, in order, with ``all`` expanded to the seed models."""
        names: list[str] = []
        for name in self.model.names:
            for expanded in SEED_MODELS if name == "all" else (name,):
                if expanded not in names:
                    names.append(expanded)
        return names


def register_configs() -> None:
    """Register the schemas so YAML files can name them in their defaults lists."""
    store = ConfigStore.instance()
    store.store(name="benchmark_schema", node=BenchmarkConfig)
    store.store(group="hardware", name="hardware_schema", node=HardwareConfig)
    store.store(group="model", name="model_schema", node=ModelSelection)
    store.store(group="data", name="data_schema", node=DataConfig)
    store.store(group="statistics", name="statistics_schema", node=StatisticsConfig)
    store.store(group="decision", name="decision_schema", node=DecisionConfig)
    store.store(group="tracking", name="tracking_schema", node=TrackingConfig)
