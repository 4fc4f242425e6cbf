"""Runner decisions that need no device: which batch a model is timed at after a batch-size search, the headroom
check on the measured run's peak, and the step-down when that check fails (with the memory profile faked)."""

from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir

from gpubench import runner as runner_module
from gpubench.conf import CONF_DIR as CONF_DIR_PATH
from gpubench.config import register_configs
from gpubench.hardware import device as hardware
from gpubench.measure.batch_search import choose_batch_size
from gpubench.measure.config import BatchConfig
from gpubench.measure.memory import MemoryProfile
from gpubench.runner import RunContext, Runner, count_step_flops, timed_batch, typed_config
from gpubench.workload import workload_class

CONF_DIR = str(CONF_DIR_PATH)


def decision_with_limit(limit: int):
    """A real search over an oracle that fits every size up to ``limit``."""

    def try_batch(size: int, steps: int) -> float:
        if size > limit:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory (oracle)")
        return float(size)

    return choose_batch_size(try_batch, BatchConfig(min_size=32, max_size=4096, target_effective=512), None)


def test_supervised_models_train_at_the_largest_fitting_batch_with_accumulation():
    decision = decision_with_limit(96)
    assert decision.batch_size == 96
    batch, accumulation, why = timed_batch(64, decision, is_hyperparameter=False)
    assert (batch, accumulation) == (96, 6)  # ceil(512 / 96)
    assert "largest batch that fits" in why


def test_rl_keeps_its_configured_batch_unless_it_does_not_fit():
    assert timed_batch(256, decision_with_limit(4096), is_hyperparameter=True)[:2] == (256, 1)
    batch, accumulation, why = timed_batch(256, decision_with_limit(200), is_hyperparameter=True)
    assert (batch, accumulation) == (200, 1)
    assert "configured batch size 256" in why


@pytest.fixture
def cpu_runner(tmp_path: Path) -> Runner:
    """A Runner on the CPU for the MLP with a few short epochs, as if a 1,000 MB budget had been measured."""
    register_configs()
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = compose(
            config_name="config",
            overrides=[
                f"output={tmp_path / 'report.json'}",
                "hardware=cpu",
                "model=mlp",
                "epochs=3",
                "warmup_epochs=0",
                "epoch.min_seconds=0.01",
                "hardware.burn_in_max_seconds=0",
            ],
        )
    runner = Runner(typed_config(cfg), RunContext(run_dir=tmp_path))
    runner.warmup = hardware.burn_in(runner.device, max_seconds=0)
    runner.usable_vram_mb = 1000.0
    return runner


@pytest.mark.parametrize(("peak_reserved_mb", "exceeded"), [(950.0, True), (900.0, False)])
def test_measured_peak_is_checked_against_the_headroom_limit(
    cpu_runner: Runner, learnable_features, monkeypatch: pytest.MonkeyPatch, peak_reserved_mb: float, exceeded: bool
) -> None:
    # The measured epochs' profile as a GPU would report it; batch.headroom 0.9 × 1,000 MB allows 900 MB.
    monkeypatch.setattr(
        runner_module.MemoryProfiler, "result", lambda self: MemoryProfile(True, peak_reserved_mb=peak_reserved_mb)
    )
    section = cpu_runner._benchmark_model("mlp", learnable_features).to_dict()
    assert section["status"] == "ok", section["error"]
    assert section["memory"]["peak_reserved_mb"] == peak_reserved_mb
    assert section["memory"]["headroom_exceeded"] is exceeded
    assert section["memory"]["headroom_limit_mb"] == pytest.approx(900.0)
    if exceeded:
        assert section["warnings"] == [
            "peak reserved memory during the measured epochs was 950 MB, above the headroom limit 900 MB "
            "(`batch.headroom` 0.9 × 1,000 MB usable): at this batch size the model may run out of memory on the "
            "target card"
        ]
    else:
        assert "warnings" not in section


