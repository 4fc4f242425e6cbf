"""One rank of a data-parallel run: ``python -m torch.distributed.run ... -m gpubench.bench.rank_worker SPEC RESULT``.

torchrun starts ``world_size`` of these, each with ``RANK``, ``LOCAL_RANK`` and ``WORLD_SIZE`` in its environment.
Each rank joins the process group (NCCL on GPUs, gloo on the CPU), rebuilds the job's config from the spec's YAML
and the model as the 1-process run built it, on ``cuda:LOCAL_RANK`` (or the CPU, with its share of the 1-process
run's threads), its data and environments seeded ``seed + rank`` and its trained networks under
DistributedDataParallel (which broadcasts rank 0's parameters). On a GPU with the batch search on, every rank runs
the search with its trials agreed across the ranks (:func:`agree_across_ranks`). Then every rank runs the same
warmup and measured epochs of the 1-process run's ``steps_per_epoch`` steps, each timed between device
synchronisations; rank 0 gathers the ranks' epoch times, peak memory and sample counts and writes ``RESULT``
(:class:`~gpubench.stats.scaling.GatheredRun`). Each rank writes its process id to ``rank<r>.pid`` beside the
spec first, so that the parent (or a test) can signal it.

A rank that raises exits non-zero (its traceback goes to torchrun's summary through ``@record``); torchrun then
stops the other ranks, so no rank stays blocked in a collective with a dead peer.
"""

import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path

#: The ranks' process-id files beside the spec: ``rank0.pid``, ``rank1.pid``, ...
PID_FILE_PATTERN = "rank{rank}.pid"


@dataclass(frozen=True)
class WorkerSpec:
    """What every rank runs: model ``model`` from the config at ``config_path``, each rank at ``batch_size`` (the
    1-process run's timed batch: weak scaling), ``warmup_epochs`` and ``epochs`` epochs of ``steps_per_epoch``
    steps (the 1-process run's), the CPU split ``cpu_threads // world_size`` threads a rank (None: torch's
    default; GPUs keep it), and the batch search run (agreed) when ``search`` is set."""

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
    """Intra-op threads per rank on the CPU: the 1-process run's ``cpu_threads`` shared by ``world_size`` ranks,
    at least one each (ranks with more threads than cores between them would preempt one another)."""
    return max(1, cpu_threads // world_size)


def merge_trials(trials: Sequence) -> object:
    """The batch-search trial every rank acts on, from each rank's own (in rank order).

    An OOM on any rank is an OOM for all (its error names the rank); otherwise the trial is over the headroom when
    it was on any rank, its peak reserved memory (MB) and seconds are the largest over the ranks (the slowest rank
    paces a data-parallel step), and its samples/s the smallest (per rank).
    """
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
    """The batch search's agreement under DDP (:data:`gpubench.measure.batch_search.TrialAgreement`): every rank's
    trial gathered to all (one collective after the trial's steps, which ran none), merged by
    :func:`merge_trials`."""
    import torch.distributed as dist

    gathered: list = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, trial)
    return merge_trials(gathered)


@dataclass(frozen=True)
class _RankOutcome:
    """One rank's measurement and the facts of the run it measured, as plain values (the workload is gone)."""

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
    from gpubench.stats.scaling import RankMeasurement
    from gpubench.units import BYTES_PER_MB

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
    # With the rank's GPU named, NCCL binds its communicator to it (and a barrier knows which device to use).
    dist.init_process_group(
        backend,
        timeout=timedelta(seconds=cfg.distributed.timeout_s),
        device_id=device if device.type == "cuda" else None,
    )
    # After joining the group: the VRAM cap then counts NCCL's buffers in the CUDA context's overhead. On the CPU each
    # rank takes its share of the 1-process run's threads; on GPUs the spec carries none and the rank chooses as the
    # 1-process run did (hardware.cpu_threads, else torch's default).
    threads = None if spec.cpu_threads is None else rank_threads(spec.cpu_threads, world_size)
    session = prepare_session(cfg, device=device, cpu_threads=threads)
    context = session.model_run_context(data_parallel=True, rank=rank, trial_agreement=agree_across_ranks)
    outcome = _measure_rank(spec, context, rank)
    # The workload's DDP wrappers hold the process group (their reducers): they must be gone before the group is
    # destroyed, or a reducer torn down at exit, after the group, aborts the process (seen with gloo).
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
    # Every rank leaves the group together: one that tore its connections down while a peer still used them would
    # make the peer's gloo threads fail.
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
    # The rank has left its process group and its result is on disk: skip the interpreter's teardown, where gloo's
    # threads, destroyed after the group, sometimes abort the process ("terminate called without an active
    # exception", SIGABRT) and torchrun would report a measurement that completed as a failure.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
