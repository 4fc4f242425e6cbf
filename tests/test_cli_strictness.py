"""Bad input exits 2 with one paragraph naming what is wrong, whoever catches it: Hydra (a value of the wrong type,
an unknown key, an option a group does not have), the schema (a ``+key`` it does not know), the data (a window
longer than the data) or the disk (the report cannot be written)."""

import errno
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from gpubench.cli.errors import hydra_error_message
from gpubench.conf import CONF_DIR
from gpubench.config import register_configs, typed_config
from gpubench.errors import ConfigError, OutputError
from gpubench.output import report_file
from gpubench.output.report_file import ReportWriter, write_json_atomic
from tests.test_runner import MAIN_REPORT

BASE = ["hardware=cpu", "tracking.enabled=false", "experiment=quick", "model=mlp"]


def gpubench(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "HYDRA_FULL_ERROR")}
    environment.update({"OMP_NUM_THREADS": "1", "GPU_BENCHMARK_CACHE_DIR": str(cwd / "cache"), **(env or {})})
    return subprocess.run(
        [sys.executable, "-m", "gpubench", *args], cwd=cwd, env=environment, capture_output=True, text=True, timeout=300
    )


def one_paragraph(stderr: str) -> str:
    """The error paragraph (rich may wrap it on a narrow terminal: joined back)."""
    assert "Traceback" not in stderr
    assert "HYDRA_FULL_ERROR" not in stderr
    return " ".join(stderr.split())


#: What Hydra or the schema refuses (a value of the wrong type, an unknown key, an option a group does not have, an
#: override it cannot parse), and what the error paragraph says.
REFUSALS = [
    ("epochs=abc", "`epochs` (the override `epochs=abc`): Value 'abc' of type 'str' could not be converted to "),
    ("epochs=2.5", "`epochs` (the override `epochs=2.5`): Value '2.5' of type 'float' could not be converted"),
    ("foo=1", "`foo` is not a gpubench config key"),
    ("+foo=1", "`foo` is not a gpubench config key"),
    (
        "+statistics.confidence=0.99",
        "`statistics.confidence` is not a gpubench config key, so the value given for it would be ignored. "
        "Did you mean `statistics.confidence_level`",
    ),
    ("+workloads.mlp.widow=8", "Did you mean `workloads.mlp.window`"),
    ("data=nosuch", "Could not find 'data/nosuch' Available options in 'data': dbn, parquet, synthetic."),
    ("model=transformer", "Could not find 'model/transformer' Available options in 'model': all, custom, dqn,"),
    ("hardware=nosuchcard", "Could not find 'hardware/nosuchcard' Available options in 'hardware': a10, a100_40gb,"),
    ("model=model_schema", "Could not find 'model/model_schema'"),
    ("hardware=hardware_schema", "Could not find 'hardware/hardware_schema'"),
    ("epochs=[", "the override `epochs=[` cannot be parsed (no viable alternative at input"),
]

#: Refusals whose command-line run is in the slow pass: each one's message is pinned in process below, and the
#: default run keeps a command-line run of each kind (Hydra's type error and unknown key, the schema's unknown key,
#: a missing option, an unparsable override).
CLI_IN_SLOW_PASS = {"epochs=2.5", "+foo=1", "+workloads.mlp.widow=8", "model=model_schema", "hardware=hardware_schema"}


def refusal(override: str) -> str:
    """The error paragraph for ``*BASE, override``, in process: Hydra's composition error as the command line words
    it (:func:`gpubench.cli.errors.hydra_error_message`), else the typed config's ConfigError (the schema's check)."""
    from hydra import compose, initialize_config_dir
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    register_configs()
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            cfg = compose(config_name="config", overrides=[*BASE, override])
    except (HydraException, OmegaConfBaseException) as exc:
        return hydra_error_message(exc)
    with pytest.raises(ConfigError) as raised:
        typed_config(cfg)
    return str(raised.value)


@pytest.mark.parametrize(("override", "expected"), REFUSALS)
def test_what_hydra_or_the_schema_refuses_is_named_in_one_paragraph(override, expected):
    message = refusal(override)
    assert expected in message and "\n" not in message


@pytest.mark.parametrize(
    ("override", "expected"),
    [pytest.param(*case, marks=pytest.mark.slow) if case[0] in CLI_IN_SLOW_PASS else case for case in REFUSALS],
)
def test_what_hydra_or_the_schema_refuses_exits_2_naming_it(gpubench_once, override, expected):
    # Run once per session: tests/test_cli.py reads the unknown options' runs too.
    job = gpubench_once(*BASE, override)
    completed = job.completed
    assert completed.returncode == 2, completed.stderr
    message = one_paragraph(completed.stderr)
    assert message.startswith("gpubench: error: ")
    assert expected in message
    assert not (job.folder / "outputs").exists() or not list((job.folder / "outputs").glob("*/*/report.json"))


