"""The device: which one to benchmark on, what it is, how it is doing. Maps torch's CUDA devices onto NVML's.

Everything here degrades instead of failing: without CUDA the benchmark runs on the CPU with a one-line notice;
without NVML (no driver library, a container without it, an unsupported query) the telemetry fields are ``None``
and a notice says why. The NVML queries themselves live in :mod:`gpubench.hardware.nvml`, which imports no torch, so the
memory sampler's child process can use them; this module adds what needs torch (the device's identity, its NVML
index, the VRAM cap, the probe, the burn-in and the per-epoch watch).

Units, also carried in the names: MB are MiB (2**20 bytes, as nvidia-smi and torch print them), GB in the
configuration are GiB, temperatures °C, clocks MHz, power W, energy J.
"""

import os
import platform
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from gpubench.errors import ConfigError
from gpubench.hardware.config import HardwareConfig
from gpubench.hardware.nvml import BYTES_PER_MB, DeviceSample, MemoryReading, Nvml, NvmlDevice, default_nvml

BYTES_PER_GB = 1024**3
CPU_NOTICE = "no CUDA device found; benchmarking on the CPU"

#: Reasons that mean heat or power is holding the clock down, so an epoch measured under one is not
#: representative of the card's sustained speed. (Idle, sync boost and application clocks are not slowdowns.)
THERMAL_POWER_REASONS: frozenset[str] = frozenset(
    {"sw_power_cap", "hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown"}
)
#: An epoch whose SM clock is below this fraction of the sustained maximum counts as throttled.
THROTTLED_CLOCK_FRACTION = 0.75

# Burn-in on the CPU only checks that the loop runs and reports its time: keep it short and small.
_CPU_BURN_IN_MAX_SECONDS = 1.0
_CPU_BURN_IN_MATRIX_SIZE = 256
# Matmuls between two synchronisations: enough that the sync and the clock read are a negligible part of an
# iteration (a 4096x4096 fp32 matmul is about 2 ms on an H200).
_BURN_IN_MATMULS_PER_ITERATION = 10


# --------------------------------------------------------------------------------------------------- device choice


def resolve_device(hw: HardwareConfig, *, cuda_available: bool | None = None) -> tuple[torch.device, str | None]:
    """The device to benchmark on, and a one-line notice when the choice is not what the user might expect.

    ``auto`` picks ``cuda:0`` when CUDA is available and the CPU otherwise (with a notice); ``cpu`` picks the
    CPU; a catalog card needs a CUDA GPU, because it emulates that card's VRAM by capping the allocator there.
    ``cuda_available`` overrides ``torch.cuda.is_available()`` (for tests).
    """
    has_cuda = torch.cuda.is_available() if cuda_available is None else cuda_available
    if hw.name == "cpu":
        return torch.device("cpu"), None
    if hw.name == "auto":
        if has_cuda:
            return torch.device("cuda", 0), None
        return torch.device("cpu"), CPU_NOTICE
    if not has_cuda:
        raise ConfigError(
            f"`hardware` = {hw.name!r} needs a CUDA GPU, and none was found: a catalog card emulates that card's "
            "VRAM by capping the memory allocator on a CUDA GPU. On a machine without one, use hardware=cpu or "
            "hardware=auto."
        )
    return torch.device("cuda", 0), None


#: Side of the square matmul that creates the CUDA context and the cuBLAS handle before the overhead is measured.
_CONTEXT_MATMUL_SIZE = 256


