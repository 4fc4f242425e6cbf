"""DBN files: the OHLCV bar reader (``databento``) and the writer the synthetic generator uses (``databento_dbn``).

Bars are keyed by (symbol, publisher, time); files without records are set aside. The reader checks every file itself
(complete zstd frames, whole records, headers and values) because ``databento.DBNStore`` silently returns a truncated
file's records. Both libraries are imported inside functions only."""

import datetime as dt
import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from gpubench.data.bars import BAR_SCHEMA, PUBLISHER_COLUMN, finish_bar_table, iso_from_ns
from gpubench.data.config import PUBLISHER_MODES
from gpubench.data.paths import describe_files, resolve_data_paths
from gpubench.errors import DataError

if TYPE_CHECKING:
    import databento

#: Schemas the reader accepts: every one is a stream of OHLCV bar records of one fixed size, in every DBN version.
SUPPORTED_SCHEMAS: tuple[str, ...] = ("ohlcv-1s", "ohlcv-1m", "ohlcv-1h", "ohlcv-1d", "ohlcv-eod")
#: Bump when the reader's output for the same bytes changes: it is part of the Parquet cache key.
READER_VERSION = "2"
#: Joins a symbol and its publisher's name into a series name under ``data.publishers=separate``.
PUBLISHER_SEPARATOR = "@"
#: DBN prices are int64 fixed-point numbers in units of 1e-9.
FIXED_PRICE_SCALE = 1_000_000_000
#: The first four bytes of every zstd frame.
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
#: Uncompressed DBN starts with "DBN", a version byte and the little-endian length of the rest of the metadata.
_DBN_PREFIX_BYTES = 8


def resolve_dbn_paths(path: str | Path) -> list[Path]:
    """DBN files named by ``path``: a ``.dbn``/``.dbn.zst`` file, a folder of them (sorted by name) or a glob."""
    return resolve_data_paths(path, suffixes=(".dbn", ".dbn.zst"), kind="DBN")


@dataclass(frozen=True)
class DbnFiles:
    """DBN files sorted into those that hold bars and those that hold none (valid files with metadata only)."""

    with_bars: list[Path]
    without_bars: list[Path]


def select_dbn_files(files: Sequence[Path]) -> DbnFiles:
    """Sort ``files`` into those with records and those without; raise DataError when none holds a record or a file
    is damaged. Files with records are read only up to their first record."""
    without_bars = [path for path in files if _may_hold_no_records(path) and _read_dbn_file(path).num_rows == 0]
    skipped = set(without_bars)
    with_bars = [path for path in files if path not in skipped]
    if not with_bars:
        raise _no_bars_error(without_bars)
    return DbnFiles(with_bars=with_bars, without_bars=without_bars)


def _no_bars_error(paths: Sequence[Path]) -> DataError:
    if len(paths) == 1:
        where = f"The DBN file {paths[0]} holds no bars: it has"
    else:
        where = f"None of the {len(paths)} DBN files holds bars ({describe_files(paths)}): each has"
    return DataError(
        f"{where} metadata but zero OHLCV records, which Databento writes for a request without trades in its "
        "window (a holiday or weekend, a symbol that did not trade, a window before the data starts). gpubench "
        "needs at least one file with bars in data.path; request a window with trading."
    )


def _may_hold_no_records(path: Path) -> bool:
    """False when ``path`` certainly has bytes past its DBN header; True is only a "maybe" (the full read reports
    damage)."""
    import zstandard

    try:
        with path.open("rb") as stream:
            magic = stream.read(len(_ZSTD_MAGIC))
            stream.seek(0)
            if magic != _ZSTD_MAGIC:
                return _holds_no_more_than_header(stream)
            with zstandard.ZstdDecompressor().stream_reader(stream, read_across_frames=True) as reader:
                return _holds_no_more_than_header(reader)
    except (OSError, zstandard.ZstdError):
        return True


def _holds_no_more_than_header(stream: IO[bytes]) -> bool:
    """Whether the DBN bytes of ``stream`` end at or before the end of the header that their prefix announces."""
    prefix = _read_up_to(stream, _DBN_PREFIX_BYTES)
    if len(prefix) < _DBN_PREFIX_BYTES or not prefix.startswith(b"DBN"):
        return True
    metadata_bytes = int.from_bytes(prefix[4:_DBN_PREFIX_BYTES], "little")
    return len(_read_up_to(stream, metadata_bytes + 1)) <= metadata_bytes