def test_headroom_is_not_measured_on_the_cpu(cpu_runner: Runner, learnable_features) -> None:
    cpu_runner.usable_vram_mb = None
    section = cpu_runner._benchmark_model("mlp", learnable_features).to_dict()
    assert section["status"] == "ok", section["error"]
    assert section["memory"]["headroom_exceeded"] is None
    assert section["memory"]["headroom_limit_mb"] is None


class FragmentingGpu:
    """The GPU as the runner sees it, faked: each measured run's peak reserved memory is ``peak_mb(batch)`` for the
    batch of the last workload built, and builds and device-memory releases are recorded in order."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, peak_mb: Callable[[int], float]) -> None:
        self.events: list[str] = []
        self.notices: list[str] = []
        self.built: list[int] = []
        build = Runner._build

        def recording_build(runner: Runner, name, features, batch_size: int, *, eager: bool = False):
            self.built.append(batch_size)
            self.events.append(f"build {batch_size}")
            return build(runner, name, features, batch_size, eager=eager)

        monkeypatch.setattr(Runner, "_build", recording_build)
        monkeypatch.setattr(runner_module, "release_device_memory", lambda: self.events.append("release"))
        monkeypatch.setattr(
            runner_module.MemoryProfiler,
            "result",
            lambda profiler: MemoryProfile(True, peak_reserved_mb=peak_mb(self.built[-1])),
        )
        monkeypatch.setattr(runner_module.console, "notice", self.notices.append)


def search_fits_up_to(monkeypatch: pytest.MonkeyPatch, limit: int) -> None:
    """The runner's batch search, as if run on a GPU where every size up to ``limit`` fits its short trials."""
    decision = decision_with_limit(limit)
    monkeypatch.setattr(Runner, "_choose_batch", lambda runner, name, features: decision)


