"""The typed report: reports written by main before the regrouping load, round-trip to the same JSON, and a key the
schema does not know is refused by name."""

import json
from pathlib import Path

import pytest

from gpubench.results import (
    REPORT_SCHEMA_VERSION,
    ModelResult,
    Recommendation,
    ReportFormatError,
    RunReport,
    cheapest_rental,
)
from gpubench.results.report import migrate

FIXTURES = Path(__file__).parent / "fixtures"
#: ``python -m gpubench experiment=quick tracking.enabled=false`` on the CPU, written by main at 1092cdc.
CPU_REPORT = FIXTURES / "report_main_1092cdc_cpu_quick.json"
#: ``python -m gpubench hardware=rtx3050ti`` on the H200 (2026-11-29), written before ``steps`` and the headroom
#: fields existed: it must still load.
H200_REPORT = FIXTURES / "report_main_2026-11-29_h200_rtx3050ti.json"
#: A report of the default job on the H200 written before schema 3, with a cost table.
STORED_S10_REPORT = Path(__file__).parent.parent / "benchmarks/results/2026-12-03-h200-s10-default/report.json"


def load(path: Path) -> dict:
    return json.loads(path.read_text())


def test_a_report_written_by_main_round_trips_to_the_same_json() -> None:
    written = load(CPU_REPORT)
    report = RunReport.from_dict(written)
    # Plus what issue 22 derives from the run's choices: an experiment=quick report says it is a smoke test.
    preset = {"preset": "quick", "preset_note": "smoke test: tiny shapes, not your training"}
    # And what migrate() upgrades: the schema version (this quiet run's reasoning holds no host sentence) and the
    # projection rows' undated prices, dropped.
    undated = ("hourly_price_usd", "cost_usd_per_training")
    projection = [{k: v for k, v in row.items() if k not in undated} for row in written["recommendation"]["projection"]]
    upgraded = {
        **written,
        "run": {**written["run"], **preset},
        "report_schema_version": REPORT_SCHEMA_VERSION,
        "recommendation": {**written["recommendation"], "projection": projection},
    }
    assert json.loads(json.dumps(report.to_dict())) == upgraded
    assert RunReport.from_dict(report.to_dict()) == report


def test_migrate_gives_a_version_1_reports_host_sentence_a_key_of_its_own() -> None:
    reasoning = "On NVIDIA H200, training dqn takes 3.3 h. The host's speed moved during the run (a loop took 6 ms)."
    old = {"report_schema_version": 1, "recommendation": {"reasoning": reasoning}}
    upgraded = migrate(old)
    assert upgraded["report_schema_version"] == REPORT_SCHEMA_VERSION == 3
    assert upgraded["recommendation"]["host_note"] == "The host's speed moved during the run (a loop took 6 ms)."
    assert "host_note" not in migrate({"recommendation": {"reasoning": "On a CPU, 1 h."}})["recommendation"]
    assert old["recommendation"] == {"reasoning": reasoning}  # the input is left as it was


def test_migrate_drops_undated_card_prices_and_takes_the_cheapest_from_the_cost_table() -> None:
    stored = load(STORED_S10_REPORT)
    assert stored["report_schema_version"] < 3
    assert stored["recommendation"]["cost_analysis"]["cheapest_card"] == "t4"  # an undated catalog price
    assert "hourly_price_usd" in stored["recommendation"]["projection"][0]
    recommendation = RunReport.from_dict(stored).recommendation
    cheapest = cheapest_rental(recommendation.cost_table)
    cost = recommendation.cost_analysis
    assert (cost.cheapest_card, cost.cheapest_provider, cost.cheapest_spot) == ("rtx_a6000", "verda", True)
    assert cost.cheapest_label == cheapest.label and cost.cheapest_card_cost_usd_per_training == cheapest.usd
    assert cost.cheapest_price_date == cheapest.price_date and cost.cheapest_card_training_hours == cheapest.hours
    assert "hourly_price_usd" not in recommendation.to_dict()["projection"][0]


