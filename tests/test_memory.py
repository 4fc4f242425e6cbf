"""Memory profiler on the CPU: leak slope against independent formulas, the sampler thread, NVML reads, profiles."""

import os
import threading
import time

import numpy as np
import pytest
import torch
from fake_nvml import FakeGpu, FakeNvml, FakeProcess
from scipy import stats

from gpubench.hardware import (
    BYTES_PER_MB,
    PROCESS_MEMORY_EVERY_N_READINGS,
    CudaIdentity,
    MemoryReading,
    Nvml,
    memory_reader,
)
from gpubench.memory import (
    PEAK_DEFINITIONS,
    AllocatorSnapshot,
    MemoryProfiler,
    MemorySampler,
    TorchCudaAllocator,
    leak_estimate,
    next_deadline_s,
)

MB = BYTES_PER_MB


# --------------------------------------------------------------------------------------------------- leak slope


def independent_slope_interval(y: np.ndarray, confidence_level: float) -> tuple[float, float, float]:
    """OLS slope and its t-interval from textbook formulas (polyfit + residual variance), not linregress."""
    x = np.arange(y.size, dtype=float)
    slope, intercept = np.polyfit(x, y, 1)
    residuals = y - (intercept + slope * x)
    standard_error = np.sqrt(residuals @ residuals / (y.size - 2) / np.sum((x - x.mean()) ** 2))
    half_width = stats.t.ppf(0.5 + confidence_level / 2, y.size - 2) * standard_error
    return slope, slope - half_width, slope + half_width


def test_a_synthetic_leak_is_flagged_with_the_textbook_interval() -> None:
    rng = np.random.default_rng(0)
    allocated_mb = 1000.0 + 8.0 * np.arange(10) + rng.normal(0.0, 1.0, 10)

    estimate = leak_estimate(allocated_mb, confidence_level=0.95, threshold_mb_per_epoch=5.0)

    slope, low, high = independent_slope_interval(allocated_mb, 0.95)
    assert estimate.slope_mb_per_epoch == pytest.approx(slope, rel=1e-10)
    assert estimate.interval_mb_per_epoch == pytest.approx((low, high), rel=1e-10)
    fit = stats.linregress(np.arange(10), allocated_mb)
    half_width = stats.t.ppf(0.975, 8) * fit.stderr
    assert estimate.interval_mb_per_epoch == pytest.approx((fit.slope - half_width, fit.slope + half_width), rel=1e-10)
    assert 7.0 < estimate.slope_mb_per_epoch < 9.0
    assert estimate.flagged and estimate.epochs == 10


def test_a_flat_series_is_not_a_leak() -> None:
    # What a clean loop gives on the GPU: the same bytes allocated at every epoch end (linregress says NaN here).
    estimate = leak_estimate([512.0] * 8)
    assert estimate.slope_mb_per_epoch == 0.0
    assert estimate.interval_mb_per_epoch == (0.0, 0.0)
    assert not estimate.flagged


def test_a_noisy_flat_series_is_not_a_leak() -> None:
    rng = np.random.default_rng(1)
    allocated_mb = 512.0 + rng.normal(0.0, 3.0, 12)
    estimate = leak_estimate(allocated_mb)
    _, low, high = independent_slope_interval(allocated_mb, 0.95)
    assert estimate.interval_mb_per_epoch == pytest.approx((low, high), rel=1e-10)
    assert not estimate.flagged


def test_a_real_but_small_growth_is_below_the_threshold() -> None:
    rng = np.random.default_rng(2)
    allocated_mb = 512.0 + 2.0 * np.arange(10) + rng.normal(0.0, 0.1, 10)
    estimate = leak_estimate(allocated_mb, threshold_mb_per_epoch=5.0)
    assert estimate.interval_mb_per_epoch[0] > 0  # the growth is certain ...
    assert not estimate.flagged  # ... but 2 MB/epoch is under the 5 MB/epoch threshold


