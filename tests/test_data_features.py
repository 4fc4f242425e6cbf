"""Features: known values on a hand-made example, the rolling window, train-only standardisation, the tensors."""

import datetime as dt
import math
import re

import numpy as np
import pyarrow as pa
import pytest
import torch

from gpubench.data.bars import BAR_SCHEMA
from gpubench.data.features import (
    FEATURE_NAMES,
    KNOWN_FUTURE_FEATURES,
    build_features,
    feature_names,
    fit_standardisation,
    minimum_bars_per_symbol,
    raw_features,
    rolling_std,
)
from gpubench.errors import DataError

NEW_YORK_WINTER = dt.timezone(dt.timedelta(hours=-5))
NEW_YORK_SUMMER = dt.timezone(dt.timedelta(hours=-4))


def _ns(moment: dt.datetime) -> int:
    return int(moment.timestamp()) * 1_000_000_000


def _table(columns: dict[str, list]) -> pa.Table:
    return pa.table(columns, schema=BAR_SCHEMA)


def _column(raw: np.ndarray, name: str) -> np.ndarray:
    return raw[:, FEATURE_NAMES.index(name)]


# Five bars of one symbol: three at the Tuesday open, one Friday pre-market minute, the Friday last minute.
FIVE_TIMES = [
    dt.datetime(2024, 1, 2, 9, 30, tzinfo=NEW_YORK_WINTER),
    dt.datetime(2024, 1, 2, 9, 31, tzinfo=NEW_YORK_WINTER),
    dt.datetime(2024, 1, 2, 9, 32, tzinfo=NEW_YORK_WINTER),
    dt.datetime(2024, 1, 5, 9, 29, tzinfo=NEW_YORK_WINTER),
    dt.datetime(2024, 1, 5, 15, 59, tzinfo=NEW_YORK_WINTER),
]
FIVE_BARS = {
    "ts_event": [_ns(moment) for moment in FIVE_TIMES],
    "symbol": ["X"] * 5,
    "open": [100.0, 101.0, 102.0, 100.0, 99.0],
    "high": [101.0, 103.0, 102.5, 100.5, 100.0],
    "low": [99.5, 100.5, 99.5, 98.5, 98.0],
    "close": [101.0, 102.0, 100.0, 99.0, 99.5],
    "volume": [1000.0, 0.0, 500.0, 250.0, 125.0],
}


def test_known_values_on_five_bars() -> None:
    raw = raw_features(_table(FIVE_BARS), volatility_window=3).values
    returns = [0.0, math.log(102 / 101), math.log(100 / 102), math.log(99 / 100), math.log(99.5 / 99)]
    np.testing.assert_allclose(_column(raw, "log_return"), returns, rtol=1e-12)
    np.testing.assert_allclose(
        _column(raw, "log_range"),
        [
            math.log(101 / 99.5),
            math.log(103 / 100.5),
            math.log(102.5 / 99.5),
            math.log(100.5 / 98.5),
            math.log(100 / 98),
        ],
        rtol=1e-12,
    )
    np.testing.assert_allclose(_column(raw, "body"), [0.01, 1 / 101, -2 / 102, -0.01, 0.5 / 99], rtol=1e-12)
    np.testing.assert_allclose(
        _column(raw, "log_volume"), [math.log(1001), 0.0, math.log(501), math.log(251), math.log(126)]
    )
    windows = [[0.0], returns[:2], returns[:3], returns[1:4], returns[2:5]]
    expected_volatility = [0.0] + [float(np.std(window, ddof=1)) for window in windows[1:]]
    np.testing.assert_allclose(_column(raw, "rolling_volatility"), expected_volatility, rtol=1e-9, atol=1e-15)
    minutes = np.array([0, 1, 2, 1439, 389])
    np.testing.assert_allclose(_column(raw, "tod_sin"), np.sin(2 * np.pi * minutes / 1440), atol=1e-12)
    np.testing.assert_allclose(_column(raw, "tod_cos"), np.cos(2 * np.pi * minutes / 1440), atol=1e-12)
    weekdays = np.array([1, 1, 1, 4, 4])  # Tuesday, Friday
    np.testing.assert_allclose(_column(raw, "dow_sin"), np.sin(2 * np.pi * weekdays / 7), atol=1e-12)
    np.testing.assert_allclose(_column(raw, "dow_cos"), np.cos(2 * np.pi * weekdays / 7), atol=1e-12)


def test_time_of_day_follows_new_york_daylight_saving() -> None:
    opens = [
        dt.datetime(2024, 1, 2, 9, 30, tzinfo=NEW_YORK_WINTER),
        dt.datetime(2024, 7, 1, 9, 30, tzinfo=NEW_YORK_SUMMER),
    ]
    table = _table({**{key: values[:2] for key, values in FIVE_BARS.items()}, "ts_event": [_ns(t) for t in opens]})
    raw = raw_features(table, volatility_window=2).values
    np.testing.assert_allclose(_column(raw, "tod_sin"), [0.0, 0.0], atol=1e-12)
    np.testing.assert_allclose(_column(raw, "tod_cos"), [1.0, 1.0], atol=1e-12)


