"""The files ``data.path`` names (a file, a folder of them or a glob), for any source (DBN, Parquet), and how a
list of files is named in messages."""

import glob
from collections.abc import Sequence
from pathlib import Path

from gpubench.errors import DataError

#: How many names of files without bars a message lists before it says "and N more".
_LISTED_FILES = 5


def resolve_data_paths(path: str | Path, *, suffixes: tuple[str, ...], kind: str) -> list[Path]:
    """Files named by ``path``: the file itself, a folder's visible files ending in ``suffixes`` (sorted), or a glob.

    ``~`` is expanded. Raises DataError naming ``path`` when nothing exists there or no file of the ``kind``
    (e.g. "DBN") is found."""
    text = str(path)
    expanded = Path(text).expanduser()
    wanted = " or ".join(f"*{suffix}" for suffix in suffixes)
    if glob.has_magic(text):
        matches = sorted(Path(name) for name in glob.glob(str(expanded), recursive=True))
        files = [match for match in matches if match.is_file() and match.name.endswith(suffixes)]
        if not files:
            raise DataError(f"The glob data.path={text!r} matches no {kind} files ({wanted}).")
        return files
    if expanded.is_file():
        return [expanded]
    if expanded.is_dir():
        # Hidden files are skipped: they are partial downloads, temporary files or macOS "._" resource forks.
        files = sorted(
            child
            for child in expanded.iterdir()
            if child.is_file() and child.name.endswith(suffixes) and not child.name.startswith(".")
        )
        if not files:
            raise DataError(
                f"The folder {expanded} (data.path) holds no {kind} files ({wanted}); point data.path at a "
                f"folder or glob of {kind} files."
            )
        return files
    raise DataError(
        f"data.path={text!r} does not exist; it must be a {kind} file, a folder of {kind} files ({wanted}) or a "
        "glob such as 'downloads/*.dbn.zst'."
    )


def describe_files(paths: Sequence[Path | str]) -> str:
    """The first few of ``paths``, comma-separated, and how many more there are, for messages."""
    names = [str(path) for path in paths[:_LISTED_FILES]]
    more = len(paths) - len(names)
    return ", ".join(names) + (f" and {more} more" if more else "")
