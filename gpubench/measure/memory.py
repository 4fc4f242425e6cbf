"""VRAM profiler: an NVML sampler in the background, torch's allocator statistics per epoch, and a leak slope.

Torch's peaks (MB = MiB) are exact; NVML's are sampled every ``interval_ms`` (a shorter spike can be missed), by
default in a child process (:class:`ProcessMemorySampler`) so that sampling takes no GIL from training."""

import io
import math
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch

from gpubench.hardware.identity import memory_reader, open_nvml_device
from gpubench.hardware.memory_sampler_process import RECORD, next_deadline_s
from gpubench.hardware.nvml import MemoryReading
from gpubench.measure.config import MEMORY_SAMPLERS
from gpubench.results import LeakEstimate, MemoryProfile, MemoryTimeline
from gpubench.results.units import BYTES_PER_MB, MS_PER_S
from gpubench.stats.regression import fit_slope


def leak_estimate(
    allocated_mb_at_epoch_end: Sequence[float] | np.ndarray,
    confidence_level: float = 0.95,
    threshold_mb_per_epoch: float = 5.0,
) -> LeakEstimate:
    """The slope of allocated MB at each epoch's end over the epochs, with its t interval; ValueError under 3."""
    n = len(allocated_mb_at_epoch_end)
    if n < 3:
        raise ValueError(f"a leak slope needs at least 3 epochs, got {n}")
    fit = fit_slope(allocated_mb_at_epoch_end)
    low, high = fit.interval(confidence_level)
    return LeakEstimate(
        slope_mb_per_epoch=fit.slope,
        interval_mb_per_epoch=(low, high),
        confidence_level=confidence_level,
        threshold_mb_per_epoch=threshold_mb_per_epoch,
        epochs=n,
        flagged=bool(fit.slope > threshold_mb_per_epoch and (low > 0.0 or high < 0.0)),
    )


def _nan_max(values: array) -> float | None:
    known = np.asarray(values, dtype=float)
    known = known[~np.isnan(known)]
    return float(known.max()) if known.size else None


class _Sampler:
    """What both samplers share: a context manager over start and stop, and the samples from index ``since`` on
    (s on this process's ``perf_counter``, MB, NaN where not read)."""

    def __enter__(self) -> "_Sampler":
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def timeline(self, since: int = 0) -> MemoryTimeline:
        return MemoryTimeline(*(np.array(column, dtype=float) for column in self._columns(since)))

    def peaks_mb(self, since: int = 0) -> tuple[float | None, float | None]:
        """Highest device-used and process-used MB (None if none read)."""
        _, device, process = self._columns(since)
        return _nan_max(device), _nan_max(process)


