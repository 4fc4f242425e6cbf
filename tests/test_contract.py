"""The input contract (issue 23) as a user meets it: bad values, unparsable overrides, full and read-only disks,
a user's build that exits, and test collection on a machine without mlflow. Each case runs ``python -m gpubench``
in a temp folder or calls ``gpubench.benchmark``; every refusal is one paragraph naming the key, file or value and
exit code 2, never a traceback."""

import math
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_the_gpu_tests_are_collected_where_mlflow_is_not_installed(tmp_path):
    # A package named mlflow that fails to import stands for a machine without mlflow: collection must skip the
    # modules that need it, not stop (`pytest -m gpu` collects every module before it selects).
    stub = tmp_path / "stub" / "mlflow"
    stub.mkdir(parents=True)
    (stub / "__init__.py").write_text("raise ImportError('No module named mlflow (test stub)')\n")
    completed = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", "gpu", "-p", "no:cacheprovider", "tests"],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(stub.parent), str(REPO)])},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert completed.returncode == 0, completed.stdout[-3000:]
    assert "error" not in completed.stdout.splitlines()[-1]
    assert "tests/gpu/test_custom_gpu.py" in completed.stdout


# ------------------------------------------------------------------------------------------------ overrides

BASE = ("hardware=cpu", "tracking.enabled=false", "experiment=quick", "model=mlp", "hardware.burn_in_max_seconds=0")


def one_paragraph(stderr: str) -> str:
    """The error paragraph (rich may wrap it on a narrow terminal: joined back); no traceback."""
    assert "Traceback" not in stderr
    return " ".join(stderr.split())


