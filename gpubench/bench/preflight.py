"""A job's inputs checked before its MLflow run and its files exist: device, distributed settings, report path and
data (the config's values, factory and price folder: :func:`~gpubench.config.typed_config`)."""

from dataclasses import dataclass

import pyarrow as pa
import torch

from gpubench.bench.ranks import check_launchable
from gpubench.bench.session import choose_device
from gpubench.config import BenchmarkConfig
from gpubench.data.loader import load_bars
from gpubench.output.report_file import check_output_path
from gpubench.results import DataProvenance


@dataclass(frozen=True)
class CheckedInputs:
    """What the checks found: the ``device`` with its notice (None unless the choice may surprise), and the market
    data's bar table and provenance (``bars``), read once for the run."""

    device: torch.device
    device_notice: str | None
    bars: tuple[pa.Table, DataProvenance]


def check_inputs(cfg: BenchmarkConfig) -> CheckedInputs:
    """Check what ``cfg`` names outside itself; raises a :class:`~gpubench.errors.GpubenchError` naming the key."""
    device, notice = choose_device(cfg)
    check_launchable(cfg, device)
    check_output_path(cfg.output)
    return CheckedInputs(device=device, device_notice=notice, bars=load_bars(cfg.data))