class MemorySampler(_Sampler):
    """Reads GPU memory every ``interval_ms`` on a daemon thread; :meth:`stop` re-raises an error of ``read``.
    ``clock`` (s) and ``wait`` replace ``time.perf_counter`` and the stop event's wait in tests."""

    def __init__(
        self,
        read: Callable[[], MemoryReading],
        *,
        interval_ms: float = 10.0,
        clock: Callable[[], float] = time.perf_counter,
        wait: Callable[[float], bool] | None = None,
    ) -> None:
        if interval_ms <= 0:
            raise ValueError(f"interval_ms must be positive, got {interval_ms}")
        self.interval_ms = interval_ms
        self._read = read
        self._clock = clock
        self._stop_event = threading.Event()
        self._wait = wait if wait is not None else self._stop_event.wait
        # C doubles (no object per sample); the thread publishes the length in ``_count`` after appending to all
        # three, and readers copy up to it, so no lock is shared with training.
        self._times_s, self._device_used_mb, self._process_used_mb = array("d"), array("d"), array("d")
        self._count = 0
        self._thread: threading.Thread | None = None
        self._error: Exception | None = None

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("MemorySampler is already running")
        self._stop_event.clear()
        self._thread = threading.Thread(target=self._run, name="gpubench-memory-sampler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._thread is None:
            return
        self._stop_event.set()
        self._thread.join()
        self._thread = None
        if self._error is not None:
            error, self._error = self._error, None
            raise RuntimeError("the memory sampler's read failed") from error

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _run(self) -> None:
        # Python here holds the GIL and delays a launch-bound loop, so per sample it does little, through locals;
        # the NVML queries are ctypes calls, which release the GIL.
        read, clock, wait, interval_s, nan = self._read, self._clock, self._wait, self.interval_ms / MS_PER_S, math.nan
        columns = (self._times_s, self._device_used_mb, self._process_used_mb)
        append_time, append_device, append_process = (column.append for column in columns)
        deadline_s = clock()
        try:
            while not self._stop_event.is_set():
                reading = read()
                now_s = clock()
                append_time(now_s)
                device_mb, process_mb = reading.device_used_mb, reading.process_used_mb
                append_device(nan if device_mb is None else device_mb)
                append_process(nan if process_mb is None else process_mb)
                self._count += 1
                deadline_s = next_deadline_s(deadline_s, now_s, interval_s)
                if wait(deadline_s - now_s):
                    break
        except Exception as error:
            self._error = error

    def __len__(self) -> int:
        return self._count

    def _columns(self, since: int) -> tuple[array, array, array]:
        # Up to the published count: the three columns have the same length even mid-append.
        count = self._count
        return self._times_s[since:count], self._device_used_mb[since:count], self._process_used_mb[since:count]


#: Seconds to wait for the child's first sample (start-up and NVML's initialisation, slower on a loaded host).
_START_TIMEOUT_S = 10.0
#: Seconds to wait, beyond one interval, for the child to exit before killing it.
_STOP_TIMEOUT_S = 5.0
_START_POLL_S = 0.002


def _child_environment() -> dict[str, str]:
    """This environment with this gpubench's folder first on ``PYTHONPATH``, so that the child imports the same
    code, also from an uninstalled checkout run elsewhere (``hydra.job.chdir=true``)."""
    package_parent = str(Path(__file__).resolve().parents[2])
    inherited = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": os.pathsep.join([package_parent, inherited]) if inherited else package_parent}


class ProcessMemorySampler(_Sampler):
    """Reads GPU memory every ``interval_ms`` in a child process (:mod:`gpubench.hardware.memory_sampler_process`),
    which appends records to a temporary file read here on demand. A child that fails is a RuntimeError carrying
    its stderr. ``reader`` (``module:function``) replaces NVML in tests."""

    def __init__(self, nvml_index: int, pid: int, *, interval_ms: float = 10.0, reader: str | None = None) -> None:
        if interval_ms <= 0:
            raise ValueError(f"interval_ms must be positive, got {interval_ms}")
        self.nvml_index = nvml_index
        self.pid = pid
        self.interval_ms = interval_ms
        self.reader = reader
        self._values = array("d")
        self._partial = b""
        self._process: subprocess.Popen[bytes] | None = None
        self._path: str | None = None
        self._file: io.FileIO | None = None

    def start(self) -> None:
        """Start the child and wait for its first sample; RuntimeError with its stderr if none comes."""
        if self._process is not None:
            raise RuntimeError("ProcessMemorySampler is already running")
        descriptor, self._path = tempfile.mkstemp(prefix="gpubench-memory-", suffix=".samples")
        os.close(descriptor)
        # Held open until stop(), so each read returns only the bytes added since the last.
        self._file = io.FileIO(self._path, "r")
        self._partial = b""
        options = {"nvml-index": self.nvml_index, "pid": self.pid, "interval-ms": self.interval_ms}
        options |= {"output": self._path, "parent-pid": os.getpid(), "reader": self.reader}
        command = [sys.executable, "-m", "gpubench.hardware.memory_sampler_process"]
        for name, value in options.items():
            if value is not None:
                command += [f"--{name}", str(value)]
        self._process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=_child_environment(),
        )
        try:
            failure = self._wait_for_first_sample()
        except BaseException:
            self._finish(kill=True)
            raise
        if failure is not None:
            returncode, stderr, _ = self._finish(kill=True)
            raise RuntimeError(f"the memory sampler process {failure} (exit status {returncode}): {stderr}")

    def _wait_for_first_sample(self) -> str | None:
        """None once the child's first record is in the file, else what went wrong."""
        assert self._process is not None
        wanted = len(self._values) // 3 + 1
        deadline_s = time.perf_counter() + _START_TIMEOUT_S
        while self._read_new_records() < wanted:
            # Read again: a child that wrote its first record and then failed has started.
            if self._process.poll() is not None and self._read_new_records() < wanted:
                return "exited before its first sample"
            if time.perf_counter() > deadline_s:
                return f"took no sample within {_START_TIMEOUT_S:g} s"
            time.sleep(_START_POLL_S)
        return None

    def stop(self) -> None:
        """Stop the child and keep its last records; RuntimeError with its stderr when it had failed on its own."""
        if self._process is None:
            return
        returncode, stderr, stopped_here = self._finish()
        if returncode != 0 and not stopped_here:
            raise RuntimeError(f"the memory sampler's read failed (exit status {returncode}): {stderr}")

    def _finish(self, *, kill: bool = False) -> tuple[int, str, bool]:
        """End the child (SIGTERM, else SIGKILL), read what it wrote and delete the file; its exit status, stderr and
        whether it was still running."""
        process, self._process = self._process, None
        assert process is not None
        running = process.poll() is None
        if running:
            process.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
        try:
            _, stderr = process.communicate(timeout=_STOP_TIMEOUT_S + self.interval_ms / MS_PER_S)
        except subprocess.TimeoutExpired:
            process.kill()
            _, stderr = process.communicate()
        self._read_new_records()
        if self._file is not None:
            self._file.close()
            self._file = None
        if self._path is not None:
            os.remove(self._path)
            self._path = None
        return process.returncode, stderr.decode(errors="replace").strip() or "(nothing on stderr)", running

    def _read_new_records(self) -> int:
        """Read the complete records written since the last call; the number of samples."""
        if self._file is not None:
            # A record being written may be read in part: its bytes wait for the next call.
            self._partial += self._file.read()
            complete = len(self._partial) - len(self._partial) % RECORD.size
            if complete:
                self._values.frombytes(self._partial[:complete])
                self._partial = self._partial[complete:]
        return len(self._values) // 3

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def __len__(self) -> int:
        return self._read_new_records()

    def _columns(self, since: int) -> tuple[array, array, array]:
        self._read_new_records()
        return self._values[3 * since :: 3], self._values[3 * since + 1 :: 3], self._values[3 * since + 2 :: 3]


