"""The VRAM budget: each model's measured peak reserved memory against its budget and the card, and their total.

Sizes in MB (MiB, as the report's ``*_mb`` figures). How it is judged, in words, is
:data:`MEMORY_METHOD`.
"""

from gpubench.decision.config import DecisionConfig
from gpubench.results import MemoryBudgetRow, RunReport

#: VRAM headroom statuses (the seed's Tier-2 report): peak below 85% of the card is safe, 85-93% marginal, above
#: 93% a risk: allocator fragmentation and library workspaces can take the last few percent at any moment.
SAFE_MAX_FRACTION = 0.85
MARGINAL_MAX_FRACTION = 0.93
HEADROOM_SAFE = "safe"
HEADROOM_MARGINAL = "marginal"
HEADROOM_RISK = "risk"
NOT_MEASURED = "not measured"
#: The name of the row that sums the models' peaks.
TOTAL_ROW = "total"


def headroom_status(fraction_of_card: float | None) -> str:
    """``safe`` (< 85% of the card), ``marginal`` (85-93%, both included), ``risk`` (> 93%), or ``not measured``."""
    if fraction_of_card is None:
        return NOT_MEASURED
    if fraction_of_card < SAFE_MAX_FRACTION:
        return HEADROOM_SAFE
    if fraction_of_card <= MARGINAL_MAX_FRACTION:
        return HEADROOM_MARGINAL
    return HEADROOM_RISK


def budget_row(model: str, budget_mb: float | None, peak_mb: float | None, card_mb: float | None) -> MemoryBudgetRow:
    """One row: a peak of ``peak_mb`` against ``budget_mb`` and a card of ``card_mb`` (None where unknown)."""
    fraction = peak_mb / card_mb if peak_mb is not None and card_mb else None
    return MemoryBudgetRow(
        model=model,
        budget_mb=budget_mb,
        peak_reserved_mb=peak_mb,
        within_budget=None if peak_mb is None or budget_mb is None else peak_mb <= budget_mb,
        budget_used_fraction=None if peak_mb is None or not budget_mb else peak_mb / budget_mb,
        card_mb=card_mb,
        fraction_of_card=fraction,
        status=headroom_status(fraction),
    )


def memory_budget(report: RunReport, decision: DecisionConfig) -> list[MemoryBudgetRow]:
    """The VRAM budget table: a row per model in the report, then a ``total`` row; none without models."""
    card_mb = report.hardware.card_memory_mb
    rows = [
        budget_row(name, decision.memory_budget_mb.get(name), result.peak_reserved_mb, card_mb)
        for name, result in report.models.items()
    ]
    if not rows:
        return []
    peaks = [row.peak_reserved_mb for row in rows]
    budgets = [row.budget_mb for row in rows]
    total_peak_mb = None if None in peaks else sum(peaks)
    total_budget_mb = None if None in budgets else sum(budgets)
    return [*rows, budget_row(TOTAL_ROW, total_budget_mb, total_peak_mb, card_mb)]


#: How the VRAM budget is judged, in words: the report's ``recommendation.method.memory_budget``.
MEMORY_METHOD = (
    "Per model: the measured peak reserved VRAM (torch caching allocator) against decision.memory_budget_mb[model] "
    "and against the card (usable VRAM under a cap, else total VRAM). Status by fraction of the card: safe < 85%, "
    "marginal 85-93%, risk > 93%; 'not measured' on the CPU. The total row sums the peaks: what the card would need "
    "to hold the models at once (they are benchmarked, and can be trained, one after another)."
)
