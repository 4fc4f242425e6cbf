"""A SQLite MLflow store's file: its path, the cross-process lock every access holds, its state, and its repair."""

import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from filelock import FileLock, Timeout

from gpubench.errors import GpubenchError

SQLITE_PREFIX = "sqlite:///"
#: How long a job waits for another process's lock on a SQLite store before giving up (s).
STORE_LOCK_TIMEOUT_S = 120.0


class TrackingError(GpubenchError):
    """A tracking store cannot give what was asked of it: the store, the run, or the run's report."""


def sqlite_database(uri: str) -> Path | None:
    """The database file of a ``sqlite:///`` URI (relative to the working folder unless absolute), else None."""
    if not uri.startswith(SQLITE_PREFIX):
        return None
    path = uri[len(SQLITE_PREFIX) :].split("?", 1)[0]
    return Path(path) if path and path != ":memory:" else None


@contextmanager
def store_lock(uri: str, *, timeout_s: float = STORE_LOCK_TIMEOUT_S) -> Iterator[None]:
    """Hold an exclusive OS lock beside a SQLite store; :class:`TrackingError` after ``timeout_s`` s. Not reentrant."""
    database = sqlite_database(uri)
    if database is None:
        yield
        return
    database.parent.mkdir(parents=True, exist_ok=True)
    lock_path = database.with_name(database.name + ".lock")
    lock = FileLock(lock_path, timeout=timeout_s)
    try:
        lock.acquire()
    except Timeout:
        raise TrackingError(
            f"another process has held the lock {lock_path} of the MLflow store for over {timeout_s:g} s"
        ) from None
    try:
        yield
    finally:
        lock.release()


@dataclass(frozen=True)
class SqliteStoreState:
    """A SQLite store's tables, leftover ``_alembic_tmp_*`` tables, schema revision and run count."""

    tables: frozenset[str]
    leftover_tables: tuple[str, ...]
    revision: str | None
    run_count: int


def read_sqlite_state(database: Path) -> SqliteStoreState | None:
    """The store's state at ``database``, None when absent or empty; :class:`TrackingError` if not SQLite."""
    if not database.is_file() or database.stat().st_size == 0:
        return None
    try:
        with closing(sqlite3.connect(f"{database.resolve().as_uri()}?mode=ro", uri=True)) as connection:
            tables = frozenset(
                row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type='table'")
            )
            revision = None
            if "alembic_version" in tables:
                row = connection.execute("SELECT version_num FROM alembic_version").fetchone()
                revision = None if row is None else str(row[0])
            run_count = connection.execute("SELECT count(*) FROM runs").fetchone()[0] if "runs" in tables else 0
    except sqlite3.DatabaseError as exc:
        raise TrackingError(
            f"the MLflow store {database.resolve()} is damaged or not a SQLite database ({exc}); move the file "
            "aside, or set tracking.uri to another store"
        ) from exc
    leftovers = tuple(sorted(name for name in tables if name.startswith("_alembic_tmp_")))
    return SqliteStoreState(tables=tables, leftover_tables=leftovers, revision=revision, run_count=run_count)


def repair_sqlite_store(database: Path) -> str | None:
    """Move aside a half-created store that holds no runs, holding :func:`store_lock`; a notice when it acted."""
    state = read_sqlite_state(database)
    if state is None or not state.leftover_tables or state.run_count:
        return None
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
    backup = database.with_name(f"{database.name}.damaged-{stamp}")
    database.rename(backup)
    return (
        f"the MLflow store {database} held no runs and was left half-created by an interrupted schema migration "
        f"(tables {', '.join(state.leftover_tables)}); it was moved to {backup} and a new store created"
    )
