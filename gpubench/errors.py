"""Errors a user can act on: the entry point prints the message, which names the key, file or value, without a
traceback."""

from typing import Any


class GpubenchError(Exception):
    """Base class for errors caused by the user's input or environment (not by a bug in gpubench)."""


class ConfigError(GpubenchError):
    """A configuration value is out of range or not one of the valid options."""


class DataError(GpubenchError):
    """A market-data file or folder is missing, empty, corrupted, truncated or of an unsupported schema."""


class OutputError(GpubenchError):
    """A report or artifact cannot be written where the configuration says."""


def require(condition: bool, key: str, value: Any, valid: str) -> None:
    """Raise a ConfigError naming ``key`` when ``condition`` is false; ``valid`` says what the value must be."""
    if not condition:
        raise ConfigError(f"`{key}` = {value!r} is not valid: it must be {valid}.")


def require_positive(key: str, value: float) -> None:
    require(value > 0, key, value, "greater than 0")


def require_positive_fields(config: Any, prefix: str, names: str) -> None:
    """:func:`require_positive` on each of ``config``'s space-separated fields ``names``, keyed ``prefix.<name>``."""
    for name in names.split():
        require_positive(f"{prefix}.{name}", getattr(config, name))


def require_choice(key: str, value: Any, options: tuple[str, ...]) -> None:
    require(value in options, key, value, "one of " + ", ".join(options))


def require_probability(key: str, value: float, *, closed: bool = False) -> None:
    if closed:
        require(0.0 <= value <= 1.0, key, value, "in [0, 1]")
    else:
        require(0.0 < value < 1.0, key, value, "strictly between 0 and 1")
