"""The dated GPU price snapshot, the only source of prices: one ``<provider>.csv`` in gpuhunt's v2 catalog columns
per provider (each row's ``provider_data`` holds its ``source``, ``price_date`` and ``quoted`` figure) and a
``manifest.json`` with each file's sha256. Prices in USD per hour for the whole instance. Read without gpuhunt."""

import csv
import hashlib
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import date
from pathlib import Path

from gpubench.errors import ConfigError
from gpubench.hardware.catalog import gpu_cards, load_catalog

SNAPSHOT_DIR = Path(__file__).resolve().parent / "catalog"
MANIFEST_NAME = "manifest.json"
#: A snapshot older than this (days) is named in every cost line: prices move.
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

#: gpuhunt's GPU names onto the shipped catalog's cards, by VRAM (GB); a GPU without a card is not priced.
GPU_CARDS: dict[str, dict[int | None, str]] = gpu_cards(load_catalog())


class PriceSnapshotError(ValueError):
    """The snapshot cannot be read: a missing file, a bad row, a checksum that differs."""


@dataclass(frozen=True)
class PriceOffer:
    """One priced offer: ``price_usd_per_hour`` for the whole instance of ``gpu_count`` GPUs, observed by ``source``
    on ``price_date``."""

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
        """The catalog card this offer's GPU is, or None."""
        return card_for(self.gpu_name, self.gpu_memory_gb)


def card_for(
    gpu_name: str, gpu_memory_gb: float | None, cards: Mapping[str, Mapping[int | None, str]] | None = None
) -> str | None:
    """The catalog card of GPU ``gpu_name`` with ``gpu_memory_gb`` GB in ``cards`` (default :data:`GPU_CARDS`), or
    None; without a stated memory only where one card has that name."""
    by_memory = (GPU_CARDS if cards is None else cards).get(gpu_name) or {}
    if None in by_memory:
        return by_memory[None]
    if gpu_memory_gb is None:
        return next(iter(by_memory.values())) if len(by_memory) == 1 else None
    return by_memory.get(round(gpu_memory_gb))


@dataclass(frozen=True)
class ProviderManifest:
    """One provider's manifest entry: its catalog ``version``, ``source``, file and sha256, and what the snapshot says
    of its ``spot`` offers."""

    name: str
    version: str
    source: str
    file: str
    sha256: str
    spot: str
    notes: str = ""


@dataclass(frozen=True)
class PriceSnapshot:
    """A price snapshot: its date, folder, providers' manifest entries, offers and how it was built."""

    snapshot_date: date
    folder: Path
    providers: dict[str, ProviderManifest]
    offers: tuple[PriceOffer, ...]
    method: str = ""

    def age_days(self, today: date) -> int:
        """Days from the snapshot's date to ``today``."""
        return (today - self.snapshot_date).days

    def staleness(self, today: date) -> str | None:
        """A sentence naming the snapshot when it is older than :data:`STALE_AFTER_DAYS` days on ``today`` or dated
        after it, else None."""
        age = self.age_days(today)
        if age < 0:
            return (
                f"price snapshot of {self.snapshot_date.isoformat()} is dated {-age} day{'' if age == -1 else 's'} "
                f"in the future (today is {today.isoformat()}, UTC): its manifest's snapshot_date or this machine's "
                "clock is wrong, so how old its prices are is unknown; fix the date or rebuild it with "
                "`python -m gpubench.prices refresh`"
            )
        if age <= STALE_AFTER_DAYS:
            return None
        return (
            f"price snapshot of {self.snapshot_date.isoformat()} is {age} days old (over {STALE_AFTER_DAYS}): "
            "refresh it with `python -m gpubench.prices refresh`"
        )


