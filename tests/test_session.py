"""The setup every process that builds workloads shares (gpubench/session.py), and the resolved-config loader the
processes read a job's config with (``gpubench.config.load_resolved_config``)."""

from dataclasses import asdict
from pathlib import Path

import pytest
import torch
from conftest import tiny_mlp_config
from omegaconf import OmegaConf

from gpubench.bench.session import prepare_session
from gpubench.config import load_resolved_config
from gpubench.errors import ConfigError


@pytest.fixture
def restored_torch_state():
    """Put back what a session sets process-wide: the thread count and the matmul precision."""
    threads, precision = torch.get_num_threads(), torch.get_float32_matmul_precision()
    yield
    torch.set_num_threads(threads)
    torch.set_float32_matmul_precision(precision)


def test_a_session_sets_threads_precision_and_seed_and_loads_the_data(tmp_path: Path, restored_torch_state) -> None:
    cfg = tiny_mlp_config(tmp_path, "hardware.cpu_threads=2", "execution.matmul_precision=medium", "seed=7")
    torch.set_num_threads(1)
    session = prepare_session(cfg)
    assert session.device == torch.device("cpu")
    assert (session.cpu_threads, session.threads_source) == (2, "hardware.cpu_threads")
    assert torch.get_num_threads() == 2
    assert torch.get_float32_matmul_precision() == "medium"
    # Seeded with the config's seed, and nothing drawn since: the next draw is the seed's first.
    drawn = torch.rand(3)
    torch.manual_seed(7)
    assert torch.equal(drawn, torch.rand(3))
    assert session.vram_budget is None and session.usable_vram_mb is None  # no VRAM cap on the CPU
    assert session.features is not None and session.provenance is not None
    assert session.features.n_bars > 0 and session.features.device == torch.device("cpu")
    context = session.model_run_context(reference_sm_clock_mhz=1500.0)
    assert (context.cfg, context.device, context.features) == (cfg, session.device, session.features)
    assert context.timer is session.timer and context.reference_sm_clock_mhz == 1500.0


def test_a_replay_overrides_the_thread_count_and_loads_the_data_later(tmp_path: Path, restored_torch_state) -> None:
    session = prepare_session(tiny_mlp_config(tmp_path, "hardware.cpu_threads=2"), cpu_threads=1, load_data=False)
    assert session.cpu_threads == 1 and torch.get_num_threads() == 1
    assert session.features is None
    with pytest.raises(RuntimeError, match="data is not loaded"):
        session.model_run_context()
    loaded = session.with_data()
    assert loaded.features is not None and loaded.cpu_threads == 1 and session.features is None


def test_the_resolved_config_reads_back_as_the_config_it_was_written_from(tmp_path: Path) -> None:
    cfg = tiny_mlp_config(tmp_path, "epochs=7", "workloads.mlp.hidden_sizes=[16,8]")
    path = tmp_path / "config_resolved.yaml"
    path.write_text(OmegaConf.to_yaml(OmegaConf.to_container(OmegaConf.structured(cfg), resolve=True)))
    loaded = load_resolved_config(path)
    assert asdict(loaded) == asdict(cfg)
    assert loaded.epochs == 7 and loaded.workloads.mlp.hidden_sizes == [16, 8]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("epochs: 1\n", "`epochs` = 1 is not valid"),
        ("workloads:\n  mlp:\n    widht: 3\n", "`workloads.mlp.widht` is not a gpubench config key"),
        ("epochs: many\n", "`epochs`: Value 'many'"),
        ("- a list\n", "is not a gpubench config (a YAML mapping"),
        ("epochs: [\n", "is not valid YAML"),
    ],
)
def test_a_bad_resolved_config_is_a_config_error_naming_the_file_and_key(tmp_path: Path, text, message) -> None:
    path = tmp_path / "config_resolved.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as raised:
        load_resolved_config(path)
    assert str(raised.value).startswith(f"the job's config {path}") and message in str(raised.value)


def test_a_missing_resolved_config_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"config_resolved.yaml cannot be read \(No such file or directory\)"):
        load_resolved_config(tmp_path / "config_resolved.yaml")
