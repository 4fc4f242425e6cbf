"""What-ifs: a model's result had it run under different settings, re-measured."""

from __future__ import annotations

from dataclasses import dataclass

from gpubench.results.codec import Record
from gpubench.results.model import ModelResult


@dataclass(frozen=True)
class WhatIf(Record):
    """One alternative (``variant``: bf16, tf32, compile, reduce-overhead, knee) measured briefly after the model's
    main measurement, with its execution, batch, length (epochs of ``epoch_min_seconds`` s) and model section."""

    variant: str
    description: str
    precision: str
    compile: str
    matmul_precision: str
    batch_size: int | None
    epochs: int
    epoch_min_seconds: float
    result: ModelResult
