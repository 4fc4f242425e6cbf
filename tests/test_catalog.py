"""The card catalog: every card of conf/hardware/ read with its spec, and device names matched onto cards."""

import pytest

from gpubench.hardware.catalog import Card, load_catalog, match_catalog_card

CATALOG = load_catalog()


def test_load_catalog_reads_all_twelve_cards_with_interpolation_resolved():
    assert sorted(CATALOG) == [
        *["a10", "a100_40gb", "a100_80gb", "a10g", "h100", "h200", "l4", "l40s"],
        *["rtx3050ti", "rtx3060", "rtx_a6000", "t4"],
    ]
    for name, card in CATALOG.items():
        assert isinstance(card, Card)
        assert card.name == name
        assert card.vram_mb == card.vram_gb * 1024
        assert card.peak_fp32_tflops and card.peak_bf16_tflops and card.memory_bandwidth_gbps
    assert CATALOG["h100"].hourly_price_usd == 2.9
    assert CATALOG["rtx3050ti"].hourly_price_usd is None


def test_load_catalog_from_another_conf_dir(tmp_path):
    (tmp_path / "hardware").mkdir()
    (tmp_path / "hardware" / "cpu.yaml").write_text("name: cpu\n")
    (tmp_path / "hardware" / "mine.yaml").write_text("name: mine\nvram_gb: 8\nvram_limit_gb: ${.vram_gb}\n")
    catalog = load_catalog(tmp_path)
    assert list(catalog) == ["mine"]
    assert catalog["mine"].vram_gb == 8


@pytest.mark.parametrize(
    ("device_name", "card"),
    [
        ("NVIDIA H200", "h200"),
        ("NVIDIA H100 80GB HBM3", "h100"),
        ("NVIDIA A100-SXM4-80GB", "a100_80gb"),
        ("NVIDIA A100-PCIE-40GB", "a100_40gb"),
        ("Tesla T4", "t4"),
        ("NVIDIA L4", "l4"),
        ("NVIDIA GeForce RTX 3050 Ti Laptop GPU", "rtx3050ti"),
        ("NVIDIA GeForce RTX 3060", "rtx3060"),
        ("NVIDIA GeForce RTX 3060 Ti", None),
        ("NVIDIA A10G", "a10g"),
        ("NVIDIA A10", "a10"),
        ("NVIDIA L40S", "l40s"),
        ("NVIDIA RTX A6000", "rtx_a6000"),
        ("NVIDIA GeForce RTX 3050 Laptop GPU", None),
        ("NVIDIA GeForce GT 430", None),
        (None, None),
    ],
)
def test_device_names_match_catalog_cards(device_name, card):
    assert match_catalog_card(device_name, CATALOG) == card
