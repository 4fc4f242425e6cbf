"""What-ifs: a model's result had it run under different settings, re-measured."""

from __future__ import annotations

from dataclasses import dataclass

from gpubench.results.codec import Record
from gpubench.results.model import ModelResult


@dataclass(frozen=True)
class WhatIf(Record):
    """One alternative a model was measured in briefly after its main measurement (``decision.what_if``): the
    ``variant`` name (bf16, tf32, compile, reduce-overhead, knee), what it changes in words, the execution and batch
    it ran with, its short measurement's length (epochs of at least ``epoch_min_seconds`` s) and the model's
    section from that measurement, with the same statistics as the main one."""

    variant: str
    description: str
    precision: str
    compile: str
    matmul_precision: str
    batch_size: int | None
    epochs: int
    epoch_min_seconds: float
    result: ModelResult
