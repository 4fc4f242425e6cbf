"""What a job logs to MLflow, without a store: its name with the verdict, its description, params without paths and
paths as tags, and its data as a dataset input with a digest checked against one computed here with hashlib."""

import hashlib
import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from gpubench.data.config import DataConfig
from gpubench.data.loader import load_bars
from gpubench.data.synthetic import generate_synthetic_dbn
from gpubench.decision.config import DecisionConfig
from gpubench.decision.recommendation import build_recommendation
from gpubench.hardware.catalog import load_catalog
from gpubench.output.tracking import SweepJob, job_params, job_tags, path_tags, run_record, starting_run_name
from gpubench.output.tracking_record import (
    dataset_record,
    description,
    device_label,
    format_hours,
    is_path_key,
    run_name,
    synthetic_digest,
    verdict_label,
)
from gpubench.results import RunReport

FIXTURES = Path(__file__).parent / "fixtures"


def fixture(name: str) -> RunReport:
    return RunReport.from_dict(json.loads((FIXTURES / name).read_text()))


CPU_QUICK = fixture("report_main_1092cdc_cpu_quick.json")


@pytest.fixture(scope="module")
def emulated() -> RunReport:
    """The H200 run emulating an RTX 3050 Ti (all four models), with the recommendation this gpubench gives it."""
    stored = fixture("report_main_2026-11-29_h200_rtx3050ti.json")
    return replace(
        stored,
        recommendation=build_recommendation(
            stored, DecisionConfig(critical_models=["dqn", "ppo", "mamba2", "tft"]), load_catalog()
        ),
    )


@pytest.mark.parametrize(
    ("hours", "shown"),
    [(3.14, "3.1 h"), (1.0, "1.0 h"), (9.96, "10.0 h"), (10.0, "10 h"), (60.4, "60 h"), (0.0523, "0.052 h")],
)
def test_hours_are_shown_with_two_or_three_significant_digits(hours, shown):
    assert format_hours(hours) == shown


def test_a_smoke_test_is_named_as_one_and_says_so_in_its_description():
    assert run_name(CPU_QUICK, None) == "quick · CPU · smoke test"
    text = description(CPU_QUICK)
    reasoning = CPU_QUICK.recommendation.reasoning
    actions = "\n".join(f"- {action}" for action in CPU_QUICK.recommendation.recommended_actions)
    assert text == f"**quick preset — smoke test: tiny shapes, not your training.**\n\n{reasoning}\n\n{actions}"


def test_the_name_says_the_card_the_answer_is_about_and_the_verdict_with_its_hours(emulated):
    recommendation = emulated.recommendation
    assert recommendation.decision == "CLOUD_GPU_RECOMMENDED" and recommendation.emulated_card == "rtx3050ti"
    hours = recommendation.estimated_full_training_hours
    # Hydra stores "no preset" as the string "None": that is no preset.
    assert emulated.run.choices["experiment"] == "None"
    assert run_name(emulated, None) == f"dqn+ppo+mamba2+tft · rtx3050ti · CLOUD {format_hours(hours)}"
    assert "gpubench.preset" not in run_record(emulated).tags
    assert description(emulated).startswith(recommendation.reasoning + "\n\n- ")
    # Without the emulation the measured GPU is named, without its vendor.
    plain = replace(emulated, recommendation=replace(recommendation, emulated_card=None))
    assert device_label(plain) == "H200"


def test_the_verdict_of_a_gray_zone_no_decision_and_a_run_that_did_not_complete(emulated):
    recommendation = emulated.recommendation
    gray = replace(recommendation, decision="GRAY_ZONE", estimated_full_training_hours=30.2)
    assert verdict_label(replace(emulated, recommendation=gray)) == "GRAY ZONE 30 h"
    withheld = replace(recommendation, decision=None)
    assert verdict_label(replace(emulated, recommendation=withheld)) == "no verdict"
    assert verdict_label(replace(emulated, status="interrupted")) == "interrupted"
    assert verdict_label(replace(emulated, recommendation=None)) == "no verdict"
    failed = replace(emulated, status="failed", recommendation=None, error="DataError: no bars")
    assert verdict_label(failed) == "failed"
    assert description(failed) == "The job ended early: DataError: no bars"


def test_a_sweeps_job_is_named_by_the_values_it_sweeps_and_nested_from_its_start(emulated):
    job = SweepJob("multirun/a", 1, "p" * 32, ("statistics.confidence_level=0.99", "seed=2"))
    # The swept values lead: MLflow's run list cuts a long name at its end.
    assert run_name(emulated, job) == f"statistics.confidence_level=0.99 seed=2 · {run_name(emulated, None)}"
    assert (
        starting_run_name(["tft"], {"model": "tft"}, job) == "statistics.confidence_level=0.99 seed=2 · tft · running"
    )
    assert starting_run_name(["tft"], {"model": "tft"}, SweepJob("multirun/a", 3)) == "job 3 · tft · running"
    assert starting_run_name(["tft"], {"experiment": "quick", "model": "tft"}, None) == "quick tft · running"
    tags = job_tags(["tft"], "0.1.0", sweep=job, paths={"output": "o/report.json"})
    assert tags == {
        "gpubench.models": "tft",
        "gpubench.version": "0.1.0",
        "gpubench.status": "running",
        "output": "o/report.json",
        "gpubench.sweep": "multirun/a",
        "gpubench.job_num": "1",
        "mlflow.parentRunId": "p" * 32,
    }