def test_a_steep_slope_drowned_in_noise_is_not_flagged() -> None:
    # Residuals orthogonal to the epoch number: the slope is exactly 10, but the interval spans zero.
    allocated_mb = 512.0 + 10.0 * np.arange(5) + np.array([-200.0, 200.0, 0.0, 200.0, -200.0])
    estimate = leak_estimate(allocated_mb)
    assert estimate.slope_mb_per_epoch == pytest.approx(10.0)
    low, high = estimate.interval_mb_per_epoch
    assert low < 0 < high
    assert not estimate.flagged


def test_higher_confidence_widens_the_interval() -> None:
    allocated_mb = 512.0 + 6.0 * np.arange(6) + np.array([1.0, -2.0, 0.5, 1.5, -1.0, 0.0])
    narrow = leak_estimate(allocated_mb, confidence_level=0.90).interval_mb_per_epoch
    wide = leak_estimate(allocated_mb, confidence_level=0.99).interval_mb_per_epoch
    assert wide[0] < narrow[0] and narrow[1] < wide[1]
    assert narrow == pytest.approx(independent_slope_interval(allocated_mb, 0.90)[1:], rel=1e-10)


def test_an_exactly_linear_leak_has_a_zero_width_interval_and_is_flagged() -> None:
    estimate = leak_estimate([512.0 + 16.0 * epoch for epoch in range(6)])
    assert estimate.slope_mb_per_epoch == pytest.approx(16.0)
    assert estimate.interval_mb_per_epoch == pytest.approx((16.0, 16.0))
    assert estimate.flagged


def test_leak_slope_needs_three_epochs() -> None:
    with pytest.raises(ValueError, match="at least 3 epochs, got 2"):
        leak_estimate([1.0, 2.0])


# --------------------------------------------------------------------------------------------------- sampler


class SettableReading:
    """A read function returning whatever the test last set, counting calls."""

    def __init__(self, device_used_mb: float | None = 1000.0, process_used_mb: float | None = 800.0) -> None:
        self.reading = MemoryReading(device_used_mb, process_used_mb)
        self.calls = 0

    def __call__(self) -> MemoryReading:
        self.calls += 1
        return self.reading


def wait_for_samples(sampler: MemorySampler, count: int, timeout_s: float = 5.0) -> None:
    """Block until the sampler has taken ``count`` more samples (no sleeps of guessed length)."""
    target = len(sampler) + count
    deadline = time.perf_counter() + timeout_s
    while len(sampler) < target:
        assert time.perf_counter() < deadline, "sampler stalled"
        time.sleep(0.001)


def test_sampler_records_readings_on_its_own_thread_and_joins_on_exit() -> None:
    read = SettableReading()
    with MemorySampler(read, interval_ms=2.0) as sampler:
        thread = sampler._thread
        assert thread is not None and thread.daemon and thread is not threading.current_thread()
        wait_for_samples(sampler, 5)
        read.reading = MemoryReading(3000.0, None)
        wait_for_samples(sampler, 5)
    assert not thread.is_alive() and not sampler.running

    timeline = sampler.timeline()
    n = len(sampler)
    assert timeline.times_s.shape == timeline.device_used_mb.shape == timeline.process_used_mb.shape == (n,)
    assert np.all(np.diff(timeline.times_s) > 0)
    assert set(timeline.device_used_mb) == {1000.0, 3000.0}
    assert np.isnan(timeline.process_used_mb[-1])  # None becomes NaN in the arrays
    assert sampler.peaks_mb() == (3000.0, 800.0)  # ... and is skipped by the peaks
    assert read.calls == n


def test_sampler_keeps_its_interval() -> None:
    with MemorySampler(SettableReading(), interval_ms=5.0) as sampler:
        wait_for_samples(sampler, 12)
    gaps_ms = np.diff(sampler.timeline().times_s) * 1e3
    # Scheduled on a fixed grid: never much faster than asked (a late sample can make the next gap short).
    assert np.median(gaps_ms) >= 4.0


