"""Credentials out of everything gpubench writes or prints: URL passwords and secret-named query values masked."""

import logging
import re
from typing import Any

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
