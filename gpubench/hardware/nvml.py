"""NVML without torch (the memory sampler's child imports it): the session, one GPU's queries and its memory.
Every query degrades to None instead of failing. MB are MiB, temperatures °C, clocks MHz, power W, energy mJ."""

import importlib
import os
import threading
from dataclasses import dataclass
from typing import Any

from gpubench.results.units import BYTES_PER_MB

MILLI_PER_UNIT = 1000.0

#: nvml.h's ``nvmlClocksEventReason*`` bits (NVML's ABI, so decoding needs no pynvml).
THROTTLE_REASON_BITS: dict[str, int] = {
    "gpu_idle": 0x1,
    "applications_clocks_setting": 0x2,
    "sw_power_cap": 0x4,
    "hw_slowdown": 0x8,
    "sync_boost": 0x10,
    "sw_thermal_slowdown": 0x20,
    "hw_thermal_slowdown": 0x40,
    "hw_power_brake_slowdown": 0x80,
    "display_clock_setting": 0x100,
}


def decode_throttle_reasons(mask: int | None) -> list[str] | None:
    """Names of the reasons set in a clock-event bitmask (None when unread)."""
    return None if mask is None else [name for name, bit in THROTTLE_REASON_BITS.items() if mask & bit]


class Nvml:
    """An initialised NVML library (``pynvml``, or a fake), or the reason it is unavailable (``notice``)."""

    def __init__(self, library: Any | None = None) -> None:
        self.notice: str | None = None
        self._library: Any | None = None
        try:
            module = library if library is not None else importlib.import_module("pynvml")
            module.nvmlInit()
        # Broad: a missing package, library or driver all mean no telemetry, and none may stop the benchmark.
        except Exception as error:
            self.notice = f"NVML unavailable ({type(error).__name__}: {error}); GPU telemetry not measured"
            return
        self._library = module

    @property
    def available(self) -> bool:
        return self._library is not None

    def query(self, function: str, *args: Any) -> Any | None:
        """``pynvml.<function>(*args)``, or None when it cannot answer."""
        if self._library is None:
            return None
        try:
            return getattr(self._library, function)(*args)
        except (self._library.NVMLError, AttributeError):
            return None

    def constant(self, name: str) -> Any:
        return getattr(self._library, name)


_default_nvml: Nvml | None = None
_default_nvml_lock = threading.Lock()


def default_nvml() -> Nvml:
    global _default_nvml
    with _default_nvml_lock:
        if _default_nvml is None:
            _default_nvml = Nvml()
        return _default_nvml


@dataclass(frozen=True)
class DeviceSample:
    """One reading of a GPU's state (None: unread)."""

    temperature_c: float | None = None
    sm_clock_mhz: float | None = None
    power_w: float | None = None
    throttle_reasons: tuple[str, ...] | None = None
    #: The cumulative energy counter since the driver loaded.
    energy_mj: int | None = None


@dataclass(frozen=True)
class MemoryReading:
    """GPU memory in use per NVML (MB): all of it, and the sampled process's (None: unattributed or not asked)."""

    device_used_mb: float | None
    process_used_mb: float | None


#: A memory reading asks for the process's memory on one reading in this many: that query costs more.
PROCESS_MEMORY_EVERY_N_READINGS = 10


class NvmlDevice:
    """Queries of one GPU through NVML (None: unread)."""

    def __init__(self, nvml: Nvml, nvml_index: int) -> None:
        self.nvml = nvml
        self.nvml_index = nvml_index
        self.handle = nvml.query("nvmlDeviceGetHandleByIndex", nvml_index)
        # Often unsupported (vGPU, containers): after one failure, stop asking.
        self._process_query_supported = True
        self._memory_readings = 0

    def _query(self, function: str, *args: Any) -> Any | None:
        return None if self.handle is None else self.nvml.query(function, self.handle, *args)

    def name(self) -> str | None:
        return self._query("nvmlDeviceGetName")

    def uuid(self) -> str | None:
        return self._query("nvmlDeviceGetUUID")

    def temperature_c(self) -> float | None:
        sensor = self.nvml.constant("NVML_TEMPERATURE_GPU")
        value = self._query("nvmlDeviceGetTemperature", sensor)
        return None if value is None else float(value)

    def sm_clock_mhz(self) -> float | None:
        value = self._query("nvmlDeviceGetClockInfo", self.nvml.constant("NVML_CLOCK_SM"))
        return None if value is None else float(value)

    def max_sm_clock_mhz(self) -> float | None:
        value = self._query("nvmlDeviceGetMaxClockInfo", self.nvml.constant("NVML_CLOCK_SM"))
        return None if value is None else float(value)

    def power_w(self) -> float | None:
        milliwatts = self._query("nvmlDeviceGetPowerUsage")
        return None if milliwatts is None else milliwatts / MILLI_PER_UNIT

    def power_limit_w(self) -> float | None:
        # The enforced limit is the lower of the user's and the board's.
        milliwatts = self._query("nvmlDeviceGetEnforcedPowerLimit")
        if milliwatts is None:
            milliwatts = self._query("nvmlDeviceGetPowerManagementLimit")
        return None if milliwatts is None else milliwatts / MILLI_PER_UNIT

    def throttle_reasons(self) -> list[str] | None:
        # Older drivers know only the "throttle" name.
        mask = self._query("nvmlDeviceGetCurrentClocksEventReasons")
        if mask is None:
            mask = self._query("nvmlDeviceGetCurrentClocksThrottleReasons")
        return decode_throttle_reasons(mask)

    def energy_mj(self) -> int | None:
        value = self._query("nvmlDeviceGetTotalEnergyConsumption")
        return None if value is None else int(value)

    def device_used_mb(self) -> float | None:
        info = self._query("nvmlDeviceGetMemoryInfo")
        return None if info is None else info.used / BYTES_PER_MB

    def process_used_mb(self, pid: int) -> float | None:
        if not self._process_query_supported:
            return None
        processes = self._query("nvmlDeviceGetComputeRunningProcesses")
        if processes is None:
            self._process_query_supported = False
            return None
        for process in processes:
            if process.pid == pid:
                used = process.usedGpuMemory
                return None if used is None else used / BYTES_PER_MB
        return None

    def sample(self) -> DeviceSample:
        reasons = self.throttle_reasons()
        return DeviceSample(
            temperature_c=self.temperature_c(),
            sm_clock_mhz=self.sm_clock_mhz(),
            power_w=self.power_w(),
            throttle_reasons=None if reasons is None else tuple(reasons),
            energy_mj=self.energy_mj(),
        )

    def memory_reading(self, pid: int | None = None) -> MemoryReading:
        """Device-used memory now, and process ``pid``'s (default this one) every few readings (MB)."""
        readings, self._memory_readings = self._memory_readings, self._memory_readings + 1
        process_mb = None
        if readings % PROCESS_MEMORY_EVERY_N_READINGS == 0:
            process_mb = self.process_used_mb(os.getpid() if pid is None else pid)
        return MemoryReading(self.device_used_mb(), process_mb)
