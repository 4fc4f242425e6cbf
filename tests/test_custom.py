"""The user's own training as a workload (``model=custom``): the factory's checks, the step's results, the plan,
the command line end to end, and the Python API (``gpubench.benchmark``)."""

import json
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from torch import nn

from gpubench.bench.api import benchmark, factory_name, override_value
from gpubench.decision.config import TrainingPlanConfig
from gpubench.decision.estimate import plan_samples
from gpubench.errors import ConfigError
from gpubench.measure.stability import StabilityMonitor
from gpubench.models.custom import registry
from gpubench.models.custom.config import CustomConfig
from gpubench.models.custom.factory import load_factory
from gpubench.models.custom.workload import CustomWorkload
from gpubench.results import RunReport
from gpubench.stats.config import StabilityConfig
from gpubench.stats.stability import stability_verdict
from gpubench.workload import ExecutionContext

KEY = "`workloads.custom.factory`"

#: A user's module, as a user writes it: a linear regression with a known parameter count (17 = 16 weights + bias).
USER_MODULE = textwrap.dedent(
    """
    import torch
    from torch import nn


    def build(batch_size, device):
        model = nn.Linear(16, 1).to(device)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
        inputs = torch.randn(4096, 16, device=device)
        targets = inputs.sum(dim=1, keepdim=True)

        def step():
            rows = torch.randint(0, 4096, (batch_size,), device=device)
            loss = nn.functional.mse_loss(model(inputs[rows]), targets[rows])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            return loss.detach()

        return step


    def raises(batch_size, device):
        raise FileNotFoundError("no such file: /data/train.parquet")


    def one_argument(batch_size):
        return lambda: None


    def returns_number(batch_size, device):
        return 3


    NOT_CALLABLE = 3
    """
)


@pytest.fixture
def user_module(tmp_path, monkeypatch) -> str:
    """A user module written to a fresh folder, imported by a unique name (modules are cached by name)."""
    name = f"user_train_{abs(hash(str(tmp_path)))}"
    (tmp_path / f"{name}.py").write_text(USER_MODULE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", ".")])
    yield name
    sys.modules.pop(name, None)


def context(batch_size: int = 8) -> ExecutionContext:
    return ExecutionContext(device=torch.device("cpu"), batch_size=batch_size)


def workload_for(build, batch_size: int = 8, **config) -> CustomWorkload:
    factory = registry.register(build)
    try:
        return CustomWorkload(CustomConfig(factory=factory, batch_size=8, **config), None, context(batch_size))
    finally:
        registry.unregister(factory)


# ------------------------------------------------------------------------------------------------ the factory


def test_a_module_in_the_current_folder_is_found_without_it_on_the_path(user_module):
    assert all(os.path.abspath(p or ".") != os.getcwd() for p in sys.path)
    build = load_factory(f"{user_module}:build")
    assert build.__name__ == "build" and build.__module__ == user_module


@pytest.mark.parametrize(
    ("attribute", "expected"),
    [
        ("missing", "has no attribute 'missing'"),
        ("NOT_CALLABLE", "NOT_CALLABLE is not callable (its type is int)"),
        ("one_argument", "one_argument(batch_size) cannot be called as one_argument(batch_size, device)"),
    ],
)
def test_a_bad_attribute_of_the_module_is_named(user_module, attribute, expected):
    with pytest.raises(ConfigError) as error:
        load_factory(f"{user_module}:{attribute}")
    assert KEY in str(error.value) and expected in str(error.value)


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("mytrain.build", "not of the form module.path:function"),
        ("mytrain:", "not of the form module.path:function"),
        ("my-train:build", "not of the form module.path:function"),
        ("no_such_module_here:build", "module no_such_module_here could not be imported"),
    ],
)
def test_a_value_that_names_no_function_is_refused(tmp_path, monkeypatch, spec, expected):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as error:
        CustomConfig(factory=spec)
    assert KEY in str(error.value) and expected in str(error.value)
    assert "module.path:function" in str(error.value)  # and says what would be valid


