"""Where an adaptive job's next round goes, and when it stops. ``statistics.adaptive=decision``, one joint rule over
the critical models: the round goes to the model that narrows the total's margin most per second, until the total
settles, cannot settle within ``max_epochs``, or the time budget is spent. ``precision``: the model widest against
``target_rel_halfwidth`` until every model is within it."""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from gpubench.decision.config import DecisionConfig
from gpubench.decision.estimate import TimeEstimate, combine_estimates, estimate_training_time
from gpubench.decision.rule import critical_models, epochs_to_settle_decision, interval_settled
from gpubench.results import ModelResult
from gpubench.results.units import MS_PER_S, SECONDS_PER_HOUR
from gpubench.stats.config import (
    ADAPTIVE_DECISION,
    ADAPTIVE_PRECISION,
    DECISION_CANNOT_SETTLE,
    DECISION_SETTLED,
    MAX_EPOCHS_REACHED,
    PRECISION_TARGET_MET,
    TIME_BUDGET_SPENT,
    StatisticsConfig,
)


@dataclass(frozen=True)
class RoundChoice:
    """The model to measure one more round of, or None to stop; when stopping, each model's stop reason."""

    model: str | None
    stop_reasons: dict[str, str] = field(default_factory=dict)
    #: For ``decision``: the total's margin width (h) before the round.
    margin_hours: float | None = None


@dataclass(frozen=True)
class StopRule:
    """A job's one stopping rule: a lone round's second stage asks it for epochs, later rounds for the next round."""

    statistics: StatisticsConfig
    decision: DecisionConfig
    planned_models: tuple[str, ...]

    def epochs_to_settle(self, name: str, first_stage: ModelResult, completed: Mapping[str, ModelResult]) -> int | None:
        """:func:`~gpubench.decision.rule.epochs_to_settle_decision` for ``name`` after its first stage."""
        return epochs_to_settle_decision(name, first_stage, completed, self.planned_models, self.decision)

    def next_round(
        self,
        sections: Mapping[str, ModelResult],
        candidates: Sequence[str],
        measured_epochs: Mapping[str, int],
        epochs_per_round: Mapping[str, int],
        elapsed_s: float,
    ) -> RoundChoice:
        """:func:`next_round` under this job's statistics and decision config."""
        return next_round(
            sections, candidates, measured_epochs, epochs_per_round, self.statistics, self.decision, elapsed_s
        )


def next_round(
    sections: Mapping[str, ModelResult],
    candidates: Sequence[str],
    measured_epochs: Mapping[str, int],
    epochs_per_round: Mapping[str, int],
    statistics: StatisticsConfig,
    decision: DecisionConfig,
    elapsed_s: float,
) -> RoundChoice:
    """The next round of an adaptive job, from the report ``sections`` so far, the ``candidates`` that can be
    measured again and ``elapsed_s`` since the first round."""
    if statistics.adaptive not in (ADAPTIVE_PRECISION, ADAPTIVE_DECISION):
        return RoundChoice(None)
    if statistics.max_round_seconds is not None and elapsed_s >= statistics.max_round_seconds:
        return RoundChoice(None, dict.fromkeys(candidates, TIME_BUDGET_SPENT))
    room = [n for n in candidates if measured_epochs[n] + epochs_per_round[n] <= statistics.max_epochs]
    if statistics.adaptive == ADAPTIVE_PRECISION:
        return _precision_round(sections, candidates, room, statistics)
    return _decision_round(sections, candidates, room, measured_epochs, epochs_per_round, statistics, decision)


def _relative_halfwidth(section: ModelResult) -> float:
    stats = section.statistics
    return float("inf") if stats is None else stats.relative_halfwidth


def _precision_round(
    sections: Mapping[str, ModelResult], candidates: Sequence[str], room: Sequence[str], statistics: StatisticsConfig
) -> RoundChoice:
    target = statistics.target_rel_halfwidth
    short = [n for n in room if _relative_halfwidth(sections[n]) > target]
    if short:
        return RoundChoice(max(short, key=lambda n: _relative_halfwidth(sections[n])))
    reasons = {
        n: PRECISION_TARGET_MET if _relative_halfwidth(sections[n]) <= target else MAX_EPOCHS_REACHED
        for n in candidates
    }
    return RoundChoice(None, reasons)


def _decision_round(
    sections: Mapping[str, ModelResult],
    candidates: Sequence[str],
    room: Sequence[str],
    measured_epochs: Mapping[str, int],
    epochs_per_round: Mapping[str, int],
    statistics: StatisticsConfig,
    decision: DecisionConfig,
) -> RoundChoice:
    critical = critical_models(decision.critical_models, list(sections))
    estimates: list[TimeEstimate] = []
    for name in critical:
        section = sections.get(name)
        if section is None or section.status != "ok":
            return RoundChoice(None, dict.fromkeys(candidates, DECISION_CANNOT_SETTLE))
        try:
            estimates.append(estimate_training_time(name, section, decision.plan))
        except ValueError:
            return RoundChoice(None, dict.fromkeys(candidates, DECISION_CANNOT_SETTLE))
    total = combine_estimates(estimates)
    if interval_settled(total, decision):
        return RoundChoice(None, dict.fromkeys(candidates, DECISION_SETTLED))
    growable = [name for name in room if name in critical]
    at_most = {
        name: measured_epochs[name]
        + epochs_per_round[name] * ((statistics.max_epochs - measured_epochs[name]) // epochs_per_round[name])
        for name in growable
    }
    if not growable or not interval_settled(combine_estimates(estimates, measured_epochs=at_most), decision):
        reasons = {
            n: MAX_EPOCHS_REACHED if n in critical and n not in room else DECISION_CANNOT_SETTLE for n in candidates
        }
        return RoundChoice(None, reasons)
    width_h = total.upper_hours - total.lower_hours

    def narrowing_per_second(name: str) -> float:
        after = combine_estimates(estimates, measured_epochs={name: measured_epochs[name] + epochs_per_round[name]})
        section = sections[name]
        round_s = (section.mean_epoch_time_ms or 0.0) * epochs_per_round[name] / MS_PER_S
        narrowed_s = (width_h - (after.upper_hours - after.lower_hours)) * SECONDS_PER_HOUR
        return narrowed_s / max(round_s, 1e-9)

    return RoundChoice(max(growable, key=narrowing_per_second), margin_hours=width_h)
