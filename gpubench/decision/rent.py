"""The cost table: each catalog card's projected training priced at every provider of the dated snapshot
(:mod:`gpubench.prices`) selling it, on-demand and spot, on the cheapest instance with at least
``decision.cloud_gpus`` GPUs (the whole instance paid), with bounds and the price's date; and the local option.
Spot hours are simulated (:mod:`gpubench.decision.spot_simulation`): the shipped trace's lifetimes, a checkpoint every
Daly interval, restarts at the measured one-off costs. Money in USD, times in hours."""

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import date
from typing import Any

from gpubench.decision.config import DecisionConfig
from gpubench.decision.spot_simulation import (
    ExponentialLifetimes,
    LifetimeDistribution,
    SpotBilledHours,
    load_spot_lifetimes,
    spot_billed_hours,
)
from gpubench.hardware.catalog import Card, gpu_cards
from gpubench.prices import PriceOffer, PriceSnapshot, card_for
from gpubench.results import (
    ALL_GPUS_PAID,
    CardProjection,
    CostRow,
    LocalCost,
    ModelEstimate,
    PriceSnapshotInfo,
    Recommendation,
)
from gpubench.results.units import SECONDS_PER_HOUR


@dataclass(frozen=True)
class SpotPlan:
    """What a spot training needs of the plan (s): the checkpoint cost (None: no checkpoints), the restart cost and
    the plan's own checkpoint time, which spot replaces."""

    checkpoint_seconds: float | None
    restart_seconds: float
    plan_checkpoint_seconds: float


def spot_plan(decided: Sequence[ModelEstimate], checkpoints_enabled: bool) -> SpotPlan:
    """The spot inputs of the ``decided`` models in sequence: the largest checkpoint and one-off costs (an
    interruption strikes during one model; the costliest bounds it) and their planned checkpoints' time."""
    costs = [estimate.checkpoint_seconds for estimate in decided]
    has_checkpoints = checkpoints_enabled and bool(costs) and None not in costs
    return SpotPlan(
        checkpoint_seconds=max(c for c in costs if c is not None) if has_checkpoints else None,
        restart_seconds=max((estimate.one_off_seconds or 0.0 for estimate in decided), default=0.0),
        plan_checkpoint_seconds=sum(
            (estimate.checkpoints or 0) * (estimate.checkpoint_seconds or 0.0) for estimate in decided
        ),
    )


#: Simulated trainings per spot figure: the mean's Monte Carlo error stays well under 1% of the hours.
SPOT_SIMULATIONS = 5_000


@functools.lru_cache(maxsize=256)
def _billed(work: float, checkpoint: float | None, restart: float, lifetimes: LifetimeDistribution) -> SpotBilledHours:
    return spot_billed_hours(work, checkpoint, restart, lifetimes, simulations=SPOT_SIMULATIONS)


def spot_hours(training_hours: float, plan: SpotPlan, lifetimes: LifetimeDistribution) -> SpotBilledHours:
    """The billed spot hours of a training of ``training_hours`` on-demand: its work (less the plan's checkpoints)
    checkpointed every Daly interval, or restarted from the start without checkpoints."""
    work = max(0.0, training_hours - plan.plan_checkpoint_seconds / SECONDS_PER_HOUR)
    checkpoint = None if plan.checkpoint_seconds is None else plan.checkpoint_seconds / SECONDS_PER_HOUR
    return _billed(work, checkpoint, plan.restart_seconds / SECONDS_PER_HOUR, lifetimes)


def spot_lifetimes(decision: DecisionConfig, provider: str) -> tuple[LifetimeDistribution, float, str]:
    """``provider``'s spot lifetimes, interruption rate (per hour) and source: the user's rate, else the trace's."""
    rate, source = decision.spot_rate(provider)
    if rate is not None and source is not None:
        return ExponentialLifetimes(1.0 / rate), rate, f"{source} (your setting; lifetimes taken as exponential)"
    lifetimes = load_spot_lifetimes(decision.spot_lifetimes_family)
    return lifetimes, lifetimes.interruptions_per_hour, f"{lifetimes.family} lifetimes: {lifetimes.source}"


