"""Features of every bar as float32 tensors on the benchmark device, standardised on the training split only.

Nine base features (:func:`feature_names`: returns, range, body, volume, volatility, calendar), then
:data:`WINDOW_FEATURES` over trailing windows of 2, 3, ... bars up to ``feature_count`` columns."""

import math
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import torch

from gpubench.data.tensors import FeatureTensors
from gpubench.errors import DataError

FEATURE_NAMES: tuple[str, ...] = (
    "log_return",
    "log_range",
    "body",
    "log_volume",
    "rolling_volatility",
    "tod_sin",
    "tod_cos",
    "dow_sin",
    "dow_cos",
)
TARGET_FEATURE = "log_return"
KNOWN_FUTURE_FEATURES: tuple[str, ...] = ("tod_sin", "tod_cos", "dow_sin", "dow_cos")
EXCHANGE_TIMEZONE = "America/New_York"
#: 09:30, the regular US equity session open, in minutes after local midnight.
SESSION_OPEN_MINUTE = 9 * 60 + 30
MINUTES_PER_DAY = 24 * 60
DAYS_PER_WEEK = 7
#: The statistics computed per trailing window beyond the nine base features, in column order.
WINDOW_FEATURES: tuple[str, ...] = ("log_return", "volatility", "range_mean", "log_volume_mean", "log_volume_std")
#: The first trailing window (bars) of the window statistics; the next ones are one bar longer each.
FIRST_WINDOW_BARS = 2
#: A training standard deviation at or below this fraction of the column's scale counts as a constant column.
_CONSTANT_RELATIVE_STD = 1e-12


@dataclass(frozen=True)
class RawFeatures:
    """Unnormalised float64 features, ``values`` (n_bars, len(names)), rows grouped by symbol in time order;
    ``position`` is each bar's index within its symbol."""

    values: np.ndarray
    symbol_id: np.ndarray
    position: np.ndarray
    symbols: tuple[str, ...]
    names: tuple[str, ...] = FEATURE_NAMES


def feature_names(count: int) -> tuple[str, ...]:
    """The names of the first ``count`` feature columns (nine base, then ``{statistic}_{w}``); ValueError below nine."""
    if count < len(FEATURE_NAMES):
        raise ValueError(f"at least the {len(FEATURE_NAMES)} base features are built, not {count}")
    names = list(FEATURE_NAMES)
    window = FIRST_WINDOW_BARS
    while len(names) < count:
        names.extend(f"{statistic}_{window}" for statistic in WINDOW_FEATURES)
        window += 1
    return tuple(names[:count])


def _sorted_bars(bars: pa.Table) -> pa.Table:
    if bars.num_rows == 0:
        raise DataError("The market data holds no bars; gpubench needs at least one symbol with bars.")
    return bars.sort_by([("symbol", "ascending"), ("ts_event", "ascending")])


