"""Memory profiler on a real CUDA GPU: both NVML samplers (thread and child process) see a known allocation; a leak
is flagged, a clean loop not."""

import os
import time

import numpy as np
import pytest
import torch
from torch import nn

from gpubench.hardware.identity import memory_reader, open_nvml_device
from gpubench.measure.memory import MemoryProfiler, MemorySampler, ProcessMemorySampler

pytestmark = pytest.mark.gpu

DEVICE = torch.device("cuda", 0)
GIB = 1024**3


def wait_for_samples(sampler: MemorySampler | ProcessMemorySampler, count: int, timeout_s: float = 10.0) -> int:
    """Block until ``count`` more samples exist; return the index of the first of them."""
    first = len(sampler)
    deadline = time.perf_counter() + timeout_s
    while len(sampler) < first + count:
        assert time.perf_counter() < deadline, "sampler stalled"
        time.sleep(0.002)
    return first


def nvml_sampler(kind: str) -> MemorySampler | ProcessMemorySampler:
    """A sampler of this process's memory on DEVICE every 5 ms: on a thread, or in a child process."""
    if kind == "thread":
        read = memory_reader(DEVICE)
        assert read is not None, "NVML unavailable on the GPU machine"
        return MemorySampler(read, interval_ms=5.0)
    nvml_device = open_nvml_device(DEVICE)
    assert nvml_device is not None, "NVML unavailable on the GPU machine"
    return ProcessMemorySampler(nvml_device.nvml_index, os.getpid(), interval_ms=5.0)


@pytest.mark.parametrize("kind", ["thread", "process"])
def test_sampler_sees_a_2_gib_allocation_and_its_release(kind: str) -> None:
    torch.zeros(1, device=DEVICE)  # create the CUDA context first: it is not part of the allocation measured
    torch.cuda.synchronize()
    torch.cuda.empty_cache()

    with nvml_sampler(kind) as sampler:
        before = wait_for_samples(sampler, 10)
        block = torch.ones(2 * GIB // 4, device=DEVICE)  # 2 GiB of float32, written so the pages are committed
        torch.cuda.synchronize()
        time.sleep(0.02)  # a read in flight when the allocation landed may still show the old figure
        during = wait_for_samples(sampler, 10)
        del block
        torch.cuda.empty_cache()  # hands the 2 GiB back to the driver, so NVML sees it go
        torch.cuda.synchronize()
        time.sleep(0.02)
        after = wait_for_samples(sampler, 10)
    timeline = sampler.timeline()

    baseline_mb = np.median(timeline.device_used_mb[before : before + 10])
    allocated_mb = np.median(timeline.device_used_mb[during : during + 10])
    released_mb = np.median(timeline.device_used_mb[after : after + 10])
    assert allocated_mb - baseline_mb == pytest.approx(2048.0, rel=0.05)
    assert abs(released_mb - baseline_mb) < 64.0
    process_mb = timeline.process_used_mb
    if not np.all(np.isnan(process_mb)):  # NVML may not see this process inside a container
        rise_mb = np.nanmedian(process_mb[during : during + 10]) - np.nanmedian(process_mb[before : before + 10])
        assert rise_mb == pytest.approx(2048.0, rel=0.05)
    # Both samplers' times are on this process's perf_counter scale, one sample per ~5 ms.
    assert np.all(np.diff(timeline.times_s) > 0) and timeline.times_s[-1] < time.perf_counter()
    assert np.median(np.diff(timeline.times_s)) == pytest.approx(0.005, rel=0.2)


def run_epochs(profiler: MemoryProfiler, epochs: int, leak: list[torch.Tensor] | None) -> None:
    """Adam steps of a small MLP; when ``leak`` is a list, 16 MiB stays referenced from it after each epoch."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, 1)).to(DEVICE)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    inputs = torch.randn(256, 512, device=DEVICE)
    targets = torch.randn(256, 1, device=DEVICE)
    with profiler:
        for epoch in range(1, epochs + 1):
            profiler.start_epoch()
            for _ in range(20):
                optimizer.zero_grad(set_to_none=True)
                loss = nn.functional.mse_loss(model(inputs), targets)
                loss.backward()
                optimizer.step()
            if leak is not None:
                leak.append(torch.empty(4 * 1024**2, device=DEVICE))  # 16 MiB of float32
            torch.cuda.synchronize()
            profiler.end_epoch("measured", epoch)


def test_an_injected_leak_is_flagged() -> None:
    leak: list[torch.Tensor] = []
    profiler = MemoryProfiler(DEVICE, leak_threshold_mb_per_epoch=5.0)
    run_epochs(profiler, epochs=8, leak=leak)
    profile = profiler.result()
    assert profile.leak is not None
    assert profile.leak.flagged
    assert profile.leak.slope_mb_per_epoch == pytest.approx(16.0, abs=0.5)
    leak.clear()
    torch.cuda.empty_cache()


def test_a_clean_loop_is_not_flagged_and_the_three_peaks_are_ordered() -> None:
    torch.cuda.empty_cache()
    profiler = MemoryProfiler(DEVICE, sample_interval_ms=5.0)
    run_epochs(profiler, epochs=8, leak=None)
    profile = profiler.result()

    assert profile.measured
    assert profile.leak is not None and not profile.leak.flagged
    assert abs(profile.leak.slope_mb_per_epoch) < 1.0
    assert profile.peak_allocated_mb is not None and profile.peak_reserved_mb is not None
    assert 0 < profile.peak_allocated_mb <= profile.peak_reserved_mb
    # NVML counts the CUDA context and every cached block on top of what torch has reserved.
    assert profile.peak_nvml_device_used_mb is not None
    assert profile.peak_nvml_device_used_mb >= profile.peak_reserved_mb
    assert profile.nvml_samples > 0
    assert profile.num_alloc_retries == 0 and profile.num_ooms == 0
    assert len(profile.allocated_mb_per_epoch) == 8
