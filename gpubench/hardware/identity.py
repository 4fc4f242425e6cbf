"""Torch's CUDA device found in NVML, its identity from torch, and readers of its state (None, or reading
nothing, without NVML or the device)."""

from collections.abc import Callable
from dataclasses import dataclass

import torch

from gpubench.hardware.nvml import DeviceSample, MemoryReading, Nvml, NvmlDevice, default_nvml


@dataclass(frozen=True)
class CudaIdentity:
    """What torch knows about one of its CUDA devices; ``pci_location`` is (domain, bus, device)."""

    torch_index: int
    name: str
    total_memory_bytes: int
    compute_capability: str
    uuid: str | None
    pci_location: tuple[int, int, int] | None


def cuda_identity(torch_index: int) -> CudaIdentity:
    """Torch's properties of CUDA device ``torch_index`` (an index under CUDA_VISIBLE_DEVICES)."""
    props = torch.cuda.get_device_properties(torch_index)
    uuid = getattr(props, "uuid", None)
    pci_location = None
    # ROCm builds may lack the PCI location.
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
    return uuid.strip().lower().removeprefix("gpu-") if uuid else None


def parse_pci_bus_id(bus_id: str | None) -> tuple[int, int, int] | None:
    """(domain, bus, device) of a PCI bus id such as "00000000:19:00.0"; None when unparseable."""
    if not bus_id:
        return None
    try:
        domain, bus, device_function = bus_id.strip().split(":")
        return int(domain, 16), int(bus, 16), int(device_function.split(".")[0], 16)
    except ValueError:
        return None


def nvml_index_for(torch_index: int, *, nvml: Nvml | None = None, identity: CudaIdentity | None = None) -> int | None:
    """NVML's index of torch's CUDA device ``torch_index``, or None: matched by UUID, then PCI location, never by
    position (CUDA_VISIBLE_DEVICES reorders torch's devices, not NVML's)."""
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
    """The NVML view of a torch CUDA device, or None (the CPU, no NVML, not found)."""
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


def device_sampler(
    device: torch.device, *, nvml: Nvml | None = None, identity: CudaIdentity | None = None
) -> Callable[[], DeviceSample]:
    """A function reading the device's state (all None on the CPU or without NVML)."""
    nvml_device = open_nvml_device(device, nvml=nvml, identity=identity)
    return nvml_device.sample if nvml_device is not None else DeviceSample


def memory_reader(
    device: torch.device, *, nvml: Nvml | None = None, identity: CudaIdentity | None = None
) -> Callable[[], MemoryReading] | None:
    """A function reading device-used and this process's memory; None when NVML cannot."""
    nvml_device = open_nvml_device(device, nvml=nvml, identity=identity)
    return nvml_device.memory_reading if nvml_device is not None else None