def test_paths_are_tags_and_the_preset_is_a_param():
    tree = {
        "output": "outputs/x/report.json",
        "epochs": 20,
        "data": {"source": "dbn", "path": "~/db/*.dbn.zst", "cache_dir": "~/.cache/gpubench", "days": 20},
        "tracking": {"uri": "sqlite:///mlruns/mlflow.db", "artifact_location": "mlruns/artifacts", "experiment": "g"},
        "decision": {"prices_dir": None, "local_max_hours": 24.0},
        "workloads": {"custom": {"factory": "pkg.mod:build"}},
    }
    assert job_params(tree, {"experiment": "quick"}) == {
        "epochs": 20,
        "data.source": "dbn",
        "data.days": 20,
        "tracking.experiment": "g",
        "decision.local_max_hours": 24.0,
        "workloads.custom.factory": "pkg.mod:build",
        "experiment": "quick",
    }
    assert job_params({}, {"experiment": "None"}) == {"experiment": "none"}
    assert path_tags(tree) == {
        "output": "outputs/x/report.json",
        "data.path": "~/db/*.dbn.zst",
        "data.cache_dir": "~/.cache/gpubench",
        "tracking.uri": "sqlite:///mlruns/mlflow.db",
        "tracking.artifact_location": "mlruns/artifacts",
    }
    assert [is_path_key(k) for k in ("hydra.sweep.dir", "x.log_file", "x.file_count", "data.path_style")] == [
        True,
        True,
        False,
        False,
    ]


def test_the_synthetic_markets_digest_is_that_of_its_seed_and_shape(tmp_path):
    shape = {"days": 3, "generator": "gpubench-synthetic-market-v1", "seed": 7, "start_date": "2024-01-02"}
    expected = hashlib.blake2b(
        json.dumps({**shape, "symbols": ["SYNA", "SYNB"]}, sort_keys=True).encode(), digest_size=16
    ).hexdigest()
    assert synthetic_digest(7, ["SYNA", "SYNB"], 3, "2024-01-02") == expected
    assert synthetic_digest(8, ["SYNA", "SYNB"], 3, "2024-01-02") != expected
    assert synthetic_digest(7, ["SYNA", "SYNB"], 4, "2024-01-02") != expected
    dataset = run_record(CPU_QUICK, data_config=DataConfig(symbols=["SYNA", "SYNB"], days=5, seed=7)).dataset
    assert dataset.digest == synthetic_digest(7, ["SYNA", "SYNB"], 5, "2024-01-02")
    assert dataset.name == "synthetic market (seed 7, 2 symbols, 5 days)" and dataset.context == "training"
    assert dataset.source == CPU_QUICK.data.path
    assert dataset.profile == {
        "source": "synthetic",
        "files": 5,
        "bars": 3900,
        "symbols": ["SYNA", "SYNB"],
        "first_timestamp": "2024-01-02T14:30:00Z",
        "last_timestamp": "2024-01-08T20:59:00Z",
        "seed": 7,
        "days": 5,
        "start_date": "2024-01-02",
    }


def test_dbn_files_are_the_dataset_by_the_digest_of_their_bytes(tmp_path):
    generated = generate_synthetic_dbn(tmp_path / "gen", symbols=["SYNA"], days=2, start_date="2024-01-02", seed=3)
    folder = tmp_path / "download"
    folder.mkdir()
    for path in generated.files:
        shutil.copyfile(path, folder / path.name)
    config = DataConfig(source="dbn", path=str(folder), cache_dir=str(tmp_path / "cache"))
    _, provenance = load_bars(config)
    dataset = dataset_record(provenance, config)
    # BLAKE2b-128 of the reader's version and of each file's BLAKE2b-128, in sorted order (names do not count).
    combined = hashlib.blake2b(b"gpubench-bars-v2-publishers-aggregate", digest_size=16)
    for digest in sorted(hashlib.blake2b(p.read_bytes(), digest_size=16).hexdigest() for p in folder.iterdir()):
        combined.update(bytes.fromhex(digest))
    assert dataset.digest == combined.hexdigest()
    assert dataset.name == "dbn download" and dataset.source == str(folder)
    assert dataset.profile["files"] == 2 and dataset.profile["symbols"] == ["SYNA"]


def test_a_data_path_with_credentials_is_logged_redacted():
    data = replace(CPU_QUICK.data, source="dbn", path="https://alice:SECRETPW42@host/db/x.dbn")
    dataset = dataset_record(data, None)
    assert dataset.source == "https://alice:***@host/db/x.dbn" and "SECRETPW42" not in dataset.name


def test_the_system_metrics_keys_refuse_bad_values_naming_the_key():
    from gpubench.errors import ConfigError
    from gpubench.output.config import TrackingConfig
    from tests.test_cli_strictness import refusal

    assert refusal("tracking.system_metrics=maybe").startswith(
        "`tracking.system_metrics` (the override `tracking.system_metrics=maybe`): Value 'maybe' is not a valid bool"
    )
    with pytest.raises(ConfigError) as raised:
        TrackingConfig(system_metrics_interval_s=0.0)
    assert str(raised.value) == (
        "`tracking.system_metrics_interval_s` = 0.0 is not valid: it must be at least 0.1 (seconds between two "
        "system-metrics samples; tracking.system_metrics=false turns them off)."
    )
