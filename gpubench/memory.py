"""VRAM profiler: a background NVML sampler, torch's allocator statistics per epoch, and a leak slope.

Peak memory is reported three ways, because they count different things and users need to know which is which:

* ``peak_allocated_mb`` — bytes held by live tensors at the worst moment (torch's ``max_memory_allocated``).
  What the model really needs.
* ``peak_reserved_mb`` — bytes torch's caching allocator held from the driver at the worst moment (allocated plus
  cached free blocks; ``max_memory_reserved``). What must fit under a VRAM cap.
* ``peak_nvml_device_used_mb`` — memory in use on the whole card as NVML sees it: every process, the CUDA
  context (hundreds of MB) and library workspaces outside torch's allocator. What ``nvidia-smi`` shows.
* ``peak_nvml_process_mb`` — NVML's figure for this process alone (context + reserved + workspaces); None where
  NVML cannot attribute memory to the process (often inside containers).

The NVML figures come from samples every ``interval_ms``, so a spike shorter than that can be missed; torch's
peaks are exact. MB are MiB (2**20 bytes).
"""

import math
import threading
import time
from array import array
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

import numpy as np
import torch
from scipy import stats

from gpubench.hardware import BYTES_PER_MB, MemoryReading, memory_reader

#: What each peak counts, carried into the report next to the figures.
PEAK_DEFINITIONS: dict[str, str] = {
    "peak_allocated_mb": "live tensors at the worst moment (torch max_memory_allocated)",
    "peak_reserved_mb": "torch caching allocator's reservation at the worst moment (max_memory_reserved); "
    "what must fit under a VRAM cap",
    "peak_nvml_device_used_mb": "whole card as NVML sees it: all processes, CUDA context, library workspaces (sampled)",
    "peak_nvml_process_mb": "this process per NVML: CUDA context + reserved + workspaces (sampled; None when NVML "
    "cannot attribute memory to this process)",
}


# --------------------------------------------------------------------------------------------------- leak slope


@dataclass(frozen=True)
class LeakEstimate:
    """Growth of allocated memory across epochs: the OLS slope in MB/epoch with its Student-t interval.

    ``flagged`` when the slope exceeds ``threshold_mb_per_epoch`` and the interval excludes zero.
    """

    slope_mb_per_epoch: float
    interval_mb_per_epoch: tuple[float, float]
    confidence_level: float
    threshold_mb_per_epoch: float
    epochs: int
    flagged: bool

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["interval_mb_per_epoch"] = list(self.interval_mb_per_epoch)
        return data


def leak_estimate(
    allocated_mb_at_epoch_end: list[float] | np.ndarray,
    confidence_level: float = 0.95,
    threshold_mb_per_epoch: float = 5.0,
) -> LeakEstimate:
    """Fit allocated MB at each epoch's end against the epoch number and decide whether memory leaks.

    The interval is slope ± t(1 − α/2, n − 2) × standard error of the slope. Needs at least 3 epochs (an interval
    needs one residual degree of freedom); raises ValueError otherwise.
    """
    allocated_mb = np.asarray(allocated_mb_at_epoch_end, dtype=float)
    n = allocated_mb.size
    if n < 3:
        raise ValueError(f"a leak slope needs at least 3 epochs, got {n}")
    epoch = np.arange(n, dtype=float)
    epoch_centred = epoch - epoch.mean()
    sxx = float(epoch_centred @ epoch_centred)
    slope = float(epoch_centred @ (allocated_mb - allocated_mb.mean()) / sxx)
    residuals = allocated_mb - allocated_mb.mean() - slope * epoch_centred
    # The textbook standard error, written out because scipy's linregress returns NaN for a perfectly flat series
    # (its correlation is undefined), which is exactly what a clean training loop produces.
    slope_stderr = float(np.sqrt(residuals @ residuals / (n - 2) / sxx))
    half_width = float(stats.t.ppf(0.5 + confidence_level / 2.0, n - 2)) * slope_stderr
    low, high = slope - half_width, slope + half_width
    excludes_zero = low > 0.0 or high < 0.0
    return LeakEstimate(
        slope_mb_per_epoch=slope,
        interval_mb_per_epoch=(low, high),
        confidence_level=confidence_level,
        threshold_mb_per_epoch=threshold_mb_per_epoch,
        epochs=n,
        flagged=bool(slope > threshold_mb_per_epoch and excludes_zero),
    )


