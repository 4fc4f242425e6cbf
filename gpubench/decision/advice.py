"""The recommendation's reasoning in the sentences the user reads, and the wording the recommended actions
(:mod:`gpubench.decision.actions`) share: figures computed elsewhere, put into words (hours, MB, USD)."""

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from gpubench.decision.config import DecisionConfig
from gpubench.decision.estimate import TimeEstimate, TotalTime
from gpubench.decision.projection import CPU_REBUILD_FACTOR, HOST_RATIO_SPREAD, PROJECTION_RELATIVE_ERROR
from gpubench.decision.rule import (
    CRITICAL_MODEL_CANNOT_RUN,
    DRIFT_OR_THROTTLING,
    ESTIMATE_IN_GRAY_BAND,
    INTERVAL_STRADDLES_THRESHOLD,
    LOWER_ABOVE_CLOUD,
    MIN_DECISION_EPOCHS,
    NOTHING_MEASURED,
    PARTIAL_MEASUREMENT,
    SETTLE_MAX_EPOCHS,
    TOO_FEW_EPOCHS,
    UPPER_BELOW_LOCAL,
    Verdict,
)
from gpubench.results import (
    CLOUD_GPU_RECOMMENDED,
    GRAY_ZONE,
    LOCAL_GPU_VIABLE,
    CardProjection,
    CostRow,
    MissingModel,
    ModelResult,
    ScalingEfficiency,
    StepSplit,
)
from gpubench.results.units import BYTES_PER_MB, HOURS_PER_DAY, SECONDS_PER_HOUR


@dataclass(frozen=True)
class Outcome:
    """The decision and the figures it rests on: the ``verdict``, the ``decided`` models' estimates and ``total``
    with its interval's level, the critical models ``missing``, the device, and an emulated card's measured side."""

    verdict: Verdict
    decided: list[TimeEstimate]
    total: TotalTime | None
    level: float | None
    missing: list[MissingModel]
    device: str
    on_cpu: bool
    measured_device: str | None = None
    measured_total: TotalTime | None = None
    splits: dict[str, StepSplit] | None = None
    projection_error: float | None = None
    vram_limit_mb: float | None = None

    @property
    def emulated(self) -> bool:
        """Whether the answer is about an emulated card (``device``), projected from ``measured_device``."""
        return self.measured_total is not None

    @property
    def bound_level(self) -> float | None:
        """The one-sided level of each bound: (1 + level) / 2."""
        return None if self.level is None else (1 + self.level) / 2


def hours_text(hours: float) -> str:
    return f"{hours * 60:.1f} min" if hours < 1 else f"{hours:.1f} h"


def missing_text(missing: tuple[MissingModel, ...] | list[MissingModel]) -> str:
    return ", ".join(f"{m.model} ({m.reason})" for m in missing)


def _held_back_text(verdict: Verdict) -> str:
    """The critical models the decision lacks: not measured, or measured over too few epochs."""
    parts = []
    if verdict.missing:
        parts.append(f"critical {missing_text(verdict.missing)} not measured")
    if verdict.too_few:
        (first, first_epochs), *others = verdict.too_few.items()
        counts = "".join(f", {name} {epochs}" for name, epochs in others)
        parts.append(
            f"{first} had {first_epochs} measured epoch{'s' if first_epochs != 1 else ''}{counts}, fewer than the "
            f"{MIN_DECISION_EPOCHS} a decision needs"
        )
    return "; ".join(parts)


def _lower_bound_clause(verdict: Verdict, decision: DecisionConfig) -> str:
    """Why the measured part does not prove CLOUD: its lower bound, where there is one."""
    if verdict.total is None:
        return "."
    return (
        f"; the lower bound of {' + '.join(verdict.bound_models)}, {hours_text(verdict.total.lower_hours)}, is "
        f"not over the {decision.cloud_min_hours:g} h cloud threshold."
    )


def _decide_text(verdict: Verdict, models_run: list[str]) -> str:
    """The overrides that would let the same command decide."""
    clauses = []
    if verdict.missing:
        wanted = models_run + [m.model for m in verdict.missing if m.model not in models_run]
        clause = f"run every critical model (`model.names=[{','.join(wanted)}]`)"
        if models_run:
            clause += f" or decide on the models run (`decision.critical_models=[{','.join(models_run)}]`)"
        clauses.append(clause)
    if verdict.too_few:
        clauses.append(f"measure at least {MIN_DECISION_EPOCHS} epochs each (`epochs={MIN_DECISION_EPOCHS}`)")
    return f" To decide, {' and '.join(clauses)} on the same command." if clauses else ""


