"""System metrics of a job's MLflow run: CPU use, memory and, where the job runs on a GPU, that GPU's use, memory
and power, sampled on a thread of their own while the job runs and logged to the same run as ``system/...`` (the
run page's System metrics tab). ``tracking.system_metrics`` switches them on (the default) and
``tracking.system_metrics_interval_s`` sets the interval.

MLflow's collectors take the readings (:mod:`mlflow.system_metrics.metrics`: the CPU monitor through psutil, the GPU
monitor through pynvml, under the same ``system/...`` names as ``mlflow.start_run(log_system_metrics=True)``);
gpubench schedules them itself instead of MLflow's monitor thread, because:

* **The timed epochs.** MLflow's thread writes every sample to the store as it takes it (a ``log_batch``: about 24 ms
  on a SQLite store on the 2-core test machine, during whatever epoch is being timed) and reads the run back at
  every sample. Here the thread only takes the readings (about 0.2 ms); the points wait in memory and go
  out with the live run's next epoch batch (:meth:`gpubench.output.tracking_live.LiveRun.flush`), which is sent
  between epochs, outside their timed blocks. ``benchmarks/system_metrics_overhead.py`` measures both costs.
* **The device.** Only the device the benchmark runs on is sampled: the CPU and memory always, the GPU the job chose
  (its NVML index), not every GPU of the host, and no disk or network counters.
* **The points.** A point covers the interval before it (MLflow's first point reads 0 % CPU: psutil measures between
  two calls of one thread), and a job shorter than one interval still gets a point, taken as it ends (MLflow's loop
  logs nothing for it).
* **The store.** The job's run is bound to a client, not to MLflow's global tracking URI, which ``start_run`` needs
  and which every later job of a sweep would inherit.

The default interval, 10 s (MLflow's own), keeps the thread's share of a core under 0.01 %; points reach the store
within ``FLUSH_INTERVAL_S`` of an epoch's end (or when the job ends, for readings taken outside the epochs: the
burn-in, the batch search). MLflow's variable ``MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL`` is not read: the key is the
one setting.
"""

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from gpubench.output.redact import redact
from gpubench.output.tracking_store import reason
from gpubench.units import MS_PER_S

#: The prefix of every system metric (MLflow's: its UI shows these keys in the System metrics tab).
SYSTEM_PREFIX = "system/"
#: How long stopping waits for the last reading (s).
_JOIN_TIMEOUT_S = 30.0

#: A metric to log: key, value, timestamp (ms since the epoch), step.
MetricEntry = tuple[str, float, int, int]


def _gpu_collector(gpu_indices: Sequence[int] | None) -> Any | None:
    """MLflow's NVIDIA collector narrowed to the NVML devices ``gpu_indices`` (None: all), its AMD one where NVML is
    absent, or None without a GPU."""
    from mlflow.system_metrics.metrics.gpu_monitor import GPUMonitor
    from mlflow.system_metrics.metrics.rocm_monitor import ROCMMonitor

    try:
        collector = GPUMonitor()
    # No NVML (a CPU host, or no driver): AMD's library is tried next, and no GPU is sampled without either.
    except Exception:
        try:
            return ROCMMonitor()
        except Exception:
            return None
    if gpu_indices is not None:
        handles = collector.gpu_handles
        collector.gpu_handles = [handles[i] for i in gpu_indices if 0 <= i < len(handles)]
        collector.num_gpus = len(collector.gpu_handles)
    return collector


class SystemMetricsSampler:
    """Takes a reading every ``interval_s`` seconds on a daemon thread and keeps it as one step of the ``system/...``
    metrics until :meth:`take` hands it out; :meth:`stop` takes a last reading and ends the thread. A failure stops
    the sampling and is kept in :attr:`failure`; it never reaches the benchmark."""

    def __init__(self, collectors: Sequence[Any], interval_s: float, clock: Callable[[], float] = time.time) -> None:
        self._collectors = list(collectors)
        self._interval_s = interval_s
        self._clock = clock
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._points: list[MetricEntry] = []
        self._step = 0
        self._thread = threading.Thread(target=self._loop, name="gpubench-system-metrics", daemon=True)
        self.failure: str | None = None

    @classmethod
    def start(cls, interval_s: float, gpu_indices: Sequence[int] | None) -> "SystemMetricsSampler":
        """Start sampling the CPU and memory, and the GPUs whose NVML indices are ``gpu_indices`` (logged as
        ``gpu_0``, ``gpu_1``... in that order; ``[]``: none, the job runs on the CPU; None: every GPU NVML finds).
        Raises ImportError without psutil."""
        # MLflow says at INFO, on the terminal, when it finds no GPU: by design on a CPU job, not the user's concern.
        logging.getLogger("mlflow.system_metrics").setLevel(logging.WARNING)
        from mlflow.system_metrics.metrics.cpu_monitor import CPUMonitor

        collectors = [CPUMonitor()]
        gpu = None if gpu_indices == [] else _gpu_collector(gpu_indices)
        if gpu is not None:
            collectors.append(gpu)
        sampler = cls(collectors, interval_s)
        sampler._thread.start()
        return sampler

    def _loop(self) -> None:
        # Every reading is taken on this thread: psutil measures CPU use between two calls of the same thread, so the
        # first call sets the baseline (its reading is dropped), and the last point is taken here too, after stop().
        if not self._guarded(self._baseline):
            return
        while not self._stop.wait(self._interval_s):
            if not self._guarded(self._sample):
                return
        self._guarded(self._sample)

    def _guarded(self, step: Callable[[], None]) -> bool:
        """Run ``step``; False (with :attr:`failure` set) when it raised."""
        try:
            step()
        # Sampling must never cost the benchmark: a failure ends it and is said once, with the run's outcome.
        except Exception as exc:
            self.failure = redact(f"system metrics stopped ({reason(exc)})")
            return False
        return True

    def _baseline(self) -> None:
        for collector in self._collectors:
            collector.collect_metrics()
            collector.clear_metrics()

    def _sample(self) -> None:
        """Take one reading of every collector and keep it as the next step."""
        readings: dict[str, float] = {}
        for collector in self._collectors:
            collector.collect_metrics()
            readings.update(collector.aggregate_metrics())
            collector.clear_metrics()
        now_ms = int(self._clock() * MS_PER_S)
        with self._lock:
            self._points += [(SYSTEM_PREFIX + key, float(value), now_ms, self._step) for key, value in readings.items()]
            self._step += 1

    def take(self) -> list[MetricEntry]:
        """The readings taken since the last call, as metric entries (each reading one step)."""
        with self._lock:
            points, self._points = self._points, []
        return points

    def stop(self) -> None:
        """End the sampling: the thread takes a last reading, covering the time since the previous one, and ends."""
        self._stop.set()
        self._thread.join(timeout=_JOIN_TIMEOUT_S)
