"""The synthetic market: determinism, calendar, OHLC consistency, stylised facts, and its DBN files on disk."""

import datetime as dt
import re
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from gpubench.data import synthetic
from gpubench.data.synthetic import (
    BARS_PER_SESSION,
    MANIFEST_NAME,
    garch_variance,
    generate_synthetic_dbn,
    intraday_volatility_profile,
    intraday_volume_profile,
    session_open_ns,
    simulate_market,
    trading_days,
)
from gpubench.errors import DataError

SYMBOLS = ["SYNA", "SYNB"]


def _generate(cache_dir: Path, seed: int = 7, days: int = 2) -> synthetic.SyntheticDataset:
    return generate_synthetic_dbn(cache_dir, symbols=SYMBOLS, days=days, start_date="2024-01-02", seed=seed)


def test_same_seed_writes_identical_files_and_another_seed_different_ones(tmp_path: Path) -> None:
    first = _generate(tmp_path / "a")
    second = _generate(tmp_path / "b")
    other = _generate(tmp_path / "c", seed=8)
    assert [path.name for path in first.files] == [path.name for path in second.files]
    assert [path.read_bytes() for path in first.files] == [path.read_bytes() for path in second.files]
    assert first.files[0].read_bytes() != other.files[0].read_bytes()


def test_simulation_is_deterministic_per_seed() -> None:
    first = simulate_market(SYMBOLS, 2, "2024-01-02", seed=3)
    again = simulate_market(SYMBOLS, 2, "2024-01-02", seed=3)
    other = simulate_market(SYMBOLS, 2, "2024-01-02", seed=4)
    for name in ("open_ticks", "high_ticks", "low_ticks", "close_ticks", "volume"):
        np.testing.assert_array_equal(getattr(first, name), getattr(again, name))
    assert not np.array_equal(first.close_ticks, other.close_ticks)


def test_a_symbol_s_bars_do_not_depend_on_the_other_symbols_listed() -> None:
    alone = simulate_market(["SYNA"], 2, "2024-01-02", seed=3)
    together = simulate_market(["SYNB", "SYNA"], 2, "2024-01-02", seed=3)
    np.testing.assert_array_equal(alone.close_ticks[0], together.close_ticks[1])
    np.testing.assert_array_equal(alone.volume[0], together.volume[1])


def test_trading_days_skip_weekends() -> None:
    friday = dt.date(2024, 1, 5)
    assert trading_days(friday, 3) == [dt.date(2024, 1, 5), dt.date(2024, 1, 8), dt.date(2024, 1, 9)]
    assert trading_days(dt.date(2024, 1, 6), 1) == [dt.date(2024, 1, 8)]


def test_session_opens_at_0930_new_york_in_winter_and_summer() -> None:
    # 09:30 EST is 14:30 UTC; 09:30 EDT is 13:30 UTC.
    assert (
        session_open_ns(dt.date(2024, 1, 2))
        == int(dt.datetime(2024, 1, 2, 14, 30, tzinfo=dt.timezone.utc).timestamp()) * 10**9
    )
    assert (
        session_open_ns(dt.date(2024, 7, 1))
        == int(dt.datetime(2024, 7, 1, 13, 30, tzinfo=dt.timezone.utc).timestamp()) * 10**9
    )


def test_bars_cover_each_session_minute_by_minute() -> None:
    market = simulate_market(["X"], 3, "2024-01-05", seed=1)
    assert market.ts_event_ns.shape == (3 * BARS_PER_SESSION,)
    assert market.close_ticks.shape == (1, 3 * BARS_PER_SESSION)
    sessions = market.ts_event_ns.reshape(3, BARS_PER_SESSION)
    assert (np.diff(sessions, axis=1) == 60 * 10**9).all()
    assert [session_open_ns(day) for day in market.days] == sessions[:, 0].tolist()
    assert market.days == (dt.date(2024, 1, 5), dt.date(2024, 1, 8), dt.date(2024, 1, 9))


def test_ohlc_is_consistent_positive_and_continuous_within_a_session() -> None:
    market = simulate_market(SYMBOLS, 5, "2024-01-02", seed=11)
    low, high = market.low_ticks, market.high_ticks
    assert (market.low_ticks >= 1).all()
    assert (low <= np.minimum(market.open_ticks, market.close_ticks)).all()
    assert (high >= np.maximum(market.open_ticks, market.close_ticks)).all()
    assert (high > low).mean() > 0.5, "most bars should have a range of at least one tick"
    within_session = np.arange(1, 5 * BARS_PER_SESSION) % BARS_PER_SESSION != 0
    np.testing.assert_array_equal(
        market.open_ticks[:, 1:][:, within_session], market.close_ticks[:, :-1][:, within_session]
    )
    assert (market.volume >= 1).all()


def test_garch_variance_known_answer() -> None:
    # h0 = 1; h1 = 0.1 + (0.1 * 2**2 + 0.8) * 1 = 1.3; h2 = 0.1 + (0.1 * 0 + 0.8) * 1.3 = 1.14.
    np.testing.assert_allclose(garch_variance(np.array([2.0, 0.0, 1.0]), alpha=0.1, beta=0.8), [1.0, 1.3, 1.14])


def _bar_returns(market: synthetic.SyntheticMarket) -> np.ndarray:
    """Open-to-close log returns of the first symbol, one row per session (no overnight gaps)."""
    returns = np.log(market.close_ticks[0] / market.open_ticks[0])
    return returns.reshape(len(market.days), BARS_PER_SESSION)


