"""Shared fixtures: small feature tensors on the CPU, the `gpu` marker's skip without CUDA, and end-to-end runs of
``python -m gpubench`` that several test modules read (each run once per session: a CLI job costs seconds)."""

import math
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from gpubench.data.tensors import FeatureTensors

# One intra-op thread: CI machines have 2 cores, and torch's OpenMP threads spinning against other processes on
# the same cores can make a CPU training step 25-40x slower (seen here); one thread keeps test times predictable.
torch.set_num_threads(1)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip tests marked `gpu` when no CUDA device is present (CI has none)."""
    if torch.cuda.is_available():
        return
    skip_gpu = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)


def make_learnable_features(
    n_symbols: int = 2,
    bars_per_symbol: int = 2000,
    n_features: int = 6,
    train_fraction: float = 0.8,
    seed: int = 0,
    device: str = "cpu",
) -> FeatureTensors:
    """A small FeatureTensors whose target column follows a noisy sine, so a model can learn to forecast it.

    Column 0 is the target (normalised return), columns 1-2 are time-of-day sin/cos (known in the future), the
    rest are noise. ``log_return`` is the target scaled to a realistic one-minute return size (1e-3).
    """
    generator = torch.Generator().manual_seed(seed)
    t = torch.arange(bars_per_symbol, dtype=torch.float32)
    phase = 2 * math.pi * t / 50.0
    columns = []
    for symbol in range(n_symbols):
        signal = torch.sin(phase + symbol) + 0.1 * torch.randn(bars_per_symbol, generator=generator)
        noise = torch.randn(bars_per_symbol, n_features - 3, generator=generator)
        columns.append(torch.cat([signal[:, None], torch.sin(phase)[:, None], torch.cos(phase)[:, None], noise], 1))
    values = torch.cat(columns, 0)
    symbol_id = torch.arange(n_symbols).repeat_interleave(bars_per_symbol)
    position = torch.arange(bars_per_symbol).repeat(n_symbols)
    is_train = position < int(train_fraction * bars_per_symbol)
    log_return = values[:, 0] * 1e-3
    log_return[position == 0] = 0.0
    names = ("return", "tod_sin", "tod_cos", *(f"noise_{i}" for i in range(n_features - 3)))
    return FeatureTensors(
        values=values.to(device),
        log_return=log_return.to(device),
        symbol_id=symbol_id.to(device),
        is_train=is_train.to(device),
        feature_names=names,
        target_column=0,
        known_future_columns=(1, 2),
        symbols=tuple(f"S{i}" for i in range(n_symbols)),
    )


def trending_features(n_bars: int, log_return: float, *, noise_features: bool = False) -> FeatureTensors:
    """One symbol whose price rises by the same log return every bar, with two uninformative features (zeros, or
    seeded noise): the trend is the whole signal, so a trading agent that learns goes long."""
    returns = torch.full((n_bars,), log_return)
    returns[0] = 0.0
    generator = torch.Generator().manual_seed(0)
    values = torch.randn(n_bars, 2, generator=generator) if noise_features else torch.zeros(n_bars, 2)
    return FeatureTensors(
        values=values,
        log_return=returns,
        symbol_id=torch.zeros(n_bars, dtype=torch.int64),
        is_train=torch.ones(n_bars, dtype=torch.bool),
        feature_names=("a", "b"),
        target_column=0,
        known_future_columns=(),
        symbols=("UP",),
    )


#: A small MLP on the CPU with a few short epochs: a model run in a test costs seconds. The network is small
#: because the step-down tests build it at batches in the thousands.
TINY_MLP_OVERRIDES = (
    "hardware=cpu",
    "model=mlp",
    "epochs=3",
    "warmup_epochs=0",
    "epoch.min_seconds=0.01",
    "hardware.burn_in_max_seconds=0",
    "workloads.mlp.window=8",
    "workloads.mlp.hidden_sizes=[32]",
)


def tiny_mlp_config(tmp_path: Path, *overrides: str):
    """The typed config of :data:`TINY_MLP_OVERRIDES` and ``overrides``, its report under ``tmp_path``."""
    from hydra import compose, initialize_config_dir

    from gpubench.config import CONF_DIR, register_configs, typed_config

    register_configs()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(
            config_name="config",
            overrides=[f"output={tmp_path / 'report.json'}", *TINY_MLP_OVERRIDES, *overrides],
        )
    return typed_config(cfg)


def cpu_model_context(cfg, features: FeatureTensors, usable_vram_mb: float | None = None):
    """A :class:`~gpubench.bench.model_run.ModelRunContext` on the CPU for ``cfg`` and ``features``, as if
    ``usable_vram_mb`` (None: no budget) had been measured."""
    from gpubench.bench.model_run import ModelRunContext
    from gpubench.hardware.selection import synchronizer
    from gpubench.measure.timing import BlockTimer

    device = torch.device("cpu")
    return ModelRunContext(
        cfg=cfg,
        device=device,
        features=features,
        timer=BlockTimer(synchronizer(device)),
        usable_vram_mb=usable_vram_mb,
        reference_sm_clock_mhz=None,
    )


@pytest.fixture(autouse=True)
def own_cache_dir(tmp_path_factory, monkeypatch) -> None:
    """Each test's runs have their own cache folder (data and the machine's history), as a fresh machine would:
    another test's runs of the same config in a shared history would widen this one's bounds."""
    monkeypatch.setenv("GPU_BENCHMARK_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))


@pytest.fixture
def learnable_features() -> FeatureTensors:
    return make_learnable_features()


# ------------------------------------------------------------------------------------------- shared CLI runs


def run_gpubench(
    cwd: Path, *args: str, env: dict[str, str] | None = None, umask: int | None = None
) -> subprocess.CompletedProcess:
    """``python -m gpubench *args`` in ``cwd`` with one torch thread (and ``umask`` when given), its output captured.
    The user's MLflow and Hydra settings (``MLFLOW_*``, ``HYDRA_FULL_ERROR``) are left out of its environment: they
    must not change what is tested (the store, the retry defaults, the error format)."""
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_") and k != "HYDRA_FULL_ERROR"}
    return subprocess.run(
        [sys.executable, "-m", "gpubench", *args],
        cwd=cwd,
        env={**inherited, "OMP_NUM_THREADS": "1", **(env or {})},
        capture_output=True,
        text=True,
        timeout=600,
        preexec_fn=None if umask is None else (lambda: os.umask(umask)),
    )


@dataclass(frozen=True)
class CliJob:
    """One finished ``python -m gpubench``: the folder it ran in, the environment variables it was given on top of
    the inherited ones, and what it printed and returned."""

    folder: Path
    env: dict[str, str]
    completed: subprocess.CompletedProcess

    def report_path(self) -> Path:
        """The job's one report.json: in its folder when that is the Hydra run folder, else in Hydra's default
        ``outputs/<date>/<time>/`` under it (an MLflow store in the folder keeps copies of its own)."""
        (path,) = [*self.folder.glob("report.json"), *self.folder.glob("outputs/*/*/report.json")]
        return path


@pytest.fixture(scope="session")
def gpubench_once(tmp_path_factory) -> Callable[..., CliJob]:
    """``python -m gpubench`` with the given arguments, run once per session in a folder of its own (with its own
    data cache): tests that check different facts about the same invocation (``--help``, an option Hydra refuses)
    share one process."""
    runs: dict[tuple[str, ...], CliJob] = {}

    def run(*args: str) -> CliJob:
        if args not in runs:
            folder = tmp_path_factory.mktemp("gpubench_once")
            env = {"GPU_BENCHMARK_CACHE_DIR": str(folder / "cache")}
            runs[args] = CliJob(folder, env, run_gpubench(folder, *args, env=env))
        return runs[args]

    return run


#: The confidence level of :func:`tracked_mlp_job`: not the default, so a reader can tell it was passed through.
TRACKED_MLP_LEVEL = 0.995


@pytest.fixture(scope="session")
def tracked_mlp_job(tmp_path_factory) -> CliJob:
    """An MLP job on the CPU (6 measured epochs after 1 warmup, over 3 days of two symbols, 99.5% intervals),
    tracked in the default SQLite store under its folder (``mlruns/``), run once for the session. Its readers check
    different facts of the same run: tests/test_cli.py the report against scipy and the MLflow run, and that the
    Databento key in its environment is nowhere in its output; tests/test_tracking_cli.py that its MLflow run spans
    the benchmark and carries the decision, and that the console prints the level it was given;
    tests/test_host_and_logging.py the story in its log, the host and thread count it records
    (``hardware.cpu_threads=1``), the notice for a batch-search key on the CPU (``batch.max_size=512``: above the
    MLP's batch of 256, which it would cap) and the report's mode under umask 027."""
    folder = tmp_path_factory.mktemp("tracked_mlp_job")
    env = {
        "GPU_BENCHMARK_CACHE_DIR": str(tmp_path_factory.mktemp("tracked_mlp_cache")),
        "DATABENTO_API_KEY": "db-SECRETKEY1234567890",
    }
    args = ["model=mlp", "epochs=6", "warmup_epochs=1", "hardware=cpu", "tracking.enabled=true"]
    args += ["data.days=3", "data.symbols=[SYNA,SYNB]", "epoch.min_seconds=0.1", "hardware.burn_in_max_seconds=0"]
    args += ["batch.max_size=512", "hardware.cpu_threads=1", f"statistics.confidence_level={TRACKED_MLP_LEVEL}"]
    return CliJob(folder, env, run_gpubench(folder, *args, env=env, umask=0o027))


@pytest.fixture(scope="session")
def quick_mlp_job(tmp_path_factory) -> CliJob:
    """A quick MLP job on the CPU (``experiment=quick`` over 3 days) whose Hydra run folder is its folder
    (report.json, config_resolved.yaml, gpubench.log), run once for the session. tests/test_validate.py replays
    it; it runs with ``hydra.verbose=gpubench`` for tests/test_host_and_logging.py, which reads its debug lines; its
    ``tracking.uri`` names a database under a plain file, a store that cannot be opened, for tests/test_cli.py,
    which checks that the report is still written."""
    folder = tmp_path_factory.mktemp("quick_mlp_job")
    blocker = tmp_path_factory.mktemp("tracking") / "not-a-folder"
    blocker.write_text("x")
    args = ["hardware=cpu", "experiment=quick", "model=mlp", "data.days=3", "hardware.burn_in_max_seconds=0"]
    args += [f"data.cache_dir={tmp_path_factory.mktemp('quick_mlp_cache')}", f"hydra.run.dir={folder}"]
    args += ["hydra.verbose=gpubench", "tracking.enabled=true", f"tracking.uri=sqlite:///{blocker}/db"]
    return CliJob(folder, {}, run_gpubench(folder, *args))