def _read_up_to(stream: IO[bytes], size: int) -> bytes:
    """Up to ``size`` bytes of ``stream``, fewer only at its end (a decompressing reader may return short reads)."""
    chunks: list[bytes] = []
    remaining = size
    while remaining > 0:
        chunk = stream.read(remaining)
        if not chunk:
            break
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def read_dbn_bars(paths: str | Path | Sequence[str | Path], *, publishers: str = "aggregate") -> pa.Table:
    """Decode and validate OHLCV DBN files into one bar table sorted by symbol, then time; DataError naming the file."""
    files = resolve_dbn_paths(paths) if isinstance(paths, str | Path) else [Path(p) for p in paths]
    tables = [_read_dbn_file(path) for path in files]
    if files and not any(table.num_rows for table in tables):
        raise _no_bars_error(files)
    bars = finish_bar_table(tables, [str(path) for path in files], require_sorted=True, publisher_name=publisher_name)
    return combine_publishers(bars, publishers)


def _read_dbn_file(path: Path) -> pa.Table:
    """One validated DBN file's bars (unsorted across symbols, in the file's order)."""
    import databento
    import databento_dbn

    payload, header_bytes = _dbn_payload(path)
    try:
        # A BytesIO rather than bytes: databento names a bytes source by its repr, which copies the whole payload.
        store = databento.DBNStore.from_bytes(io.BytesIO(payload))
    except (databento_dbn.DBNError, databento.BentoError, ValueError) as exc:
        raise DataError(
            f"The DBN file {path} has corrupted metadata ({exc}); the file is damaged or not DBN data. "
            "Download it again."
        ) from exc
    metadata = store.metadata
    schema = metadata.schema
    if schema is None:
        raise DataError(
            f"The DBN file {path} mixes record types (no single schema, as in a live capture); gpubench reads "
            f"OHLCV schemas: {', '.join(SUPPORTED_SCHEMAS)}."
        )
    if str(schema) not in SUPPORTED_SCHEMAS:
        raise DataError(
            f"The file {path} has schema {str(schema)!r}; gpubench reads OHLCV schemas: "
            f"{', '.join(SUPPORTED_SCHEMAS)}. Request OHLCV bars from Databento, or convert the file to Parquet "
            "bars and use data=parquet."
        )
    if metadata.ts_out:
        raise DataError(
            f"The DBN file {path} carries live send timestamps (ts_out); gpubench reads historical OHLCV files "
            "without them."
        )
    record_bytes = databento_dbn.OHLCVMsg.size_hint
    body_bytes = len(payload) - header_bytes
    if body_bytes % record_bytes:
        raise DataError(
            f"The DBN file {path} is truncated: its {body_bytes} bytes of records are not a whole number of "
            f"{record_bytes}-byte OHLCV records (the last one is cut). Download the file again."
        )
    # Viewed in place: databento has no ohlcv-eod struct for to_ndarray, and the record layout is the same in DBN 1-3.
    records = np.frombuffer(payload, dtype=databento_dbn.OHLCVMsg._dtypes, offset=header_bytes)
    # Early Databento files mark OHLCV records with the cadence-less "deprecated" type; both are the same layout.
    valid_rtypes = (
        databento_dbn.RType.from_schema(databento_dbn.Schema(str(schema))).value,
        databento_dbn.RType.OHLCV_DEPRECATED.value,
    )
    _check_record_headers(path, records, valid_rtypes)
    return _records_to_table(path, records, metadata)


