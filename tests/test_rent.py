"""The cost table (gpubench/decision/rent.py) and the spot arithmetic (gpubench/decision/spot.py): known answers
worked by hand, the spot refusal without checkpoints, the stale snapshot named on every row under a fake clock."""

import math
from dataclasses import replace
from datetime import date
from pathlib import Path

import pytest
from report_factory import projection_row

from gpubench.decision.config import DecisionConfig, TrainingPlanConfig
from gpubench.decision.rent import SPOT_SIMULATIONS, cost_table, spot_hours, spot_plan
from gpubench.decision.spot import daly_interval_hours, expected_wall_hours, young_interval_hours
from gpubench.decision.spot_simulation import ExponentialLifetimes, spot_billed_hours
from gpubench.prices import PriceOffer, PriceSnapshot, ProviderManifest
from gpubench.results import ALL_GPUS_PAID, ModelEstimate, cheapest_rental

SNAPSHOT_DAY = date(2026, 12, 2)


def estimate(checkpoint_seconds: float | None, checkpoints: int, one_off_seconds: float) -> ModelEstimate:
    return ModelEstimate(
        status="ok",
        estimated=True,
        decided_on=True,
        model="tft",
        one_off_seconds=one_off_seconds,
        checkpoints=checkpoints,
        checkpoint_seconds=checkpoint_seconds,
    )


def offer(provider: str, gpu: str, memory_gb: float, price: float, *, spot: bool, gpus: int = 1) -> PriceOffer:
    return PriceOffer(
        provider=provider,
        instance_name=f"{gpus}x {gpu}",
        location="here",
        price_usd_per_hour=price,
        gpu_name=gpu,
        gpu_memory_gb=memory_gb,
        gpu_count=gpus,
        spot=spot,
        price_date=date(2026, 10, 29),
        source="https://example.org/prices",
    )


def snapshot(*offers: PriceOffer, spot_note: str = "spot priced") -> PriceSnapshot:
    providers = {
        o.provider: ProviderManifest(o.provider, "v1", "test", f"{o.provider}.csv", "", spot_note) for o in offers
    }
    return PriceSnapshot(SNAPSHOT_DAY, Path("."), providers, tuple(offers))


def test_young_and_daly_intervals_match_their_formulas_worked_by_hand() -> None:
    # δ = 0.01 h (36 s), M = 10 h: Young sqrt(2 δ M) = sqrt(0.2) = 0.447214 h; Daly multiplies by
    # 1 + sqrt(0.0005)/3 + 0.0005/9 = 1.0075091 and subtracts δ: 0.447214 x 1.0075091 - 0.01 = 0.440572 h.
    assert young_interval_hours(0.01, 10.0) == pytest.approx(0.447214, abs=1e-6)
    assert daly_interval_hours(0.01, 10.0) == pytest.approx(0.440572, abs=1e-6)
    # A checkpoint costlier than two MTBFs: one per expected interruption.
    assert daly_interval_hours(25.0, 10.0) == 10.0


def test_expected_wall_time_tends_to_work_plus_checkpoints_when_interruptions_vanish() -> None:
    # M -> infinity: M (e^((τ+δ)/M) - 1) -> τ + δ, so T -> work x (τ + δ) / τ (each segment pays its checkpoint).
    wall = expected_wall_hours(10.0, 0.5, 0.01, 0.05, 1e9)
    assert wall == pytest.approx(10.0 * 0.51 / 0.5, rel=1e-6)
    # Without checkpoints (τ = work, δ = 0) and no restart cost: T = M (e^(work/M) - 1), the classic result.
    assert expected_wall_hours(1.5, 1.5, 0.0, 0.0, 10.0) == pytest.approx(10.0 * math.expm1(0.15))