# --------------------------------------------------------------------------------------------------- NVML sampler


@dataclass(frozen=True)
class MemoryTimeline:
    """Samples of the background sampler: seconds on ``time.perf_counter``'s scale, MB (NaN where not read)."""

    times_s: np.ndarray
    device_used_mb: np.ndarray
    process_used_mb: np.ndarray


def _nan_max(values: array) -> float | None:
    """The largest value that is not NaN (a sample NVML could not read), or None when there is none."""
    known = np.asarray(values, dtype=float)
    known = known[~np.isnan(known)]
    return float(known.max()) if known.size else None


def next_deadline_s(deadline_s: float, now_s: float, interval_s: float) -> float:
    """The first slot of the grid ``deadline_s + k·interval_s`` (k >= 1) that lies after ``now_s``, in seconds.

    Slots are absolute, so the sampling rate does not drift by the cost of each read or by the sleep's own
    lateness; a read that overran skips the slots it missed instead of firing them back to back.
    """
    deadline_s += interval_s
    if deadline_s <= now_s:
        deadline_s += math.floor((now_s - deadline_s) / interval_s + 1.0) * interval_s
    return deadline_s


class MemorySampler:
    """Reads GPU memory every ``interval_ms`` on a daemon thread, between :meth:`start` and :meth:`stop`.

    ``read`` returns one :class:`MemoryReading` (by default :func:`gpubench.hardware.memory_reader` builds one
    over NVML; tests pass a fake). Use as a context manager. An error raised by ``read`` stops the thread and is
    re-raised by :meth:`stop`, so a broken sampler is not mistaken for an idle one. ``clock`` (seconds) and
    ``wait`` (wait up to that many seconds, True when asked to stop) replace ``time.perf_counter`` and the stop
    event's wait in tests.
    """

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
        # Flat arrays of C doubles: an append stores the float's value and allocates no object per sample. The
        # sampler thread appends to all three, then publishes the new length in ``_count`` (one attribute store,
        # atomic under the GIL); readers copy up to ``_count``. So no lock is shared with the training thread.
        self._times_s = array("d")
        self._device_used_mb = array("d")
        self._process_used_mb = array("d")
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
        """Stop sampling and join the thread; re-raise the error that stopped it early, if any."""
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

    def __enter__(self) -> "MemorySampler":
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _run(self) -> None:
        # Everything this thread runs in Python holds the GIL and so delays a launch-bound training loop: per sample
        # it does a clock read, three appends of floats and one deadline sum, with everything bound to locals once.
        # The NVML queries inside ``read`` are ctypes foreign calls, which release the GIL while the driver answers.
        read, clock, wait, interval_s, nan = self._read, self._clock, self._wait, self.interval_ms / 1e3, math.nan
        append_time, append_device, append_process = (
            self._times_s.append,
            self._device_used_mb.append,
            self._process_used_mb.append,
        )
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
        """Number of samples taken so far (an index for :meth:`timeline` and :meth:`peaks_mb`)."""
        return self._count

    def _columns(self, since: int) -> tuple[array, array, array]:
        # Slicing copies under the GIL; stopping at the published count keeps the three columns the same length
        # even when the sampler has appended to some of them but not yet to all.
        count = self._count
        return self._times_s[since:count], self._device_used_mb[since:count], self._process_used_mb[since:count]

    def timeline(self, since: int = 0) -> MemoryTimeline:
        """Samples from index ``since`` on, as arrays."""
        times_s, device, process = self._columns(since)
        return MemoryTimeline(
            np.array(times_s, dtype=float), np.array(device, dtype=float), np.array(process, dtype=float)
        )

    def peaks_mb(self, since: int = 0) -> tuple[float | None, float | None]:
        """Highest device-used and process-used MB among samples from index ``since`` on (None if none read)."""
        _, device, process = self._columns(since)
        return _nan_max(device), _nan_max(process)


# --------------------------------------------------------------------------------------------------- allocator


@dataclass(frozen=True)
class AllocatorSnapshot:
    """Torch caching-allocator statistics at one moment; peaks are since the last peak reset. Bytes and counts."""

    peak_allocated_bytes: int
    peak_reserved_bytes: int
    allocated_bytes: int
    inactive_split_peak_bytes: int
    num_alloc_retries: int
    num_ooms: int


