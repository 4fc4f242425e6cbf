"""A sweep's MLflow parent run: created when the sweep starts and named in :data:`PARENT_RUN_FILE` in the sweep
folder, which each job reads to nest its run from its start (a file, not an environment variable: every launcher's
jobs see the folder); ended with the sweep's summaries and status, nesting any job run created without it."""

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from gpubench.errors import ConfigError
from gpubench.output import tracking
from gpubench.output.config import TrackingConfig
from gpubench.output.redact import redact

#: The parent run's file, in the sweep folder.
PARENT_RUN_FILE = "mlflow_parent_run.json"
#: What a failure of the parent run's tracking says is kept regardless, at the sweep's start and at its end.
_KEPT = "the sweep runs and its summary files are written"
_KEPT_AT_END = "the summary files were written"
#: How much of the sweep summary the parent's description holds (MLflow's limit on a tag is 8000 characters).
_MAX_DESCRIPTION_CHARS = 7000


@dataclass(frozen=True)
class SweepParent:
    """What :data:`PARENT_RUN_FILE` holds: the parent run's id, store (no credentials), experiment and swept keys."""

    run_id: str
    store: str
    experiment: str
    swept_keys: tuple[str, ...]


def sweep_tracking_config(config: DictConfig) -> TrackingConfig | None:
    """The sweep's ``tracking`` settings, or None when off or invalid (each job then says what is wrong with it)."""
    node = OmegaConf.select(config, "tracking")
    if node is None:
        return None
    try:
        settings = TrackingConfig(**OmegaConf.to_container(node, resolve=True))
    except (ConfigError, TypeError):
        return None
    return settings if settings.enabled else None


