"""The ``data`` group: where market data comes from and how it becomes features."""

from dataclasses import dataclass

from gpubench.errors import require, require_choice, require_positive, require_probability

DATA_SOURCES: tuple[str, ...] = ("synthetic", "dbn", "parquet")
#: The symbols the synthetic market generates when ``data.symbols`` is null.
SYNTHETIC_SYMBOLS: tuple[str, ...] = ("SYNA", "SYNB", "SYNC", "SYND")
#: How bars of one instrument and time from several publishers (exchanges) are read: see ``DataConfig.publishers``.
PUBLISHER_MODES: tuple[str, ...] = ("aggregate", "separate")


@dataclass
class DataConfig:
    """Where market data comes from and how it becomes features.

    ``synthetic`` generates DBN files (one per trading day) into ``cache_dir`` and reads them back like a user's
    download; ``dbn`` reads ``path`` (a folder or glob of ``.dbn``/``.dbn.zst`` files); ``parquet`` reads ``path``
    (a Parquet file or folder of them with the bar columns). ``feature_count`` columns are built per bar: the nine
    base features, and beyond them window statistics (``gpubench/data/features.py``; the seed's TFT-225 has 225).

    ``publishers`` says what happens when DBN files hold bars of one instrument and minute from several publishers
    (OPRA options, consolidated US equities: each exchange reports its own bar). ``aggregate`` (the default)
    combines them into one bar per instrument and time, the consolidated bar a user of one ticker expects: high
    is the highest high, low the lowest low, volume the sum, open and close the volume-weighted means of the
    publishers' opens and closes. ``separate`` keeps each publisher's bars as a series of its own, named
    ``SYMBOL@PUBLISHER`` (e.g. ``AAPL@XNAS.ITCH.XNAS``). Data from a single publisher reads the same either way.

    ``symbols`` selects symbols from every source: the synthetic market generates them (null: its four,
    :data:`SYNTHETIC_SYMBOLS`), DBN and Parquet bars are filtered to them (null: all).
    """

    source: str = "synthetic"
    path: str | None = None
    cache_dir: str = "~/.cache/gpubench"
    symbols: list[str] | None = None
    days: int = 20
    start_date: str = "2024-01-02"
    seed: int = 7
    publishers: str = "aggregate"
    train_fraction: float = 0.8
    volatility_window: int = 30
    feature_count: int = 9

    def __post_init__(self) -> None:
        require_choice("data.source", self.source, DATA_SOURCES)
        if self.source in ("dbn", "parquet"):
            require(
                bool(self.path),
                "data.path",
                self.path,
                f"a folder or glob of files when data={self.source}",
            )
        require_choice("data.publishers", self.publishers, PUBLISHER_MODES)
        require(
            self.symbols is None or len(self.symbols) > 0,
            "data.symbols",
            self.symbols,
            "a non-empty list of symbols, or null (synthetic: its four; files: every symbol they hold)",
        )
        require_positive("data.days", self.days)
        require_probability("data.train_fraction", self.train_fraction)
        require(self.volatility_window >= 2, "data.volatility_window", self.volatility_window, ">= 2")
        require(
            self.feature_count >= 9,
            "data.feature_count",
            self.feature_count,
            ">= 9 (the base features; more add window statistics, gpubench/data/features.py)",
        )
