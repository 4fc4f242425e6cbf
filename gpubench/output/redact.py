"""Credentials out of everything gpubench writes or prints: one function, :func:`redact`, used for the report, the
resolved config, the files Hydra saves, MLflow params and tags, the sweep summaries and every console line.

A tracking URI such as ``http://alice:SECRETPW42@host:5000`` or ``https://host/?token=...`` carries a secret that
MLflow needs to connect, so the configured value is used as given; only the copies that are stored or shown are
redacted. Redacted: the password of a URL's user info (``alice:***@``; user info without a password, such as a
bare token, becomes ``***@``), and the values of query parameters whose names say they hold a secret (``token``,
``password``, ``api_key``, signatures, ...). Text without a URL is returned unchanged.
"""

import logging
import re
from typing import Any

#: What a redacted secret is replaced with.
MASK = "***"

# scheme://userinfo@ — the user info stops at the first '/', '@' or whitespace (a password's own '@' or '/' must be
# percent-encoded in a URL); quotes and backticks end it too, so a URL inside a repr, a YAML string or a message that
# names it in backticks is found, and the closing quote or backtick kept. Hydra writes a sweep's
# override values with ':' and '=' escaped (``http\://alice\:pw@host``), so a backslash may precede them.
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
    """Redact every log record of this process as it is created, once: wraps the log record factory.

    Not a filter on handlers: Hydra's launchers reconfigure logging (new handlers) just before they log each job's
    overrides (``#0 : tracking.uri=http://user:password@host``), and a logger's filters miss its children's records.
    """
    factory = logging.getLogRecordFactory()
    if getattr(factory, "gpubench_redacts", False):
        return

    def redacting_factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        return _redact_record(factory(*args, **kwargs))

    redacting_factory.gpubench_redacts = True  # type: ignore[attr-defined]
    logging.setLogRecordFactory(redacting_factory)
