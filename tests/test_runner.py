"""Runner decisions that need no device: which batch a model is timed at after a batch-size search, and the
headroom check on the measured run's peak (with the memory profile faked)."""

from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir

from gpubench import hardware
from gpubench import runner as runner_module
from gpubench.batch_size import choose_batch_size
from gpubench.config import BatchConfig, register_configs
from gpubench.memory import MemoryProfile
from gpubench.runner import RunContext, Runner, timed_batch, typed_config

CONF_DIR = str(Path(__file__).resolve().parents[1] / "conf")


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