def test_a_spot_row_at_a_set_rate_reproduces_the_hand_worked_daly_time_within_its_simulation_error() -> None:
    # The training: 10 h on an L40S (bounds 8 and 12.5 h) whose plan holds 2 checkpoints of 36 s (0.02 h) and
    # one-off costs of 180 s (R = 0.05 h). Spot at $0.80/h, λ = 0.1/h (M = 10 h).
    # Work = 10 - 0.02 = 9.98 h; Daly's τ = 0.440572 h (previous test); segments = 9.98 / 0.440572 = 22.6524;
    # each costs M e^(R/M) (e^((τ+δ)/M) - 1) = 10 x 1.005013 x (e^0.0450572 - 1) = 10 x 1.005013 x 0.0460877
    # = 0.463187 h; T = 22.6524 x 0.463187 = 10.4923 h; USD = 10.4923 x 0.80 = $8.39.
    # Bounds: work 7.98 h -> $6.71, work 12.48 h -> $10.50. The row simulates 5,000 trainings on exponential
    # lifetimes of mean M: its mean's standard error is under 0.1% of the hours.
    decision = DecisionConfig(spot_interruptions_per_hour=0.1)
    rows, notes = cost_table(
        [projection_row("l40s", 10.0, lower=8.0, upper=12.5, fits=True)],
        {"tft": estimate(36.0, 2, 180.0)},
        snapshot(offer("verda", "L40S", 48, 0.80, spot=True)),
        decision,
        SNAPSHOT_DAY,
    )
    (row,) = rows
    assert row.spot and row.gpu == "l40s" and row.provider == "verda"
    assert row.checkpoint_interval_hours == pytest.approx(0.440572, abs=1e-6)
    assert row.hours == pytest.approx(10.4923, rel=3e-3)
    assert row.usd == pytest.approx(8.39, abs=0.03)
    assert (row.usd_lower, row.usd_upper) == (pytest.approx(6.71, abs=0.03), pytest.approx(10.50, abs=0.04))
    assert row.expected_interruptions == pytest.approx(1.04923, rel=0.05)
    assert row.hours_median <= row.hours_p90
    assert row.interruption_source.startswith("decision.spot_interruptions_per_hour = 0.1")
    assert row.price_date == "2026-10-29" and row.note is None and notes == []


def test_by_default_a_spot_row_takes_the_shipped_preemption_traces_lifetimes() -> None:
    rows, _ = cost_table(
        [projection_row("l40s", 10.0, lower=8.0, upper=12.5, fits=True)],
        {"tft": estimate(36.0, 2, 180.0)},
        snapshot(offer("verda", "L40S", 48, 0.80, spot=True)),
        DecisionConfig(),
        SNAPSHOT_DAY,
    )
    (row,) = rows
    assert "Can't Be Late" in row.interruption_source and "aws-p3.2xlarge" in row.interruption_source
    assert row.interruptions_per_hour == pytest.approx(0.46849)
    # Interruptions cost time: billed hours exceed the work, and the spread's 90th percentile is above the median.
    assert 10.0 < row.hours_median < row.hours_p90
    assert row.usd == pytest.approx(row.hours * 0.80)


def test_an_on_demand_row_is_hours_times_the_instance_price_and_says_when_gpus_sit_idle() -> None:
    rows, _ = cost_table(
        [projection_row("a100_80gb", 3.0, lower=2.4, upper=4.0, fits=True)],
        {"tft": estimate(None, 0, 10.0)},
        snapshot(offer("aws", "A100", 80, 27.44705, spot=False, gpus=8), offer("runpod", "A100", 80, 1.39, spot=False)),
        DecisionConfig(),
        SNAPSHOT_DAY,
    )
    assert [(r.provider, round(r.usd, 2)) for r in rows] == [("runpod", 4.17), ("aws", 82.34)]
    assert (round(rows[0].usd_lower, 2), round(rows[0].usd_upper, 2)) == (3.34, 5.56)
    assert "the instance has 8 GPUs, the training uses 1: all are paid" in rows[1].note