@dataclass(frozen=True)
class AllocatorSnapshot:
    """Torch caching-allocator statistics (bytes, counts); peaks since the last reset."""

    peak_allocated_bytes: int
    peak_reserved_bytes: int
    allocated_bytes: int
    inactive_split_peak_bytes: int
    num_alloc_retries: int
    num_ooms: int


class Allocator(Protocol):
    def reset_peak(self) -> None: ...

    def snapshot(self) -> AllocatorSnapshot: ...


class TorchCudaAllocator:
    """Torch's CUDA caching allocator on one device (host-side bookkeeping, so a measurement, not a device query)."""

    def __init__(self, device: torch.device) -> None:
        self.device = device

    def reset_peak(self) -> None:
        torch.cuda.reset_peak_memory_stats(self.device)

    def snapshot(self) -> AllocatorSnapshot:
        stats = torch.cuda.memory_stats_as_nested_dict(self.device)
        return AllocatorSnapshot(
            peak_allocated_bytes=_all_pools(stats, "allocated_bytes", "peak"),
            peak_reserved_bytes=_all_pools(stats, "reserved_bytes", "peak"),
            allocated_bytes=_all_pools(stats, "allocated_bytes", "current"),
            # Free pieces of split blocks: fragmentation.
            inactive_split_peak_bytes=_all_pools(stats, "inactive_split_bytes", "peak"),
            # Failed cudaMallocs that forced a cache flush: the allocator runs short.
            num_alloc_retries=int(stats.get("num_alloc_retries", 0)),
            num_ooms=int(stats.get("num_ooms", 0)),
        )


def _all_pools(stats: dict[str, Any], name: str, moment: str) -> int:
    # Absent before CUDA is initialised.
    return int(stats.get(name, {}).get("all", {}).get(moment, 0))


@dataclass(frozen=True)
class EpochMemory:
    """Memory during epoch ``epoch`` (from 1) of ``phase`` (MB); retries and OOMs counted within the epoch."""

    phase: str
    epoch: int
    peak_allocated_mb: float
    peak_reserved_mb: float
    allocated_mb: float
    inactive_split_peak_mb: float
    alloc_retries: int
    ooms: int
    peak_nvml_device_used_mb: float | None
    peak_nvml_process_mb: float | None


