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
    """Where market data comes from (``synthetic``, ``dbn``, ``parquet``) and how it becomes features; ``publishers``
    says whether several exchanges' bars of one instrument are combined or kept apart."""

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
            require(bool(self.path), "data.path", self.path, f"a folder or glob of files when data={self.source}")
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