def test_a_long_training_without_checkpoints_gets_no_spot_row_and_the_notes_say_why() -> None:
    decision = DecisionConfig(spot_max_hours_without_checkpoints=2.0, spot_interruptions_per_hour=0.1)
    offers = (offer("gcp", "H100", 80, 6.571, spot=True), offer("gcp", "H100", 80, 10.9791, spot=False))
    long_rows, long_notes = cost_table(
        [projection_row("h100", 2.0, lower=1.5, upper=3.0, fits=True)],
        {"tft": estimate(None, 0, 60.0)},
        snapshot(*offers),
        decision,
        SNAPSHOT_DAY,
    )
    assert [r.spot for r in long_rows] == [False]
    assert any("no spot rows for h100 at gcp" in note and "no checkpoints" in note for note in long_notes)
    # Under the limit the spot row is there, priced as a restart from the start: T = M e^(R/M) (e^(work/M) - 1),
    # within the simulation's error.
    short_rows, _ = cost_table(
        [projection_row("h100", 1.5, lower=1.0, upper=1.9, fits=True)],
        {"tft": estimate(None, 0, 0.0)},
        snapshot(*offers),
        decision,
        SNAPSHOT_DAY,
    )
    spot = next(r for r in short_rows if r.spot)
    error = spot_billed_hours(1.5, None, 0.0, ExponentialLifetimes(10.0), simulations=SPOT_SIMULATIONS)
    assert abs(spot.hours - 10.0 * math.expm1(0.15)) < 3 * error.standard_error_hours
    assert spot.checkpoint_interval_hours is None and "no checkpoints in the plan" in spot.note
    # Checkpoints switched off in the plan count as none, even with a measured save.
    off = DecisionConfig(plan=TrainingPlanConfig(checkpoint_every_steps=None))
    assert spot_plan([estimate(36.0, 0, 1.0)], off.plan.checkpoint_every_steps is not None).checkpoint_seconds is None


def test_a_snapshot_older_than_90_days_is_named_on_every_row_under_a_fake_clock() -> None:
    table = ([projection_row("l40s", 1.0, lower=0.9, upper=1.1, fits=True)], {"tft": estimate(36.0, 0, 1.0)})
    offers = snapshot(offer("runpod", "L40S", 48, 0.79, spot=False), offer("verda", "L40S", 48, 0.941, spot=True))
    fresh, fresh_notes = cost_table(*table, offers, DecisionConfig(), date(2027, 3, 2))  # 90 days: not stale
    stale, stale_notes = cost_table(*table, offers, DecisionConfig(), date(2027, 3, 3))  # 91 days
    assert all(row.note is None for row in fresh) and not fresh_notes
    assert len(stale) == 2
    for row in stale:
        assert "price snapshot of 2026-12-02 is 91 days old" in row.note
    assert stale_notes[0].startswith("price snapshot of 2026-12-02 is 91 days old")


def test_rows_sort_by_expected_cost_with_unpriced_cards_noted() -> None:
    rows, notes = cost_table(
        [
            projection_row("h100", 1.0, lower=0.9, upper=1.2, fits=True),
            projection_row("l40s", 2.0, lower=1.8, upper=2.4, fits=True),
            projection_row("t4", 5, lower=4, upper=6, fits=True),
        ],
        {"tft": estimate(36.0, 0, 1.0)},
        snapshot(offer("runpod", "H100", 80, 2.69, spot=False), offer("runpod", "L40S", 48, 0.79, spot=False)),
        DecisionConfig(),
        SNAPSHOT_DAY,
    )
    assert [(r.gpu, round(r.usd, 2)) for r in rows] == [("l40s", 1.58), ("h100", 2.69)]
    assert any(note.startswith("no dated price in the snapshot for t4") for note in notes)


def test_a_bigger_instance_is_offered_for_one_gpu_only_with_all_its_gpus_paid() -> None:
    rows, _ = cost_table(
        [projection_row("h100", 1.0, lower=0.9, upper=1.2, fits=True)],
        {"tft": estimate(36.0, 0, 1.0)},
        snapshot(offer("aws", "H100", 80, 16.0, spot=False, gpus=8)),
        DecisionConfig(),
        SNAPSHOT_DAY,
    )
    (row,) = rows
    # The whole 8-GPU instance's hour is paid for the one card's hour, and the row says so.
    assert (row.gpu_count, row.gpus_used, row.usd) == (8, 1, pytest.approx(16.0))
    assert row.note == f"the instance has 8 GPUs, the training uses 1: {ALL_GPUS_PAID}"
    assert cheapest_rental(rows) == row
    # A price of one GPU of a bigger instance, not labelled as the whole instance's, is never offered.
    assert cheapest_rental([replace(row, note=None, usd=2.0)]) is None