def test_searched_batch_over_the_headroom_in_the_measured_run_is_stepped_down(
    cpu_runner: Runner, learnable_features, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Fragmentation over the measured epochs: 10.5 MB per sample against a limit of 0.9 × 1,000 MB = 900 MB.
    # Batch 100 peaks at 1,050 MB -> floor(100 × 900 / 1,050) = 85, which peaks at 892.5 MB.
    flops_at_85 = count_step_flops(cpu_runner._build("mlp", learnable_features, 85))
    search_fits_up_to(monkeypatch, 100)
    gpu = FragmentingGpu(monkeypatch, lambda batch: 10.5 * batch)
    section = cpu_runner._benchmark_model("mlp", learnable_features).to_dict()
    assert section["status"] == "ok", section["error"]
    assert section["batch_search"]["batch_size"] == 100
    assert section["batch_size"] == 85
    assert section["gradient_accumulation_steps"] == 7  # ceil(512 / 85), recomputed for the new size
    assert section["flops_per_step"] == flops_at_85
    assert section["memory"]["peak_reserved_mb"] == 892.5
    assert section["memory"]["headroom_exceeded"] is False
    assert "warnings" not in section
    [abandoned] = section["batch_step_downs"]
    assert abandoned["batch_size"] == 100
    assert abandoned["peak_reserved_mb"] == 1050.0
    assert abandoned["headroom_limit_mb"] == pytest.approx(900.0)
    assert abandoned["mean_epoch_time_ms"] > 0 and abandoned["samples_per_second"] > 0
    assert section["batch_policy"].endswith(
        "; stepped down from 100 to 85 because the measured peak reserved memory 1,050 MB exceeded the headroom "
        "limit 900 MB"
    )
    # The abandoned workload's memory is released before the smaller one is built.
    assert gpu.events == ["release", "build 100", "release", "build 85"]
    assert len(gpu.notices) == 1 and "stepped down from 100 to 85" in gpu.notices[0]


def test_step_downs_stop_at_max_step_downs_and_the_last_overshoot_keeps_its_warning(
    cpu_runner: Runner, learnable_features, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A fixed 200 MB makes the proportional guess optimistic: 100 -> 1,000 MB, 90 -> 920 MB, 88 -> 904 MB.
    search_fits_up_to(monkeypatch, 100)
    gpu = FragmentingGpu(monkeypatch, lambda batch: 8.0 * batch + 200.0)
    section = cpu_runner._benchmark_model("mlp", learnable_features).to_dict()
    assert section["status"] == "ok", section["error"]
    assert gpu.built == [100, 90, 88]  # floor(100 × 900 / 1,000), floor(90 × 900 / 920); batch.max_step_downs=2
    assert section["batch_size"] == 88
    assert [(s["batch_size"], s["peak_reserved_mb"]) for s in section["batch_step_downs"]] == [(100, 1000), (90, 920)]
    assert "from 100 to 90" in section["batch_policy"] and "from 90 to 88" in section["batch_policy"]
    assert section["memory"]["headroom_exceeded"] is True
    assert section["warnings"] == [
        "peak reserved memory during the measured epochs was 904 MB, above the headroom limit 900 MB "
        "(`batch.headroom` 0.9 × 1,000 MB usable): at this batch size the model may run out of memory on the "
        "target card"
    ]


def test_max_step_downs_zero_keeps_the_batch_with_a_warning(
    cpu_runner: Runner, learnable_features, monkeypatch: pytest.MonkeyPatch
) -> None:
    cpu_runner.cfg.batch.max_step_downs = 0
    search_fits_up_to(monkeypatch, 100)
    gpu = FragmentingGpu(monkeypatch, lambda batch: 10.5 * batch)
    section = cpu_runner._benchmark_model("mlp", learnable_features).to_dict()
    assert section["status"] == "ok", section["error"]
    assert gpu.built == [100]
    assert section["batch_size"] == 100
    assert section["gradient_accumulation_steps"] == 6
    assert section["memory"]["headroom_exceeded"] is True
    assert len(section["warnings"]) == 1 and "1,050 MB" in section["warnings"][0]
    assert "batch_step_downs" not in section
    assert "stepped down" not in section["batch_policy"]


def test_searched_batch_at_min_size_is_kept_with_a_warning(
    cpu_runner: Runner, learnable_features, monkeypatch: pytest.MonkeyPatch
) -> None:
    search_fits_up_to(monkeypatch, 32)  # batch.min_size
    gpu = FragmentingGpu(monkeypatch, lambda batch: 30.0 * batch)
    section = cpu_runner._benchmark_model("mlp", learnable_features).to_dict()
    assert section["status"] == "ok", section["error"]
    assert gpu.built == [32]
    assert section["memory"]["headroom_exceeded"] is True
    assert len(section["warnings"]) == 1
    assert "batch_step_downs" not in section


@pytest.mark.parametrize(("fit_limit", "built"), [(100, [100, 85]), (200, [128])])
def test_rl_batch_steps_down_only_when_the_fit_capped_it(
    cpu_runner: Runner, learnable_features, monkeypatch: pytest.MonkeyPatch, fit_limit: int, built: list[int]
) -> None:
    # As an RL workload the MLP is timed at min(configured, fitted): configured 128; capped to 100 when only 100
    # fits, but its own 128 when 200 fits, and then the batch is the algorithm's, not the search's.
    monkeypatch.setattr(workload_class("mlp"), "batch_size_is_hyperparameter", True)
    cpu_runner.cfg.workloads.mlp.batch_size = 128
    search_fits_up_to(monkeypatch, fit_limit)
    gpu = FragmentingGpu(monkeypatch, lambda batch: 10.5 * batch)
    section = cpu_runner._benchmark_model("mlp", learnable_features).to_dict()
    assert section["status"] == "ok", section["error"]
    assert gpu.built == built
    assert section["batch_size"] == built[-1]
    assert section["gradient_accumulation_steps"] == 1
    assert ("batch_step_downs" in section) is (len(built) > 1)
    assert ("warnings" in section) is (len(built) == 1)