@dataclass(frozen=True)
class VramBudget:
    """The device memory a benchmark may use, in MB.

    ``vram_limit_mb`` is the card being emulated (``hardware.vram_limit_gb``) or, without a limit, the whole card.
    ``non_allocator_overhead_mb`` is what the process holds outside torch's caching allocator (the CUDA context,
    loaded kernels, library handles): a real card of that size loses it too. ``usable_vram_mb`` is the rest, what
    the allocator is capped at. ``overhead_source`` says how the overhead was read: ``nvml_process`` (NVML's memory
    for this process) or ``device_used`` (``cudaMemGetInfo``'s used memory, which also counts other processes on
    the card, so it can only overstate the overhead).
    """

    vram_limit_mb: float
    non_allocator_overhead_mb: float
    usable_vram_mb: float
    overhead_source: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def non_allocator_overhead_mb(
    reserved_bytes: int, process_used_mb: float | None, free_bytes: int, total_bytes: int
) -> tuple[float, str]:
    """Device memory (MB) this process holds outside torch's caching allocator, and where the figure came from.

    ``process_used_mb`` is NVML's memory for this process (None when NVML cannot attribute it); otherwise the
    card's used memory ``total_bytes - free_bytes`` (``cudaMemGetInfo``) stands in for it. Either way torch's
    ``reserved_bytes`` is subtracted. Never negative: the readings are not atomic and NVML rounds.
    """
    if process_used_mb is not None:
        used_mb, source = process_used_mb, "nvml_process"
    else:
        used_mb, source = (total_bytes - free_bytes) / BYTES_PER_MB, "device_used"
    return max(0.0, used_mb - reserved_bytes / BYTES_PER_MB), source


def allocator_fraction(limit_mb: float, overhead_mb: float, total_mb: float) -> float:
    """The fraction of the card (``total_mb``) to cap torch's allocator at, so that the allocator plus the
    non-allocator overhead fit in ``limit_mb``: ``(limit_mb - overhead_mb) / total_mb``.

    ConfigError when the limit is larger than the card, or when the overhead alone fills it.
    """
    if limit_mb > total_mb:
        raise ConfigError(
            f"`hardware.vram_limit_gb` = {limit_mb * BYTES_PER_MB / BYTES_PER_GB!r} is not valid: it must be at most "
            f"this GPU's memory ({total_mb * BYTES_PER_MB / BYTES_PER_GB:.1f} GB); a VRAM cap can only emulate a "
            "smaller card."
        )
    if overhead_mb >= limit_mb:
        raise ConfigError(
            f"`hardware.vram_limit_gb` = {limit_mb * BYTES_PER_MB / BYTES_PER_GB!r} is not valid: the CUDA context "
            f"and libraries already hold {overhead_mb:,.0f} MB outside PyTorch's allocator, leaving nothing for "
            "training."
        )
    return (limit_mb - overhead_mb) / total_mb


def _measure_non_allocator_overhead(device: torch.device) -> tuple[float, str]:
    """Create the CUDA context and the cuBLAS handle, then read the memory held outside torch's allocator (MB)."""
    # The context, the kernels loaded so far and the cuBLAS handle exist only after a first matmul; measured any
    # earlier, the overhead would read near zero.
    matrix = torch.ones(_CONTEXT_MATMUL_SIZE, _CONTEXT_MATMUL_SIZE, device=device)
    product = matrix @ matrix
    torch.cuda.synchronize(device)
    del matrix, product
    torch.cuda.empty_cache()
    nvml_device = open_nvml_device(device)
    process_used_mb = None if nvml_device is None else nvml_device.process_used_mb(os.getpid())
    free_bytes, total_bytes = torch.cuda.mem_get_info(device)
    return non_allocator_overhead_mb(torch.cuda.memory_reserved(device), process_used_mb, free_bytes, total_bytes)


