"""Cost analysis: local energy and amortisation against rented cloud hours, by hand."""

import pytest
from report_factory import cost_row, gpu_hardware, model_section, noisy_epochs_ms, report

from gpubench.decision.config import DecisionConfig
from gpubench.decision.cost import CostInputs, cost_analysis
from gpubench.decision.recommendation import build_recommendation
from gpubench.hardware.catalog import load_catalog
from gpubench.results import ModelResult

#: The cloud card's cheapest dated row: 2.5 h at $2.90 an hour.
H100_ROW = cost_row("h100", 7.25, hours=2.5, provider="lambdalabs")


def inputs(**overrides) -> CostInputs:
    values = {
        "local_hours": 10.0,
        "local_energy_kwh": 2.0,
        "energy_basis": "nvml",
        "cloud_card": "h100",
        "cloud_hours": 2.5,
        "catalog_cards": ("t4", "h100"),
        "cloud_rental": H100_ROW,
        "cheapest": H100_ROW,
    }
    return CostInputs(**{**values, **overrides})


def test_cost_arithmetic_by_hand():
    decision = DecisionConfig(
        electricity_usd_per_kwh=0.17, local_hardware_cost_usd=1800.0, amortisation_months=36, trainings_per_month=4
    )
    cost = cost_analysis(inputs(), decision)
    # Local: 2 kWh x $0.17 = $0.34 per training; 4 a month + $1800 / 36 = $50 amortisation.
    assert cost.local_energy_cost_usd_per_training == pytest.approx(0.34)
    assert cost.amortisation_usd_per_month == pytest.approx(50.0)
    assert cost.local_gpu_monthly_cost_usd == pytest.approx(4 * 0.34 + 50.0)
    # Cloud: the dated row's 2.5 h x $2.90 = $7.25 per training, 4 a month.
    assert cost.cloud_cost_usd_per_training == pytest.approx(7.25)
    assert cost.cloud_hourly_price_usd == pytest.approx(2.9) and cost.cloud_provider == "lambdalabs"
    assert cost.cloud_price_date == "2026-10-29" and cost.cheapest_label == "h100 at lambdalabs (on-demand)"
    assert cost.cloud_gpu_monthly_cost_usd == pytest.approx(29.0)
    assert cost.cloud_speedup_factor == pytest.approx(4.0)
    assert cost.cloud_training_hours == 2.5
    assert cost.annual_savings_usd == pytest.approx(12 * (29.0 - 51.36))
    assert cost.cheaper == "cloud"
    # Local pays off from 50 / (7.25 - 0.34) trainings a month on, i.e. that many times 10 local hours.
    assert cost.break_even_trainings_per_month == pytest.approx(50.0 / 6.91)
    assert cost.break_even_local_hours_per_month == pytest.approx(500.0 / 6.91)


def test_without_amortisation_local_is_cheaper_from_the_first_training():
    cost = cost_analysis(inputs(), DecisionConfig(critical_models=["dqn", "ppo"], electricity_usd_per_kwh=0.17))
    assert cost.annual_savings_usd == pytest.approx(12 * 4 * (7.25 - 0.34))
    assert cost.cheaper == "local"
    assert cost.break_even_trainings_per_month == 0.0
    assert any("decision.local_hardware_cost_usd" in note for note in cost.notes)


def test_cloud_cheaper_than_local_energy_never_breaks_even():
    cost = cost_analysis(
        inputs(cloud_hours=0.01, cloud_rental=cost_row("h100", 0.01, hours=0.01)),
        DecisionConfig(critical_models=["dqn", "ppo"]),
    )
    assert cost.break_even_trainings_per_month is None
    assert any("local never breaks even" in note for note in cost.notes)


def test_unmeasured_energy_leaves_local_cost_unknown():
    cost = cost_analysis(
        inputs(local_energy_kwh=None, energy_basis=None), DecisionConfig(critical_models=["dqn", "ppo"])
    )
    assert cost.local_gpu_monthly_cost_usd is None
    assert cost.annual_savings_usd is None
    assert cost.cloud_gpu_monthly_cost_usd == pytest.approx(29.0)  # the cloud side is still known
    assert any("not measured" in note for note in cost.notes)


def test_a_cloud_card_without_a_dated_price_has_no_cloud_cost():
    cost = cost_analysis(inputs(cloud_rental=None), DecisionConfig(critical_models=["dqn", "ppo"]))
    assert cost.cloud_cost_usd_per_training is None and cost.cloud_hourly_price_usd is None
    assert cost.cloud_gpu_monthly_cost_usd is None and cost.annual_savings_usd is None
    assert any("h100: no dated price in the snapshot" in note for note in cost.notes)
    # The cheapest row is still the table's.
    assert cost.cheapest_card == "h100" and cost.cheapest_card_cost_usd_per_training == pytest.approx(7.25)


def _rl_section(**kwargs) -> ModelResult:
    return model_section(
        noisy_epochs_ms(1000.0), steps_per_epoch=100, samples_per_step=8, sample_unit="env_step", **kwargs
    )


def test_local_energy_from_nvml_joules_per_sample():
    models = {"dqn": _rl_section(joules_per_sample=0.9), "ppo": _rl_section(joules_per_sample=0.9)}
    cost = build_recommendation(
        report(models), DecisionConfig(critical_models=["dqn", "ppo"], electricity_usd_per_kwh=0.17), load_catalog()
    ).cost_analysis
    # 0.9 J x 10M env steps = 9 MJ = 2.5 kWh per model.
    assert cost.local_energy_kwh_per_training == pytest.approx(5.0)
    assert cost.energy_basis == "nvml"
    assert cost.local_energy_cost_usd_per_training == pytest.approx(5.0 * 0.17)


def test_local_energy_falls_back_to_board_power_on_a_catalog_card():
    hardware = gpu_hardware("Tesla T4", total_vram_mb=15360.0, achieved_tflops=6.48)
    recommendation = build_recommendation(
        report({"dqn": _rl_section(), "ppo": _rl_section()}, hardware=hardware),
        DecisionConfig(critical_models=["dqn", "ppo"]),
        load_catalog(),
    )
    cost = recommendation.cost_analysis
    # 70 W for the estimated hours.
    assert cost.local_energy_kwh_per_training == pytest.approx(0.070 * cost.local_training_hours)
    assert cost.energy_basis == "board_power_w"


def test_the_default_electricity_tariff_names_a_source_that_can_be_opened_and_its_date() -> None:
    from datetime import date

    decision = DecisionConfig()
    assert "https://" in decision.electricity_source and "EIA" in decision.electricity_source
    assert date.fromisoformat(decision.electricity_date) <= date(2026, 12, 3)
    assert f"{decision.electricity_usd_per_kwh * 100:.2f} cents/kWh" in decision.electricity_source