def sha256_of(path: Path) -> str:
    """The file's sha256, hex."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _parse_date(text: object, where: str, what: str = "price date") -> date:
    try:
        return date.fromisoformat(text)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise PriceSnapshotError(f"{where}: {what} {text!r} is not an ISO date (YYYY-MM-DD)") from None


def _number(
    row: Mapping[str, str | None], column: str, where: str, valid: str, *, positive: bool, empty: float | None = None
) -> float:
    """The row's ``column`` as a finite number, > 0 when ``positive`` else >= 0, ``empty`` for an empty cell where
    given."""
    text = row.get(column)
    if not text and empty is not None:
        return empty
    try:
        value = float(text)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        value = math.nan
    if math.isfinite(value) and (value > 0 if positive else value >= 0):
        return value
    raise PriceSnapshotError(f"{where}: {column} {text!r} is not valid: it must be {valid}")


def _offer(row: Mapping[str, str | None], provider: str, gpu_count: int, where: str) -> PriceOffer:
    """One GPU row as an offer, each value checked."""
    spot = (row.get("spot") or "").strip().lower()
    if spot not in ("true", "false"):
        raise PriceSnapshotError(f"{where}: spot {row.get('spot')!r} is not valid: it must be True or False")
    try:
        data = json.loads(row.get("provider_data") or "{}")
    except json.JSONDecodeError as exc:
        raise PriceSnapshotError(f"{where}: provider_data is not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise PriceSnapshotError(
            f"{where}: provider_data {row.get('provider_data')!r} is not valid: it must be a JSON object with "
            "source, price_date and quoted"
        )
    memory = row.get("gpu_memory")
    return PriceOffer(
        provider=provider,
        instance_name=row.get("instance_name") or "",
        location=row.get("location") or "",
        price_usd_per_hour=_number(
            row, "price", where, "a finite number > 0 (USD per hour for the whole instance)", positive=True
        ),
        gpu_name=row.get("gpu_name") or "",
        gpu_memory_gb=(
            _number(row, "gpu_memory", where, "a finite number > 0 (GB per GPU) or empty", positive=True)
            if memory
            else None
        ),
        gpu_count=gpu_count,
        spot=spot == "true",
        price_date=_parse_date(data.get("price_date", ""), where),
        source=str(data.get("source", "")),
        quoted=str(data.get("quoted", "")),
        cpu=int(_number(row, "cpu", where, "a finite number >= 0 (vCPUs; 0: not stated)", positive=False, empty=0)),
        memory_gb=_number(row, "memory", where, "a finite number >= 0 (GB; 0: not stated)", positive=False, empty=0.0),
    )


def read_catalog_csv(path: Path, provider: str) -> list[PriceOffer]:
    """The offers of one provider's catalog file, rows without a GPU skipped; :class:`PriceSnapshotError` naming the
    file, line, column and value for a row it cannot read."""
    try:
        handle = path.open(newline="")
    except OSError as exc:
        raise PriceSnapshotError(f"cannot read the price catalog {path}: {exc.strerror or exc}") from None
    offers = []
    with handle:
        reader = csv.DictReader(handle)
        try:
            columns = reader.fieldnames or []
            required = ("instance_name", "price", "gpu_count", "gpu_name", "spot")
            missing = [name for name in required if name not in columns]
            if missing:
                raise PriceSnapshotError(f"{path} lacks gpuhunt's catalog columns {', '.join(missing)}")
            for row in reader:
                where = f"{path}, line {reader.line_num}"
                gpu_count = (row.get("gpu_count") or "0").strip()
                if not gpu_count.isdigit():
                    raise PriceSnapshotError(
                        f"{where}: gpu_count {row.get('gpu_count')!r} is not valid: it must be a whole number >= 0 "
                        "(the instance's GPUs; 0 or empty for an instance without a GPU)"
                    )
                if row.get("gpu_name") and int(gpu_count):
                    offers.append(_offer(row, provider, int(gpu_count), where))
        except (csv.Error, UnicodeDecodeError) as exc:
            raise PriceSnapshotError(f"{path} is not a CSV catalog file ({exc})") from None
    return offers


def write_catalog_csv(path: Path, offers: Iterable[PriceOffer]) -> None:
    """Write offers as one provider's catalog file, provenance in ``provider_data``."""
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
                    "gpu_vendor": "nvidia",
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
        "providers": {entry.name: {k: v for k, v in asdict(entry).items() if k != "name"} for entry in providers},
    }
    (folder / MANIFEST_NAME).write_text(json.dumps(data, indent=2) + "\n")


