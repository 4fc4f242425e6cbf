"""The parent side of a data-parallel run: launch a model's ranks under torchrun in
``<report folder>/distributed/<model>/``, wait, and build the model's ``distributed`` section from rank 0's
``result.json``. torchrun runs in a session of its own, so a terminal's Ctrl-C reaches the parent only, which then
stops torchrun (SIGTERM, then SIGKILL) and keeps the 1-process result."""

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import torch
from omegaconf import OmegaConf

from gpubench.bench.model_run import ModelInterrupted, ModelRun
from gpubench.bench.rank_worker import PID_FILE_PATTERN, WorkerSpec
from gpubench.config import BenchmarkConfig
from gpubench.errors import ConfigError
from gpubench.hardware.host import available_cpus
from gpubench.hardware.selection import visible_gpu_count
from gpubench.measure.batch_search import release_device_memory
from gpubench.output import console
from gpubench.output.redact import redact
from gpubench.results import DistributedScaling, ModelResult
from gpubench.stats.scaling import GatheredRun, distributed_scaling

#: NVLink multicast stays off in every process started: it needs fabric support not every multi-GPU host has.
CHILD_ENVIRONMENT = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1"}
#: Seconds torchrun gets to stop its ranks after SIGTERM (its own grace for its workers is 30 s).
TERMINATE_GRACE_S = 40.0
#: Where torchrun's summary of a failed run begins.
_ROOT_CAUSE = "Root Cause (first observed failure):"


def check_launchable(
    cfg: BenchmarkConfig,
    device: torch.device,
    gpu_count: Callable[[], int] = visible_gpu_count,
    cpu_count: Callable[[], int] = available_cpus,
) -> None:
    """Raise ConfigError for ``distributed`` settings this machine cannot run, before anything is measured."""
    distributed = cfg.distributed
    if not distributed.enabled:
        return
    if device.type == "cuda":
        visible = gpu_count()
        if distributed.nproc > visible:
            raise ConfigError(
                f"`distributed.nproc` = {distributed.nproc} is not valid here: this machine shows {visible} CUDA "
                f"GPU(s) (CUDA_VISIBLE_DEVICES applied), and each rank needs a GPU of its own. Use distributed.nproc "
                f"<= {visible}, or hardware=cpu to run {distributed.nproc} processes on the CPU."
            )
        return
    # Ranks sharing a core would time the cores' contention, not data-parallel scaling.
    usable = cpu_count()
    if distributed.nproc > usable:
        raise ConfigError(
            f"`distributed.nproc` = {distributed.nproc} is not valid here: this process may use {usable} CPU(s) "
            f"(its affinity applied), and each rank on the CPU needs one of its own, or the scaling measured is the "
            f"ranks' contention for the cores. Use distributed.nproc <= {usable}."
        )
    if distributed.backend == "nccl":
        raise ConfigError(
            "`distributed.backend` = 'nccl' is not valid on the CPU: NCCL needs GPUs. Use distributed.backend=gloo "
            "or auto (gloo on the CPU)."
        )


def torchrun_command(nproc: int, spec_path: Path, result_path: Path) -> list[str]:
    """The torchrun command line that starts ``nproc`` ranks of the worker on this machine."""
    launcher = ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(nproc)]
    return [sys.executable, *launcher, "-m", "gpubench.bench.rank_worker", str(spec_path), str(result_path)]


def child_environment(threads_per_rank: int | None) -> dict[str, str]:
    """This process's environment for torchrun, with gpubench importable and each CPU rank's share of threads."""
    env = {**os.environ, **CHILD_ENVIRONMENT}
    package_root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    if threads_per_rank is not None:
        env["OMP_NUM_THREADS"] = str(threads_per_rank)
    return env


def _failure_pid(block: str) -> str | None:
    """The pid a failure block of torchrun's summary names (``exitcode : -15 (pid: 18761)``), or None."""
    match = re.search(r"\(pid:\s*(\d+)\)", block)
    return match.group(1) if match else None


def failure(log_text: str, returncode: int) -> tuple[str, str]:
    """(status, error) of a torchrun that exited ``returncode`` != 0: the failed rank and its signal or exception.

    torchrun's root cause is timed in whole seconds, so it may be a rank torchrun stopped itself: the first failure
    whose pid torchrun did not signal is reported."""
    _, found, summary = log_text.partition(_ROOT_CAUSE)
    if not found:
        tail = " / ".join(line.strip() for line in log_text.strip().splitlines()[-3:])
        return "failed", f"torchrun exited {returncode} without a failure summary: {tail or 'no output'}"
    root = summary.split("=" * 20, 1)[0]
    _, _, others = log_text.partition("Failures:")
    other_blocks = re.split(r"^\[\d+\]:\s*$", others.partition(_ROOT_CAUSE)[0], flags=re.M)[1:]
    stopped = set(re.findall(r"Sending process (\d+) closing signal", log_text))
    block = next((b for b in [root, *other_blocks] if _failure_pid(b) not in stopped), root)
    rank_match = re.search(r"rank\s*:\s*(\d+)", block)
    code_match = re.search(r"exitcode\s*:\s*(-?\d+)", block)
    rank = rank_match.group(1) if rank_match else "?"
    code = int(code_match.group(1)) if code_match else returncode
    if code < 0:
        return "failed", f"rank {rank} was killed by {signal.Signals(-code).name}; torchrun stopped the other ranks"
    lines = [line.strip() for line in block.splitlines() if line.strip()]
    message = lines[-1] if lines else f"exit code {code}"
    status = "oom" if "OutOfMemoryError" in block or "out of memory" in block else "failed"
    return status, f"rank {rank} exited {code} ({message}); torchrun stopped the other ranks"


