"""SIGINT, SIGTERM and SIGHUP handled alike: each raises :class:`KeyboardInterrupt` in the main thread, so one
interrupt path serves Ctrl-C, a scheduler's kill and a closed terminal; the exit code is 128 + the signal's number.
Standard library only, so that the handlers are installed before anything heavy is imported."""

import signal
from types import FrameType

#: The signals handled like Ctrl-C (SIGHUP does not exist on Windows).
HANDLED_SIGNALS: tuple[signal.Signals, ...] = tuple(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)
)

_received: list[int] = []


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    _received.append(signum)
    raise KeyboardInterrupt(signal.Signals(signum).name)


def install() -> None:
    """Make every signal of :data:`HANDLED_SIGNALS` raise KeyboardInterrupt (main thread only)."""
    for handled in HANDLED_SIGNALS:
        signal.signal(handled, _raise_interrupt)


def interrupting_signal() -> int | None:
    """The number of the first handled signal this process received, or None when none was."""
    return _received[0] if _received else None


def received_signal() -> int:
    """The number of the first handled signal received, or SIGINT's when none was."""
    return _received[0] if _received else int(signal.SIGINT)


def signal_name(signum: int) -> str:
    """``SIGTERM`` for 15, and so on."""
    return signal.Signals(signum).name


def interrupt_exit_code() -> int:
    """The process exit code after an interrupt: 128 + the signal's number."""
    return 128 + received_signal()
