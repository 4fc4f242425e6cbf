"""One card file and one price source: a card added as one YAML file plus its snapshot rows is projected, priced
and launched; and a CPU job's console, reasoning, actions, cost plot, MLflow run and sweep summary all name the
same cheapest row of the dated snapshot."""

import csv
import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from conftest import run_gpubench

from gpubench.cli.launch import choose, dstack_task, skypilot_task
from gpubench.conf import CONF_DIR
from gpubench.decision.advice import cheapest_text, rental_text
from gpubench.decision.config import DecisionConfig
from gpubench.decision.recommendation import build_recommendation
from gpubench.hardware.catalog import load_catalog
from gpubench.output.plots import cost_bars
from gpubench.prices import SNAPSHOT_DIR, load_snapshot, read_catalog_csv, sha256_of, write_catalog_csv
from gpubench.results import RunReport, cheapest_rental

CPU_REPORT = Path(__file__).parent / "fixtures" / "report_main_bf189fb_cpu_quick_dqn_ppo.json"
#: A card the shipped catalog lacks, as a user would add it: spec sheet and names, no price.
NEW_CARD = {
    "name": "b200",
    "vram_gb": 180,
    "vram_limit_gb": "${.vram_gb}",
    "peak_fp32_tflops": 80.0,
    "peak_bf16_tflops": 2250.0,
    "peak_tf32_tflops": 1100.0,
    "memory_bandwidth_gbps": 8000,
    "board_power_w": 1000,
    "gpuhunt_names": ["B200"],
    "skypilot_name": "B200",
    "dstack_name": "B200",
}


def _snapshot_with_b200(folder: Path) -> Path:
    """The shipped snapshot copied to ``folder`` with one on-demand B200 row added to runpod's file (cheaper than
    every other GPU, so it is the cheapest row) and the manifest's checksum updated."""
    shutil.copytree(SNAPSHOT_DIR, folder)
    path = folder / "runpod.csv"
    offers = read_catalog_csv(path, "runpod")
    h100 = next(o for o in offers if o.gpu_name == "H100")
    offers.append(replace(h100, instance_name="B200", gpu_name="B200", gpu_memory_gb=180.0, price_usd_per_hour=0.05))
    write_catalog_csv(path, offers)
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["providers"]["runpod"]["sha256"] = sha256_of(path)
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return folder


def test_a_new_card_is_one_yaml_file_plus_its_snapshot_rows(tmp_path: Path) -> None:
    conf = tmp_path / "conf"
    shutil.copytree(CONF_DIR, conf)
    (conf / "hardware" / "b200.yaml").write_text(yaml.safe_dump(NEW_CARD, sort_keys=False))
    catalog = load_catalog(conf)
    snapshot = load_snapshot(_snapshot_with_b200(tmp_path / "prices"))
    stored = RunReport.from_dict(json.loads(CPU_REPORT.read_text()))
    recommendation = build_recommendation(stored, DecisionConfig(), catalog, prices=snapshot)

    # The projection has the card, the cost table prices it, and it is the cheapest row that fits.
    row = next(row for row in recommendation.projection if row.card == "b200")
    assert row.training_hours is not None and row.fits_in_vram is not False
    b200 = [row for row in recommendation.cost_table if row.gpu == "b200"]
    assert [(r.provider, r.spot, r.price_usd_per_hour) for r in b200] == [("runpod", False, 0.05)]
    assert cheapest_rental(recommendation.cost_table) == b200[0]
    assert recommendation.cost_analysis.cheapest_card == "b200"

    # Both launch formats ask for it by the names its card file gives.
    report = RunReport.from_dict({**stored.to_dict(), "recommendation": recommendation.to_dict()})
    choice = choose(report, catalog)
    assert choice.best == b200[0]
    skypilot = yaml.safe_load(skypilot_task(report, choice))
    assert skypilot["resources"]["ordered"][0] == {"accelerators": "B200:1"}
    dstack = yaml.safe_load(dstack_task(report, choice))
    assert dstack["resources"]["gpu"]["name"][0] == "B200"
    # The shipped catalog does not know the card: its launcher names come only from the card file.
    assert "b200" not in load_catalog() and choose(report).best.gpu != "b200"


