"""The later rounds of a job: models whose peaks fit the VRAM together are measured round-robin, so that a change
of the host's speed lands in every model's data; then the :class:`~gpubench.decision.stopping.StopRule` may ask for
more rounds. A model whose rebuild or round raises keeps the rounds it has, with a warning."""

import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace

from gpubench.bench.model_rounds import (
    LiveModel,
    ModelRounds,
    measure_round,
    merged_result,
    seconds_since,
    start_later_rounds,
)
from gpubench.bench.model_run import ModelRunContext
from gpubench.decision.stopping import RoundChoice
from gpubench.measure.batch_search import release_device_memory
from gpubench.measure.epochs import DIVERGED, FIXED_EPOCHS
from gpubench.output import console
from gpubench.results import ModelResult

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RoundSchedule:
    """The job's rounds: epochs per fixed round, the perf-counter reading of round 1's start (s), and the usable VRAM
    (MB; None on the CPU)."""

    plan: Sequence[int]
    started: float
    usable_vram_mb: float | None


def groups_that_fit(
    names: Sequence[str], peaks_mb: Mapping[str, float | None], usable_vram_mb: float | None, headroom: float
) -> list[list[str]]:
    """``names`` in order, cut into groups whose peaks (MB) add up to at most ``headroom`` × the usable VRAM; an
    unknown peak gets a group of its own."""
    if usable_vram_mb is None:
        return [list(names)] if names else []
    limit_mb = headroom * usable_vram_mb
    groups: list[list[str]] = []
    current: list[str] = []
    used_mb = 0.0
    for name in names:
        peak_mb = peaks_mb.get(name)
        if peak_mb is None or (current and used_mb + peak_mb > limit_mb):
            if current:
                groups.append(current)
            current, used_mb = [], 0.0
        current.append(name)
        used_mb += peak_mb if peak_mb is not None else limit_mb
    if current:
        groups.append(current)
    return groups


def later_rounds(
    rounds: dict[str, ModelRounds],
    schedule: RoundSchedule,
    context: ModelRunContext,
    results: Mapping[str, ModelResult],
) -> Iterator[tuple[str, ModelResult]]:
    """Measure every later round of the models in ``rounds`` (updated in place); yields (model, its section) after
    each round. ``results`` are the job's sections after round 1."""
    cfg, stop_rule = context.cfg, context.stop_rule
    sections = dict(results)
    peaks = {name: sections[name].memory_usage_mb for name in rounds}
    index = len(rounds)
    for group in groups_that_fit(list(rounds), peaks, schedule.usable_vram_mb, cfg.batch.headroom):
        if len(group) < len(rounds):
            logger.info("rounds: %s together (their peaks fit the usable VRAM together)", ", ".join(group))
        live: dict[str, LiveModel] = {}
        try:
            for name in group:
                try:
                    live[name] = start_later_rounds(name, rounds[name], context)
                except Exception as exc:  # the model keeps round 1; the others go on
                    sections[name] = _stopped(sections[name], f"its rebuild for the later rounds raised {exc!r}")
                    yield name, sections[name]
            for epochs in schedule.plan[1:]:
                for name in list(live):
                    index += 1
                    outcome = _one_round(live, rounds, name, epochs, index, schedule, context, sections)
                    yield name, outcome
            while live:
                choice = stop_rule.next_round(
                    sections,
                    list(live),
                    {name: rounds[name].epochs for name in live},
                    {name: schedule.plan[-1] for name in live},
                    seconds_since(schedule.started),
                )
                if choice.model is None:
                    _finish(live, rounds, sections, choice, context)
                    for name in live:
                        yield name, sections[name]
                    break
                index += 1
                yield (
                    choice.model,
                    _one_round(live, rounds, choice.model, schedule.plan[-1], index, schedule, context, sections),
                )
        finally:
            live.clear()
            release_device_memory()


def _one_round(
    live: dict[str, LiveModel],
    rounds: dict[str, ModelRounds],
    name: str,
    epochs: int,
    index: int,
    schedule: RoundSchedule,
    context: ModelRunContext,
    sections: dict[str, ModelResult],
) -> ModelResult:
    """Measure one round of ``name``; its section after it. A diverged or stopped round ends the model's rounds."""
    try:
        rounds[name] = measure_round(live[name], rounds[name], epochs, index, seconds_since(schedule.started), context)
    except Exception as exc:  # an interrupt is no Exception: it goes on up, with the model's epochs
        del live[name]
        sections[name] = _stopped(sections[name], f"round {index} raised {exc!r}")
        return sections[name]
    reason = rounds[name].later[-1].measurement.stop_reason
    result = merged_result(rounds[name], context, stop_reason=FIXED_EPOCHS)
    if reason != FIXED_EPOCHS:
        del live[name]
        error = f"stopped in round {index}: " + (
            "training diverged (a NaN/Inf loss or gradient)" if reason == DIVERGED else reason
        )
        result = replace(result, status=reason, error=error, stop_reason=reason)
    logger.info(
        "round %d: %s, %d epochs, mean %.1f ms", index, name, epochs, rounds[name].later[-1].record.mean_epoch_ms
    )
    sections[name] = result
    return result


def _stopped(section: ModelResult, why: str) -> ModelResult:
    """``section`` with a warning that its later rounds stopped (``why``)."""
    warning = f"later rounds stopped: {why}; the report keeps the rounds measured before"
    console.notice(warning)
    return replace(section, warnings=[*section.warnings, warning])


def _finish(
    live: Mapping[str, LiveModel],
    rounds: Mapping[str, ModelRounds],
    sections: dict[str, ModelResult],
    choice: RoundChoice,
    context: ModelRunContext,
) -> None:
    """Give every live model its stop reason."""
    for name in live:
        sections[name] = merged_result(rounds[name], context, stop_reason=choice.stop_reasons.get(name, FIXED_EPOCHS))
