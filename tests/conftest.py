"""Shared fixtures: small feature tensors on the CPU, and the `gpu` marker's skip without CUDA."""

import math

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


@pytest.fixture
def learnable_features() -> FeatureTensors:
    return make_learnable_features()