def _parsed(overrides: Sequence[str]) -> list[Any]:
    """Hydra's parse of ``overrides`` (one per override), or [] when one cannot be parsed (Hydra says so itself)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    try:
        return OverridesParser.create().parse_overrides(list(overrides))
    except HydraException:
        return []


def swept_keys(overrides: Sequence[str]) -> tuple[str, ...]:
    """The keys the sweep overrides ``overrides`` vary (``a=1,2``, ``a=range(3)``, ``a=choice(x,y)``), in order."""
    return tuple(override.key_or_group for override in _parsed(overrides) if override.is_sweep_override())


def sweep_job(
    sweep_dir: str, job_num: int | None, overrides: Sequence[str], config: TrackingConfig
) -> tracking.SweepJob:
    """The job ``job_num`` of the sweep in ``sweep_dir``: its parent run when :data:`PARENT_RUN_FILE` names one in
    this job's store and experiment, and its ``overrides`` of the swept keys."""
    try:
        saved = json.loads((Path(sweep_dir) / PARENT_RUN_FILE).read_text())
        parent = SweepParent(
            run_id=str(saved["run_id"]),
            store=str(saved["store"]),
            experiment=str(saved["experiment"]),
            swept_keys=tuple(saved["swept_keys"]),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return tracking.SweepJob(sweep_dir=sweep_dir, job_num=job_num)
    same_store = parent.store == tracking.store_identity(config.uri) and parent.experiment == config.experiment
    swept = tuple(
        override
        for override, parsed in zip(overrides, _parsed(overrides), strict=False)
        if parsed.key_or_group in parent.swept_keys
    )
    return tracking.SweepJob(
        sweep_dir=sweep_dir, job_num=job_num, parent_run_id=parent.run_id if same_store else None, swept_overrides=swept
    )


def _task_overrides(config: DictConfig) -> list[str]:
    return [str(o) for o in OmegaConf.select(config, "hydra.overrides.task", default=None) or []]


class SweepRun:
    """The sweep's parent run, live from the sweep's start to its end (see the module docstring)."""

    def __init__(self, config: DictConfig, settings: TrackingConfig) -> None:
        self.settings = settings
        self.sweep_dir = str(config.hydra.sweep.dir)
        overrides = _task_overrides(config)
        swept = [o for o, parsed in zip(overrides, _parsed(overrides), strict=False) if parsed.is_sweep_override()]
        self.name = "sweep · " + (" ".join(swept) or Path(self.sweep_dir).name)
        self.params = {
            "sweep.overrides": " ".join(overrides),
            "sweep.varying_keys": ",".join(swept_keys(overrides)),
            "sweep.launcher": OmegaConf.select(config, "hydra.launcher._target_", default="") or "",
        }
        self.tags = {"gpubench.sweep": self.sweep_dir, "gpubench.sweep_parent": "true"}
        self.swept_keys = swept_keys(overrides)
        self.live: tracking.LiveRun | None = None

    @classmethod
    def create(cls, config: DictConfig) -> "SweepRun | None":
        """The parent run of the sweep ``config`` describes, not created yet; None when tracking is off."""
        settings = sweep_tracking_config(config)
        return None if settings is None else cls(config, settings)

    @staticmethod
    def forget(sweep_dir: Path) -> None:
        """Remove an earlier launch's :data:`PARENT_RUN_FILE`, which must not nest this launch's jobs."""
        (sweep_dir / PARENT_RUN_FILE).unlink(missing_ok=True)

    def begin(self) -> list[str]:
        """Create the parent run (RUNNING) and write :data:`PARENT_RUN_FILE`; return the notices to show."""
        tags = {**self.tags, "gpubench.sweep_status": "running"}
        self.live = tracking.LiveRun.start(self.settings, run_name=self.name, params=self.params, tags=tags, kept=_KEPT)
        if self.live.active:
            parent = SweepParent(
                run_id=str(self.live.run_id),
                store=tracking.store_identity(self.settings.uri),
                experiment=self.settings.experiment,
                swept_keys=self.swept_keys,
            )
            folder = Path(self.sweep_dir)
            folder.mkdir(parents=True, exist_ok=True)
            (folder / PARENT_RUN_FILE).write_text(json.dumps(asdict(parent), indent=1))
        return self.live.new_messages()

    def end(
        self,
        jobs: Sequence[dict[str, Any]],
        artifacts: Sequence[Path],
        summary_markdown: str,
        *,
        aborted: bool,
        interrupted: bool,
    ) -> tracking.TrackingOutcome:
        """End the parent run with the ``jobs``' summaries, the summary files and ``summary_markdown`` as its
        description (KILLED when ``interrupted``, FAILED when ``aborted`` or a job failed), nesting any job run not
        nested yet; a parent that could not be created at the start is created now."""
        failed = sum(job["status"] != "ok" for job in jobs)
        if interrupted:
            status, sweep_status = tracking.KILLED, "interrupted"
        elif aborted:
            status, sweep_status = tracking.FAILED, "aborted"
        else:
            status, sweep_status = (tracking.FAILED, "partial") if failed else (tracking.FINISHED, "ok")
        if len(summary_markdown) > _MAX_DESCRIPTION_CHARS:
            summary_markdown = summary_markdown[:_MAX_DESCRIPTION_CHARS] + "\n\n… (the whole table: sweep_summary.md)"
        record = tracking.RunRecord(
            run_name=f"{self.name} · {len(jobs) - failed}/{len(jobs)} jobs ok"
            + (" · interrupted" if interrupted else ""),
            params=self.params,
            tags={**self.tags, "gpubench.sweep_status": sweep_status, tracking.DESCRIPTION_TAG: summary_markdown},
            metrics={"sweep/jobs": len(jobs), "sweep/jobs_ok": len(jobs) - failed, "sweep/jobs_failed": failed},
            artifacts=list(artifacts),
        )
        if self.live is None or not self.live.active:
            self.live = tracking.LiveRun.start(
                self.settings, run_name=record.run_name, params=record.params, tags=record.tags, kept=_KEPT_AT_END
            )
        outcome = self.live.finish(record, status)
        if outcome.run_id is None:
            return outcome
        warnings = [outcome.warning] if outcome.warning else []
        child_ids = [job["mlflow_run_id"] for job in jobs if job.get("mlflow_run_id")]
        try:
            unlinked = tracking.nest_runs(self.settings, outcome.run_id, self.sweep_dir, child_ids)
        # Any tracking failure must leave the sweep summary files intact.
        except Exception as exc:
            action = "nesting the jobs' runs under the sweep's run"
            warnings.append(tracking.tracking_warning(self.settings, action, exc, _KEPT_AT_END))
            unlinked = []
        if unlinked:
            warnings.append(
                redact(
                    f"{len(unlinked)} job run(s) of the sweep were not found in {self.settings.uri!r} (experiment "
                    f"{self.settings.experiment!r}) and are not nested under its parent run: {', '.join(unlinked)}"
                )
            )
        return tracking.TrackingOutcome(outcome.run_id, " ".join(warnings) or None)
