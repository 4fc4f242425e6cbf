"""``gpubench run`` (and ``gpubench``, ``python -m gpubench``): Hydra config -> typed config -> measured run.

Exit codes: 0 every model measured (an OOM or divergence is a measured outcome), 1 a model failed unexpectedly,
2 bad input, 128 + the signal's number when interrupted."""

import atexit
import os
import sys
from typing import TYPE_CHECKING

from gpubench import signals

if TYPE_CHECKING:
    from omegaconf import DictConfig

    from gpubench.bench.job import RunContext

# Before the slow imports below, so that an interrupt while they load ends quietly too.
signals.install()


def _interrupted() -> None:
    """Say which signal stopped the run, and exit with its code."""
    signum = signals.received_signal()
    sys.stderr.write(
        f"gpubench: interrupted ({signals.signal_name(signum)}); the report, where one was started, holds every "
        "model measured so far.\n"
    )
    # os._exit, not sys.exit: an interrupt during Hydra's import would end the process by SIGINT instead.
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(128 + signum)


def _resumed(report_path: str, context: "RunContext") -> bool:
    """True when ``sweep.resume`` skips this job of a sweep, whose report from an earlier launch is complete."""
    from pathlib import Path

    from gpubench.output import console
    from gpubench.output.sweep import resumable_report

    if not context.multirun:
        console.notice("sweep.resume applies to sweeps (-m) only; this single run runs as usual.")
        return False
    if resumable_report(Path(report_path), context.overrides) is None:
        return False
    console.notice(f"job {context.job_num}: skipped (sweep.resume=true), its report {report_path} is complete.")
    return True


def _task(cfg: "DictConfig") -> int:
    # Imported here so that --help, --cfg and a bad value are answered before torch loads.
    from gpubench.bench.job import RunContext
    from gpubench.cli.hydra_files import remove_new_run_folder
    from gpubench.config import typed_config
    from gpubench.errors import GpubenchError
    from gpubench.output import console

    context = RunContext.from_hydra(cfg)
    try:
        try:
            typed = typed_config(cfg)
            if typed.sweep.resume and _resumed(typed.output, context):
                return 0
            from gpubench.bench.preflight import check_inputs

            inputs = check_inputs(typed)
        except GpubenchError:
            # Refused before it started: a single run leaves no folder (a sweep's job folder holds its failure).
            if not context.multirun:
                remove_new_run_folder()
            raise
        from gpubench.bench.runner import run

        exit_code = run(typed, context, inputs)
    except GpubenchError as exc:
        console.error(str(exc))
        exit_code = 2
    except KeyboardInterrupt:
        _interrupted()
    # In a sweep the code goes back to Hydra, so that the other jobs still run.
    if exit_code and not context.multirun:
        sys.exit(exit_code)
    return exit_code


def main() -> None:
    """Run the benchmark with the Hydra overrides in ``sys.argv``; exits with the run's code."""
    try:
        from gpubench.cli import errors as cli_errors

        cli_errors.run_hydra(_task)
    except KeyboardInterrupt:
        _interrupted()
