"""The files Hydra writes for a job before gpubench's task runs: their folder, recorded so that a write error can
name it (a full disk's OSError may name no file), and their redaction (they hold the overrides as given). No torch."""

import itertools
import os
import shutil
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from gpubench.output.redact import install_log_redaction, redact

#: The files Hydra saves in a job's ``.hydra/`` folder.
HYDRA_FILES = ("config.yaml", "overrides.yaml", "hydra.yaml")
#: A sweep's own saved config, in its folder.
MULTIRUN_FILE = "multirun.yaml"

#: The folder Hydra writes this run's files under, once the run has started.
_run_folder: list[Path] = []
#: The run's folder and those above it that did not exist as it started (Hydra creates them), the deepest first.
_new_folders: list[Path] = []


def redact_file(path: Path) -> None:
    """Rewrite the text file at ``path`` (if any) with credentials redacted, atomically and only where it changes."""
    try:
        text = path.read_text()
    except FileNotFoundError:  # a launcher that saved no such file
        return
    clean = redact(text)
    if clean != text:
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(clean)
        os.replace(tmp, path)


def redact_hydra_files(job_dir: Path, sweep_dir: Path | None = None) -> None:
    """Redact the files Hydra saved for the job in ``job_dir`` (and a sweep's ``multirun.yaml``)."""
    paths = [job_dir / ".hydra" / name for name in HYDRA_FILES]
    if sweep_dir is not None:
        paths.append(sweep_dir / MULTIRUN_FILE)
    for path in paths:
        redact_file(path)


def remove_new_run_folder() -> None:
    """Remove the folders Hydra created for this run (none that existed before it): a run refused by bad input
    before it started leaves nothing behind. A parent that holds another run's folder stays."""
    if _new_folders:
        shutil.rmtree(_new_folders[0], ignore_errors=True)
    for folder in _new_folders[1:]:
        try:
            folder.rmdir()
        except OSError:
            return


def write_error_message(exc: OSError) -> str:
    """One paragraph for a file that cannot be written (or the run's folder where the OS names none)."""
    if exc.filename is not None:
        where = str(Path(os.fsdecode(exc.filename)).absolute())
    elif _run_folder:
        where = f"a file under {_run_folder[-1]}"
    else:
        where = "a file in the working folder"
    reason = exc.strerror or str(exc) or type(exc).__name__
    return (
        f"cannot write {where} ({reason}). gpubench and Hydra write the report, the job's log and its saved config "
        "under the run's folder (outputs/<date>/<time> in the working folder by default): free space on that disk, "
        "run from a writable folder, or choose another folder with hydra.run.dir=<folder> (hydra.sweep.dir=<folder> "
        "for a sweep with -m)."
    )


class HydraFilesCallback(Callback):
    """Hydra callback (``hydra.callbacks``): records the run's folder, and redacts Hydra's files as each job starts."""

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        install_log_redaction()
        folder = Path(str(config.hydra.run.dir)).absolute()
        _run_folder.append(folder)
        _new_folders[:] = itertools.takewhile(lambda path: not path.exists(), (folder, *folder.parents))

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        install_log_redaction()
        _run_folder.append(Path(str(config.hydra.sweep.dir)).absolute())

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        multirun = OmegaConf.select(config, "hydra.mode") == RunMode.MULTIRUN
        sweep_dir = Path(str(config.hydra.sweep.dir)) if multirun else None
        redact_hydra_files(Path(str(config.hydra.runtime.output_dir)), sweep_dir)