def test_sampler_peaks_since_an_index() -> None:
    read = SettableReading(device_used_mb=5000.0)
    with MemorySampler(read, interval_ms=1.0) as sampler:
        wait_for_samples(sampler, 3)
        read.reading = MemoryReading(1000.0, None)
        time.sleep(0.005)  # a sample already in flight may still carry the old reading
        mark = len(sampler)
        wait_for_samples(sampler, 3)
    assert sampler.peaks_mb() == (5000.0, 800.0)
    assert sampler.peaks_mb(since=mark) == (1000.0, None)


def test_sampler_reraises_a_failed_read_on_stop() -> None:
    def broken() -> MemoryReading:
        raise OSError("device vanished")

    sampler = MemorySampler(broken, interval_ms=1.0)
    sampler.start()
    deadline = time.perf_counter() + 5.0
    while sampler.running:
        assert time.perf_counter() < deadline
        time.sleep(0.001)
    with pytest.raises(RuntimeError, match="read failed") as raised:
        sampler.stop()
    assert isinstance(raised.value.__cause__, OSError)


def test_sampler_refuses_a_second_start() -> None:
    with MemorySampler(SettableReading(), interval_ms=1.0) as sampler, pytest.raises(RuntimeError):
        sampler.start()


def test_next_deadline_stays_on_the_absolute_grid() -> None:
    assert next_deadline_s(1.0, 1.004, 0.01) == pytest.approx(1.01)  # on time: the next slot
    assert next_deadline_s(1.0, 1.0, 0.01) == pytest.approx(1.01)
    assert next_deadline_s(1.0, 1.0125, 0.01) == pytest.approx(1.02)  # one slot missed: skipped, not caught up
    assert next_deadline_s(1.0, 1.0575, 0.01) == pytest.approx(1.06)  # five missed
    assert next_deadline_s(1.0, 1.03, 0.01) == pytest.approx(1.04)  # landing exactly on a slot: the one after
    assert next_deadline_s(1.0, 1.03, 0.01) > 1.03


class FakeSamplerClock:
    """Simulated time for the sampler: each read costs ``read_cost_s``, each wait oversleeps by ``lateness_s``.

    ``wait`` asks the sampler to stop once ``samples`` waits have happened; it also records, at each wait, the
    sample count and the timeline's length, which must agree (a sample is published only once complete).
    """

    def __init__(self, sampler_read_cost_s: list[float], lateness_s: float) -> None:
        self.now_s = 100.0
        self.read_costs_s = list(sampler_read_cost_s)
        self.lateness_s = lateness_s
        self.waits_s: list[float] = []
        self.published: list[tuple[int, int]] = []
        self.sampler: MemorySampler | None = None

    def clock(self) -> float:
        return self.now_s

    def read(self) -> MemoryReading:
        self.now_s += self.read_costs_s[len(self.waits_s)]
        return MemoryReading(float(len(self.waits_s)), None)

    def wait(self, timeout_s: float) -> bool:
        assert self.sampler is not None
        self.published.append((len(self.sampler), self.sampler.timeline().times_s.size))
        self.waits_s.append(timeout_s)
        self.now_s += timeout_s + self.lateness_s
        return len(self.waits_s) == len(self.read_costs_s)