def test_returns_show_volatility_clustering() -> None:
    market = simulate_market(["X"], 30, "2024-01-02", seed=5)
    # Divide out the intraday profile so the autocorrelation measures clustering, not the U-shape.
    magnitude = np.abs(_bar_returns(market) / intraday_volatility_profile()).ravel()
    centred = magnitude - magnitude.mean()
    lag1 = float(centred[1:] @ centred[:-1] / (centred @ centred))
    # Under independence the lag-1 autocorrelation is about N(0, 1/n); 5 standard errors is far beyond chance.
    assert lag1 > 5.0 / np.sqrt(magnitude.size)


def test_volatility_and_volume_are_u_shaped_over_the_session() -> None:
    market = simulate_market(["X"], 20, "2024-01-02", seed=2)
    abs_return = np.abs(_bar_returns(market)).mean(axis=0)
    volume = market.volume[0].reshape(20, BARS_PER_SESSION).mean(axis=0)
    opening, midday, closing = slice(0, 30), slice(180, 210), slice(360, 390)
    for per_minute in (abs_return, volume):
        assert per_minute[opening].mean() > 1.3 * per_minute[midday].mean()
        assert per_minute[closing].mean() > 1.1 * per_minute[midday].mean()
    assert intraday_volatility_profile().shape == intraday_volume_profile().shape == (BARS_PER_SESSION,)


def test_volume_rises_with_the_size_of_the_return() -> None:
    market = simulate_market(["X"], 10, "2024-01-02", seed=4)
    abs_return = np.abs(_bar_returns(market)).ravel()
    correlation = stats.spearmanr(abs_return, market.volume[0]).statistic
    assert correlation > 0.2


def test_symbols_move_together_through_the_market_factor() -> None:
    market = simulate_market(["X", "Y"], 10, "2024-01-02", seed=6)
    returns = np.log(market.close_ticks[:, 1:] / market.close_ticks[:, :-1])
    # Loadings of 0.3-0.6 on the market factor give correlations of about 0.1-0.35 (0.20 for this seed);
    # 0.05 is three standard errors above zero for 3900 bars.
    assert np.corrcoef(returns)[0, 1] > 0.05


def test_generated_folder_is_reused_when_complete(tmp_path: Path) -> None:
    first = _generate(tmp_path)
    assert first.generated
    assert len(first.files) == 2
    assert (first.folder / MANIFEST_NAME).is_file()
    written_ns = [path.stat().st_mtime_ns for path in first.files]
    again = _generate(tmp_path)
    assert not again.generated
    assert again.files == first.files
    assert [path.stat().st_mtime_ns for path in again.files] == written_ns


@pytest.mark.parametrize("damage", ["delete", "truncate", "manifest"])
def test_incomplete_folder_is_regenerated(tmp_path: Path, damage: str) -> None:
    first = _generate(tmp_path)
    original = first.files[1].read_bytes()
    if damage == "delete":
        first.files[1].unlink()
    elif damage == "truncate":
        first.files[1].write_bytes(original[:100])
    else:
        (first.folder / MANIFEST_NAME).write_text("{not json")
    again = _generate(tmp_path)
    assert again.generated
    assert again.files[1].read_bytes() == original


def test_interrupted_generation_leaves_no_complete_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_write = synthetic.write_ohlcv_dbn
    calls = []

    def write_then_fail(path: Path, *args: object, **kwargs: object) -> None:
        calls.append(path)
        if len(calls) == 2:
            path.write_bytes(b"half a file")
            raise KeyboardInterrupt
        real_write(path, *args, **kwargs)

    monkeypatch.setattr(synthetic, "write_ohlcv_dbn", write_then_fail)
    with pytest.raises(KeyboardInterrupt):
        _generate(tmp_path, days=3)
    folder = synthetic.synthetic_folder(tmp_path, symbols=SYMBOLS, days=3, start_date="2024-01-02", seed=7)
    assert sorted(path.name for path in folder.iterdir()) == [synthetic.day_file_name(dt.date(2024, 1, 2))]

    monkeypatch.setattr(synthetic, "write_ohlcv_dbn", real_write)
    recovered = _generate(tmp_path, days=3)
    assert recovered.generated
    assert len(recovered.files) == 3


def test_folder_key_changes_with_every_parameter(tmp_path: Path) -> None:
    base = {"symbols": SYMBOLS, "days": 2, "start_date": "2024-01-02", "seed": 7}
    changes = [{"symbols": ["SYNA"]}, {"days": 3}, {"start_date": "2024-01-03"}, {"seed": 8}]
    folders = {synthetic.synthetic_folder(tmp_path, **{**base, **change}) for change in changes}
    folders.add(synthetic.synthetic_folder(tmp_path, **base))
    assert len(folders) == len(changes) + 1


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"start_date": "2024-13-01"}, "data.start_date"),
        ({"symbols": ["A", "A"]}, "data.symbols"),
        ({"symbols": []}, "data.symbols"),
        ({"symbols": ["X" * 71]}, "data.symbols"),
    ],
)
def test_bad_generator_parameters_raise_data_error(tmp_path: Path, kwargs: dict[str, object], named: str) -> None:
    arguments = {"symbols": SYMBOLS, "days": 1, "start_date": "2024-01-02", "seed": 1, **kwargs}
    with pytest.raises(DataError, match=re.escape(named)):
        generate_synthetic_dbn(tmp_path, **arguments)


def test_unwritable_cache_dir_raises_data_error_naming_it(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache folder should be")
    with pytest.raises(DataError, match=r"data\.cache_dir") as error:
        _generate(blocker)
    assert str(blocker) in str(error.value)