class MemoryProfiler:
    """Per-model memory profile, an epoch observer and a context manager around the model's epochs: allocator
    statistics at epoch edges, the NVML sampler between. Nothing on the CPU. ``allocator`` and ``reader`` replace
    torch's allocator and NVML in tests."""

    def __init__(
        self,
        device: torch.device,
        *,
        sample_interval_ms: float = 10.0,
        leak_threshold_mb_per_epoch: float = 5.0,
        confidence_level: float = 0.95,
        allocator: Allocator | None = None,
        reader: Callable[[], MemoryReading] | None = None,
        sampler: str = "process",
    ) -> None:
        if sampler not in MEMORY_SAMPLERS:
            raise ValueError(f"sampler must be one of {', '.join(MEMORY_SAMPLERS)}, got {sampler!r}")
        on_gpu = device.type == "cuda"
        self.allocator = allocator if allocator is not None else (TorchCudaAllocator(device) if on_gpu else None)
        self.sampler: _Sampler | None = None
        if reader is None and on_gpu and sampler == "thread":
            reader = memory_reader(device)
        if reader is not None:
            self.sampler = MemorySampler(reader, interval_ms=sample_interval_ms)
        elif on_gpu and sampler == "process" and (nvml_device := open_nvml_device(device)) is not None:
            self.sampler = ProcessMemorySampler(nvml_device.nvml_index, os.getpid(), interval_ms=sample_interval_ms)
        self.sample_interval_ms = sample_interval_ms
        self.leak_threshold_mb_per_epoch = leak_threshold_mb_per_epoch
        self.confidence_level = confidence_level
        self.epochs: list[EpochMemory] = []
        self._epoch_start: AllocatorSnapshot | None = None
        self._epoch_sample_index = 0

    def __enter__(self) -> "MemoryProfiler":
        if self.sampler is not None:
            self.sampler.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self.sampler is not None:
            self.sampler.stop()

    def start_epoch(self) -> None:
        if self.allocator is None:
            return
        self.allocator.reset_peak()
        self._epoch_start = self.allocator.snapshot()
        self._epoch_sample_index = len(self.sampler) if self.sampler is not None else 0

    def end_epoch(self, phase: str, epoch: int) -> EpochMemory | None:
        """Record the epoch :meth:`start_epoch` opened (None on the CPU)."""
        if self.allocator is None:
            return None
        if self._epoch_start is None:
            raise RuntimeError("MemoryProfiler.end_epoch called without start_epoch")
        end = self.allocator.snapshot()
        nvml_device_mb, nvml_process_mb = (
            self.sampler.peaks_mb(self._epoch_sample_index) if self.sampler is not None else (None, None)
        )
        record = EpochMemory(
            phase=phase,
            epoch=epoch,
            peak_allocated_mb=end.peak_allocated_bytes / BYTES_PER_MB,
            peak_reserved_mb=end.peak_reserved_bytes / BYTES_PER_MB,
            allocated_mb=end.allocated_bytes / BYTES_PER_MB,
            inactive_split_peak_mb=end.inactive_split_peak_bytes / BYTES_PER_MB,
            alloc_retries=end.num_alloc_retries - self._epoch_start.num_alloc_retries,
            ooms=end.num_ooms - self._epoch_start.num_ooms,
            peak_nvml_device_used_mb=nvml_device_mb,
            peak_nvml_process_mb=nvml_process_mb,
        )
        self.epochs.append(record)
        self._epoch_start = None
        return record

    def stop_reason(self) -> str | None:
        """None: memory figures never stop a model (an OOM does, by raising)."""
        return None

    def timeline(self) -> MemoryTimeline | None:
        """Every NVML sample (for the VRAM plot); None without a sampler."""
        return self.sampler.timeline() if self.sampler is not None else None

    def result(self) -> MemoryProfile:
        """The profile over the epochs so far; the headroom fields are the caller's (it knows the VRAM budget)."""
        if self.allocator is None:
            return MemoryProfile(measured=False, notes=["GPU memory not measured on the CPU"])
        notes: list[str] = []
        peak_device_mb = peak_process_mb = None
        nvml_samples = 0
        if self.sampler is None:
            notes.append("NVML unavailable: device and process memory not sampled")
        else:
            peak_device_mb, peak_process_mb = self.sampler.peaks_mb()
            nvml_samples = len(self.sampler)
            if nvml_samples and peak_process_mb is None:
                notes.append("NVML does not attribute GPU memory to this process here (e.g. a container)")
        profile = partial(
            MemoryProfile,
            measured=True,
            peak_nvml_device_used_mb=peak_device_mb,
            peak_nvml_process_mb=peak_process_mb,
            nvml_samples=nvml_samples,
            sample_interval_ms=self.sample_interval_ms,
            notes=notes,
        )
        if not self.epochs:
            return profile()
        allocated_mb = [epoch.allocated_mb for epoch in self.epochs]
        peak_allocated_mb = [epoch.peak_allocated_mb for epoch in self.epochs]
        peak_reserved_mb = [epoch.peak_reserved_mb for epoch in self.epochs]
        leak = None
        if len(self.epochs) >= 3:
            leak = leak_estimate(allocated_mb, self.confidence_level, self.leak_threshold_mb_per_epoch)
        else:
            notes.append("leak slope needs at least 3 epochs")
        return profile(
            peak_allocated_mb=max(peak_allocated_mb),
            peak_reserved_mb=max(peak_reserved_mb),
            peak_inactive_split_mb=max(epoch.inactive_split_peak_mb for epoch in self.epochs),
            num_alloc_retries=sum(epoch.alloc_retries for epoch in self.epochs),
            num_ooms=sum(epoch.ooms for epoch in self.epochs),
            allocated_mb_per_epoch=allocated_mb,
            peak_allocated_mb_per_epoch=peak_allocated_mb,
            peak_reserved_mb_per_epoch=peak_reserved_mb,
            peak_nvml_device_used_mb_per_epoch=[epoch.peak_nvml_device_used_mb for epoch in self.epochs],
            leak=leak,
        )