def apply_vram_limit(device: torch.device, limit_gb: float | None) -> VramBudget | None:
    """Cap the caching allocator so that it plus the non-allocator overhead fit in ``limit_gb`` GiB; return the
    budget (MB), or None on the CPU.

    The overhead (CUDA context, kernels, library handles) is measured after a first matmul and subtracted, since a
    real card of ``limit_gb`` loses it too. Kernels loaded later (lazy module loading, compiled graphs) add to it
    uncapped. Without a limit the cap is reset to the whole card, so the call decides the state whatever ran before
    it in this process; the usable VRAM is then the card less the overhead. ConfigError when the limit is larger
    than the card or the overhead fills it.
    """
    if device.type != "cuda":
        return None
    total_mb = torch.cuda.get_device_properties(device).total_memory / BYTES_PER_MB
    limit_mb = total_mb if limit_gb is None else limit_gb * BYTES_PER_GB / BYTES_PER_MB
    overhead_mb, source = _measure_non_allocator_overhead(device)
    fraction = 1.0 if limit_gb is None else allocator_fraction(limit_mb, overhead_mb, total_mb)
    torch.cuda.set_per_process_memory_fraction(fraction, device)
    return VramBudget(
        vram_limit_mb=limit_mb,
        non_allocator_overhead_mb=overhead_mb,
        usable_vram_mb=limit_mb - overhead_mb,
        overhead_source=source,
    )


# --------------------------------------------------------------------------------------------------- NVML mapping


@dataclass(frozen=True)
class CudaIdentity:
    """What torch knows about one of its CUDA devices: enough to describe it and to find it in NVML.

    ``pci_location`` is (domain, bus, device) as integers, so "0000:19:00.0" and "00000000:19:00.0" compare equal.
    """

    torch_index: int
    name: str
    total_memory_bytes: int
    compute_capability: str
    uuid: str | None
    pci_location: tuple[int, int, int] | None


def cuda_identity(torch_index: int) -> CudaIdentity:
    """Read torch's properties of CUDA device ``torch_index`` (an index under CUDA_VISIBLE_DEVICES)."""
    props = torch.cuda.get_device_properties(torch_index)
    uuid = getattr(props, "uuid", None)
    pci_location = None
    # CUDA builds of torch expose the PCI location; guard anyway, as ROCm and older builds may not.
    if all(hasattr(props, name) for name in ("pci_domain_id", "pci_bus_id", "pci_device_id")):
        pci_location = (int(props.pci_domain_id), int(props.pci_bus_id), int(props.pci_device_id))
    return CudaIdentity(
        torch_index=torch_index,
        name=props.name,
        total_memory_bytes=int(props.total_memory),
        compute_capability=f"{props.major}.{props.minor}",
        uuid=str(uuid) if uuid is not None else None,
        pci_location=pci_location,
    )


def _normalise_uuid(uuid: str | None) -> str | None:
    # NVML prints "GPU-6a3e...", torch prints the bare "6a3e...".
    if not uuid:
        return None
    text = uuid.strip().lower()
    return text.removeprefix("gpu-")


def parse_pci_bus_id(bus_id: str | None) -> tuple[int, int, int] | None:
    """(domain, bus, device) from a PCI bus id such as NVML's "00000000:19:00.0"; None when unparseable."""
    if not bus_id:
        return None
    try:
        domain, bus, device_function = bus_id.strip().split(":")
        return int(domain, 16), int(bus, 16), int(device_function.split(".")[0], 16)
    except ValueError:
        return None


def nvml_index_for(torch_index: int, *, nvml: Nvml | None = None, identity: CudaIdentity | None = None) -> int | None:
    """NVML's index of torch's CUDA device ``torch_index``, or None when it cannot be found.

    They differ whenever CUDA_VISIBLE_DEVICES reorders or hides devices (torch counts visible devices, NVML all
    of them), so the device is matched by UUID, then by PCI location, never by position.
    """
    nvml = nvml or default_nvml()
    count = nvml.query("nvmlDeviceGetCount")
    if not count:
        return None
    identity = identity or cuda_identity(torch_index)
    handles = [nvml.query("nvmlDeviceGetHandleByIndex", index) for index in range(count)]
    wanted_uuid = _normalise_uuid(identity.uuid)
    if wanted_uuid is not None:
        for index, handle in enumerate(handles):
            if handle is not None and _normalise_uuid(nvml.query("nvmlDeviceGetUUID", handle)) == wanted_uuid:
                return index
    if identity.pci_location is not None:
        for index, handle in enumerate(handles):
            pci = nvml.query("nvmlDeviceGetPciInfo", handle) if handle is not None else None
            if pci is not None and parse_pci_bus_id(pci.busId) == identity.pci_location:
                return index
    return None


