"""``python -m gpubench``: compose the Hydra config -> typed config -> run -> exit code. Nothing else.

Exit codes: 0 when every model was measured (a model that ran out of memory, diverged or was stopped hot is a
measured outcome), 1 when a model failed with an unexpected error, 2 for bad input (config, data, output path),
130 when interrupted. A partial report is on disk in every case.
"""

import sys

import hydra
from omegaconf import DictConfig

from gpubench.config import register_configs

register_configs()


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def _hydra_main(cfg: DictConfig) -> int:
    # Imported here, after Hydra has handled --help and --cfg, so those stay fast. The config is typed and checked
    # before the runner (and torch with it) is imported: a bad value is reported in about a second.
    from gpubench.config import typed_config
    from gpubench.errors import GpubenchError
    from gpubench.job import RunContext
    from gpubench.output import console

    context = RunContext.from_hydra(cfg)
    try:
        typed = typed_config(cfg)
        from gpubench.runner import run

        exit_code = run(typed, context)
    except GpubenchError as exc:
        console.error(str(exc))
        exit_code = 2
    except KeyboardInterrupt:
        console.error("interrupted; the report holds every model measured so far.")
        sys.exit(130)
    # In a sweep the job's code is returned to Hydra instead: exiting here would end the sweep before its other
    # jobs and its summary; the sweep callback exits non-zero at the end when a job failed.
    if exit_code and not context.multirun:
        sys.exit(exit_code)
    return exit_code


def main() -> None:
    """Console-script entry point (``gpubench ...``), same as ``python -m gpubench``."""
    _hydra_main()


if __name__ == "__main__":
    main()