def test_sampler_reads_on_a_fixed_grid_without_drift_and_skips_missed_slots() -> None:
    # Reads cost 1 ms and every sleep ends 0.3 ms late; read 4 overruns by 2.5 slots.
    costs_s = [0.001] * 4 + [0.025] + [0.001] * 5
    fake = FakeSamplerClock(costs_s, lateness_s=0.0003)
    sampler = MemorySampler(fake.read, interval_ms=10.0, clock=fake.clock, wait=fake.wait)
    fake.sampler = sampler
    with sampler:
        pass  # the fake wait stops the thread after the last planned sample; stop() joins it
    timeline = sampler.timeline()

    # Sample 0 at start + 1 ms; sample k on slot k, plus the lateness and the read's cost. Read 4 starts on slot 4
    # and ends 25 ms later, so slots 5..6 are skipped and sample 5 is read on slot 7, not squeezed in behind it.
    slots = [0, 1, 2, 3, 4, 7, 8, 9, 10, 11]
    expected_s = [100.001] + [
        100.0 + 0.01 * slot + 0.0003 + cost for slot, cost in zip(slots[1:], costs_s[1:], strict=True)
    ]
    assert timeline.times_s == pytest.approx(expected_s, abs=1e-12)
    assert timeline.device_used_mb.tolist() == list(map(float, range(10)))
    assert np.all(np.isnan(timeline.process_used_mb))
    assert all(0.0 < wait_s <= 0.01 for wait_s in fake.waits_s)
    assert fake.published == [(n, n) for n in range(1, 11)]
    assert len(sampler) == 10 and sampler.peaks_mb() == (9.0, None)


# --------------------------------------------------------------------------------------------------- NVML reads


def h200_identity() -> CudaIdentity:
    return CudaIdentity(0, "NVIDIA H200", 140 * 1024**3, "9.0", None, (0, 0x19, 0))


def test_memory_reader_reads_device_and_this_process() -> None:
    gpu = FakeGpu(used_bytes=5000 * MB, processes=[FakeProcess(1, 999 * MB), FakeProcess(os.getpid(), 4200 * MB)])
    read = memory_reader(torch.device("cuda", 0), nvml=Nvml(FakeNvml([gpu])), identity=h200_identity())
    assert read is not None
    assert read() == MemoryReading(device_used_mb=5000.0, process_used_mb=4200.0)


def test_memory_reader_asks_for_this_process_on_one_reading_in_n() -> None:
    n = PROCESS_MEMORY_EVERY_N_READINGS
    gpu = FakeGpu(used_bytes=5000 * MB, processes=[FakeProcess(os.getpid(), 4200 * MB)])
    fake = FakeNvml([gpu])
    read = memory_reader(torch.device("cuda", 0), nvml=Nvml(fake), identity=h200_identity())
    assert read is not None
    fake.calls.clear()
    readings = [read() for _ in range(2 * n + 1)]
    assert [reading.device_used_mb for reading in readings] == [5000.0] * (2 * n + 1)
    assert [i for i, reading in enumerate(readings) if reading.process_used_mb is not None] == [0, n, 2 * n]
    assert fake.calls.count("nvmlDeviceGetComputeRunningProcesses") == 3
    assert fake.calls.count("nvmlDeviceGetMemoryInfo") == 2 * n + 1
    gpu.processes = [FakeProcess(1, 999 * MB)]  # e.g. a container: NVML lists host PIDs, not ours
    assert [read() for _ in range(n)][-1] == MemoryReading(device_used_mb=5000.0, process_used_mb=None)


def test_memory_reader_stops_asking_for_processes_once_unsupported() -> None:
    fake = FakeNvml([FakeGpu()], unsupported={"nvmlDeviceGetComputeRunningProcesses"})
    read = memory_reader(torch.device("cuda", 0), nvml=Nvml(fake), identity=h200_identity())
    assert read is not None and read().process_used_mb is None
    fake.unsupported.clear()
    fake.gpus[0].processes = [FakeProcess(os.getpid(), 100 * MB)]
    fake.calls.clear()
    assert all(read().process_used_mb is None for _ in range(3 * PROCESS_MEMORY_EVERY_N_READINGS))
    assert "nvmlDeviceGetComputeRunningProcesses" not in fake.calls


def test_memory_reader_is_none_without_nvml_or_on_cpu() -> None:
    broken = Nvml(FakeNvml([FakeGpu()], init_error=12))
    assert memory_reader(torch.device("cuda", 0), nvml=broken, identity=h200_identity()) is None
    assert memory_reader(torch.device("cpu")) is None


