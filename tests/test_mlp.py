"""The MLP forecaster workload: its batches are the next bar's return after a window, and it learns."""

import torch
from conftest import make_learnable_features

from gpubench.models.mlp.config import MLPConfig
from gpubench.models.mlp.workload import MLPWorkload
from gpubench.workload import ExecutionContext


def make_workload(batch_size: int = 32, **overrides) -> MLPWorkload:
    features = make_learnable_features(seed=1)
    config = MLPConfig(window=16, hidden_sizes=[32, 32], **overrides)
    return MLPWorkload(config, features, ExecutionContext(torch.device("cpu"), batch_size, seed=3))


def test_batch_is_a_window_and_the_next_bars_target_inside_one_symbol_and_the_training_split():
    workload = make_workload(batch_size=64)
    inputs, targets = workload.sample_batch()
    assert inputs.shape == (64, 16, workload.data.n_features) and targets.shape == (64,)
    values = workload.data.values
    for row in range(64):
        # Locate the window by its content, then check the target is the bar right after it, same symbol.
        start = int(torch.nonzero((values[:-16] == inputs[row, 0]).all(1))[0])
        assert torch.equal(values[start : start + 16], inputs[row])
        assert targets[row] == values[start + 16, workload.data.target_column]
        assert workload.data.symbol_id[start] == workload.data.symbol_id[start + 16]
        assert bool(workload.data.is_train[start + 16])


def test_step_uses_the_context_batch_size_and_returns_device_scalars():
    workload = make_workload(batch_size=48)
    assert workload.samples_per_step == 48
    result = workload.train_step()
    assert result.loss.dim() == 0 and result.grad_norm.dim() == 0
    assert not result.loss.requires_grad


def test_it_learns_the_learnable_series():
    torch.manual_seed(0)
    workload = make_workload(batch_size=64, learning_rate=3e-3)
    first = torch.stack([workload.train_step().loss for _ in range(10)]).mean()
    for _ in range(300):
        workload.train_step()
    last = torch.stack([workload.train_step().loss for _ in range(10)]).mean()
    assert last < 0.5 * first
