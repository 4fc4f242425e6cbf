"""A live MLflow run: created RUNNING when a job (or sweep) starts, fed epochs in batches between epochs, ended with
its status. Any tracking failure becomes one warning and stops logging; the JSON report is written regardless."""

import json
import math
import time
from collections.abc import Callable, Sequence
from typing import Any

from gpubench.output import console
from gpubench.output.config import TrackingConfig
from gpubench.output.redact import redact
from gpubench.output.sqlite_store import store_lock
from gpubench.output.tracking_record import (
    HISTORY_RECORD_ARTIFACT,
    MACHINE_TAG,
    PARENT_RUN_TAG,
    DatasetRecord,
    RunRecord,
)
from gpubench.output.tracking_store import REPORT_KEPT, TrackingOutcome, open_store, run_link, tracking_warning
from gpubench.output.tracking_system import SystemMetricsSampler
from gpubench.results.units import MS_PER_S

#: MLflow's per-request limits: entities in one log_batch, and params/tags among them.
_MAX_ENTITIES_PER_BATCH = 1000
_MAX_PARAMS_PER_BATCH = 100
#: MLflow rejects longer param values, and longer tag values (the description among them).
_MAX_PARAM_CHARS = 6000
_MAX_TAG_CHARS = 8000
#: Streamed epochs are sent at the latest this many seconds after the previous batch (and at each model's end).
FLUSH_INTERVAL_S = 10.0
#: MLflow's run statuses, as a job ends: every model measured, a model failed (or the job raised), interrupted.
FINISHED, FAILED, KILLED = "FINISHED", "FAILED", "KILLED"
_DATASET_CONTEXT_TAG = "mlflow.data.context"


def _is_finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)


def _tag_value(value: Any) -> str:
    text = redact(str(value))
    return text if len(text) <= _MAX_TAG_CHARS else text[: _MAX_TAG_CHARS - 1] + "…"


