"""Finding the user's ``build`` function from ``workloads.custom.factory``, the current folder on the import path."""

import importlib
import inspect
import os
import re
import sys
from collections.abc import Callable
from typing import Any

from gpubench.errors import ConfigError

#: The config key every error below names.
FACTORY_KEY = "workloads.custom.factory"

_IDENTIFIER = r"[A-Za-z_][A-Za-z0-9_]*"
_FACTORY_FORM = re.compile(rf"^{_IDENTIFIER}(\.{_IDENTIFIER})*:{_IDENTIFIER}(\.{_IDENTIFIER})*$")

#: What a valid value looks like, for the error messages.
FACTORY_FORM = (
    "`module.path:function`, where `function(batch_size: int, device: torch.device)` returns a callable that runs "
    "one optimizer update and returns its loss tensor (or None), e.g. workloads.custom.factory=mytrain:build"
)


def factory_error(spec: str, problem: str) -> ConfigError:
    """A ConfigError for the factory ``spec``: what is wrong with it, and what the key must be."""
    return ConfigError(f"`{FACTORY_KEY}` = {spec!r} is not valid: {problem}. It must be {FACTORY_FORM}.")


def _ensure_cwd_importable() -> None:
    """Append the current folder to the import path (appended, so it shadows no installed package)."""
    cwd = os.getcwd()
    if not any(os.path.abspath(entry or os.curdir) == cwd for entry in sys.path):
        sys.path.append(cwd)


def _import_module(spec: str, module_name: str) -> Any:
    _ensure_cwd_importable()
    try:
        return importlib.import_module(module_name)
    except Exception as exc:  # any failure while importing the user's module is a bad value of the key
        where = f"the current folder ({os.getcwd()}) or the Python path"
        raise factory_error(
            spec, f"module {module_name} could not be imported from {where} ({type(exc).__name__}: {exc})"
        ) from None


def load_factory(spec: str) -> Callable[..., Any]:
    """The ``build`` function ``spec`` names, importable and callable as ``build(batch_size, device)``."""
    if not _FACTORY_FORM.match(spec):
        raise factory_error(spec, "it is not of the form module.path:function")
    module_name, attribute_path = spec.split(":")
    target: Any = _import_module(spec, module_name)
    for attribute in attribute_path.split("."):
        if not hasattr(target, attribute):
            source = getattr(target, "__file__", None) or getattr(target, "__name__", repr(target))
            raise factory_error(spec, f"{source} has no attribute {attribute!r}")
        target = getattr(target, attribute)
    if not callable(target):
        raise factory_error(spec, f"{attribute_path} is not callable (its type is {type(target).__name__})")
    try:
        signature = inspect.signature(target)
    except (TypeError, ValueError):  # a builtin without a signature: calling it will tell
        return target
    try:
        signature.bind(1, "cpu")
    except TypeError as exc:
        raise factory_error(
            spec, f"{attribute_path}{signature} cannot be called as {attribute_path}(batch_size, device) ({exc})"
        ) from None
    return target


def describe_factory(build: Callable[..., Any]) -> str:
    """``module.qualname`` of a build function, for the report (``repr`` when it has no such names)."""
    module, qualname = getattr(build, "__module__", None), getattr(build, "__qualname__", None)
    return f"{module}.{qualname}" if module and qualname else repr(build)
