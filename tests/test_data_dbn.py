"""The DBN reader and writer: round trip, path resolution, and a DataError naming the file for every broken kind.

Broken files are made in tmp_path from a good synthetic file: its uncompressed DBN payload is edited (records
are a numpy view of the OHLCV layout) and written back plain or zstd-compressed.
"""

import datetime as dt
import io
import shutil
import warnings
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import databento
import databento_dbn
import numpy as np
import pytest
import zstandard

from gpubench.data.bars import BAR_SCHEMA
from gpubench.data.dbn import (
    FIXED_PRICE_SCALE,
    SUPPORTED_SCHEMAS,
    OhlcvRecords,
    encode_ohlcv_records,
    read_dbn_bars,
    resolve_dbn_paths,
)
from gpubench.data.synthetic import BARS_PER_SESSION, TICK_FIXED, generate_synthetic_dbn, simulate_market
from gpubench.errors import DataError

SYMBOLS = ["SYNA", "SYNB"]
START = "2024-01-02"


@pytest.fixture(scope="module")
def good_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, ...]:
    """Two consecutive sessions of two symbols as synthetic .dbn.zst files."""
    cache_dir = tmp_path_factory.mktemp("dbn-cache")
    return generate_synthetic_dbn(cache_dir, symbols=SYMBOLS, days=2, start_date=START, seed=7).files


