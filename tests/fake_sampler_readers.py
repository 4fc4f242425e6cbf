"""Read functions for the memory sampler's child process in tests, named as ``--reader fake_sampler_readers:NAME``.

The child imports this module by name from its own ``sys.path``, so tests put this folder on its ``PYTHONPATH``.
Each factory takes (nvml_index, pid), like :func:`gpubench.hardware.memory_sampler_process.nvml_reader`, and returns a
zero-argument read function; readings are in MB.
"""

import time
from collections.abc import Callable

from gpubench.hardware.nvml import MemoryReading

#: Reads :func:`failing_after_three` answers before its read raises.
GOOD_READS_BEFORE_FAILURE = 3


def counting_device_mb(sample: int, nvml_index: int) -> float:
    """The device MB :func:`counting` reports on its ``sample``-th read (0-based): 1000 per NVML index + 100 + n."""
    return 1000.0 * nvml_index + 100.0 + sample


def counting(nvml_index: int, pid: int) -> Callable[[], MemoryReading]:
    """Device MB :func:`counting_device_mb`; process MB equal to ``pid`` on even reads, not read (None) on odd ones."""
    samples = iter(range(1_000_000_000))

    def read() -> MemoryReading:
        sample = next(samples)
        return MemoryReading(counting_device_mb(sample, nvml_index), float(pid) if sample % 2 == 0 else None)

    return read


def failing_after_three(nvml_index: int, pid: int) -> Callable[[], MemoryReading]:
    """Reads 100 MB :data:`GOOD_READS_BEFORE_FAILURE` times, then raises OSError("device vanished")."""
    reads = iter(range(1_000_000_000))

    def read() -> MemoryReading:
        if next(reads) >= GOOD_READS_BEFORE_FAILURE:
            raise OSError("device vanished")
        return MemoryReading(100.0, None)

    return read


def unopenable(nvml_index: int, pid: int) -> Callable[[], MemoryReading]:
    """Fails as NVML does when the device cannot be opened."""
    raise RuntimeError(f"NVML has no device with index {nvml_index}")


def hanging(nvml_index: int, pid: int) -> Callable[[], MemoryReading]:
    """A first read that never returns in a test's time (a wedged driver)."""

    def read() -> MemoryReading:
        time.sleep(600.0)
        return MemoryReading(None, None)

    return read
