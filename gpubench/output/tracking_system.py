"""System metrics of a job's MLflow run (``system/...``): CPU, memory and the job's GPU, read by MLflow's collectors
on a thread of gpubench's own, whose points go out between epochs rather than during the timed ones."""

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from gpubench.output.redact import redact
from gpubench.output.tracking_store import reason
from gpubench.results.units import MS_PER_S

#: The prefix of every system metric (MLflow's: its UI shows these keys in the System metrics tab).
SYSTEM_PREFIX = "system/"
#: How long stopping waits for the last reading (s).
_JOIN_TIMEOUT_S = 30.0

#: A metric to log: key, value, timestamp (ms since the epoch), step.
MetricEntry = tuple[str, float, int, int]


def _gpu_collector(gpu_indices: Sequence[int] | None) -> Any | None:
    """MLflow's NVIDIA collector for the NVML devices ``gpu_indices`` (None: all), its AMD one without NVML, or None."""
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
    """Reads every ``interval_s`` seconds on a daemon thread until :meth:`take`; failures stop it, kept in
    :attr:`failure`."""

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
        """Start sampling CPU, memory and NVML GPUs ``gpu_indices`` (None: all); ImportError without psutil."""
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
        # psutil measures CPU between two calls of one thread: every reading is taken here.
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
        """End the sampling after a last reading covering the time since the previous one."""
        self._stop.set()
        self._thread.join(timeout=_JOIN_TIMEOUT_S)
