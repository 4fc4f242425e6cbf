"""The shipped price snapshot (gpubench/prices/catalog) and ``python -m gpubench.prices``: every row sourced and
dated, checksums that hold, ``show`` with its date and a fake clock, bad input exit 2, and ``refresh`` through
gpuhunt from a local catalog folder (skipped where gpuhunt is not installed: CI installs ``.[cloud]``)."""

import importlib.util
import json
import shutil
import subprocess
import sys
from datetime import date
from pathlib import Path

import pytest

from gpubench.cli.prices import main
from gpubench.hardware.catalog import load_catalog
from gpubench.prices import SNAPSHOT_DIR, PriceSnapshotError, card_for, load_snapshot, read_catalog_csv

HAS_GPUHUNT = importlib.util.find_spec("gpuhunt") is not None


def run_prices(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gpubench.prices", *args], capture_output=True, text=True, timeout=120, env=env
    )


def test_the_shipped_snapshot_covers_8_gpu_types_4_providers_on_demand_and_spot_every_row_sourced_and_dated() -> None:
    snapshot = load_snapshot()  # checks every file's sha256 against the manifest
    cards = {offer.card for offer in snapshot.offers if offer.card}
    assert len(cards) >= 8 and cards <= set(load_catalog())
    providers_by_kind = {
        kind: {o.provider for o in snapshot.offers if o.spot == kind and o.card} for kind in (False, True)
    }
    assert len(providers_by_kind[False]) >= 4 and len(providers_by_kind[True]) >= 1
    for offer in snapshot.offers:
        assert offer.source.startswith("https://"), offer
        assert offer.price_date <= snapshot.snapshot_date and offer.quoted, offer
        assert offer.price_usd_per_hour > 0 and offer.gpu_count >= 1
    # Every provider says what its spot rows are (priced, not offered, or not in this snapshot and why).
    assert all(entry.spot and entry.version and entry.sha256 for entry in snapshot.providers.values())


def test_a_catalog_gpu_maps_onto_its_card_by_name_and_memory() -> None:
    assert card_for("A100", 40) == "a100_40gb" and card_for("A100", 80) == "a100_80gb"
    assert card_for("L40S", 48) == "l40s" and card_for("H100NVL", 94) is None and card_for("A100", 20) is None


def test_a_file_changed_after_the_snapshot_fails_its_checksum(tmp_path: Path) -> None:
    folder = tmp_path / "snapshot"
    shutil.copytree(SNAPSHOT_DIR, folder)
    with (folder / "runpod.csv").open("a") as handle:
        handle.write('"L40S, Cheaper",x,0.01,0,0,1,L40S,48,False,,nvidia,,x86,"{""price_date"": ""2026-12-01""}"\n')
    with pytest.raises(PriceSnapshotError, match=r"runpod.csv's sha256 differs"):
        load_snapshot(folder)
    assert len(load_snapshot(folder, verify=False).offers) == len(load_snapshot().offers) + 1


def test_a_row_without_a_price_date_is_refused_by_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "aws.csv"
    path.write_text(
        "instance_name,location,price,cpu,memory,gpu_count,gpu_name,gpu_memory,spot,disk_size,gpu_vendor,flags,"
        'cpu_arch,provider_data\ng4dn.xlarge,us-east-1,0.526,4,16,1,T4,16,False,,nvidia,,x86,"{}"\n'
    )
    with pytest.raises(PriceSnapshotError, match=r"aws.csv, line 2: price date '' is not an ISO date"):
        read_catalog_csv(path, "aws")


def test_show_prints_the_date_age_and_the_rows_of_one_gpu() -> None:
    shown = run_prices("show", "--gpu", "H100")
    assert shown.returncode == 0, shown.stderr
    snapshot = load_snapshot()
    assert f"price snapshot of {snapshot.snapshot_date.isoformat()} (" in shown.stdout
    rows = [line for line in shown.stdout.splitlines() if line.startswith("H100 ")]
    assert len(rows) == sum(1 for o in snapshot.offers if o.gpu_name == "H100")
    assert all(" h100 " in row for row in rows)
    assert not [line for line in shown.stdout.splitlines() if line.startswith("L40S ")]


