"""Rebuild the price snapshot through gpuhunt (the only module that imports it): per provider and catalog card the
cheapest offer of each GPU count, on-demand and spot. gpuhunt reads its public catalog, or with
``GPUHUNT_CATALOG_DIR`` set the ``<provider>.csv`` files of that folder."""

import os
from collections.abc import Sequence
from datetime import date
from pathlib import Path

from gpubench.prices import (
    GPU_CARDS,
    PriceOffer,
    ProviderManifest,
    card_for,
    sha256_of,
    write_catalog_csv,
    write_manifest,
)

#: gpuhunt's providers whose catalog needs no account.
OFFLINE_PROVIDERS: tuple[str, ...] = ("aws", "azure", "gcp", "lambdalabs", "nebius", "oci", "runpod", "verda")


class RefreshError(RuntimeError):
    """gpuhunt is not installed, or its catalog cannot be reached or read."""


def _catalog(local_dir: str | None) -> object:
    """gpuhunt's catalog: loaded from its bucket, or reading ``local_dir``'s files."""
    try:
        from gpuhunt import Catalog
    except ImportError:
        raise RefreshError(
            "gpuhunt is not installed: `pip install 'gpubench[cloud]'` (or `pip install gpuhunt`) to refresh prices"
        ) from None
    catalog = Catalog(balance_resources=False, auto_reload=False)
    if local_dir is None:
        try:
            catalog.load()
        except Exception as exc:  # gpuhunt raises its own error or urllib's; either way, no catalog
            raise RefreshError(
                f"gpuhunt could not load its catalog ({exc}): no network here? Set GPUHUNT_CATALOG_DIR to a folder "
                "of gpuhunt catalog files to refresh offline"
            ) from None
    return catalog


def _versions(catalog: object, providers: Sequence[str], local_dir: str | None) -> dict[str, str]:
    if local_dir is not None:
        return {name: f"local catalog {Path(local_dir) / (name + '.csv')}" for name in providers}
    loaded = getattr(catalog, "catalog", {})
    return {name: str(getattr(loaded.get(name), "version", "unknown")) for name in providers}


def _row_date(provider_data: dict | None, today: date) -> date:
    """The row's own price date where its ``provider_data`` states one, else the day of the refresh."""
    text = (provider_data or {}).get("price_date")
    try:
        return date.fromisoformat(text) if isinstance(text, str) else today
    except ValueError:
        return today


def cheapest_per_kind(offers: Sequence[PriceOffer]) -> list[PriceOffer]:
    """The cheapest offer per (GPU card, GPU count, spot): what the cost table can use."""
    best: dict[tuple[str | None, int, bool], PriceOffer] = {}
    for offer in offers:
        key = (offer.card, offer.gpu_count, offer.spot)
        if key not in best or offer.price_usd_per_hour < best[key].price_usd_per_hour:
            best[key] = offer
    return sorted(best.values(), key=lambda o: (o.gpu_name, o.gpu_memory_gb or 0.0, o.gpu_count, o.spot))


def refresh(out_dir: Path, today: date, providers: Sequence[str] | None = None) -> list[ProviderManifest]:
    """Rebuild the snapshot into ``out_dir`` dated ``today`` (a row's own price date kept); the manifest entries
    written. ``providers`` defaults to :data:`OFFLINE_PROVIDERS` (those whose file the local folder holds)."""
    local_dir = os.environ.get("GPUHUNT_CATALOG_DIR")
    if providers is None:
        providers = (
            [name for name in OFFLINE_PROVIDERS if (Path(local_dir) / f"{name}.csv").is_file()]
            if local_dir
            else list(OFFLINE_PROVIDERS)
        )
    if not providers:
        raise RefreshError(f"no provider catalog (<provider>.csv) in GPUHUNT_CATALOG_DIR={local_dir}")
    catalog = _catalog(local_dir)
    versions = _versions(catalog, providers, local_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    entries = []
    for name in providers:
        try:
            query = catalog.query  # type: ignore[attr-defined]
            items = query(provider=name, gpu_name=sorted(GPU_CARDS), min_gpu_count=1)
        except (OSError, ValueError) as exc:
            raise RefreshError(f"gpuhunt could not read the {name} catalog: {exc}") from None
        source = f"gpuhunt catalog, {versions[name]}"
        offers = cheapest_per_kind(
            [
                PriceOffer(
                    provider=name,
                    instance_name=item.instance_name,
                    location=item.location,
                    price_usd_per_hour=float(item.price),
                    gpu_name=str(item.gpu_name),
                    gpu_memory_gb=item.gpu_memory,
                    gpu_count=int(item.gpu_count),
                    spot=bool(item.spot),
                    # A catalog row that carries its own provenance (gpubench's snapshot read back) keeps it.
                    price_date=_row_date(item.provider_data, today),
                    source=str((item.provider_data or {}).get("source") or source),
                    quoted=f"{item.price} USD/h",
                    cpu=int(item.cpu),
                    memory_gb=float(item.memory),
                )
                for item in items
                if card_for(str(item.gpu_name), item.gpu_memory) is not None
            ]
        )
        path = out_dir / f"{name}.csv"
        write_catalog_csv(path, offers)
        spot = "spot priced" if any(offer.spot for offer in offers) else "no spot offers in this provider's catalog"
        sha256 = sha256_of(path)
        entries.append(
            ProviderManifest(name=name, version=versions[name], source=source, file=path.name, sha256=sha256, spot=spot)
        )
    write_manifest(
        out_dir,
        today,
        entries,
        f"python -m gpubench.prices refresh on {today.isoformat()}: the cheapest offer per GPU card, GPU count and "
        "spot/on-demand of each provider's gpuhunt catalog",
    )
    return entries