class Allocator(Protocol):
    """Where the profiler reads allocator statistics (torch's CUDA allocator, or a fake in tests)."""

    def reset_peak(self) -> None: ...

    def snapshot(self) -> AllocatorSnapshot: ...


class TorchCudaAllocator:
    """Torch's CUDA caching allocator on one device."""

    def __init__(self, device: torch.device) -> None:
        self.device = device

    def reset_peak(self) -> None:
        torch.cuda.reset_peak_memory_stats(self.device)

    def snapshot(self) -> AllocatorSnapshot:
        # One read of the allocator's statistics, as the nested dict torch builds in C++. torch's own getters
        # (max_memory_allocated, max_memory_reserved, memory_allocated) each build this dict and then flatten and
        # sort its ~130 entries in Python (memory_stats()), so reading the fields from one dict costs a fraction of
        # four getter calls. Host-side bookkeeping: reading it does not synchronise the device.
        stats = torch.cuda.memory_stats_as_nested_dict(self.device)
        return AllocatorSnapshot(
            peak_allocated_bytes=_all_pools(stats, "allocated_bytes", "peak"),
            peak_reserved_bytes=_all_pools(stats, "reserved_bytes", "peak"),
            allocated_bytes=_all_pools(stats, "allocated_bytes", "current"),
            # Free pieces of split blocks that a larger request cannot reuse: fragmentation.
            inactive_split_peak_bytes=_all_pools(stats, "inactive_split_bytes", "peak"),
            # cudaMalloc failures that forced a cache flush and retry: the allocator is running short.
            num_alloc_retries=int(stats.get("num_alloc_retries", 0)),
            num_ooms=int(stats.get("num_ooms", 0)),
        )


def _all_pools(stats: dict[str, Any], name: str, moment: str) -> int:
    """``stats[name]["all"][moment]`` of torch's nested allocator statistics; 0 where absent (CUDA not initialised)."""
    return int(stats.get(name, {}).get("all", {}).get(moment, 0))


# --------------------------------------------------------------------------------------------------- profiler


@dataclass(frozen=True)
class EpochMemory:
    """Memory during one epoch, in MB; retries and OOMs are counts within the epoch."""

    peak_allocated_mb: float
    peak_reserved_mb: float
    allocated_mb: float
    inactive_split_peak_mb: float
    alloc_retries: int
    ooms: int
    peak_nvml_device_used_mb: float | None
    peak_nvml_process_mb: float | None


@dataclass
class MemoryProfile:
    """One model's memory over its profiled epochs; see the module docstring for what each peak counts.

    On the CPU ``measured`` is False and every GPU figure is None. ``allocated_mb_per_epoch`` is allocated
    memory at each epoch's end (the leak series); ``leak`` is None with fewer than 3 epochs.
    """

    measured: bool
    peak_allocated_mb: float | None = None
    peak_reserved_mb: float | None = None
    peak_nvml_device_used_mb: float | None = None
    peak_nvml_process_mb: float | None = None
    peak_inactive_split_mb: float | None = None
    num_alloc_retries: int | None = None
    num_ooms: int | None = None
    allocated_mb_per_epoch: list[float] = field(default_factory=list)
    peak_allocated_mb_per_epoch: list[float] = field(default_factory=list)
    peak_reserved_mb_per_epoch: list[float] = field(default_factory=list)
    peak_nvml_device_used_mb_per_epoch: list[float | None] = field(default_factory=list)
    leak: LeakEstimate | None = None
    nvml_samples: int = 0
    sample_interval_ms: float | None = None
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["leak"] = None if self.leak is None else self.leak.to_dict()
        data["definitions"] = dict(PEAK_DEFINITIONS)
        return data


