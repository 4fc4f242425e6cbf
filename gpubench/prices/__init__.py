"""The dated GPU price snapshot shipped with gpubench, the only source of prices: offers per provider in gpuhunt's
catalog format (``gpubench/prices/catalog/<provider>.csv``, gpuhunt's v2 columns, so ``GPUHUNT_CATALOG_DIR`` lets
gpuhunt read them) and ``manifest.json`` (each provider's version, source, file and sha256). Every row's
``provider_data`` names its ``source``, the ``price_date`` that source observed it (ISO) and the figure as
``quoted``. Prices are USD per hour for the whole instance (``gpu_count`` GPUs); ``cpu``/``memory`` 0: not stated.
An offer's catalog card comes from each card file's ``gpuhunt_names``. Read without gpuhunt, which only
:mod:`gpubench.prices.refresh` needs.
"""

import csv
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path

from gpubench.hardware.catalog import gpu_cards, load_catalog

#: The shipped snapshot's folder.
SNAPSHOT_DIR = Path(__file__).resolve().parent / "catalog"
MANIFEST_NAME = "manifest.json"
#: A snapshot older than this (days) is named in every cost line: prices move (marketplace prices daily).
STALE_AFTER_DAYS = 90
#: gpuhunt's v2 catalog columns, in order (its published format; ``provider`` is the file's name).
CATALOG_FIELDS: tuple[str, ...] = (
    "instance_name",
    "location",
    "price",
    "cpu",
    "memory",
    "gpu_count",
    "gpu_name",
    "gpu_memory",
    "spot",
    "disk_size",
    "gpu_vendor",
    "flags",
    "cpu_arch",
    "provider_data",
)

#: Snapshot GPU names (gpuhunt's spelling) onto the shipped catalog's cards, by VRAM (GB), from each card file's
#: ``gpuhunt_names`` (:func:`gpubench.hardware.catalog.gpu_cards`). GPUs without a card (GH200, H100 NVL) stay in
#: the snapshot but are not priced in the cost table, which needs a card's spec sheet to project onto.
GPU_CARDS: dict[str, dict[int | None, str]] = gpu_cards(load_catalog())


class PriceSnapshotError(ValueError):
    """The snapshot (or a catalog folder) cannot be read: a missing file, a bad row, a checksum that differs."""


@dataclass(frozen=True)
class PriceOffer:
    """One priced offer: ``price_usd_per_hour`` for the whole instance of ``gpu_count`` ``gpu_name`` GPUs of
    ``gpu_memory_gb`` GB each, spot or on-demand, at ``location``; ``price_date`` is when ``source`` observed it
    and ``quoted`` the figure as the source states it."""

    provider: str
    instance_name: str
    location: str
    price_usd_per_hour: float
    gpu_name: str
    gpu_memory_gb: float | None
    gpu_count: int
    spot: bool
    price_date: date
    source: str
    quoted: str = ""
    cpu: int = 0
    memory_gb: float = 0.0

    @property
    def usd_per_gpu_hour(self) -> float:
        """The price per GPU and hour (USD)."""
        return self.price_usd_per_hour / self.gpu_count

    @property
    def card(self) -> str | None:
        """The gpubench catalog card this offer's GPU is, or None (:data:`GPU_CARDS`)."""
        return card_for(self.gpu_name, self.gpu_memory_gb)


def card_for(
    gpu_name: str, gpu_memory_gb: float | None, cards: Mapping[str, Mapping[int | None, str]] | None = None
) -> str | None:
    """The catalog card of a GPU named ``gpu_name`` (gpuhunt's spelling) with ``gpu_memory_gb`` GB in ``cards``
    (:func:`gpubench.hardware.catalog.gpu_cards`; default :data:`GPU_CARDS`), or None. An offer without a stated
    memory is the card only where one card has that name."""
    by_memory = (GPU_CARDS if cards is None else cards).get(gpu_name) or {}
    if None in by_memory:
        return by_memory[None]
    if gpu_memory_gb is None:
        return next(iter(by_memory.values())) if len(by_memory) == 1 else None
    return by_memory.get(round(gpu_memory_gb))


