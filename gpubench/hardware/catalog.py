"""The card catalog: each GPU's spec sheet (VRAM, peak TFLOP/s, memory bandwidth, board power) and its names in
the price snapshot and the launchers, read from the Hydra configs under ``gpubench/conf/hardware/``, and the match
of a device name onto a catalog card. Prices live in the dated snapshot (:mod:`gpubench.prices`), not here: a new
card is one YAML file plus its snapshot rows. Nothing here imports torch or NVML.
"""

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from omegaconf import OmegaConf

from gpubench.conf import CONF_DIR
from gpubench.hardware.config import HardwareConfig
from gpubench.units import MB_PER_GB

#: Files of ``gpubench/conf/hardware/`` that choose a device rather than describe a card.
_NOT_CARDS: tuple[str, ...] = ("auto", "cpu")
#: Words after a model number that make it a different card (an RTX 3060 Ti is not an RTX 3060).
_VARIANT_SUFFIX = r"(?![\s_-]*(?:ti|super)\b)"


@dataclass(frozen=True)
class Card:
    """One catalog card's spec sheet: VRAM (GB, binary), dense peak TFLOP/s in fp32, on the bf16 (T4: fp16)
    tensor cores and on the tf32 tensor cores (None where the card has none), memory bandwidth (GB/s) and board
    power (W); its ``gpu_name`` spellings in the price snapshot (``gpuhunt_names``) and its SkyPilot and dstack
    accelerator names (empty where it is not rented). No price: prices are the dated snapshot's."""

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
        """The spec-sheet part of a ``hardware=<card>`` config."""
        return cls(
            name=hardware.name,
            vram_gb=hardware.vram_gb,
            peak_fp32_tflops=hardware.peak_fp32_tflops,
            peak_bf16_tflops=hardware.peak_bf16_tflops,
            peak_tf32_tflops=hardware.peak_tf32_tflops,
            memory_bandwidth_gbps=hardware.memory_bandwidth_gbps,
            board_power_w=hardware.board_power_w,
            gpuhunt_names=tuple(hardware.gpuhunt_names),
            skypilot_name=hardware.skypilot_name,
            dstack_name=hardware.dstack_name,
        )

    @property
    def vram_mb(self) -> float | None:
        return self.vram_gb * MB_PER_GB if self.vram_gb else None

    def peak_tflops(self, precision: str, matmul_precision: str = "highest") -> float | None:
        """Peak TFLOP/s for FLOPs at ``precision``: the bf16/fp16 tensor-core figure for ``bf16``/``fp16``; for
        ``tf32`` (fp32 convolutions under cuDNN's tf32) the tf32 figure, or the fp32 one on a card without tf32; for
        ``fp32``, the tf32 tensor-core figure when ``matmul_precision`` lets fp32 matmuls use tf32 (``high`` or
        ``medium``, :func:`torch.set_float32_matmul_precision`) and the card has tf32, else the fp32 figure. None
        for a precision the catalog has no figure for (``float64``, ``float8_e4m3fn``)."""
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
        """Peak TFLOP/s of a step whose FLOPs run at several precisions (``{"bf16": 9e12, "fp32": 1e12}``): the
        total over the time each part takes at its own :meth:`peak_tflops`, ``ΣF / Σ(F_p / peak_p)`` (times add,
        rates do not: 90% of the FLOPs at 989 and 10% at 67 TFLOP/s run at 416, not at the mean 897). None where a
        part with FLOPs has no peak, or there are no FLOPs."""
        parts = {precision: flops for precision, flops in flops_by_precision.items() if flops > 0}
        peaks = {precision: self.peak_tflops(precision, matmul_precision) for precision in parts}
        if not parts or not all(peaks.values()):
            return None
        if len(parts) == 1:
            # One precision: its peak itself, not the same figure through a division's rounding.
            return next(iter(peaks.values()))
        return sum(parts.values()) / sum(flops / peaks[precision] for precision, flops in parts.items())


def load_catalog(conf_dir: Path | None = None) -> dict[str, Card]:
    """The catalog cards of ``<conf_dir>/hardware/*.yaml`` (not ``auto`` or ``cpu``), by name, interpolations such
    as ``vram_limit_gb: ${.vram_gb}`` resolved and every value checked as a ``hardware`` config is."""
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
    """The snapshot's GPU names (gpuhunt's spelling) onto catalog cards by VRAM (GB, rounded; None for a card
    without one): ``{"A100": {40: "a100_40gb", 80: "a100_80gb"}, "T4": {16: "t4"}}``, so an offer of another
    memory size (an H100 NVL's 94 GB) is no catalog card."""
    cards: dict[str, dict[int | None, str]] = {}
    for card in catalog.values():
        for gpu_name in card.gpuhunt_names:
            cards.setdefault(gpu_name, {})[round(card.vram_gb) if card.vram_gb else None] = card.name
    return cards


def skypilot_names(catalog: Mapping[str, Card]) -> dict[str, str]:
    """Catalog cards onto SkyPilot's accelerator names (cards without one left out)."""
    return {name: card.skypilot_name for name, card in catalog.items() if card.skypilot_name}


def dstack_names(catalog: Mapping[str, Card]) -> dict[str, tuple[str, int]]:
    """Catalog cards onto dstack's GPU name and the least memory to ask for (GB: the card's VRAM)."""
    return {
        name: (card.dstack_name, round(card.vram_gb or 0))
        for name, card in catalog.items()
        if card.dstack_name and card.vram_gb
    }


def _name_pattern(part: str) -> str:
    """A regex matching ``part`` of a catalog name (``rtx3050ti``, ``a100``, ``80gb``) inside a device name, with
    optional spaces or hyphens where letters meet digits (``RTX 3050 Ti``, ``A100-SXM4-80GB``)."""
    pieces = re.findall(r"[a-z]+|\d+", part.lower())
    return r"(?<![a-z0-9])" + r"[\s_-]*".join(pieces) + r"(?![a-z0-9])" + _VARIANT_SUFFIX


def match_catalog_card(device_name: str | None, catalog: dict[str, Card]) -> str | None:
    """The catalog card whose name matches a device name as NVML/torch report it, or None.

    Every ``_``-separated part of the card's name must appear as a word (``a100_80gb`` matches
    ``NVIDIA A100-SXM4-80GB``, not ``NVIDIA A100-SXM4-40GB``; ``rtx3060`` does not match ``RTX 3060 Ti``). When
    several cards match, the one with the most parts (the most specific) wins.
    """
    if not device_name:
        return None
    text = device_name.lower()
    matches = [
        (len(name.split("_")), name)
        for name in catalog
        if all(re.search(_name_pattern(part), text) for part in name.split("_"))
    ]
    return max(matches)[1] if matches else None
