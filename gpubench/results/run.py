"""What the benchmark ran on and how: the hardware, the burn-in, the data's provenance, the host's load and the job."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from gpubench.results.codec import OMIT_EMPTY, Record


@dataclass(frozen=True)
class WarmupStats(Record):
    """The burn-in: ``epochs`` iterations of ``matmuls_per_iteration`` matmuls of ``matrix_size``², their settled mean
    time (ms), its length (s) and the device after; ``peak_sm_clock_mhz`` is the reference for throttled epochs."""

    epochs: int
    mean_time_ms: float
    final_temperature_celsius: float | None
    final_sm_clock_mhz: float | None
    peak_sm_clock_mhz: float | None
    stabilised: bool
    seconds: float
    matrix_size: int
    matmuls_per_iteration: int
    achieved_tflops: float


#: The fields of HardwareReport a CPU run (or a GPU without NVML) leaves unmeasured.
_DEVICE_FIELDS: tuple[str, ...] = (
    "total_vram_mb",
    "cuda_version",
    "cuda_driver_version",
    "driver_version",
    "compute_capability",
    "uuid",
    "nvml_index",
    "power_limit_w",
    "sm_clock_mhz",
    "max_sm_clock_mhz",
    "temperature_c",
    "throttle_reasons",
    "warmup_stats",
)


@dataclass(frozen=True)
class HardwareReport(Record):
    """What the benchmark ran on: ``measured_on`` ``cuda`` or ``cpu``, versions, the host's CPUs and the VRAM budget
    (MB, None on the CPU)."""

    _DERIVED: ClassVar[tuple[str, ...]] = ("not_measured",)

    measured_on: str
    device_name: str
    total_vram_mb: float | None = None
    cuda_version: str | None = None
    cuda_driver_version: str | None = None
    driver_version: str | None = None
    compute_capability: str | None = None
    uuid: str | None = None
    torch_index: int | None = None
    nvml_index: int | None = None
    power_limit_w: float | None = None
    sm_clock_mhz: float | None = None
    max_sm_clock_mhz: float | None = None
    temperature_c: float | None = None
    throttle_reasons: list[str] | None = None
    nvml_available: bool = False
    energy_counter_available: bool = False
    cpu_name: str = ""
    cpu_logical_cores: int | None = None
    ram_mb: float | None = None
    notices: list[str] = field(default_factory=list)
    warmup_stats: WarmupStats | None = None
    vram_limit_mb: float | None = None
    non_allocator_overhead_mb: float | None = None
    usable_vram_mb: float | None = None
    overhead_source: str | None = None

    @property
    def not_measured(self) -> list[str]:
        """The device fields left None (not measured on this device)."""
        return [name for name in _DEVICE_FIELDS if getattr(self, name) is None]

    @property
    def card_memory_mb(self) -> float | None:
        """VRAM (MB) the models had: the usable VRAM under a cap, else the card's total; None on the CPU."""
        return self.usable_vram_mb or self.total_vram_mb

    @property
    def on_gpu(self) -> bool:
        return self.measured_on == "cuda"


@dataclass(frozen=True)
class DataProvenance(Record):
    """Where the market data came from: source, files (and those without bars), bars, symbols, time range, load (s)."""

    source: str
    path: str | None
    files: int
    bars: int
    symbols: list[str]
    first_timestamp: str | None
    last_timestamp: str | None
    cache_hit: bool
    load_seconds: float
    content_hash: str | None
    empty_files: list[str] = field(default_factory=list, metadata=OMIT_EMPTY)


@dataclass(frozen=True)
class HostLoad(Record):
    """The host when the run started: its CPUs (all, and this process's), the 1/5/15-minute load averages (None where
    the OS has none), torch's thread counts, how they were chosen, and the OpenMP/MKL thread variables set."""

    cpu_count: int
    available_cpus: int
    load_average_1m: float | None
    load_average_5m: float | None
    load_average_15m: float | None
    torch_num_threads: int
    torch_interop_threads: int
    threads_source: str
    thread_environment: dict[str, str] = field(default_factory=dict)


#: What a preset's (``experiment=<name>``) numbers stand for, where they are not the user's training.
PRESET_NOTES: dict[str, str] = {"quick": "smoke test: tiny shapes, not your training"}


def preset_choice(choices: dict[str, str]) -> str | None:
    """The ``experiment`` preset among Hydra's group ``choices`` (``quick``, ``seed``), None without one."""
    choice = choices.get("experiment")
    # Hydra names an unset group None, which the job records as the string "None" (gpubench/job.py).
    return None if choice in (None, "", "null", "None") else choice


@dataclass(frozen=True)
class RunInfo(Record):
    """The job: device, models, epochs, execution, hardware settings, Hydra's overrides and choices, output, versions
    and commit; derived ``preset`` and ``preset_note``, written only when there is one."""

    _DERIVED: ClassVar[tuple[str, ...]] = ("preset", "preset_note")

    device: str
    models: list[str]
    epochs: int
    warmup_epochs: int
    precision: str
    compile: str
    seed: int
    hardware_config: dict[str, Any] = field(default_factory=dict)
    overrides: list[str] = field(default_factory=list)
    choices: dict[str, str] = field(default_factory=dict)
    output_dir: str | None = None
    sweep_dir: str | None = None
    job_num: int | None = None
    versions: dict[str, str | None] = field(default_factory=dict)
    git_commit: str | None = None
    mlflow_run_id: str | None = field(default=None, metadata=OMIT_EMPTY)
    host: HostLoad | None = field(default=None, metadata=OMIT_EMPTY)
    matmul_precision: str | None = field(default=None, metadata=OMIT_EMPTY)

    @property
    def preset(self) -> str | None:
        return preset_choice(self.choices)

    @property
    def preset_note(self) -> str | None:
        """What the preset's numbers stand for when they are not the user's training (``quick``: a smoke test)."""
        return None if self.preset is None else PRESET_NOTES.get(self.preset)

    def derived(self) -> dict[str, Any]:
        return {key: value for key, value in super().derived().items() if value is not None}

    @property
    def fp32_matmul_precision(self) -> str:
        """``execution.matmul_precision``: ``highest`` (PyTorch's default) where not recorded."""
        return self.matmul_precision or "highest"

    @property
    def torch_version(self) -> str | None:
        return self.versions.get("torch")

    @property
    def python_version(self) -> str | None:
        return self.versions.get("python")
