"""The run-to-run level: how far a run's mean moves between runs of one config on one machine (a host drifting over
hours looks steady within one run)."""

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

#: Earlier runs before the history enters the bound (with this run: 2 degrees of freedom).
MIN_EARLIER_RUNS = 2


@dataclass(frozen=True)
class RunLevel:
    """The run-to-run variance of a run's mean over the mean squared, from ``runs`` runs (this one included)."""

    relative_variance: float
    degrees_of_freedom: float
    runs: int


def run_level(means: Sequence[float], relative_variances: Sequence[float]) -> RunLevel:
    """One-way random-effects ANOVA of K >= 2 runs' means, each with its relative variance v_k (Var(mean) / mean²):
    max(0, s² / ȳ² − mean v_k) on K − 1 degrees of freedom."""
    y = np.asarray(means, dtype=float)
    v = np.asarray(relative_variances, dtype=float)
    if y.size < 2 or y.size != v.size or np.any(y <= 0) or np.any(v < 0):
        raise ValueError(f"need two runs or more, positive means and variances >= 0; got {list(y)} and {list(v)}")
    spread = float(y.var(ddof=1)) / float(y.mean()) ** 2
    return RunLevel(max(spread - float(v.mean()), 0.0), float(y.size - 1), int(y.size))


def combined(pieces: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """(Σ V_i, Satterthwaite's degrees of freedom (Σ V_i)² / Σ V_i²/ν_i) of independent variance pieces (V, ν)."""
    total = sum(v for v, _ in pieces)
    denominator = sum(v * v / dof for v, dof in pieces if v > 0)
    return total, (total * total / denominator if denominator > 0 else min(dof for _, dof in pieces))
