"""The JSON report: per-model results in DESIGN.md's schema, written atomically after every model.

The seed tool's keys are kept (``mean_epoch_time_ms``, ``confidence_interval_ms``, ``p95_latency_ms``, ...), all
computed over exactly ``raw_epoch_times_ms``; the robust and autocorrelation-aware figures have keys of their
own, and everything needed to check a number (steps per epoch, samples per step, warmup times, the interval
method) is stored beside it.
"""

import json
import math
import os
import tempfile
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from gpubench import __version__
from gpubench.errors import OutputError

#: Version of the report schema; bump when a key changes meaning.
REPORT_SCHEMA_VERSION = 1

#: Statuses a model can end with.
STATUSES = ("ok", "oom", "diverged", "thermal_stop", "failed")


@dataclass
class ModelResult:
    """One model's outcome. ``status`` is one of :data:`STATUSES`; ``error`` says why when it is not ``ok``.

    The timing figures come from the statistics summary (``gpubench.stats.epoch_times.EpochTimeSummary.to_dict()``) of the
    measured epochs; ``details`` holds sections owned by other modules (memory, stability, batch search,
    device watch, workload description), each already JSON-ready.
    """

    name: str
    status: str = "ok"
    error: str | None = None
    batch_size: int | None = None
    gradient_accumulation_steps: int = 1
    steps_per_epoch: int | None = None
    samples_per_step: float | None = None
    sample_unit: str | None = None
    raw_epoch_times_ms: list[float] = field(default_factory=list)
    warmup_epoch_times_ms: list[float] = field(default_factory=list)
    epoch_losses: list[float] = field(default_factory=list)
    first_step_ms: float | None = None
    calibration_seconds: float | None = None
    stop_reason: str | None = None
    statistics: dict[str, Any] | None = None
    memory_usage_mb: float | None = None
    stability: str | None = None
    loss_trend: str | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def samples_per_second(self) -> dict[str, Any] | None:
        """Throughput from the mean epoch time and its intervals (samples per second; higher is better).

        The interval on throughput maps the time interval's ends through ``samples_per_epoch / t``, which is
        monotone, so the coverage carries over exactly. A time interval reaching down to zero (or, for the plain t
        interval, below it) leaves throughput unbounded above: that end is None.
        """
        if self.statistics is None or not self.steps_per_epoch or not self.samples_per_step:
            return None
        samples_per_epoch = self.steps_per_epoch * self.samples_per_step

        def per_second(time_ms: float) -> float | None:
            return samples_per_epoch / (time_ms / 1e3) if time_ms > 0 else None

        t_lo, t_hi = self.statistics["confidence_interval_ms"]
        d_lo, d_hi = self.statistics["decision_interval_ms"]
        return {
            "mean": per_second(self.statistics["mean_ms"]),
            "confidence_interval": [per_second(t_hi), per_second(t_lo)],
            "decision_interval": [per_second(d_hi), per_second(d_lo)],
            "unit": f"{self.sample_unit}/s",
        }

    def to_dict(self) -> dict[str, Any]:
        """The model's section of the report, seed keys first."""
        stats = self.statistics
        section: dict[str, Any] = {
            "status": self.status,
            "error": self.error,
            "mean_epoch_time_ms": stats["mean_ms"] if stats else None,
            "confidence_interval_ms": stats["confidence_interval_ms"] if stats else None,
            "p95_latency_ms": stats["p95_ms"] if stats else None,
            "p99_latency_ms": stats["p99_ms"] if stats else None,
            "coefficient_of_variation": stats["coefficient_of_variation"] if stats else None,
            "memory_usage_mb": self.memory_usage_mb,
            "batch_size": self.batch_size,
            "gradient_accumulation_steps": self.gradient_accumulation_steps,
            "stability": self.stability,
            "loss_trend": self.loss_trend,
            "raw_epoch_times_ms": self.raw_epoch_times_ms,
            "warmup_epoch_times_ms": self.warmup_epoch_times_ms,
            "epoch_losses": self.epoch_losses,
            "steps_per_epoch": self.steps_per_epoch,
            "samples_per_step": self.samples_per_step,
            "sample_unit": self.sample_unit,
            "samples_per_second": self.samples_per_second(),
            "first_step_ms": self.first_step_ms,
            "calibration_seconds": self.calibration_seconds,
            "stop_reason": self.stop_reason,
            "statistics": stats,
        }
        section.update(self.details)
        return section


def new_report(hardware: dict[str, Any], data: dict[str, Any] | None, run: dict[str, Any]) -> dict[str, Any]:
    """The report's top level before any model has run."""
    return {
        "timestamp": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "benchmark_version": __version__,
        "report_schema_version": REPORT_SCHEMA_VERSION,
        "status": "running",
        "run": run,
        "hardware": hardware,
        "data": data,
        "models": {},
    }


def _json_safe(value: Any) -> Any:
    """Replace NaN/Inf (not valid JSON) by None, recursively; tuples become lists."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


class ReportWriter:
    """Writes the report to ``path`` atomically: a reader sees the previous complete version or the new one.

    The constructor checks that the folder can be created and written, so a bad ``output`` fails before any
    model is measured rather than after.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path).expanduser()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=self.path.parent, prefix=".write-check-"):
                pass
        except OSError as exc:
            raise OutputError(
                f"`output` = {str(path)!r} cannot be written: {exc.strerror or exc} "
                f"(folder {str(self.path.parent)!r}). Give a path in a writable folder, e.g. output=./report.json."
            ) from exc
        if self.path.is_dir():
            raise OutputError(f"`output` = {str(path)!r} is a folder; give a file path such as {path}/report.json.")

    def write(self, report: dict[str, Any]) -> None:
        """Serialise ``report`` to a temp file in the same folder, flush it to disk, then rename over ``path``."""
        text = json.dumps(_json_safe(report), indent=2, allow_nan=False)
        fd, tmp_name = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text + "\n")
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp_name, self.path)
        except BaseException:
            Path(tmp_name).unlink(missing_ok=True)
            raise