def composed_value(override: str, key: str):
    """The value of ``key`` once ``override`` is composed (in process), as Hydra reads the override."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from gpubench.conf import CONF_DIR
    from gpubench.config import register_configs

    register_configs()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return OmegaConf.select(compose(config_name="config", overrides=[*BASE, override]), key)


@pytest.mark.parametrize(
    ("override", "key", "value"),
    [
        ("data.path=/data/dé/bars.dbn.zst", "data.path", "/data/dé/bars.dbn.zst"),
        ("tracking.uri=http://127.0.0.1:5078/?user=x", "tracking.uri", "http://127.0.0.1:5078/?user=x"),
    ],
)
def test_an_unparsable_override_is_named_with_the_quoted_form_that_parses(tmp_path, override, key, value):
    from gpubench.cli.errors import hydra_error_message

    with pytest.raises(Exception) as raised:
        composed_value(override, key)
    message = hydra_error_message(raised.value)
    assert message.startswith(f"the override `{override}` cannot be parsed (")
    quoted = message.split("quote the value: `", 1)[1].split("`", 1)[0]
    assert quoted.startswith(f"{key}='") and "\n" not in message
    # The advice works: the quoted override gives the value meant.
    assert composed_value(quoted, key) == value


def test_an_unparsable_override_exits_2_naming_it_and_keeps_its_secret(tmp_path):
    from tests.conftest import run_gpubench

    completed = run_gpubench(tmp_path, *BASE, "tracking.uri=http://127.0.0.1:5078/?token=SECRET42")
    assert completed.returncode == 2, completed.stderr
    message = one_paragraph(completed.stderr)
    assert "the override `tracking.uri=http://127.0.0.1:5078/?token=***` cannot be parsed" in message
    assert "`tracking.uri='http://127.0.0.1:5078/?token=***'`" in message
    assert "SECRET42" not in completed.stdout + completed.stderr


def test_an_override_a_space_split_is_named_with_the_whole_override_quoted(tmp_path):
    from tests.conftest import run_gpubench

    # The shell's split of an unquoted `data.path=/tmp/my data é`: Hydra meets `data` with no `=`.
    completed = run_gpubench(tmp_path, *BASE, "data.path=/tmp/my", "data", "é", "epochs=3")
    assert completed.returncode == 2, completed.stderr
    message = one_paragraph(completed.stderr)
    assert "`data` is not an override: an override is key=value" in message
    assert "A space split the previous one, `data.path=/tmp/my`, in two" in message
    assert "quote the value" not in message
    quoted = message.split('double quotes: "', 1)[1].rsplit('"', 1)[0]
    assert quoted == "data.path='/tmp/my data é'"
    # The advice works: the quoted override gives the path meant.
    assert composed_value(quoted, "data.path") == "/tmp/my data é"


# ------------------------------------------------------------------------------------------------ the Python API


def linear_build(batch_size, device):
    import torch

    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

    def step():
        loss = model(torch.randn(batch_size, 4)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss.detach()

    return step


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"overrides": ["epochs=abc"]}, "`epochs` (the override `epochs=abc`): Value 'abc' of type 'str' could not"),
        ({"nosuch_key": 1}, "`nosuch_key` is not a gpubench config key"),
        ({"batch_size": "sixty"}, "`workloads.custom.batch_size` (the override `workloads.custom.batch_size=sixty`)"),
        ({"batch_size": None}, "`workloads.custom.batch_size` (the override `workloads.custom.batch_size=null`)"),
        ({"epochs": float("nan")}, "`epochs` (the override `epochs=nan`): Value 'nan' of type 'float' could not"),
    ],
)
def test_the_api_raises_the_config_error_the_command_line_prints(tmp_path, monkeypatch, options, expected):
    from gpubench.bench.api import benchmark
    from gpubench.errors import ConfigError
    from gpubench.models.custom import registry

    monkeypatch.chdir(tmp_path)
    arguments = {"batch_size": 8, **options}
    with pytest.raises(ConfigError) as raised:
        benchmark(linear_build, **arguments)
    message = str(raised.value)
    assert expected in message and "\n" not in message
    assert "Error merging override" not in message and "+nosuch_key" not in message
    assert not registry._FACTORIES and not (tmp_path / "outputs").exists()


def test_the_api_refuses_a_build_that_is_not_callable_naming_the_argument(tmp_path, monkeypatch):
    from gpubench.bench.api import benchmark
    from gpubench.errors import ConfigError
    from gpubench.models.custom import registry

    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as raised:
        benchmark("notcallable", batch_size=8)
    message = str(raised.value)
    assert message.startswith("`build` = 'notcallable' is not callable: gpubench.benchmark's first argument")
    assert "registry" not in message and "workloads.custom.factory" not in message
    assert not registry._FACTORIES


# ------------------------------------------------------------------------------------------------ finite numbers


def float_keys() -> list[str]:
    """Every key of the schema that holds a float (a FloatNode, optional or not)."""
    from omegaconf import FloatNode, OmegaConf

    from gpubench.config import _schema, schema_keys

    def node(key: str):
        parent, _, leaf = key.rpartition(".")
        return (OmegaConf.select(schema, parent) if parent else schema)._get_node(leaf)

    schema = _schema()
    return [key for key in schema_keys() if isinstance(node(key), FloatNode)]


def test_every_float_key_refuses_infinity_and_nan_naming_the_key():
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from gpubench.conf import CONF_DIR
    from gpubench.config import register_configs, typed_config
    from gpubench.errors import ConfigError

    keys = float_keys()
    assert len(keys) > 40 and "epoch.min_seconds" in keys and "decision.local_max_hours" in keys
    register_configs()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        composed = compose(config_name="config", overrides=[*BASE, "output=report.json"])
    typed_config(composed)  # valid as composed: each refusal below is the one value's
    for key in keys:
        for value in (math.inf, -math.inf, math.nan):
            cfg = composed.copy()
            OmegaConf.update(cfg, key, value)
            with pytest.raises(ConfigError, match=rf"^`{key}` = -?(inf|nan) is not valid: it must be a finite number"):
                typed_config(cfg)


@pytest.mark.parametrize("override", ["epoch.min_seconds=inf", "decision.plan.samples.mlp=inf"])
def test_infinity_exits_2_naming_the_key_before_anything_is_measured(tmp_path, override):
    from tests.conftest import run_gpubench

    completed = run_gpubench(tmp_path, *BASE, override)
    assert completed.returncode == 2, completed.stderr
    key = override.split("=")[0]
    assert f"`{key}` = inf is not valid: it must be a finite number" in one_paragraph(completed.stderr)
    assert not list(tmp_path.glob("outputs/*/*/report.json"))


# ------------------------------------------------------------------------------------------------ the user's code

#: A user's module: a build that exits as argparse does on a command line it does not know, a step that exits, and
#: a step that returns its loss as a Python float (which gpubench refuses: `.item()` synchronises every step).
USER_MODULE = textwrap.dedent(
    """
    import sys

    import torch


    def _linear(batch_size, device, finish):
        model = torch.nn.Linear(4, 1).to(device)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

        def step():
            loss = model(torch.randn(batch_size, 4, device=device)).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            return finish(loss)

        return step


    def exits(batch_size, device):
        sys.exit(0)


    def step_exits(batch_size, device):
        return _linear(batch_size, device, lambda loss: sys.exit(0))


    def float_loss(batch_size, device):
        return _linear(batch_size, device, lambda loss: loss.item())
    """
)


@pytest.fixture(scope="module")
def cache_env(tmp_path_factory) -> dict[str, str]:
    """The synthetic market's cache, shared by the module's command-line runs."""
    return {"GPU_BENCHMARK_CACHE_DIR": str(tmp_path_factory.mktemp("cache"))}


def test_a_build_that_calls_sys_exit_is_a_bad_factory_naming_the_key(tmp_path, cache_env):
    from tests.conftest import run_gpubench

    (tmp_path / "mytrain.py").write_text(USER_MODULE)
    completed = run_gpubench(tmp_path, *BASE, "model=custom", "workloads.custom.factory=mytrain:exits", env=cache_env)
    assert completed.returncode == 2, completed.stderr
    message = one_paragraph(completed.stderr)
    assert "`workloads.custom.factory` = 'mytrain:exits' is not valid: mytrain.exits(64, cpu) raised SystemExit: 0" in (
        message
    )


def test_a_step_that_calls_sys_exit_is_a_failed_model_and_the_run_goes_on(tmp_path, monkeypatch, cache_env):
    from gpubench.bench.api import benchmark

    (tmp_path / "user_steps.py").write_text(USER_MODULE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("GPU_BENCHMARK_CACHE_DIR", cache_env["GPU_BENCHMARK_CACHE_DIR"])
    from user_steps import step_exits

    report = benchmark(step_exits, batch_size=8, hardware="cpu", experiment="quick", hardware__burn_in_max_seconds=0)
    section = report.models["custom"]
    assert section.status == "failed" and section.error == "RuntimeError: the step called sys.exit(0)"
    assert report.status == "complete"


def test_an_error_after_a_model_was_measured_fails_the_report_and_prints_its_summary(tmp_path, cache_env):
    import json

    from tests.conftest import run_gpubench

    (tmp_path / "mytrain.py").write_text(USER_MODULE)
    completed = run_gpubench(
        tmp_path,
        *BASE,
        "model.names=[mlp,custom]",
        "workloads.custom.factory=mytrain:float_loss",
        "decision.plan.samples.custom=1e6",
        env=cache_env,
    )
    assert completed.returncode == 2, completed.stderr
    message = one_paragraph(completed.stderr)
    assert "the step returned its loss as a float; return the tensor itself" in message
    (path,) = tmp_path.glob("outputs/*/*/report.json")
    report = json.loads(path.read_text())
    assert report["status"] == "failed" and "the step returned its loss as a float" in report["error"]
    assert report["error"].startswith("`workloads.custom.factory` = 'mytrain:float_loss' is not valid")
    # The model measured before the error is kept, and its summary printed.
    assert report["models"]["mlp"]["status"] == "ok" and "custom" not in report["models"]
    assert "mlp" in completed.stdout and str(path.name) in completed.stdout


# ------------------------------------------------------------------------------------- full and read-only disks


@contextmanager
def tmpfs(folder: Path, *, read_only: bool = False, full: bool = False) -> Iterator[Path]:
    """A 64 KB tmpfs mounted at ``folder`` for the block: read-only, or filled to the last byte, as asked. Skips the
    test where mounting is not permitted (not root, or in a container without the capability)."""
    folder.mkdir(parents=True, exist_ok=True)
    options = "size=64k" + (",ro" if read_only else "")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({mounted.stderr.decode().strip() or 'mount failed'})")
    try:
        if full:
            with (folder / "filler").open("wb", buffering=0) as filler:
                try:
                    while True:
                        filler.write(b"x" * 1024)
                except OSError:
                    pass
            # The last bytes, below one block of 1 KB.
            with (folder / "filler").open("ab", buffering=0) as filler, pytest.raises(OSError):
                while True:
                    filler.write(b"x")
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def test_synthetic_data_on_a_full_disk_is_a_data_error_naming_the_cache(tmp_path):
    from tests.conftest import run_gpubench

    with tmpfs(tmp_path / "cache") as cache:
        completed = run_gpubench(tmp_path, *BASE, env={"GPU_BENCHMARK_CACHE_DIR": str(cache)})
    assert completed.returncode == 2, completed.stderr
    message = one_paragraph(completed.stderr)
    assert f"Cannot write the synthetic market under data.cache_dir={str(cache)!r} (No space left on device at " in (
        message
    )


@pytest.mark.parametrize("disk", ["read-only", "full"])
def test_a_working_folder_that_cannot_be_written_exits_2_naming_it(tmp_path, cache_env, disk):
    from tests.conftest import run_gpubench

    with tmpfs(tmp_path / "work", read_only=disk == "read-only", full=disk == "full") as work:
        completed = run_gpubench(work, *BASE, env=cache_env)
        single = " ".join(completed.stderr.split())
        swept = run_gpubench(work, "-m", *BASE, "epochs=2,3", env=cache_env)
    assert completed.returncode == 2, completed.stderr
    assert "Traceback" not in completed.stderr and "Logging error" not in completed.stderr
    # Hydra's mkdir of outputs/ names the folder; a full disk, found as Hydra closes its saved config, names none:
    # the run's folder is named instead.
    where = f"{work}/outputs" if disk == "read-only" else f"a file under {work}/outputs/"
    reason = "Read-only file system" if disk == "read-only" else "No space left on device"
    assert single.startswith(f"gpubench: error: cannot write {where}") and f"({reason})" in single
    assert "hydra.run.dir=<folder>" in single
    assert swept.returncode == 2, swept.stderr
    assert "Traceback" not in swept.stderr and "Logging error" not in swept.stderr
    assert f"gpubench: error: cannot write {where.replace('outputs', 'multirun')}" in " ".join(swept.stderr.split())


def every_file_text(folder: Path) -> str:
    """The text of every file under ``folder`` (undecodable bytes replaced), for a secret to be searched in."""
    return "\n".join(path.read_text(errors="replace") for path in sorted(folder.rglob("*")) if path.is_file())


def test_a_bad_value_leaves_no_credential_in_hydras_saved_files(tmp_path):
    from tests.conftest import run_gpubench

    given = ("tracking.enabled=true", "tracking.uri=http://alice:PW4242@127.0.0.1:9", "epochs=0")
    completed = run_gpubench(tmp_path, *BASE, *given)
    assert completed.returncode == 2, completed.stderr
    assert "`epochs` = 0 is not valid" in one_paragraph(completed.stderr)
    # A single run refused leaves no folder; a sweep's refused job keeps its own, Hydra's saved files redacted.
    assert not (tmp_path / "outputs").exists()
    swept = run_gpubench(tmp_path, "-m", *BASE, *given)
    assert swept.returncode == 1, swept.stderr
    (hydra_dir,) = tmp_path.glob("multirun/*/*/0/.hydra")
    assert {path.name for path in hydra_dir.iterdir()} == {"config.yaml", "hydra.yaml", "overrides.yaml"}
    assert "tracking.uri=http\\://alice\\:***@127.0.0.1\\:9" in (hydra_dir / "overrides.yaml").read_text()
    shown = completed.stdout + completed.stderr + swept.stdout + swept.stderr
    assert "PW4242" not in every_file_text(tmp_path) + shown