def test_the_schema_options_are_not_choices_in_help(gpubench_once):
    # The same run as tests/test_cli.py's help test.
    completed = gpubench_once("--help").completed
    assert completed.returncode == 0
    assert "_schema" not in completed.stdout
    assert "mlp" in completed.stdout and "rtx3050ti" in completed.stdout


def test_a_user_who_asks_for_hydras_full_error_gets_the_traceback(tmp_path):
    completed = gpubench(tmp_path, *BASE, "epochs=abc", env={"HYDRA_FULL_ERROR": "1"})
    assert completed.returncode == 1
    assert "Traceback" in completed.stderr and "ConfigCompositionException" in completed.stderr


def test_a_window_too_large_for_the_data_is_a_config_error_before_any_model_runs(tmp_path):
    completed = gpubench(
        tmp_path,
        "hardware=cpu",
        "tracking.enabled=false",
        "experiment=quick",
        "model.names=[mlp,tft]",
        "workloads.tft.encoder_length=100000",
        "hardware.burn_in_max_seconds=0",
    )
    assert completed.returncode == 2, completed.stderr
    message = one_paragraph(completed.stderr)
    assert "`workloads.tft.encoder_length` = 100000 is too large for the data: it makes a window of 100004 bars" in (
        message
    )
    # Refused before measuring (the quick experiment's decoder is 4 bars long): no model epoch was run.
    assert "mlp measured epoch" not in completed.stderr


def test_an_unwritable_report_is_an_output_error_naming_the_path(tmp_path, monkeypatch):
    writer = ReportWriter(tmp_path / "run" / "report.json")
    writer.write(MAIN_REPORT)
    before = writer.path.read_text()

    def disk_full(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(report_file.os, "fsync", disk_full)
    with pytest.raises(OutputError) as raised:
        writer.write(MAIN_REPORT)
    message = str(raised.value)
    assert str(writer.path) in message and "No space left on device" in message
    # The old report is intact and no temp file is left behind.
    assert writer.path.read_text() == before
    assert sorted(p.name for p in writer.path.parent.iterdir()) == ["report.json"]


# Slow (4 s): the message is pinned in process just above, and an output error's exit 2 on the command line by
# tests/test_cli.py (output=/proc/forbidden/report.json).
@pytest.mark.slow
def test_a_full_disk_during_a_run_exits_2_naming_the_report(tmp_path):
    # The fsync fake is installed through sitecustomize in the child: the first report write fails as a full disk.
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(
        "import errno, os\n"
        "def _full(fd):\n"
        "    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))\n"
        "os.fsync = _full\n"
    )
    report = tmp_path / "out" / "report.json"
    pythonpath = os.pathsep.join([str(hook), os.environ.get("PYTHONPATH", "")])
    completed = gpubench(
        tmp_path, *BASE, f"output={report}", "hardware.burn_in_max_seconds=0", env={"PYTHONPATH": pythonpath}
    )
    assert completed.returncode == 2, completed.stderr
    message = one_paragraph(completed.stderr)
    assert f"the report '{report}' cannot be written: No space left on device" in message


@pytest.mark.parametrize("umask", [0o022, 0o027, 0o077])
def test_the_report_follows_the_umask(tmp_path, monkeypatch, umask):
    report_file._umask.cache_clear()
    previous = os.umask(umask)
    try:
        write_json_atomic(tmp_path / "report.json", {"a": 1})
    finally:
        os.umask(previous)
        report_file._umask.cache_clear()
    assert stat.S_IMODE((tmp_path / "report.json").stat().st_mode) == 0o666 & ~umask
    assert json.loads((tmp_path / "report.json").read_text()) == {"a": 1}


def test_hydra_error_message_joins_hydras_lines_into_one_paragraph():
    from hydra.errors import MissingConfigException

    exc = MissingConfigException(
        "In 'config': Could not find 'model/x'\n\nAvailable options in 'model':\n\tall\n\tmlp\n"
        "Config search path:\n\tprovider=hydra, path=pkg://hydra.conf",
        missing_cfg_file="model/x",
    )
    assert hydra_error_message(exc) == "In 'config': Could not find 'model/x' Available options in 'model': all, mlp."
