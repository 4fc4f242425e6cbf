"""The host the benchmark runs on: its CPUs, how loaded it is, and how many threads torch uses.

On the CPU torch's intra-op threads compete with every other process, so a CPU result is only as good as its
thread count: :func:`choose_cpu_threads` makes it explicit, :func:`host_load` records it with the load, and
:func:`busy_host_warning` says when the load alone makes timings unreliable.
"""

import logging
import math
import os
import time

import torch

from gpubench.results import HostLoad, HostProbe

logger = logging.getLogger(__name__)

#: The environment variables that set the OpenMP/MKL thread pools torch may use.
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")


def available_cpus() -> int:
    """The CPUs this process may run on (its affinity mask where the OS has one, else all of them)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def load_average() -> tuple[float, float, float] | None:
    """The 1, 5 and 15 minute load averages (runnable processes), or None where the OS has none."""
    try:
        return os.getloadavg()
    except (AttributeError, OSError):
        return None


def auto_cpu_threads(cpus: int, load_1m: float | None) -> int:
    """The intra-op thread count ``hardware.cpu_threads: null`` chooses: the CPUs the load leaves idle (CPUs less
    the 1-minute load, rounded up), at least 1. Threads beyond the idle cores would be preempted by the other
    processes and turn every synchronised block into a wait for the slowest thread."""
    if load_1m is None:
        return cpus
    return max(1, min(cpus, cpus - math.floor(load_1m)))


def choose_cpu_threads(configured: int | None, device: torch.device) -> tuple[int, str]:
    """Set torch's intra-op thread count; returns it and how it was chosen: ``configured`` when given; on the CPU
    device without it, :func:`auto_cpu_threads`; on a GPU without it, torch's own default is kept (the CPU only
    feeds the device there)."""
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
    """The host's CPUs, load and torch's thread settings now; ``threads_source`` says how the count was chosen."""
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
    """A warning when other work keeps the CPUs busy (1-minute load above the CPUs available), else None."""
    load = host.load_average_1m
    if load is None or load <= host.available_cpus:
        return None
    return (
        f"the host is busy: load average {load:.1f} over {host.available_cpus} CPUs. Other processes compete with "
        "the benchmark, so CPU-side timings (and CPU runs entirely) can swing between identical runs; run on an "
        "idle machine, or compare runs only with the load they recorded (report: run.host)."
    )


#: The host probe's fixed work: a pure-Python loop of this many additions (several ms), and this many small matrix
#: products on one thread.
_PROBE_LOOP_ADDITIONS = 200_000
_PROBE_MATMULS = 300
_PROBE_MATRIX_SIZE = 64


def _current_cpu() -> int | None:
    """The CPU this process runs on now (Linux: field 39 of /proc/self/stat), None elsewhere."""
    try:
        with open("/proc/self/stat") as stat:
            # The command name (field 2) may hold spaces; the fields after its closing parenthesis start at field 3.
            return int(stat.read().rsplit(")", 1)[1].split()[36])
    except (OSError, IndexError, ValueError):
        return None


def probe_host_speed() -> HostProbe:
    """Time a fixed amount of host work (ms): the interpreter's speed (what a launch-bound training step's Python
    costs) and a small torch CPU operation on one thread (what its framework overhead costs). The same work each
    call, so the readings of one job compare directly: a larger one is a slower host at that moment."""
    start = time.perf_counter()
    total = 0
    for value in range(_PROBE_LOOP_ADDITIONS):
        total += value
    python_loop_ms = (time.perf_counter() - start) * 1000.0
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        # Each product of this matrix with itself is itself: the values stay put however many run.
        matrix = torch.full((_PROBE_MATRIX_SIZE, _PROBE_MATRIX_SIZE), 1.0 / _PROBE_MATRIX_SIZE)
        # The first product pays one-off costs (the kernel's dispatch and workspace): not part of the reading.
        matrix = torch.mm(matrix, matrix)
        start = time.perf_counter()
        for _ in range(_PROBE_MATMULS):
            matrix = torch.mm(matrix, matrix)
        torch_cpu_op_ms = (time.perf_counter() - start) * 1000.0
    finally:
        torch.set_num_threads(threads)
    return HostProbe(python_loop_ms=python_loop_ms, torch_cpu_op_ms=torch_cpu_op_ms, cpu=_current_cpu())