@dataclass(frozen=True)
class ProviderManifest:
    """One provider's entry in the manifest: its catalog ``version`` (a gpuhunt catalog version, or the dated
    sources a hand-built snapshot used), where the prices come from, the file and its sha256, and what the
    snapshot says about its spot offers (``spot``: offered and priced, not offered, or not in this snapshot and
    why)."""

    name: str
    version: str
    source: str
    file: str
    sha256: str
    spot: str
    notes: str = ""


@dataclass(frozen=True)
class PriceSnapshot:
    """A price snapshot: its date (the day it was built), the folder, each provider's manifest entry, the offers,
    and how it was built (``method``)."""

    snapshot_date: date
    folder: Path
    providers: dict[str, ProviderManifest]
    offers: tuple[PriceOffer, ...]
    method: str = ""

    def age_days(self, today: date) -> int:
        """Days from the snapshot's date to ``today``."""
        return (today - self.snapshot_date).days

    def staleness(self, today: date) -> str | None:
        """A sentence naming the snapshot when it is older than :data:`STALE_AFTER_DAYS` days on ``today``, else
        None; every cost line carries it."""
        age = self.age_days(today)
        if age <= STALE_AFTER_DAYS:
            return None
        return (
            f"price snapshot of {self.snapshot_date.isoformat()} is {age} days old (over {STALE_AFTER_DAYS}): "
            "refresh it with `python -m gpubench.prices refresh`"
        )


