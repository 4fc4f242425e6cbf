"""``gpubench validate``'s report: each check's result."""

from __future__ import annotations

from dataclasses import dataclass, field

from gpubench.results.codec import Record
from gpubench.results.model import HostProbe


@dataclass(frozen=True)
class ValidationCheck(Record):
    """One real training (measured epochs × ``factor``) against the report's prediction (s): ``error_pct`` = 100 ×
    (actual − predicted) / predicted; ``status`` ``ok``, ``failed`` or ``skipped`` (``error`` says why)."""

    model: str
    status: str
    repeat: int | None = None
    factor: float | None = None
    batch_size: int | None = None
    steps_per_epoch: int | None = None
    epochs: int | None = None
    steps: int | None = None
    predicted_s: float | None = None
    lower_s: float | None = None
    upper_s: float | None = None
    actual_s: float | None = None
    error_pct: float | None = None
    inside_bound: bool | None = None
    error: str | None = None
    host_probe_before: HostProbe | None = None
    host_probe_after: HostProbe | None = None


@dataclass(frozen=True)
class ValidationReport(Record):
    """``validation.json``: the predictions of the report at ``report_path`` checked by real trainings on ``device``
    (``factor``, or None when ``minutes`` chose each model's; ``repeats`` per model); a row per training."""

    report_path: str
    device: str
    created_utc: str
    status: str
    repeats: int
    factor: float | None = None
    minutes: float | None = None
    checks: list[ValidationCheck] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        """Whether every training ran and landed inside its bound, with at least one training checked."""
        trained = [check for check in self.checks if check.status != "skipped"]
        return self.status == "complete" and bool(trained) and all(check.inside_bound for check in trained)
