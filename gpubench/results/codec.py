"""The codec every report section shares: :class:`Record` writes a dataclass's fields by name and reads them back."""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping
from dataclasses import MISSING, fields, is_dataclass
from typing import Any, ClassVar, TypeVar, Union, get_args, get_origin

R = TypeVar("R", bound="Record")
#: The metadata of a field left out of the dict while None or empty: a section a run may not have, such as a batch
#: search on the CPU (``field(default=None, metadata=OMIT_EMPTY)``).
OMIT_EMPTY = {"omit_empty": True}


class ReportFormatError(ValueError):
    """A report (or one of its sections) does not match this schema: an unknown key, or a value of the wrong kind."""


def _plain(value: Any) -> Any:
    """A JSON-ready copy of ``value``: records become dicts, tuples lists, numpy scalars Python numbers."""
    if isinstance(value, Record):
        return value.to_dict()
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, str | bytes):  # a numpy scalar
        return value.item()
    return value


def _build(hint: Any, value: Any, where: str) -> Any:
    """``value`` read from JSON, shaped as the type ``hint`` says (records, lists, tuples, dicts, optionals)."""
    if value is None:
        return None
    origin = get_origin(hint)
    if origin in (Union, types.UnionType):
        options = [arg for arg in get_args(hint) if arg is not type(None)]
        if len(options) == 1:
            return _build(options[0], value, where)
        return value  # a union of plain types (e.g. int | str): JSON keeps the kind
    if isinstance(hint, type) and issubclass(hint, Record):
        if not isinstance(value, Mapping):
            raise ReportFormatError(f"`{where}`: expected an object for {hint.__name__}, got {type(value).__name__}")
        return hint.from_dict(value, where=where)
    if origin in (list, tuple) and not isinstance(value, list | tuple):
        # A string would otherwise be read as the list of its characters.
        raise ReportFormatError(f"`{where}`: expected a list, got {type(value).__name__} {value!r}")
    if origin is list:
        (item,) = get_args(hint) or (Any,)
        return [_build(item, v, f"{where}[{i}]") for i, v in enumerate(value)]
    if origin is tuple:
        args = get_args(hint)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_build(args[0], v, f"{where}[{i}]") for i, v in enumerate(value))
        return tuple(_build(a, v, f"{where}[{i}]") for i, (a, v) in enumerate(zip(args, value, strict=True)))
    if origin is dict:
        _, item = get_args(hint) or (str, Any)
        return {k: _build(item, v, f"{where}.{k}") for k, v in value.items()}
    if hint in (int, float) and (isinstance(value, bool) or not isinstance(value, int | float)):
        raise ReportFormatError(f"`{where}`: expected a number, got {type(value).__name__} {value!r}")
    if hint is float and isinstance(value, int):
        return float(value)
    return value


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


class Record:
    """A report section: ``to_dict`` writes its fields by name (leaving out :data:`OMIT_EMPTY` ones while empty), then
    the figures named in ``_DERIVED``; ``from_dict`` reads them back, refusing keys it does not know."""

    _DERIVED: ClassVar[tuple[str, ...]] = ()

    def derived(self) -> dict[str, Any]:
        """The figures this record writes beside its fields (computed from them; never read back)."""
        return {name: getattr(self, name) for name in self._DERIVED}

    def to_dict(self) -> dict[str, Any]:
        """The section as JSON-ready plain values, fields in declaration order, then the derived figures."""
        assert is_dataclass(self)
        data = {
            f.name: _plain(getattr(self, f.name))
            for f in fields(self)
            if not (f.metadata.get("omit_empty") and getattr(self, f.name) in (None, [], {}, ""))
        }
        data.update(_plain(self.derived()))
        return data

    @classmethod
    def from_dict(cls: type[R], data: Mapping[str, Any], *, where: str | None = None) -> R:
        """The record from a dict written by :meth:`to_dict`."""
        where = where or cls.__name__
        assert is_dataclass(cls)
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - names - set(cls._DERIVED))
        if unknown:
            raise ReportFormatError(f"`{where}` has keys this schema does not know: {', '.join(unknown)}")
        hints = _hints(cls)
        missing = [
            f.name
            for f in fields(cls)
            if f.name not in data and f.default is MISSING and f.default_factory is MISSING  # type: ignore[misc]
        ]
        if missing:
            raise ReportFormatError(f"`{where}` lacks required keys: {', '.join(missing)}")
        kwargs = {name: _build(hints[name], data[name], f"{where}.{name}") for name in names if name in data}
        return cls(**kwargs)
