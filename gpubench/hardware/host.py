"""The host the benchmark runs on: its CPUs, how loaded it is, and how many threads torch uses (on the CPU they
compete with every other process, so a CPU result is only as good as its thread count)."""

import logging
import math
import os
import time

import torch

from gpubench.results import HostLoad, HostProbe

logger = logging.getLogger(__name__)

THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")


def available_cpus() -> int:
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def load_average() -> tuple[float, float, float] | None:
    """The 1, 5 and 15 minute load averages, or None where the OS has none."""
    try:
        return os.getloadavg()
    except (AttributeError, OSError):
        return None


def auto_cpu_threads(cpus: int, load_1m: float | None) -> int:
    """The CPUs the 1-minute load leaves idle, at least 1: a preempted thread makes every block wait for it."""
    if load_1m is None:
        return cpus
    return max(1, min(cpus, cpus - math.floor(load_1m)))


def choose_cpu_threads(configured: int | None, device: torch.device) -> tuple[int, str]:
    """Set torch's intra-op threads (``configured``, else the idle CPUs on the CPU, else torch's default); the
    count and how it was chosen."""
    if configured is not None:
        threads, source = configured, "hardware.cpu_threads"
    elif device.type == "cpu":
        loads = load_average()
        threads, source = auto_cpu_threads(available_cpus(), loads[0] if loads else None), "auto: the idle CPUs"
    else:
        threads, source = torch.get_num_threads(), "torch default (a GPU run)"
    torch.set_num_threads(threads)
    logger.info("torch intra-op threads: %d (%s, device %s)", threads, source, device)
    return threads, source


def host_load(threads_source: str) -> HostLoad:
    loads = load_average()
    return HostLoad(
        cpu_count=os.cpu_count() or 1,
        available_cpus=available_cpus(),
        load_average_1m=None if loads is None else loads[0],
        load_average_5m=None if loads is None else loads[1],
        load_average_15m=None if loads is None else loads[2],
        torch_num_threads=torch.get_num_threads(),
        torch_interop_threads=torch.get_num_interop_threads(),
        threads_source=threads_source,
        thread_environment={name: os.environ[name] for name in THREAD_VARIABLES if name in os.environ},
    )


def busy_host_warning(host: HostLoad) -> str | None:
    """A warning when the 1-minute load exceeds the CPUs available, else None."""
    load = host.load_average_1m
    if load is None or load <= host.available_cpus:
        return None
    return (
        f"the host is busy: load average {load:.1f} over {host.available_cpus} CPUs. Other processes compete with "
        "the benchmark, so CPU-side timings (and CPU runs entirely) can swing between identical runs; run on an "
        "idle machine, or compare runs only with the load they recorded (report: run.host)."
    )


_PROBE_LOOP_ADDITIONS = 200_000
_PROBE_MATMULS = 300
_PROBE_MATRIX_SIZE = 64


def _current_cpu() -> int | None:
    """The CPU this process runs on now (field 39 of Linux's /proc/self/stat, after field 2's spaces), or None."""
    try:
        with open("/proc/self/stat") as stat:
            return int(stat.read().rsplit(")", 1)[1].split()[36])
    except (OSError, IndexError, ValueError):
        return None


def probe_host_speed() -> HostProbe:
    """Milliseconds of fixed host work: a Python loop (a launch-bound step's Python) and small torch CPU matmuls
    on one thread (its framework overhead); a larger reading is a slower host at that moment."""
    start = time.perf_counter()
    total = 0
    for value in range(_PROBE_LOOP_ADDITIONS):
        total += value
    python_loop_ms = (time.perf_counter() - start) * 1000.0
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        # The matrix is its own square, so the values stay put.
        matrix = torch.full((_PROBE_MATRIX_SIZE, _PROBE_MATRIX_SIZE), 1.0 / _PROBE_MATRIX_SIZE)
        # The first product pays one-off costs.
        matrix = torch.mm(matrix, matrix)
        start = time.perf_counter()
        for _ in range(_PROBE_MATMULS):
            matrix = torch.mm(matrix, matrix)
        torch_cpu_op_ms = (time.perf_counter() - start) * 1000.0
    finally:
        torch.set_num_threads(threads)
    return HostProbe(python_loop_ms=python_loop_ms, torch_cpu_op_ms=torch_cpu_op_ms, cpu=_current_cpu())