def _settle_text(verdict: Verdict) -> str:
    counts = verdict.epochs_to_settle or {}
    known = {name: epochs for name, epochs in counts.items() if epochs is not None}
    if not known:
        return (
            f" No practical number of epochs (up to {SETTLE_MAX_EPOCHS:,}) settles it: a drift's part and the "
            "future epochs' own variability do not shrink with more epochs."
        )
    most = max(known.values())
    if len(set(known.values())) == 1:
        return f" Measuring {most} epochs per critical model (epochs={most}) would settle it, if the variance holds."
    listed = ", ".join(f"{name} {epochs}" for name, epochs in known.items())
    return f" Measuring {listed} epochs (epochs={most}) would settle it, if the variance holds."


def _widened(outcome: Outcome) -> list[TimeEstimate]:
    """The estimates whose margin the rule widened for a drift or throttled epochs."""
    return [e for e in outcome.decided if e.model in outcome.verdict.widened]


def drift_hours_text(estimate: TimeEstimate) -> str:
    return hours_text(estimate.drift_margin_seconds / SECONDS_PER_HOUR)


def _drift_text(outcome: Outcome) -> str:
    """The flagged models, how much their margin grew, and what the decision would be without it."""
    verdict = outcome.verdict
    flagged = "; ".join(
        f"{e.model}: {', '.join(e.drift_flags)}, its margin widened by {drift_hours_text(e)}" for e in _widened(outcome)
    )
    without = verdict.plain_decision or "no decision"
    with_it = verdict.decision or "no decision"
    return (
        f"{flagged} (the shift between the first and the last third of its epochs, carried to the whole plan). "
        f"Without that widening the answer would be {without}; with it, {with_it}."
    )


def _verdict_text(outcome: Outcome, decision: DecisionConfig) -> str:
    """The sentence that gives the decision (or withholds it) and the rule behind it."""
    verdict, total = outcome.verdict, outcome.verdict.total
    local, cloud = decision.local_max_hours, decision.cloud_min_hours
    basis = verdict.basis
    if basis == NOTHING_MEASURED:
        return no_estimate_reasoning(outcome.missing)
    if basis == CRITICAL_MODEL_CANNOT_RUN:
        return f"Critical {missing_text(verdict.cannot_run)} cannot run on the local card: {CLOUD_GPU_RECOMMENDED}."
    if basis == DRIFT_OR_THROTTLING:
        return _drift_text(outcome)
    if basis == UPPER_BELOW_LOCAL:
        where = f" (here: training on this CPU, {outcome.device}, not on a GPU)" if outcome.on_cpu else ""
        return f"The upper bound is under the {local:g} h local limit: {LOCAL_GPU_VIABLE}{where}."
    if basis == LOWER_ABOVE_CLOUD:
        if not verdict.missing and not verdict.too_few:
            return f"The lower bound is over the {cloud:g} h cloud threshold: {CLOUD_GPU_RECOMMENDED}."
        assert total is not None  # CLOUD from a subset rests on its lower bound
        return (
            f"Not every critical model is measured ({_held_back_text(verdict)}), but times add and the lower bound "
            f"of {' + '.join(verdict.bound_models)} alone, {hours_text(total.lower_hours)}, is over the "
            f"{cloud:g} h cloud threshold: {CLOUD_GPU_RECOMMENDED}."
        )
    if basis == ESTIMATE_IN_GRAY_BAND:
        return f"The estimate lies between {local:g} h and {cloud:g} h: {GRAY_ZONE}."
    if basis == INTERVAL_STRADDLES_THRESHOLD:
        assert total is not None  # a complete measurement
        side = (
            f"under the {local:g} h local limit but its upper bound is not"
            if total.hours < local
            else f"over the {cloud:g} h cloud threshold but its lower bound is not"
        )
        return f"The estimate is {side}: {GRAY_ZONE}, uncertain." + _settle_text(verdict)
    if basis == PARTIAL_MEASUREMENT:
        return (
            f"No decision: {_held_back_text(verdict)}. A subset of the critical models only bounds the total from "
            "below, so it can show CLOUD_GPU_RECOMMENDED but not the rest"
            + _lower_bound_clause(verdict, decision)
            + _decide_text(verdict, [e.model for e in outcome.decided])
        )
    assert basis == TOO_FEW_EPOCHS
    decide = _decide_text(verdict, [e.model for e in outcome.decided])
    return f"No decision: {_held_back_text(verdict)}" + _lower_bound_clause(verdict, decision) + decide


