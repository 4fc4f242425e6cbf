"""Every shell command in the README's code blocks, run as printed (issue 22): those a CPU can run, one after another
in a temporary folder with its own HOME, caches and MLflow store, as a user would after cloning; the others are
listed in :data:`NOT_RUN` with the reason. A command the README gains is run unless it is listed there, and a
listed command the README no longer prints fails the listing's test: the two cannot drift apart."""

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from test_cli import assert_the_keys_main_wrote
from test_readme import ROOT, readme_blocks

#: The README's commands that are not run here, each with the reason. Installing is not among them: a chain that
#: starts with ``pip install ... &&`` is run from its next command on (CI installs the package and its extras in
#: steps of its own).
NOT_RUN = {
    "python -m pytest -q -n 2 --dist loadfile": "the test suite itself: CI runs it",
    "python -m gpubench": "the full benchmark of four models: minutes on a CPU (its smoke test is run)",
    "python -m gpubench model=tft epochs=40": "a full-size TFT for 40 epochs: minutes on a CPU",
    "python -m gpubench hardware=rtx3050ti": "caps a larger GPU's VRAM to the card's: needs a GPU",
    "python -m gpubench data=dbn \"data.path='~/databento/*.dbn.zst'\"": "needs the user's Databento files",
    "mlflow ui --backend-store-uri sqlite:///mlruns/mlflow.db": "a web server that runs until it is stopped",
    "python -m gpubench.prices refresh": "fetches prices over the network (gpuhunt)",
}

#: Seconds one command may take before the test calls it hung.
COMMAND_TIMEOUT_S = 300


def strip_comment(line: str) -> str:
    """``line`` without its shell comment: from the first ``#`` outside quotes that starts a word."""
    quote = None
    for index, char in enumerate(line):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (index == 0 or line[index - 1].isspace()):
            return line[:index].rstrip()
    return line.rstrip()


def readme_commands() -> list[str]:
    """Every command of the README's ``bash`` blocks as printed, a backslash-continued line joined to the next and
    the comment left out."""
    commands = []
    for block in readme_blocks("bash"):
        pending = ""
        for line in block.splitlines():
            if line.rstrip().endswith("\\"):
                pending += line.rstrip()[:-1].rstrip() + " "
                continue
            command = strip_comment(pending + line.strip())
            pending = ""
            if command:
                commands.append(" ".join(command.split()))
    return commands


def without_install(command: str) -> str:
    """``command`` from its first part that is not ``pip install`` (``""`` when it only installs)."""
    parts = command.split(" && ")
    while parts and parts[0].startswith("pip install "):
        parts.pop(0)
    return " && ".join(parts)


def commands_to_run() -> list[str]:
    """The README's commands this test runs: all of them, less the installs and :data:`NOT_RUN`."""
    return [c for c in map(without_install, readme_commands()) if c and c not in NOT_RUN]


def test_every_readme_command_is_run_or_listed_with_its_reason():
    commands = readme_commands()
    assert 'pip install -e ".[dev]" && python -m gpubench experiment=quick' in commands  # the extraction works
    stale = sorted(set(NOT_RUN) - set(map(without_install, commands)))
    assert not stale, f"listed as not run, but no longer in the README: {stale}"
    assert all(reason.strip() for reason in NOT_RUN.values())
    # The first screen's quick run is run, not skipped with its install.
    assert "python -m gpubench experiment=quick" in commands_to_run()


