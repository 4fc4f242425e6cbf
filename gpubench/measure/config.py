"""The measurement keys: ``batch``, ``epoch``, ``stability`` and ``memory``."""

from dataclasses import dataclass

from gpubench.errors import require, require_choice, require_positive

BATCH_POLICIES: tuple[str, ...] = ("configured", "knee", "max")
MEMORY_SAMPLERS: tuple[str, ...] = ("process", "thread")


@dataclass
class BatchConfig:
    """Batch-size search bounds and policy (``configured``, ``knee`` or ``max``); ``search: null`` searches on a GPU
    only. ``max_step_downs``: how often a batch whose measured epochs broke the headroom is stepped down."""

    search: bool | None = None
    policy: str = "configured"
    min_size: int = 32
    max_size: int = 4096
    headroom: float = 0.9
    target_effective: int = 512
    verify_steps: int = 20
    max_step_downs: int = 2
    trial_max_seconds: float = 2.0

    def __post_init__(self) -> None:
        require_choice("batch.policy", self.policy, BATCH_POLICIES)
        require_positive("batch.min_size", self.min_size)
        require(self.max_size >= self.min_size, "batch.max_size", self.max_size, f">= batch.min_size ({self.min_size})")
        require(0.0 < self.headroom <= 1.0, "batch.headroom", self.headroom, "in (0, 1]")
        require_positive("batch.target_effective", self.target_effective)
        require(self.verify_steps >= 3, "batch.verify_steps", self.verify_steps, "an integer >= 3")
        require(self.max_step_downs >= 0, "batch.max_step_downs", self.max_step_downs, "an integer >= 0")
        require_positive("batch.trial_max_seconds", self.trial_max_seconds)


@dataclass
class EpochConfig:
    """An epoch is a timing block of ``steps`` steps (``auto``: sized to ``min_seconds``): short epochs give more of
    them, which narrows the interval, and still hold enough steps for the one synchronisation to be negligible."""

    steps: str = "auto"
    min_seconds: float = 0.5
    max_auto_steps: int = 100_000

    def __post_init__(self) -> None:
        self.steps = str(self.steps).strip().lower()
        if self.steps != "auto":
            require(
                self.steps.isdigit() and int(self.steps) > 0, "epoch.steps", self.steps, "`auto` or a positive integer"
            )
        require_positive("epoch.min_seconds", self.min_seconds)
        require_positive("epoch.max_auto_steps", self.max_auto_steps)

    @property
    def fixed_steps(self) -> int | None:
        return None if self.steps == "auto" else int(self.steps)


@dataclass
class MemoryConfig:
    """NVML sampled every ``sample_interval_ms`` by a child ``process`` (no GIL shared with training) or a
    ``thread``; a leak is growth above ``leak_threshold_mb_per_epoch``."""

    sample_interval_ms: float = 10.0
    leak_threshold_mb_per_epoch: float = 5.0
    sampler: str = "process"

    def __post_init__(self) -> None:
        require_positive("memory.sample_interval_ms", self.sample_interval_ms)
        require_positive("memory.leak_threshold_mb_per_epoch", self.leak_threshold_mb_per_epoch)
        require_choice("memory.sampler", self.sampler, MEMORY_SAMPLERS)
