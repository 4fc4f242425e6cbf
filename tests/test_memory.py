"""Memory profiler on the CPU: leak slope against independent formulas, the thread and process samplers, NVML
reads, profiles."""

import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from fake_nvml import FakeGpu, FakeNvml, FakeProcess
from fake_sampler_readers import GOOD_READS_BEFORE_FAILURE, counting_device_mb
from hydra import compose, initialize_config_dir
from scipy import stats

import gpubench
from gpubench.config import register_configs, typed_config
from gpubench.errors import ConfigError
from gpubench.hardware import memory_sampler_process
from gpubench.hardware.identity import CudaIdentity, memory_reader
from gpubench.hardware.memory_sampler_process import RECORD, next_deadline_s, sample
from gpubench.hardware.nvml import PROCESS_MEMORY_EVERY_N_READINGS, MemoryReading, Nvml, NvmlDevice
from gpubench.measure import memory as memory_module
from gpubench.measure.config import MemoryConfig
from gpubench.measure.memory import (
    AllocatorSnapshot,
    MemoryProfiler,
    MemorySampler,
    ProcessMemorySampler,
    TorchCudaAllocator,
    leak_estimate,
)
from gpubench.results import PEAK_DEFINITIONS
from gpubench.results.units import BYTES_PER_MB

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


def wait_for_samples(sampler: MemorySampler | ProcessMemorySampler, count: int, timeout_s: float = 5.0) -> None:
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


# --------------------------------------------------------------------------------------------------- process sampler

TESTS_DIR = Path(__file__).resolve().parent
COUNTING = "fake_sampler_readers:counting"


@pytest.fixture
def sampler_files(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """The folder the process sampler's temporary files go to; the child can import the fake readers.

    The child is a fresh interpreter: it sees PYTHONPATH, not the sys.path pytest built for this process.
    """
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(TESTS_DIR), os.environ.get("PYTHONPATH")])))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def child_of(sampler: ProcessMemorySampler) -> subprocess.Popen[bytes]:
    assert sampler._process is not None, "the sampler has no child"
    return sampler._process


