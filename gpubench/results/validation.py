"""``gpubench validate``'s report: each check's result."""

from __future__ import annotations

from dataclasses import dataclass, field

from gpubench.results.codec import Record
from gpubench.results.model import HostProbe


@dataclass(frozen=True)
class ValidationCheck(Record):
    """One real training of one model checked against the report's prediction of it (``python -m gpubench.validate``).

    The training runs every step the benchmark ran for the model, measured epochs × ``factor`` (``steps`` in all),
    timed from first step to last: ``actual_s`` against ``predicted_s`` and its bounds, ``error_pct`` = 100 ×
    (actual − predicted) / predicted. ``status``: ``ok``, ``failed`` or ``skipped`` (``error`` says why).
    ``host_probe_before`` / ``host_probe_after``: the host probe around the timed region (None where not read).
    """

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
    """``validation.json``: the predictions of the report at ``report_path`` checked by real trainings on
    ``device``; ``factor`` (None when ``minutes`` chose each model's), ``repeats`` per model, interleaved;
    ``status`` ``running``, ``complete`` or ``interrupted``; a row per training or unchecked model, in order."""

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
