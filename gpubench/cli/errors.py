"""Hydra's main under a guard: errors Hydra raises while composing the config, and files that cannot be written,
become one paragraph naming the key or file and exit code 2. The guard sets ``HYDRA_FULL_ERROR`` so that Hydra
raises rather than prints, unless the user set it (then the traceback is what they asked for)."""

import itertools
import logging
import os
import re
import sys
from collections.abc import Callable, Sequence
from typing import Any

from gpubench.conf import CONF_DIR

#: Hydra's own lines that do not help a gpubench user.
_DROPPED_PREFIXES = ("full_key:", "object_type", "reference_type", "Set the environment variable", "To append to")
_SEARCH_PATH_LINE = "Config search path"


def _override_of(text: str) -> str | None:
    """The override Hydra names in ``Error merging override X`` / ``Could not override 'X'``, or None."""
    first = text.splitlines()[0] if text else ""
    marker = "Error merging override "
    return first[len(marker) :].strip() if first.startswith(marker) else None


def _flatten(text: str) -> str:
    """Hydra's multi-line message as one paragraph: options listed with tabs become a comma-separated list."""
    parts: list[str] = []
    options: list[str] = []
    for line in text.splitlines():
        if line.startswith(_SEARCH_PATH_LINE):
            break
        if line.startswith("\t"):
            options.append(line.strip())
            continue
        if options:
            parts[-1] = parts[-1] + " " + ", ".join(options) + "."
            options = []
        stripped = line.strip()
        if stripped and not stripped.startswith(_DROPPED_PREFIXES):
            parts.append(stripped)
    if options and parts:
        parts[-1] = parts[-1] + " " + ", ".join(options) + "."
    return " ".join(parts)


def quote_value(text: str) -> str:
    """``text`` quoted in Hydra's override grammar, which reads it back as ``text`` whatever it holds. Hydra
    unescapes only backslashes before a quote or at the end, so only those are doubled."""
    escaped = re.sub(r"(\\*)'", lambda match: match[1] * 2 + "\\'", text)
    escaped = re.sub(r"(\\+)$", lambda match: match[1] * 2, escaped)
    return f"'{escaped}'"


def _quoted(override: str) -> str:
    """The override with its value quoted (:func:`quote_value`)."""
    key, has_value, value = override.partition("=")
    return f"{key}={quote_value(value)}" if has_value else override


def _unparsable_override_message(override: str, detail: str) -> str:
    """The error for an override Hydra's grammar refuses: the override, Hydra's reason and how to quote it."""
    # In one paragraph the lexer's caret points nowhere.
    reason = " ".join(word for word in detail.split() if word != "^").rstrip(".")
    quoted = _quoted(override)
    return (
        f"the override `{override}` cannot be parsed ({reason}). If its value is text (a URL, a path with spaces "
        f"or accented letters), quote the value: `{quoted}`; on a shell, wrap the whole override in double quotes "
        f'too: "{quoted}".'
    )


def _split_override_message(fragment: str, arguments: Sequence[str]) -> str:
    """The error for an argument with no ``=``; where an override precedes it in the command line's
    ``arguments``, a space in its unquoted value split it there: the two are named and quoted as one."""
    at = arguments.index(fragment) if fragment in arguments else 0
    previous = arguments[at - 1] if at > 0 and "=" in arguments[at - 1] else None
    message = f"`{fragment}` is not an override: an override is key=value (`model=mlp`)."
    if previous is None:
        return message
    rest = list(itertools.takewhile(lambda a: "=" not in a and not a.startswith("-"), arguments[at:]))
    quoted = _quoted(" ".join([previous, *rest]))
    return (
        f"{message} A space split the previous one, `{previous}`, in two: the shell splits an unquoted value at "
        f'each space. Quote the value and wrap the whole override in double quotes: "{quoted}".'
    )


