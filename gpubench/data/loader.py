"""Market data for a run: bars from ``data=synthetic``, ``dbn`` or ``parquet`` (synthetic data goes through the DBN
reader like a download), and the feature tensors built from them."""

import functools
import logging
import time
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import torch

from gpubench.data.bars import bar_time_range_iso
from gpubench.data.cache import content_hash, load_cached_bars, read_parquet_bars, resolve_parquet_paths
from gpubench.data.config import DATA_SOURCES, SYNTHETIC_SYMBOLS, DataConfig
from gpubench.data.dbn import READER_VERSION, read_dbn_bars, resolve_dbn_paths, select_dbn_files
from gpubench.data.features import build_features
from gpubench.data.paths import describe_files
from gpubench.data.synthetic import generate_synthetic_dbn
from gpubench.data.tensors import FeatureTensors
from gpubench.errors import DataError
from gpubench.results import DataProvenance

logger = logging.getLogger(__name__)


def _required_path(data_cfg: DataConfig) -> str:
    if not data_cfg.path:
        raise DataError(f"data.path is not set; data={data_cfg.source} needs a file, folder or glob to read.")
    return data_cfg.path


def load_bars(data_cfg: DataConfig) -> tuple[pa.Table, DataProvenance]:
    """The bar table (:data:`~gpubench.data.bars.BAR_SCHEMA`, sorted by symbol then time) for ``data_cfg``; DataError
    for a bad source, path or file."""
    started_s = time.perf_counter()
    if data_cfg.source not in DATA_SOURCES:
        raise DataError(f"data.source={data_cfg.source!r} is not valid: it must be one of {', '.join(DATA_SOURCES)}.")
    cache_dir = Path(data_cfg.cache_dir).expanduser()
    files: Sequence[Path]
    empty_files: Sequence[Path] = ()
    if data_cfg.source == "parquet":
        location = _required_path(data_cfg)
        files = resolve_parquet_paths(location)
        table = read_parquet_bars(files)
        cache_hit, key = False, content_hash(files, version=f"parquet-{READER_VERSION}")
    else:
        if data_cfg.source == "synthetic":
            dataset = generate_synthetic_dbn(
                cache_dir,
                symbols=data_cfg.symbols or SYNTHETIC_SYMBOLS,
                days=data_cfg.days,
                start_date=data_cfg.start_date,
                seed=data_cfg.seed,
            )
            files, location = dataset.files, str(dataset.folder)
        else:
            location = _required_path(data_cfg)
            files = resolve_dbn_paths(location)
        selected = select_dbn_files(files)
        empty_files = selected.without_bars
        if empty_files:
            logger.warning(
                "Skipping %d DBN file(s) without bars (metadata only, no records): %s.",
                len(empty_files),
                describe_files(empty_files),
            )
        cached = load_cached_bars(
            selected.with_bars,
            cache_dir,
            functools.partial(read_dbn_bars, publishers=data_cfg.publishers),
            version=f"{READER_VERSION}-publishers-{data_cfg.publishers}",
        )
        table, cache_hit, key = cached.table, cached.cache_hit, cached.content_hash
    if table.num_rows == 0:
        raise DataError(f"data.path={location!r} holds no bars; gpubench needs at least one bar to build features.")
    if data_cfg.symbols is not None and data_cfg.source != "synthetic":
        table = select_symbols(table, data_cfg.symbols, location)
    first, last = bar_time_range_iso(table)
    provenance = DataProvenance(
        source=data_cfg.source,
        path=location,
        files=len(files),
        bars=table.num_rows,
        symbols=pc.unique(table.column("symbol")).to_pylist(),
        first_timestamp=first,
        last_timestamp=last,
        cache_hit=cache_hit,
        load_seconds=time.perf_counter() - started_s,
        content_hash=key,
        empty_files=[str(path) for path in empty_files],
    )
    return table, provenance


def select_symbols(table: pa.Table, symbols: Sequence[str], location: str) -> pa.Table:
    """The bars of ``table`` whose symbol is in ``symbols`` or is a per-publisher series of one (``AAPL@...``);
    DataError naming the data's symbols when none matches."""
    held = sorted(pc.unique(table.column("symbol")).to_pylist())
    wanted = set(symbols)
    kept = [symbol for symbol in held if symbol in wanted or symbol.split("@", 1)[0] in wanted]
    if not kept:
        raise DataError(
            f"data.symbols={list(symbols)} matches no symbol in data.path={location!r}, which holds "
            f"{', '.join(held)}. Set data.symbols to some of those, or data.symbols=null for all of them."
        )
    unmatched = sorted(wanted - {symbol.split("@", 1)[0] for symbol in kept} - set(kept))
    if unmatched:
        logger.warning("data.symbols names %s, which %s does not hold; using %s.", unmatched, location, kept)
    return table.filter(pc.is_in(table.column("symbol"), value_set=pa.array(kept, type=pa.string())))


def load_features(
    data_cfg: DataConfig, device: torch.device | str, bars: tuple[pa.Table, DataProvenance] | None = None
) -> tuple[FeatureTensors, DataProvenance]:
    """Bars for ``data_cfg`` (``bars``, when :func:`load_bars` has read them already) turned into feature tensors on
    ``device`` (see ``gpubench.data.features``)."""
    table, provenance = load_bars(data_cfg) if bars is None else bars
    features = build_features(
        table,
        train_fraction=data_cfg.train_fraction,
        volatility_window=data_cfg.volatility_window,
        device=device,
        feature_count=data_cfg.feature_count,
    )
    return features, provenance
