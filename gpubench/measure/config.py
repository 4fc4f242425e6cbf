"""The measurement keys: ``batch``, ``epoch``, ``stability`` and ``memory``."""

from dataclasses import dataclass

from gpubench.errors import require, require_choice, require_positive

#: What ``batch.policy`` times: the recipe's configured batch, the throughput knee, or the largest that fits.
BATCH_POLICIES: tuple[str, ...] = ("configured", "knee", "max")

#: Where the NVML memory sampler runs: a child process (no GIL shared with training) or a thread of the benchmark.
MEMORY_SAMPLERS: tuple[str, ...] = ("process", "thread")


@dataclass
class BatchConfig:
    """Batch-size search bounds and policy. ``search: null`` means: search on a GPU, not on the CPU.

    ``policy`` picks the timed batch: ``configured`` (``workloads.<model>.batch_size``; always for RL), ``knee``
    (smallest within 90% of the best throughput) or ``max``. ``max_size`` caps every timed batch.
    ``trial_max_seconds`` (s) stops the search's doubling. ``verify_steps``: each re-verification trial's length.
    ``max_step_downs``: how often a searched batch whose measured epochs exceeded the headroom is stepped down.
    """

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
        require(
            self.max_size >= self.min_size,
            "batch.max_size",
            self.max_size,
            f">= batch.min_size ({self.min_size})",
        )
        require(0.0 < self.headroom <= 1.0, "batch.headroom", self.headroom, "in (0, 1]")
        require_positive("batch.target_effective", self.target_effective)
        # Verification trials must reach the allocator's steady state, and be at least as long as search trials.
        require(self.verify_steps >= 3, "batch.verify_steps", self.verify_steps, "an integer >= 3")
        require(self.max_step_downs >= 0, "batch.max_step_downs", self.max_step_downs, "an integer >= 0")
        require_positive("batch.trial_max_seconds", self.trial_max_seconds)


@dataclass
class EpochConfig:
    """A benchmark epoch is a timing block of ``steps`` optimizer steps (``auto``: sized to ``min_seconds``). Shorter
    epochs give more of them in the same time, which narrows the decision interval; half a second still holds
    hundreds of steps, so the one synchronisation per epoch stays negligible."""

    steps: str = "auto"
    min_seconds: float = 0.5
    max_auto_steps: int = 100_000

    def __post_init__(self) -> None:
        self.steps = str(self.steps).strip().lower()
        if self.steps != "auto":
            require(
                self.steps.isdigit() and int(self.steps) > 0,
                "epoch.steps",
                self.steps,
                "`auto` or a positive integer",
            )
        require_positive("epoch.min_seconds", self.min_seconds)
        require_positive("epoch.max_auto_steps", self.max_auto_steps)

    @property
    def fixed_steps(self) -> int | None:
        """The fixed step count, or None when the block is sized automatically."""
        return None if self.steps == "auto" else int(self.steps)


@dataclass
class MemoryConfig:
    """VRAM sampling and leak detection: NVML sampled every ``sample_interval_ms`` ms by a child ``process`` (no GIL
    shared with training) or a ``thread``; a leak above ``leak_threshold_mb_per_epoch`` MB of growth per epoch."""

    sample_interval_ms: float = 10.0
    leak_threshold_mb_per_epoch: float = 5.0
    sampler: str = "process"

    def __post_init__(self) -> None:
        require_positive("memory.sample_interval_ms", self.sample_interval_ms)
        require_positive("memory.leak_threshold_mb_per_epoch", self.leak_threshold_mb_per_epoch)
        require_choice("memory.sampler", self.sampler, MEMORY_SAMPLERS)