@pytest.fixture(scope="module")
def large_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One session of eight symbols: about 175 kB of records, so the zstd frame spans several blocks."""
    cache_dir = tmp_path_factory.mktemp("dbn-large")
    names = [f"S{index}" for index in range(8)]
    return generate_synthetic_dbn(cache_dir, symbols=names, days=1, start_date=START, seed=3).files[0]


def _payload(path: Path) -> bytes:
    return zstandard.ZstdDecompressor().decompressobj().decompress(path.read_bytes())


def _split(payload: bytes) -> tuple[bytes, np.ndarray]:
    """Header bytes and a writable copy of the records."""
    header_bytes = 8 + int.from_bytes(payload[4:8], "little")
    records = np.frombuffer(payload[header_bytes:], dtype=databento_dbn.OHLCVMsg._dtypes).copy()
    return payload[:header_bytes], records


def _write_zst(path: Path, payload: bytes) -> Path:
    path.write_bytes(zstandard.ZstdCompressor(write_checksum=True).compress(payload))
    return path


def _assert_data_error(path: Path, *phrases: str) -> str:
    with pytest.raises(DataError) as error:
        read_dbn_bars([path])
    message = str(error.value)
    assert str(path) in message
    # Look for the phrases outside the path: tmp_path's folder is named after the test, e.g. "..._truncated_...".
    without_path = message.replace(str(path), "<file>")
    for phrase in phrases:
        assert phrase in without_path
    return message


# --------------------------------------------------------------------------------------------------- round trip


def test_round_trip_gives_the_generated_bars(good_files: tuple[Path, ...]) -> None:
    table = read_dbn_bars(list(good_files))
    market = simulate_market(SYMBOLS, 2, START, seed=7)
    assert table.schema.equals(BAR_SCHEMA)
    assert table.num_rows == 2 * 2 * BARS_PER_SESSION
    bars = 2 * BARS_PER_SESSION
    for index, symbol in enumerate(SYMBOLS):
        rows = table.slice(index * bars, bars)
        assert set(rows.column("symbol").to_pylist()) == {symbol}
        np.testing.assert_array_equal(rows.column("ts_event").to_numpy(), market.ts_event_ns)
        for name in ("open", "high", "low", "close"):
            expected = getattr(market, f"{name}_ticks")[index] * TICK_FIXED / FIXED_PRICE_SCALE
            np.testing.assert_array_equal(rows.column(name).to_numpy(), expected)
        np.testing.assert_array_equal(rows.column("volume").to_numpy(), market.volume[index])


def test_prices_lie_on_the_cent_grid(good_files: tuple[Path, ...]) -> None:
    close = read_dbn_bars(list(good_files)).column("close").to_numpy()
    cents = close * 100
    np.testing.assert_allclose(cents, np.rint(cents), rtol=0, atol=1e-6)


def test_databento_reads_the_metadata_and_maps_symbols_like_a_download(good_files: tuple[Path, ...]) -> None:
    store = databento.DBNStore.from_bytes(io.BytesIO(good_files[0].read_bytes()))
    assert store.dataset == "GPUB.SYNTH"
    assert str(store.schema) == "ohlcv-1m"
    assert store.symbols == SYMBOLS
    assert store.stype_in == databento.SType.RAW_SYMBOL
    assert store.stype_out == databento.SType.INSTRUMENT_ID
    assert store.start.isoformat() == "2024-01-02T14:30:00+00:00"
    assert store.end.isoformat() == "2024-01-02T21:00:00+00:00"
    with warnings.catch_warnings():
        # databento's to_df uses a pandas argument that pandas 3 deprecates; not ours to fix.
        warnings.simplefilter("ignore")
        frame = store.to_df(pretty_ts=False, map_symbols=True)
    assert frame["symbol"].tolist()[:4] == ["SYNA", "SYNB", "SYNA", "SYNB"]
    assert len(frame) == 2 * BARS_PER_SESSION


def test_vectorised_record_encoding_matches_ohlcvmsg() -> None:
    records = OhlcvRecords(
        ts_event_ns=np.array([1_704_205_800_000_000_000, 1_704_205_860_000_000_000], dtype=np.int64),
        instrument_id=np.array([1, 2], dtype=np.uint32),
        open_fixed=np.array([100_000_000_000, 25_010_000_000], dtype=np.int64),
        high_fixed=np.array([101_000_000_000, 25_020_000_000], dtype=np.int64),
        low_fixed=np.array([99_000_000_000, 25_000_000_000], dtype=np.int64),
        close_fixed=np.array([100_500_000_000, 25_010_000_000], dtype=np.int64),
        volume=np.array([1200, 7], dtype=np.int64),
    )
    expected = b"".join(
        bytes(
            databento_dbn.OHLCVMsg(
                rtype=databento_dbn.RType.OHLCV_1M.value,
                publisher_id=0,
                instrument_id=int(records.instrument_id[i]),
                ts_event=int(records.ts_event_ns[i]),
                open=int(records.open_fixed[i]),
                high=int(records.high_fixed[i]),
                low=int(records.low_fixed[i]),
                close=int(records.close_fixed[i]),
                volume=int(records.volume[i]),
            )
        )
        for i in range(2)
    )
    assert encode_ohlcv_records(records) == expected


def test_uncompressed_and_multi_frame_files_read_like_the_original(
    good_files: tuple[Path, ...], tmp_path: Path
) -> None:
    payload = _payload(good_files[0])
    plain = tmp_path / "plain.dbn"
    plain.write_bytes(payload)
    middle = len(payload) // 2
    compressor = zstandard.ZstdCompressor(write_checksum=True)
    frames = tmp_path / "frames.dbn.zst"
    frames.write_bytes(compressor.compress(payload[:middle]) + compressor.compress(payload[middle:]))
    expected = read_dbn_bars([good_files[0]])
    assert read_dbn_bars([plain]).equals(expected)
    assert read_dbn_bars([frames]).equals(expected)


def test_overlapping_files_raise_naming_both(good_files: tuple[Path, ...], tmp_path: Path) -> None:
    copy = tmp_path / "copy.dbn.zst"
    shutil.copyfile(good_files[0], copy)
    with pytest.raises(DataError, match="Duplicate bars") as error:
        read_dbn_bars([good_files[0], copy])
    assert str(good_files[0]) in str(error.value)
    assert str(copy) in str(error.value)


# --------------------------------------------------------------------------------------------------- paths


def test_folder_resolves_to_its_dbn_files_sorted(good_files: tuple[Path, ...], tmp_path: Path) -> None:
    for index, path in enumerate(reversed(good_files)):
        shutil.copyfile(path, tmp_path / f"day{1 - index}.dbn.zst")
    shutil.copyfile(good_files[0], tmp_path / "extra.dbn")
    (tmp_path / "metadata.json").write_text("{}")
    (tmp_path / "._day0.dbn.zst").write_bytes(b"macOS resource fork")
    (tmp_path / "sub").mkdir()
    assert [path.name for path in resolve_dbn_paths(tmp_path)] == ["day0.dbn.zst", "day1.dbn.zst", "extra.dbn"]
    assert [path.name for path in resolve_dbn_paths(str(tmp_path / "day*.dbn.zst"))] == [
        "day0.dbn.zst",
        "day1.dbn.zst",
    ]
    assert resolve_dbn_paths(tmp_path / "extra.dbn") == [tmp_path / "extra.dbn"]
    assert read_dbn_bars(str(tmp_path / "day*.dbn.zst")).num_rows == 2 * 2 * BARS_PER_SESSION


def test_tilde_in_a_path_is_expanded(
    good_files: tuple[Path, ...], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    shutil.copyfile(good_files[0], tmp_path / "day.dbn.zst")
    assert resolve_dbn_paths("~/day.dbn.zst") == [tmp_path / "day.dbn.zst"]


@pytest.mark.parametrize(
    ("make", "phrase"),
    [
        (lambda root: root / "missing", "does not exist"),
        (lambda root: root, "holds no DBN files"),
        (lambda root: root / "*.dbn.zst", "matches no DBN files"),
    ],
)
def test_paths_without_dbn_files_raise_naming_the_path(
    tmp_path: Path, make: Callable[[Path], Path], phrase: str
) -> None:
    (tmp_path / "readme.txt").write_text("not data")
    path = make(tmp_path)
    with pytest.raises(DataError, match=phrase) as error:
        resolve_dbn_paths(path)
    assert str(path) in str(error.value)


# --------------------------------------------------------------------------------------------------- broken files


def test_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.dbn.zst"
    path.write_bytes(b"")
    _assert_data_error(path, "empty")


def test_garbage_bytes(tmp_path: Path) -> None:
    path = tmp_path / "garbage.dbn"
    path.write_bytes(np.random.default_rng(0).bytes(4096))
    _assert_data_error(path, "not DBN data")


def test_zstd_that_is_not_dbn(tmp_path: Path) -> None:
    _assert_data_error(_write_zst(tmp_path / "text.dbn.zst", b"hello, not a DBN stream" * 10), "not DBN data")


def test_corrupted_zstd_stream(good_files: tuple[Path, ...], tmp_path: Path) -> None:
    data = bytearray(good_files[0].read_bytes())
    data[len(data) // 2] ^= 0xFF
    path = tmp_path / "bitflip.dbn.zst"
    path.write_bytes(bytes(data))
    _assert_data_error(path, "not valid zstd")


@pytest.mark.parametrize(
    "cut",
    [
        pytest.param(lambda size: 10, id="frame-header"),
        pytest.param(lambda size: 300, id="first-block"),
        pytest.param(lambda size: size // 2, id="middle"),
        pytest.param(lambda size: size - 4, id="whole-checksum-missing"),
        pytest.param(lambda size: size - 1, id="inside-checksum"),
    ],
)
def test_truncated_zstd_file(good_files: tuple[Path, ...], tmp_path: Path, cut: Callable[[int], int]) -> None:
    data = good_files[0].read_bytes()
    path = tmp_path / "cut.dbn.zst"
    path.write_bytes(data[: cut(len(data))])
    _assert_data_error(path, "truncated")


@pytest.mark.parametrize("fraction", [0.3, 0.6, 0.9])
def test_truncated_multi_block_zstd_file(large_file: Path, tmp_path: Path, fraction: float) -> None:
    # Cut after the first compressed blocks: databento alone decodes the records before the cut and only warns.
    data = large_file.read_bytes()
    path = tmp_path / "cut.dbn.zst"
    path.write_bytes(data[: int(fraction * len(data))])
    _assert_data_error(path, "truncated")


@pytest.mark.parametrize(
    "cut",
    [
        pytest.param(lambda header: 5, id="prefix"),
        pytest.param(lambda header: header - 10, id="metadata"),
        pytest.param(lambda header: header + 3 * 56 + 20, id="mid-record"),
        pytest.param(lambda header: header + 1, id="first-record-byte"),
    ],
)
def test_truncated_uncompressed_file(good_files: tuple[Path, ...], tmp_path: Path, cut: Callable[[int], int]) -> None:
    payload = _payload(good_files[0])
    header, _ = _split(payload)
    path = tmp_path / "cut.dbn"
    path.write_bytes(payload[: cut(len(header))])
    _assert_data_error(path, "truncated")


@pytest.mark.parametrize(
    ("offset", "value"),
    [pytest.param(3, b"\x09", id="future-version"), pytest.param(8, b"\xff" * 12, id="dataset-not-utf8")],
)
def test_corrupted_metadata(good_files: tuple[Path, ...], tmp_path: Path, offset: int, value: bytes) -> None:
    payload = bytearray(_payload(good_files[0]))
    payload[offset : offset + len(value)] = value
    _assert_data_error(_write_zst(tmp_path / "metadata.dbn.zst", bytes(payload)), "corrupted metadata")


def _edit_records(source: Path, target: Path, edit: Callable[[np.ndarray], object]) -> Path:
    header, records = _split(_payload(source))
    edit(records)
    return _write_zst(target, header + records.tobytes())


def _swap_times(records: np.ndarray) -> None:
    records["ts_event"][[10, 20]] = records["ts_event"][[20, 10]]


def _high_below_low(records: np.ndarray) -> None:
    records["high"][3] = records["low"][3] - TICK_FIXED


@pytest.mark.parametrize(
    ("edit", "phrase"),
    [
        pytest.param(lambda r: r["rtype"].__setitem__(5, 0x01), "corrupted record", id="record-type"),
        pytest.param(lambda r: r["length"].__setitem__(5, 3), "corrupted record", id="record-length"),
        pytest.param(_high_below_low, "a high below its open or close", id="high-below-low"),
        pytest.param(lambda r: r["low"].__setitem__(7, r["high"][7] + TICK_FIXED), "a low above", id="low-above-high"),
        pytest.param(lambda r: r["open"].__setitem__(2, 0), "not a positive finite number", id="zero-price"),
        pytest.param(lambda r: r["close"].__setitem__(2, -5), "not a positive finite number", id="negative-price"),
        pytest.param(
            lambda r: r["close"].__setitem__(4, databento.UNDEF_PRICE), "undefined price", id="undefined-price"
        ),
        pytest.param(_swap_times, "out of order", id="time-order"),
        pytest.param(lambda r: r["ts_event"].__setitem__(5, 2**64 - 1), "no valid ts_event", id="undefined-time"),
        pytest.param(lambda r: r["ts_event"].__setitem__(0, 1), "before the file's start", id="before-start"),
    ],
)
def test_corrupted_records(
    good_files: tuple[Path, ...], tmp_path: Path, edit: Callable[[np.ndarray], object], phrase: str
) -> None:
    path = _edit_records(good_files[0], tmp_path / "records.dbn.zst", edit)
    _assert_data_error(path, phrase)


def _metadata(schema: databento_dbn.Schema | None) -> bytes:
    return bytes(
        databento_dbn.Metadata(
            dataset="GPUB.TEST",
            start=1_704_205_800_000_000_000,
            end=1_704_229_200_000_000_000,
            stype_in=databento_dbn.SType.RAW_SYMBOL,
            stype_out=databento_dbn.SType.INSTRUMENT_ID,
            schema=schema,
            symbols=["SYNA"],
        )
    )


def test_unsupported_schema_names_the_schema_and_the_supported_ones(tmp_path: Path) -> None:
    trade = databento_dbn.TradeMsg(
        publisher_id=1,
        instrument_id=1,
        ts_event=1_704_205_800_000_000_000,
        price=100 * FIXED_PRICE_SCALE,
        size=10,
        action=databento_dbn.Action.TRADE,
        side=databento_dbn.Side.BID,
        depth=0,
        ts_recv=1_704_205_800_000_000_100,
    )
    path = _write_zst(tmp_path / "trades.dbn.zst", _metadata(databento_dbn.Schema.TRADES) + bytes(trade))
    message = _assert_data_error(path, "schema 'trades'")
    assert "gpubench reads OHLCV schemas: " + ", ".join(SUPPORTED_SCHEMAS) in message


def test_file_without_a_single_schema_is_rejected(tmp_path: Path) -> None:
    _assert_data_error(_write_zst(tmp_path / "mixed.dbn.zst", _metadata(None)), "mixes record types")


def test_file_with_no_records_is_an_error_naming_it(tmp_path: Path) -> None:
    # More cases (every DBN version and schema, alongside files with bars) are in test_data_dbn_real_files.py.
    path = _write_zst(tmp_path / "none.dbn.zst", _metadata(databento_dbn.Schema.OHLCV_1H))
    _assert_data_error(path, "holds no bars", "zero OHLCV records")


def test_several_instruments_under_one_symbol_are_rejected(tmp_path: Path) -> None:
    # Parent symbology maps every contract of a product (here ids 1 and 2) to one requested symbol.
    day = dt.date(2024, 1, 2)
    intervals = [
        SimpleNamespace(start_date=day, end_date=day + dt.timedelta(days=1), symbol=str(instrument_id))
        for instrument_id in (1, 2)
    ]
    metadata = databento_dbn.Metadata(
        dataset="GPUB.TEST",
        start=1_704_205_800_000_000_000,
        end=1_704_229_200_000_000_000,
        stype_in=databento_dbn.SType.PARENT,
        stype_out=databento_dbn.SType.INSTRUMENT_ID,
        schema=databento_dbn.Schema.OHLCV_1M,
        symbols=["ES.FUT"],
        mappings=[SimpleNamespace(raw_symbol="ES.FUT", intervals=intervals)],
    )
    records = OhlcvRecords(
        ts_event_ns=np.full(2, 1_704_205_800_000_000_000, dtype=np.int64),
        instrument_id=np.array([1, 2], dtype=np.uint32),
        open_fixed=np.full(2, 100 * FIXED_PRICE_SCALE, dtype=np.int64),
        high_fixed=np.full(2, 101 * FIXED_PRICE_SCALE, dtype=np.int64),
        low_fixed=np.full(2, 99 * FIXED_PRICE_SCALE, dtype=np.int64),
        close_fixed=np.full(2, 100 * FIXED_PRICE_SCALE, dtype=np.int64),
        volume=np.array([5, 6], dtype=np.int64),
    )
    path = _write_zst(tmp_path / "parent.dbn.zst", bytes(metadata) + encode_ohlcv_records(records))
    _assert_data_error(path, "instruments 1 and 2 both map to the symbol 'ES.FUT' on 2024-01-02")


def test_an_empty_list_of_files_raises() -> None:
    with pytest.raises(DataError, match="No bar files"):
        read_dbn_bars([])