class LiveRun:
    """One MLflow run, open while its job runs; never raises for tracking failures."""

    def __init__(
        self,
        config: TrackingConfig,
        *,
        flush_interval_s: float = FLUSH_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
        kept: str = REPORT_KEPT,
    ) -> None:
        self.config = config
        self._kept = kept
        self.run_id: str | None = None
        self.experiment_id: str | None = None
        self.failed = False
        self._client: Any = None
        self._flush_interval_s = flush_interval_s
        self._clock = clock
        self._last_flush = clock()
        self._pending: list[tuple[str, float, int, int]] = []  # key, value, timestamp (ms), step
        self._steps: dict[str, int] = {}
        self._streamed: set[str] = set()
        self._model: str | None = None
        self._messages: list[str] = []
        self._shown = 0
        self._sampler: SystemMetricsSampler | None = None

    @classmethod
    def start(
        cls, config: TrackingConfig, *, run_name: str, params: dict[str, Any], tags: dict[str, str], **options: Any
    ) -> "LiveRun":
        """Create the run (RUNNING) with redacted ``params`` and ``tags`` and the constructor's ``options``; disabled
        or failed, the run logs nothing."""
        live = cls(config, **options)
        if config.enabled:
            live._guard("creating the run", live._create, run_name, params, tags)
        return live

    @property
    def active(self) -> bool:
        """Whether the run exists and no failure has stopped its logging."""
        return self.run_id is not None and not self.failed

    def new_messages(self) -> list[str]:
        """The warnings and notices not handed out yet (each is handed out once)."""
        messages, self._shown = self._messages[self._shown :], len(self._messages)
        return messages

    def watch_system(self, gpu_indices: Sequence[int] | None) -> None:
        """Start sampling system metrics into the run when ``tracking.system_metrics`` is on."""
        if not (self.active and self.config.system_metrics) or self._sampler is not None:
            return
        try:
            self._sampler = SystemMetricsSampler.start(self.config.system_metrics_interval_s, gpu_indices)
        except ImportError as exc:
            self._messages.append(
                f"no system metrics in the MLflow run: {exc.name or 'a module'} is not installed "
                "(pip install psutil; tracking.system_metrics=false turns them off)."
            )
        # The monitor's set-up (psutil, NVML) failing must not cost the run: its metrics are said missing.
        except Exception as exc:
            self._messages.append(redact(f"no system metrics in the MLflow run ({type(exc).__name__}: {exc})."))

    def on_epoch(self, model: str, phase: str, number: int, seconds: float, loss: float | None) -> None:
        """Buffer a measured epoch of ``model`` (time in s, mean loss)."""
        if not self.active or phase != "measured":
            return
        if self._model is not None and model != self._model:
            self.flush()
        self._model = model
        step = self._steps.get(model, 0)
        self._steps[model] = step + 1
        now_ms = int(time.time() * MS_PER_S)
        time_key, loss_key = f"{model}/epoch_time_ms", f"{model}/epoch_loss"
        self._streamed.update((time_key, loss_key))
        self._pending.append((time_key, seconds * MS_PER_S, now_ms, step))
        if _is_finite(loss):
            self._pending.append((loss_key, float(loss), now_ms, step))
        if self._clock() - self._last_flush >= self._flush_interval_s:
            self.flush()

    def end_model(self, model: str) -> None:
        """``model`` has finished: send its buffered epochs now."""
        self.flush()

    def flush(self) -> None:
        """Send the buffered epochs and system metrics now (one ``log_batch`` per 1000 entries)."""
        pending, self._pending = self._pending, []
        if self._sampler is not None:
            pending += self._sampler.take()
        self._last_flush = self._clock()
        if pending and self.active:
            self._guard("streaming epoch metrics", self._send_metrics, pending)

    def finish(self, record: RunRecord, status: str) -> TrackingOutcome:
        """Log ``record``, rename the run ``record.run_name`` and end it with ``status``."""
        if not self.config.enabled:
            return TrackingOutcome(run_id=None)
        self._stop_system_metrics()
        if self.active:
            self._guard("logging the results", self._finish, record, status)
        messages = self.new_messages()
        return TrackingOutcome(run_id=self.run_id, warning=" ".join(messages) if messages else None)

    def _stop_system_metrics(self) -> None:
        """Stop the sampler, then send its last readings with the epochs still buffered."""
        if self._sampler is not None:
            self._sampler.stop()
            if self._sampler.failure:
                self._messages.append(f"{self._sampler.failure}; the run's other metrics are logged.")
        self.flush()
        self._sampler = None

    def _guard(self, action: str, operation: Callable[..., None], *args: Any) -> None:
        try:
            operation(*args)
        # Any tracking failure must leave the benchmark and its report intact.
        except Exception as exc:
            self.failed = True
            self._messages.append(tracking_warning(self.config, action, exc, self._kept))

    def _create(self, run_name: str, params: dict[str, Any], tags: dict[str, str]) -> None:
        from mlflow.entities import Param

        with store_lock(self.config.uri):
            client, experiment_id, notice = open_store(self.config)
            if notice:
                self._messages.append(notice)
            run = client.create_run(
                experiment_id, run_name=redact(run_name), tags={key: _tag_value(value) for key, value in tags.items()}
            )
            self._client, self.run_id, self.experiment_id = client, run.info.run_id, experiment_id
            entities = [Param(key, redact(str(value))[:_MAX_PARAM_CHARS]) for key, value in params.items()]
            self._log_batches("params", entities, _MAX_PARAMS_PER_BATCH)

    def _send_metrics(self, entries: Sequence[tuple[str, float, int, int]]) -> None:
        from mlflow.entities import Metric

        metrics = [Metric(key, value, timestamp_ms, step) for key, value, timestamp_ms, step in entries]
        with store_lock(self.config.uri):
            self._log_batches("metrics", metrics, _MAX_ENTITIES_PER_BATCH)

    def _log_batches(self, kind: str, entities: Sequence[Any], size: int) -> None:
        """Log ``entities`` as ``kind`` (params, metrics, tags) in batches of at most ``size``."""
        for start in range(0, len(entities), size):
            self._client.log_batch(self.run_id, **{kind: list(entities[start : start + size])}, synchronous=True)

    def _log_dataset(self, dataset: DatasetRecord) -> None:
        from mlflow.entities import Dataset, DatasetInput, InputTag

        entity = Dataset(
            name=dataset.name,
            digest=dataset.digest,
            source_type="local",
            source=json.dumps({"uri": dataset.source}),
            profile=json.dumps(dataset.profile),
        )
        self._client.log_inputs(
            self.run_id, datasets=[DatasetInput(entity, tags=[InputTag(_DATASET_CONTEXT_TAG, dataset.context)])]
        )

    def _finish(self, record: RunRecord, status: str) -> None:
        from mlflow.entities import RunTag

        now_ms = int(time.time() * MS_PER_S)
        entries = [(key, float(value), now_ms, 0) for key, value in record.metrics.items() if _is_finite(value)]
        for key, values in record.series.items():
            if key in self._streamed:
                continue
            # A non-finite value is skipped; the others keep their epoch index as the step.
            entries += [(key, float(value), now_ms, step) for step, value in enumerate(values) if _is_finite(value)]
        tags = [RunTag(key, _tag_value(value)) for key, value in record.tags.items()]
        if entries:
            self._send_metrics(entries)
        with store_lock(self.config.uri):
            self._log_batches("tags", tags, _MAX_PARAMS_PER_BATCH)
            if record.dataset is not None:
                self._log_dataset(record.dataset)
            for path in record.artifacts:
                if path.exists():
                    self._client.log_artifact(self.run_id, str(path))
            for name, columns in record.tables.items():
                self._client.log_table(self.run_id, data=columns, artifact_file=name)
            last_tags = [RunTag("gpubench.complete", "true")]
            if record.history_record is not None:
                # The machine's tag comes after the record it points to: a run found by the tag has the record.
                self._client.log_dict(self.run_id, record.history_record, HISTORY_RECORD_ARTIFACT)
                last_tags.append(RunTag(MACHINE_TAG, _tag_value(record.history_record["machine"])))
            self._client.log_batch(self.run_id, tags=last_tags, synchronous=True)
            self._client.update_run(self.run_id, name=redact(record.run_name))
            self._client.set_terminated(self.run_id, status=status)
        link = run_link(self.config.uri, str(self.experiment_id), str(self.run_id))
        if link:
            console.notice(f"MLflow run {redact(record.run_name)}: {link}")


