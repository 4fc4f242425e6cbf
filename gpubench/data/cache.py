"""Parquet cache of decoded bars, keyed by a hash of the source files' bytes and the reader version, written
atomically; and the ``data=parquet`` reader."""

import contextlib
import hashlib
import logging
import os
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from gpubench.data.bars import BAR_COLUMNS, BAR_SCHEMA, finish_bar_table
from gpubench.data.dbn import READER_VERSION
from gpubench.data.paths import resolve_data_paths
from gpubench.errors import DataError

logger = logging.getLogger(__name__)

#: Read files in blocks of this size when hashing, so a large file does not have to fit in memory twice.
_HASH_BLOCK_BYTES = 1 << 20


@contextlib.contextmanager
def atomic_path(destination: Path) -> Iterator[Path]:
    """Yield a temporary path beside ``destination`` (one file system, so the rename is atomic); rename it onto
    ``destination`` when the block succeeds, remove it when it raises."""
    destination.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary_name = tempfile.mkstemp(prefix=f".{destination.name}.", suffix=".tmp", dir=destination.parent)
    os.close(handle)
    temporary = Path(temporary_name)
    try:
        yield temporary
        os.replace(temporary, destination)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def file_digest(path: Path) -> str:
    """BLAKE2b (128-bit) hex digest of the bytes of one file."""
    digest = hashlib.blake2b(digest_size=16)
    try:
        with path.open("rb") as stream:
            while block := stream.read(_HASH_BLOCK_BYTES):
                digest.update(block)
    except OSError as exc:
        raise DataError(f"Cannot read the data file {path}: {exc.strerror or exc}.") from exc
    return digest.hexdigest()


def content_hash(paths: Sequence[Path], *, version: str) -> str:
    """32 hex characters hashing the contents of ``paths`` (as a set) and a reader ``version``."""
    combined = hashlib.blake2b(digest_size=16)
    combined.update(f"gpubench-bars-v{version}".encode())
    for digest in sorted(file_digest(path) for path in paths):
        combined.update(bytes.fromhex(digest))
    return combined.hexdigest()


@dataclass(frozen=True)
class CachedBars:
    """A bar table and where it came from: ``cache_hit`` is True when it was read from the Parquet cache."""

    table: pa.Table
    content_hash: str
    cache_hit: bool
    cache_file: Path


def cache_file_for(cache_dir: Path, key: str) -> Path:
    """The Parquet file that holds the bars whose content hash is ``key``."""
    return cache_dir / "bars" / f"{key}.parquet"


def _read_cache_file(path: Path) -> pa.Table | None:
    """The cached table, or None when the file is absent or unreadable (then it is rebuilt, not trusted)."""
    if not path.is_file():
        return None
    try:
        table = pq.read_table(path, memory_map=True)
    except (OSError, pa.ArrowException) as exc:
        logger.warning("Ignoring the unreadable bar cache %s (%s); decoding the source files again.", path, exc)
        return None
    if not table.schema.equals(BAR_SCHEMA):
        logger.warning("Ignoring the bar cache %s: its columns are not the bar schema; decoding again.", path)
        return None
    return table


def _write_cache_file(path: Path, table: pa.Table) -> None:
    """Store ``table`` as Parquet at ``path`` atomically; a cache that cannot be written only costs speed."""
    try:
        with atomic_path(path) as temporary:
            # LZ4 decompresses faster than Snappy; the cache is read far more than written.
            pq.write_table(table, temporary, compression="lz4")
    except OSError as exc:
        logger.warning("Cannot write the bar cache %s (%s); the next run will decode the files again.", path, exc)


def load_cached_bars(
    paths: Sequence[Path],
    cache_dir: Path,
    decode: Callable[[Sequence[Path]], pa.Table],
    *,
    version: str = READER_VERSION,
) -> CachedBars:
    """The bars of ``paths`` from the Parquet cache, else ``decode(paths)``, stored for the next run; ``version`` is
    part of the key."""
    key = content_hash(paths, version=version)
    cache_file = cache_file_for(cache_dir, key)
    table = _read_cache_file(cache_file)
    if table is not None:
        return CachedBars(table=table, content_hash=key, cache_hit=True, cache_file=cache_file)
    table = decode(paths)
    _write_cache_file(cache_file, table)
    return CachedBars(table=table, content_hash=key, cache_hit=False, cache_file=cache_file)


def resolve_parquet_paths(path: str | Path) -> list[Path]:
    """Parquet files named by ``path``: one file, a folder (its ``*.parquet``, sorted) or a glob."""
    return resolve_data_paths(path, suffixes=(".parquet",), kind="Parquet")


def read_parquet_bars(paths: Sequence[Path]) -> pa.Table:
    """Bars from Parquet files with the bar columns (ts_event in UTC nanoseconds or a timestamp), checked like DBN
    bars and sorted by symbol, then time."""
    tables: list[pa.Table] = []
    for path in paths:
        try:
            table = pq.read_table(path)
        except (OSError, pa.ArrowException) as exc:
            raise DataError(f"Cannot read the Parquet file {path}: {exc}. Is it a Parquet file?") from exc
        missing = [name for name in BAR_COLUMNS if name not in table.column_names]
        if missing:
            raise DataError(
                f"The Parquet file {path} lacks the column(s) {', '.join(missing)}; gpubench needs the bar "
                f"columns {', '.join(BAR_COLUMNS)} (ts_event in nanoseconds since the UNIX epoch, UTC)."
            )
        tables.append(_cast_to_bar_schema(table.select(list(BAR_COLUMNS)), path))
    return finish_bar_table(tables, [str(path) for path in paths], require_sorted=False)


def _cast_to_bar_schema(table: pa.Table, path: Path) -> pa.Table:
    """``table``'s bar columns converted to :data:`BAR_SCHEMA`; a column that cannot be converted is named."""
    columns: list[pa.Array] = []
    for field in BAR_SCHEMA:
        column = table.column(field.name)
        try:
            if field.name == "ts_event" and pa.types.is_timestamp(column.type):
                # A timestamp column counts from the UNIX epoch in its own unit; bring it to nanoseconds first.
                column = column.cast(pa.timestamp("ns", tz=column.type.tz)).cast(pa.int64())
            columns.append(column.cast(field.type))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise DataError(
                f"The column {field.name!r} of the Parquet file {path} has type {column.type}, which cannot be "
                f"read as {field.type}: {exc}."
            ) from exc
    return pa.Table.from_arrays(columns, schema=BAR_SCHEMA)
