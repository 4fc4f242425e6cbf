"""The cost sections (USD): the cost analysis, the per-card cost rows, the local card's cost and the price snapshot."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from gpubench.results.codec import OMIT_EMPTY, Record


@dataclass(frozen=True)
class CostAnalysis(Record):
    """Local-vs-cloud cost of the planned training (USD, h, kWh); a figure that cannot be computed is None and
    ``notes`` says why. The cloud side rents ``cloud_gpus`` × ``cloud_card`` at that card's cheapest fitting cost-table
    row (no dated price, no cloud cost); ``cheapest_*`` is the whole table's (:func:`cheapest_rental`)."""

    local_gpu_monthly_cost_usd: float | None
    cloud_gpu_monthly_cost_usd: float | None
    cloud_speedup_factor: float | None
    cloud_training_hours: float | None
    annual_savings_usd: float | None
    cheaper: str | None
    trainings_per_month: float
    local_training_hours: float
    local_energy_kwh_per_training: float | None
    energy_basis: str | None
    electricity_usd_per_kwh: float
    local_energy_cost_usd_per_training: float | None
    local_hardware_cost_usd: float | None
    amortisation_months: int
    amortisation_usd_per_month: float
    cloud_card: str
    cloud_hourly_price_usd: float | None
    cloud_cost_usd_per_training: float | None
    break_even_trainings_per_month: float | None
    break_even_local_hours_per_month: float | None
    notes: list[str] = field(default_factory=list)
    cloud_gpus: int | None = field(default=None, metadata=OMIT_EMPTY)
    cloud_training_hours_lower: float | None = field(default=None, metadata=OMIT_EMPTY)
    cloud_training_hours_upper: float | None = field(default=None, metadata=OMIT_EMPTY)
    cloud_single_card_training_hours: float | None = field(default=None, metadata=OMIT_EMPTY)
    cheapest_card: str | None = field(default=None, metadata=OMIT_EMPTY)
    cheapest_card_training_hours: float | None = field(default=None, metadata=OMIT_EMPTY)
    cheapest_card_cost_usd_per_training: float | None = field(default=None, metadata=OMIT_EMPTY)
    cloud_provider: str | None = field(default=None, metadata=OMIT_EMPTY)
    cloud_spot: bool | None = field(default=None, metadata=OMIT_EMPTY)
    cloud_price_date: str | None = field(default=None, metadata=OMIT_EMPTY)
    cheapest_provider: str | None = field(default=None, metadata=OMIT_EMPTY)
    cheapest_spot: bool | None = field(default=None, metadata=OMIT_EMPTY)
    cheapest_price_date: str | None = field(default=None, metadata=OMIT_EMPTY)

    @property
    def cloud_card_count(self) -> int:
        return self.cloud_gpus or 1

    @property
    def cheapest_label(self) -> str | None:
        """The cheapest row as one phrase, ``l40s at runpod (on-demand)``; None without one."""
        if self.cheapest_card is None or self.cheapest_provider is None:
            return None
        return f"{self.cheapest_card} at {self.cheapest_provider} ({'spot' if self.cheapest_spot else 'on-demand'})"


@dataclass(frozen=True)
class CostRow(Record):
    """One rentable option: the decided models' training on ``gpu`` at ``provider`` (spot or on-demand) on that
    kind's cheapest dated instance, paid whole (``note`` says so when it holds more GPUs than ``gpus_used``);
    ``hours``: expected wall time with spot interruptions (:mod:`gpubench.decision.spot`); ``usd`` = hours × price."""

    gpu: str
    provider: str
    spot: bool
    gpu_count: int
    gpus_used: int
    fits_in_vram: bool | None
    hours: float | None
    hours_lower: float | None
    hours_upper: float | None
    usd: float | None
    usd_lower: float | None
    usd_upper: float | None
    price_date: str
    price_usd_per_hour: float
    price_source: str
    instance: str
    location: str
    training_hours: float | None = None
    interruptions_per_hour: float | None = field(default=None, metadata=OMIT_EMPTY)
    interruption_source: str | None = field(default=None, metadata=OMIT_EMPTY)
    checkpoint_interval_hours: float | None = field(default=None, metadata=OMIT_EMPTY)
    checkpoint_seconds: float | None = field(default=None, metadata=OMIT_EMPTY)
    restart_seconds: float | None = field(default=None, metadata=OMIT_EMPTY)
    expected_interruptions: float | None = field(default=None, metadata=OMIT_EMPTY)
    hours_median: float | None = field(default=None, metadata=OMIT_EMPTY)
    hours_p90: float | None = field(default=None, metadata=OMIT_EMPTY)
    basis: str | None = field(default=None, metadata=OMIT_EMPTY)
    note: str | None = field(default=None, metadata=OMIT_EMPTY)
    fits_at_batch: dict[str, int] = field(default_factory=dict, metadata=OMIT_EMPTY)

    @property
    def label(self) -> str:
        """The row as one phrase: ``l40s at runpod (on-demand)``."""
        return f"{self.gpu} at {self.provider} ({'spot' if self.spot else 'on-demand'})"

    @property
    def pays_every_gpu(self) -> bool:
        """The row's USD covers the whole instance: it uses every GPU, or its ``note`` says all are paid."""
        return self.gpu_count <= self.gpus_used or ALL_GPUS_PAID in (self.note or "")


#: What a cost row's note says when its instance has more GPUs than the training uses.
ALL_GPUS_PAID = "all are paid"


def fitting_rentals(rows: Sequence[CostRow], card: str | None = None) -> list[CostRow]:
    """The rows (of ``card`` when given) that are priced, fit the VRAM (``fits_in_vram`` not false) and pay for their
    whole instance (a price of some GPUs of a bigger instance is never offered), cheapest expected USD first."""
    fitting = [
        row
        for row in rows
        if row.usd is not None and row.fits_in_vram is not False and row.pays_every_gpu and card in (None, row.gpu)
    ]
    return sorted(fitting, key=lambda row: (row.usd, row.gpu, row.provider, row.spot))


def cheapest_rental(rows: Sequence[CostRow], card: str | None = None) -> CostRow | None:
    """The cheapest row of :func:`fitting_rentals`, the one every output names as the cheapest; None without one."""
    fitting = fitting_rentals(rows, card)
    return fitting[0] if fitting else None


@dataclass(frozen=True)
class LocalCost(Record):
    """The local option beside the cost table: the training on ``device`` (h), its energy (kWh; ``energy_basis``:
    nvml or board_power_w) and that energy's cost (USD) at the dated tariff; amortisation is in ``cost_analysis``."""

    device: str
    hours: float
    hours_lower: float | None
    hours_upper: float | None
    energy_kwh: float | None
    energy_basis: str | None
    electricity_usd_per_kwh: float
    electricity_source: str
    electricity_date: str | None
    usd: float | None


@dataclass(frozen=True)
class PriceSnapshotInfo(Record):
    """The price snapshot used: date, age (days) at the report, catalog versions, ``stale`` (a warning or None)."""

    snapshot_date: str
    age_days: int
    versions: dict[str, str]
    folder: str
    stale: str | None = None
