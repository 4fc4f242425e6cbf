"""The machine's history: a JSON line per benchmark run and per validate training, in
``<data.cache_dir>/history/<machine>.jsonl``. Earlier runs of a model's config on this machine give its bound a
run-to-run level (:func:`gpubench.stats.rounds.two_level_interval`); a record of another machine or config is never
used. Appends are single ``O_APPEND`` writes; an unreadable line is reported once and skipped; a history that cannot
be read or written never stops a run.
"""

import hashlib
import json
import logging
import os
import platform
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpubench.results import HardwareReport, ModelResult, RunReport, ValidationCheck

if TYPE_CHECKING:
    from gpubench.config import BenchmarkConfig

logger = logging.getLogger(__name__)

RUN = "run"
VALIDATION = "validation"


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def machine_key(hardware: HardwareReport) -> str:
    """The machine's identity: a digest of the host name, its CPU and the device (name and UUID)."""
    return _digest(
        [platform.node(), hardware.cpu_name, hardware.cpu_logical_cores, hardware.device_name, hardware.uuid]
    )


def config_key(result: ModelResult, hardware_config: dict[str, Any]) -> str:
    """A model's config: its workload's settings, execution, timed batch and the job's ``hardware`` group."""
    execution = None if result.execution is None else result.execution.to_dict()
    return _digest([result.workload, execution, result.batch_size, result.gradient_accumulation_steps, hardware_config])


@dataclass(frozen=True)
class MachineHistory:
    """One machine's history file (``path``) and the records read from it when the job started."""

    path: Path
    machine: str
    hardware_config: dict[str, Any]
    records: tuple[dict[str, Any], ...] = field(default_factory=tuple)

    @classmethod
    def open(cls, cache_dir: str, hardware: HardwareReport, hardware_config: dict[str, Any]) -> "MachineHistory":
        machine = machine_key(hardware)
        path = Path(cache_dir).expanduser() / "history" / f"{machine}.jsonl"
        return cls(path, machine, hardware_config, tuple(_read(path, machine)))

    def earlier_runs(self, result: ModelResult) -> tuple[tuple[float, float], ...]:
        """(mean epoch ms at ``result``'s epoch size, relative variance of that mean) of every earlier run and
        validate training of ``result``'s config on this machine."""
        if not result.steps_per_epoch:
            return ()
        key = config_key(result, self.hardware_config)
        return tuple(
            (float(entry["mean_step_ms"]) * result.steps_per_epoch, float(entry["relative_variance"]))
            for record in self.records
            for entry in _entries(record)
            if entry.get("config") == key
        )

    def append(self, record: dict[str, Any]) -> None:
        """Append one record as one line; a failure is logged, never raised."""
        line = json.dumps({"machine": self.machine, "time": datetime.now(UTC).isoformat(timespec="seconds"), **record})
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            descriptor = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(descriptor, (line + "\n").encode())
            finally:
                os.close(descriptor)
        except OSError as exc:
            logger.warning("cannot append to the machine's history %s (%s); the run is not affected", self.path, exc)

    def record_run(self, report: RunReport) -> None:
        """Append the run: the host probe of each round and, per model measured in rounds, its config, mean step
        time (ms, steady epochs) and the relative in-run variance of that mean."""
        models = {}
        for name, result in report.models.items():
            stats = result.statistics
            rounds = None if stats is None else stats.rounds
            if result.status != "ok" or rounds is None or not result.steps_per_epoch or not rounds.variance_of_mean_ms2:
                continue
            mean_ms = stats.decision_mean_ms
            models[name] = {
                "config": config_key(result, self.hardware_config),
                "mean_step_ms": mean_ms / result.steps_per_epoch,
                "relative_variance": rounds.variance_of_mean_ms2 / mean_ms**2,
                "round_means_ms": list(rounds.round_means_ms),
                "host_probes_ms": [r.host_probe.python_loop_ms for r in result.rounds if r.host_probe is not None],
            }
        if models:
            self.append({"kind": RUN, "models": models})

    def record_validation(self, result: ModelResult, check: ValidationCheck) -> None:
        """Append one validate training: predicted, bounds and actual (s), and the mean step time (ms) it implies
        (the prediction's, moved by the whole error over its epochs), a run whose mean has no in-run variance."""
        stats = result.statistics
        if check.actual_s is None or check.predicted_s is None or stats is None or not check.epochs:
            return
        if not result.steps_per_epoch:
            return
        epoch_ms = stats.decision_mean_ms + (check.actual_s - check.predicted_s) * 1000.0 / check.epochs
        entry = {
            "config": config_key(result, self.hardware_config),
            "mean_step_ms": epoch_ms / result.steps_per_epoch,
            "relative_variance": 0.0,
        }
        bounds = {k: getattr(check, k) for k in ("predicted_s", "lower_s", "upper_s", "actual_s")}
        self.append({"kind": VALIDATION, "models": {check.model: entry}, **bounds})


def _entries(record: dict[str, Any]) -> list[dict[str, Any]]:
    models = record.get("models")
    return [m for m in models.values() if isinstance(m, dict)] if isinstance(models, dict) else []


def _read(path: Path, machine: str) -> list[dict[str, Any]]:
    """The records of ``machine`` in ``path``; unreadable lines are skipped, reported once."""
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return []
    except OSError as exc:
        logger.warning("cannot read the machine's history %s (%s); the bounds use this run alone", path, exc)
        return []
    records, bad = [], 0
    for line in lines:
        try:
            record = json.loads(line)
            valid = all(float(e["mean_step_ms"]) > 0 and float(e["relative_variance"]) >= 0 for e in _entries(record))
        except (ValueError, TypeError, KeyError, AttributeError):
            valid = False
        if not valid:
            bad += 1
        elif record.get("machine") == machine:
            records.append(record)
    if bad:
        logger.warning("the machine's history %s has %d unreadable line(s); they are ignored", path, bad)
    return records


def hardware_settings(hardware_config: Any) -> dict[str, Any]:
    """The ``hardware`` group's settings that change what a step costs (the card emulated and its VRAM cap)."""
    settings = asdict(hardware_config)
    return {k: settings.get(k) for k in ("name", "vram_limit_gb", "cpu_threads")}


def job_history(cfg: "BenchmarkConfig", hardware: HardwareReport) -> MachineHistory | None:
    """The job's machine history, read once; None with ``statistics.history=false``."""
    if not cfg.statistics.history:
        return None
    return MachineHistory.open(cfg.data.cache_dir, hardware, hardware_settings(cfg.hardware))
