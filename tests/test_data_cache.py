"""The Parquet bar cache, the data=parquet reader, and the loader that ties sources, reader and cache together."""

import shutil
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gpubench.data.bars import BAR_SCHEMA
from gpubench.data.cache import atomic_path, content_hash, load_cached_bars, read_parquet_bars, resolve_parquet_paths
from gpubench.data.config import DataConfig
from gpubench.data.dbn import read_dbn_bars
from gpubench.data.loader import load_bars, load_features
from gpubench.data.synthetic import BARS_PER_SESSION, generate_synthetic_dbn
from gpubench.errors import DataError

SYMBOLS = ["SYNA", "SYNB"]


@pytest.fixture(scope="module")
def dbn_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, ...]:
    """Two sessions of two symbols, and a third file from another seed (a different content for one day)."""
    cache_dir = tmp_path_factory.mktemp("cache-src")
    first = generate_synthetic_dbn(cache_dir, symbols=SYMBOLS, days=2, start_date="2024-01-02", seed=7).files
    other = generate_synthetic_dbn(cache_dir, symbols=SYMBOLS, days=1, start_date="2024-01-02", seed=8).files
    return (*first, *other)


@pytest.fixture
def user_folder(dbn_files: tuple[Path, ...], tmp_path: Path) -> Path:
    """A folder holding copies of the two seed-7 sessions, like a user's download."""
    folder = tmp_path / "download"
    folder.mkdir()
    for path in dbn_files[:2]:
        shutil.copyfile(path, folder / path.name)
    return folder