def cheapest_offers(
    offers: Sequence[PriceOffer], card: str, gpus: int, cards: Mapping[str, Mapping[int | None, str]] | None = None
) -> dict[tuple[str, bool], PriceOffer]:
    """Per (provider, spot), the cheapest instance of ``card`` with at least ``gpus`` GPUs (cards by
    :func:`gpubench.prices.card_for`)."""
    best: dict[tuple[str, bool], PriceOffer] = {}
    for offer in offers:
        if card_for(offer.gpu_name, offer.gpu_memory_gb, cards) != card or offer.gpu_count < gpus:
            continue
        key = (offer.provider, offer.spot)
        if key not in best or offer.price_usd_per_hour < best[key].price_usd_per_hour:
            best[key] = offer
    return best


def _times(hours: float | None, price: float) -> float | None:
    return None if hours is None else hours * price


def _cost_row(
    row: CardProjection,
    offer: PriceOffer,
    gpus: int,
    hours: Sequence[float | None],
    decided: Sequence[str],
    stale: str | None,
    restarts: str | None = None,
    **spot_fields: Any,
) -> CostRow:
    """``row``'s card at ``offer`` for ``hours`` (point, lower, upper; h) of ``gpus`` GPUs, and its notes."""
    price = offer.price_usd_per_hour
    point, lower, upper = hours
    unprojected = None if point is not None else f"no projection onto {row.card}"
    idle = f"the instance has {offer.gpu_count} GPUs, the training uses {gpus}: {ALL_GPUS_PAID}"
    fits = {name: row.models[name].fits_at_batch for name in decided if name in row.models}
    return CostRow(
        gpu=row.card,
        provider=offer.provider,
        spot=offer.spot,
        gpu_count=offer.gpu_count,
        gpus_used=gpus,
        fits_in_vram=row.fits_in_vram,
        hours=point,
        hours_lower=lower,
        hours_upper=upper,
        usd=_times(point, price),
        usd_lower=_times(lower, price),
        usd_upper=_times(upper, price),
        price_date=offer.price_date.isoformat(),
        price_usd_per_hour=price,
        price_source=offer.source,
        instance=offer.instance_name,
        location=offer.location,
        training_hours=row.training_hours,
        note="; ".join(filter(None, (stale, idle if offer.gpu_count > gpus else None, restarts, unprojected))) or None,
        fits_at_batch={name: batch for name, batch in fits.items() if batch is not None},
        **spot_fields,
    )


def _spot_row(
    row: CardProjection,
    offer: PriceOffer,
    gpus: int,
    plan: SpotPlan,
    decision: DecisionConfig,
    stale: str | None,
    decided: Sequence[str],
) -> CostRow:
    lifetimes, rate, rate_source = spot_lifetimes(decision, offer.provider)
    times = [
        None if hours is None else spot_hours(hours, plan, lifetimes)
        for hours in (row.training_hours, row.training_hours_lower, row.training_hours_upper)
    ]
    point = times[0]
    without = None if plan.checkpoint_seconds is not None else "no checkpoints in the plan: an interruption restarts"
    hours = [None if time is None else time.mean_hours for time in times]
    return _cost_row(
        row,
        offer,
        gpus,
        hours,
        decided,
        stale,
        without,
        interruptions_per_hour=rate,
        interruption_source=rate_source,
        checkpoint_interval_hours=None if point is None else point.interval_hours,
        checkpoint_seconds=plan.checkpoint_seconds,
        restart_seconds=plan.restart_seconds,
        expected_interruptions=None if point is None else point.mean_interruptions,
        hours_median=None if point is None else point.median_hours,
        hours_p90=None if point is None else point.p90_hours,
    )


def _sort_key(row: CostRow) -> tuple[bool, float, str, str, bool]:
    return (row.usd is None, row.usd or 0.0, row.gpu, row.provider, row.spot)


