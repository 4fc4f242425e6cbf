"""``experiment=seed``: the seed system's shapes (TFT-225, 60-bar sequences, batches 64-128) and memory scale."""

from dataclasses import replace
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir

from gpubench.conf import CONF_DIR
from gpubench.config import register_configs, typed_config
from gpubench.data.loader import load_features
from gpubench.models.dqn.workload import DQNWorkload
from gpubench.models.tft.workload import TFTWorkload
from gpubench.workload import ExecutionContext

register_configs()


def seed_config(tmp_path: Path, *overrides: str):
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(
            config_name="config",
            overrides=[f"output={tmp_path / 'report.json'}", "experiment=seed", *overrides],
        )
    return typed_config(cfg)


@pytest.fixture(scope="module")
def seed_features(tmp_path_factory: pytest.TempPathFactory):
    """The seed preset's 225 features of three synthetic days of one symbol."""
    tmp_path = tmp_path_factory.mktemp("seed")
    cfg = seed_config(tmp_path, f"data.cache_dir={tmp_path}", "data.days=3", "data.symbols=[SYNA]")
    features, _ = load_features(cfg.data, "cpu")
    return features


def test_seed_preset_composes_the_seed_shapes(tmp_path: Path) -> None:
    cfg = seed_config(tmp_path)
    assert cfg.data.feature_count == 225
    assert cfg.workloads.tft.encoder_length == 60 and cfg.workloads.mamba2.seq_len == 60
    assert cfg.workloads.dqn.env.observation_window == cfg.workloads.ppo.env.observation_window == 60
    for name in ("tft", "mamba2", "dqn", "ppo"):
        assert 64 <= getattr(cfg.workloads, name).batch_size <= 128, name
    assert cfg.decision.memory_budget_mb == {"mlp": 256.0, "dqn": 200, "ppo": 300, "mamba2": 600, "tft": 2800}
    # The recipe's batches are timed.
    assert cfg.batch.policy == "configured"
    # The widths benchmarks/seed_memory.py found to land in the guide's memory ranges on the H200.
    assert cfg.workloads.tft.hidden_size == 32 and cfg.workloads.mamba2.d_model == 128
    assert cfg.workloads.dqn.hidden_sizes == [128, 128]


def test_a_seed_tft_reads_225_inputs_per_bar(tmp_path: Path, seed_features) -> None:
    cfg = seed_config(tmp_path)
    assert seed_features.n_features == 225
    torch.manual_seed(0)
    tft = TFTWorkload(cfg.workloads.tft, seed_features, ExecutionContext(torch.device("cpu"), batch_size=2))
    assert tft.describe()["encoder_inputs"] == 225
    # The seed's TFT-225 scale (about 3.2 M parameters), not the 39 M of the default width at 225 inputs.
    assert 2.5e6 < tft.parameter_count() < 3.5e6
    assert tft.model.encoder_embedding.weight.shape == (225, cfg.workloads.tft.hidden_size)
    # One real step at the seed's shapes: a window of 60 + 5 bars of 225 features.
    batch = tft.sample_batch()
    assert batch.encoder_inputs.shape == (2, 60, 225)
    assert torch.isfinite(tft.train_step().loss)


def test_seed_dqn_replay_buffer_is_megabytes(tmp_path: Path, seed_features) -> None:
    cfg = seed_config(tmp_path)
    config = replace(cfg.workloads.dqn, learning_starts=128)
    dqn = DQNWorkload(config, seed_features, ExecutionContext(torch.device("cpu"), batch_size=config.batch_size))
    observation_size = 60 * 225 + 3
    assert dqn.env.observation_size == observation_size
    # 100,000 transitions x 7 float64 = 5.3 MiB; observation copies would take 100,000 x (2 x 13,503 + 3) x 4 B,
    # 10.1 GiB, more than the seed's whole 4 GB card.
    assert dqn.replay.nbytes == config.buffer_size * 7 * 8
    assert dqn.describe()["replay_buffer_mb"] == pytest.approx(5.34, abs=0.01)
    assert config.buffer_size * (2 * observation_size + 3) * 4 / 2**30 == pytest.approx(10.06, abs=0.01)
    assert torch.isfinite(dqn.train_step().loss)
