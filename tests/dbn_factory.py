"""DBN files as Databento writes them, made with Databento's own encoder (``databento_dbn``), for reader tests.

Metadata is ``databento_dbn.Metadata`` of the requested DBN version, records are ``databento_dbn.OHLCVMsg``, and
the bytes go through ``databento_dbn.Transcoder`` without upgrading the version (zstd-compressed for a ``.zst``
name, plain otherwise). Nothing here uses gpubench's own writer, so the reader is tested against an independent
encoder.
"""

import datetime as dt
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import SimpleNamespace

import databento_dbn

#: The DBN versions the reader must read.
DBN_VERSIONS: tuple[int, ...] = (1, 2, 3)
#: 2024-01-02 14:30 UTC (09:30 New York), the first bar of the test data.
OPEN_NS = 1_704_205_800_000_000_000
#: Nanoseconds in one minute.
MINUTE_NS = 60 * 1_000_000_000
#: Databento publisher ids (databento.Publisher): two OPRA venues and the XNAS and NYSE feeds.
OPRA_XCBO, OPRA_XISX, XNAS_ITCH, XNYS_PILLAR = 22, 26, 2, 9


def bar(
    *,
    ts_event_ns: int,
    instrument_id: int,
    publisher_id: int,
    open_: float,
    high: float,
    low: float,
    close: float,
    volume: int,
    schema: str = "ohlcv-1m",
) -> databento_dbn.OHLCVMsg:
    """One OHLCV record of ``schema``; prices in currency units (stored as 1e-9 fixed point)."""
    return databento_dbn.OHLCVMsg(
        rtype=databento_dbn.RType.from_schema(databento_dbn.Schema(schema)).value,
        publisher_id=publisher_id,
        instrument_id=instrument_id,
        ts_event=ts_event_ns,
        open=round(open_ * databento_dbn.FIXED_PRICE_SCALE),
        high=round(high * databento_dbn.FIXED_PRICE_SCALE),
        low=round(low * databento_dbn.FIXED_PRICE_SCALE),
        close=round(close * databento_dbn.FIXED_PRICE_SCALE),
        volume=volume,
    )


def write_dbn(
    path: Path,
    records: Sequence[databento_dbn.OHLCVMsg],
    *,
    symbols: Mapping[str, int],
    version: int = 3,
    schema: str = "ohlcv-1m",
    dataset: str = "OPRA.PILLAR",
    start_ns: int = OPEN_NS,
    end_ns: int = OPEN_NS + 390 * MINUTE_NS,
) -> Path:
    """Write ``records`` (in time order) as a DBN file of ``version`` whose metadata maps each raw symbol of
    ``symbols`` to its instrument id over the UTC dates of [``start_ns``, ``end_ns``)."""
    first = dt.datetime.fromtimestamp(start_ns // 10**9, tz=dt.timezone.utc).date()
    after_last = dt.datetime.fromtimestamp((end_ns - 1) // 10**9, tz=dt.timezone.utc).date() + dt.timedelta(days=1)
    mappings = [
        SimpleNamespace(
            raw_symbol=symbol,
            intervals=[SimpleNamespace(start_date=first, end_date=after_last, symbol=str(instrument_id))],
        )
        for symbol, instrument_id in symbols.items()
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
        version=version,
    )
    compression = databento_dbn.Compression.ZSTD if path.name.endswith(".zst") else databento_dbn.Compression.NONE
    with path.open("wb") as stream:
        transcoder = databento_dbn.Transcoder(
            stream,
            databento_dbn.Encoding.DBN,
            compression,
            upgrade_policy=databento_dbn.VersionUpgradePolicy.AS_IS,
        )
        transcoder.write(bytes(metadata) + b"".join(bytes(record) for record in records))
        transcoder.finish()
    return path


def dbn_version(path: Path) -> int:
    """The DBN version byte of a file (decompressing a ``.zst`` one)."""
    import zstandard

    data = path.read_bytes()
    if path.name.endswith(".zst"):
        data = zstandard.ZstdDecompressor().decompressobj().decompress(data)
    assert data[:3] == b"DBN"
    return data[3]
