"""The setup every process that builds workloads shares (device, CPU threads, VRAM cap, matmul precision, seed, data,
block timer), so that a model is built the same way wherever it is built."""

from dataclasses import dataclass, replace

import pyarrow as pa
import torch

from gpubench.bench.model_run import ModelRunContext
from gpubench.config import BenchmarkConfig
from gpubench.data.loader import load_features
from gpubench.data.tensors import FeatureTensors
from gpubench.hardware.host import choose_cpu_threads
from gpubench.hardware.selection import resolve_device, synchronizer
from gpubench.hardware.vram import VramBudget, apply_vram_limit
from gpubench.measure.timing import BlockTimer
from gpubench.results import DataProvenance


@dataclass(frozen=True)
class Session:
    """A prepared process: config, device, intra-op threads and their source, VRAM budget (None on the CPU), block
    timer, and the market data on the device (None until loaded)."""

    cfg: BenchmarkConfig
    device: torch.device
    cpu_threads: int
    threads_source: str
    vram_budget: VramBudget | None
    timer: BlockTimer
    features: FeatureTensors | None = None
    provenance: DataProvenance | None = None

    @property
    def usable_vram_mb(self) -> float | None:
        """The VRAM (MB) the models may use; None on the CPU."""
        return None if self.vram_budget is None else self.vram_budget.usable_vram_mb

    def with_data(self, bars: tuple[pa.Table, DataProvenance] | None = None) -> "Session":
        """This session with the job's market data (``bars``, when read already) loaded onto its device."""
        features, provenance = load_features(self.cfg.data, self.device, bars)
        return replace(self, features=features, provenance=provenance)

    def model_run_context(self, *, reference_sm_clock_mhz: float | None = None, **extra) -> ModelRunContext:
        """The context models are built and measured in; ``extra`` sets its other fields."""
        if self.features is None:
            raise RuntimeError("the session's data is not loaded: prepare it with load_data, or call with_data()")
        return ModelRunContext(
            cfg=self.cfg,
            device=self.device,
            features=self.features,
            timer=self.timer,
            usable_vram_mb=self.usable_vram_mb,
            reference_sm_clock_mhz=reference_sm_clock_mhz,
            **extra,
        )


def choose_device(cfg: BenchmarkConfig, *, local_rank: int | None = None) -> tuple[torch.device, str | None]:
    """The device ``cfg.hardware`` names and a notice when the choice may surprise; a rank (``local_rank``) gets
    its own GPU, made the current one."""
    device, notice = resolve_device(cfg.hardware)
    if device.type == "cuda" and local_rank is not None:
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
    return device, notice


def prepare_session(
    cfg: BenchmarkConfig, *, device: torch.device | None = None, cpu_threads: int | None = None, load_data: bool = True
) -> Session:
    """Set this process up for ``cfg``'s models; ``cpu_threads`` overrides ``hardware.cpu_threads``, ``load_data``
    False leaves the data for :meth:`Session.with_data`."""
    if device is None:
        device, _ = choose_device(cfg)
    threads, source = choose_cpu_threads(cfg.hardware.cpu_threads if cpu_threads is None else cpu_threads, device)
    budget = apply_vram_limit(device, cfg.hardware.vram_limit_gb)
    # Before anything runs on the device: the burn-in's matmuls then run as the models' will.
    torch.set_float32_matmul_precision(cfg.execution.matmul_precision)
    torch.manual_seed(cfg.seed)
    session = Session(
        cfg=cfg,
        device=device,
        cpu_threads=threads,
        threads_source=source,
        vram_budget=budget,
        timer=BlockTimer(synchronizer(device)),
    )
    return session.with_data() if load_data else session