@pytest.mark.slow
def test_every_output_of_a_cpu_job_names_the_same_cheapest_dated_row(tmp_path: Path) -> None:
    # A one-job sweep, tracked in SQLite, with thresholds that make the answer "rent", so the actions name a rental.
    completed = run_gpubench(
        tmp_path,
        "-m",
        "experiment=quick",
        "hardware=cpu",
        "model=mlp",
        "data.days=3",
        "hardware.burn_in_max_seconds=0",
        "decision.local_max_hours=1e-6",
        "decision.cloud_min_hours=1e-6",
        "tracking.enabled=true",
        f"tracking.uri=sqlite:///{tmp_path}/mlflow.db",
        env={"GPU_BENCHMARK_CACHE_DIR": str(tmp_path / "cache")},
    )
    assert completed.returncode == 0, completed.stderr
    (report_path,) = sorted(tmp_path.glob("multirun/**/0/report.json"))
    recommendation = RunReport.from_dict(json.loads(report_path.read_text())).recommendation
    cheapest = cheapest_rental(recommendation.cost_table)
    assert cheapest is not None and cheapest.price_date and cheapest.price_source.startswith("https://")
    # No undated price anywhere: the snapshot has no T4, so no T4 is priced.
    assert "t4" not in {row.gpu for row in recommendation.cost_table}

    # The console's first rental that fits.
    lines = completed.stdout.splitlines()
    first = lines[next(i for i, line in enumerate(lines) if line.startswith("Cheapest rentals that fit")) + 1]
    kind = "spot" if cheapest.spot else "on-demand"
    assert first.startswith(f"  {cheapest.gpu} at {cheapest.provider} ({kind}, {cheapest.instance}):")
    # The reasoning and the actions (the answer is to rent): the cloud card's dated rental, then the cheapest.
    h100 = cheapest_rental(recommendation.cost_table, "h100")
    assert f"({rental_text(h100)})" in recommendation.reasoning
    if cheapest.gpu != "h100":
        assert cheapest_text(cheapest) in recommendation.reasoning
        assert cheapest_text(cheapest) in recommendation.recommended_actions
    # The cost analysis and the cost plot's data.
    cost = recommendation.cost_analysis
    assert cost.cheapest_label == cheapest.label and cost.cheapest_card_cost_usd_per_training == cheapest.usd
    priced = [bar for bar in cost_bars(recommendation) if bar.cost_usd is not None]
    assert min(priced, key=lambda bar: bar.cost_usd).rental == cheapest
    # MLflow: the job's run carries the same row as metrics and tags.
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/mlflow.db")
    runs = [
        run
        for experiment in client.search_experiments()
        for run in client.search_runs([experiment.experiment_id])
        if "recommendation/cheapest_rental_usd" in run.data.metrics
    ]
    (run,) = runs
    assert run.data.metrics["recommendation/cheapest_rental_usd"] == pytest.approx(cheapest.usd)
    assert run.data.metrics["recommendation/cheapest_cloud_cost_usd_per_training"] == pytest.approx(cheapest.usd)
    assert run.data.tags["gpubench.cheapest_rental"] == cheapest.label
    assert run.data.tags["gpubench.cheapest_price_date"] == cheapest.price_date
    # The sweep summary.
    (summary,) = sorted(tmp_path.glob("multirun/**/sweep_summary.csv"))
    (row,) = list(csv.DictReader(summary.open()))
    assert row["cheapest_rental"] == cheapest.label
    assert float(row["cheapest_rental_usd"]) == pytest.approx(cheapest.usd)
    assert float(row["cloud_cost_usd_per_training"]) == pytest.approx(h100.usd)