@pytest.fixture(scope="module")
def user_folder(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """A folder laid out as the README's reader has it: the checkout's files that the commands name (at the same
    relative paths), the README's Python files (``# mytrain.py`` blocks), and an environment of its own: a temporary
    HOME (so the synthetic data cache), no inherited MLflow, Hydra or gpubench settings, and ``python`` the
    interpreter running these tests, with this checkout importable."""
    folder = tmp_path_factory.mktemp("readme")
    for block in readme_blocks("python"):
        first = block.splitlines()[0]
        if re.fullmatch(r"# [\w.]+\.py", first):
            (folder / first[2:]).write_text(block, encoding="utf-8")
    for command in commands_to_run():
        for word in shlex.split(command):
            if not word.startswith(("/", "-")) and (ROOT / word).is_file():
                (folder / word).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(ROOT / word, folder / word)
    bin_folder = folder / ".bin"
    bin_folder.mkdir()
    python = bin_folder / "python"
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    python.chmod(0o755)
    inherited = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("MLFLOW_", "GPU_BENCHMARK_", "XDG_")) and key != "HYDRA_FULL_ERROR"
    }
    home = folder / ".home"
    home.mkdir()
    env = {
        **inherited,
        "HOME": str(home),
        "PATH": f"{bin_folder}{os.pathsep}{inherited.get('PATH', '')}",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), inherited.get("PYTHONPATH")])),
        # One OpenMP thread: torch's threads spinning against the other processes of a 2-core CI machine can make
        # a CPU step many times slower (see conftest.py); gpubench sets its own intra-op threads from the load.
        "OMP_NUM_THREADS": "1",
    }
    return folder, env


@pytest.fixture(scope="module")
def readme_run(user_folder) -> Callable[[str], subprocess.CompletedProcess]:
    """A README command run in :func:`user_folder`, once for the module: the tests that read its outcome share it."""
    folder, env = user_folder
    done: dict[str, subprocess.CompletedProcess] = {}

    def run(command: str) -> subprocess.CompletedProcess:
        if command not in done:
            done[command] = subprocess.run(
                ["bash", "-c", command], cwd=folder, env=env, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S
            )
        return done[command]

    return run


@pytest.mark.slow
@pytest.mark.parametrize("command", commands_to_run())
def test_the_readme_command_runs_as_printed(readme_run, command):
    completed = readme_run(command)
    assert completed.returncode == 0, f"{command}\n{completed.stdout[-2000:]}\n{completed.stderr[-3000:]}"
    words = shlex.split(command)
    if words[:3] == ["python", "-m", "gpubench"] and "--help" not in words:
        # The README promises a verdict from every run it shows, and a quick run's says it is a smoke test.
        assert "Recommendation" in completed.stdout, completed.stdout[-3000:]
        if "experiment=quick" in words:
            assert "Recommendation (smoke test: tiny shapes, not your training):" in completed.stdout


#: The first screen's quick run: the four seed models, tiny shapes, on the best device found.
QUICK_RUN = "python -m gpubench experiment=quick"


@pytest.mark.slow
def test_the_readme_quick_run_writes_a_typed_report_with_the_keys_main_wrote(user_folder, readme_run):
    # Main's report (tests/test_cli.py) is of this command with hardware=cpu and tracking.enabled=false: on a
    # machine without a GPU, where CI runs, it is the same run, tracked (its MLflow run id is a key explained there).
    folder, _ = user_folder
    completed = readme_run(QUICK_RUN)
    assert completed.returncode == 0, completed.stderr[-3000:]
    reports = [json.loads(path.read_text()) for path in folder.glob("outputs/*/*/report.json")]
    (written,) = [report for report in reports if report["run"]["overrides"] == QUICK_RUN.split()[3:]]
    if written["hardware"]["measured_on"] != "cpu":
        pytest.skip("main's report is of a CPU run; here the quick run found a GPU")
    assert_the_keys_main_wrote(written)


def single_runs_not_run() -> list[str]:
    """The :data:`NOT_RUN` commands that are one ``python -m gpubench`` job (not a sweep, not another module)."""
    return [c for c in NOT_RUN if shlex.split(c)[:3] == ["python", "-m", "gpubench"] and "-m" not in shlex.split(c)[3:]]


@pytest.mark.slow
@pytest.mark.parametrize("command", single_runs_not_run())
def test_a_readme_run_too_long_or_needing_a_gpu_still_composes(user_folder, command):
    # Not run, but composed: its overrides must parse (a path with * or ~ needs Hydra's quotes inside the shell's)
    # and name real keys and options, which --cfg job checks without measuring anything.
    folder, env = user_folder
    completed = subprocess.run(
        ["bash", "-c", f"{command} --cfg job"], cwd=folder, env=env, capture_output=True, text=True, timeout=120
    )
    assert completed.returncode == 0, f"{command}\n{completed.stderr[-3000:]}"
    assert completed.stdout.startswith("model:"), completed.stdout[:500]