def _kill_left(process: subprocess.Popen, folder: Path) -> None:
    """SIGKILL torchrun's process group and every rank whose pid file is in ``folder`` (each rank has its own
    session, outside the group)."""
    kills = [(os.killpg, process.pid)]
    for pid_file in folder.glob(PID_FILE_PATTERN.format(rank="*")):
        with contextlib.suppress(OSError, ValueError):
            kills.append((os.kill, int(pid_file.read_text())))
    for kill, pid in kills:
        with contextlib.suppress(ProcessLookupError):
            kill(pid, signal.SIGKILL)


def _run(command: list[str], env: dict[str, str], folder: Path) -> int:
    """Run torchrun in ``folder`` and return its exit code; on an interrupt, stop it and raise the interrupt again."""
    with (folder / "torchrun.log").open("wb") as log:
        process = subprocess.Popen(
            command, env=env, cwd=os.getcwd(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            return process.wait()
        except KeyboardInterrupt:
            try:
                process.send_signal(signal.SIGTERM)
                process.wait(timeout=TERMINATE_GRACE_S)
            except (subprocess.TimeoutExpired, KeyboardInterrupt):
                _kill_left(process, folder)
                process.wait()
            raise


def measure_distributed(
    name: str, single: ModelResult, cfg: BenchmarkConfig, device: torch.device, folder: Path
) -> ModelResult:
    """Model ``name``'s 1-process result with its data-parallel measurement in ``folder`` attached; an interrupt
    raises :class:`~gpubench.bench.model_run.ModelInterrupted` carrying it."""
    nproc = cfg.distributed.nproc
    backend = cfg.distributed.resolved_backend(device.type)
    folder.mkdir(parents=True, exist_ok=True)
    config_path, spec_path, result_path = (folder / f for f in ("config.yaml", "spec.json", "result.json"))
    for stale in (result_path, *folder.glob(PID_FILE_PATTERN.format(rank="*"))):
        stale.unlink(missing_ok=True)
    config_tree = OmegaConf.to_container(OmegaConf.structured(cfg), resolve=True)
    config_path.write_text(redact(OmegaConf.to_yaml(config_tree)))
    cpu_threads = torch.get_num_threads() if device.type == "cpu" else None
    spec = WorkerSpec(
        config_path=str(config_path),
        model=name,
        batch_size=single.batch_size or getattr(cfg.workloads, name).batch_size,
        steps_per_epoch=single.steps_per_epoch or 1,
        warmup_epochs=len(single.warmup_epoch_times_ms),
        epochs=len(single.raw_epoch_times_ms),
        cpu_threads=cpu_threads,
        search=single.batch_search is not None,
    )
    spec.write(spec_path)
    threads_per_rank = None if cpu_threads is None else max(1, cpu_threads // nproc)
    console.notice(f"{name}: measuring {nproc} processes under torchrun ({backend}; log: {folder / 'torchrun.log'})")
    # The parent's cached blocks would stay reserved on cuda:0 beside rank 0's.
    release_device_memory()
    base = DistributedScaling(status="failed", world_size=nproc, backend=backend, batch_size_per_rank=spec.batch_size)
    try:
        returncode = _run(torchrun_command(nproc, spec_path, result_path), child_environment(threads_per_rank), folder)
    except KeyboardInterrupt:
        interrupted = replace(
            base, status="interrupted", error=f"interrupted during the {nproc}-process run; torchrun was stopped"
        )
        raise ModelInterrupted(ModelRun(replace(single, distributed=interrupted), None)) from None
    log_text = (folder / "torchrun.log").read_text(errors="replace")
    if not result_path.is_file():
        status, error = failure(log_text, returncode)
        scaling = replace(base, status=status, error=error)
    else:
        # A rank failing in the teardown, after the results were gathered, does not undo the measurement.
        gathered = GatheredRun.from_dict(json.loads(result_path.read_text()))
        scaling = distributed_scaling(gathered, single, cfg.statistics)
        if returncode != 0:
            _, error = failure(log_text, returncode)
            note = f"torchrun exited {returncode} after the ranks' results were gathered: {error}"
            scaling = replace(scaling, warnings=[*scaling.warnings, note])
    if scaling.error:
        console.notice(f"{name}: the {nproc}-process run did not complete: {scaling.error}")
    return replace(single, distributed=scaling)
