"""Range checks of config values: each failure is a :class:`ConfigError` naming the dotted key, the value given
and what would be valid (the config dataclasses call these in ``__post_init__``)."""

from typing import Any

from gpubench.errors import ConfigError


def require(condition: bool, key: str, value: Any, valid: str) -> None:
    """Raise a ConfigError naming ``key`` when ``condition`` is false; ``valid`` says what the value must be."""
    if not condition:
        raise ConfigError(f"`{key}` = {value!r} is not valid: it must be {valid}.")


def require_positive(key: str, value: float) -> None:
    require(value > 0, key, value, "greater than 0")


def require_choice(key: str, value: Any, options: tuple[str, ...]) -> None:
    require(value in options, key, value, "one of " + ", ".join(options))


def require_probability(key: str, value: float, *, closed: bool = False) -> None:
    if closed:
        require(0.0 <= value <= 1.0, key, value, "in [0, 1]")
    else:
        require(0.0 < value < 1.0, key, value, "strictly between 0 and 1")