class MemoryProfiler:
    """Per-model memory profile: allocator statistics at epoch edges plus the NVML sampler in the background.

    Use as a context manager around the model's epochs (it runs the sampler), calling :meth:`start_epoch` and
    :meth:`end_epoch` at each epoch's edges, then :meth:`result`. On the CPU it measures nothing. ``allocator``
    and ``reader`` replace torch's allocator and NVML (for tests); by default they are chosen from ``device``.
    """

    def __init__(
        self,
        device: torch.device,
        *,
        sample_interval_ms: float = 10.0,
        leak_threshold_mb_per_epoch: float = 5.0,
        confidence_level: float = 0.95,
        allocator: Allocator | None = None,
        reader: Callable[[], MemoryReading] | None = None,
    ) -> None:
        on_gpu = device.type == "cuda"
        self.allocator = allocator if allocator is not None else (TorchCudaAllocator(device) if on_gpu else None)
        read = reader if reader is not None else (memory_reader(device) if on_gpu else None)
        self.sampler = MemorySampler(read, interval_ms=sample_interval_ms) if read is not None else None
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
        """Reset torch's peak statistics so the next peaks are this epoch's."""
        if self.allocator is None:
            return
        self.allocator.reset_peak()
        self._epoch_start = self.allocator.snapshot()
        self._epoch_sample_index = len(self.sampler) if self.sampler is not None else 0

    def end_epoch(self) -> EpochMemory | None:
        """Record the epoch that :meth:`start_epoch` opened (None on the CPU)."""
        if self.allocator is None:
            return None
        if self._epoch_start is None:
            raise RuntimeError("MemoryProfiler.end_epoch called without start_epoch")
        end = self.allocator.snapshot()
        nvml_device_mb, nvml_process_mb = (
            self.sampler.peaks_mb(self._epoch_sample_index) if self.sampler is not None else (None, None)
        )
        epoch = EpochMemory(
            peak_allocated_mb=end.peak_allocated_bytes / BYTES_PER_MB,
            peak_reserved_mb=end.peak_reserved_bytes / BYTES_PER_MB,
            allocated_mb=end.allocated_bytes / BYTES_PER_MB,
            inactive_split_peak_mb=end.inactive_split_peak_bytes / BYTES_PER_MB,
            alloc_retries=end.num_alloc_retries - self._epoch_start.num_alloc_retries,
            ooms=end.num_ooms - self._epoch_start.num_ooms,
            peak_nvml_device_used_mb=nvml_device_mb,
            peak_nvml_process_mb=nvml_process_mb,
        )
        self.epochs.append(epoch)
        self._epoch_start = None
        return epoch

    def result(self) -> MemoryProfile:
        """The profile over every epoch recorded so far (the NVML peaks cover the whole sampled run)."""
        if self.allocator is None:
            return MemoryProfile(measured=False, notes=["GPU memory not measured on the CPU"])
        profile = MemoryProfile(measured=True, sample_interval_ms=self.sample_interval_ms)
        if self.sampler is None:
            profile.notes.append("NVML unavailable: device and process memory not sampled")
        else:
            profile.peak_nvml_device_used_mb, profile.peak_nvml_process_mb = self.sampler.peaks_mb()
            profile.nvml_samples = len(self.sampler)
            if profile.nvml_samples and profile.peak_nvml_process_mb is None:
                profile.notes.append("NVML does not attribute GPU memory to this process here (e.g. a container)")
        if not self.epochs:
            return profile
        profile.allocated_mb_per_epoch = [epoch.allocated_mb for epoch in self.epochs]
        profile.peak_allocated_mb_per_epoch = [epoch.peak_allocated_mb for epoch in self.epochs]
        profile.peak_reserved_mb_per_epoch = [epoch.peak_reserved_mb for epoch in self.epochs]
        profile.peak_nvml_device_used_mb_per_epoch = [epoch.peak_nvml_device_used_mb for epoch in self.epochs]
        profile.peak_allocated_mb = max(profile.peak_allocated_mb_per_epoch)
        profile.peak_reserved_mb = max(profile.peak_reserved_mb_per_epoch)
        profile.peak_inactive_split_mb = max(epoch.inactive_split_peak_mb for epoch in self.epochs)
        profile.num_alloc_retries = sum(epoch.alloc_retries for epoch in self.epochs)
        profile.num_ooms = sum(epoch.ooms for epoch in self.epochs)
        if len(self.epochs) >= 3:
            profile.leak = leak_estimate(
                profile.allocated_mb_per_epoch, self.confidence_level, self.leak_threshold_mb_per_epoch
            )
        else:
            profile.notes.append("leak slope needs at least 3 epochs")
        return profile
