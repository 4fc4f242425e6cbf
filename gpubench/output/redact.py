"""Credentials out of everything gpubench writes or prints: URL passwords and secret-named query values masked."""

import contextlib
import logging
import re
import sys
from collections.abc import Iterator
from typing import Any, TextIO

#: What a redacted secret is replaced with.
MASK = "***"

# User info ends at '/', '@', whitespace, a quote or a backtick; Hydra escapes ':' with a backslash in overrides.
_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]*\\*://)(?P<userinfo>[^/@\s'\"`]+)@")
_SECRET_QUERY = re.compile(
    r"(?P<name>[?&;](?:[\w.\-]*?(?:token|password|passwd|pwd|secret|api[_\-]?key|apikey|access[_\-]?key|"
    r"signature|sig|credential|auth)[\w.\-]*)\\*=)(?P<value>[^&#\s'\"`]+)",
    re.IGNORECASE,
)


def _mask_userinfo(match: re.Match[str]) -> str:
    user, has_password, _ = match["userinfo"].partition(":")
    masked = f"{user}:{MASK}" if has_password else MASK
    return f"{match['scheme']}{masked}@"


def redact(text: str) -> str:
    """``text`` with the credentials of every URL in it masked (see the module docstring)."""
    if "://" not in text and "=" not in text:
        return text
    return _SECRET_QUERY.sub(rf"\g<name>{MASK}", _USERINFO.sub(_mask_userinfo, text))


def redact_tree(value: Any) -> Any:
    """A copy of ``value`` (nested dicts, lists, tuples) with :func:`redact` applied to every string in it."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {key: redact_tree(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(redact_tree(item) for item in value)
    return value


def _redact_record(record: logging.LogRecord) -> logging.LogRecord:
    message = record.getMessage()
    clean = redact(message)
    if clean != message:
        record.msg, record.args = clean, None
    return record


def install_log_redaction() -> None:
    """Redact every log record as it is created, by wrapping the log record factory (once)."""
    factory = logging.getLogRecordFactory()
    if getattr(factory, "gpubench_redacts", False):
        return

    def redacting_factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        return _redact_record(factory(*args, **kwargs))

    redacting_factory.gpubench_redacts = True  # type: ignore[attr-defined]
    logging.setLogRecordFactory(redacting_factory)


class _RedactingStream:
    """A text stream writing to ``stream`` with :func:`redact` applied; every other attribute is ``stream``'s."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(redact(text))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextlib.contextmanager
def redacted_output() -> Iterator[None]:
    """Redact what is written to stdout and stderr inside the block: Hydra prints the config (``--cfg``, ``--info``)
    with ``print``, past the log records' redaction."""
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _RedactingStream(sys.stdout), _RedactingStream(sys.stderr)  # type: ignore[assignment]
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved
