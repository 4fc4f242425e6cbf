"""Synthetic market: one-minute OHLCV bars of several symbols, written as DBN files like a Databento download.

Returns with intraday and daily volatility profiles, GARCH(1,1) clustering and a shared market factor; Brownian-bridge
highs and lows on a tick grid; volume rising with volatility. One file per New York session, plus ``manifest.json``."""

import datetime as dt
import hashlib
import json
import math
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from zoneinfo import ZoneInfo

import numpy as np

from gpubench.data.cache import atomic_path
from gpubench.data.dbn import FIXED_PRICE_SCALE, OhlcvRecords, write_ohlcv_dbn
from gpubench.errors import DataError

#: Bump whenever the generated bars or files change for the same parameters: it is part of the folder key.
GENERATOR_VERSION = 1
SYNTHETIC_DATASET = "GPUB.SYNTH"
EXCHANGE_TIMEZONE = ZoneInfo("America/New_York")
SESSION_OPEN_LOCAL = dt.time(9, 30)
BARS_PER_SESSION = 390
BAR_NS = 60 * 1_000_000_000
TICK_SIZE = 0.01
#: One tick in DBN fixed-point price units (1e-9).
TICK_FIXED = round(TICK_SIZE * FIXED_PRICE_SCALE)
#: Longest symbol DBN metadata stores (a 71-byte C string with its terminating NUL).
MAX_SYMBOL_CHARS = 70
MANIFEST_NAME = "manifest.json"

#: Share of a day's return variance that accrues during the session; the rest is the overnight gap.
_INTRADAY_VARIANCE_SHARE = 0.8
_TRADING_DAYS_PER_YEAR = 252
_STUDENT_T_DOF = 5.0
#: Daily volatility regime: log-AR(1) coefficient and innovation standard deviation across days.
_REGIME_PERSISTENCE = 0.8
_REGIME_SHOCK_STD = 0.15
#: Volume model: elasticity to the GARCH variance, loading on the shock size |z|, and log-normal noise.
_VOLUME_VARIANCE_ELASTICITY = 0.5
_VOLUME_SHOCK_LOADING = 0.3
_VOLUME_NOISE_STD = 0.4


def parse_start_date(text: str | dt.date) -> dt.date:
    """``data.start_date`` as a date; DataError when it is not an ISO date such as ``2024-01-02``."""
    if isinstance(text, dt.date):
        return text
    try:
        return dt.date.fromisoformat(str(text))
    except ValueError as exc:
        raise DataError(f"data.start_date={text!r} is not a date; write it as YYYY-MM-DD, e.g. 2024-01-02.") from exc


def trading_days(start: dt.date, days: int) -> list[dt.date]:
    """The first ``days`` weekdays on or after ``start``."""
    sessions: list[dt.date] = []
    day = start
    while len(sessions) < days:
        if day.weekday() < 5:
            sessions.append(day)
        day += dt.timedelta(days=1)
    return sessions


def session_open_ns(day: dt.date) -> int:
    """09:30 New York time on ``day`` in nanoseconds since the UNIX epoch (UTC), daylight saving included."""
    opening = dt.datetime.combine(day, SESSION_OPEN_LOCAL, tzinfo=EXCHANGE_TIMEZONE)
    return int(opening.timestamp()) * 1_000_000_000


def _u_shape(
    open_peak: float, open_minutes: float, close_peak: float, close_minutes: float, curve: float
) -> np.ndarray:
    """1 plus decaying peaks at the open and the close plus a parabola, over the session's minutes."""
    minute = np.arange(BARS_PER_SESSION, dtype=np.float64)
    position = (minute + 0.5) / BARS_PER_SESSION
    close_distance = BARS_PER_SESSION - 1 - minute
    peaks = 1.0 + open_peak * np.exp(-minute / open_minutes) + close_peak * np.exp(-close_distance / close_minutes)
    return peaks + curve * (2.0 * position - 1.0) ** 2


def intraday_volatility_profile() -> np.ndarray:
    """Relative volatility of each of the 390 session minutes: U-shaped, with mean square 1."""
    profile = _u_shape(1.2, 15.0, 0.4, 15.0, 0.3)
    return profile / np.sqrt(np.mean(profile**2))


def intraday_volume_profile() -> np.ndarray:
    """Relative volume of each of the 390 session minutes: U-shaped, heaviest into the close, with mean 1."""
    profile = _u_shape(2.5, 12.0, 2.0, 8.0, 0.4)
    return profile / profile.mean()


def garch_variance(shocks: np.ndarray, alpha: float, beta: float) -> np.ndarray:
    """Conditional variances ``h_t`` (from ``h_0 = 1``) of a unit-variance GARCH(1,1) driven by ``shocks``."""
    omega = 1.0 - alpha - beta
    variances: list[float] = []
    variance = 1.0
    # Sequential: Python floats beat per-step numpy calls.
    for shock in shocks.tolist():
        variances.append(variance)
        variance = omega + (alpha * shock * shock + beta) * variance
    return np.asarray(variances)


def _student_t(rng: np.random.Generator, size: int) -> np.ndarray:
    """Student-t draws scaled to unit variance."""
    return rng.standard_t(_STUDENT_T_DOF, size) / math.sqrt(_STUDENT_T_DOF / (_STUDENT_T_DOF - 2.0))


def _daily_regime(rng: np.random.Generator, days: int) -> np.ndarray:
    """A log-AR(1) volatility multiplier per day, started in its stationary law, with mean square 1."""
    stationary_var = _REGIME_SHOCK_STD**2 / (1.0 - _REGIME_PERSISTENCE**2)
    shocks = rng.normal(0.0, _REGIME_SHOCK_STD, days)
    shocks[0] = rng.normal(0.0, math.sqrt(stationary_var))
    # Imported here: scipy.signal is slow to import.
    from scipy.signal import lfilter

    log_level = lfilter([1.0], [1.0, -_REGIME_PERSISTENCE], shocks)
    # E[exp(2x)] = exp(2 var) for x ~ N(0, var): subtracting var makes the mean square 1.
    return np.exp(log_level - stationary_var)


@dataclass(frozen=True)
class SyntheticMarket:
    """Simulated bars on a shared one-minute grid: ``ts_event_ns`` (n_bars,) in UTC nanoseconds; prices (n_symbols,
    n_bars) in int64 ticks; ``volume`` in shares."""

    symbols: tuple[str, ...]
    days: tuple[dt.date, ...]
    ts_event_ns: np.ndarray
    open_ticks: np.ndarray
    high_ticks: np.ndarray
    low_ticks: np.ndarray
    close_ticks: np.ndarray
    volume: np.ndarray

    @property
    def instrument_ids(self) -> tuple[int, ...]:
        """Instrument id of each symbol in the DBN files (1, 2, ... in symbol order)."""
        return tuple(range(1, len(self.symbols) + 1))

    def day_records(self, day_index: int) -> OhlcvRecords:
        """One session's bars as DBN records, ordered by time and then instrument, as Databento orders them."""
        bars = slice(day_index * BARS_PER_SESSION, (day_index + 1) * BARS_PER_SESSION)
        n_symbols = len(self.symbols)

        def time_major(per_symbol: np.ndarray) -> np.ndarray:
            return np.ascontiguousarray(per_symbol[:, bars].T).ravel()

        return OhlcvRecords(
            ts_event_ns=np.repeat(self.ts_event_ns[bars], n_symbols),
            instrument_id=np.tile(np.asarray(self.instrument_ids, dtype=np.uint32), BARS_PER_SESSION),
            open_fixed=time_major(self.open_ticks) * TICK_FIXED,
            high_fixed=time_major(self.high_ticks) * TICK_FIXED,
            low_fixed=time_major(self.low_ticks) * TICK_FIXED,
            close_fixed=time_major(self.close_ticks) * TICK_FIXED,
            volume=time_major(self.volume),
        )


def _check_symbols(symbols: Sequence[str]) -> tuple[str, ...]:
    names = tuple(str(symbol) for symbol in symbols)
    if not names or len(set(names)) != len(names) or not all(0 < len(name) <= MAX_SYMBOL_CHARS for name in names):
        raise DataError(
            f"data.symbols={list(names)!r} is not valid for the synthetic market: it must be a non-empty list of "
            f"distinct, non-empty names of at most {MAX_SYMBOL_CHARS} characters."
        )
    return names


def _symbol_rng(seed: int, symbol: str) -> np.random.Generator:
    """A generator per (seed, symbol), so a symbol's own draws do not depend on which other symbols are listed."""
    return np.random.default_rng([seed, 1, zlib.crc32(symbol.encode())])


def simulate_market(symbols: Sequence[str], days: int, start_date: str | dt.date, seed: int) -> SyntheticMarket:
    """Simulate ``days`` sessions of one-minute bars for ``symbols``; the same arguments give the same bars."""
    names = _check_symbols(symbols)
    if days < 1:
        raise DataError(f"data.days={days} is not valid: the synthetic market needs at least 1 day.")
    sessions = trading_days(parse_start_date(start_date), days)
    n_bars = days * BARS_PER_SESSION
    minute_offsets_ns = np.arange(BARS_PER_SESSION, dtype=np.int64) * BAR_NS
    ts_event_ns = np.array([session_open_ns(day) for day in sessions], dtype=np.int64)[:, None] + minute_offsets_ns
    volatility_profile = np.tile(intraday_volatility_profile(), days)
    volume_profile = np.tile(intraday_volume_profile(), days)
    day_of_bar = np.repeat(np.arange(days), BARS_PER_SESSION)
    session_start = np.arange(n_bars) % BARS_PER_SESSION == 0
    market_shocks = _student_t(np.random.default_rng([seed, 0]), n_bars)

    prices: dict[str, list[np.ndarray]] = {"open": [], "high": [], "low": [], "close": []}
    volumes: list[np.ndarray] = []
    for name in names:
        rng = _symbol_rng(seed, name)
        log_price0 = rng.uniform(math.log(20.0), math.log(400.0))
        daily_vol = rng.uniform(0.15, 0.45) / math.sqrt(_TRADING_DAYS_PER_YEAR)
        alpha = rng.uniform(0.04, 0.08)
        beta = rng.uniform(0.985, 0.99) - alpha
        market_loading = rng.uniform(0.3, 0.6)
        base_volume = math.exp(rng.uniform(math.log(2e3), math.log(5e4)))

        shocks = market_loading * market_shocks + math.sqrt(1.0 - market_loading**2) * _student_t(rng, n_bars)
        variance = garch_variance(shocks, alpha, beta)
        regime = _daily_regime(rng, days)[day_of_bar]
        minute_vol = daily_vol * math.sqrt(_INTRADAY_VARIANCE_SHARE / BARS_PER_SESSION)
        bar_vol = minute_vol * volatility_profile * regime * np.sqrt(variance)
        log_return = bar_vol * shocks
        overnight_vol = daily_vol * math.sqrt(1.0 - _INTRADAY_VARIANCE_SHARE) * regime[session_start]
        gap = np.zeros(n_bars)
        gap[session_start] = overnight_vol * _student_t(rng, days)
        gap[0] = 0.0  # the first session opens at the initial price

        log_close = log_price0 + np.cumsum(gap + log_return)
        log_open = log_close - log_return
        # Extremes of a Brownian bridge, inverted exactly from an exponential draw.
        spread = (log_close - log_open) ** 2
        log_high = 0.5 * (log_open + log_close + np.sqrt(spread + 2.0 * bar_vol**2 * rng.exponential(size=n_bars)))
        log_low = 0.5 * (log_open + log_close - np.sqrt(spread + 2.0 * bar_vol**2 * rng.exponential(size=n_bars)))
        for key, log_price in (("open", log_open), ("high", log_high), ("low", log_low), ("close", log_close)):
            prices[key].append(np.maximum(1, np.rint(np.exp(log_price) / TICK_SIZE)).astype(np.int64))

        log_volume = (
            math.log(base_volume)
            + np.log(volume_profile)
            + _VOLUME_VARIANCE_ELASTICITY * np.log(variance * regime**2)
            + _VOLUME_SHOCK_LOADING * (np.abs(shocks) - np.abs(shocks).mean())
            + rng.normal(-0.5 * _VOLUME_NOISE_STD**2, _VOLUME_NOISE_STD, n_bars)
        )
        volumes.append(np.maximum(1, np.rint(np.exp(log_volume))).astype(np.int64))

    return SyntheticMarket(
        symbols=names,
        days=tuple(sessions),
        ts_event_ns=ts_event_ns.ravel(),
        open_ticks=np.stack(prices["open"]),
        high_ticks=np.stack(prices["high"]),
        low_ticks=np.stack(prices["low"]),
        close_ticks=np.stack(prices["close"]),
        volume=np.stack(volumes),
    )


@dataclass(frozen=True)
class SyntheticDataset:
    """The DBN files of one synthetic market, one per session in time order; ``generated`` is False on reuse."""

    folder: Path
    files: tuple[Path, ...]
    generated: bool


def _parameters(symbols: tuple[str, ...], days: int, start: dt.date, seed: int) -> dict[str, object]:
    return {
        "generator_version": GENERATOR_VERSION,
        "dataset": SYNTHETIC_DATASET,
        "seed": seed,
        "symbols": list(symbols),
        "days": days,
        "start_date": start.isoformat(),
    }


def synthetic_folder(
    cache_dir: Path, *, symbols: Sequence[str], days: int, start_date: str | dt.date, seed: int
) -> Path:
    """The folder that holds (or will hold) the DBN files for these generator parameters."""
    names = _check_symbols(symbols)
    start = parse_start_date(start_date)
    parameters = _parameters(names, days, start, seed)
    key = hashlib.blake2b(json.dumps(parameters, sort_keys=True).encode(), digest_size=6).hexdigest()
    return cache_dir / "synthetic" / f"v{GENERATOR_VERSION}-seed{seed}-{len(names)}sym-{days}d-{start:%Y%m%d}-{key}"


def day_file_name(day: dt.date) -> str:
    """File name of one session, in Databento's ``<dataset>-<date>.<schema>.dbn.zst`` style."""
    return f"{SYNTHETIC_DATASET.lower().replace('.', '-')}-{day:%Y%m%d}.ohlcv-1m.dbn.zst"


def _complete_files(folder: Path, parameters: dict[str, object]) -> tuple[Path, ...] | None:
    """The folder's files when its manifest matches ``parameters`` and every listed file has its recorded size."""
    try:
        manifest = json.loads((folder / MANIFEST_NAME).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(manifest, dict) or manifest.get("parameters") != parameters:
        return None
    files: list[Path] = []
    try:
        for entry in manifest["files"]:
            path = folder / entry["name"]
            if not path.is_file() or path.stat().st_size != entry["bytes"]:
                return None
            files.append(path)
    except (KeyError, TypeError):
        return None
    return tuple(files) if len(files) == parameters["days"] else None


def generate_synthetic_dbn(
    cache_dir: Path, *, symbols: Sequence[str], days: int, start_date: str | dt.date, seed: int
) -> SyntheticDataset:
    """Write (or reuse, when its manifest is complete) the synthetic market's DBN files under ``cache_dir``;
    DataError when it cannot be written."""
    names = _check_symbols(symbols)
    start = parse_start_date(start_date)
    parameters = _parameters(names, days, start, seed)
    folder = synthetic_folder(cache_dir, symbols=names, days=days, start_date=start, seed=seed)
    existing = _complete_files(folder, parameters)
    if existing is not None:
        return SyntheticDataset(folder=folder, files=existing, generated=False)

    market = simulate_market(names, days, start, seed)
    files: list[Path] = []
    try:
        for day_index, day in enumerate(market.days):
            path = folder / day_file_name(day)
            open_ns = session_open_ns(day)
            with atomic_path(path) as temporary:
                write_ohlcv_dbn(
                    temporary,
                    market.day_records(day_index),
                    dataset=SYNTHETIC_DATASET,
                    symbols=names,
                    instrument_ids=market.instrument_ids,
                    start_ns=open_ns,
                    end_ns=open_ns + BARS_PER_SESSION * BAR_NS,
                )
            files.append(path)
        manifest = {"parameters": parameters, "files": [{"name": p.name, "bytes": p.stat().st_size} for p in files]}
        with atomic_path(folder / MANIFEST_NAME) as temporary:
            temporary.write_text(json.dumps(manifest, indent=2))
    except OSError as exc:
        raise DataError(
            f"Cannot write the synthetic market under data.cache_dir={str(cache_dir)!r} ({exc.strerror or exc} "
            f"at {folder}); set data.cache_dir to a writable folder with free space."
        ) from exc
    return SyntheticDataset(folder=folder, files=tuple(files), generated=True)
