"""The decision rule: LOCAL_GPU_VIABLE, GRAY_ZONE, CLOUD_GPU_RECOMMENDED or no decision, and its basis, from the
prediction bounds of the critical models' total; CLOUD also from a subset, which bounds the total from below. The
rule in words is :data:`DECISION_METHOD`."""

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from gpubench.decision.config import DecisionConfig
from gpubench.decision.estimate import TimeEstimate, TotalTime, combine_estimates, estimate_training_time
from gpubench.decision.methods import method_text
from gpubench.models import SEED_MODELS
from gpubench.results import CLOUD_GPU_RECOMMENDED, GRAY_ZONE, LOCAL_GPU_VIABLE, MissingModel, ModelResult
from gpubench.stats.intervals import MIN_EPOCHS

#: The critical models of the full four-model run: the two RL models.
SEED_CRITICAL_MODELS = ("dqn", "ppo")
#: Fewest measured epochs a decision rests on: below, the interval is the plain t one, too narrow for correlated
#: epochs.
MIN_DECISION_EPOCHS = MIN_EPOCHS
#: Most epochs :func:`epochs_to_settle` looks at: beyond, an interval never settles in practice.
SETTLE_MAX_EPOCHS = 100_000

#: The bases of a decision (the values of ``Recommendation.decision_basis``).
UPPER_BELOW_LOCAL = "upper_below_local"
LOWER_ABOVE_CLOUD = "lower_above_cloud"
CRITICAL_MODEL_CANNOT_RUN = "critical_model_cannot_run"
ESTIMATE_IN_GRAY_BAND = "estimate_in_gray_band"
INTERVAL_STRADDLES_THRESHOLD = "interval_straddles_threshold"
PARTIAL_MEASUREMENT = "partial_measurement"
TOO_FEW_EPOCHS = "too_few_epochs"
DRIFT_OR_THROTTLING = "drift_or_throttling"
NOTHING_MEASURED = "nothing_measured"


@dataclass(frozen=True)
class Verdict:
    """The rule's answer: ``decision`` (None: none), its ``basis``, the ``total`` of the ``bound_models`` it rests on,
    ``plain_decision`` without the drift's widening, the critical models that ``cannot_run`` (out of memory), are
    ``missing`` or have ``too_few`` epochs, those ``widened`` for a drift, and :func:`epochs_to_settle` where the
    interval straddles a threshold."""

    decision: str | None
    basis: str
    total: TotalTime | None
    bound_models: tuple[str, ...]
    plain_decision: str | None
    cannot_run: tuple[MissingModel, ...]
    missing: tuple[MissingModel, ...]
    too_few: Mapping[str, int]
    widened: tuple[str, ...]
    epochs_to_settle: dict[str, int | None] | None


def classify(total: TotalTime, decision: DecisionConfig) -> tuple[str, str]:
    """(decision, basis) for the total of every critical model: LOCAL below ``local_max_hours``, CLOUD above
    ``cloud_min_hours``, else GRAY_ZONE, in the band or straddling a threshold."""
    if total.upper_hours < decision.local_max_hours:
        return LOCAL_GPU_VIABLE, UPPER_BELOW_LOCAL
    if total.lower_hours > decision.cloud_min_hours:
        return CLOUD_GPU_RECOMMENDED, LOWER_ABOVE_CLOUD
    if decision.local_max_hours <= total.hours <= decision.cloud_min_hours:
        return GRAY_ZONE, ESTIMATE_IN_GRAY_BAND
    return GRAY_ZONE, INTERVAL_STRADDLES_THRESHOLD


def settled(total: TotalTime, decision: DecisionConfig) -> bool:
    """Whether a total whose estimate lies outside the band has its interval on the estimate's side of the
    threshold."""
    if total.hours < decision.local_max_hours:
        return total.upper_hours < decision.local_max_hours
    return total.lower_hours > decision.cloud_min_hours


def interval_settled(total: TotalTime, decision: DecisionConfig) -> bool:
    """Whether the total's interval lies wholly on one side of each threshold: more epochs then cannot change the
    decision unless the estimate moves."""
    if total.upper_hours < decision.local_max_hours or total.lower_hours > decision.cloud_min_hours:
        return True
    return decision.local_max_hours <= total.lower_hours and total.upper_hours <= decision.cloud_min_hours


def epochs_to_settle(
    estimates: Sequence[TimeEstimate], is_settled: Callable[[TotalTime], bool], *, varying: str | None = None
) -> dict[str, int | None]:
    """Per model, max(n, K) for the smallest common epoch count K at which the total ``is_settled``, the variance
    held as measured; with ``varying`` only that model's count grows. None everywhere when not even
    :data:`SETTLE_MAX_EPOCHS` would: a drift's part and the future epochs' variability do not shrink."""
    grown = [e for e in estimates if varying is None or e.model == varying]
    grown_models = {e.model for e in grown}

    def settles(epochs: int) -> bool:
        counts = {e.model: max(e.measured_epochs, epochs) for e in grown}
        return is_settled(combine_estimates(estimates, measured_epochs=counts))

    if not grown or not settles(SETTLE_MAX_EPOCHS):
        return {e.model: None for e in estimates}
    # The margin shrinks as the count grows: double until settled, then bisect.
    low = high = min(e.measured_epochs for e in grown)
    while not settles(high):
        low, high = high, min(2 * high, SETTLE_MAX_EPOCHS)
    while high - low > 1:
        middle = (low + high) // 2
        if settles(middle):
            high = middle
        else:
            low = middle
    return {e.model: max(e.measured_epochs, high) if e.model in grown_models else e.measured_epochs for e in estimates}