def test_offers_match_cards_through_the_card_files_memory() -> None:
    # An H100 NVL (94 GB) or an H100 without a stated memory is no h100 of 80 GB: no row.
    rows, notes = cost_table(
        [projection_row("h100", 1.0, lower=0.9, upper=1.2, fits=True)],
        {"tft": estimate(36.0, 0, 1.0)},
        snapshot(offer("azure", "H100", 94, 7.0, spot=False)),
        DecisionConfig(),
        SNAPSHOT_DAY,
    )
    assert rows == [] and any(note.startswith("no dated price in the snapshot for h100") for note in notes)


def test_spot_hours_of_an_empty_training_are_zero() -> None:
    assert spot_hours(0.0, spot_plan([estimate(36.0, 0, 1.0)], True), ExponentialLifetimes(10.0)).mean_hours == 0.0


def test_the_terminal_shows_the_cheapest_rows_that_fit_and_names_a_stale_snapshot() -> None:
    import json

    from gpubench.decision.recommendation import build_recommendation
    from gpubench.hardware.catalog import load_catalog
    from gpubench.output.console import RENT_ROWS_SHOWN, rent_lines
    from gpubench.results import RunReport

    fixture = Path(__file__).parent / "fixtures" / "report_main_2026-11-29_h200_rtx3050ti.json"
    stored = RunReport.from_dict(json.loads(fixture.read_text()))
    rec = build_recommendation(stored, DecisionConfig(), load_catalog(), today=date(2027, 6, 1))
    lines = rent_lines(rec)
    fitting = [row for row in rec.cost_table if row.usd is not None and row.fits_in_vram is not False]
    assert lines[0] == f"Cheapest rentals that fit ({len(fitting)} of {len(rec.cost_table)} priced options):"
    first = fitting[0]
    assert lines[1].startswith(f"  {first.gpu} at {first.provider} (") and f"${first.usd:,.2f}" in lines[1]
    assert len([line for line in lines if " at " in line and "price of" in line]) == RENT_ROWS_SHOWN
    assert lines[-1] == (
        "  warning: price snapshot of 2026-12-02 is 181 days old (over 90): refresh it with "
        "`python -m gpubench.prices refresh`"
    )
    assert rec.price_snapshot.age_days == 181 and all("181 days old" in row.note for row in rec.cost_table)


def test_the_terminal_names_the_electricity_tariffs_source_and_date_beside_the_local_cost() -> None:
    import json

    from gpubench.decision.recommendation import build_recommendation
    from gpubench.hardware.catalog import load_catalog
    from gpubench.output.console import rent_lines
    from gpubench.results import RunReport

    fixture = Path(__file__).parent / "fixtures" / "report_main_2026-11-29_h200_rtx3050ti.json"
    stored = RunReport.from_dict(json.loads(fixture.read_text()))
    tariff = DecisionConfig(
        electricity_usd_per_kwh=0.25, electricity_source="my utility's bill", electricity_date="2026-11-30"
    )
    default = build_recommendation(stored, DecisionConfig(), load_catalog(), today=SNAPSHOT_DAY)
    mine = build_recommendation(stored, tariff, load_catalog(), today=SNAPSHOT_DAY)
    (default_line,) = [line for line in rent_lines(default) if line.startswith("  local (")]
    (my_line,) = [line for line in rent_lines(mine) if line.startswith("  local (")]
    default_tariff = DecisionConfig()
    assert default_line.endswith(
        f"at {default_tariff.electricity_usd_per_kwh:g} USD/kWh of {default_tariff.electricity_date} "
        f"({default_tariff.electricity_source})"
    )
    assert my_line.endswith("at 0.25 USD/kWh of 2026-11-30 (my utility's bill)")
