"""Real Databento files (issue 14, item 8): every DBN version and OHLCV schema, files without records, and bars of
one instrument and minute from several publishers (OPRA options, consolidated equities).

Every file is written in tmp_path by Databento's own encoder (``tests/dbn_factory.py``); expected values are
worked out by hand in the tests.
"""

import json
import logging
import subprocess
import sys
from pathlib import Path

import databento_dbn
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from dbn_factory import (
    DBN_VERSIONS,
    MINUTE_NS,
    OPEN_NS,
    OPRA_XCBO,
    OPRA_XISX,
    XNAS_ITCH,
    XNYS_PILLAR,
    bar,
    dbn_version,
    write_dbn,
)

from gpubench.data import dbn as dbn_module
from gpubench.data.bars import BAR_SCHEMA
from gpubench.data.config import DataConfig
from gpubench.data.dbn import SUPPORTED_SCHEMAS, combine_publishers, read_dbn_bars, select_dbn_files
from gpubench.data.loader import load_bars
from gpubench.data.synthetic import generate_synthetic_dbn
from gpubench.errors import ConfigError, DataError

#: The spacing of consecutive bars of each schema, in nanoseconds (ohlcv-eod: one bar per trading day).
BAR_SPACING_NS = {
    "ohlcv-1s": 10**9,
    "ohlcv-1m": MINUTE_NS,
    "ohlcv-1h": 60 * MINUTE_NS,
    "ohlcv-1d": 1440 * MINUTE_NS,
    "ohlcv-eod": 1440 * MINUTE_NS,
}
AAPL, MSFT = 7, 8


def columns(table: pa.Table) -> dict[str, list]:
    return {name: table.column(name).to_pylist() for name in table.column_names}


# --------------------------------------------------------------------------------------------------- versions, schemas


@pytest.mark.parametrize("suffix", [".dbn", ".dbn.zst"])
@pytest.mark.parametrize("schema", SUPPORTED_SCHEMAS)
@pytest.mark.parametrize("version", DBN_VERSIONS)
def test_every_dbn_version_and_ohlcv_schema_reads_the_encoded_bars(
    tmp_path: Path, version: int, schema: str, suffix: str
) -> None:
    step = BAR_SPACING_NS[schema]
    records = [
        bar(ts_event_ns=OPEN_NS + i * step, instrument_id=iid, publisher_id=XNAS_ITCH, open_=o, high=o + 1,
            low=o - 1, close=o + 0.5, volume=10 * (i + 1), schema=schema)
        for i in range(3)
        for iid, o in ((AAPL, 190.0 + i), (MSFT, 370.25 + i))
    ]  # fmt: skip
    path = write_dbn(
        tmp_path / f"bars{suffix}",
        records,
        symbols={"AAPL": AAPL, "MSFT": MSFT},
        version=version,
        schema=schema,
        dataset="XNAS.ITCH",
        end_ns=OPEN_NS + 3 * step,
    )
    assert dbn_version(path) == version
    table = read_dbn_bars([path])
    assert table.schema.equals(BAR_SCHEMA)
    times = [OPEN_NS + i * step for i in range(3)]
    assert columns(table) == {
        "ts_event": times * 2,
        "symbol": ["AAPL"] * 3 + ["MSFT"] * 3,
        "open": [190.0, 191.0, 192.0, 370.25, 371.25, 372.25],
        "high": [191.0, 192.0, 193.0, 371.25, 372.25, 373.25],
        "low": [189.0, 190.0, 191.0, 369.25, 370.25, 371.25],
        "close": [190.5, 191.5, 192.5, 370.75, 371.75, 372.75],
        "volume": [10.0, 20.0, 30.0, 10.0, 20.0, 30.0],
    }


# --------------------------------------------------------------------------------------------------- no records


def empty_file(path: Path, *, version: int = 3, schema: str = "ohlcv-1d") -> Path:
    """A file like Databento's test_data.ohlcv-1d samples: GLBX.MDP3 ESH1, a day's window, metadata and no records."""
    return write_dbn(path, [], symbols={"ESH1": 5482}, version=version, schema=schema, dataset="GLBX.MDP3")


def one_bar_file(path: Path) -> Path:
    record = bar(ts_event_ns=OPEN_NS, instrument_id=AAPL, publisher_id=XNAS_ITCH, open_=190.0, high=191.0,
                 low=189.0, close=190.5, volume=100)  # fmt: skip
    return write_dbn(path, [record], symbols={"AAPL": AAPL}, dataset="XNAS.ITCH")