class CountingDecoder:
    """Wraps the DBN reader and counts how often the cache had to decode."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, paths: Sequence[Path]) -> pa.Table:
        self.calls += 1
        return read_dbn_bars(paths)


# --------------------------------------------------------------------------------------------------- hashing


def test_content_hash_depends_on_bytes_and_version_not_names_or_order(user_folder: Path, tmp_path: Path) -> None:
    files = sorted(user_folder.iterdir())
    renamed = [shutil.copyfile(path, tmp_path / f"renamed{index}.bin") for index, path in enumerate(files)]
    key = content_hash(files, version="1")
    assert len(key) == 32
    assert content_hash(list(reversed(renamed)), version="1") == key
    assert content_hash(files, version="2") != key
    data = bytearray(files[0].read_bytes())
    data[-1] ^= 0x01
    files[0].write_bytes(bytes(data))
    assert content_hash(files, version="1") != key


def test_atomic_path_renames_on_success_and_leaves_nothing_on_failure(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "file.txt"
    with atomic_path(target) as temporary:
        temporary.write_text("done")
        assert not target.exists()
    assert target.read_text() == "done"
    with pytest.raises(RuntimeError), atomic_path(target) as temporary:
        temporary.write_text("half")
        raise RuntimeError("interrupted")
    assert target.read_text() == "done"
    assert sorted(path.name for path in target.parent.iterdir()) == ["file.txt"]


# --------------------------------------------------------------------------------------------------- cache


def test_second_load_hits_the_cache_and_gives_the_same_table(user_folder: Path, tmp_path: Path) -> None:
    files = sorted(user_folder.iterdir())
    decoder = CountingDecoder()
    first = load_cached_bars(files, tmp_path / "cache", decoder)
    second = load_cached_bars(files, tmp_path / "cache", decoder)
    assert (first.cache_hit, second.cache_hit, decoder.calls) == (False, True, 1)
    assert second.table.equals(first.table)
    assert second.table.schema.equals(BAR_SCHEMA)
    assert first.cache_file == second.cache_file
    assert first.cache_file.is_file()


def test_changed_content_misses_the_cache(dbn_files: tuple[Path, ...], user_folder: Path, tmp_path: Path) -> None:
    files = sorted(user_folder.iterdir())
    decoder = CountingDecoder()
    before = load_cached_bars(files, tmp_path / "cache", decoder)
    # Same name, same day and symbols, different bars: only the content tells them apart.
    shutil.copyfile(dbn_files[2], files[0])
    after = load_cached_bars(files, tmp_path / "cache", decoder)
    assert not after.cache_hit
    assert decoder.calls == 2
    assert after.content_hash != before.content_hash
    assert not after.table.equals(before.table)


def test_unreadable_cache_file_is_rebuilt(user_folder: Path, tmp_path: Path) -> None:
    files = sorted(user_folder.iterdir())
    decoder = CountingDecoder()
    first = load_cached_bars(files, tmp_path / "cache", decoder)
    first.cache_file.write_bytes(b"not parquet")
    again = load_cached_bars(files, tmp_path / "cache", decoder)
    assert not again.cache_hit
    assert decoder.calls == 2
    assert again.table.equals(first.table)
    assert load_cached_bars(files, tmp_path / "cache", decoder).cache_hit


# --------------------------------------------------------------------------------------------------- parquet source


def _bars(n: int = 50) -> pa.Table:
    close = 100 + np.arange(n, dtype=np.float64) * 0.01
    return pa.table(
        {
            "ts_event": pa.array(1_704_205_800_000_000_000 + np.arange(n, dtype=np.int64) * 60_000_000_000),
            "symbol": ["AAA"] * n,
            "open": close - 0.01,
            "high": close + 0.02,
            "low": close - 0.02,
            "close": close,
            "volume": np.arange(n, dtype=np.int64) + 10,
            "extra": np.zeros(n),
        }
    )


def test_parquet_source_reads_casts_and_sorts(tmp_path: Path) -> None:
    bars = _bars()
    shuffled = bars.take(np.random.default_rng(0).permutation(bars.num_rows))
    pq.write_table(shuffled, tmp_path / "bars.parquet")
    table = read_parquet_bars(resolve_parquet_paths(tmp_path))
    assert table.schema.equals(BAR_SCHEMA)
    np.testing.assert_array_equal(table.column("ts_event").to_numpy(), bars.column("ts_event").to_numpy())
    np.testing.assert_array_equal(table.column("volume").to_numpy(), np.arange(50) + 10.0)


def test_parquet_source_accepts_a_timestamp_column(tmp_path: Path) -> None:
    bars = _bars()
    nanoseconds = bars.column("ts_event").cast(pa.timestamp("ns", tz="UTC"))
    as_time = bars.set_column(0, "ts_event", nanoseconds.cast(pa.timestamp("us", tz="UTC")))
    pq.write_table(as_time, tmp_path / "bars.parquet")
    table = read_parquet_bars([tmp_path / "bars.parquet"])
    np.testing.assert_array_equal(table.column("ts_event").to_numpy(), bars.column("ts_event").to_numpy())


def test_parquet_missing_columns_name_the_file_and_the_required_columns(tmp_path: Path) -> None:
    path = tmp_path / "thin.parquet"
    pq.write_table(_bars().drop_columns(["volume", "low"]), path)
    with pytest.raises(DataError) as error:
        read_parquet_bars([path])
    message = str(error.value)
    assert str(path) in message
    assert "low, volume" in message
    assert "ts_event, symbol, open, high, low, close, volume" in message


def test_parquet_bad_values_name_the_file(tmp_path: Path) -> None:
    bars = _bars()
    high = bars.column("high").to_numpy().copy()
    high[7] = 1.0
    path = tmp_path / "bad.parquet"
    pq.write_table(bars.set_column(3, "high", pa.array(high)), path)
    with pytest.raises(DataError, match="a high below its open or close") as error:
        read_parquet_bars([path])
    assert str(path) in str(error.value)


def test_parquet_wrong_type_and_garbage_name_the_file(tmp_path: Path) -> None:
    text_prices = tmp_path / "text.parquet"
    pq.write_table(_bars().set_column(2, "open", pa.array(["cheap"] * 50)), text_prices)
    with pytest.raises(DataError, match="'open'") as error:
        read_parquet_bars([text_prices])
    assert str(text_prices) in str(error.value)
    garbage = tmp_path / "garbage.parquet"
    garbage.write_bytes(b"PAR1 but not really")
    with pytest.raises(DataError, match="Cannot read the Parquet file") as error:
        read_parquet_bars([garbage])
    assert str(garbage) in str(error.value)


# --------------------------------------------------------------------------------------------------- loader


def test_synthetic_source_generates_reads_and_then_hits_the_cache(tmp_path: Path) -> None:
    config = DataConfig(source="synthetic", cache_dir=str(tmp_path), symbols=SYMBOLS, days=2, seed=7)
    table, first = load_bars(config)
    _, second = load_bars(config)
    assert table.num_rows == 2 * 2 * BARS_PER_SESSION
    assert (first.cache_hit, second.cache_hit) == (False, True)
    assert first.source == "synthetic"
    assert first.files == 2
    assert first.bars == table.num_rows
    assert first.symbols == list(SYMBOLS)
    assert first.first_timestamp == "2024-01-02T14:30:00Z"
    assert first.last_timestamp == "2024-01-03T20:59:00Z"
    assert first.content_hash == second.content_hash
    assert Path(first.path).parent == tmp_path / "synthetic"
    assert first.load_seconds > 0
    assert first.to_dict()["symbols"] == SYMBOLS


def test_dbn_source_reads_the_folder_through_the_cache(user_folder: Path, tmp_path: Path) -> None:
    config = DataConfig(source="dbn", path=str(user_folder), cache_dir=str(tmp_path / "cache"))
    table, provenance = load_bars(config)
    assert table.num_rows == 2 * 2 * BARS_PER_SESSION
    assert (provenance.files, provenance.path, provenance.cache_hit) == (2, str(user_folder), False)
    assert load_bars(config)[1].cache_hit
    # The same bytes as the synthetic run's files: the same content hash and the same bars.
    synthetic = DataConfig(source="synthetic", cache_dir=str(tmp_path / "cache"), symbols=SYMBOLS, days=2, seed=7)
    synthetic_table, synthetic_provenance = load_bars(synthetic)
    assert synthetic_provenance.cache_hit
    assert synthetic_provenance.content_hash == provenance.content_hash
    assert synthetic_table.equals(table)


def test_parquet_source_reads_directly(tmp_path: Path) -> None:
    pq.write_table(_bars(), tmp_path / "bars.parquet")
    config = DataConfig(source="parquet", path=str(tmp_path / "*.parquet"), cache_dir=str(tmp_path / "cache"))
    table, provenance = load_bars(config)
    assert table.num_rows == 50
    assert (provenance.source, provenance.files, provenance.bars, provenance.cache_hit) == ("parquet", 1, 50, False)
    assert provenance.symbols == ["AAA"]
    assert not (tmp_path / "cache").exists()


def test_cache_dir_tilde_is_expanded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    config = DataConfig(source="synthetic", cache_dir="~/gpubench-cache", symbols=["SYNA"], days=1)
    _, provenance = load_bars(config)
    assert Path(provenance.path).is_relative_to(tmp_path / "gpubench-cache")
    assert len(list((tmp_path / "gpubench-cache" / "bars").glob("*.parquet"))) == 1


def test_missing_dbn_path_raises_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    with pytest.raises(DataError, match="does not exist") as error:
        load_bars(DataConfig(source="dbn", path=str(missing), cache_dir=str(tmp_path)))
    assert str(missing) in str(error.value)


def test_load_features_gives_finite_tensors_and_the_provenance(tmp_path: Path) -> None:
    config = DataConfig(source="synthetic", cache_dir=str(tmp_path), symbols=SYMBOLS, days=2, volatility_window=10)
    features, provenance = load_features(config, "cpu")
    assert features.n_bars == provenance.bars == 2 * 2 * BARS_PER_SESSION
    assert features.symbols == tuple(SYMBOLS)
    assert bool(features.values.isfinite().all())


def test_data_symbols_filter_dbn_bars_as_they_select_synthetic_ones(user_folder: Path, tmp_path: Path) -> None:
    config = DataConfig(source="dbn", path=str(user_folder), cache_dir=str(tmp_path / "cache"), symbols=["SYNB"])
    table, provenance = load_bars(config)
    assert table.num_rows == 2 * BARS_PER_SESSION  # two sessions of one of the two symbols
    assert set(table.column("symbol").to_pylist()) == {"SYNB"}
    assert (provenance.symbols, provenance.bars) == (["SYNB"], table.num_rows)
    # The cache holds every symbol: a second filter reads it back and selects the other one.
    other, second = load_bars(DataConfig(**{**config.__dict__, "symbols": ["SYNA"]}))
    assert second.cache_hit and set(other.column("symbol").to_pylist()) == {"SYNA"}
    # Null (the dbn group's default) keeps every symbol.
    assert load_bars(DataConfig(**{**config.__dict__, "symbols": None}))[1].symbols == ["SYNA", "SYNB"]


def test_a_symbol_filter_matching_nothing_names_the_symbols_the_data_holds(user_folder: Path, tmp_path: Path) -> None:
    config = DataConfig(source="dbn", path=str(user_folder), cache_dir=str(tmp_path / "cache"), symbols=["AAPL"])
    with pytest.raises(
        DataError,
        match=r"data.symbols=\['AAPL'\] matches no symbol in data.path=.*, which holds "
        r"SYNA, SYNB\. Set data.symbols to some of those, or data.symbols=null",
    ):
        load_bars(config)


def test_a_partly_matching_filter_keeps_the_matches_and_warns(
    user_folder: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = DataConfig(
        source="dbn", path=str(user_folder), cache_dir=str(tmp_path / "cache"), symbols=["SYNA", "MSFT"]
    )
    with caplog.at_level("WARNING", logger="gpubench.data.loader"):
        table, _ = load_bars(config)
    assert set(table.column("symbol").to_pylist()) == {"SYNA"}
    assert "data.symbols names ['MSFT']" in caplog.text


def test_a_symbol_keeps_its_per_publisher_series() -> None:
    from gpubench.data.loader import select_symbols

    symbols = ["AAPL@XNAS.ITCH.XNAS", "AAPL@XNYS.PILLAR.XNYS", "MSFT@XNAS.ITCH.XNAS"]
    table = pa.table({"symbol": symbols, "close": [1.0, 2.0, 3.0]})
    assert select_symbols(table, ["AAPL"], "here").column("close").to_pylist() == [1.0, 2.0]
    assert select_symbols(table, ["MSFT@XNAS.ITCH.XNAS"], "here").column("close").to_pylist() == [3.0]
