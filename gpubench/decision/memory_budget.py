"""The VRAM budget: each model's peak reserved memory (MB) against its budget and the card, and their total; in
words :data:`MEMORY_METHOD`."""

from gpubench.decision.config import DecisionConfig
from gpubench.decision.methods import method_text
from gpubench.results import MemoryBudgetRow, ModelResult, RunReport

#: Statuses by the peak's fraction of the card against ``batch.headroom``: beyond it, fragmentation and library
#: workspaces can take the last few percent.
HEADROOM_SAFE = "safe"
HEADROOM_MARGINAL = "marginal"
HEADROOM_RISK = "risk"
NOT_MEASURED = "not measured"
NO_HEADROOM = "no headroom recorded"
TOTAL_ROW = "total"


def headroom_status(fraction_of_card: float | None, headroom: float | None) -> str:
    """``safe`` up to ``headroom``, ``marginal`` up to ``(1 + headroom) / 2``, else ``risk``."""
    if fraction_of_card is None:
        return NOT_MEASURED
    if headroom is None:
        return NO_HEADROOM
    if fraction_of_card <= headroom:
        return HEADROOM_SAFE
    if fraction_of_card <= (1.0 + headroom) / 2:
        return HEADROOM_MARGINAL
    return HEADROOM_RISK


def budget_row(
    model: str, budget_mb: float | None, peak_mb: float | None, card_mb: float | None, headroom: float | None
) -> MemoryBudgetRow:
    """One row: ``peak_mb`` against ``budget_mb`` and ``card_mb``, its status against ``headroom``."""
    fraction = peak_mb / card_mb if peak_mb is not None and card_mb else None
    return MemoryBudgetRow(
        model=model,
        budget_mb=budget_mb,
        peak_reserved_mb=peak_mb,
        within_budget=None if peak_mb is None or budget_mb is None else peak_mb <= budget_mb,
        budget_used_fraction=None if peak_mb is None or not budget_mb else peak_mb / budget_mb,
        card_mb=card_mb,
        fraction_of_card=fraction,
        status=headroom_status(fraction, headroom),
    )


def _headroom(result: ModelResult, usable_vram_mb: float | None) -> float | None:
    """The ``batch.headroom`` the model's batch search ran under, where the report records it."""
    if result.memory_split is not None and result.memory_split.headroom is not None:
        return result.memory_split.headroom
    search = result.batch_search
    if search is not None and search.peak_limit_mb is not None and usable_vram_mb:
        return search.peak_limit_mb / usable_vram_mb
    return None


def memory_budget(report: RunReport, decision: DecisionConfig) -> list[MemoryBudgetRow]:
    """A row per model, then a ``total`` row; a model without a recorded headroom takes the run's."""
    card_mb = report.hardware.card_memory_mb
    headrooms = {name: _headroom(result, report.hardware.usable_vram_mb) for name, result in report.models.items()}
    recorded = [h for h in headrooms.values() if h is not None]
    run_headroom = min(recorded) if recorded else None
    rows = [
        budget_row(
            name, decision.memory_budget_mb.get(name), result.peak_reserved_mb, card_mb, headrooms[name] or run_headroom
        )
        for name, result in report.models.items()
    ]
    if not rows:
        return []
    peaks = [row.peak_reserved_mb for row in rows]
    budgets = [row.budget_mb for row in rows]
    total_peak_mb = None if None in peaks else sum(peaks)
    total_budget_mb = None if None in budgets else sum(budgets)
    return [*rows, budget_row(TOTAL_ROW, total_budget_mb, total_peak_mb, card_mb, run_headroom)]


#: How the VRAM budget is judged, in words: the report's ``recommendation.method.memory_budget``.
MEMORY_METHOD = method_text("memory_budget")