def open_nvml_device(
    device: torch.device, *, nvml: Nvml | None = None, identity: CudaIdentity | None = None
) -> NvmlDevice | None:
    """The NVML view of a torch CUDA device, or None on the CPU, without NVML, or when the device is not found."""
    if device.type != "cuda":
        return None
    nvml = nvml or default_nvml()
    if not nvml.available:
        return None
    torch_index = device.index if device.index is not None else 0
    nvml_index = nvml_index_for(torch_index, nvml=nvml, identity=identity)
    if nvml_index is None:
        return None
    return NvmlDevice(nvml, nvml_index)


def _empty_sample() -> DeviceSample:
    return DeviceSample()


def _no_energy_counter() -> int | None:
    return None


def device_sampler(
    device: torch.device, *, nvml: Nvml | None = None, identity: CudaIdentity | None = None
) -> Callable[[], DeviceSample]:
    """A function reading the device's state; on the CPU or without NVML it returns an all-None sample."""
    nvml_device = open_nvml_device(device, nvml=nvml, identity=identity)
    return nvml_device.sample if nvml_device is not None else _empty_sample


def memory_reader(
    device: torch.device, *, nvml: Nvml | None = None, identity: CudaIdentity | None = None
) -> Callable[[], MemoryReading] | None:
    """A function reading device-used and this process's GPU memory from NVML; None when NVML cannot."""
    nvml_device = open_nvml_device(device, nvml=nvml, identity=identity)
    return nvml_device.memory_reading if nvml_device is not None else None


# --------------------------------------------------------------------------------------------------- probe


@dataclass(frozen=True)
class WarmupStats:
    """The burn-in before measuring: how long it ran and the state it left the device in.

    ``epochs`` counts burn-in iterations (``matmuls_per_iteration`` matmuls each); ``mean_time_ms`` is the mean
    iteration time over the final window, i.e. the level it settled at. ``peak_sm_clock_mhz`` is the highest SM
    clock seen, the reference for flagging throttled epochs.
    """

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

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


#: Fields of HardwareInfo that a CPU run (or a GPU without NVML) leaves unmeasured; listed in ``not_measured``.
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


@dataclass
class HardwareInfo:
    """What the benchmark ran on, for the report's ``hardware`` object.

    ``measured_on`` is ``cuda`` or ``cpu``. ``cuda_version`` is the CUDA runtime torch was built with (what runs
    the kernels); ``cuda_driver_version`` is the newest CUDA the installed driver supports (NVML). The CPU fields
    describe the host in both cases (RL environments run there). ``warmup_stats`` is set after :func:`burn_in`.
    """

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

    def to_dict(self) -> dict[str, Any]:
        """The report's ``hardware`` object; ``not_measured`` lists the device fields left None."""
        data = asdict(self)
        data["warmup_stats"] = None if self.warmup_stats is None else self.warmup_stats.to_dict()
        data["not_measured"] = [name for name in _DEVICE_FIELDS if data[name] is None]
        return data


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def _ram_mb() -> float | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / BYTES_PER_MB
    except (ValueError, OSError, AttributeError):
        return None


def _cuda_version_text(version: int | None) -> str | None:
    # NVML encodes CUDA 12.4 as 12040.
    if not version:
        return None
    return f"{version // 1000}.{(version % 1000) // 10}"