def _provider_entry(manifest_path: Path, name: str, entry: object) -> ProviderManifest:
    """One provider's manifest entry, its file a plain name in the snapshot's folder."""
    if not isinstance(entry, dict):
        raise PriceSnapshotError(
            f"{manifest_path}: providers.{name} is {entry!r}, not valid: it must be a JSON object with file, "
            "sha256, version, source and spot"
        )
    file = entry.get("file", f"{name}.csv")
    if not isinstance(file, str) or not file or Path(file).name != file:
        raise PriceSnapshotError(
            f"{manifest_path}: providers.{name}.file is {file!r}, not valid: it must be the name of a CSV file in "
            "the snapshot's folder"
        )
    texts = {key: str(entry.get(key, "")) for key in ("version", "source", "sha256", "spot", "notes")}
    return ProviderManifest(name=name, file=file, **texts)


def load_snapshot(folder: Path | None = None, *, verify: bool = True) -> PriceSnapshot:
    """The snapshot in ``folder`` (default: the shipped one), each file's sha256 checked when ``verify``;
    :class:`PriceSnapshotError` naming the file, key or row that is wrong."""
    folder = Path(folder) if folder is not None else SNAPSHOT_DIR
    manifest_path = folder / MANIFEST_NAME
    try:
        manifest = json.loads(manifest_path.read_text())
    except OSError as exc:
        raise PriceSnapshotError(
            f"no price snapshot manifest at {manifest_path} ({exc.strerror or exc}): give a folder written by "
            "`python -m gpubench.prices refresh`, or leave decision.prices_dir null for the shipped snapshot"
        ) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise PriceSnapshotError(f"{manifest_path} is not valid JSON: {exc}") from None
    if not isinstance(manifest, dict):
        raise PriceSnapshotError(
            f"{manifest_path} holds a JSON {type(manifest).__name__}, not a price snapshot manifest: it must be a "
            "JSON object with snapshot_date and providers, as `python -m gpubench.prices refresh --out DIR` writes"
        )
    snapshot_date = _parse_date(manifest.get("snapshot_date"), str(manifest_path), "snapshot_date")
    entries = manifest.get("providers")
    if not isinstance(entries, dict) or not entries:
        raise PriceSnapshotError(
            f"{manifest_path}: providers is {entries!r}, not valid: it must be a non-empty JSON object of each "
            "provider's name to its entry (file, sha256, version, source, spot)"
        )
    providers: dict[str, ProviderManifest] = {}
    offers: list[PriceOffer] = []
    for name, raw in sorted(entries.items()):
        entry = _provider_entry(manifest_path, name, raw)
        path = folder / entry.file
        if verify and path.is_file() and sha256_of(path) != entry.sha256:
            raise PriceSnapshotError(
                f"{path}'s sha256 differs from the one in {manifest_path}: the file was changed after the snapshot "
                "was built; rebuild it with `python -m gpubench.prices refresh` or restore the file"
            )
        providers[name] = entry
        offers.extend(read_catalog_csv(path, name))
    if not offers:
        raise PriceSnapshotError(
            f"the price snapshot in {folder} holds no GPU offer: none of its files ("
            f"{', '.join(entry.file for entry in providers.values())}) has a row with a gpu_name and a gpu_count "
            "of 1 or more; give a snapshot that prices at least one GPU"
        )
    return PriceSnapshot(snapshot_date, folder, providers, tuple(offers), method=str(manifest.get("method", "")))


def user_snapshot(prices_dir: str) -> PriceSnapshot:
    """The snapshot in ``decision.prices_dir`` (``~`` expanded); an unreadable folder is a :class:`ConfigError`."""
    try:
        return load_snapshot(Path(prices_dir).expanduser())
    except PriceSnapshotError as exc:
        raise ConfigError(
            f"`decision.prices_dir` = {prices_dir!r} cannot be priced from: {exc}. It must be a folder holding a "
            "readable price snapshot (manifest.json and <provider>.csv, as `python -m gpubench.prices refresh --out "
            "DIR` writes), or null for the snapshot shipped with gpubench."
        ) from None
