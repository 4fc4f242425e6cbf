"""What Hydra knows about the job being run; no torch import, so the entry point reads it before the runner."""

from dataclasses import dataclass, field
from pathlib import Path

from omegaconf import DictConfig

from gpubench.output.redact import redact


@dataclass(frozen=True)
class RunContext:
    """What Hydra knows about this job: where it writes, whether it is one job of a sweep, what was overridden."""

    run_dir: Path
    multirun: bool = False
    sweep_dir: str | None = None
    job_num: int | None = None
    overrides: tuple[str, ...] = ()
    choices: dict[str, str] = field(default_factory=dict)
    #: The job's MLflow run (None without tracking), so that a job ended early still names it.
    mlflow_run_id: str | None = None

    @classmethod
    def from_hydra(cls, cfg: DictConfig) -> "RunContext":
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode

        hydra_cfg = HydraConfig.get()
        multirun = hydra_cfg.mode == RunMode.MULTIRUN
        return cls(
            run_dir=Path(hydra_cfg.runtime.output_dir),
            multirun=multirun,
            sweep_dir=str(hydra_cfg.sweep.dir) if multirun else None,
            job_num=int(hydra_cfg.job.num) if multirun else None,
            # A credential in an override (tracking.uri) must not be stored.
            overrides=tuple(redact(override) for override in hydra_cfg.overrides.task),
            choices={k: str(v) for k, v in hydra_cfg.runtime.choices.items() if not k.startswith("hydra")},
        )