# --------------------------------------------------------------------------------------------------- profiler


def fake_cuda_memory_stats() -> dict:
    """torch's nested allocator statistics in their real shape, with a distinct value in every field."""
    values = iter(range(1, 1000))
    stats: dict = {
        name: {
            pool: {moment: next(values) * MB for moment in ("current", "peak", "allocated", "freed")}
            for pool in ("all", "small_pool", "large_pool")
        }
        for name in (
            "allocation",
            "segment",
            "active",
            "inactive_split",
            "allocated_bytes",
            "reserved_bytes",
            "active_bytes",
            "inactive_split_bytes",
            "requested_bytes",
        )
    }
    stats.update(num_alloc_retries=7, num_ooms=2, max_split_size=-1, num_sync_all_streams=0)
    return stats


def test_cuda_allocator_snapshot_equals_torch_getters_from_one_read(monkeypatch: pytest.MonkeyPatch) -> None:
    stats = fake_cuda_memory_stats()
    reads: list[object] = []

    def nested_stats(device: object = None) -> dict:
        reads.append(device)
        return stats

    # torch's getters (max_memory_allocated, ...) go through torch.cuda.memory.memory_stats_as_nested_dict too.
    monkeypatch.setattr(torch.cuda.memory, "memory_stats_as_nested_dict", nested_stats)
    monkeypatch.setattr(torch.cuda, "memory_stats_as_nested_dict", nested_stats)
    device = torch.device("cuda", 0)
    snapshot = TorchCudaAllocator(device).snapshot()
    assert len(reads) == 1
    flat = torch.cuda.memory_stats(device)
    assert snapshot == AllocatorSnapshot(
        peak_allocated_bytes=torch.cuda.max_memory_allocated(device),
        peak_reserved_bytes=torch.cuda.max_memory_reserved(device),
        allocated_bytes=torch.cuda.memory_allocated(device),
        inactive_split_peak_bytes=flat["inactive_split_bytes.all.peak"],
        num_alloc_retries=7,
        num_ooms=2,
    )
    assert len({snapshot.peak_allocated_bytes, snapshot.peak_reserved_bytes, snapshot.allocated_bytes}) == 3


def test_cuda_allocator_snapshot_is_zero_before_cuda_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "memory_stats_as_nested_dict", lambda device=None: {})
    assert TorchCudaAllocator(torch.device("cuda", 0)).snapshot() == AllocatorSnapshot(0, 0, 0, 0, 0, 0)


class FakeAllocator:
    """Models torch's caching allocator bookkeeping: peaks follow allocations and reset to the current values."""

    def __init__(self) -> None:
        self.allocated = self.reserved = 0
        self.peak_allocated = self.peak_reserved = 0
        self.inactive_split_peak = 0
        self.retries = self.ooms = 0
        self.resets = 0

    def allocate(self, nbytes: int) -> None:
        self.allocated += nbytes
        self.reserved = max(self.reserved, self.allocated)
        self.peak_allocated = max(self.peak_allocated, self.allocated)
        self.peak_reserved = max(self.peak_reserved, self.reserved)

    def free(self, nbytes: int) -> None:
        self.allocated -= nbytes

    def reset_peak(self) -> None:
        self.resets += 1
        self.peak_allocated, self.peak_reserved = self.allocated, self.reserved

    def snapshot(self) -> AllocatorSnapshot:
        return AllocatorSnapshot(
            self.peak_allocated, self.peak_reserved, self.allocated, self.inactive_split_peak, self.retries, self.ooms
        )


