"""In-process build functions: how :func:`gpubench.benchmark` hands a Python callable to the ``custom`` workload.

The workload finds its build function by name, ``workloads.custom.factory=module:function``, so that the config
(a string, printable, sweepable, stored in the report) is the same whether the run started on the command line or
in a notebook. :func:`gpubench.benchmark` registers the callable here under a generated name and passes
``gpubench.models.custom.registry:<name>``; this module answers that name as an attribute (PEP 562), and the
callable is unregistered when the run ends. A report of such a run names the registry entry; ``workload.build``
in the report names the callable itself (``module.qualname``).
"""

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
