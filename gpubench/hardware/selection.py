"""Which device to benchmark on, and how to wait for it."""

from collections.abc import Callable

import torch

from gpubench.errors import ConfigError
from gpubench.hardware.config import HardwareConfig

CPU_NOTICE = "no CUDA device found; benchmarking on the CPU"


def resolve_device(hw: HardwareConfig, *, cuda_available: bool | None = None) -> tuple[torch.device, str | None]:
    """The device, and a notice when the choice may surprise: ``auto`` is ``cuda:0`` or the CPU; a catalog card
    needs CUDA (it caps the allocator there). ``cuda_available`` overrides torch's in tests."""
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


def visible_gpu_count() -> int:
    """The CUDA GPUs this process can see (``CUDA_VISIBLE_DEVICES`` applied); 0 without CUDA."""
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def synchronizer(device: torch.device) -> Callable[[], None]:
    """A function that waits until ``device`` has finished all queued work (a no-op on the CPU)."""
    return (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None)