def process_gone(pid: int) -> bool:
    """True when no process ``pid`` runs (gone, or a zombie waiting for a reaper that is not this test)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def test_process_sampler_reads_the_fake_on_its_interval_on_this_process_clock(sampler_files: Path) -> None:
    sampler = ProcessMemorySampler(2, 4321, interval_ms=5.0, reader=COUNTING)
    before_start_s = time.perf_counter()
    with sampler:
        started_s = time.perf_counter()
        assert len(sampler) >= 1 and sampler.running  # start() returned only once sampling had begun
        time.sleep(0.5)
    stopped_s = time.perf_counter()
    timeline = sampler.timeline()
    n = len(sampler)

    # 100 slots of 5 ms in 0.5 s: a loaded 2-core CI machine may miss many, never add any (the grid is absolute).
    assert 25 <= n <= (stopped_s - before_start_s) / 0.005 + 1
    assert timeline.times_s.shape == timeline.device_used_mb.shape == timeline.process_used_mb.shape == (n,)
    # The child's perf_counter is this process's clock (CLOCK_MONOTONIC): its first sample lies inside start().
    assert before_start_s < timeline.times_s[0] < started_s
    assert np.all(np.diff(timeline.times_s) > 0) and timeline.times_s[-1] < stopped_s
    assert np.median(np.diff(timeline.times_s)) >= 0.004
    # The fake's sequence, in order, with NVML index 2 and pid 4321 passed through; None arrives as NaN.
    assert timeline.device_used_mb.tolist() == [counting_device_mb(i, 2) for i in range(n)]
    assert timeline.process_used_mb[0::2].tolist() == [4321.0] * len(range(0, n, 2))
    assert np.all(np.isnan(timeline.process_used_mb[1::2]))


def test_the_child_imports_this_gpubench_first_and_keeps_the_inherited_path(monkeypatch: pytest.MonkeyPatch) -> None:
    # From an uninstalled checkout run in another working directory, only PYTHONPATH leads the child to gpubench.
    package_parent = str(Path(gpubench.__file__).resolve().parents[1])
    monkeypatch.delenv("PYTHONPATH", raising=False)
    assert memory_module._child_environment()["PYTHONPATH"] == package_parent
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(["/a", "/b"]))
    environment = memory_module._child_environment()
    assert environment["PYTHONPATH"].split(os.pathsep) == [package_parent, "/a", "/b"]
    assert {k: v for k, v in environment.items() if k != "PYTHONPATH"} == {
        k: v for k, v in os.environ.items() if k != "PYTHONPATH"
    }


def test_process_sampler_reads_incrementally_and_peaks_equal_numpy_over_the_same_slice(sampler_files: Path) -> None:
    with ProcessMemorySampler(0, 7, interval_ms=2.0, reader=COUNTING) as sampler:
        wait_for_samples(sampler, 5)
        mark = len(sampler)
        early = sampler.timeline()
        wait_for_samples(sampler, 6)
        running_count = len(sampler)
        running_peaks = sampler.peaks_mb(mark)
    timeline = sampler.timeline()

    # What was read while the child ran is a prefix of the whole, record for record (no torn or repeated records).
    assert early.times_s.size >= mark
    np.testing.assert_array_equal(timeline.times_s[: early.times_s.size], early.times_s)
    np.testing.assert_array_equal(timeline.device_used_mb[: early.times_s.size], early.device_used_mb)
    assert running_peaks[0] >= counting_device_mb(running_count - 1, 0)
    for since in (0, mark, len(sampler) - 2, len(sampler) - 1):  # the odd last sample has no process reading
        device, process = timeline.device_used_mb[since:], timeline.process_used_mb[since:]
        expected_process = None if np.all(np.isnan(process)) else np.nanmax(process)
        assert sampler.peaks_mb(since) == (np.max(device), expected_process)
        np.testing.assert_array_equal(sampler.timeline(since).times_s, timeline.times_s[since:])
    assert sampler.peaks_mb(len(sampler)) == (None, None)


def test_process_sampler_stop_ends_the_child_and_removes_its_file_and_samples_accumulate(sampler_files: Path) -> None:
    sampler = ProcessMemorySampler(0, 7, interval_ms=2.0, reader=COUNTING)
    sampler.start()
    child = child_of(sampler)
    assert len(list(sampler_files.iterdir())) == 1
    wait_for_samples(sampler, 3)
    sampler.stop()
    assert not sampler.running and child.returncode == 0  # SIGTERM: the record in hand finished, a clean exit
    assert process_gone(child.pid)
    assert list(sampler_files.iterdir()) == []
    first_cycle = len(sampler)

    with sampler:  # a second cycle, as the overhead benchmark runs one per block: a new child, the same index
        wait_for_samples(sampler, 3)
    assert len(sampler) >= first_cycle + 3
    assert sampler.timeline(first_cycle).device_used_mb[0] == counting_device_mb(0, 0)
    assert list(sampler_files.iterdir()) == []


def test_process_sampler_refuses_a_second_start(sampler_files: Path) -> None:
    with ProcessMemorySampler(0, 7, interval_ms=2.0, reader=COUNTING) as sampler, pytest.raises(RuntimeError):
        sampler.start()


def test_process_sampler_start_raises_the_childs_message_when_it_cannot_open_the_device(sampler_files: Path) -> None:
    sampler = ProcessMemorySampler(7, 1, interval_ms=2.0, reader="fake_sampler_readers:unopenable")
    with pytest.raises(
        RuntimeError,
        match=r"exited before its first sample \(exit status 1\): "
        r"gpubench memory sampler: RuntimeError: NVML has no device with index 7",
    ):
        sampler.start()
    assert not sampler.running and list(sampler_files.iterdir()) == []


def test_process_sampler_stop_reraises_a_failed_read_with_the_childs_message(sampler_files: Path) -> None:
    sampler = ProcessMemorySampler(0, 1, interval_ms=1.0, reader="fake_sampler_readers:failing_after_three")
    sampler.start()
    deadline_s = time.perf_counter() + 5.0
    while sampler.running:
        assert time.perf_counter() < deadline_s
        time.sleep(0.001)
    with pytest.raises(RuntimeError, match=r"read failed \(exit status 1\): .*OSError: device vanished"):
        sampler.stop()
    assert len(sampler) == GOOD_READS_BEFORE_FAILURE  # every record written before the failure was kept
    assert list(sampler_files.iterdir()) == []


def test_process_sampler_kills_a_child_that_takes_no_first_sample(
    sampler_files: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(memory_module, "_START_TIMEOUT_S", 0.5)
    spawned: list[subprocess.Popen[bytes]] = []
    popen = subprocess.Popen

    def recording_popen(*args: object, **kwargs: object) -> subprocess.Popen[bytes]:
        spawned.append(popen(*args, **kwargs))
        return spawned[-1]

    monkeypatch.setattr(subprocess, "Popen", recording_popen)
    sampler = ProcessMemorySampler(0, 1, interval_ms=2.0, reader="fake_sampler_readers:hanging")
    with pytest.raises(RuntimeError, match=r"took no sample within 0.5 s \(exit status -9\)"):
        sampler.start()
    assert len(spawned) == 1 and spawned[0].returncode == -signal.SIGKILL
    assert list(sampler_files.iterdir()) == []


def test_process_sampler_child_leaves_ctrl_c_to_its_parent(sampler_files: Path) -> None:
    with ProcessMemorySampler(0, 1, interval_ms=2.0, reader=COUNTING) as sampler:
        wait_for_samples(sampler, 2)
        os.kill(child_of(sampler).pid, signal.SIGINT)
        wait_for_samples(sampler, 5)
        assert sampler.running
    # stop() raised nothing: the SIGINT neither killed the child nor made it report an error.


def test_an_orphaned_sampler_child_exits_and_removes_its_file(sampler_files: Path) -> None:
    # A run that crashes without stop(): the intermediate process starts a sampler, prints its child, and is killed.
    script = textwrap.dedent(
        f"""
        import sys, time
        from gpubench.measure.memory import ProcessMemorySampler
        sampler = ProcessMemorySampler(0, 1, interval_ms=2.0, reader={COUNTING!r})
        sampler.start()
        print(sampler._process.pid, sampler._path, flush=True)
        time.sleep(60)
        """
    )
    env = {**os.environ, "TMPDIR": str(sampler_files)}
    intermediate = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert intermediate.stdout is not None
        child_pid_text, path = intermediate.stdout.readline().split()
        child_pid = int(child_pid_text)
        assert Path(path).exists() and not process_gone(child_pid)
        intermediate.kill()
        intermediate.wait()
        deadline_s = time.perf_counter() + 5.0
        while not process_gone(child_pid):
            assert time.perf_counter() < deadline_s, "the orphaned sampler outlived its parent"
            time.sleep(0.01)
        assert not Path(path).exists()
    finally:
        intermediate.kill()
        intermediate.wait()


class StopAfter:
    """A stop request that comes once ``writes`` records have been written (the loop run without a process)."""

    def __init__(self, writes: int) -> None:
        self.records: list[bytes] = []
        self.writes = writes

    def write(self, record: bytes) -> None:
        self.records.append(record)

    def __call__(self) -> bool:
        return len(self.records) >= self.writes


def test_sampling_loop_writes_one_record_per_read_and_stops_when_asked() -> None:
    stop = StopAfter(4)
    # Exactly four readings: a fifth read would raise StopIteration out of the loop.
    reads = iter(
        [MemoryReading(10.0, 1.0), MemoryReading(None, None), MemoryReading(30.0, None), MemoryReading(40.0, 4)]
    )
    started_s = time.perf_counter()
    orphan = sample(lambda: next(reads), stop.write, 0.001, stop_requested=stop, parent_gone=lambda: False)
    assert not orphan
    assert all(len(record) == RECORD.size for record in stop.records)
    values = np.array([RECORD.unpack(record) for record in stop.records])
    expected_mb = [[10.0, 1.0], [np.nan, np.nan], [30.0, np.nan], [40.0, 4.0]]
    np.testing.assert_array_equal(values[:, 1:], expected_mb)  # None is written as NaN
    # Read k waits for slot k of the grid (1 ms apart) that starts when the loop does, and is timed after it.
    assert np.all(values[:, 0] >= started_s + 0.001 * np.arange(4))


def test_sampling_loop_stops_at_once_when_the_parent_is_gone() -> None:
    stop = StopAfter(100)
    assert sample(lambda: MemoryReading(1.0, 1.0), stop.write, 0.001, stop_requested=stop, parent_gone=lambda: True)
    assert stop.records == []


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


def test_memory_reading_reads_the_process_it_is_given() -> None:
    # The sampler's child reads its parent's memory, not its own.
    gpu = FakeGpu(processes=[FakeProcess(os.getpid(), 100 * MB), FakeProcess(4242, 4200 * MB)])
    device = NvmlDevice(Nvml(FakeNvml([gpu])), 0)
    assert device.memory_reading(4242).process_used_mb == 4200.0
    assert NvmlDevice(Nvml(FakeNvml([gpu])), 0).memory_reading().process_used_mb == 100.0


def test_the_childs_nvml_reader_reads_its_index_and_pid_and_fails_loudly(monkeypatch: pytest.MonkeyPatch) -> None:
    gpus = [FakeGpu(used_bytes=1000 * MB), FakeGpu(used_bytes=7000 * MB, processes=[FakeProcess(4242, 6000 * MB)])]
    monkeypatch.setattr(memory_sampler_process, "Nvml", lambda: Nvml(FakeNvml(gpus)))
    read = memory_sampler_process.nvml_reader(1, 4242)
    assert read() == MemoryReading(device_used_mb=7000.0, process_used_mb=6000.0)
    # Where the benchmark process carries on without telemetry, the child must fail, so its parent hears why.
    with pytest.raises(RuntimeError, match="NVML has no device with index 5"):
        memory_sampler_process.nvml_reader(5, 4242)
    monkeypatch.setattr(memory_sampler_process, "Nvml", lambda: Nvml(FakeNvml(gpus, init_error=12)))
    with pytest.raises(RuntimeError, match=r"NVML unavailable \(NVMLError: NVML error 12\)"):
        memory_sampler_process.nvml_reader(0, 4242)


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
            profiler.end_epoch("warmup" if epoch == 0 else "measured", max(epoch, 1))
    profile = profiler.result()

    assert profile.measured and allocator.resets == 5
    assert [(epoch.phase, epoch.epoch) for epoch in profiler.epochs] == [("warmup", 1)] + [
        ("measured", n) for n in range(1, 5)
    ]
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
        first = profiler.end_epoch("measured", 1)
        profiler.start_epoch()
        wait_for_samples(profiler.sampler, 3)
        second = profiler.end_epoch("measured", 2)
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
        assert profiler.end_epoch("measured", 1) is None
    profile = profiler.result()
    assert not profile.measured
    for name in ("peak_allocated_mb", "peak_reserved_mb", "peak_nvml_device_used_mb", "peak_nvml_process_mb", "leak"):
        assert getattr(profile, name) is None, name
    assert profile.to_dict()["notes"] == ["GPU memory not measured on the CPU"]
    # Nothing was sampled, and memory never stops a model.
    assert profiler.timeline() is None and profiler.stop_reason() is None


def test_profiler_needs_start_before_end() -> None:
    profiler = MemoryProfiler(torch.device("cpu"), allocator=FakeAllocator())
    with pytest.raises(RuntimeError, match="without start_epoch"):
        profiler.end_epoch("measured", 1)


def fake_nvml_device(nvml_index: int) -> NvmlDevice:
    """An NVML view of a fake H200 at ``nvml_index``, as open_nvml_device would return it on a GPU machine."""
    return NvmlDevice(Nvml(FakeNvml([FakeGpu()] * (nvml_index + 1))), nvml_index)


def test_profiler_on_a_gpu_samples_in_a_child_process_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memory_module, "open_nvml_device", lambda device: fake_nvml_device(3))
    profiler = MemoryProfiler(torch.device("cuda", 0), sample_interval_ms=7.0, allocator=FakeAllocator())
    assert isinstance(profiler.sampler, ProcessMemorySampler)
    # The child reads the NVML index that hardware.py mapped torch's device to, and this process's memory.
    assert (profiler.sampler.nvml_index, profiler.sampler.pid, profiler.sampler.interval_ms) == (3, os.getpid(), 7.0)
    assert profiler.sampler.reader is None and not profiler.sampler.running


def test_profiler_samples_on_a_thread_when_asked_or_given_a_reader(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memory_module, "open_nvml_device", lambda device: fake_nvml_device(0))
    monkeypatch.setattr(memory_module, "memory_reader", lambda device: SettableReading())
    cuda = torch.device("cuda", 0)
    thread = MemoryProfiler(cuda, sampler="thread", allocator=FakeAllocator())
    assert isinstance(thread.sampler, MemorySampler) and isinstance(thread.sampler._read, SettableReading)
    read = SettableReading()
    given = MemoryProfiler(cuda, sampler="process", allocator=FakeAllocator(), reader=read)
    assert isinstance(given.sampler, MemorySampler) and given.sampler._read is read


def test_profiler_without_nvml_samples_nothing_with_either_sampler(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memory_module, "open_nvml_device", lambda device: None)
    monkeypatch.setattr(memory_module, "memory_reader", lambda device: None)
    for kind in ("process", "thread"):
        assert MemoryProfiler(torch.device("cuda", 0), sampler=kind, allocator=FakeAllocator()).sampler is None
    with pytest.raises(ValueError, match="sampler must be one of process, thread, got 'bogus'"):
        MemoryProfiler(torch.device("cpu"), sampler="bogus")


def test_profiler_takes_per_epoch_peaks_from_the_process_sampler(sampler_files: Path) -> None:
    profiler = MemoryProfiler(torch.device("cpu"), allocator=FakeAllocator())
    profiler.sampler = ProcessMemorySampler(0, 5, interval_ms=2.0, reader=COUNTING)
    with profiler:
        marks = []
        for _ in range(2):
            profiler.start_epoch()
            marks.append(len(profiler.sampler))
            wait_for_samples(profiler.sampler, 4)
            profiler.end_epoch("measured", len(marks))
    timeline = profiler.timeline()
    assert timeline is not None
    # Each epoch's peaks are the samples from its start on, as far as the sampler had read at its end.
    for epoch, mark in zip(profiler.epochs, marks, strict=True):
        assert epoch.peak_nvml_device_used_mb is not None and epoch.peak_nvml_process_mb == 5.0
        assert epoch.peak_nvml_device_used_mb >= np.max(timeline.device_used_mb[mark : mark + 4])
    profile = profiler.result()
    assert profile.peak_nvml_device_used_mb == np.max(timeline.device_used_mb)
    assert profile.nvml_samples == timeline.times_s.size >= 8
    assert list(sampler_files.iterdir()) == []


# --------------------------------------------------------------------------------------------------- configuration


def test_memory_sampler_defaults_to_a_child_process_and_a_bad_value_names_the_key() -> None:
    register_configs()
    from gpubench.conf import CONF_DIR

    conf_dir = str(CONF_DIR)
    with initialize_config_dir(config_dir=conf_dir, version_base="1.3"):
        default = compose(config_name="config", overrides=["output=/tmp/gpubench-test/report.json"])
        thread = compose(config_name="config", overrides=["output=/tmp/x.json", "memory.sampler=thread"])
        bogus = compose(config_name="config", overrides=["output=/tmp/x.json", "memory.sampler=bogus"])
    assert typed_config(default).memory.sampler == MemoryConfig().sampler == "process"
    assert typed_config(thread).memory.sampler == "thread"
    with pytest.raises(ConfigError) as raised:
        typed_config(bogus)
    assert str(raised.value) == "`memory.sampler` = 'bogus' is not valid: it must be one of process, thread."
