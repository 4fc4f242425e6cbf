"""One rank of a data-parallel run: ``python -m torch.distributed.run ... -m gpubench.bench.rank_worker SPEC RESULT``.

Each rank rebuilds the model as the 1-process run built it, under DistributedDataParallel and seeded ``seed + rank``,
runs the same epochs, and rank 0 writes the gathered :class:`~gpubench.stats.scaling.GatheredRun` to ``RESULT``.
Each rank writes its pid to ``rank<r>.pid`` so that the parent can signal it."""

import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path

PID_FILE_PATTERN = "rank{rank}.pid"


@dataclass(frozen=True)
class WorkerSpec:
    """What every rank runs: the 1-process run's model, batch (weak scaling) and epochs; ``cpu_threads`` to split
    between the CPU ranks (None on GPUs); ``search``: run the agreed batch search."""

    config_path: str
    model: str
    batch_size: int
    steps_per_epoch: int
    warmup_epochs: int
    epochs: int
    cpu_threads: int | None = None
    search: bool = False

    def write(self, path: Path) -> None:
        path.write_text(json.dumps(self.__dict__))

    @classmethod
    def read(cls, path: Path) -> "WorkerSpec":
        return cls(**json.loads(path.read_text()))


def rank_threads(cpu_threads: int, world_size: int) -> int:
    """Intra-op threads per CPU rank: ``cpu_threads`` shared by ``world_size`` ranks, at least one each."""
    return max(1, cpu_threads // world_size)


def merge_trials(trials: Sequence) -> object:
    """The batch-search trial every rank acts on, from each rank's own: an OOM anywhere is an OOM; else the
    largest peak and seconds and the smallest samples/s (the slowest rank paces a data-parallel step)."""
    from gpubench.results import BatchTrial

    first = trials[0]
    oom = [(rank, trial) for rank, trial in enumerate(trials) if trial.status == "oom"]
    if oom:
        rank, trial = oom[0]
        return BatchTrial(
            size=first.size, status="oom", phase=first.phase, steps=first.steps, error=f"rank {rank}: {trial.error}"
        )
    peaks = [t.peak_reserved_mb for t in trials if t.peak_reserved_mb is not None]
    seconds = [t.seconds for t in trials if t.seconds is not None]
    throughputs = [t.samples_per_s for t in trials if t.samples_per_s is not None]
    return BatchTrial(
        size=first.size,
        status="over_headroom" if any(t.status == "over_headroom" for t in trials) else "ok",
        phase=first.phase,
        steps=first.steps,
        peak_reserved_mb=max(peaks) if peaks else None,
        samples_per_s=min(throughputs) if throughputs else None,
        seconds=max(seconds) if seconds else None,
    )


def agree_across_ranks(trial):
    """The batch search's agreement under DDP: every rank's trial gathered to all and merged."""
    import torch.distributed as dist

    gathered: list = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, trial)
    return merge_trials(gathered)


@dataclass(frozen=True)
class _RankOutcome:
    """One rank's measurement and the facts of the run it measured."""

    measurement: object
    batch_size: int
    steps_per_epoch: int
    sample_unit: str
    batch_search: object
    warnings: list[str]