def test_a_module_that_fails_to_import_is_reported_with_its_error(tmp_path, monkeypatch):
    (tmp_path / "broken_user_module.py").write_text("import numpy\nraise RuntimeError('CUDA_HOME is not set')\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as error:
        load_factory("broken_user_module:build")
    assert "RuntimeError: CUDA_HOME is not set" in str(error.value)
    sys.modules.pop("broken_user_module", None)


def test_model_custom_needs_a_factory_and_leaves_precision_to_it():
    with pytest.raises(ConfigError, match=r"`workloads.custom.factory` = None .* set when model=custom"):
        CustomConfig().check_runnable("fp32", "false")
    factory = registry.register(lambda batch_size, device: None)
    config = CustomConfig(factory=factory)
    registry.unregister(factory)
    with pytest.raises(ConfigError, match=r"`execution.precision` = 'bf16'"):
        config.check_runnable("bf16", "false")
    with pytest.raises(ConfigError, match=r"`execution.compile` = 'reduce-overhead'"):
        config.check_runnable("fp32", "reduce-overhead")


def test_a_build_that_raises_is_a_config_error_with_the_users_exception(user_module):
    with pytest.raises(ConfigError) as error:
        CustomWorkload(CustomConfig(factory=f"{user_module}:raises"), None, context())
    message = str(error.value)
    assert KEY in message and f"{user_module}.raises(8, cpu) raised FileNotFoundError" in message
    assert "no such file: /data/train.parquet" in message


def test_a_build_that_returns_no_step_is_a_config_error(user_module):
    with pytest.raises(ConfigError, match=r"returned no step callable \(its type is int\)"):
        CustomWorkload(CustomConfig(factory=f"{user_module}:returns_number"), None, context())


def test_running_out_of_memory_in_build_stays_an_out_of_memory_error():
    # The batch search must see an allocation failure as "does not fit", not as a bad factory.
    def build(batch_size, device):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    with pytest.raises(torch.OutOfMemoryError):
        workload_for(build)


# ------------------------------------------------------------------------------------------------ the step


def linear_build(outputs):
    """A build whose step trains a Linear(3, 2) and returns ``outputs(loss, grad_norm)``."""

    def build(batch_size, device):
        model = nn.Linear(3, 2)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        inputs = torch.randn(batch_size, 3)

        def step():
            loss = model(inputs).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            grad_norm = nn.utils.clip_grad_norm_(model.parameters(), 10.0)
            optimizer.step()
            return outputs(loss, grad_norm)

        return step

    return build


def test_a_loss_tensor_becomes_a_detached_scalar_and_the_parameters_are_counted():
    workload = workload_for(linear_build(lambda loss, norm: loss.reshape(1)))
    result = workload.train_step()
    assert result.loss.shape == () and not result.loss.requires_grad and result.grad_norm is None
    assert workload.parameter_count() == 3 * 2 + 2
    assert workload.describe()["parameters"] == 8


def test_a_loss_and_gradient_norm_pair_reaches_the_monitor():
    workload = workload_for(linear_build(lambda loss, norm: (loss, norm)))
    result = workload.train_step()
    assert result.grad_norm is not None and float(result.grad_norm) > 0


def test_a_step_that_returns_no_loss_is_not_checked_and_the_report_says_so():
    workload = workload_for(linear_build(lambda loss, norm: None))
    cfg = StabilityConfig()
    monitor = StabilityMonitor(cfg, "cpu", chunk_steps=4)
    healths = []
    for _ in range(3):
        for _ in range(10):
            monitor.observe(workload.train_step())
        healths.append(monitor.end_epoch())
    assert [h.loss_steps for h in healths] == [0, 0, 0] and all(h.mean_loss is None for h in healths)
    verdict = stability_verdict(healths, cfg)
    assert verdict.stability == "NOT_CHECKED" and verdict.loss_trend is None
    assert verdict.nonfinite_loss_steps == 0 and not verdict.diverged
    assert verdict.reasons == ["no loss reported in 30 steps: NaN/Inf losses and the loss trend were not checked"]


def test_a_nan_loss_from_the_users_step_is_seen_as_divergence():
    losses = iter([1.0, 0.5, math.nan, 0.4])

    def build(batch_size, device):
        return lambda: torch.tensor(next(losses))

    workload = workload_for(build)
    cfg = StabilityConfig()
    monitor = StabilityMonitor(cfg, "cpu")
    for _ in range(4):
        monitor.observe(workload.train_step())
    health = monitor.end_epoch()
    assert health.loss_steps == 4 and health.nonfinite_loss_steps == 1 and health.diverged
    assert health.mean_loss == pytest.approx((1.0 + 0.5 + 0.4) / 3)
    assert stability_verdict([health], cfg).stability == "DIVERGING"


@pytest.mark.parametrize(
    ("returned", "expected"),
    [
        (lambda loss, norm: float(loss.detach()), "returned its loss as a float"),
        (lambda loss, norm: loss.detach().repeat(3), "loss of shape (3,); it must be a scalar"),
        (lambda loss, norm: (loss, 2.0), "returned its gradient norm as a float"),
    ],
)
def test_a_step_that_returns_something_else_is_a_config_error(returned, expected):
    workload = workload_for(linear_build(returned))
    with pytest.raises(ConfigError) as error:
        workload.train_step()
    assert KEY in str(error.value) and expected in str(error.value)


def test_samples_per_step_is_stated_at_the_configured_batch_and_scales_with_the_batch():
    build = linear_build(lambda loss, norm: loss)
    assert workload_for(build, batch_size=8).samples_per_step == 8.0
    assert workload_for(build, batch_size=8, samples_per_step=8 * 512).samples_per_step == 4096.0
    # A search trial (or a smaller batch that fits) at 4 consumes half of what the recipe's batch of 8 does.
    assert workload_for(build, batch_size=4, samples_per_step=8 * 512).samples_per_step == 2048.0
    assert workload_for(build, sample_unit="token").sample_unit == "token"


def test_a_step_callable_object_has_its_modules_counted():
    class Trainer:
        def __init__(self) -> None:
            self.net = nn.Sequential(nn.Linear(4, 5), nn.ReLU(), nn.Linear(5, 1))
            self.optimizer = torch.optim.SGD(self.net.parameters(), lr=0.1)

        def __call__(self):
            loss = self.net(torch.ones(2, 4)).mean()
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            return loss

    workload = workload_for(lambda batch_size, device: Trainer())
    assert workload.parameter_count() == (4 * 5 + 5) + (5 + 1)


# ------------------------------------------------------------------------------------------------ the plan


def test_the_samples_plan_is_taken_as_given_in_the_models_unit():
    plan = TrainingPlanConfig(samples={"custom": 2.5e6})
    assert plan_samples("custom", "token", plan) == (2.5e6, "2,500,000 tokens (decision.plan.samples.custom)")
    # It takes precedence over a model's passes when set, and a null entry leaves the passes in charge.
    assert plan_samples("mlp", "window", TrainingPlanConfig(samples={"mlp": 1000.0}))[0] == 1000.0
    windows = 360 * 390 * 1 * 50.0
    assert plan_samples("mlp", "window", TrainingPlanConfig())[0] == windows


def test_no_plan_for_a_custom_model_names_the_key_to_set():
    with pytest.raises(ValueError, match=r"set decision.plan.samples.custom"):
        plan_samples("custom", "sample", TrainingPlanConfig())
    with pytest.raises(ConfigError, match=r"`decision.plan.samples.custom` = -1"):
        TrainingPlanConfig(samples={"custom": -1.0})


# ------------------------------------------------------------------------------------------------ end to end

FAST = ["hardware=cpu", "experiment=quick", "hardware.burn_in_max_seconds=0", "tracking.enabled=false"]


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("cache")


def gpubench_cli(cwd: Path, cache: Path, *args: str, python_flags: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    environment.update({"OMP_NUM_THREADS": "1", "GPU_BENCHMARK_CACHE_DIR": str(cache)})
    return subprocess.run(
        [sys.executable, *python_flags, "-m", "gpubench", *args],
        cwd=cwd,
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
    )


def the_report(folder: Path) -> dict:
    reports = sorted(folder.glob("outputs/*/*/report.json"))
    assert len(reports) == 1, reports
    return json.loads(reports[0].read_text())


@pytest.mark.skipif(sys.version_info < (3, 11), reason="python -P (no current folder on sys.path) needs 3.11")
@pytest.mark.slow
def test_the_cli_times_a_factory_written_next_to_it(tmp_path, cache_dir):
    (tmp_path / "mytrain.py").write_text(USER_MODULE)
    # -P keeps the current folder off sys.path, as the `gpubench` console script does: gpubench must add it.
    completed = gpubench_cli(
        tmp_path,
        cache_dir,
        "model=custom",
        "workloads.custom.factory=mytrain:build",
        "workloads.custom.batch_size=32",
        "workloads.custom.samples_per_step=64",
        "workloads.custom.sample_unit=row",
        "decision.plan.samples.custom=1e6",
        *FAST,
        python_flags=("-P",),
    )
    assert completed.returncode == 0, completed.stderr
    report = the_report(tmp_path)
    section = report["models"]["custom"]
    assert section["status"] == "ok" and section["batch_size"] == 32
    assert (section["samples_per_step"], section["sample_unit"]) == (64.0, "row")
    assert section["workload"]["parameters"] == 17 and section["workload"]["build"] == "mytrain.build"
    assert len(section["raw_epoch_times_ms"]) == 10 and all(math.isfinite(loss) for loss in section["epoch_losses"])
    assert section["stability"] in ("STABLE", "UNSTABLE") and section["loss_trend"] is not None
    # The decision is about the user's training (model=custom makes it the critical model), on its own plan.
    estimate = report["recommendation"]["per_model"]["custom"]
    assert estimate["plan_basis"].startswith("1,000,000 rows (decision.plan.samples.custom) = 15,625 steps")
    assert estimate["planned_epochs"] == pytest.approx(1e6 / (section["steps_per_epoch"] * 64))
    assert report["recommendation"]["decision"] in ("LOCAL_GPU_VIABLE", "GRAY_ZONE", "CLOUD_GPU_RECOMMENDED")


@pytest.mark.parametrize(
    ("factory", "expected"),
    [
        ("mytrain:raises", "raised FileNotFoundError: no such file: /data/train.parquet"),
        # Each factory's message is pinned in process above; the command line's exit 2 by the first case: these two
        # runs are in the slow pass.
        pytest.param(
            "mytrain:one_argument", "cannot be called as one_argument(batch_size, device)", marks=pytest.mark.slow
        ),
        pytest.param("nomodule:build", "module nomodule could not be imported", marks=pytest.mark.slow),
    ],
)
def test_a_bad_factory_exits_2_naming_the_key(tmp_path, cache_dir, factory, expected):
    (tmp_path / "mytrain.py").write_text(USER_MODULE)
    completed = gpubench_cli(tmp_path, cache_dir, "model=custom", f"workloads.custom.factory={factory}", *FAST)
    assert completed.returncode == 2, completed.stderr
    assert KEY in completed.stderr and expected in completed.stderr
    assert "Traceback" not in completed.stderr


def test_the_python_api_returns_the_typed_report(tmp_path, cache_dir, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GPU_BENCHMARK_CACHE_DIR", str(cache_dir))
    monkeypatch.delenv("GPU_BENCHMARK_OUTPUT", raising=False)
    build = linear_build(lambda loss, norm: (loss.detach(), norm))
    report = benchmark(
        build,
        batch_size=16,
        plan_samples=2e6,
        hardware="cpu",
        experiment="quick",
        hardware__burn_in_max_seconds=0,
        statistics__confidence_level=0.9,
        overrides=["epochs=12"],
    )
    assert isinstance(report, RunReport) and report.status == "complete"
    section = report.models["custom"]
    assert section.status == "ok" and section.batch_size == 16 and section.samples_per_step == 16.0
    assert len(section.raw_epoch_times_ms) == 12 and section.statistics.confidence_level == 0.9
    assert section.workload["parameters"] == 8 and section.workload["build"].endswith("linear_build.<locals>.build")
    assert section.stability_details.max_grad_norm > 0
    assert report.recommendation.per_model["custom"].plan_samples == 2e6
    # The same report is on disk where the command line would have put it; tracking was off, so no MLflow store.
    on_disk = sorted(tmp_path.glob("outputs/*/*/report.json"))
    assert len(on_disk) == 1 and RunReport.from_dict(json.loads(on_disk[0].read_text())) == report
    assert not (tmp_path / "mlruns").exists()
    assert "statistics.confidence_level=0.9" in report.run.overrides and report.run.choices["hardware"] == "cpu"
    # The in-process registry forgets the callable once the run is over.
    assert not registry._FACTORIES


def test_a_step_that_fails_through_the_api_is_a_failed_model_in_the_report(tmp_path, cache_dir, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GPU_BENCHMARK_CACHE_DIR", str(cache_dir))
    calls = []

    def build(batch_size, device):
        def step():
            calls.append(batch_size)
            if len(calls) > 5:
                raise RuntimeError("the data loader ran dry")
            return torch.tensor(1.0)

        return step

    report = benchmark(
        build, batch_size=4, overrides="hardware=cpu", experiment="quick", hardware__burn_in_max_seconds=0
    )
    section = report.models["custom"]
    assert section.status == "failed" and section.error == "RuntimeError: the data loader ran dry"
    assert section.batch_size == 4 and report.status == "complete" and not registry._FACTORIES


def test_the_api_refuses_to_let_options_replace_the_model_it_runs():
    with pytest.raises(ConfigError, match=r"`model` is set by gpubench.benchmark itself"):
        benchmark(lambda batch_size, device: None, batch_size=8, model="mlp")
    with pytest.raises(ConfigError, match=r"`workloads.custom.factory` is set by"):
        benchmark(lambda batch_size, device: None, batch_size=8, overrides=["workloads.custom.factory=x:y"])
    assert not registry._FACTORIES


def test_a_bad_value_through_the_api_is_the_config_error_the_cli_prints(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=r"`statistics.confidence_level` = 1.5"):
        benchmark(linear_build(lambda loss, norm: loss), batch_size=8, statistics__confidence_level=1.5)
    # What Hydra refuses (a key the schema does not have, an option that does not exist) is a ConfigError too.
    with pytest.raises(ConfigError, match=r"epochz"):
        benchmark(linear_build(lambda loss, norm: loss), batch_size=8, epochz=3)
    with pytest.raises(ConfigError, match=r"hardware.*rtx9090"):
        benchmark(linear_build(lambda loss, norm: loss), batch_size=8, hardware="rtx9090")
    assert not registry._FACTORIES


def test_an_importable_build_is_passed_by_its_name_and_anything_else_through_the_registry(user_module):
    build = load_factory(f"{user_module}:build")  # imported as `from mytrain import build` would
    # By name, the report's config reruns from the command line and validate can rebuild it in a fresh process.
    assert factory_name(build) == f"{user_module}:build"
    assert factory_name(linear_build(lambda loss, norm: loss)) is None  # a closure
    assert factory_name(lambda batch_size, device: None) is None
    assert factory_name(CustomWorkload.train_step) == "gpubench.models.custom.workload:CustomWorkload.train_step"
    factory = registry.register(lambda batch_size, device: None)
    assert factory.startswith("gpubench.models.custom.registry:inprocess_") and load_factory(factory)
    registry.unregister(f"{user_module}:{factory.rpartition(':')[2]}")  # another module's name: not ours to drop
    assert load_factory(factory)
    registry.unregister(factory)
    assert not registry._FACTORIES


@pytest.mark.parametrize(
    ("value", "written"),
    [
        (True, "true"),
        (None, "null"),
        (0.9, "0.9"),
        (1e7, "10000000.0"),
        (["SYNA", "SYNB"], "[SYNA,SYNB]"),
        ("~/data/*.dbn.zst", "'~/data/*.dbn.zst'"),
        ("it's", "'it\\'s'"),
        ("cpu", "cpu"),
    ],
)
def test_api_values_are_written_in_hydras_override_grammar(value, written):
    assert override_value(value) == written
