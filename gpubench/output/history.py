"""The machine's history: a JSON line per benchmark run and per validate training, in
``<data.cache_dir>/history/<machine>.jsonl``, and with tracking on also in the MLflow store (each tracked run logs the
record it appended). Earlier runs of a model's config on this machine give its bound a run-to-run level
(:func:`gpubench.stats.rounds.two_level_interval`); a record of another machine or config is never used, and a record
in both the file and the store counts once (by its ``record_id``). Appends are single ``O_APPEND`` writes; an
unreadable line or stored record is reported once and skipped; a history that cannot be read or written never stops a
run.
"""

import hashlib
import json
import logging
import os
import platform
import uuid
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpubench.output.history_record import entries, machine_records
from gpubench.output.redact import redact
from gpubench.output.sqlite_store import TrackingError
from gpubench.output.tracking_read import machine_history_records
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
    """One machine's history file (``path``) and the records read when the job started, from the file and, with
    tracking on, from the MLflow store."""

    path: Path
    machine: str
    hardware_config: dict[str, Any]
    records: tuple[dict[str, Any], ...] = field(default_factory=tuple)

    @classmethod
    def open(
        cls,
        cache_dir: str,
        hardware: HardwareReport,
        hardware_config: dict[str, Any],
        *,
        tracking_uri: str | None = None,
    ) -> "MachineHistory":
        """The machine's history file under ``cache_dir`` with its records and, unless ``tracking_uri`` is None,
        those the MLflow store there holds, each ``record_id`` once; a store that cannot be read is reported once and
        the file's records are used alone."""
        machine = machine_key(hardware)
        path = Path(cache_dir).expanduser() / "history" / f"{machine}.jsonl"
        records = _read(path, machine)
        if tracking_uri is not None:
            records += _store_records(tracking_uri, machine)
        return cls(path, machine, hardware_config, tuple(_unique(records)))

    def earlier_runs(self, result: ModelResult) -> tuple[tuple[float, float], ...]:
        """(mean epoch ms at ``result``'s epoch size, relative variance of that mean) of every earlier run and
        validate training of ``result``'s config on this machine."""
        if not result.steps_per_epoch:
            return ()
        key = config_key(result, self.hardware_config)
        return tuple(
            (float(entry["mean_step_ms"]) * result.steps_per_epoch, float(entry["relative_variance"]))
            for record in self.records
            for entry in entries(record)
            if entry.get("config") == key
        )

    def append(self, record: dict[str, Any]) -> dict[str, Any]:
        """Append ``record`` as one line, with the machine, the time (UTC) and a new ``record_id`` (uuid4 hex), and
        return it so; a failure to write is logged, never raised (the record is returned all the same: a tracked
        run still keeps it in the store)."""
        stored = {
            "machine": self.machine,
            "time": datetime.now(UTC).isoformat(timespec="seconds"),
            "record_id": uuid.uuid4().hex,
            **record,
        }
        line = json.dumps(stored)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            descriptor = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(descriptor, (line + "\n").encode())
            finally:
                os.close(descriptor)
        except OSError as exc:
            logger.warning("cannot append to the machine's history %s (%s); the run is not affected", self.path, exc)
        return stored

    def record_run(self, report: RunReport) -> dict[str, Any] | None:
        """Append the run and return its record: the host probe of each round and, per model measured in rounds, its
        config, mean step time (ms, steady epochs) and the relative in-run variance of that mean; None (nothing
        appended) without such a model."""
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
        return self.append({"kind": RUN, "models": models}) if models else None

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


def _read(path: Path, machine: str) -> list[dict[str, Any]]:
    """The records of ``machine`` in ``path``; unreadable lines are skipped, reported once."""
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return []
    except OSError as exc:
        logger.warning("cannot read the machine's history %s (%s); the bounds use this run alone", path, exc)
        return []
    records, bad = machine_records(lines, machine)
    if bad:
        logger.warning("the machine's history %s has %d unreadable line(s); they are ignored", path, bad)
    return records


def _store_records(tracking_uri: str, machine: str) -> list[dict[str, Any]]:
    """The records of ``machine`` in the MLflow store at ``tracking_uri``; none, reported once, when it cannot be
    read."""
    try:
        return machine_history_records(tracking_uri, machine)
    except TrackingError as exc:
        logger.warning("%s; the machine's history is read from its file alone", redact(str(exc)))
        return []


def _unique(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``records`` with each ``record_id`` once (its first); records without one (older lines) are all kept."""
    seen: set[str] = set()
    kept = []
    for record in records:
        record_id = record.get("record_id")
        if record_id is None or record_id not in seen:
            kept.append(record)
        if record_id is not None:
            seen.add(record_id)
    return kept


def hardware_settings(hardware_config: Any) -> dict[str, Any]:
    """The ``hardware`` group's settings that change what a step costs (the card emulated and its VRAM cap)."""
    settings = asdict(hardware_config)
    return {k: settings.get(k) for k in ("name", "vram_limit_gb", "cpu_threads")}


def job_history(cfg: "BenchmarkConfig", hardware: HardwareReport, *, read_store: bool = True) -> MachineHistory | None:
    """The job's machine history, read once from its file and, with tracking on and ``read_store``, from the MLflow
    store; None with ``statistics.history=false``."""
    if not cfg.statistics.history:
        return None
    tracking_uri = cfg.tracking.uri if cfg.tracking.enabled and read_store else None
    return MachineHistory.open(cfg.data.cache_dir, hardware, hardware_settings(cfg.hardware), tracking_uri=tracking_uri)