def scaling_text(scalings: Mapping[str, ScalingEfficiency], models: list[str]) -> str:
    """The scaling efficiency of ``models`` and where it comes from, one clause for the models that share both."""
    groups: dict[tuple[str, str], list[str]] = {}
    for name in models:
        scaling = scalings[name]
        groups.setdefault((f"{scaling.scaling_efficiency:.2f}", scaling.scaling_source), []).append(name)
    if len(groups) == 1:
        ((efficiency, source),) = groups
        return f"scaling efficiency {efficiency}, {source}"
    return "scaling efficiency " + "; ".join(
        f"{' + '.join(names)} {efficiency}, {source}" for (efficiency, source), names in groups.items()
    )


def cards_text(row: CardProjection) -> str:
    """A projection row's card, with its count when it rents more than one: ``h100``, ``8 × h100``."""
    return row.card if row.card_count == 1 else f"{row.card_count} × {row.card}"


def projection_uncertainty_text(row: CardProjection) -> str:
    """What widened a projected row's bounds: the projection's error, or the CPU rebuild's factor."""
    if row.projection_relative_error is None:
        return f"the CPU rebuild's factor of {CPU_REBUILD_FACTOR:g} either way"
    return (
        f"the projection's interval (the card's part ±{PROJECTION_RELATIVE_ERROR:.1%}, the host's part "
        f"÷ or × {HOST_RATIO_SPREAD:.2g})"
    )


#: A projected step at least this share host work (launches, Python, data) moves with the rented machine's CPU.
HOST_BOUND_SHARE = 0.5


def host_bound_models(decided: Collection[str], row: CardProjection) -> dict[str, float]:
    """The ``decided`` models whose step projected on ``row`` is mostly host work, with that share (0-1)."""
    return {
        name: model.host_share
        for name, model in row.models.items()
        if name in decided and model.host_share is not None and model.host_share >= HOST_BOUND_SHARE
    }


def host_bound_text(shares: Mapping[str, float], card: str) -> str:
    """The sentence saying that a mostly-host step's time on ``card`` is the rented machine's CPU's."""
    named = ", ".join(f"{name} {share:.0%}" for name, share in shares.items())
    return (
        f"Host work (Python, kernel launches, data) is most of the step projected on {card} ({named}): there the "
        f"card barely matters and the rented machine's CPU decides, between ÷ {HOST_RATIO_SPREAD:.2g} and "
        f"× {HOST_RATIO_SPREAD:.2g} of this machine's host time."
    )


#: What a card's cost reads as where the price snapshot has no row for it that fits.
NO_DATED_PRICE = "no dated price"


def rental_text(row: CostRow | None) -> str:
    """A cost-table row's money in words (``$12.34 at runpod (on-demand, price of ...)``); :data:`NO_DATED_PRICE`
    without a row."""
    if row is None or row.usd is None:
        return NO_DATED_PRICE
    whole = f"; an instance of {row.gpu_count} GPUs, all paid" if row.gpu_count > row.gpus_used else ""
    kind = "spot" if row.spot else "on-demand"
    return f"${row.usd:,.2f} at {row.provider} ({kind}, price of {row.price_date}{whole})"


def cheapest_text(row: CostRow) -> str:
    """The cost table's cheapest row that fits, in words."""
    cards = row.gpu if row.gpus_used == 1 else f"{row.gpus_used} × {row.gpu}"
    return f"Cheapest rental that fits this plan: {cards}, {hours_text(row.hours or 0.0)} for {rental_text(row)}."


