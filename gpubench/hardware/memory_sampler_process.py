"""The NVML memory sampler as a child process, so that sampling shares no GIL with training (a sampler thread costs
a launch-bound loop several times its own read time in GIL hand-offs).

Run as ``python -m gpubench.hardware.memory_sampler_process --nvml-index I --pid P --interval-ms X --output PATH``:
every ``X`` ms it appends one :data:`RECORD` (``perf_counter`` s, device-used MB, process MB or NaN) to ``PATH``.
It stops on SIGTERM (exit 0) or when its parent dies (removing ``PATH``); an NVML failure is one stderr line and
exit 1. It imports no torch, so it starts in tens of ms. ``--reader module:function`` replaces NVML in tests.
"""

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

#: One sample: ``time.perf_counter()`` seconds, device-used MB, process MB (NaN where not read). Native byte order
#: and no padding: the file is a private channel between two processes on one host, read back as C doubles.
RECORD = struct.Struct("=ddd")

#: Builds the read function from (NVML index, pid); :func:`nvml_reader` unless ``--reader`` names another.
ReaderFactory = Callable[[int, int], Callable[[], MemoryReading]]


def next_deadline_s(deadline_s: float, now_s: float, interval_s: float) -> float:
    """The first slot of the grid ``deadline_s + k·interval_s`` (k >= 1) after ``now_s`` (s): absolute slots, so the
    rate does not drift, and a read that overran skips the slots it missed."""
    deadline_s += interval_s
    if deadline_s <= now_s:
        deadline_s += math.floor((now_s - deadline_s) / interval_s + 1.0) * interval_s
    return deadline_s


def nvml_reader(nvml_index: int, pid: int) -> Callable[[], MemoryReading]:
    """A zero-argument function reading NVML device ``nvml_index``'s used memory and process ``pid``'s, in MB;
    RuntimeError when NVML cannot be initialised or has no such device (a sampler that cannot read must say so)."""
    nvml = Nvml()
    if not nvml.available:
        raise RuntimeError(nvml.notice)
    device = NvmlDevice(nvml, nvml_index)
    if device.handle is None:
        raise RuntimeError(f"NVML has no device with index {nvml_index}")
    return functools.partial(device.memory_reading, pid)


def load_reader_factory(spec: str | None) -> ReaderFactory:
    """The function named by ``module:function`` (importable from this process's sys.path), or :func:`nvml_reader`."""
    if spec is None:
        return nvml_reader
    module_name, _, function_name = spec.partition(":")
    return getattr(importlib.import_module(module_name), function_name)


def orphaned(parent_pid: int) -> bool:
    """True when this process's parent is no longer ``parent_pid`` (it died, and the process was re-parented)."""
    return os.getppid() != parent_pid


class _StopRequest:
    """Set by SIGTERM's handler; the sampling loop checks it once per sample."""

    def __init__(self) -> None:
        self.requested = False

    def __call__(self, signum: int, frame: object) -> None:
        self.requested = True


def sample(
    read: Callable[[], MemoryReading],
    write: Callable[[bytes], object],
    interval_s: float,
    *,
    stop_requested: Callable[[], bool],
    parent_gone: Callable[[], bool],
) -> bool:
    """Read and ``write`` one :data:`RECORD` every ``interval_s`` seconds until ``stop_requested()`` or
    ``parent_gone()``; True when it stopped because the parent was gone. An error raised by ``read`` or ``write``
    propagates.
    """
    # On Linux time.perf_counter() is CLOCK_MONOTONIC, one clock for every process on the host: the parent reads
    # these times on its own perf_counter scale and compares them with its epochs' edges.
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
        # A SIGTERM during the sleep runs the handler, and the sleep then resumes to its end (PEP 475): stopping
        # takes at most one interval, and the record in hand is always whole.
        time.sleep(max(0.0, deadline_s - clock()))


def _parse_arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nvml-index", type=int, required=True, help="NVML's index of the GPU to read")
    parser.add_argument("--pid", type=int, required=True, help="process whose GPU memory to read")
    parser.add_argument("--interval-ms", type=float, required=True, help="milliseconds between samples")
    parser.add_argument("--output", required=True, help="file the records are appended to")
    parser.add_argument(
        "--parent-pid", type=int, help="exit once the parent is no longer this process (default: the parent now)"
    )
    parser.add_argument("--reader", help="module:function building the read function (default: NVML)")
    arguments = parser.parse_args(argv)
    if not arguments.interval_ms > 0:
        parser.error(f"--interval-ms must be positive, got {arguments.interval_ms}")
    return arguments


def main(argv: Sequence[str] | None = None) -> int:
    """Sample until SIGTERM or the parent's death (exit status 0), or a failed read (1, one line on stderr)."""
    stop = _StopRequest()
    signal.signal(signal.SIGTERM, stop)
    # Ctrl-C in a terminal reaches every process of the foreground group; the parent handles it and stops this
    # process with SIGTERM, so a KeyboardInterrupt here would only turn a user's interrupt into a sampler error.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    arguments = _parse_arguments(argv)
    # Passed by the parent, so that a parent dying while this process starts up is still noticed.
    parent_pid = os.getppid() if arguments.parent_pid is None else arguments.parent_pid
    try:
        read = load_reader_factory(arguments.reader)(arguments.nvml_index, arguments.pid)
        # Unbuffered: each record is one write(2) of RECORD.size bytes, visible to the parent as soon as it returns.
        with open(arguments.output, "ab", buffering=0) as output:
            orphan = sample(
                read,
                output.write,
                arguments.interval_ms / 1e3,
                stop_requested=lambda: stop.requested,
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
