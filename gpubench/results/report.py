"""The whole report (``report.json``): the run, the hardware, every model and the recommendation."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Literal

from gpubench import __version__
from gpubench.results.codec import OMIT_EMPTY, Record, ReportFormatError
from gpubench.results.cost import CostRow, cheapest_rental
from gpubench.results.model import ModelResult
from gpubench.results.recommendation import Recommendation
from gpubench.results.run import DataProvenance, HardwareReport, RunInfo
from gpubench.results.what_if import WhatIf

#: Version of the report schema; bump it with a step in :func:`migrate` when a key is added or changes meaning.
REPORT_SCHEMA_VERSION = 3
#: How version 1's reasoning starts its sentence about the host.
_HOST_SENTENCE_START = "The host's speed moved during the run"


def migrate(data: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` (a report dict of any schema version) upgraded to :data:`REPORT_SCHEMA_VERSION`. 1 -> 2: a key for the
    reasoning's host sentence (``host_note``); 2 -> 3: prices only from the dated snapshot (``_dated_prices_only``)."""
    upgraded = dict(data)
    version = upgraded.get("report_schema_version") or 1
    if version < 2 and isinstance(upgraded.get("recommendation"), Mapping):
        recommendation = dict(upgraded["recommendation"])
        reasoning = recommendation.get("reasoning") or ""
        start = reasoning.find(_HOST_SENTENCE_START)
        if start >= 0 and "host_note" not in recommendation:
            recommendation["host_note"] = reasoning[start:]
        upgraded["recommendation"] = recommendation
    if version < 3 and isinstance(upgraded.get("recommendation"), Mapping):
        upgraded["recommendation"] = _dated_prices_only(upgraded["recommendation"])
    upgraded["report_schema_version"] = REPORT_SCHEMA_VERSION
    return upgraded


def _dated_prices_only(recommendation: Mapping[str, Any]) -> dict[str, Any]:
    """A version-2 recommendation without undated card prices, its ``cheapest_*`` taken from its cost table."""
    upgraded = dict(recommendation)
    undated = ("hourly_price_usd", "cost_usd_per_training")
    upgraded["projection"] = [
        {key: value for key, value in row.items() if key not in undated} for row in upgraded.get("projection") or []
    ]
    if isinstance(upgraded.get("cost_analysis"), Mapping):
        rows = [CostRow.from_dict(row, where="cost_table") for row in upgraded.get("cost_table") or []]
        cheapest = cheapest_rental(rows)
        cost = dict(upgraded["cost_analysis"])
        cost.update(
            cheapest_card=None if cheapest is None else cheapest.gpu,
            cheapest_card_training_hours=None if cheapest is None else cheapest.hours,
            cheapest_card_cost_usd_per_training=None if cheapest is None else cheapest.usd,
            cheapest_provider=None if cheapest is None else cheapest.provider,
            cheapest_spot=None if cheapest is None else cheapest.spot,
            cheapest_price_date=None if cheapest is None else cheapest.price_date,
        )
        upgraded["cost_analysis"] = cost
    return upgraded


#: ``failed``: an error ended the run after it started (``RunReport.error`` says which).
RunStatus = Literal["running", "complete", "interrupted", "failed"]


@dataclass(frozen=True)
class RunReport(Record):
    """The whole report: when, which gpubench, the run, the hardware, the data, every model measured so far (in
    order), the recommendation once all have run, and per model the what-ifs measured after it."""

    timestamp: str
    benchmark_version: str
    report_schema_version: int
    status: RunStatus
    run: RunInfo
    hardware: HardwareReport
    data: DataProvenance | None
    models: dict[str, ModelResult] = field(default_factory=dict)
    recommendation: Recommendation | None = None
    what_ifs: dict[str, list[WhatIf]] = field(default_factory=dict, metadata=OMIT_EMPTY)
    error: str | None = field(default=None, metadata=OMIT_EMPTY)

    @classmethod
    def start(cls, run: RunInfo, hardware: HardwareReport, data: DataProvenance | None) -> RunReport:
        """The report before any model has run (timestamped now, UTC)."""
        return cls(
            timestamp=datetime.now(timezone.utc).isoformat(timespec="seconds"),
            benchmark_version=__version__,
            report_schema_version=REPORT_SCHEMA_VERSION,
            status="running",
            run=run,
            hardware=hardware,
            data=data,
        )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, where: str | None = None) -> RunReport:
        version = data.get("report_schema_version")
        if version is not None and version > REPORT_SCHEMA_VERSION:
            raise ReportFormatError(
                f"report schema version {version} is newer than this gpubench reads ({REPORT_SCHEMA_VERSION}): "
                "upgrade gpubench to read it"
            )
        return super().from_dict(migrate(data), where=where or "report")
