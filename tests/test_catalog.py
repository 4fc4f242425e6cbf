"""The card catalog: every card of conf/hardware/ read with its spec, and device names matched onto cards."""

import pytest
from omegaconf import OmegaConf

from gpubench.conf import CONF_DIR
from gpubench.hardware.catalog import Card, dstack_names, gpu_cards, load_catalog, match_catalog_card, skypilot_names

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
    assert CATALOG["h100"].skypilot_name == "H100" and CATALOG["rtx3050ti"].skypilot_name is None


def test_no_card_file_carries_a_price():
    # Prices come only from the dated snapshot (gpubench/prices/): an undated price in a card file would be a
    # second source of money.
    for path in sorted((CONF_DIR / "hardware").glob("*.yaml")):
        keys = OmegaConf.to_container(OmegaConf.load(path)).keys()
        priced = [key for key in keys if "price" in key or "usd" in key or "cost" in key]
        assert not priced, f"{path.name} carries {priced}"


def test_the_snapshot_and_launcher_names_come_from_the_card_files():
    assert gpu_cards(CATALOG) == {
        "T4": {16: "t4"},
        "L4": {24: "l4"},
        "A10G": {24: "a10g"},
        "A10": {24: "a10"},
        "L40S": {48: "l40s"},
        "A6000": {48: "rtx_a6000"},
        "A100": {40: "a100_40gb", 80: "a100_80gb"},
        "H100": {80: "h100"},
        "H200": {141: "h200"},
    }
    assert skypilot_names(CATALOG)["a100_80gb"] == "A100-80GB" and skypilot_names(CATALOG)["rtx_a6000"] == "RTXA6000"
    assert dstack_names(CATALOG)["a100_40gb"] == ("A100", 40) and dstack_names(CATALOG)["h200"] == ("H200", 141)
    assert set(skypilot_names(CATALOG)) == set(dstack_names(CATALOG)) == set(CATALOG) - {"rtx3050ti", "rtx3060"}


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