def _dbn_payload(path: Path) -> tuple[bytes, int]:
    """The uncompressed DBN bytes of ``path`` and the length of their header; every zstd frame must be complete."""
    import zstandard

    try:
        data = path.read_bytes()
    except OSError as exc:
        raise DataError(f"Cannot read the DBN file {path}: {exc.strerror or exc}.") from exc
    if not data:
        raise DataError(f"The DBN file {path} is empty (0 bytes). Download it again or remove it from data.path.")
    if data.startswith(_ZSTD_MAGIC):
        frames: list[bytes] = []
        remaining = data
        while remaining:
            decompressor = zstandard.ZstdDecompressor().decompressobj()
            try:
                frames.append(decompressor.decompress(remaining))
            except zstandard.ZstdError as exc:
                raise DataError(
                    f"The DBN file {path} is not valid zstd ({exc}); the compressed data is corrupted. "
                    "Download it again."
                ) from exc
            if not decompressor.eof:
                # A frame without its end marker means a truncated file.
                raise DataError(
                    f"The DBN file {path} is truncated: its zstd stream ends inside a frame, before the frame's "
                    f"end marker ({len(data)} bytes on disk). Download the file again."
                )
            remaining = decompressor.unused_data
        payload = b"".join(frames)
    elif data.startswith(b"DBN"):
        payload = data
    else:
        raise DataError(
            f"The file {path} is not DBN data: it starts neither with a zstd frame nor with 'DBN' "
            f"(first bytes {data[:8].hex(' ')}). gpubench reads .dbn and .dbn.zst files from Databento."
        )
    if not payload.startswith(b"DBN"):
        raise DataError(
            f"The file {path} decompresses to something that is not DBN data (no 'DBN' header); gpubench "
            "reads .dbn and .dbn.zst files from Databento."
        )
    if len(payload) < _DBN_PREFIX_BYTES:
        raise DataError(f"The DBN file {path} is truncated inside its header. Download the file again.")
    header_bytes = _DBN_PREFIX_BYTES + int.from_bytes(payload[4:_DBN_PREFIX_BYTES], "little")
    if len(payload) < header_bytes:
        raise DataError(
            f"The DBN file {path} is truncated inside its metadata ({len(payload)} of {header_bytes} header "
            "bytes). Download the file again."
        )
    return payload, header_bytes


def _check_record_headers(path: Path, records: np.ndarray, valid_rtypes: tuple[int, ...]) -> None:
    """Every record must be an OHLCV record of the file's schema with the OHLCV length; else the file is corrupt."""
    expected_words = records.dtype.itemsize // 4
    valid = records["length"] == expected_words
    valid &= np.logical_or.reduce([records["rtype"] == rtype for rtype in valid_rtypes])
    bad = np.flatnonzero(~valid)
    if bad.size:
        first = int(bad[0])
        raise DataError(
            f"The DBN file {path} has {bad.size} corrupted record(s): record {first} has type "
            f"{int(records['rtype'][first]):#04x} and length {4 * int(records['length'][first])} bytes where an "
            f"OHLCV record of this file has type {valid_rtypes[0]:#04x} and length {records.dtype.itemsize}. "
            "Download the file again."
        )


