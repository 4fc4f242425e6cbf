"""The VRAM a benchmark may use: the emulated card's memory less what the CUDA context holds, and the allocator cap
that emulates a smaller card on a larger one. MB are MiB, GB GiB."""

import os
from dataclasses import dataclass

import torch

from gpubench.errors import ConfigError
from gpubench.hardware.identity import open_nvml_device
from gpubench.results.units import BYTES_PER_MB, MB_PER_GB

_CONTEXT_MATMUL_SIZE = 256


@dataclass(frozen=True)
class VramBudget:
    """The emulated card's memory, what is held outside torch's allocator (a real card loses it too) and the rest
    (the allocator's cap), in MB; ``overhead_source`` ``device_used`` also counts other processes."""

    vram_limit_mb: float
    non_allocator_overhead_mb: float
    usable_vram_mb: float
    overhead_source: str


def non_allocator_overhead_mb(
    reserved_bytes: int, process_used_mb: float | None, free_bytes: int, total_bytes: int
) -> tuple[float, str]:
    """MB held outside torch's allocator (NVML's process or device memory less ``reserved_bytes``), its source."""
    if process_used_mb is not None:
        used_mb, source = process_used_mb, "nvml_process"
    else:
        used_mb, source = (total_bytes - free_bytes) / BYTES_PER_MB, "device_used"
    return max(0.0, used_mb - reserved_bytes / BYTES_PER_MB), source


def allocator_fraction(limit_mb: float, overhead_mb: float, total_mb: float) -> float:
    """The fraction of the card to cap the allocator at; ConfigError when the limit cannot be met."""
    if limit_mb > total_mb:
        raise ConfigError(
            f"`hardware.vram_limit_gb` = {limit_mb / MB_PER_GB!r} is not valid: it must be at most "
            f"this GPU's memory ({total_mb / MB_PER_GB:.1f} GB); a VRAM cap can only emulate a "
            "smaller card."
        )
    if overhead_mb >= limit_mb:
        raise ConfigError(
            f"`hardware.vram_limit_gb` = {limit_mb / MB_PER_GB!r} is not valid: the CUDA context "
            f"and libraries already hold {overhead_mb:,.0f} MB outside PyTorch's allocator, leaving nothing for "
            "training."
        )
    return (limit_mb - overhead_mb) / total_mb


def _measure_non_allocator_overhead(device: torch.device) -> tuple[float, str]:
    """The memory held outside torch's allocator (MB), after a first matmul has created the context and cuBLAS."""
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
    """Cap the allocator so that it and the overhead fit in ``limit_gb`` (None: the whole card); the budget, None
    on the CPU. Kernels loaded later add to the overhead uncapped."""
    if device.type != "cuda":
        return None
    total_mb = torch.cuda.get_device_properties(device).total_memory / BYTES_PER_MB
    limit_mb = total_mb if limit_gb is None else limit_gb * MB_PER_GB
    overhead_mb, source = _measure_non_allocator_overhead(device)
    fraction = 1.0 if limit_gb is None else allocator_fraction(limit_mb, overhead_mb, total_mb)
    torch.cuda.set_per_process_memory_fraction(fraction, device)
    return VramBudget(limit_mb, overhead_mb, limit_mb - overhead_mb, source)