def probe(device: torch.device, *, nvml: Nvml | None = None, identity: CudaIdentity | None = None) -> HardwareInfo:
    """Describe ``device`` from torch and NVML; on the CPU, describe the processor and leave GPU fields None.

    Never raises for missing telemetry: what NVML cannot read stays None and ``notices`` says so.
    ``nvml`` and ``identity`` replace the process's NVML session and torch's device properties (for tests).
    """
    cpu_name, cpu_logical_cores, ram_mb = _cpu_name(), os.cpu_count(), _ram_mb()
    if device.type != "cuda":
        return HardwareInfo(
            measured_on="cpu",
            device_name=cpu_name,
            cpu_name=cpu_name,
            cpu_logical_cores=cpu_logical_cores,
            ram_mb=ram_mb,
        )

    torch_index = device.index if device.index is not None else 0
    identity = identity or cuda_identity(torch_index)
    nvml = nvml or default_nvml()
    info = HardwareInfo(
        measured_on="cuda",
        device_name=identity.name,
        total_vram_mb=identity.total_memory_bytes / BYTES_PER_MB,
        cuda_version=torch.version.cuda,
        compute_capability=identity.compute_capability,
        uuid=identity.uuid,
        torch_index=torch_index,
        nvml_available=nvml.available,
        cpu_name=cpu_name,
        cpu_logical_cores=cpu_logical_cores,
        ram_mb=ram_mb,
    )
    if not nvml.available:
        info.notices.append(nvml.notice or "NVML unavailable; GPU telemetry not measured")
        return info
    nvml_device = open_nvml_device(device, nvml=nvml, identity=identity)
    if nvml_device is None:
        info.notices.append(
            f"NVML could not find torch's cuda:{torch_index} by UUID or PCI bus id; GPU telemetry not measured"
        )
        return info
    info.nvml_index = nvml_device.nvml_index
    info.device_name = nvml_device.name() or identity.name
    info.uuid = nvml_device.uuid() or identity.uuid
    info.driver_version = nvml.query("nvmlSystemGetDriverVersion")
    info.cuda_driver_version = _cuda_version_text(nvml.query("nvmlSystemGetCudaDriverVersion"))
    info.power_limit_w = nvml_device.power_limit_w()
    info.sm_clock_mhz = nvml_device.sm_clock_mhz()
    info.max_sm_clock_mhz = nvml_device.max_sm_clock_mhz()
    info.temperature_c = nvml_device.temperature_c()
    info.throttle_reasons = nvml_device.throttle_reasons()
    info.energy_counter_available = nvml_device.energy_mj() is not None
    unread = [
        name
        for name in ("driver_version", "power_limit_w", "sm_clock_mhz", "temperature_c", "throttle_reasons")
        if getattr(info, name) is None
    ]
    if not info.energy_counter_available:
        unread.append("energy counter")
    if unread:
        info.notices.append("NVML could not read: " + ", ".join(unread))
    return info