def test_rolling_std_matches_a_plain_loop() -> None:
    values = np.random.default_rng(0).normal(size=46)
    lengths = [1, 5, 40]
    position = np.concatenate([np.arange(length) for length in lengths])
    window = 7
    expected = []
    for row, pos in enumerate(position):
        chunk = values[row - min(pos, window - 1) : row + 1]
        expected.append(float(np.std(chunk, ddof=1)) if len(chunk) > 1 else 0.0)
    np.testing.assert_allclose(rolling_std(values, position, window), expected, rtol=1e-9, atol=1e-12)


def test_fit_standardisation_uses_training_rows_only() -> None:
    values = np.array([[1.0, 5.0], [3.0, 5.0], [100.0, 7.0]])
    mean, std = fit_standardisation(values, np.array([True, True, False]))
    np.testing.assert_allclose(mean, [2.0, 5.0])
    np.testing.assert_allclose(std, [1.0, 1.0])  # column 1 is constant in training: centred, not scaled


def test_minimum_bars_per_symbol_known_answers() -> None:
    assert minimum_bars_per_symbol(0.8, 30) == 38  # floor(0.8 * 37) = 29 < 30
    assert minimum_bars_per_symbol(0.5, 2) == 4
    assert minimum_bars_per_symbol(0.99, 2) == 3  # two training bars and one validation bar


def _random_walk(symbols: list[str], bars: int, seed: int = 0) -> pa.Table:
    rng = np.random.default_rng(seed)
    start = _ns(dt.datetime(2024, 1, 2, 9, 30, tzinfo=NEW_YORK_WINTER))
    columns: dict[str, list] = {name: [] for name in BAR_SCHEMA.names}
    for symbol in symbols:
        close = 50 * np.exp(np.cumsum(rng.normal(0, 1e-3, bars)))
        open_ = close * np.exp(rng.normal(0, 5e-4, bars))
        columns["ts_event"] += (start + np.arange(bars) * 60_000_000_000).tolist()
        columns["symbol"] += [symbol] * bars
        columns["open"] += open_.tolist()
        columns["close"] += close.tolist()
        columns["high"] += (np.maximum(open_, close) * 1.001).tolist()
        columns["low"] += (np.minimum(open_, close) * 0.999).tolist()
        columns["volume"] += rng.integers(1, 10_000, bars).astype(float).tolist()
    return _table(columns)


def test_validation_bars_do_not_change_the_training_features() -> None:
    table = _random_walk(["A", "B"], 100)
    features = build_features(table, train_fraction=0.6, volatility_window=10, device="cpu")
    validation = np.tile(np.arange(100) >= 60, 2)
    scaled = {name: table.column(name).to_numpy().copy() for name in ("open", "high", "low", "close", "volume")}
    for name in ("open", "high", "low", "close"):
        scaled[name][validation] *= 3.0
    scaled["volume"][validation] *= 100.0
    altered = table
    for name, values in scaled.items():
        altered = altered.set_column(altered.schema.get_field_index(name), name, pa.array(values))
    altered_features = build_features(altered, train_fraction=0.6, volatility_window=10, device="cpu")
    train = features.is_train
    assert torch.equal(altered_features.is_train, train)
    torch.testing.assert_close(altered_features.values[train], features.values[train], rtol=0, atol=0)
    assert not torch.allclose(altered_features.values[~train], features.values[~train])
    # Standardised on the training rows: mean 0 and standard deviation 1 there.
    torch.testing.assert_close(features.values[train].mean(0), torch.zeros(len(FEATURE_NAMES)), atol=1e-5, rtol=0)
    varying = features.values[train].std(0, unbiased=False)
    constant = [FEATURE_NAMES.index("dow_sin"), FEATURE_NAMES.index("dow_cos")]  # one weekday only
    keep = [i for i in range(len(FEATURE_NAMES)) if i not in constant]
    torch.testing.assert_close(varying[keep], torch.ones(len(keep)), atol=1e-4, rtol=0)


def test_feature_tensors_follow_the_contract() -> None:
    table = _random_walk(["B", "A"], 80)
    features = build_features(table, train_fraction=0.75, volatility_window=5, device=torch.device("cpu"))
    assert features.values.dtype == torch.float32
    assert features.values.shape == (160, len(FEATURE_NAMES))
    assert features.device == torch.device("cpu")
    assert features.symbols == ("A", "B")
    assert features.symbol_id.dtype == torch.int64
    assert features.symbol_id.tolist() == [0] * 80 + [1] * 80
    assert features.is_train.tolist() == ([True] * 60 + [False] * 20) * 2
    assert features.feature_names[features.target_column] == "log_return"
    assert tuple(features.feature_names[i] for i in features.known_future_columns) == KNOWN_FUTURE_FEATURES
    assert bool(features.values.isfinite().all())
    raw = raw_features(table, volatility_window=5).values
    np.testing.assert_allclose(features.log_return.numpy(), _column(raw, "log_return").astype(np.float32))
    assert features.log_return[80].item() == 0.0, "a symbol's first return must not reach into the previous symbol"
    starts = features.window_starts(10, "train")
    assert starts.numel() == 2 * (60 - 10 + 1)