def test_profiler_records_each_epoch_and_flags_a_leak() -> None:
    allocator = FakeAllocator()
    allocator.allocate(500 * MB)  # weights and optimizer state
    with MemoryProfiler(torch.device("cpu"), allocator=allocator, reader=None) as profiler:
        for epoch in range(5):
            profiler.start_epoch()
            allocator.allocate(300 * MB + epoch * 100 * MB)  # activations, larger each epoch
            allocator.free(300 * MB + epoch * 100 * MB)
            allocator.allocate(8 * MB)  # leaked: kept alive past the epoch
            if epoch == 3:
                allocator.retries += 2
                allocator.inactive_split_peak = 64 * MB
            profiler.end_epoch()
    profile = profiler.result()

    assert profile.measured and allocator.resets == 5
    assert profile.allocated_mb_per_epoch == [508.0, 516.0, 524.0, 532.0, 540.0]
    # Each epoch's peak is its own (the reset forgets the previous epoch's): 500 + 8 e + 300 + 100 e.
    assert profile.peak_allocated_mb_per_epoch == [800.0, 908.0, 1016.0, 1124.0, 1232.0]
    assert profile.peak_allocated_mb == 1232.0
    assert profile.peak_reserved_mb == 1232.0
    assert profile.num_alloc_retries == 2 and profile.num_ooms == 0
    assert profile.peak_inactive_split_mb == 64.0
    assert profile.leak is not None and profile.leak.flagged
    assert profile.leak.slope_mb_per_epoch == pytest.approx(8.0)
    assert profile.peak_nvml_device_used_mb is None
    assert profile.notes == ["NVML unavailable: device and process memory not sampled"]
    report = profile.to_dict()
    assert report["leak"]["flagged"] is True
    assert set(PEAK_DEFINITIONS) <= set(report) and report["definitions"] == PEAK_DEFINITIONS


def test_profiler_takes_nvml_peaks_per_epoch_from_the_sampler() -> None:
    allocator = FakeAllocator()
    read = SettableReading(device_used_mb=1000.0, process_used_mb=900.0)
    with MemoryProfiler(torch.device("cpu"), sample_interval_ms=1.0, allocator=allocator, reader=read) as profiler:
        assert profiler.sampler is not None
        profiler.start_epoch()
        read.reading = MemoryReading(6000.0, 5800.0)
        wait_for_samples(profiler.sampler, 3)
        read.reading = MemoryReading(1000.0, 900.0)
        time.sleep(0.005)  # let a sample in flight land inside the first epoch
        first = profiler.end_epoch()
        profiler.start_epoch()
        wait_for_samples(profiler.sampler, 3)
        second = profiler.end_epoch()
    profile = profiler.result()

    assert first is not None and second is not None
    assert (first.peak_nvml_device_used_mb, first.peak_nvml_process_mb) == (6000.0, 5800.0)
    assert (second.peak_nvml_device_used_mb, second.peak_nvml_process_mb) == (1000.0, 900.0)
    assert (profile.peak_nvml_device_used_mb, profile.peak_nvml_process_mb) == (6000.0, 5800.0)
    assert profile.peak_nvml_device_used_mb_per_epoch == [6000.0, 1000.0]
    assert profile.nvml_samples >= 6
    assert profile.leak is None and profile.notes == ["leak slope needs at least 3 epochs"]
    assert not profiler.sampler.running


def test_profiler_on_cpu_measures_nothing() -> None:
    with MemoryProfiler(torch.device("cpu")) as profiler:
        profiler.start_epoch()
        assert profiler.end_epoch() is None
    profile = profiler.result()
    assert not profile.measured
    for name in ("peak_allocated_mb", "peak_reserved_mb", "peak_nvml_device_used_mb", "peak_nvml_process_mb", "leak"):
        assert getattr(profile, name) is None, name
    assert profile.to_dict()["notes"] == ["GPU memory not measured on the CPU"]


def test_profiler_needs_start_before_end() -> None:
    profiler = MemoryProfiler(torch.device("cpu"), allocator=FakeAllocator())
    with pytest.raises(RuntimeError, match="without start_epoch"):
        profiler.end_epoch()