def test_the_seed_keys_come_first_in_a_model_section() -> None:
    section = RunReport.from_dict(load(CPU_REPORT)).models["dqn"].to_dict()
    assert list(section)[:13] == [
        "status",
        "error",
        "mean_epoch_time_ms",
        "confidence_interval_ms",
        "p95_latency_ms",
        "p99_latency_ms",
        "coefficient_of_variation",
        "memory_usage_mb",
        "batch_size",
        "gradient_accumulation_steps",
        "stability",
        "loss_trend",
        "raw_epoch_times_ms",
    ]


def test_an_older_gpu_report_loads_with_its_typed_sections() -> None:
    report = RunReport.from_dict(load(H200_REPORT))
    tft = report.models["tft"]
    assert tft.batch_search is not None and tft.batch_search.batch_size == 192
    assert tft.batch_search.trials[0].size == 32
    assert tft.memory is not None and tft.memory.leak is not None and not tft.memory.leak.flagged
    assert report.hardware.warmup_stats is not None and report.hardware.warmup_stats.stabilised
    assert report.hardware.card_memory_mb == 4096.0


def test_derived_figures_are_computed_from_the_fields() -> None:
    written = load(CPU_REPORT)
    dqn = RunReport.from_dict(written).models["dqn"]
    assert dqn.statistics is not None
    # samples/s = steps per epoch x samples per step / mean epoch time, and the interval ends swap through 1/t.
    samples_per_epoch = written["models"]["dqn"]["steps_per_epoch"] * written["models"]["dqn"]["samples_per_step"]
    throughput = dqn.samples_per_second
    assert throughput is not None
    assert throughput.mean == pytest.approx(samples_per_epoch / (dqn.statistics.mean_ms / 1e3), rel=1e-12)
    low_ms, high_ms = dqn.statistics.confidence_interval_ms
    assert throughput.confidence_interval[0] == pytest.approx(samples_per_epoch / (high_ms / 1e3), rel=1e-12)
    assert throughput.confidence_interval[1] == pytest.approx(samples_per_epoch / (low_ms / 1e3), rel=1e-12)
    recommendation = RunReport.from_dict(written).recommendation
    assert recommendation is not None
    assert recommendation.estimated_full_training_days == pytest.approx(
        written["recommendation"]["estimated_full_training_hours"] / 24.0, rel=1e-12
    )


def test_a_throughput_end_is_unbounded_where_the_time_interval_reaches_zero() -> None:
    written = load(CPU_REPORT)["models"]["ppo"]
    assert written["statistics"]["decision_interval_ms"][0] == 0.0  # the quick run's ppo interval is cut at zero
    throughput = ModelResult.from_dict(written).samples_per_second
    assert throughput is not None and throughput.decision_interval[1] is None


def test_an_unknown_key_is_refused_by_name() -> None:
    written = load(CPU_REPORT)
    written["models"]["dqn"]["mean_epoch_time"] = 1.0  # a renamed field
    with pytest.raises(ReportFormatError, match=r"report\.models\.dqn.*mean_epoch_time"):
        RunReport.from_dict(written)


def test_a_missing_required_key_is_refused_by_name() -> None:
    written = load(CPU_REPORT)["recommendation"]
    del written["reasoning"]
    with pytest.raises(ReportFormatError, match="reasoning"):
        Recommendation.from_dict(written)


def test_a_newer_schema_is_refused_with_the_version() -> None:
    written = load(CPU_REPORT)
    written["report_schema_version"] = 99
    with pytest.raises(ReportFormatError, match="99"):
        RunReport.from_dict(written)


def test_a_model_without_an_estimate_is_written_as_its_reason() -> None:
    written = {"status": "oom", "estimated": False, "reason": "status oom: not even batch 32 fits"}
    recommendation = migrate(load(CPU_REPORT))["recommendation"]
    recommendation["per_model"]["tft"] = written
    assert Recommendation.from_dict(recommendation).to_dict()["per_model"]["tft"] == written