def hydra_error_message(exc: BaseException, arguments: Sequence[str] = ()) -> str:
    """One paragraph for an exception Hydra raised while composing the config; names the key where one is known.
    ``arguments`` are the command line's, to find an override a space split in two."""
    from hydra.errors import OverrideParseException
    from omegaconf.errors import ConfigAttributeError, ConfigKeyError, OmegaConfBaseException

    from gpubench.config import unknown_key_message

    cause = exc.__cause__ if isinstance(exc.__cause__, OmegaConfBaseException) else None
    node_error = cause if cause is not None else (exc if isinstance(exc, OmegaConfBaseException) else None)
    override = _override_of(str(exc))
    key = getattr(node_error, "full_key", None) if node_error is not None else None
    if isinstance(node_error, ConfigKeyError | ConfigAttributeError) and key:
        return unknown_key_message(str(key))
    if node_error is not None and key:
        detail = _flatten(str(node_error)).rstrip(".") + "."
        given = f" (the override `{override}`)" if override else ""
        return f"`{key}`{given}: {detail} Give a value of the key's type; `python -m gpubench --cfg job` shows them."
    message = _flatten(str(exc))
    if isinstance(exc, OverrideParseException):
        if "=" not in exc.override:
            return _split_override_message(exc.override, arguments)
        return _unparsable_override_message(exc.override, message)
    if cause is not None:
        message += " " + _flatten(str(cause))
    return message


#: How Hydra's message starts when two of its modes are given together.
_EXCLUSIVE_MODES = "Only one of --run, --multirun"


def _refuse(message: str, user_wants_traceback: bool) -> None:
    """Print ``message`` as the error and exit 2; re-raise instead when the user asked for Hydra's traceback."""
    if user_wants_traceback:
        raise
    from gpubench.output import console

    console.error(message)
    sys.exit(2)


def run_hydra(task: Callable[[Any], int]) -> None:
    """Run ``task`` as gpubench's Hydra main; a composition error is printed as one paragraph and exits 2."""
    import hydra
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    from gpubench.config import register_configs
    from gpubench.output.redact import install_log_redaction, redacted_output

    # Before Hydra starts: its verbose log and its printed config (--cfg, --info) hold the overrides as given.
    install_log_redaction()
    register_configs()
    app = hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="config")(task)
    user_wants_traceback = "HYDRA_FULL_ERROR" in os.environ
    # A log line that cannot be written (a full disk) must not print a traceback over the one error.
    logging.raiseExceptions = False
    if not user_wants_traceback:
        os.environ["HYDRA_FULL_ERROR"] = "1"
    try:
        with redacted_output():
            app()
    # Hydra's errors first: one of them (a config group's missing option) is an OSError too.
    except (HydraException, OmegaConfBaseException) as exc:
        _refuse(hydra_error_message(exc, sys.argv[1:]), user_wants_traceback)
    except ValueError as exc:
        # Any other ValueError is the task's own and keeps its traceback.
        if not str(exc).startswith(_EXCLUSIVE_MODES):
            raise
        _refuse(
            "Only one of --multirun (-m), --cfg, --info, --run and --shell-completion can be given at once: to see "
            "a sweep job's config, drop -m and give that job's values (`python -m gpubench --cfg job model=mlp`); "
            "to run the sweep, drop --cfg.",
            user_wants_traceback,
        )
    except OSError as exc:
        from gpubench.cli.hydra_files import write_error_message

        _refuse(write_error_message(exc), user_wants_traceback)
    finally:
        if not user_wants_traceback:
            os.environ.pop("HYDRA_FULL_ERROR", None)


#: The exit codes of every subcommand: ok, a failure the command measured, bad input.
EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2


def run_command(main: Callable[[list[str]], int], argv: list[str], prog: str) -> int:
    """Run a subcommand's ``main(argv)``: bad input exits :data:`EXIT_BAD_INPUT`, an interrupt 128 + the signal."""
    from gpubench import signals
    from gpubench.errors import GpubenchError
    from gpubench.output import console

    try:
        return main(argv)
    except GpubenchError as exc:
        console.error(f"{prog}: {exc}")
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        console.notice(f"{prog}: interrupted ({signals.signal_name(signals.received_signal())}).")
        return signals.interrupt_exit_code()
