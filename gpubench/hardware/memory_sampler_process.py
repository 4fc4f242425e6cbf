"""The NVML memory sampler as a child process, so that sampling shares no GIL with training; it imports no torch.

Every ``--interval-ms`` it appends one :data:`RECORD` to ``--output``, until SIGTERM (exit 0) or its parent's death
(removing the file); a failed read is one stderr line and exit 1. ``--reader module:function`` replaces NVML."""

import argparse
import contextlib
import functools
import importlib
import math
import os
import signal
import struct
import sys
import time
from collections.abc import Callable, Sequence

from gpubench.hardware.nvml import MemoryReading, Nvml, NvmlDevice

#: ``perf_counter`` s, device-used MB, process MB (NaN where not read), native order: one host reads it back.
RECORD = struct.Struct("=ddd")

ReaderFactory = Callable[[int, int], Callable[[], MemoryReading]]


def next_deadline_s(deadline_s: float, now_s: float, interval_s: float) -> float:
    """The first slot of ``deadline_s + k·interval_s`` (k >= 1) after ``now_s`` (s): the rate does not drift, and an
    overrun skips the slots it missed."""
    deadline_s += interval_s
    if deadline_s <= now_s:
        deadline_s += math.floor((now_s - deadline_s) / interval_s + 1.0) * interval_s
    return deadline_s


def nvml_reader(nvml_index: int, pid: int) -> Callable[[], MemoryReading]:
    """A function reading NVML device ``nvml_index``'s used memory and process ``pid``'s (MB); RuntimeError
    without NVML or the device."""
    nvml = Nvml()
    if not nvml.available:
        raise RuntimeError(nvml.notice)
    device = NvmlDevice(nvml, nvml_index)
    if device.handle is None:
        raise RuntimeError(f"NVML has no device with index {nvml_index}")
    return functools.partial(device.memory_reading, pid)


def load_reader_factory(spec: str | None) -> ReaderFactory:
    if spec is None:
        return nvml_reader
    module_name, _, function_name = spec.partition(":")
    return getattr(importlib.import_module(module_name), function_name)


def orphaned(parent_pid: int) -> bool:
    """True once this process was re-parented away from ``parent_pid`` (it died)."""
    return os.getppid() != parent_pid


def sample(
    read: Callable[[], MemoryReading],
    write: Callable[[bytes], object],
    interval_s: float,
    *,
    stop_requested: Callable[[], bool],
    parent_gone: Callable[[], bool],
) -> bool:
    """``write`` one :data:`RECORD` every ``interval_s`` s until ``stop_requested()`` or ``parent_gone()`` (True)."""
    # Linux's perf_counter is CLOCK_MONOTONIC, shared by the processes of a host: the parent's scale.
    clock, pack, nan = time.perf_counter, RECORD.pack, math.nan
    deadline_s = clock()
    while True:
        if stop_requested():
            return False
        if parent_gone():
            return True
        reading = read()
        now_s = clock()
        device_mb, process_mb = reading.device_used_mb, reading.process_used_mb
        write(pack(now_s, nan if device_mb is None else device_mb, nan if process_mb is None else process_mb))
        deadline_s = next_deadline_s(deadline_s, now_s, interval_s)
        # A SIGTERM's handler runs and the sleep resumes (PEP 475): the record in hand is always whole.
        time.sleep(max(0.0, deadline_s - clock()))


def _parse_arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nvml-index", type=int, required=True, help="NVML's index of the GPU to read")
    parser.add_argument("--pid", type=int, required=True, help="process whose GPU memory to read")
    parser.add_argument("--interval-ms", type=float, required=True, help="milliseconds between samples")
    parser.add_argument("--output", required=True, help="file the records are appended to")
    parser.add_argument("--parent-pid", type=int, help="exit once this process is gone (default: the parent now)")
    parser.add_argument("--reader", help="module:function building the read function (default: NVML)")
    arguments = parser.parse_args(argv)
    if not arguments.interval_ms > 0:
        parser.error(f"--interval-ms must be positive, got {arguments.interval_ms}")
    return arguments


def main(argv: Sequence[str] | None = None) -> int:
    stop_requests: list[int] = []
    signal.signal(signal.SIGTERM, lambda signum, frame: stop_requests.append(signum))
    # Ctrl-C reaches the whole process group; the parent handles it and stops this process with SIGTERM.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    arguments = _parse_arguments(argv)
    # Passed by the parent, so that its death during this start-up is noticed.
    parent_pid = os.getppid() if arguments.parent_pid is None else arguments.parent_pid
    try:
        read = load_reader_factory(arguments.reader)(arguments.nvml_index, arguments.pid)
        # Unbuffered: each record is one write(2), visible to the parent at once.
        with open(arguments.output, "ab", buffering=0) as output:
            orphan = sample(
                read,
                output.write,
                arguments.interval_ms / 1e3,
                stop_requested=lambda: bool(stop_requests),
                parent_gone=lambda: orphaned(parent_pid),
            )
    except Exception as error:
        print(f"gpubench memory sampler: {type(error).__name__}: {error}", file=sys.stderr, flush=True)
        return 1
    if orphan:
        with contextlib.suppress(FileNotFoundError):
            os.remove(arguments.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