def cost_table(
    projection: Sequence[CardProjection],
    decided: Mapping[str, ModelEstimate],
    snapshot: PriceSnapshot,
    decision: DecisionConfig,
    today: date,
    catalog: Mapping[str, Card] | None = None,
) -> tuple[list[CostRow], list[str]]:
    """The cost table's rows (by expected cost, unpriced last) and notes on what it left out; the snapshot's age
    judged on ``today``, offers matched through ``catalog``'s ``gpuhunt_names`` (default: the shipped one)."""
    gpus = decision.cloud_gpus
    cards = None if catalog is None else gpu_cards(catalog)
    stale = snapshot.staleness(today)
    plan = spot_plan(list(decided.values()), decision.plan.checkpoint_every_steps is not None)
    rows: list[CostRow] = []
    notes: list[str] = [stale] if stale else []
    refused_spot: list[str] = []
    for row in projection:
        for (provider, spot), offer in sorted(cheapest_offers(snapshot.offers, row.card, gpus, cards).items()):
            if not spot:
                hours = (row.training_hours, row.training_hours_lower, row.training_hours_upper)
                rows.append(_cost_row(row, offer, gpus, hours, list(decided), stale))
                continue
            upper = row.training_hours_upper
            too_long = upper is not None and upper > decision.spot_max_hours_without_checkpoints
            if plan.checkpoint_seconds is None and too_long:
                refused_spot.append(f"{row.card} at {provider}")
                continue
            rows.append(_spot_row(row, offer, gpus, plan, decision, stale, list(decided)))
    if refused_spot:
        notes.append(
            f"no spot rows for {', '.join(refused_spot)}: the plan has no checkpoints (decision.plan."
            "checkpoint_every_steps is null or no checkpoint was measured) and the training's upper bound exceeds "
            f"decision.spot_max_hours_without_checkpoints = {decision.spot_max_hours_without_checkpoints:g} h, so "
            "an interruption would restart it from the start"
        )
    cards = {row.card for row in projection}
    unpriced = sorted(cards - {row.gpu for row in rows})
    if unpriced:
        notes.append(
            f"no dated price in the snapshot for {', '.join(unpriced)} (with at least {gpus} GPU(s) an instance)"
        )
    for provider in sorted(snapshot.providers):
        entry = snapshot.providers[provider]
        if "not in this snapshot" in entry.spot or "no spot" in entry.spot:
            notes.append(f"{provider} spot: {entry.spot}")
    return sorted(rows, key=_sort_key), notes


def snapshot_info(snapshot: PriceSnapshot, today: date) -> PriceSnapshotInfo:
    """The report's record of the snapshot used, its age on ``today``."""
    return PriceSnapshotInfo(
        snapshot_date=snapshot.snapshot_date.isoformat(),
        age_days=snapshot.age_days(today),
        versions={name: entry.version for name, entry in snapshot.providers.items()},
        folder=str(snapshot.folder),
        stale=snapshot.staleness(today),
    )


def local_cost(
    device: str,
    hours: tuple[float, float | None, float | None],
    energy_kwh: float | None,
    energy_basis: str | None,
    decision: DecisionConfig,
) -> LocalCost:
    """The local option: (hours, lower, upper) on ``device``, the energy (kWh) and its cost at the tariff."""
    return LocalCost(
        device=device,
        hours=hours[0],
        hours_lower=hours[1],
        hours_upper=hours[2],
        energy_kwh=energy_kwh,
        energy_basis=energy_basis,
        electricity_usd_per_kwh=decision.electricity_usd_per_kwh,
        electricity_source=decision.electricity_source,
        electricity_date=decision.electricity_date,
        usd=None if energy_kwh is None else energy_kwh * decision.electricity_usd_per_kwh,
    )


@dataclass(frozen=True)
class MeasuredReport:
    """One report ``gpubench rent`` prices: its path, catalog card (None outside the catalog), recommendation
    rebuilt with today's code and measured hours."""

    path: str
    card: str | None
    device: str
    recommendation: Recommendation
    hours: float | None


def projected_hours(recommendation: Recommendation, card: str) -> float | None:
    """The training hours ``recommendation`` projects onto ``card`` (None where it does not)."""
    return next((row.training_hours for row in recommendation.projection if row.card == card), None)


def _nearest(measured: Sequence[MeasuredReport], card: str) -> MeasuredReport | None:
    """The report whose projection onto ``card`` stretches its measured hours least (|log ratio|)."""
    scored = []
    for report in measured:
        hours = projected_hours(report.recommendation, card)
        if hours and report.hours:
            scored.append((abs(math.log(hours / report.hours)), report.path, report))
    return min(scored)[2] if scored else None


def measured_cost_table(measured: Sequence[MeasuredReport]) -> list[CostRow]:
    """One cost table from reports of the same training: a card's rows from the report measured on it, else from
    the nearest one (:func:`_nearest`); by expected cost, unpriced last."""
    by_card = {report.card: report for report in measured if report.card is not None}
    rows: list[CostRow] = []
    cards = {row.gpu for report in measured for row in report.recommendation.cost_table}
    for card in sorted(cards):
        source = by_card.get(card) or _nearest(measured, card)
        if source is None:
            continue
        basis = (
            f"measured on {source.device} ({source.path})"
            if source.card == card
            else f"projected from {source.card or source.device} ({source.path})"
        )
        rows += [replace(row, basis=basis) for row in source.recommendation.cost_table if row.gpu == card]
    return sorted(rows, key=_sort_key)