def _records_to_table(path: Path, records: np.ndarray, metadata: "databento.Metadata") -> pa.Table:
    """Records as a bar table, with prices in currency units and symbols from the file's mappings."""
    import databento

    ts_event = records["ts_event"]
    prices = {name: records[name] for name in ("open", "high", "low", "close")}
    undefined = np.zeros(len(records), dtype=bool)
    for fixed in prices.values():
        undefined |= fixed == databento.UNDEF_PRICE
    if undefined.any():
        first = int(np.flatnonzero(undefined)[0])
        raise DataError(
            f"The DBN file {path} is corrupted: record {first} (ts_event {iso_from_ns(int(ts_event[first]))}) has an "
            "undefined price, which an OHLCV bar never has."
        )
    # Timestamps past int64 (including DBN's "undefined" 2**64 - 1) cannot be a bar's start.
    if (ts_event >= 2**63).any():
        first = int(np.flatnonzero(ts_event >= 2**63)[0])
        raise DataError(f"The DBN file {path} is corrupted: record {first} has no valid ts_event.")
    if len(ts_event) and int(ts_event.min()) < metadata.start:
        first = int(np.argmin(ts_event))
        raise DataError(
            f"The DBN file {path} is corrupted: record {first} has ts_event {iso_from_ns(int(ts_event[first]))}, "
            f"before the file's start {iso_from_ns(metadata.start)}."
        )
    instrument_map = databento.InstrumentMap()
    try:
        instrument_map.insert_metadata(metadata)
    except ValueError as exc:
        raise DataError(f"The symbol mappings of the DBN file {path} cannot be read: {exc}.") from exc
    # Mappings hold per UTC date; resolve each distinct (instrument, date) pair once, then spread to the records.
    utc_day = (ts_event // (86_400 * 1_000_000_000)).astype(np.uint64)
    pairs, record_pair = np.unique(
        (records["instrument_id"].astype(np.uint64) << np.uint64(32)) | utc_day, return_inverse=True
    )
    pair_symbols = []
    instrument_of: dict[tuple[int, str], int] = {}
    for pair in pairs.tolist():
        instrument_id, day = pair >> 32, pair & 0xFFFFFFFF
        date = dt.date(1970, 1, 1) + dt.timedelta(days=day)
        resolved = instrument_map.resolve(instrument_id, date)
        symbol = str(instrument_id) if resolved is None else resolved
        # Parent symbology (e.g. ES.FUT) maps every contract to one symbol; their bars would interleave.
        other = instrument_of.setdefault((day, symbol), instrument_id)
        if other != instrument_id:
            raise DataError(
                f"In the DBN file {path}, instruments {other} and {instrument_id} both map to the symbol "
                f"{symbol!r} on {date}; gpubench needs one instrument per symbol at a time. Request raw symbols "
                "or a continuous contract (e.g. ES.c.0) rather than a parent symbol."
            )
        pair_symbols.append(symbol)
    symbols = pa.array(pair_symbols, type=pa.string()).take(pa.array(record_pair.ravel()))
    return pa.table(
        {
            "ts_event": pa.array(ts_event.astype(np.int64)),
            "symbol": symbols,
            **{name: pa.array(fixed / FIXED_PRICE_SCALE) for name, fixed in prices.items()},
            "volume": pa.array(records["volume"].astype(np.float64)),
            PUBLISHER_COLUMN: pa.array(records["publisher_id"].astype(np.int32)),
        },
        schema=BAR_SCHEMA.append(pa.field(PUBLISHER_COLUMN, pa.int32())),
    )


def publisher_name(publisher_id: int) -> str:
    """Databento's name of a publisher (dataset and venue, e.g. ``XNAS.ITCH.XNAS``), or its number when unknown."""
    import databento

    try:
        return str(databento.Publisher.from_int(publisher_id).value)
    except ValueError:
        return str(publisher_id)


def combine_publishers(bars: pa.Table, mode: str) -> pa.Table:
    """A :data:`BAR_SCHEMA` table from bars keyed by (symbol, publisher, time), per ``mode``.

    ``aggregate``: one bar per symbol and time (extreme high and low, summed volume, volume-weighted open and close);
    ``separate``: one series per publisher, ``SYMBOL@PUBLISHER``. DataError for an unknown ``mode``."""
    if mode not in PUBLISHER_MODES:
        raise DataError(f"data.publishers={mode!r} is not valid: it must be one of {', '.join(PUBLISHER_MODES)}.")
    if PUBLISHER_COLUMN not in bars.column_names:
        return bars
    publisher_ids = bars.column(PUBLISHER_COLUMN).to_numpy()
    plain = bars.drop_columns([PUBLISHER_COLUMN])
    if np.unique(publisher_ids).size <= 1:
        return plain
    if mode == "separate":
        distinct, inverse = np.unique(publisher_ids, return_inverse=True)
        names = pa.array([PUBLISHER_SEPARATOR + publisher_name(int(pid)) for pid in distinct]).take(
            pa.array(inverse.ravel())
        )
        symbols = pc.binary_join_element_wise(plain.column("symbol"), names, "")
        separate = plain.set_column(plain.schema.get_field_index("symbol"), "symbol", symbols)
        return separate.sort_by([("symbol", "ascending"), ("ts_event", "ascending")])
    return _aggregate_publishers(plain.sort_by([("symbol", "ascending"), ("ts_event", "ascending")]))


def _aggregate_publishers(bars: pa.Table) -> pa.Table:
    """One bar per (symbol, time) of ``bars`` (sorted by symbol, then time), combined as :func:`combine_publishers`
    describes for ``aggregate``."""
    symbol_codes = pc.dictionary_encode(bars.column("symbol").combine_chunks()).indices.to_numpy()
    ts_event = bars.column("ts_event").to_numpy()
    starts = np.flatnonzero(
        np.concatenate([[True], (symbol_codes[1:] != symbol_codes[:-1]) | (ts_event[1:] != ts_event[:-1])])
    )
    counts = np.diff(np.append(starts, bars.num_rows))
    values = {name: bars.column(name).to_numpy() for name in ("open", "high", "low", "close", "volume")}
    high = np.maximum.reduceat(values["high"], starts)
    low = np.minimum.reduceat(values["low"], starts)
    volume = np.add.reduceat(values["volume"], starts)
    open_, close = (
        np.clip(_volume_weighted_mean(values[name], values["volume"], starts, counts), low, high)
        for name in ("open", "close")
    )
    return pa.table(
        {
            "ts_event": pa.array(ts_event[starts]),
            "symbol": bars.column("symbol").take(pa.array(starts)),
            "open": pa.array(open_),
            "high": pa.array(high),
            "low": pa.array(low),
            "close": pa.array(close),
            "volume": pa.array(volume),
        },
        schema=BAR_SCHEMA,
    )


def _volume_weighted_mean(prices: np.ndarray, volume: np.ndarray, starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Per group of consecutive rows (starting at ``starts``, ``counts`` long): the mean of ``prices`` weighted by
    ``volume``, or the plain mean for a group whose volume is all zero."""
    total = np.add.reduceat(volume, starts)
    with np.errstate(divide="ignore", invalid="ignore"):
        by_volume = np.add.reduceat(prices * volume, starts) / total
    return np.where(total > 0, by_volume, np.add.reduceat(prices, starts) / counts)


@dataclass(frozen=True)
class OhlcvRecords:
    """OHLCV bars as DBN stores them, in file order: int64 prices in units of 1e-9, ``ts_event_ns`` in UTC
    nanoseconds."""

    ts_event_ns: np.ndarray
    instrument_id: np.ndarray
    open_fixed: np.ndarray
    high_fixed: np.ndarray
    low_fixed: np.ndarray
    close_fixed: np.ndarray
    volume: np.ndarray


@dataclass(frozen=True)
class _MappingInterval:
    """One ``databento_dbn`` symbol-mapping interval: ``symbol`` is the instrument id, as text, on those dates."""

    start_date: dt.date
    end_date: dt.date
    symbol: str


@dataclass(frozen=True)
class _SymbolMapping:
    """One ``databento_dbn`` symbol mapping: a requested raw symbol and the instrument ids it resolved to."""

    raw_symbol: str
    intervals: list[_MappingInterval]


def encode_ohlcv_records(records: OhlcvRecords, schema: str = "ohlcv-1m") -> bytes:
    """The records as consecutive DBN OHLCV record bytes (the layout of ``databento_dbn.OHLCVMsg``)."""
    import databento_dbn

    array = np.zeros(len(records.ts_event_ns), dtype=databento_dbn.OHLCVMsg._dtypes)
    array["length"] = array.dtype.itemsize // 4
    array["rtype"] = databento_dbn.RType.from_schema(databento_dbn.Schema(schema)).value
    array["instrument_id"] = records.instrument_id
    array["ts_event"] = records.ts_event_ns
    array["open"] = records.open_fixed
    array["high"] = records.high_fixed
    array["low"] = records.low_fixed
    array["close"] = records.close_fixed
    array["volume"] = records.volume
    return array.tobytes()


def write_ohlcv_dbn(
    path: Path,
    records: OhlcvRecords,
    *,
    dataset: str,
    symbols: Sequence[str],
    instrument_ids: Sequence[int],
    start_ns: int,
    end_ns: int,
    schema: str = "ohlcv-1m",
) -> None:
    """Write a zstd-compressed DBN file of OHLCV ``records`` with Databento-style metadata: ``dataset``, ``schema``,
    the window [``start_ns``, ``end_ns``) in UTC nanoseconds and one symbol mapping per ``symbols`` entry."""
    import databento_dbn

    first_date = _utc_date(start_ns)
    after_last_date = _utc_date(end_ns - 1) + dt.timedelta(days=1)
    mappings = [
        _SymbolMapping(symbol, [_MappingInterval(first_date, after_last_date, str(instrument_id))])
        for symbol, instrument_id in zip(symbols, instrument_ids, strict=True)
    ]
    metadata = databento_dbn.Metadata(
        dataset=dataset,
        start=start_ns,
        end=end_ns,
        stype_in=databento_dbn.SType.RAW_SYMBOL,
        stype_out=databento_dbn.SType.INSTRUMENT_ID,
        schema=databento_dbn.Schema(schema),
        symbols=list(symbols),
        mappings=mappings,
    )
    # Encoded in memory so that a failed write raises OSError with its path, not databento_dbn.DBNError.
    encoded = io.BytesIO()
    transcoder = databento_dbn.Transcoder(encoded, databento_dbn.Encoding.DBN, databento_dbn.Compression.ZSTD)
    transcoder.write(bytes(metadata) + encode_ohlcv_records(records, schema))
    # finish() writes the zstd end-of-frame block and checksum; without it the file reads as truncated.
    transcoder.finish()
    path.write_bytes(encoded.getvalue())


def _utc_date(ts_ns: int) -> dt.date:
    return dt.datetime.fromtimestamp(ts_ns // 1_000_000_000, tz=dt.timezone.utc).date()
