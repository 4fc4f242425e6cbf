"""The report file, written atomically after every model and read back as a :class:`RunReport`; atomic writers."""

import functools
import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

from gpubench.errors import GpubenchError, OutputError
from gpubench.output.redact import redact_tree
from gpubench.results import ModelResult, ReportFormatError, RunReport

#: The report's file name in a run's folder and among an MLflow run's artifacts.
REPORT_FILE_NAME = "report.json"


class ReportReadError(GpubenchError):
    """A report file cannot be read, is not JSON, or is not a gpubench report; ``reason`` says which."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"{path} {reason}")
        self.path = path
        self.reason = reason


def _json_safe(value: Any) -> Any:
    """Replace NaN/Inf (not valid JSON) by None, recursively; tuples become lists."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    return value


@functools.cache
def _umask() -> int:
    """The process's umask (read once: ``os.umask`` can only be read by setting it, so it is set straight back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically, with the usual new-file permissions; a device (``/dev/stdout``)
    is written in place, as replacing it would replace the device."""
    if path.exists() and not path.is_file() and not path.is_dir():
        path.write_text(text, encoding="utf-8")
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, path)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise


def json_text(content: Any) -> str:
    """``content`` as strict JSON (NaN/Inf as null), credentials redacted, indented, ending in a newline."""
    return json.dumps(redact_tree(_json_safe(content)), indent=2, allow_nan=False) + "\n"


def write_json_atomic(path: Path, content: Any) -> None:
    """Write ``content`` as :func:`json_text` to ``path`` atomically."""
    write_text_atomic(path, json_text(content))


def _unwritable(path: str | os.PathLike[str], exc: OSError, folder: Path) -> OutputError:
    return OutputError(
        f"`output` = {str(path)!r} cannot be written: {exc.strerror or exc} (folder {str(folder)!r}). Give a path "
        "in a writable folder, e.g. output=./report.json."
    )


def check_output_path(path: str | os.PathLike[str]) -> None:
    """Raise OutputError when a report could not be written at ``path`` (a folder, or a folder that cannot be
    written or created); creates nothing: a folder made in the nearest existing one to test it is removed."""
    target = Path(path).expanduser().absolute()
    if target.is_dir():
        raise OutputError(f"`output` = {str(path)!r} is a folder; give a file path such as {path}/report.json.")
    existing = next(folder for folder in target.parents if folder.exists())
    try:
        Path(tempfile.mkdtemp(dir=existing, prefix=".write-check-")).rmdir()
    except OSError as exc:
        raise _unwritable(path, exc, existing) from exc


class ReportWriter:
    """Writes the report atomically; the constructor checks the folder is writable before any model runs."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path).expanduser()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=self.path.parent, prefix=".write-check-"):
                pass
        except OSError as exc:
            raise _unwritable(path, exc, self.path.parent) from exc
        if self.path.is_dir():
            raise OutputError(f"`output` = {str(path)!r} is a folder; give a file path such as {path}/report.json.")

    def write(self, report: RunReport) -> None:
        """Replace the file at ``path`` with ``report``; an OSError becomes an :class:`OutputError` naming the path."""
        try:
            write_json_atomic(self.path, report.to_dict())
        except OSError as exc:
            raise OutputError(
                f"the report {str(self.path)!r} cannot be written: {exc.strerror or exc}. Free space there or give "
                "another path (output=...); the previous version of the report, if any, is unchanged."
            ) from exc


def read_report(path: Path) -> RunReport:
    """The report at ``path``; :class:`ReportReadError` when unreadable, not JSON, or not a report."""
    try:
        content = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ReportReadError(path, f"is not valid JSON ({exc})") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise ReportReadError(path, f"cannot be read ({exc})") from exc
    if not isinstance(content, dict):
        raise ReportReadError(path, "is not a gpubench report (a JSON object)")
    try:
        return RunReport.from_dict(content)
    # Unknown or missing keys raise ReportFormatError; a value of the wrong shape fails in the codec.
    except (ReportFormatError, TypeError, AttributeError) as exc:
        raise ReportReadError(path, f"is not a gpubench report ({exc})") from exc


def _number_problem(value: Any, *, whole: bool = False, positive: bool = True) -> bool:
    """Whether ``value`` is not a finite number above 0 (or at least 0; whole when ``whole``); bools are not."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return True
    if whole and value != int(value):
        return True
    return value <= 0 if positive else value < 0


def measured_values_problem(result: ModelResult) -> str | None:
    """What is wrong with a model's measured values (the schema checks kinds, not ranges), or None."""
    for key, times, positive in (
        ("raw_epoch_times_ms", result.raw_epoch_times_ms, True),
        ("warmup_epoch_times_ms", result.warmup_epoch_times_ms, False),
    ):
        bad = next((t for t in times if _number_problem(t, positive=positive)), None)
        if bad is not None:
            size = "finite positive" if positive else "finite non-negative"
            return f"`{key}` holds {bad!r}, not a {size} number of milliseconds"
    for key, whole, positive in (
        ("steps_per_epoch", True, True),
        ("batch_size", True, True),
        ("calibration_steps", True, False),
        ("samples_per_step", False, True),
        ("updates_per_step", False, True),
        ("calibration_seconds", False, False),
        ("first_step_ms", False, False),
    ):
        value = getattr(result, key)
        if value is not None and _number_problem(value, whole=whole, positive=positive):
            kind = ("a whole number" if whole else "a finite number") + (" above 0" if positive else " of 0 or more")
            return f"`{key}` = {value!r} is not {kind}"
    if result.statistics is not None and _number_problem(result.statistics.mean_ms):
        return f"`statistics.mean_ms` = {result.statistics.mean_ms!r} is not a finite positive number of milliseconds"
    return None
