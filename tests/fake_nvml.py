"""A fake of the part of ``pynvml`` that gpubench uses, with scriptable devices, for tests without a GPU.

Function and constant names are pynvml's own (a test checks them against the installed nvidia-ml-py). Handles
are the :class:`FakeGpu` objects themselves. A function named in ``unsupported`` raises ``NVMLError`` with
NVML_ERROR_NOT_SUPPORTED, as a real card does for a query it lacks.
"""

from dataclasses import dataclass, field
from types import SimpleNamespace

NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_LIBRARY_NOT_FOUND = 12


class NVMLError(Exception):
    """Same shape as pynvml.NVMLError: carries the NVML return code in ``value``."""

    def __init__(self, value: int) -> None:
        super().__init__(f"NVML error {value}")
        self.value = value


@dataclass
class FakeProcess:
    pid: int
    usedGpuMemory: int | None  # pynvml's attribute name, camelCase as in NVML


@dataclass
class FakeGpu:
    """One fake GPU's state, in NVML's units (bytes, MHz, °C, mW, mJ). Tests mutate it between calls."""

    name: str = "NVIDIA H200"
    uuid: str = "GPU-00000000-0000-0000-0000-000000000000"
    bus_id: str = "00000000:19:00.0"
    total_bytes: int = 141 * 1024**3
    used_bytes: int = 600 * 1024**2
    temperature_c: int = 35
    sm_clock_mhz: int = 1980
    max_sm_clock_mhz: int = 1980
    power_mw: int = 120_000
    power_limit_mw: int = 700_000
    throttle_mask: int = 0
    energy_mj: int = 1_000_000
    processes: list[FakeProcess] = field(default_factory=list)


class FakeNvml:
    """A pynvml stand-in over a list of :class:`FakeGpu` in NVML's (physical) order."""

    NVMLError = NVMLError
    NVML_CLOCK_SM = 1
    NVML_TEMPERATURE_GPU = 0

    def __init__(
        self,
        gpus: list[FakeGpu],
        *,
        driver_version: str = "550.54.15",
        cuda_driver_version: int = 12040,
        init_error: int | None = None,
        unsupported: set[str] | None = None,
    ) -> None:
        self.gpus = gpus
        self.driver_version = driver_version
        self.cuda_driver_version = cuda_driver_version
        self.init_error = init_error
        self.unsupported = unsupported or set()
        self.init_calls = 0
        #: Names of the device and system queries made, in order (not init, count or handle look-ups).
        self.calls: list[str] = []

    def _check(self, function: str) -> None:
        self.calls.append(function)
        if function in self.unsupported:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)

    def nvmlInit(self) -> None:
        self.init_calls += 1
        if self.init_error is not None:
            raise NVMLError(self.init_error)

    def nvmlSystemGetDriverVersion(self) -> str:
        self._check("nvmlSystemGetDriverVersion")
        return self.driver_version

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        self._check("nvmlSystemGetCudaDriverVersion")
        return self.cuda_driver_version

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> FakeGpu:
        if not 0 <= index < len(self.gpus):
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)  # as NVML answers an index past its device count
        return self.gpus[index]

    def nvmlDeviceGetName(self, gpu: FakeGpu) -> str:
        self._check("nvmlDeviceGetName")
        return gpu.name

    def nvmlDeviceGetUUID(self, gpu: FakeGpu) -> str:
        self._check("nvmlDeviceGetUUID")
        return gpu.uuid

    def nvmlDeviceGetPciInfo(self, gpu: FakeGpu) -> SimpleNamespace:
        self._check("nvmlDeviceGetPciInfo")
        return SimpleNamespace(busId=gpu.bus_id)

    def nvmlDeviceGetMemoryInfo(self, gpu: FakeGpu) -> SimpleNamespace:
        self._check("nvmlDeviceGetMemoryInfo")
        return SimpleNamespace(total=gpu.total_bytes, used=gpu.used_bytes, free=gpu.total_bytes - gpu.used_bytes)

    def nvmlDeviceGetTemperature(self, gpu: FakeGpu, sensor: int) -> int:
        self._check("nvmlDeviceGetTemperature")
        assert sensor == self.NVML_TEMPERATURE_GPU
        return gpu.temperature_c

    def nvmlDeviceGetClockInfo(self, gpu: FakeGpu, clock_type: int) -> int:
        self._check("nvmlDeviceGetClockInfo")
        assert clock_type == self.NVML_CLOCK_SM
        return gpu.sm_clock_mhz

    def nvmlDeviceGetMaxClockInfo(self, gpu: FakeGpu, clock_type: int) -> int:
        self._check("nvmlDeviceGetMaxClockInfo")
        assert clock_type == self.NVML_CLOCK_SM
        return gpu.max_sm_clock_mhz

    def nvmlDeviceGetPowerUsage(self, gpu: FakeGpu) -> int:
        self._check("nvmlDeviceGetPowerUsage")
        return gpu.power_mw

    def nvmlDeviceGetEnforcedPowerLimit(self, gpu: FakeGpu) -> int:
        self._check("nvmlDeviceGetEnforcedPowerLimit")
        return gpu.power_limit_mw

    def nvmlDeviceGetPowerManagementLimit(self, gpu: FakeGpu) -> int:
        self._check("nvmlDeviceGetPowerManagementLimit")
        return gpu.power_limit_mw

    def nvmlDeviceGetCurrentClocksEventReasons(self, gpu: FakeGpu) -> int:
        self._check("nvmlDeviceGetCurrentClocksEventReasons")
        return gpu.throttle_mask

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, gpu: FakeGpu) -> int:
        self._check("nvmlDeviceGetCurrentClocksThrottleReasons")
        return gpu.throttle_mask

    def nvmlDeviceGetTotalEnergyConsumption(self, gpu: FakeGpu) -> int:
        self._check("nvmlDeviceGetTotalEnergyConsumption")
        return gpu.energy_mj

    def nvmlDeviceGetComputeRunningProcesses(self, gpu: FakeGpu) -> list[FakeProcess]:
        self._check("nvmlDeviceGetComputeRunningProcesses")
        return list(gpu.processes)


def three_gpus() -> list[FakeGpu]:
    """Three distinct fake H200s on PCI buses 0x19, 0x3b and 0x5d, in NVML order."""
    return [
        FakeGpu(uuid=f"GPU-{i}aaaaaaa-0000-0000-0000-00000000000{i}", bus_id=f"00000000:{bus}:00.0")
        for i, bus in enumerate(("19", "3B", "5D"))
    ]