def log_run(
    config: TrackingConfig, record: RunRecord, *, kept: str = REPORT_KEPT, status: str = FINISHED
) -> TrackingOutcome:
    """Log ``record`` as one MLflow run with ``status``; a warning instead of raising on failure."""
    live = LiveRun.start(config, run_name=record.run_name, params=record.params, tags=record.tags, kept=kept)
    return live.finish(record, status)


def nest_runs(config: TrackingConfig, parent_run_id: str, sweep_tag: str | None, run_ids: Sequence[str]) -> list[str]:
    """Nest ``run_ids`` of the sweep ``sweep_tag`` under ``parent_run_id``; return those that could not be."""
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    with store_lock(config.uri):
        client = MlflowClient(tracking_uri=config.uri)
        experiment_id = client.get_run(parent_run_id).info.experiment_id
        # The runs' tags were stored redacted.
        expected_tag = None if sweep_tag is None else redact(sweep_tag)
        unlinked = []
        for run_id in run_ids:
            try:
                child = client.get_run(run_id)
            except MlflowException:
                unlinked.append(run_id)
                continue
            if child.info.experiment_id != experiment_id or child.data.tags.get("gpubench.sweep") != expected_tag:
                unlinked.append(run_id)
            elif child.data.tags.get(PARENT_RUN_TAG) != parent_run_id:
                client.set_tag(run_id, PARENT_RUN_TAG, parent_run_id)
    return unlinked
