"""What the benchmark runs on: the device from torch and NVML, the host's processor and memory, the VRAM budget.
What NVML cannot read stays None, with a notice."""

import os
import platform
from dataclasses import asdict, replace

import torch

from gpubench.hardware.identity import CudaIdentity, cuda_identity, open_nvml_device
from gpubench.hardware.nvml import Nvml, default_nvml
from gpubench.hardware.vram import VramBudget
from gpubench.results import HardwareReport
from gpubench.results.units import BYTES_PER_MB


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
    # 12040 is CUDA 12.4.
    if not version:
        return None
    return f"{version // 1000}.{(version % 1000) // 10}"


def probe(
    device: torch.device,
    vram_budget: VramBudget | None = None,
    *,
    nvml: Nvml | None = None,
    identity: CudaIdentity | None = None,
) -> HardwareReport:
    """``device`` from torch and NVML with ``vram_budget``'s fields; on the CPU the processor. ``nvml`` and
    ``identity`` replace NVML and torch's device properties in tests."""
    cpu_name = _cpu_name()
    host = {"cpu_name": cpu_name, "cpu_logical_cores": os.cpu_count(), "ram_mb": _ram_mb()}
    if device.type != "cuda":
        return HardwareReport(measured_on="cpu", device_name=cpu_name, **host)

    torch_index = device.index if device.index is not None else 0
    identity = identity or cuda_identity(torch_index)
    nvml = nvml or default_nvml()
    from_torch = HardwareReport(
        measured_on="cuda",
        device_name=identity.name,
        total_vram_mb=identity.total_memory_bytes / BYTES_PER_MB,
        cuda_version=torch.version.cuda,
        compute_capability=identity.compute_capability,
        uuid=identity.uuid,
        torch_index=torch_index,
        nvml_available=nvml.available,
        **host,
        **(asdict(vram_budget) if vram_budget is not None else {}),
    )
    if not nvml.available:
        return replace(from_torch, notices=[nvml.notice or "NVML unavailable; GPU telemetry not measured"])
    nvml_device = open_nvml_device(device, nvml=nvml, identity=identity)
    if nvml_device is None:
        return replace(
            from_torch,
            notices=[
                f"NVML could not find torch's cuda:{torch_index} by UUID or PCI bus id; GPU telemetry not measured"
            ],
        )
    read = replace(
        from_torch,
        nvml_index=nvml_device.nvml_index,
        device_name=nvml_device.name() or identity.name,
        uuid=nvml_device.uuid() or identity.uuid,
        driver_version=nvml.query("nvmlSystemGetDriverVersion"),
        cuda_driver_version=_cuda_version_text(nvml.query("nvmlSystemGetCudaDriverVersion")),
        power_limit_w=nvml_device.power_limit_w(),
        sm_clock_mhz=nvml_device.sm_clock_mhz(),
        max_sm_clock_mhz=nvml_device.max_sm_clock_mhz(),
        temperature_c=nvml_device.temperature_c(),
        throttle_reasons=nvml_device.throttle_reasons(),
        energy_counter_available=nvml_device.energy_mj() is not None,
    )
    unread = [
        name
        for name in ("driver_version", "power_limit_w", "sm_clock_mhz", "temperature_c", "throttle_reasons")
        if getattr(read, name) is None
    ]
    if not read.energy_counter_available:
        unread.append("energy counter")
    return replace(read, notices=["NVML could not read: " + ", ".join(unread)] if unread else [])
