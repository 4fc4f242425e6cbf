"""The VRAM a benchmark may use: the emulated card's memory less what the CUDA context holds, and the allocator cap.

``hardware.vram_limit_gb`` emulates a smaller card on a larger one by capping torch's caching allocator. A real card
of that size also loses the memory the process holds outside the allocator (the CUDA context, loaded kernels,
library handles), so that overhead is measured and subtracted before the cap is set. MB are MiB, GB GiB.
"""

import os
from dataclasses import dataclass

import torch

from gpubench.errors import ConfigError
from gpubench.hardware.identity import open_nvml_device
from gpubench.units import BYTES_PER_MB, MB_PER_GB

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
    limit_mb = total_mb if limit_gb is None else limit_gb * MB_PER_GB
    overhead_mb, source = _measure_non_allocator_overhead(device)
    fraction = 1.0 if limit_gb is None else allocator_fraction(limit_mb, overhead_mb, total_mb)
    torch.cuda.set_per_process_memory_fraction(fraction, device)
    return VramBudget(
        vram_limit_mb=limit_mb,
        non_allocator_overhead_mb=overhead_mb,
        usable_vram_mb=limit_mb - overhead_mb,
        overhead_source=source,
    )
