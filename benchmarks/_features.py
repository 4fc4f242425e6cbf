"""Random feature tensors for the model benchmarks: a step's time depends on the shapes, not on the values."""

import math

import torch

from gpubench.data.tensors import FeatureTensors

#: One regular session of one-minute bars, and sessions per week, for the calendar columns.
MINUTES_PER_SESSION = 390
SESSIONS_PER_WEEK = 5


def random_features(
    device: torch.device,
    *,
    n_symbols: int,
    bars_per_symbol: int,
    n_observed: int,
    calendar: bool = False,
    seed: int = 0,
    train_fraction: float = 0.8,
) -> FeatureTensors:
    """Standard-normal observed columns (column 0 the target return) for ``n_symbols`` symbols on ``device``.

    With ``calendar``, four known-future columns follow (time of session and day of week as sin/cos), as the
    real feature builder makes them. ``log_return`` is the target column scaled to a one-minute return (1e-3).
    """
    generator = torch.Generator().manual_seed(seed)
    blocks = []
    minute = torch.arange(bars_per_symbol, dtype=torch.float64)
    session_angle = 2 * math.pi * (minute % MINUTES_PER_SESSION) / MINUTES_PER_SESSION
    week_angle = 2 * math.pi * (minute // MINUTES_PER_SESSION % SESSIONS_PER_WEEK) / SESSIONS_PER_WEEK
    calendar_columns = torch.stack(
        [session_angle.sin(), session_angle.cos(), week_angle.sin(), week_angle.cos()], dim=1
    ).float()
    for _ in range(n_symbols):
        observed = torch.randn(bars_per_symbol, n_observed, generator=generator)
        blocks.append(torch.cat([observed, calendar_columns], dim=1) if calendar else observed)
    values = torch.cat(blocks)
    position = torch.arange(bars_per_symbol).repeat(n_symbols)
    names = ("log_return", *(f"observed_{i}" for i in range(1, n_observed)))
    known_future: tuple[int, ...] = ()
    if calendar:
        names += ("tod_sin", "tod_cos", "dow_sin", "dow_cos")
        known_future = tuple(range(n_observed, n_observed + 4))
    return FeatureTensors(
        values=values.to(device),
        log_return=(1e-3 * values[:, 0]).to(device),
        symbol_id=torch.arange(n_symbols).repeat_interleave(bars_per_symbol).to(device),
        is_train=(position < int(train_fraction * bars_per_symbol)).to(device),
        feature_names=names,
        target_column=0,
        known_future_columns=known_future,
        symbols=tuple(f"SYN{i}" for i in range(n_symbols)),
    )
