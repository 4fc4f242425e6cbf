"""The bar table every source produces (:data:`BAR_SCHEMA`), and the checks that make one from several files."""

import datetime as dt
from collections.abc import Callable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from gpubench.errors import DataError

#: The DBN reader's publisher column, kept until :func:`gpubench.data.dbn.combine_publishers`.
PUBLISHER_COLUMN = "publisher_id"
#: The columns of a bar table, in order.
BAR_COLUMNS: tuple[str, ...] = ("ts_event", "symbol", "open", "high", "low", "close", "volume")
#: ts_event: bar start in UTC nanoseconds; prices in quote currency; volume as float.
BAR_SCHEMA = pa.schema(
    [
        pa.field("ts_event", pa.int64()),
        pa.field("symbol", pa.string()),
        pa.field("open", pa.float64()),
        pa.field("high", pa.float64()),
        pa.field("low", pa.float64()),
        pa.field("close", pa.float64()),
        pa.field("volume", pa.float64()),
    ]
)


def finish_bar_table(
    tables: Sequence[pa.Table],
    sources: Sequence[str],
    *,
    require_sorted: bool,
    publisher_name: Callable[[int], str] = str,
) -> pa.Table:
    """Check each source's bars, concatenate them, and sort by symbol (and publisher, when known) then time.

    ``tables`` have :data:`BAR_SCHEMA`, optionally with :data:`PUBLISHER_COLUMN`; ``sources`` and ``publisher_name``
    name files and publishers in messages. With ``require_sorted`` each source must already be in time order. Raises
    DataError for bad values, out-of-order time and duplicate bars, naming the sources."""
    if not tables:
        raise DataError("No bar files were given to read; data.path must name at least one file.")
    for table, source in zip(tables, sources, strict=True):
        _check_bar_values(table, source, require_sorted=require_sorted)
    source_index = [pa.array(np.full(table.num_rows, index, dtype=np.int32)) for index, table in enumerate(tables)]
    combined = pa.concat_tables(
        [table.append_column("_source", column) for table, column in zip(tables, source_index, strict=True)]
    )
    keys = ["symbol", PUBLISHER_COLUMN] if PUBLISHER_COLUMN in combined.column_names else ["symbol"]
    # Arrow's sort is stable, so equal (symbol, publisher, time) keys keep their source order for the message below.
    combined = combined.sort_by([*((key, "ascending") for key in keys), ("ts_event", "ascending")])
    columns = {key: combined.column(key).to_numpy(zero_copy_only=False) for key in [*keys, "ts_event"]}
    same = np.ones(max(combined.num_rows - 1, 0), dtype=bool)
    for values in columns.values():
        same &= values[1:] == values[:-1]
    duplicate = np.flatnonzero(same)
    if duplicate.size:
        row = int(duplicate[0])
        origin = combined.column("_source").to_numpy()
        first, second = sources[origin[row]], sources[origin[row + 1]]
        where = f"both {first} and {second} hold" if first != second else f"{first} holds twice"
        publisher = (
            f" from publisher {publisher_name(int(columns[PUBLISHER_COLUMN][row]))}"
            if PUBLISHER_COLUMN in columns
            else ""
        )
        raise DataError(
            f"Duplicate bars: {where} a bar of {columns['symbol'][row]}{publisher} at "
            f"{iso_from_ns(int(columns['ts_event'][row]))} ({duplicate.size} duplicate(s) in all). Remove overlapping "
            "files from data.path."
        )
    return combined.drop_columns(["_source"])


def _check_bar_values(table: pa.Table, source: str, *, require_sorted: bool) -> None:
    """Raise DataError naming ``source`` and the first offending bar when ``table``'s values make no sense."""
    for name in BAR_COLUMNS:
        if table.column(name).null_count:
            raise DataError(f"The column {name!r} of {source} has {table.column(name).null_count} missing values.")
    values = {name: table.column(name).to_numpy() for name in ("open", "high", "low", "close", "volume")}
    prices = np.stack([values[name] for name in ("open", "high", "low", "close")])
    problems = {
        "a price that is not a positive finite number": ~(np.isfinite(prices) & (prices > 0)).all(axis=0),
        "a low above its open or close": values["low"] > np.minimum(values["open"], values["close"]),
        "a high below its open or close": values["high"] < np.maximum(values["open"], values["close"]),
        "a negative or non-finite volume": ~(np.isfinite(values["volume"]) & (values["volume"] >= 0)),
    }
    if require_sorted:
        ts_event = table.column("ts_event").to_numpy()
        problems["a time before the previous bar's (records out of order)"] = np.concatenate(
            [[False], ts_event[1:] < ts_event[:-1]]
        )
    for problem, bad in problems.items():
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            bar = {name: table.column(name)[row].as_py() for name in BAR_COLUMNS}
            raise DataError(
                f"{source} is corrupted: bar {row} ({bar['symbol']} at {iso_from_ns(bar['ts_event'])}: open "
                f"{bar['open']}, high {bar['high']}, low {bar['low']}, close {bar['close']}, volume "
                f"{bar['volume']}) has {problem}; {int(bad.sum())} bar(s) in all. Valid bars have positive "
                "prices with low <= open, close <= high, a non-negative volume, and come in time order."
            )


def iso_from_ns(ts_ns: int) -> str:
    """A nanosecond UNIX timestamp as ISO 8601 UTC text, for messages."""
    seconds, nanoseconds = divmod(ts_ns, 1_000_000_000)
    try:
        moment = dt.datetime.fromtimestamp(seconds, tz=dt.timezone.utc)
    except (OverflowError, OSError, ValueError):
        return f"{ts_ns} ns"
    return moment.strftime("%Y-%m-%dT%H:%M:%S") + (f".{nanoseconds:09d}" if nanoseconds else "") + "Z"


def bar_time_range_iso(table: pa.Table) -> tuple[str, str]:
    """First and last ``ts_event`` of a non-empty bar table as ISO 8601 UTC text."""
    bounds = pc.min_max(table.column("ts_event"))
    return iso_from_ns(bounds["min"].as_py()), iso_from_ns(bounds["max"].as_py())