@pytest.mark.parametrize("suffix", [".dbn", ".dbn.zst"])
@pytest.mark.parametrize("schema", SUPPORTED_SCHEMAS)
@pytest.mark.parametrize("version", DBN_VERSIONS)
def test_a_file_without_records_is_an_error_naming_it(tmp_path: Path, version: int, schema: str, suffix: str) -> None:
    # Issue 14: such a file (Databento's own test_data.ohlcv-1d of every version) crashed with a TypeError.
    path = empty_file(tmp_path / f"ohlcv{suffix}", version=version, schema=schema)
    assert dbn_version(path) == version
    for read in (read_dbn_bars, select_dbn_files):
        with pytest.raises(DataError) as error:
            read([path])
        assert f"The DBN file {path} holds no bars" in str(error.value)
        assert "zero OHLCV records" in str(error.value)


def test_files_without_records_are_set_aside_when_others_hold_bars(tmp_path: Path) -> None:
    first = empty_file(tmp_path / "2024-01-01.dbn.zst", version=1)
    bars = one_bar_file(tmp_path / "2024-01-02.dbn.zst")
    last = empty_file(tmp_path / "2024-01-03.dbn", version=2)
    selected = select_dbn_files([first, bars, last])
    assert selected.with_bars == [bars]
    assert selected.without_bars == [first, last]
    assert read_dbn_bars([first, bars, last]).equals(read_dbn_bars([bars]))


def test_when_no_file_holds_bars_the_error_names_them(tmp_path: Path) -> None:
    paths = [empty_file(tmp_path / f"day{index}.dbn.zst", version=index + 1) for index in range(3)]
    with pytest.raises(DataError) as error:
        select_dbn_files(paths)
    assert str(error.value).startswith(
        f"None of the 3 DBN files holds bars ({paths[0]}, {paths[1]}, {paths[2]}): each has metadata but zero OHLCV "
        "records"
    )


@pytest.mark.parametrize(
    ("damage", "phrase"),
    [
        pytest.param(lambda data: data[:-2], "truncated", id="checksum-cut"),
        pytest.param(lambda data: data[:40], "truncated", id="metadata-cut"),
    ],
)
def test_a_damaged_file_without_records_is_rejected_by_name(tmp_path: Path, damage, phrase: str) -> None:
    good = one_bar_file(tmp_path / "good.dbn.zst")
    path = empty_file(tmp_path / "empty.dbn.zst")
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(DataError, match=phrase) as error:
        select_dbn_files([good, path])
    assert str(path) in str(error.value)


def test_a_file_without_records_of_another_schema_is_rejected(tmp_path: Path) -> None:
    metadata = databento_dbn.Metadata(
        dataset="XNAS.ITCH",
        start=OPEN_NS,
        end=OPEN_NS + MINUTE_NS,
        stype_in=databento_dbn.SType.RAW_SYMBOL,
        stype_out=databento_dbn.SType.INSTRUMENT_ID,
        schema=databento_dbn.Schema.TRADES,
        symbols=["AAPL"],
    )
    path = tmp_path / "trades.dbn"
    path.write_bytes(bytes(metadata))
    with pytest.raises(DataError, match="schema 'trades'"):
        select_dbn_files([one_bar_file(tmp_path / "good.dbn.zst"), path])


def test_files_with_bars_are_not_decoded_when_sorting_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Sorting runs before the Parquet cache: files with bars must not be decoded there, or the cache saves nothing.
    files = generate_synthetic_dbn(tmp_path / "cache", symbols=["SYNA"], days=2, start_date="2024-01-02", seed=1).files
    empty = empty_file(tmp_path / "holiday.dbn.zst")
    decoded: list[Path] = []
    original = dbn_module._read_dbn_file

    def counting(path: Path) -> pa.Table:
        decoded.append(path)
        return original(path)

    monkeypatch.setattr(dbn_module, "_read_dbn_file", counting)
    selected = select_dbn_files([*files, empty])
    assert selected.with_bars == list(files)
    assert decoded == [empty]


