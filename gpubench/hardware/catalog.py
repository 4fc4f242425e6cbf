"""The card catalog: each GPU's spec sheet and names, read from ``gpubench/conf/hardware/``, and the match of a
device name onto a catalog card. Prices live in the dated snapshot, so a new card is one YAML file plus its rows."""

import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path

from omegaconf import OmegaConf

from gpubench.conf import CONF_DIR
from gpubench.hardware.config import HardwareConfig
from gpubench.results.units import MB_PER_GB

_NOT_CARDS: tuple[str, ...] = ("auto", "cpu")
#: Words after a model number that make it a different card (an RTX 3060 Ti is not an RTX 3060).
_VARIANT_SUFFIX = r"(?![\s_-]*(?:ti|super)\b)"


@dataclass(frozen=True)
class Card:
    """One card's spec sheet: VRAM (GiB), dense peak TFLOP/s (the bf16 figure is fp16 on a card without bf16),
    memory bandwidth (GB/s), board power (W), and its names in the price snapshot and the launchers."""

    name: str
    vram_gb: float | None
    peak_fp32_tflops: float | None
    peak_bf16_tflops: float | None
    peak_tf32_tflops: float | None
    memory_bandwidth_gbps: float | None
    board_power_w: float | None
    gpuhunt_names: tuple[str, ...] = ()
    skypilot_name: str | None = None
    dstack_name: str | None = None

    @classmethod
    def from_config(cls, hardware: HardwareConfig) -> "Card":
        values = {field.name: getattr(hardware, field.name) for field in fields(cls)}
        return cls(**{**values, "gpuhunt_names": tuple(hardware.gpuhunt_names)})

    @property
    def vram_mb(self) -> float | None:
        return self.vram_gb * MB_PER_GB if self.vram_gb else None

    def peak_tflops(self, precision: str, matmul_precision: str = "highest") -> float | None:
        """Peak TFLOP/s at ``precision``: ``tf32`` at the tf32 figure (else fp32's), ``fp32`` too where
        ``matmul_precision`` allows tf32 and the card has it; None without a figure (``float64``)."""
        if precision in ("bf16", "fp16"):
            return self.peak_bf16_tflops
        if precision == "tf32":
            return self.peak_tf32_tflops or self.peak_fp32_tflops
        if precision != "fp32":
            return None
        if matmul_precision != "highest" and self.peak_tf32_tflops:
            return self.peak_tf32_tflops
        return self.peak_fp32_tflops

    def mixed_peak_tflops(
        self, flops_by_precision: Mapping[str, float], matmul_precision: str = "highest"
    ) -> float | None:
        """Peak TFLOP/s of FLOPs at several precisions, ``ΣF / Σ(F_p / peak_p)`` (times add, rates do not); None
        where a part has no peak, or there are no FLOPs."""
        parts = {precision: flops for precision, flops in flops_by_precision.items() if flops > 0}
        peaks = {precision: self.peak_tflops(precision, matmul_precision) for precision in parts}
        if not parts or not all(peaks.values()):
            return None
        if len(parts) == 1:
            # Its peak itself, not the same figure through a division's rounding.
            return next(iter(peaks.values()))
        return sum(parts.values()) / sum(flops / peaks[precision] for precision, flops in parts.items())


def load_catalog(conf_dir: Path | None = None) -> dict[str, Card]:
    """The cards of ``<conf_dir>/hardware/*.yaml`` by name, interpolations resolved and values checked."""
    folder = (conf_dir or CONF_DIR) / "hardware"
    catalog: dict[str, Card] = {}
    for path in sorted(folder.glob("*.yaml")):
        if path.stem in _NOT_CARDS:
            continue
        values = OmegaConf.to_container(OmegaConf.load(path), resolve=True)
        assert isinstance(values, dict)
        card = Card.from_config(HardwareConfig(**{str(key): value for key, value in values.items()}))
        catalog[card.name] = card
    return catalog


def gpu_cards(catalog: Mapping[str, Card]) -> dict[str, dict[int | None, str]]:
    """The snapshot's GPU names onto catalog cards by rounded VRAM (GB): ``{"A100": {40: "a100_40gb", 80: ...}}``,
    so an offer of another memory size is no catalog card."""
    cards: dict[str, dict[int | None, str]] = {}
    for card in catalog.values():
        for gpu_name in card.gpuhunt_names:
            cards.setdefault(gpu_name, {})[round(card.vram_gb) if card.vram_gb else None] = card.name
    return cards


def skypilot_names(catalog: Mapping[str, Card]) -> dict[str, str]:
    return {name: card.skypilot_name for name, card in catalog.items() if card.skypilot_name}


def dstack_names(catalog: Mapping[str, Card]) -> dict[str, tuple[str, int]]:
    """Catalog cards onto dstack's GPU name and the memory to ask for (GB)."""
    return {
        name: (card.dstack_name, round(card.vram_gb or 0))
        for name, card in catalog.items()
        if card.dstack_name and card.vram_gb
    }


def _name_pattern(part: str) -> str:
    """A regex matching ``part`` of a catalog name (``a100``, ``80gb``) as a word of a device name, spaces or
    hyphens allowed where letters meet digits."""
    pieces = re.findall(r"[a-z]+|\d+", part.lower())
    return r"(?<![a-z0-9])" + r"[\s_-]*".join(pieces) + r"(?![a-z0-9])" + _VARIANT_SUFFIX


def match_catalog_card(device_name: str | None, catalog: dict[str, Card]) -> str | None:
    """The catalog card every ``_``-separated part of whose name is a word of ``device_name`` (``a100_80gb``
    matches ``NVIDIA A100-SXM4-80GB``), the most specific when several match; None without one."""
    if not device_name:
        return None
    text = device_name.lower()
    matches = [
        (len(name.split("_")), name)
        for name in catalog
        if all(re.search(_name_pattern(part), text) for part in name.split("_"))
    ]
    return max(matches)[1] if matches else None