def _cloud_text(
    outcome: Outcome,
    cloud_row: CardProjection,
    scalings: Mapping[str, ScalingEfficiency] | None,
    rental: CostRow | None,
) -> str:
    """The cloud row's projected training: hours, bounds, ``rental`` and on several cards the scaling."""
    assert cloud_row.training_hours is not None
    several = cloud_row.card_count > 1
    widened = projection_uncertainty_text(cloud_row)
    if several:
        widened = (f"{widened} and " if not cloud_row.measured_device else "") + "the scaling efficiency's interval"
    interval = ""
    if (several or not cloud_row.measured_device) and cloud_row.training_hours_lower is not None:
        interval = (
            f", {hours_text(cloud_row.training_hours_lower)} to {hours_text(cloud_row.training_hours_upper)} "
            f"with {widened}"
        )
    cards = cards_text(cloud_row)
    if several and scalings:
        cards += f" ({scaling_text(scalings, [e.model for e in outcome.decided])})"
    cost = f" ({rental_text(rental)})"
    single = ""
    if several and cloud_row.single_card_training_hours is not None:
        single = f" On one {cloud_row.card}: {hours_text(cloud_row.single_card_training_hours)}."
    if several:
        single += (
            f" The decision is about the one local card: decision.cloud_gpus={cloud_row.card_count} changes only the "
            "cloud figures."
        )
    slower = "".join(
        f" {name} is projected slower there than where it was measured: {model.slower_cause}."
        for name, model in cloud_row.models.items()
        if model.slower_cause and name in {estimate.model for estimate in outcome.decided}
    )
    host_bound = host_bound_models([e.model for e in outcome.decided], cloud_row)
    host = f" {host_bound_text(host_bound, cloud_row.card)}" if host_bound else ""
    return f"Projected on {cards}: {hours_text(cloud_row.training_hours)}{interval}{cost}.{single}{slower}{host}"


def reasoning(
    outcome: Outcome,
    cloud_row: CardProjection | None,
    decision: DecisionConfig,
    scalings: Mapping[str, ScalingEfficiency] | None = None,
    rental: CostRow | None = None,
    cheapest: CostRow | None = None,
) -> str:
    """A few sentences with the numbers behind the decision, or behind there being none: a CPU run's say they are
    CPU times, an emulated card's what was measured where; then the cloud row, ``rental`` and ``cheapest``."""
    parts = []
    if outcome.emulated:
        parts.append(_emulation_text(outcome))
    if outcome.on_cpu:
        parts.append(
            f"These are CPU times, measured on the CPU ({outcome.device}) without a GPU: every figure here is about "
            "training on this CPU, not on a GPU."
        )
    total = outcome.total
    if total is not None and outcome.bound_level is not None:
        names = " + ".join(e.model for e in outcome.decided)
        lead = "Training" if outcome.on_cpu else f"On {outcome.device}, training"
        parts.append(
            f"{lead} {names} to plan takes an estimated {hours_text(total.hours)} "
            f"({total.hours / HOURS_PER_DAY:.2f} days); its {outcome.bound_level:.1%} bounds are "
            f"{hours_text(total.lower_hours)} and {hours_text(total.upper_hours)}."
        )
    parts.append(_verdict_text(outcome, decision))
    if outcome.verdict.widened and outcome.verdict.basis != DRIFT_OR_THROTTLING:
        parts.append(
            "The bounds include "
            + "; ".join(f"{drift_hours_text(e)} for {e.model}'s {', '.join(e.drift_flags)}" for e in _widened(outcome))
            + "."
        )
    if outcome.emulated and outcome.measured_total is not None:
        measured = outcome.measured_total
        parts.append(
            f"Measured on {outcome.measured_device} itself the same training takes {hours_text(measured.hours)} "
            f"(bounds {hours_text(measured.lower_hours)} to {hours_text(measured.upper_hours)})."
        )
    if total is not None and cloud_row and cloud_row.training_hours is not None:
        parts.append(_cloud_text(outcome, cloud_row, scalings, rental))
    if total is not None and cheapest is not None and cheapest.gpu != decision.cloud_card:
        parts.append(cheapest_text(cheapest))
    return " ".join(parts)


def _host_shares_text(section: ModelResult) -> str:
    """How much of a model's spread between rounds the host probe and the card's waiting each track, where known."""
    probe, waiting = section.host_probe_explained_share, section.gpu_wait_explained_share
    text = f", {probe:.0%} of that spread tracking the probe" if probe is not None else ""
    if waiting is not None:
        text += f", {waiting:.0%} tracking the card's power falling at a steady clock (the card waiting on its host)"
    return text


