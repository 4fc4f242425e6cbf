"""``gpubench validate``'s report: each check's result."""

from __future__ import annotations

from dataclasses import dataclass, field

from gpubench.results.codec import Record
from gpubench.results.model import HostProbe


@dataclass(frozen=True)
class ValidationCheck(Record):
    """One real training of one model checked against the report's prediction of it (``python -m gpubench.validate``).

    The training, in a fresh process, runs every step the benchmark ran for the model with the measured epochs
    multiplied by ``factor``: ``steps`` optimizer steps in all (calibration, warmup and ``epochs`` epochs of
    ``steps_per_epoch``), in a plain loop timed by its own clock from the first step to the last. ``predicted_s``
    is the report's estimate of that training and ``lower_s``/``upper_s`` its bounds; ``actual_s`` the wall time
    measured; ``error_pct`` = 100 × (actual − predicted) / predicted; ``inside_bound`` whether lower ≤ actual ≤
    upper. With ``--repeats R`` each model trains R times, ``repeat`` 1 to R, each its own check. ``status`` is
    ``ok`` (it trained), ``failed`` (with ``error``) or ``skipped`` (the report holds nothing of the model to check,
    ``error`` says why; ``repeat`` is then None). ``host_probe_before`` / ``host_probe_after``: the host's speed
    (the rounds' fixed probe) read in the training's process just before and just after its timed region, so that
    a miss can be set beside the host states the report's rounds saw; None where not read (older files, a failed
    training).
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
    ``device``. ``factor`` is ``--factor`` (each training K × the measured work), or None when ``minutes`` (``--minutes
    M``) chose each model's factor for a training of about M minutes; ``repeats`` trainings per model, interleaved
    across the models. ``status``: ``running`` while trainings remain, ``complete``, or ``interrupted`` (a signal
    stopped it; ``checks`` holds the trainings finished before it). ``checks`` has a row per training and one per
    model that could not be checked, in the order they ran."""

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
