"""A record of the machine's history as it is stored, a line of the history file or a tracked run's
``history_record.json``: its per-model entries, and which stored records can be read."""

import json
from collections.abc import Iterable
from typing import Any


def entries(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The record's per-model entries (those that are JSON objects)."""
    models = record.get("models")
    return [m for m in models.values() if isinstance(m, dict)] if isinstance(models, dict) else []


def _readable(record: Any) -> bool:
    """Whether ``record`` is a JSON object whose ``record_id``, if any, is a string and whose every entry has a
    positive mean step time and a non-negative relative variance."""
    try:
        return (
            isinstance(record, dict)
            and isinstance(record.get("record_id", ""), str)
            and all(float(e["mean_step_ms"]) > 0 and float(e["relative_variance"]) >= 0 for e in entries(record))
        )
    except (ValueError, TypeError, KeyError):
        return False


def machine_records(texts: Iterable[str], machine: str) -> tuple[list[dict[str, Any]], int]:
    """The records of ``machine`` among the JSON ``texts``, and how many texts cannot be read; a readable record of
    another machine is left out, not counted."""
    records: list[dict[str, Any]] = []
    unreadable = 0
    for text in texts:
        try:
            record = json.loads(text)
        except ValueError:
            record = None
        if not _readable(record):
            unreadable += 1
        elif record.get("machine") == machine:
            records.append(record)
    return records, unreadable