def sha256_of(path: Path) -> str:
    """The file's sha256, hex."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _parse_date(text: str, where: str) -> date:
    try:
        return date.fromisoformat(text)
    except (TypeError, ValueError):
        raise PriceSnapshotError(f"{where}: price date {text!r} is not an ISO date (YYYY-MM-DD)") from None


def read_catalog_csv(path: Path, provider: str) -> list[PriceOffer]:
    """The offers of one provider's catalog file (gpuhunt's v2 columns); rows without a GPU are skipped. Raises
    :class:`PriceSnapshotError` naming the file and line for a row it cannot read."""
    offers = []
    try:
        handle = path.open(newline="")
    except OSError as exc:
        raise PriceSnapshotError(f"cannot read the price catalog {path}: {exc.strerror or exc}") from None
    with handle:
        reader = csv.DictReader(handle)
        columns = reader.fieldnames or []
        required = ("instance_name", "price", "gpu_count", "gpu_name", "spot")
        missing = [name for name in required if name not in columns]
        if missing:
            raise PriceSnapshotError(f"{path} lacks gpuhunt's catalog columns {', '.join(missing)}")
        for row in reader:
            where = f"{path}, line {reader.line_num}"
            if not row.get("gpu_name") or not int(row.get("gpu_count") or 0):
                continue
            try:
                data = json.loads(row.get("provider_data") or "{}")
                offers.append(
                    PriceOffer(
                        provider=provider,
                        instance_name=row["instance_name"],
                        location=row.get("location") or "",
                        price_usd_per_hour=float(row["price"]),
                        gpu_name=row["gpu_name"],
                        gpu_memory_gb=float(row["gpu_memory"]) if row.get("gpu_memory") else None,
                        gpu_count=int(row["gpu_count"]),
                        spot=row["spot"].strip().lower() == "true",
                        price_date=_parse_date(data.get("price_date", ""), where),
                        source=str(data.get("source", "")),
                        quoted=str(data.get("quoted", "")),
                        cpu=int(float(row.get("cpu") or 0)),
                        memory_gb=float(row.get("memory") or 0.0),
                    )
                )
            except (ValueError, KeyError, json.JSONDecodeError) as exc:
                if isinstance(exc, PriceSnapshotError):
                    raise
                raise PriceSnapshotError(f"{where}: cannot read the row ({exc})") from None
    return offers


def write_catalog_csv(path: Path, offers: Iterable[PriceOffer]) -> None:
    """Write offers as one provider's catalog file in gpuhunt's v2 columns, provenance in ``provider_data``."""
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(CATALOG_FIELDS))
        writer.writeheader()
        for offer in offers:
            writer.writerow(
                {
                    "instance_name": offer.instance_name,
                    "location": offer.location,
                    "price": repr(offer.price_usd_per_hour),
                    "cpu": offer.cpu,
                    "memory": float(offer.memory_gb),
                    "gpu_count": offer.gpu_count,
                    "gpu_name": offer.gpu_name,
                    "gpu_memory": "" if offer.gpu_memory_gb is None else float(offer.gpu_memory_gb),
                    "spot": str(offer.spot),
                    "disk_size": "",
                    "gpu_vendor": "nvidia",
                    "flags": "",
                    "cpu_arch": "x86",
                    "provider_data": json.dumps(
                        {"source": offer.source, "price_date": offer.price_date.isoformat(), "quoted": offer.quoted}
                    ),
                }
            )


def write_manifest(folder: Path, snapshot_date: date, providers: Sequence[ProviderManifest], method: str) -> None:
    """Write ``manifest.json`` for the catalog files in ``folder``."""
    data = {
        "snapshot_date": snapshot_date.isoformat(),
        "format": "gpuhunt catalog v2 columns, one <provider>.csv per provider; provenance in provider_data",
        "method": method,
        "providers": {
            entry.name: {
                "version": entry.version,
                "source": entry.source,
                "file": entry.file,
                "sha256": entry.sha256,
                "spot": entry.spot,
                "notes": entry.notes,
            }
            for entry in providers
        },
    }
    (folder / MANIFEST_NAME).write_text(json.dumps(data, indent=2) + "\n")


def load_snapshot(folder: Path | None = None, *, verify: bool = True) -> PriceSnapshot:
    """The snapshot in ``folder`` (default: the shipped one): its manifest and every provider's offers, each file's
    sha256 checked against the manifest when ``verify``. Raises :class:`PriceSnapshotError` saying what is wrong."""
    folder = Path(folder) if folder is not None else SNAPSHOT_DIR
    manifest_path = folder / MANIFEST_NAME
    try:
        manifest = json.loads(manifest_path.read_text())
    except OSError as exc:
        raise PriceSnapshotError(
            f"no price snapshot manifest at {manifest_path} ({exc.strerror or exc}): give a folder written by "
            "`python -m gpubench.prices refresh`, or leave decision.prices_dir null for the shipped snapshot"
        ) from None
    except json.JSONDecodeError as exc:
        raise PriceSnapshotError(f"{manifest_path} is not valid JSON: {exc}") from None
    snapshot_date = _parse_date(manifest.get("snapshot_date", ""), str(manifest_path))
    providers: dict[str, ProviderManifest] = {}
    offers: list[PriceOffer] = []
    for name, entry in sorted((manifest.get("providers") or {}).items()):
        path = folder / entry.get("file", f"{name}.csv")
        if verify and path.exists() and sha256_of(path) != entry.get("sha256"):
            raise PriceSnapshotError(
                f"{path}'s sha256 differs from the one in {manifest_path}: the file was changed after the snapshot "
                "was built; rebuild it with `python -m gpubench.prices refresh` or restore the file"
            )
        providers[name] = ProviderManifest(
            name=name,
            version=str(entry.get("version", "")),
            source=str(entry.get("source", "")),
            file=path.name,
            sha256=str(entry.get("sha256", "")),
            spot=str(entry.get("spot", "")),
            notes=str(entry.get("notes", "")),
        )
        offers.extend(read_catalog_csv(path, name))
    return PriceSnapshot(
        snapshot_date=snapshot_date,
        folder=folder,
        providers=providers,
        offers=tuple(offers),
        method=str(manifest.get("method", "")),
    )