def test_show_names_a_stale_snapshot_under_a_fake_clock(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show"], today=lambda: date(2027, 3, 3)) == 0
    out = capsys.readouterr().out
    assert "(91 days old)" in out
    assert "warning: price snapshot of 2026-12-02 is 91 days old (over 90)" in out
    assert main(["show"], today=lambda: date(2027, 3, 2)) == 0
    assert "warning" not in capsys.readouterr().out
    assert main(["show"], today=lambda: date(2026, 12, 3)) == 0
    assert "(1 day old)" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["show", "--gpu", "K80"], "--gpu K80: the snapshot has no offer of that GPU; it prices A10, A100,"),
        (["show", "--dir", "/nonexistent"], "no price snapshot manifest at /nonexistent/manifest.json"),
    ],
)
def test_bad_input_is_one_paragraph_and_exit_2(args: list[str], message: str) -> None:
    completed = run_prices(*args)
    assert completed.returncode == 2
    assert message in completed.stderr and "Traceback" not in completed.stderr
    assert len(completed.stderr.strip().splitlines()) == 1


@pytest.mark.skipif(HAS_GPUHUNT, reason="checks the message shown without gpuhunt")
def test_refresh_without_gpuhunt_says_how_to_install_it(tmp_path: Path) -> None:
    completed = run_prices("refresh", "--out", str(tmp_path / "out"))
    assert completed.returncode == 2
    assert "gpuhunt is not installed: `pip install 'gpubench[cloud]'`" in completed.stderr


@pytest.mark.skipif(not HAS_GPUHUNT, reason="gpuhunt is in the [cloud] extra")
def test_refresh_rebuilds_the_snapshot_through_gpuhunt_from_a_local_catalog(tmp_path: Path) -> None:
    # A gpuhunt catalog folder of one provider: two T4 offers (the cheaper kept), a spot T4, and a GPU without a
    # catalog card (dropped). gpuhunt reads it with Catalog(auto_reload=False) and GPUHUNT_CATALOG_DIR.
    local = tmp_path / "gpuhunt"
    local.mkdir()
    header = (
        "instance_name,location,price,cpu,memory,gpu_count,gpu_name,gpu_memory,spot,disk_size,gpu_vendor,flags,"
        "cpu_arch,provider_data\n"
    )
    (local / "aws.csv").write_text(
        header + "g4dn.xlarge,us-east-1,0.526,4,16,1,T4,16,False,,nvidia,,x86,{}\n"
        "g4dn.xlarge,us-west-1,0.631,4,16,1,T4,16,False,,nvidia,,x86,{}\n"
        "g4dn.xlarge,us-east-2,0.1758,4,16,1,T4,16,True,,nvidia,,x86,{}\n"
        "p3.2xlarge,us-east-1,3.06,8,61,1,V100,16,False,,nvidia,,x86,{}\n"
    )
    out = tmp_path / "snapshot"
    env = {**__import__("os").environ, "GPUHUNT_CATALOG_DIR": str(local)}
    completed = run_prices("refresh", "--out", str(out), env=env)
    assert completed.returncode == 0, completed.stderr
    snapshot = load_snapshot(out)
    assert sorted((o.instance_name, o.location, o.price_usd_per_hour, o.spot) for o in snapshot.offers) == [
        ("g4dn.xlarge", "us-east-1", 0.526, False),
        ("g4dn.xlarge", "us-east-2", 0.1758, True),
    ]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["providers"]["aws"]["version"] == f"local catalog {local / 'aws.csv'}"
    assert manifest["providers"]["aws"]["spot"] == "spot priced"
    assert snapshot.snapshot_date == snapshot.offers[0].price_date  # the refresh's day