def test_the_loader_skips_files_without_bars_with_a_warning_and_records_them(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = tmp_path / "download"
    folder.mkdir()
    empty = empty_file(folder / "a-holiday.dbn.zst", version=1)
    one_bar_file(folder / "b-trading-day.dbn.zst")
    config = DataConfig(source="dbn", path=str(folder), cache_dir=str(tmp_path / "cache"))
    for cache_hit in (False, True):
        with caplog.at_level(logging.WARNING, logger="gpubench.data.loader"):
            table, provenance = load_bars(config)
        assert provenance.cache_hit is cache_hit
        assert table.num_rows == 1
        assert provenance.files == 2
        assert provenance.empty_files == [str(empty)]
        assert f"Skipping 1 DBN file(s) without bars (metadata only, no records): {empty}." in caplog.messages
        caplog.clear()


def test_the_loader_rejects_a_folder_of_files_without_bars(tmp_path: Path) -> None:
    paths = [empty_file(tmp_path / f"day{index}.dbn.zst") for index in range(7)]
    config = DataConfig(source="dbn", path=str(tmp_path), cache_dir=str(tmp_path / "cache"))
    with pytest.raises(DataError) as error:
        load_bars(config)
    listed = ", ".join(str(path) for path in paths[:5])
    assert str(error.value).startswith(f"None of the 7 DBN files holds bars ({listed} and 2 more): each has")


def test_a_parquet_file_without_rows_is_an_error_naming_the_path(tmp_path: Path) -> None:
    # The same TypeError as a DBN file without records, through data=parquet.
    path = tmp_path / "bars.parquet"
    pq.write_table(BAR_SCHEMA.empty_table(), path)
    with pytest.raises(DataError, match="holds no bars") as error:
        load_bars(DataConfig(source="parquet", path=str(path), cache_dir=str(tmp_path / "cache")))
    assert str(path) in str(error.value)


# --------------------------------------------------------------------------------------------------- publishers


def two_venue_records() -> list[databento_dbn.OHLCVMsg]:
    """AAPL at 14:30 from XNAS and NYSE, AAPL at 14:31 from XNAS only, MSFT at 14:30 from NYSE only."""
    return [
        bar(ts_event_ns=OPEN_NS, instrument_id=AAPL, publisher_id=XNAS_ITCH, open_=100.0, high=102.0, low=99.0,
            close=101.0, volume=300),
        bar(ts_event_ns=OPEN_NS, instrument_id=AAPL, publisher_id=XNYS_PILLAR, open_=100.5, high=103.0, low=99.5,
            close=100.0, volume=100),
        bar(ts_event_ns=OPEN_NS, instrument_id=MSFT, publisher_id=XNYS_PILLAR, open_=370.0, high=371.0, low=369.0,
            close=370.5, volume=40),
        bar(ts_event_ns=OPEN_NS + MINUTE_NS, instrument_id=AAPL, publisher_id=XNAS_ITCH, open_=101.0, high=101.5,
            low=100.5, close=101.25, volume=50),
    ]  # fmt: skip


def two_venue_file(path: Path, version: int = 3) -> Path:
    return write_dbn(path, two_venue_records(), symbols={"AAPL": AAPL, "MSFT": MSFT}, version=version,
                     dataset="EQUS.ALL")  # fmt: skip


@pytest.mark.parametrize("version", DBN_VERSIONS)
def test_aggregate_combines_the_publishers_bars_of_one_instrument_and_minute(tmp_path: Path, version: int) -> None:
    # Issue 14: this legitimate file was rejected as "holds twice a bar".
    table = read_dbn_bars([two_venue_file(tmp_path / "equities.dbn.zst", version)], publishers="aggregate")
    # AAPL 14:30 by hand: high max(102, 103), low min(99, 99.5), volume 300 + 100,
    # open (300 * 100 + 100 * 100.5) / 400 = 100.125, close (300 * 101 + 100 * 100) / 400 = 100.75.
    assert columns(table) == {
        "ts_event": [OPEN_NS, OPEN_NS + MINUTE_NS, OPEN_NS],
        "symbol": ["AAPL", "AAPL", "MSFT"],
        "open": [100.125, 101.0, 370.0],
        "high": [103.0, 101.5, 371.0],
        "low": [99.0, 100.5, 369.0],
        "close": [100.75, 101.25, 370.5],
        "volume": [400.0, 50.0, 40.0],
    }


def test_separate_keeps_one_series_per_publisher(tmp_path: Path) -> None:
    table = read_dbn_bars([two_venue_file(tmp_path / "equities.dbn.zst")], publishers="separate")
    assert columns(table) == {
        "ts_event": [OPEN_NS, OPEN_NS + MINUTE_NS, OPEN_NS, OPEN_NS],
        "symbol": ["AAPL@XNAS.ITCH.XNAS", "AAPL@XNAS.ITCH.XNAS", "AAPL@XNYS.PILLAR.XNYS", "MSFT@XNYS.PILLAR.XNYS"],
        "open": [100.0, 101.0, 100.5, 370.0],
        "high": [102.0, 101.5, 103.0, 371.0],
        "low": [99.0, 100.5, 99.5, 369.0],
        "close": [101.0, 101.25, 100.0, 370.5],
        "volume": [300.0, 50.0, 100.0, 40.0],
    }


def test_one_file_per_venue_combines_like_one_file(tmp_path: Path) -> None:
    records = two_venue_records()
    symbols = {"AAPL": AAPL, "MSFT": MSFT}
    nasdaq = write_dbn(tmp_path / "xnas.dbn.zst", [r for r in records if r.publisher_id == XNAS_ITCH], symbols=symbols)
    nyse = write_dbn(tmp_path / "xnys.dbn", [r for r in records if r.publisher_id == XNYS_PILLAR], symbols=symbols)
    together = two_venue_file(tmp_path / "both.dbn.zst")
    for mode in ("aggregate", "separate"):
        assert read_dbn_bars([nasdaq, nyse], publishers=mode).equals(read_dbn_bars([together], publishers=mode))


def test_the_same_publishers_bar_twice_is_still_an_overlap(tmp_path: Path) -> None:
    first = two_venue_file(tmp_path / "first.dbn.zst")
    second = two_venue_file(tmp_path / "second.dbn.zst")
    with pytest.raises(DataError, match="Duplicate bars") as error:
        read_dbn_bars([first, second])
    message = str(error.value)
    assert f"both {first} and {second} hold a bar of AAPL from publisher XNAS.ITCH.XNAS at 2024-01-02T14:30:00Z" in (
        message
    )
    assert "(4 duplicate(s) in all)" in message


def test_opra_option_bars_from_several_exchanges_are_read(tmp_path: Path) -> None:
    contract = "AAPL  240119C00190000"
    records = [
        bar(ts_event_ns=OPEN_NS + minute * MINUTE_NS, instrument_id=1_000_001, publisher_id=publisher,
            open_=2.5 + 0.01 * minute, high=2.6 + 0.01 * minute, low=2.4, close=2.55, volume=volume)
        for minute in range(3)
        for publisher, volume in ((OPRA_XCBO, 12), (OPRA_XISX, 3))
    ]  # fmt: skip
    path = write_dbn(tmp_path / "opra.dbn.zst", records, symbols={contract: 1_000_001}, dataset="OPRA.PILLAR")
    aggregated = read_dbn_bars([path])
    assert aggregated.column("symbol").to_pylist() == [contract] * 3
    assert aggregated.column("volume").to_pylist() == [15.0] * 3
    separate = read_dbn_bars([path], publishers="separate")
    assert sorted(set(separate.column("symbol").to_pylist())) == [
        f"{contract}@OPRA.PILLAR.XCBO",
        f"{contract}@OPRA.PILLAR.XISX",
    ]


def test_aggregate_without_volume_takes_plain_means_and_stays_within_the_range() -> None:
    def table(opens: list[float], highs: list[float], volumes: list[float]) -> pa.Table:
        n = len(opens)
        return pa.table(
            {
                "ts_event": [OPEN_NS] * n,
                "symbol": ["X"] * n,
                "open": opens,
                "high": highs,
                "low": [min(opens) - 1] * n,
                "close": opens,
                "volume": volumes,
                "publisher_id": pa.array(range(1, n + 1), type=pa.int32()),
            }
        )

    quiet = combine_publishers(table([10.0, 11.0], [12.0, 12.0], [0.0, 0.0]), "aggregate")
    assert quiet.column("open").to_pylist() == [10.5]
    assert quiet.column("volume").to_pylist() == [0.0]
    # The volume-weighted mean of three equal opens rounds to 467.09000000000003 here, above the high of 467.09.
    at_high = combine_publishers(table([467.09] * 3, [467.09] * 3, [8894.0, 5313.0, 3578.0]), "aggregate")
    assert at_high.column("open").to_pylist() == [467.09]
    assert at_high.column("close").to_pylist() == [467.09]


def test_single_publisher_data_reads_the_same_in_both_modes(tmp_path: Path) -> None:
    files = generate_synthetic_dbn(tmp_path, symbols=["SYNA", "SYNB"], days=1, start_date="2024-01-02", seed=2).files
    aggregate = read_dbn_bars(list(files), publishers="aggregate")
    assert aggregate.equals(read_dbn_bars(list(files), publishers="separate"))
    assert set(aggregate.column("symbol").to_pylist()) == {"SYNA", "SYNB"}


def test_the_publishers_mode_is_part_of_the_cache_key(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    two_venue_file(folder / "equities.dbn.zst")
    cache = str(tmp_path / "cache")
    aggregate, first = load_bars(DataConfig(source="dbn", path=str(folder), cache_dir=cache, publishers="aggregate"))
    separate, second = load_bars(DataConfig(source="dbn", path=str(folder), cache_dir=cache, publishers="separate"))
    assert not first.cache_hit and not second.cache_hit
    assert first.content_hash != second.content_hash
    assert aggregate.num_rows == 3 and separate.num_rows == 4
    assert second.symbols == ["AAPL@XNAS.ITCH.XNAS", "AAPL@XNYS.PILLAR.XNYS", "MSFT@XNYS.PILLAR.XNYS"]


def test_an_unknown_publishers_mode_names_the_key() -> None:
    with pytest.raises(ConfigError, match=r"data\.publishers") as error:
        DataConfig(publishers="merge")
    assert "aggregate, separate" in str(error.value)
    with pytest.raises(DataError, match=r"data\.publishers='merge'"):
        combine_publishers(pa.table({"publisher_id": pa.array([], type=pa.int32())}), "merge")


# --------------------------------------------------------------------------------------------------- the CLI


def multi_venue_session(path: Path) -> Path:
    """Two sessions of two symbols with bars from two venues each minute, built from a synthetic market."""
    source = generate_synthetic_dbn(path.parent.parent / "synthetic", symbols=["SYNA", "SYNB"], days=2,
                                    start_date="2024-01-02", seed=5).files  # fmt: skip
    bars = read_dbn_bars(list(source))
    ids = {"SYNA": 1, "SYNB": 2}
    records = []
    for row in sorted(bars.to_pylist(), key=lambda row: (row["ts_event"], row["symbol"])):
        for publisher, share in ((XNAS_ITCH, 0.7), (XNYS_PILLAR, 0.3)):
            # The NYSE bar trades one cent higher: a different bar of the same instrument and minute.
            shift = 0.01 if publisher == XNYS_PILLAR else 0.0
            records.append(
                bar(ts_event_ns=row["ts_event"], instrument_id=ids[row["symbol"]], publisher_id=publisher,
                    open_=row["open"] + shift, high=row["high"] + shift, low=row["low"] + shift,
                    close=row["close"] + shift, volume=max(1, round(share * row["volume"])))
            )  # fmt: skip
    times = bars.column("ts_event").to_numpy()
    return write_dbn(path, records, symbols=ids, dataset="EQUS.ALL", start_ns=int(times.min()),
                     end_ns=int(times.max()) + MINUTE_NS)  # fmt: skip


def run_cli(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gpubench", "hardware=cpu", "tracking.enabled=false", "experiment=quick", "model=mlp",
         "hardware.burn_in_max_seconds=0", f"data.cache_dir={cwd / 'cache'}", *args],
        cwd=cwd, capture_output=True, text=True, timeout=600,
        env={"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(Path(__file__).parents[1])},
    )  # fmt: skip


# Slow (7 s): the loader's part is pinned in process above (the publishers combined, files without bars skipped with
# a warning and recorded); this is the command line on the same data.
@pytest.mark.slow
def test_cli_runs_on_multi_publisher_data_and_skips_a_file_without_records(tmp_path: Path) -> None:
    folder = tmp_path / "download"
    folder.mkdir()
    multi_venue_session(folder / "2024-01-02.equs-all.ohlcv-1m.dbn.zst")
    holiday = empty_file(folder / "2024-01-01.equs-all.ohlcv-1m.dbn.zst", schema="ohlcv-1m")
    completed = run_cli(tmp_path, "data=dbn", f"data.path={folder}", "epochs=2", "warmup_epochs=0")
    assert completed.returncode == 0, completed.stderr[-3000:]
    # A warning, on stderr with the other diagnostics (stdout carries the summary).
    assert f"Skipping 1 DBN file(s) without bars (metadata only, no records): {holiday}." in completed.stderr
    report = json.loads(next(tmp_path.glob("outputs/**/report.json")).read_text())
    assert report["data"]["symbols"] == ["SYNA", "SYNB"]
    assert report["data"]["bars"] == 2 * 2 * 390
    assert report["data"]["files"] == 2
    assert report["data"]["empty_files"] == [str(holiday)]
    assert report["models"]["mlp"]["status"] == "ok"


def test_cli_on_a_file_without_records_exits_2_naming_it(tmp_path: Path) -> None:
    path = empty_file(tmp_path / "test_data.ohlcv-1d.v1.dbn.zst", version=1)
    completed = run_cli(tmp_path, "data=dbn", f"data.path={path}")
    assert completed.returncode == 2, completed.stderr[-3000:]
    assert "Traceback" not in completed.stderr + completed.stdout
    assert str(path) in " ".join(completed.stderr.split())
    assert "holds no bars" in completed.stderr