def _symbol_layout(symbol_column: pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
    """Per row of a symbol-grouped column: the symbol's index and the row's position within its symbol."""
    encoded = pc.dictionary_encode(symbol_column.combine_chunks())
    codes = encoded.indices.to_numpy()
    n_rows = len(codes)
    starts = np.flatnonzero(np.concatenate([[True], codes[1:] != codes[:-1]]))
    # Rows are grouped by symbol, so the dictionary (in first-seen order) lists each symbol once, in row order.
    symbol_id = np.repeat(np.arange(len(starts)), np.diff(np.append(starts, n_rows)))
    position = np.arange(n_rows) - starts[symbol_id]
    return symbol_id, position, tuple(encoded.dictionary.to_pylist())


def rolling_std(values: np.ndarray, position: np.ndarray, window: int) -> np.ndarray:
    """Sample standard deviation over the last ``window`` rows of each group (rows with ``position`` in it), fewer at
    a group's start; 0 for its first row."""
    rows = np.arange(len(values))
    first = rows - np.minimum(position, window - 1)
    count = (rows - first + 1).astype(np.float64)
    sums = np.concatenate([[0.0], np.cumsum(values)])
    squares = np.concatenate([[0.0], np.cumsum(values * values)])
    window_sum = sums[rows + 1] - sums[first]
    window_squares = squares[rows + 1] - squares[first]
    with np.errstate(divide="ignore", invalid="ignore"):
        variance = (window_squares - window_sum * window_sum / count) / (count - 1.0)
    # Cancellation can leave a tiny negative variance for a flat window; a single row has none.
    return np.where(count > 1, np.sqrt(np.clip(variance, 0.0, None)), 0.0)


def rolling_mean(values: np.ndarray, position: np.ndarray, window: int) -> np.ndarray:
    """Mean over the last ``window`` rows of each group, fewer at a group's start (as :func:`rolling_std`)."""
    rows = np.arange(len(values))
    first = rows - np.minimum(position, window - 1)
    sums = np.concatenate([[0.0], np.cumsum(values)])
    return (sums[rows + 1] - sums[first]) / (rows - first + 1)


def window_return(log_close: np.ndarray, position: np.ndarray, window: int) -> np.ndarray:
    """``log(close_t / close_{t-window})`` within each group, back to the group's first row at most (0 there)."""
    rows = np.arange(len(log_close))
    return log_close - log_close[rows - np.minimum(position, window)]


def window_statistics(
    log_close: np.ndarray, base: dict[str, np.ndarray], position: np.ndarray, window: int
) -> dict[str, np.ndarray]:
    """The :data:`WINDOW_FEATURES` over trailing windows of ``window`` bars, from the log close and the base
    columns ``log_return``, ``log_range`` and ``log_volume``."""
    return {
        "log_return": window_return(log_close, position, window),
        "volatility": rolling_std(base["log_return"], position, window),
        "range_mean": rolling_mean(base["log_range"], position, window),
        "log_volume_mean": rolling_mean(base["log_volume"], position, window),
        "log_volume_std": rolling_std(base["log_volume"], position, window),
    }


def raw_features(bars: pa.Table, *, volatility_window: int, feature_count: int = len(FEATURE_NAMES)) -> RawFeatures:
    """The unnormalised features of every bar, grouped by symbol in time order: the first ``feature_count`` columns."""
    table = _sorted_bars(bars)
    symbol_id, position, symbols = _symbol_layout(table.column("symbol"))
    open_, high, low, close = (table.column(name).to_numpy() for name in ("open", "high", "low", "close"))
    volume = table.column("volume").to_numpy()

    log_close = np.log(close)
    log_return = np.concatenate([[0.0], np.diff(log_close)])
    log_return[position == 0] = 0.0

    local_time = (
        table.column("ts_event").cast(pa.timestamp("ns", tz="UTC")).cast(pa.timestamp("ns", tz=EXCHANGE_TIMEZONE))
    )
    minute_of_day = (
        pc.hour(local_time).to_numpy() * 60.0
        + pc.minute(local_time).to_numpy()
        + pc.second(local_time).to_numpy() / 60.0
    )
    minutes_since_open = np.mod(minute_of_day - SESSION_OPEN_MINUTE, MINUTES_PER_DAY)
    time_angle = 2.0 * math.pi * minutes_since_open / MINUTES_PER_DAY
    day_angle = 2.0 * math.pi * pc.day_of_week(local_time).to_numpy() / DAYS_PER_WEEK

    columns = {
        "log_return": log_return,
        "log_range": np.log(high / low),
        "body": (close - open_) / open_,
        "log_volume": np.log1p(volume),
        "rolling_volatility": rolling_std(log_return, position, volatility_window),
        "tod_sin": np.sin(time_angle),
        "tod_cos": np.cos(time_angle),
        "dow_sin": np.sin(day_angle),
        "dow_cos": np.cos(day_angle),
    }
    names = feature_names(feature_count)
    window = FIRST_WINDOW_BARS
    while len(columns) < len(names):
        statistics = window_statistics(log_close, columns, position, window)
        columns.update({f"{statistic}_{window}": statistics[statistic] for statistic in WINDOW_FEATURES})
        window += 1
    return RawFeatures(
        values=np.stack([columns[name] for name in names], axis=1),
        symbol_id=symbol_id,
        position=position,
        symbols=symbols,
        names=names,
    )


def training_rows(symbol_id: np.ndarray, position: np.ndarray, train_fraction: float) -> np.ndarray:
    """True for the first ``floor(train_fraction * n)`` bars of each symbol with ``n`` bars."""
    bars_per_symbol = np.bincount(symbol_id)
    train_bars = np.floor(train_fraction * bars_per_symbol).astype(np.int64)
    return position < train_bars[symbol_id]


def minimum_bars_per_symbol(train_fraction: float, volatility_window: int) -> int:
    """Fewest bars a symbol needs: a full volatility window in training and at least one validation bar."""
    bars = math.ceil(volatility_window / train_fraction)
    while math.floor(train_fraction * bars) < volatility_window or bars - math.floor(train_fraction * bars) < 1:
        bars += 1
    return bars


def fit_standardisation(values: np.ndarray, is_train: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-column mean and standard deviation of the training rows; a constant column gets a scale of 1."""
    train = values[is_train]
    mean = train.mean(axis=0)
    std = train.std(axis=0)
    # np.std of a constant column is rounding noise, not 0: such a column is only centred.
    constant = std <= _CONSTANT_RELATIVE_STD * np.maximum(1.0, np.abs(mean))
    return mean, np.where(constant, 1.0, std)


def build_features(
    bars: pa.Table,
    *,
    train_fraction: float,
    volatility_window: int,
    device: torch.device | str,
    feature_count: int = len(FEATURE_NAMES),
) -> FeatureTensors:
    """Feature tensors of a bar table on ``device``, standardised on the training split; DataError when the table is
    empty or a symbol is shorter than :func:`minimum_bars_per_symbol`."""
    raw = raw_features(bars, volatility_window=volatility_window, feature_count=feature_count)
    bars_per_symbol = np.bincount(raw.symbol_id)
    needed = minimum_bars_per_symbol(train_fraction, volatility_window)
    short = [f"{raw.symbols[i]} ({count})" for i, count in enumerate(bars_per_symbol) if count < needed]
    if short:
        raise DataError(
            f"Too few bars for symbol(s) {', '.join(short)}: with data.train_fraction={train_fraction} and "
            f"data.volatility_window={volatility_window} every symbol needs at least {needed} bars. Load more "
            "days, or remove those symbols."
        )
    is_train = training_rows(raw.symbol_id, raw.position, train_fraction)
    mean, std = fit_standardisation(raw.values, is_train)
    normalised = (raw.values - mean) / std
    target = raw.values[:, FEATURE_NAMES.index(TARGET_FEATURE)]
    return FeatureTensors(
        values=torch.from_numpy(normalised.astype(np.float32)).to(device),
        log_return=torch.from_numpy(target.astype(np.float32)).to(device),
        symbol_id=torch.from_numpy(raw.symbol_id.astype(np.int64)).to(device),
        is_train=torch.from_numpy(is_train).to(device),
        feature_names=raw.names,
        target_column=raw.names.index(TARGET_FEATURE),
        known_future_columns=tuple(raw.names.index(name) for name in KNOWN_FUTURE_FEATURES),
        symbols=raw.symbols,
    )