def history_text(models: Mapping[str, ModelResult], decided_on: Sequence[str]) -> str | None:
    """Whether the bounds of the decided models measured in rounds rest on this run's host alone or on the machine's
    history too (:mod:`gpubench.output.history`); None without such a model."""
    from gpubench.stats.run_level import MIN_EARLIER_RUNS

    rounds = {
        n: s.statistics.rounds for n in decided_on if (s := models.get(n)) and s.statistics and s.statistics.rounds
    }
    if not rounds:
        return None
    used = {n: r for n, r in rounds.items() if r.run_level_dof}
    if used:
        spreads = {n: math.sqrt(r.run_level_variance_ms2) / (r.steady_mean_ms or 1.0) for n, r in used.items()}
        parts = ", ".join(
            f"{n}: {len(used[n].earlier_runs)} earlier runs, "
            + (f"±{s:.1%} run to run" if s > 0 else "agreeing within their noise")
            for n, s in spreads.items()
        )
        return f"The bounds carry the spread between this machine's runs of the same config ({parts})."
    earlier = min(len(r.earlier_runs) for r in rounds.values())
    return (
        "The bounds hold for the host's speed as seen during this run: a host that drifts over hours looks steady "
        f"within it. {MIN_EARLIER_RUNS - earlier} more run(s) of this config on this machine would widen or confirm "
        "them (statistics.history)."
    )


def host_text(models: Mapping[str, ModelResult], decided_on: Sequence[str]) -> str | None:
    """One sentence when the host was noisy (a decided model's round means differ by more than their epochs explain,
    by the rounds' F test), with the host probe's spread; then :func:`history_text`'s."""
    noisy = []
    for name in decided_on:
        section = models.get(name)
        stats = None if section is None else section.statistics
        if stats is not None and stats.rounds is not None and stats.rounds.between_p_value < 1 - stats.confidence_level:
            noisy.append((name, stats.rounds.between_share, section))
    history = history_text(models, decided_on)
    if not noisy:
        return history
    probes = [r.host_probe.python_loop_ms for m in models.values() for r in m.rounds if r.host_probe is not None]
    probe = f" (a fixed Python loop took {min(probes):.1f} to {max(probes):.1f} ms across the rounds)" if probes else ""
    shares = "; ".join(
        f"{name}: {share:.0%} of its bound's variance from between rounds{_host_shares_text(section)}"
        for name, share, section in noisy
    )
    noisy_text = f"The host's speed moved during the run{probe}, and its bounds carry it ({shares})."
    return " ".join(filter(None, [noisy_text, history]))


def _emulation_text(outcome: Outcome) -> str:
    """Which parts of an emulated card's answer were measured, where, and which projected."""
    cap = f" under its {outcome.vram_limit_mb:,.0f} MB cap" if outcome.vram_limit_mb else " under its VRAM cap"
    splits = outcome.splits or {}
    parts = []
    for name, split in splits.items():
        launch = f", {split.launch_ms:.3g} ms launches" if split.launch_ms is not None else ""
        if split.host_ms is not None and split.bytes_per_step is not None:
            traffic_mb = split.bytes_per_step / BYTES_PER_MB
            traffic = f"{traffic_mb:,.0f}" if traffic_mb >= 1000 else f"{traffic_mb:.3g}"
            rest = f"{split.memory_ms or 0.0:.3g} ms memory ({traffic} MB counted), {split.host_ms:.3g} ms host"
        else:
            rest = f"{(split.memory_ms if split.memory_ms is not None else split.other_ms) or 0.0:.3g} ms other"
        parts.append(f"{name} {split.step_ms:.3g} ms = {split.compute_ms or 0.0:.3g} ms compute{launch}, {rest}")
    detail = f" (measured steps: {'; '.join(parts)})" if parts else ""
    error = outcome.projection_error or 0.0
    kept, floor = " and the launch and other parts kept", ""
    if any(split.host_ms is not None for split in splits.values()):
        kept = ", the counted memory traffic by the bandwidth ratio, the launch and host parts kept"
        floor = ", the counted traffic at the card's bandwidth as the step's floor,"
    return (
        f"This answer is about {outcome.device}, emulated on {outcome.measured_device}: memory and batch sizes were "
        f"measured on {outcome.measured_device}{cap}; times are projected from the steps measured there{detail}, "
        f"the compute part scaled by the attainable-throughput ratio{kept} (the memory-bound alternative{floor} and a "
        f"{error:.0%} projection error, the measured step between the projection / {1 + error:.2f} and / "
        f"{1 - error:.2f}, are in the bounds)."
    )


def no_estimate_reasoning(missing: list[MissingModel]) -> str:
    """Why there is no decision: no model was measured successfully."""
    return "No model was measured successfully, so there is nothing to extrapolate" + (
        f": {missing_text(missing)}." if missing else "."
    )
