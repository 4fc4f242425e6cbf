"""Local-vs-cloud cost of the planned training: energy and amortisation here, rented hours there (USD, kWh, hours).
The formulas in words are :data:`COST_METHOD`."""

from dataclasses import dataclass

from gpubench.decision.config import DecisionConfig
from gpubench.decision.estimate import TimeEstimate
from gpubench.decision.methods import method_text
from gpubench.hardware.catalog import Card
from gpubench.results import CostAnalysis, CostRow, ModelResult
from gpubench.results.units import JOULES_PER_KWH, MONTHS_PER_YEAR, SECONDS_PER_HOUR

#: A training's energy basis: NVML's counter, or the card's board power over the hours (an upper bound).
ENERGY_NVML = "nvml"
ENERGY_BOARD_POWER = "board_power_w"


def training_energy_kwh(
    estimate: TimeEstimate, result: ModelResult, source_card: str | None, catalog: dict[str, Card]
) -> tuple[float | None, str | None]:
    """Energy (kWh) of one model's planned training on the measured device (catalog card ``source_card`` or None),
    and its basis; (None, None) when unknown."""
    joules_per_sample = result.energy.joules_per_sample if result.energy else None
    if joules_per_sample is not None:
        return joules_per_sample * estimate.plan_samples / JOULES_PER_KWH, ENERGY_NVML
    board_power_w = catalog[source_card].board_power_w if source_card else None
    if board_power_w:
        return board_power_w * estimate.hours * SECONDS_PER_HOUR / JOULES_PER_KWH, ENERGY_BOARD_POWER
    return None, None


@dataclass(frozen=True)
class CostInputs:
    """What the cost analysis needs of one planned training: local hours and energy, the projected hours on
    ``cloud_gpus`` cards of ``cloud_card`` with bounds, and the cost table's cheapest rows (None: no dated price)."""

    local_hours: float
    local_energy_kwh: float | None
    energy_basis: str | None
    cloud_card: str
    cloud_hours: float | None
    catalog_cards: tuple[str, ...]
    cloud_gpus: int = 1
    cloud_hours_lower: float | None = None
    cloud_hours_upper: float | None = None
    cloud_single_card_hours: float | None = None
    cloud_rental: CostRow | None = None
    cheapest: CostRow | None = None


def _times(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a * b


def cost_analysis(inputs: CostInputs, decision: DecisionConfig) -> CostAnalysis:
    """The report's cost analysis: monthly costs, speed-up, savings and break-even; unknown figures are None and
    ``notes`` says why."""
    notes: list[str] = []
    cheapest = inputs.cheapest
    trainings = decision.trainings_per_month
    amortisation_usd_per_month = (decision.local_hardware_cost_usd or 0.0) / decision.amortisation_months

    local_cost_usd = _times(inputs.local_energy_kwh, decision.electricity_usd_per_kwh)
    if local_cost_usd is None:
        notes.append(
            "local energy not measured (NVML's energy counter exists on NVIDIA GPUs only, not on the CPU): the local "
            "cost, the savings and the break-even are unknown"
        )
    local_monthly_usd = None if local_cost_usd is None else trainings * local_cost_usd + amortisation_usd_per_month
    if decision.local_hardware_cost_usd is None:
        notes.append("no hardware amortisation: set decision.local_hardware_cost_usd to include the card's price")

    rental = inputs.cloud_rental
    cloud_cost_usd = None if rental is None or inputs.cloud_hours is None else rental.usd
    if inputs.cloud_hours is None:
        notes.append(f"the training could not be projected to {inputs.cloud_card}: cloud figures unknown")
    elif cloud_cost_usd is None:
        notes.append(
            f"{inputs.cloud_card}: no dated price in the snapshot for {inputs.cloud_gpus} GPU(s) that fit: cloud cost "
            "unknown"
        )
    cloud_monthly_usd = None if cloud_cost_usd is None else trainings * cloud_cost_usd
    if inputs.cloud_gpus > 1:
        notes.append(
            f"the cloud side rents {inputs.cloud_gpus} x {inputs.cloud_card} (decision.cloud_gpus), priced as "
            "the instance that holds them for their hours; the local side is the one card measured"
        )

    speedup = inputs.local_hours / inputs.cloud_hours if inputs.cloud_hours else None
    annual_savings_usd = None
    if local_monthly_usd is not None and cloud_monthly_usd is not None:
        annual_savings_usd = MONTHS_PER_YEAR * (cloud_monthly_usd - local_monthly_usd)

    break_even_trainings = None
    if local_cost_usd is not None and cloud_cost_usd is not None:
        saving_per_training_usd = cloud_cost_usd - local_cost_usd
        if saving_per_training_usd > 0:
            break_even_trainings = amortisation_usd_per_month / saving_per_training_usd
        else:
            notes.append("a cloud training costs no more than the local energy: local never breaks even")
    if inputs.cloud_card not in inputs.catalog_cards:
        notes.append(
            f"decision.cloud_card = {inputs.cloud_card!r} is not a catalog card "
            f"(one of {', '.join(inputs.catalog_cards)})"
        )
    return CostAnalysis(
        local_gpu_monthly_cost_usd=local_monthly_usd,
        cloud_gpu_monthly_cost_usd=cloud_monthly_usd,
        cloud_speedup_factor=speedup,
        cloud_training_hours=inputs.cloud_hours,
        annual_savings_usd=annual_savings_usd,
        cheaper=None if annual_savings_usd is None else ("local" if annual_savings_usd >= 0 else "cloud"),
        trainings_per_month=trainings,
        local_training_hours=inputs.local_hours,
        local_energy_kwh_per_training=inputs.local_energy_kwh,
        energy_basis=inputs.energy_basis,
        electricity_usd_per_kwh=decision.electricity_usd_per_kwh,
        local_energy_cost_usd_per_training=local_cost_usd,
        local_hardware_cost_usd=decision.local_hardware_cost_usd,
        amortisation_months=decision.amortisation_months,
        amortisation_usd_per_month=amortisation_usd_per_month,
        cloud_card=inputs.cloud_card,
        cloud_hourly_price_usd=None if rental is None else rental.price_usd_per_hour,
        cloud_cost_usd_per_training=cloud_cost_usd,
        break_even_trainings_per_month=break_even_trainings,
        break_even_local_hours_per_month=_times(break_even_trainings, inputs.local_hours),
        cloud_gpus=inputs.cloud_gpus,
        cloud_training_hours_lower=inputs.cloud_hours_lower,
        cloud_training_hours_upper=inputs.cloud_hours_upper,
        cloud_single_card_training_hours=inputs.cloud_single_card_hours,
        cheapest_card=None if cheapest is None else cheapest.gpu,
        cheapest_card_training_hours=None if cheapest is None else cheapest.hours,
        cheapest_card_cost_usd_per_training=None if cheapest is None else cheapest.usd,
        notes=notes,
        cloud_provider=None if rental is None else rental.provider,
        cloud_spot=None if rental is None else rental.spot,
        cloud_price_date=None if rental is None else rental.price_date,
        cheapest_provider=None if cheapest is None else cheapest.provider,
        cheapest_spot=None if cheapest is None else cheapest.spot,
        cheapest_price_date=None if cheapest is None else cheapest.price_date,
    )


#: The cost formulas, in words: the report's ``recommendation.method.cost``.
COST_METHOD = method_text("cost")