# --------------------------------------------------------------------------------------------------- burn-in


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _relative_spread(values: list[float]) -> float:
    ordered = sorted(values)
    median = ordered[len(ordered) // 2]
    return (ordered[-1] - ordered[0]) / median if median > 0 else float("inf")


def _has_settled(times_ms: list[float], sm_clocks_mhz: list[float | None], window: int, tolerance: float) -> bool:
    """True when the last ``window`` iteration times, and SM clocks where NVML reads them, agree within tolerance."""
    if len(times_ms) < window or _relative_spread(times_ms[-window:]) > tolerance:
        return False
    recent_clocks = [clock for clock in sm_clocks_mhz[-window:] if clock is not None]
    if len(recent_clocks) < window:
        return True  # the clock is not readable here: judge by time alone
    return _relative_spread(recent_clocks) <= tolerance


def burn_in(
    device: torch.device,
    *,
    max_seconds: float = 30.0,
    matrix_size: int = 4096,
    tolerance: float = 0.02,
    window: int = 5,
    min_seconds: float = 2.0,
    clock: Callable[[], float] = time.perf_counter,
    sampler: Callable[[], DeviceSample] | None = None,
) -> WarmupStats:
    """Multiply matrices until the device has settled, then report how it settled.

    An iteration is a block of matmuls between two device synchronisations. The burn-in stops once it has run
    ``min_seconds`` and the last ``window`` iteration times and SM clocks each lie within ``tolerance`` (relative
    spread, max minus min over the median) — or after ``max_seconds`` (then ``stabilised`` is False). On the CPU
    it is capped at a second and a small matrix, and judged by time alone. ``clock`` (seconds) and
    ``sampler`` are injectable for tests.
    """
    if device.type != "cuda":
        max_seconds = min(max_seconds, _CPU_BURN_IN_MAX_SECONDS)
        matrix_size = min(matrix_size, _CPU_BURN_IN_MATRIX_SIZE)
    min_seconds = min(min_seconds, max_seconds)
    sampler = sampler or device_sampler(device)
    generator = torch.Generator(device=device).manual_seed(0)
    left = torch.randn(matrix_size, matrix_size, device=device, generator=generator)
    right = torch.randn(matrix_size, matrix_size, device=device, generator=generator)
    product = torch.empty_like(left)

    times_ms: list[float] = []
    sm_clocks_mhz: list[float | None] = []
    peak_clock_mhz: float | None = None
    sample = DeviceSample()
    stabilised = False
    _synchronize(device)
    start_s = clock()
    while True:
        begin_s = clock()
        for _ in range(_BURN_IN_MATMULS_PER_ITERATION):
            torch.mm(left, right, out=product)
        _synchronize(device)  # the iteration's kernels must have finished before its time is read
        end_s = clock()
        times_ms.append((end_s - begin_s) * 1e3)
        sample = sampler()
        sm_clocks_mhz.append(sample.sm_clock_mhz)
        if sample.sm_clock_mhz is not None:
            peak_clock_mhz = max(peak_clock_mhz or 0.0, sample.sm_clock_mhz)
        elapsed_s = end_s - start_s
        if elapsed_s >= min_seconds and _has_settled(times_ms, sm_clocks_mhz, window, tolerance):
            stabilised = True
            break
        if elapsed_s >= max_seconds:
            break

    final_window_ms = times_ms[-window:]
    mean_time_ms = sum(final_window_ms) / len(final_window_ms)
    flops_per_iteration = 2.0 * matrix_size**3 * _BURN_IN_MATMULS_PER_ITERATION
    return WarmupStats(
        epochs=len(times_ms),
        mean_time_ms=mean_time_ms,
        final_temperature_celsius=sample.temperature_c,
        final_sm_clock_mhz=sample.sm_clock_mhz,
        peak_sm_clock_mhz=peak_clock_mhz,
        stabilised=stabilised,
        seconds=elapsed_s,
        matrix_size=matrix_size,
        matmuls_per_iteration=_BURN_IN_MATMULS_PER_ITERATION,
        achieved_tflops=flops_per_iteration / (mean_time_ms / 1e3) / 1e12 if mean_time_ms > 0 else 0.0,
    )


# --------------------------------------------------------------------------------------------------- thermal watch

NOT_MEASURED = "not measured"


def temperature_status(temperature_c: float | None, cfg: HardwareConfig) -> str:
    """``ok``, ``warm`` (≥ warn), ``hot`` (≥ throttle) or ``stop`` (≥ stop) from the configured °C thresholds.

    ``stop`` means: stop benchmarking this model. ``not measured`` when the temperature is unknown.
    """
    if temperature_c is None:
        return NOT_MEASURED
    if temperature_c >= cfg.temperature_stop_c:
        return "stop"
    if temperature_c >= cfg.temperature_throttle_c:
        return "hot"
    if temperature_c >= cfg.temperature_warn_c:
        return "warm"
    return "ok"


def throttle_verdict(
    sm_clock_mhz: float | None, reference_sm_clock_mhz: float | None, reasons: list[str] | None
) -> tuple[bool | None, str | None]:
    """Whether an epoch was throttled, and why: a thermal/power reason, or the SM clock under 75% of reference.

    Returns (None, None) when neither the clock nor the reasons could be read.
    """
    causes = [reason for reason in reasons or () if reason in THERMAL_POWER_REASONS]
    if (
        sm_clock_mhz is not None
        and reference_sm_clock_mhz
        and sm_clock_mhz < THROTTLED_CLOCK_FRACTION * reference_sm_clock_mhz
    ):
        causes.append(
            f"SM clock {sm_clock_mhz:.0f} MHz < {THROTTLED_CLOCK_FRACTION:.0%} of {reference_sm_clock_mhz:.0f} MHz"
        )
    if causes:
        return True, "; ".join(causes)
    if sm_clock_mhz is None and reasons is None:
        return None, None
    return False, None


@dataclass(frozen=True)
class EpochDeviceStats:
    """The device during one measured epoch; every field None (status ``not measured``) on the CPU.

    Temperature, clock, power and throttle reasons are read at the epoch's end, right after the closing
    synchronisation, while clocks still reflect the load. ``energy_j`` is the NVML energy counter's increase
    over the epoch and ``mean_power_w`` that energy over the epoch's wall time.
    """

    temperature_c: float | None
    temperature_status: str
    sm_clock_mhz: float | None
    power_w: float | None
    mean_power_w: float | None
    throttle_reasons: list[str] | None
    energy_j: float | None
    throttled: bool | None
    throttle_cause: str | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class DeviceMonitor:
    """Per-epoch watch of temperature, SM clock, power, throttling and energy.

    ``reference_sm_clock_mhz`` is the sustained maximum the throttle flag compares against: the burn-in's peak
    clock, or the card's maximum SM clock when there was no burn-in. ``sampler`` (the full reading at an epoch's
    end), ``energy_reader`` (the energy counter in mJ at an epoch's start; by default taken from ``sampler``'s
    reading when only ``sampler`` is given) and ``clock`` (seconds) are injectable for tests; by default the device
    is read through NVML.
    """

    def __init__(
        self,
        device: torch.device,
        cfg: HardwareConfig,
        *,
        reference_sm_clock_mhz: float | None = None,
        sampler: Callable[[], DeviceSample] | None = None,
        energy_reader: Callable[[], int | None] | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.cfg = cfg
        self.reference_sm_clock_mhz = reference_sm_clock_mhz
        if sampler is None:
            nvml_device = open_nvml_device(device)
            sampler = nvml_device.sample if nvml_device is not None else _empty_sample
            if energy_reader is None:
                energy_reader = nvml_device.energy_mj if nvml_device is not None else _no_energy_counter
        self._sampler = sampler
        # The epoch's start needs the energy counter only: one NVML query instead of the full sample's six.
        self._read_energy_mj = energy_reader or (lambda: sampler().energy_mj)
        self._clock = clock
        self._start_energy_mj: int | None = None
        self._start_s: float | None = None

    def start_epoch(self) -> None:
        """Mark the start of an epoch (reads the energy counter only)."""
        self._start_energy_mj = self._read_energy_mj()
        self._start_s = self._clock()

    def end_epoch(self) -> EpochDeviceStats:
        """Read the device at the end of the epoch started by :meth:`start_epoch`."""
        if self._start_s is None:
            raise RuntimeError("DeviceMonitor.end_epoch called without start_epoch")
        end_s = self._clock()
        sample = self._sampler()
        energy_j = None
        if sample.energy_mj is not None and self._start_energy_mj is not None:
            energy_j = (sample.energy_mj - self._start_energy_mj) / 1000.0
        seconds = end_s - self._start_s
        mean_power_w = energy_j / seconds if energy_j is not None and seconds > 0 else None
        reasons = None if sample.throttle_reasons is None else list(sample.throttle_reasons)
        throttled, cause = throttle_verdict(sample.sm_clock_mhz, self.reference_sm_clock_mhz, reasons)
        self._start_s = None
        return EpochDeviceStats(
            temperature_c=sample.temperature_c,
            temperature_status=temperature_status(sample.temperature_c, self.cfg),
            sm_clock_mhz=sample.sm_clock_mhz,
            power_w=sample.power_w,
            mean_power_w=mean_power_w,
            throttle_reasons=reasons,
            energy_j=energy_j,
            throttled=throttled,
            throttle_cause=cause,
        )