def _measure_rank(spec: WorkerSpec, context, rank: int) -> _RankOutcome:
    """The agreed batch search (when the spec asks for it), then this rank's timed warmup and measured epochs."""
    import torch

    from gpubench.bench.model_run import build_workload, choose_batch
    from gpubench.measure.epochs import measure_workload
    from gpubench.measure.memory import TorchCudaAllocator
    from gpubench.measure.stability import StabilityMonitor
    from gpubench.results.units import BYTES_PER_MB
    from gpubench.stats.scaling import RankMeasurement

    cfg, device = context.cfg, context.device
    batch_size, warnings, search = spec.batch_size, [], None
    if spec.search:
        decision = choose_batch(spec.model, context)
        search = None if decision is None else decision.record
        if decision is not None and decision.record.batch_size is None:
            raise torch.OutOfMemoryError(
                f"the batch search under DDP found no batch that fits: {decision.record.message}"
            )
        fitting = None if decision is None else decision.record.largest_fitting_size
        if decision is not None and fitting is not None and fitting < batch_size:
            warnings.append(
                f"the 1-process batch {batch_size} does not fit a rank under DDP (the agreed search's largest "
                f"fitting batch is {fitting}): each rank is timed at {decision.record.batch_size}"
            )
            batch_size = decision.record.batch_size
    workload = build_workload(spec.model, context, batch_size)
    allocator = TorchCudaAllocator(device) if device.type == "cuda" else None
    if allocator is not None:
        allocator.reset_peak()

    def on_epoch(phase: str, number: int, planned: int, seconds: float, loss: float | None) -> None:
        if rank == 0:
            print(f"rank 0 {phase} epoch {number}/{planned}: {seconds * 1e3:.1f} ms", flush=True)

    measurement = measure_workload(
        workload,
        timer=context.timer,
        epochs=spec.epochs,
        warmup_epochs=spec.warmup_epochs,
        epoch_config=replace(cfg.epoch, steps=str(spec.steps_per_epoch)),
        statistics=cfg.statistics,
        monitor=StabilityMonitor(cfg.stability, device),
        on_epoch=on_epoch,
    )
    peak_mb = None if allocator is None else allocator.snapshot().peak_reserved_bytes / BYTES_PER_MB
    mine = RankMeasurement(
        rank=rank,
        epoch_times_ms=measurement.epoch_times_ms,
        warmup_epoch_times_ms=measurement.warmup_epoch_times_ms,
        samples_per_step=workload.samples_per_step,
        peak_reserved_mb=peak_mb,
        stop_reason=measurement.stop_reason,
    )
    return _RankOutcome(mine, batch_size, measurement.sizing.steps_per_epoch, workload.sample_unit, search, warnings)


def run_rank(spec: WorkerSpec, result_path: Path) -> None:
    """Run this process's rank of the data-parallel measurement (see the module docstring)."""
    import gc

    import torch.distributed as dist

    from gpubench.bench.session import choose_device, prepare_session
    from gpubench.config import load_resolved_config
    from gpubench.stats.scaling import GatheredRun

    rank, local_rank, world_size = (int(os.environ[k]) for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE"))
    Path(result_path).parent.joinpath(PID_FILE_PATTERN.format(rank=rank)).write_text(str(os.getpid()))
    cfg = load_resolved_config(Path(spec.config_path))
    device, _ = choose_device(cfg, local_rank=local_rank)
    backend = cfg.distributed.resolved_backend(device.type)
    dist.init_process_group(
        backend,
        timeout=timedelta(seconds=cfg.distributed.timeout_s),
        device_id=device if device.type == "cuda" else None,
    )
    # After joining the group, so that the VRAM cap counts NCCL's buffers in the context's overhead.
    threads = None if spec.cpu_threads is None else rank_threads(spec.cpu_threads, world_size)
    session = prepare_session(cfg, device=device, cpu_threads=threads)
    context = session.model_run_context(data_parallel=True, rank=rank, trial_agreement=agree_across_ranks)
    outcome = _measure_rank(spec, context, rank)
    # A DDP reducer torn down after the group aborts the process.
    gc.collect()
    ranks: list = [None] * world_size
    dist.all_gather_object(ranks, outcome.measurement)
    if rank == 0:
        gathered = GatheredRun(
            world_size=world_size,
            backend=backend,
            batch_size_per_rank=outcome.batch_size,
            steps_per_epoch=outcome.steps_per_epoch,
            sample_unit=outcome.sample_unit,
            ranks=ranks,
            batch_search=outcome.batch_search,
            warnings=outcome.warnings,
        )
        tmp = Path(f"{result_path}.tmp")
        tmp.write_text(json.dumps(gathered.to_dict()))
        os.replace(tmp, result_path)
    # Every rank leaves together, or a peer's gloo threads fail.
    dist.barrier()
    dist.destroy_process_group()


def main(argv: list[str] | None = None) -> int:
    """The rank's entry point: ``SPEC RESULT`` paths."""
    from torch.distributed.elastic.multiprocessing.errors import record

    spec_path, result_path = (Path(arg) for arg in (argv if argv is not None else sys.argv[1:]))
    record(run_rank)(WorkerSpec.read(spec_path), result_path)
    return 0


if __name__ == "__main__":
    code = main()
    # Skip the interpreter's teardown, where gloo's threads may abort a rank whose result is on disk.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
