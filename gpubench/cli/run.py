"""``gpubench run`` (and ``gpubench``, ``python -m gpubench``): compose the Hydra config -> typed config -> the
measured run -> exit code.

Exit codes: 0 when every model was measured (a model that ran out of memory, diverged or was stopped hot is a
measured outcome), 1 when a model failed with an unexpected error, 2 for bad input (config, data, output path,
including the overrides Hydra refuses), 128 + the signal's number when interrupted (130 Ctrl-C/SIGINT, 143
SIGTERM, 129 SIGHUP). A partial report is on disk in every case once the run has started.
"""

import atexit
import os
import sys
from typing import TYPE_CHECKING

from gpubench import signals

if TYPE_CHECKING:
    from omegaconf import DictConfig

    from gpubench.bench.job import RunContext

# First, before the imports below (a second or more): an interrupt while they load ends quietly too.
signals.install()


def _interrupted() -> None:
    """Say which signal stopped the run, and exit with its code."""
    signum = signals.received_signal()
    sys.stderr.write(
        f"gpubench: interrupted ({signals.signal_name(signum)}); the report, where one was started, holds every "
        "model measured so far.\n"
    )
    # Exit at once with the code, after flushing what was written: a plain sys.exit here ended the process by
    # SIGINT (exit status -2) when the interrupt had arrived while Hydra was being imported (the interpreter still
    # counted it as unhandled), which a scheduler reads as killed, not as interrupted and saved. The exit handlers
    # still run first (a sweep's summary, the log handlers' flush).
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(128 + signum)


def _resumed(report_path: str, context: "RunContext") -> bool:
    """True when ``sweep.resume`` skips this job: one of a sweep whose report from an earlier launch is complete
    (see :func:`gpubench.output.sweep.resumable_report`); said on the terminal either way."""
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
    # Imported here, after Hydra has handled --help and --cfg, so those stay fast. The config is typed and checked
    # before the runner (and torch with it) is imported: a bad value is reported in about a second.
    from gpubench.bench.job import RunContext
    from gpubench.config import typed_config
    from gpubench.errors import GpubenchError
    from gpubench.output import console

    context = RunContext.from_hydra(cfg)
    try:
        typed = typed_config(cfg)
        if typed.sweep.resume and _resumed(typed.output, context):
            return 0
        from gpubench.bench.runner import run

        exit_code = run(typed, context)
    except GpubenchError as exc:
        console.error(str(exc))
        exit_code = 2
    except KeyboardInterrupt:
        # Raised by Ctrl-C and by the handled signals; in a sweep this ends the sweep, whose exit handler still
        # writes the summary of the jobs that ran.
        _interrupted()
    # In a sweep the job's code is returned to Hydra instead: exiting here would end the sweep before its other
    # jobs and its summary; the sweep callback exits non-zero at the end when a job failed.
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