def test_row_order_of_the_input_does_not_matter() -> None:
    table = _random_walk(["A", "B"], 60)
    shuffled = table.take(np.random.default_rng(1).permutation(table.num_rows))
    first = build_features(table, train_fraction=0.7, volatility_window=5, device="cpu")
    second = build_features(shuffled, train_fraction=0.7, volatility_window=5, device="cpu")
    assert torch.equal(first.values, second.values)


def test_symbols_with_too_few_bars_raise_naming_them() -> None:
    table = pa.concat_tables([_random_walk(["LONG"], 100), _random_walk(["SHORT"], 10, seed=1)])
    with pytest.raises(DataError, match=re.escape("SHORT (10)")) as error:
        build_features(table, train_fraction=0.8, volatility_window=30, device="cpu")
    assert "at least 38 bars" in str(error.value)
    assert "LONG" not in str(error.value)


def test_no_bars_raise() -> None:
    with pytest.raises(DataError, match="no bars"):
        build_features(BAR_SCHEMA.empty_table(), train_fraction=0.8, volatility_window=30, device="cpu")


# --------------------------------------------------------------------------------------------------- more features


def _two_symbols(n: int = 40, seed: int = 3) -> pa.Table:
    """``n`` bars each of two symbols with random prices and volumes, one minute apart."""
    rng = np.random.default_rng(seed)
    start = dt.datetime(2024, 1, 2, 9, 30, tzinfo=NEW_YORK_WINTER)
    rows: dict[str, list] = {key: [] for key in FIVE_BARS}
    for symbol in ("A", "B"):
        close = 100.0 * np.exp(np.cumsum(rng.normal(0, 0.01, n)))
        open_ = close * np.exp(rng.normal(0, 0.002, n))
        high = np.maximum(open_, close) * (1 + rng.uniform(0, 0.01, n))
        low = np.minimum(open_, close) * (1 - rng.uniform(0, 0.01, n))
        rows["ts_event"] += [_ns(start + dt.timedelta(minutes=i)) for i in range(n)]
        rows["symbol"] += [symbol] * n
        rows["open"] += list(open_)
        rows["high"] += list(high)
        rows["low"] += list(low)
        rows["close"] += list(close)
        rows["volume"] += list(rng.integers(0, 5000, n).astype(float))
    return _table(rows)


def test_feature_names_count_the_base_then_five_statistics_per_window() -> None:
    assert feature_names(9) == FEATURE_NAMES
    names = feature_names(225)
    assert len(names) == len(set(names)) == 225
    assert names[9:14] == ("log_return_2", "volatility_2", "range_mean_2", "log_volume_mean_2", "log_volume_std_2")
    # 216 window statistics: windows 2..44 give 215, window 45 adds its first.
    assert names[-2:] == ("log_volume_std_44", "log_return_45")
    with pytest.raises(ValueError, match="at least the 9 base features"):
        feature_names(8)


def test_window_statistics_match_a_hand_loop_per_symbol() -> None:
    table = _two_symbols()
    raw = raw_features(table, volatility_window=5, feature_count=60)
    assert raw.values.shape == (80, 60)
    base = raw.values[:, : len(FEATURE_NAMES)]
    np.testing.assert_array_equal(base, raw_features(table, volatility_window=5).values)
    close = np.array(table.column("close").to_pylist())
    for name in raw.names[len(FEATURE_NAMES) :]:
        statistic, window = name.rsplit("_", 1)
        window = int(window)
        for row in range(80):
            start_of_symbol = 0 if row < 40 else 40
            first = max(start_of_symbol, row - window + 1)
            if statistic == "log_return":
                expected = math.log(close[row] / close[max(start_of_symbol, row - window)])
            else:
                source = {"volatility": "log_return", "range_mean": "log_range"}.get(statistic, "log_volume")
                values = _column(raw.values, source)[first : row + 1]
                if statistic.endswith("mean"):
                    expected = float(np.mean(values))
                else:
                    expected = float(np.std(values, ddof=1)) if len(values) > 1 else 0.0
            assert raw.values[row, raw.names.index(name)] == pytest.approx(expected, rel=1e-9, abs=1e-12), (name, row)


def test_225_features_reach_the_tensors_with_the_calendar_columns_known_in_advance() -> None:
    features = build_features(_two_symbols(), train_fraction=0.75, volatility_window=5, device="cpu", feature_count=225)
    assert features.n_features == 225
    assert features.feature_names == feature_names(225)
    assert [features.feature_names[i] for i in features.known_future_columns] == list(KNOWN_FUTURE_FEATURES)
    assert features.feature_names[features.target_column] == "log_return"
    # Standardised on the training rows: non-constant columns have mean 0 and sd 1 there.
    train = features.values[features.is_train].double()
    varying = train.std(dim=0, unbiased=False) > 1e-3
    torch.testing.assert_close(
        train.mean(dim=0)[varying], torch.zeros(int(varying.sum()), dtype=torch.float64), atol=1e-5, rtol=0
    )