def epochs_to_settle_decision(
    name: str,
    result: ModelResult,
    completed: Mapping[str, ModelResult],
    planned_models: Sequence[str],
    decision: DecisionConfig,
) -> int | None:
    """The epochs model ``name`` needs so that the critical total of the models measured so far (``completed`` and
    its first stage ``result``) settles; the count measured when settled or not critical; None when no count does
    or ``name`` has no estimate. Models run in turn, so a model aims at the total of those measured so far."""
    measured = len(result.raw_epoch_times_ms)
    critical = critical_models(decision.critical_models, planned_models)
    models = {**completed, name: result}
    so_far = [model for model in critical if model in models]
    if name not in critical or any(models[model].status == "oom" for model in so_far):
        return measured
    estimates = []
    for model in so_far:
        if model != name and len(models[model].raw_epoch_times_ms) < MIN_DECISION_EPOCHS:
            continue
        try:
            estimates.append(estimate_training_time(model, models[model], decision.plan))
        except ValueError:
            if model == name:
                return None
            continue
    counts = epochs_to_settle(estimates, lambda total: interval_settled(total, decision), varying=name)
    return counts[name]


def _decide_on(
    total: TotalTime | None, missing: Sequence[MissingModel], too_few: Mapping[str, int], decision: DecisionConfig
) -> tuple[str | None, str]:
    """(decision, basis) from the bound models' total: CLOUD from any subset, the rest only when complete."""
    if total is not None and total.lower_hours > decision.cloud_min_hours:
        return CLOUD_GPU_RECOMMENDED, LOWER_ABOVE_CLOUD
    if missing:
        return None, PARTIAL_MEASUREMENT
    if too_few:
        return None, TOO_FEW_EPOCHS
    assert total is not None  # every critical model was measured over enough epochs
    return classify(total, decision)


def critical_models(configured: Sequence[str], models_run: Sequence[str]) -> list[str]:
    """The models whose total decides: ``configured`` when set, else the models run (the four seed models: the two
    RL ones)."""
    if configured:
        return list(configured)
    if sorted(models_run) == sorted(SEED_MODELS):
        return list(SEED_CRITICAL_MODELS)
    return list(models_run)


def decide(
    critical: Sequence[str],
    models: Mapping[str, ModelResult],
    estimates: Mapping[str, TimeEstimate],
    missing: Sequence[MissingModel],
    decision: DecisionConfig,
) -> Verdict:
    """The verdict on the ``critical`` models from the report's ``models``, their ``estimates`` and those
    ``missing`` one."""
    counts = {name: len(models[name].raw_epoch_times_ms) for name in critical if name in models}
    too_few = {name: n for name, n in counts.items() if models[name].status == "ok" and n < MIN_DECISION_EPOCHS}
    cannot_run = tuple(m for m in missing if m.status == "oom")
    unmeasured = tuple(m for m in missing if m.status != "oom" and m.model not in too_few)
    bound = [estimates[name] for name in critical if name in estimates and name not in too_few]
    total = combine_estimates(bound) if bound else None
    bound_models = tuple(e.model for e in bound)
    widened = tuple(e.model for e in bound if e.drift_flags)

    def verdict(
        decided: str | None, basis: str, plain: str | None, settle: dict[str, int | None] | None = None
    ) -> Verdict:
        return Verdict(
            decision=decided,
            basis=basis,
            total=total,
            bound_models=bound_models,
            plain_decision=plain,
            cannot_run=cannot_run,
            missing=unmeasured,
            too_few=too_few,
            widened=widened,
            epochs_to_settle=settle,
        )

    if cannot_run:
        return verdict(CLOUD_GPU_RECOMMENDED, CRITICAL_MODEL_CANNOT_RUN, CLOUD_GPU_RECOMMENDED)
    if not estimates and not too_few:
        return verdict(None, NOTHING_MEASURED, None)
    decided, basis = _decide_on(total, unmeasured, too_few, decision)
    plain = _decide_on(combine_estimates(bound, widened=False) if bound else None, unmeasured, too_few, decision)[0]
    if plain != decided:
        return verdict(decided, DRIFT_OR_THROTTLING, plain)
    if basis == INTERVAL_STRADDLES_THRESHOLD:
        return verdict(decided, basis, plain, epochs_to_settle(bound, lambda t: settled(t, decision)))
    return verdict(decided, basis, plain)


#: The decision rule, in words: the report's ``recommendation.method.decision``.
DECISION_METHOD = method_text("decision", SETTLE_MAX_EPOCHS=SETTLE_MAX_EPOCHS, MIN_DECISION_EPOCHS=MIN_DECISION_EPOCHS)
