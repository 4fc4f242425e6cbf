"""In-process build functions for :func:`gpubench.benchmark`, named as a factory string (PEP 562 attributes)."""

import itertools
import re
from collections.abc import Callable
from typing import Any

_FACTORIES: dict[str, Callable[..., Any]] = {}
_NUMBERS = itertools.count(1)


def register(build: Callable[..., Any]) -> str:
    """Register ``build`` and return the ``workloads.custom.factory`` value that names it."""
    label = re.sub(r"\W", "_", getattr(build, "__name__", "build"))
    name = f"inprocess_{next(_NUMBERS)}_{label}"
    _FACTORIES[name] = build
    return f"{__name__}:{name}"


def unregister(factory: str) -> None:
    """Forget the callable a :func:`register` value names (a no-op for any other value)."""
    module_name, _, name = factory.partition(":")
    if module_name == __name__:
        _FACTORIES.pop(name, None)


def __getattr__(name: str) -> Callable[..., Any]:
    try:
        return _FACTORIES[name]
    except KeyError:
        raise AttributeError(f"no in-process build function is registered as {name!r}") from None
