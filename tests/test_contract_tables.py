"""The bad-input tables of docs/contract.md ("Bad input, entry point by entry point"), row by row: each command runs
in a folder of its own and must exit with the row's code, its stderr holding every fragment the row quotes; each API
call must raise the row's exception with those fragments. The doc and the behaviour cannot drift apart.

A command runs as ``gpubench.cli.main(argv)`` in a forked child of this process, which has imported gpubench once: a
process of its own (its exit code, stdout, stderr and working folder), without the 2-4 s an interpreter takes to
start and import torch, so the tables run in well under a minute."""

import os
import re
import shlex
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

import gpubench
from gpubench.errors import GpubenchError
from tests.test_contract import linear_build

CONTRACT = Path(__file__).resolve().parents[1] / "docs" / "contract.md"
SECTION = "## Bad input, entry point by entry point"
REPORT = Path(__file__).parent / "fixtures" / "report_main_1092cdc_cpu_quick.json"
#: A code span of Markdown: its backticks, then its text (one space trimmed each side when it has them both).
CODE_SPAN = re.compile(r"(`+)(.+?)(?<!`)\1(?!`)")
#: What a child gets to finish; every row fails at its input checks, in seconds.
ROW_LIMIT_S = 120


@dataclass(frozen=True)
class Row:
    """One table row: the entry point's heading, the command (or API call), the fragments and the exit column."""

    entry_point: str
    call: str
    fragments: tuple[str, ...]
    exit: str
    needs_no_gpu: bool


def code_spans(cell: str) -> list[str]:
    spans = []
    for match in CODE_SPAN.finditer(cell):
        text = match[2]
        spans.append(text[1:-1] if text.startswith(" ") and text.endswith(" ") and text.strip() else text)
    return spans


def contract_rows() -> list[Row]:
    """Every row of every table in the section, with its entry point's heading."""
    text = CONTRACT.read_text()
    section = text[text.index(SECTION) :]
    following = section.find("\n## ", len(SECTION))
    section = section if following < 0 else section[:following]
    rows, heading = [], ""
    for line in section.splitlines():
        if line.startswith("### "):
            heading = line[4:]
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")] if line.startswith("| ") else []
        if len(cells) != 3 or cells[0] == "input" or set(cells[0]) <= {"-", " "}:
            continue
        call, fragments = code_spans(cells[0])[0], tuple(code_spans(cells[1]))
        rows.append(Row(heading, call, fragments, cells[2], needs_no_gpu="(no CUDA GPU)" in cells[0]))
    return rows


ROWS = contract_rows()


@pytest.fixture(scope="module", autouse=True)
def warm_parent() -> None:
    """What every child would load again, loaded once here: the subcommands' modules, the runner and Hydra's
    plugins (found by one composition)."""
    import importlib

    from hydra import compose, initialize_config_dir

    from gpubench.cli import SUBCOMMANDS
    from gpubench.conf import CONF_DIR
    from gpubench.config import register_configs

    for name, module in SUBCOMMANDS.items():
        if name != "run":  # its import installs the signal handlers: the child's business
            importlib.import_module(module)
    importlib.import_module("gpubench.bench.runner")
    register_configs()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        compose(config_name="config")


def test_the_section_has_a_table_for_every_entry_point():
    headings = {row.entry_point.split("`")[1] if "`" in row.entry_point else row.entry_point for row in ROWS}
    commands = {"gpubench", *(f"gpubench {name}" for name in ("validate", "compare", "launch", "prices", "rent"))}
    assert commands | {"gpubench.benchmark"} <= headings | {"gpubench.benchmark"}
    assert any(row.call.startswith("gpubench.benchmark(") for row in ROWS)
    assert all(row.fragments for row in ROWS) and len(ROWS) >= 40


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """The folder a row runs in, holding the files the section names."""
    work = tmp_path / "work"
    work.mkdir()
    shutil.copy(REPORT, work / "report.json")
    (work / "broken.json").write_text('{"status": ')
    (work / "empty.json").write_text("{}")
    (work / "empty").mkdir()
    (work / "a_file").write_text("")
    return work


def run_in_child(argv: list[str], cwd: Path, cache: Path) -> tuple[int, str]:
    """``gpubench.cli.main(argv)`` in a forked child working in ``cwd``: its exit code and its stderr."""
    stdout_path, stderr_path = cwd.parent / "stdout.txt", cwd.parent / "stderr.txt"
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 1
        try:
            os.chdir(cwd)
            for fd, path in ((1, stdout_path), (2, stderr_path)):
                os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), fd)
            sys.stdout, sys.stderr = open(1, "w", closefd=False), open(2, "w", closefd=False)  # noqa: SIM115
            for name in ("MLFLOW_TRACKING_URI", "HYDRA_FULL_ERROR", "GPU_BENCHMARK_OUTPUT"):
                os.environ.pop(name, None)
            os.environ.update({"GPU_BENCHMARK_CACHE_DIR": str(cache), "OMP_NUM_THREADS": "1"})
            sys.argv = ["gpubench", *argv]
            from gpubench.cli import main

            main(argv)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except BaseException:
            import traceback

            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    deadline = time.monotonic() + ROW_LIMIT_S
    while (waited := os.waitpid(pid, os.WNOHANG))[0] == 0:
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            pytest.fail(f"{argv} ran past {ROW_LIMIT_S} s: it was not refused at its input checks")
        time.sleep(0.02)
    return os.waitstatus_to_exitcode(waited[1]), stderr_path.read_text()


def holds(message: str, fragment: str) -> bool:
    """Whether ``fragment`` is in ``message``, line breaks (the console wraps at its width) read as spaces."""
    return " ".join(fragment.split()) in " ".join(message.split())


def tree(folder: Path) -> set[str]:
    return {str(path.relative_to(folder)) for path in folder.rglob("*")}


@pytest.mark.parametrize("row", ROWS, ids=[row.call for row in ROWS])
def test_each_row_of_the_contract_tables_holds(row: Row, folder: Path, tmp_path: Path, monkeypatch):
    if row.needs_no_gpu and torch.cuda.is_available():
        pytest.skip("the row is about a machine without a CUDA GPU")
    before = tree(folder)
    if row.call.startswith("gpubench.benchmark("):
        monkeypatch.chdir(folder)
        monkeypatch.setenv("GPU_BENCHMARK_CACHE_DIR", str(tmp_path / "cache"))
        with pytest.raises(GpubenchError) as raised:
            eval(row.call, {"gpubench": gpubench, "build": linear_build})  # the doc's own call, as a user types it
        assert type(raised.value).__name__ == row.exit
        message = str(raised.value)
    else:
        argv = shlex.split(row.call)
        assert argv[0] == "gpubench", row.call
        exit_code, message = run_in_child(argv[1:], folder, tmp_path / "cache")
        assert str(exit_code) == row.exit, message[-3000:]
        assert "Traceback" not in message
    missing = [fragment for fragment in row.fragments if not holds(message, fragment)]
    assert not missing, f"{missing} not in: {message}"
    # Refused before anything was written: no outputs/, no mlruns/, no MLflow store in the folder.
    assert tree(folder) == before
