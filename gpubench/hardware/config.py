"""The ``hardware`` group: which device to benchmark on, the card it stands for, and the thermal limits."""

from dataclasses import dataclass, field

from gpubench.errors import require, require_positive


@dataclass
class HardwareConfig:
    """The device (``auto``, ``cpu`` or a catalog card) and what is known of the card. A catalog card on a larger
    GPU caps usable VRAM at ``vram_limit_gb``, so the batch search finds that card's limits."""

    name: str = "auto"
    vram_gb: float | None = None
    vram_limit_gb: float | None = None
    peak_fp32_tflops: float | None = None
    peak_bf16_tflops: float | None = None
    peak_tf32_tflops: float | None = None
    memory_bandwidth_gbps: float | None = None
    board_power_w: float | None = None
    gpuhunt_names: list[str] = field(default_factory=list)
    skypilot_name: str | None = None
    dstack_name: str | None = None
    burn_in_max_seconds: float = 30.0
    temperature_warn_c: float = 70.0
    temperature_throttle_c: float = 80.0
    temperature_stop_c: float = 90.0
    #: torch's intra-op threads; null: the idle CPUs on the CPU, torch's default on a GPU.
    cpu_threads: int | None = None

    def __post_init__(self) -> None:
        for key in (
            "vram_gb",
            "vram_limit_gb",
            "peak_fp32_tflops",
            "peak_bf16_tflops",
            "peak_tf32_tflops",
            "memory_bandwidth_gbps",
            "board_power_w",
        ):
            value = getattr(self, key)
            if value is not None:
                require_positive(f"hardware.{key}", value)
        if self.cpu_threads is not None:
            require(self.cpu_threads >= 1, "hardware.cpu_threads", self.cpu_threads, "an integer >= 1, or null (auto)")
        require(self.burn_in_max_seconds >= 0, "hardware.burn_in_max_seconds", self.burn_in_max_seconds, ">= 0")
        require(
            self.temperature_warn_c < self.temperature_throttle_c < self.temperature_stop_c,
            "hardware.temperature_warn_c/temperature_throttle_c/temperature_stop_c",
            (self.temperature_warn_c, self.temperature_throttle_c, self.temperature_stop_c),
            "strictly increasing (default 70 < 80 < 90 °C)",
        )
