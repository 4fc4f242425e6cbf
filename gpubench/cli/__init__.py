"""The ``gpubench`` command: ``gpubench [run] KEY=VALUE ...`` is the measured run; ``validate``, ``compare``,
``launch``, ``prices`` and ``rent`` are the other subcommands."""

import importlib
import sys

from gpubench import signals

#: Subcommand -> the module whose ``main(argv)`` runs it (``run`` is Hydra's, reading ``sys.argv``).
SUBCOMMANDS = {
    "run": "gpubench.cli.run",
    "validate": "gpubench.cli.validate",
    "compare": "gpubench.cli.compare",
    "launch": "gpubench.cli.launch",
    "prices": "gpubench.cli.prices",
    "rent": "gpubench.cli.rent",
}


def main(argv: list[str] | None = None) -> None:
    """Dispatch ``argv`` (default ``sys.argv[1:]``) to its subcommand and exit with its code."""
    signals.install()
    args = sys.argv[1:] if argv is None else list(argv)
    name = args[0] if args and args[0] in SUBCOMMANDS else "run"
    if args and args[0] == name:
        args = args[1:]
    if name == "run":
        from gpubench.cli import run

        sys.argv = [sys.argv[0], *args]
        run.main()
        return
    from gpubench.cli.errors import run_command

    module = importlib.import_module(SUBCOMMANDS[name])
    sys.exit(run_command(module.main, args, prog=f"gpubench {name}"))
