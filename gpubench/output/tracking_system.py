"""System metrics of a job's MLflow run: CPU use, memory and, where the job runs on a GPU, that GPU's use, memory
and power, sampled on a thread of their own while the job runs and logged to the same run as ``system/...`` (the
run page's System metrics tab). ``tracking.system_metrics`` switches them on (the default) and
``tracking.system_metrics_interval_s`` sets the interval.

MLflow's collectors do the sampling (:class:`mlflow.system_metrics.system_metrics_monitor.SystemMetricsMonitor`'s
CPU monitor through psutil, its GPU monitor through pynvml); gpubench drives them instead of
``mlflow.start_run(log_system_metrics=True)`` for four reasons:

* the job's run is bound to a client, not to MLflow's global tracking URI (which ``start_run`` needs and which every
  later job of a sweep would inherit);
* only the device the benchmark runs on is sampled: the CPU and memory always, the GPU the job chose (its NVML
  index), not every GPU of the host, and no disk or network counters;
* a point covers the interval before it (MLflow's loop publishes the sample taken at the interval's start, so its
  first point reads 0 % CPU), and a job shorter than one interval still gets a point, taken as it ends (MLflow's
  loop publishes nothing for it);
* each point costs one ``log_batch`` and no ``get_run`` (MLflow's loop reads the run back at every sample).

**Effect on the timings.** A sample runs on its own thread and takes the GIL for a short while (the collectors,
then one ``log_batch``): ``benchmarks/system_metrics_overhead.py`` measures the cost. The default interval
(``tracking.system_metrics_interval_s``, 10 s, MLflow's own default) puts at most one sample in 20 epochs of the
default 0.5 s minimum; a shorter interval gives denser charts at a proportionally higher cost. MLflow's variable
``MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL`` is not read: the key is the one setting.
"""

import threading
from collections.abc import Callable, Sequence
from typing import Any

from gpubench.output.sqlite_store import store_lock
from gpubench.output.tracking_store import reason
from gpubench.redact import redact

#: How long stopping waits for a sample in progress (s).
_JOIN_TIMEOUT_S = 30.0


class SystemMetricsSampler:
    """Samples the system every ``interval_s`` seconds on a daemon thread and logs each sample to the run ``run_id``
    as one step of the ``system/...`` metrics; :meth:`stop` takes a last sample and ends the thread. A failure stops
    the sampling and is kept in :attr:`failure`; it never reaches the benchmark."""

    def __init__(self, monitor: Any, tracking_uri: str, interval_s: float) -> None:
        self._monitor = monitor
        self._uri = tracking_uri
        self._interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="gpubench-system-metrics", daemon=True)
        self.failure: str | None = None

    @classmethod
    def start(
        cls, run_id: str, tracking_uri: str, interval_s: float, gpu_indices: Sequence[int] | None
    ) -> "SystemMetricsSampler":
        """Start sampling for the run ``run_id`` in the store at ``tracking_uri``: the CPU and memory, and the GPUs
        whose NVML indices are ``gpu_indices`` (logged as ``gpu_0``, ``gpu_1``... in that order; ``[]``: none, the job
        runs on the CPU; None: every GPU NVML finds). Raises ImportError without psutil."""
        from mlflow.system_metrics.metrics.cpu_monitor import CPUMonitor
        from mlflow.system_metrics.metrics.gpu_monitor import GPUMonitor
        from mlflow.system_metrics.system_metrics_monitor import SystemMetricsMonitor

        monitor = SystemMetricsMonitor(
            run_id, sampling_interval=interval_s, samples_before_logging=1, tracking_uri=tracking_uri
        )
        kept: list[Any] = []
        for collector in monitor.monitors:
            if isinstance(collector, CPUMonitor):
                kept.append(collector)
            elif isinstance(collector, GPUMonitor) and gpu_indices != []:
                if gpu_indices is not None:
                    handles = collector.gpu_handles
                    collector.gpu_handles = [handles[i] for i in gpu_indices if 0 <= i < len(handles)]
                    collector.num_gpus = len(collector.gpu_handles)
                kept.append(collector)
        monitor.monitors = kept
        sampler = cls(monitor, tracking_uri, interval_s)
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
        self._monitor.collect_metrics()
        for collector in self._monitor.monitors:
            collector.clear_metrics()

    def _sample(self) -> None:
        """Collect and log one point."""
        self._monitor.collect_metrics()
        metrics = self._monitor.aggregate_metrics()
        if metrics:
            with store_lock(self._uri):
                self._monitor.publish_metrics(metrics)
                self._monitor.mlflow_logger.flush()

    def stop(self) -> None:
        """End the sampling: the thread logs a last point, covering the time since the previous one, and ends."""
        self._stop.set()
        self._thread.join(timeout=_JOIN_TIMEOUT_S)
