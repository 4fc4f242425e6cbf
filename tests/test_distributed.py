"""Data-parallel measurement (issue 15) on the CPU: gloo, 2 processes, started by the real torchrun.

Pure parts get known answers (the global epochs, the scaling efficiency and its interval, the merge of the ranks'
batch-search trials, torchrun's failure summary); the batch search's agreement runs over a real 2-rank gloo group
with a fake OOM oracle on rank 1; one end-to-end CLI run (shared by its assertions) checks the report's
``distributed`` section. Signals to a rank and to the parent are the slow tests.
"""

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy import stats as sps

from gpubench.bench.rank_worker import merge_trials, rank_threads
from gpubench.bench.ranks import (
    CHILD_ENVIRONMENT,
    check_launchable,
    child_environment,
    failure,
    torchrun_command,
)
from gpubench.bench.ranks_config import DistributedConfig
from gpubench.config import BenchmarkConfig, ExecutionConfig
from gpubench.errors import ConfigError
from gpubench.output.console import distributed_line
from gpubench.output.tracking import run_record
from gpubench.results import BatchTrial, DistributedScaling, ModelResult, RunReport
from gpubench.stats.compare import RunMean, fieller_interval
from gpubench.stats.config import StatisticsConfig
from gpubench.stats.epoch_times import summarize_epoch_times
from gpubench.stats.scaling import (
    METHOD_FIELLER,
    METHOD_T_RATIO,
    GatheredRun,
    RankMeasurement,
    distributed_scaling,
    global_epoch_times_ms,
    scaling_efficiency,
)
from gpubench.workload import ExecutionContext
from tests.report_factory import report

REPO = Path(__file__).resolve().parents[1]


def environment(cache: Path) -> dict[str, str]:
    inherited = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    return {
        **inherited,
        "OMP_NUM_THREADS": "1",
        "GPU_BENCHMARK_CACHE_DIR": str(cache),
        "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), inherited.get("PYTHONPATH")) if p),
    }


# ------------------------------------------------------------------------------------------------ arithmetic


def test_a_global_epoch_is_the_slowest_ranks():
    assert global_epoch_times_ms([[1.0, 5.0, 3.0], [2.0, 4.0, 6.0]]) == [2.0, 5.0, 6.0]
    # A rank that completed fewer epochs bounds the global ones.
    assert global_epoch_times_ms([[1.0, 5.0, 3.0], [2.0, 4.0]]) == [2.0, 5.0]


def test_efficiency_of_constant_epochs_is_the_ratio_of_the_times_exactly():
    # 1 process: 100 ms for 640 windows; 2 processes: 125 ms for 640 windows each. Global throughput
    # 1280 / 0.125 = 10,240/s against 2 x 6,400/s = 12,800/s: 0.8.
    efficiency = scaling_efficiency([100.0] * 12, 640.0, [125.0] * 12, 640.0, 0.95)
    assert efficiency.value == pytest.approx(0.8)
    assert efficiency.method == METHOD_FIELLER
    assert efficiency.interval == pytest.approx((0.8, 0.8))


def test_efficiency_compares_time_per_sample_when_the_batches_differ():
    # 2 processes at half the batch (320 windows a rank) in 60 ms: 640 / 0.06 = 10,666.7/s global against
    # 2 x 6,400/s: 0.8333.
    efficiency = scaling_efficiency([100.0] * 12, 640.0, [60.0] * 12, 320.0, 0.95)
    assert efficiency.value == pytest.approx((100.0 / 640.0) / (60.0 / 320.0))


def test_efficiency_interval_from_many_epochs_is_fiellers_on_the_per_sample_times():
    rng = np.random.default_rng(3)
    single = 100.0 + rng.normal(0, 3, 20)
    ranks = 120.0 + rng.normal(0, 3, 20)
    efficiency = scaling_efficiency(single, 640.0, ranks, 640.0, 0.9)
    expected = fieller_interval(RunMean.of([ranks / 640.0]), RunMean.of([single / 640.0]), 0.9)
    assert efficiency.value == pytest.approx(single.mean() / ranks.mean())
    assert efficiency.interval == pytest.approx((expected.low, expected.high))
    assert efficiency.interval[0] < efficiency.value < efficiency.interval[1]


def test_efficiency_interval_from_few_epochs_is_the_box_of_two_t_intervals():
    single = np.array([100.0, 102.0, 98.0, 101.0, 99.0])
    ranks = np.array([125.0, 126.0, 124.0, 125.5, 124.5])
    efficiency = scaling_efficiency(single, 10.0, ranks, 10.0, 0.95)
    # Hand-worked: each run's t interval at sqrt(0.95) (4 degrees of freedom), per sample (÷ 10).
    t = sps.t.ppf(0.5 + math.sqrt(0.95) / 2, 4)
    half_single = t * single.std(ddof=1) / math.sqrt(5) / 10
    half_ranks = t * ranks.std(ddof=1) / math.sqrt(5) / 10
    low = (10.0 - half_single) / (12.5 + half_ranks)
    high = (10.0 + half_single) / (12.5 - half_ranks)
    assert efficiency.method == METHOD_T_RATIO
    assert efficiency.value == pytest.approx(0.8)
    assert efficiency.interval == pytest.approx((low, high))


def test_the_distributed_section_from_two_ranks():
    single_times = [100.0] * 10
    statistics = StatisticsConfig()
    single = ModelResult(
        status="ok",
        raw_epoch_times_ms=single_times,
        steps_per_epoch=10,
        samples_per_step=64.0,
        sample_unit="window",
        batch_size=64,
        statistics=summarize_epoch_times(single_times, confidence_level=0.95),
    )
    gathered = GatheredRun(
        world_size=2,
        backend="gloo",
        batch_size_per_rank=64,
        steps_per_epoch=10,
        sample_unit="window",
        ranks=[
            RankMeasurement(1, [110.0] * 5 + [130.0] * 5, [200.0], 64.0, None, "epochs"),
            RankMeasurement(0, [120.0] * 10, [210.0], 64.0, None, "epochs"),
        ],
    )
    scaling = distributed_scaling(gathered, single, statistics)
    assert scaling.status == "ok" and scaling.world_size == 2
    # Ordered by rank; the global epochs are the slower rank's: 120 ms five times, then 130 ms five times.
    assert scaling.per_rank_epoch_times_ms == [[120.0] * 10, [110.0] * 5 + [130.0] * 5]
    assert scaling.raw_epoch_times_ms == [120.0] * 5 + [130.0] * 5
    assert scaling.warmup_epoch_times_ms == [210.0]
    assert scaling.statistics is not None and scaling.statistics.mean_ms == pytest.approx(125.0)
    # 640 windows an epoch a rank: rank 0 at 120 ms mean, rank 1 at 120 ms mean; global 1,280 / 0.125 s.
    assert scaling.per_rank_samples_per_second == pytest.approx([640 / 0.12, 640 / 0.12])
    assert scaling.global_samples_per_second == pytest.approx(10_240.0)
    assert scaling.single_process_samples_per_second == pytest.approx(6_400.0)
    assert scaling.scaling_efficiency == pytest.approx(10_240.0 / (2 * 6_400.0))
    # The report's section reads back as written.
    section = ModelResult(status="ok", distributed=scaling).to_dict()["distributed"]
    assert ModelResult.from_dict({"status": "ok", "distributed": section}).distributed == scaling


def test_mlflow_and_the_summary_carry_the_scaling():
    scaling = DistributedScaling(
        world_size=2,
        sample_unit="window",
        global_samples_per_second=12_345.6,
        scaling_efficiency=0.93,
        scaling_efficiency_interval=(0.9, 0.95),
    )
    failed = DistributedScaling(status="failed", world_size=2, error="rank 1 was killed by SIGTERM")
    models = {"mlp": ModelResult(status="ok", distributed=scaling), "tft": ModelResult(status="ok", distributed=failed)}
    metrics = run_record(report(models)).metrics
    assert metrics["mlp/world_size"] == 2.0 and metrics["mlp/distributed_status_ok"] == 1.0
    assert metrics["mlp/scaling_efficiency"] == 0.93
    assert (metrics["mlp/scaling_efficiency_low"], metrics["mlp/scaling_efficiency_high"]) == (0.9, 0.95)
    assert metrics["mlp/global_samples_per_second"] == 12_345.6
    assert metrics["tft/distributed_status_ok"] == 0.0 and "tft/scaling_efficiency_low" not in metrics
    assert "distributed_status_ok" not in " ".join(run_record(report({"mlp": ModelResult(status="ok")})).metrics)
    assert distributed_line("mlp", scaling) == "mlp: 2 processes: 12,346 window/s global, efficiency 0.93 [0.90, 0.95]"
    assert distributed_line("tft", failed) == "tft: 2 processes: failed (rank 1 was killed by SIGTERM)"


def test_a_diverged_rank_marks_the_run_diverged():
    single = ModelResult(status="ok", raw_epoch_times_ms=[100.0, 100.0], steps_per_epoch=1, samples_per_step=1.0)
    gathered = GatheredRun(
        2, "gloo", 1, 1, "window", [RankMeasurement(r, [1.0, 2.0], [], 1.0, None, "diverged") for r in (0, 1)]
    )
    assert distributed_scaling(gathered, single, StatisticsConfig()).status == "diverged"


def test_an_oom_on_any_rank_fails_the_merged_trial_and_the_slowest_rank_paces_it():
    ok = BatchTrial(
        size=64, status="ok", phase="search", steps=3, peak_reserved_mb=100.0, samples_per_s=900.0, seconds=0.2
    )
    slower = BatchTrial(
        size=64, status="ok", phase="search", steps=3, peak_reserved_mb=120.0, samples_per_s=800.0, seconds=0.3
    )
    oom = BatchTrial(size=64, status="oom", phase="search", steps=3, error="CUDA out of memory")
    merged = merge_trials([ok, oom])
    assert merged.status == "oom" and merged.error == "rank 1: CUDA out of memory" and merged.size == 64
    merged = merge_trials([ok, slower])
    assert (merged.status, merged.peak_reserved_mb, merged.samples_per_s, merged.seconds) == ("ok", 120.0, 800.0, 0.3)
    over = BatchTrial(size=64, status="over_headroom", phase="verify", steps=20, peak_reserved_mb=200.0)
    assert merge_trials([ok, over]).status == "over_headroom"


def test_a_cpu_rank_gets_its_share_of_the_threads():
    assert [rank_threads(threads, 2) for threads in (1, 2, 5, 16)] == [1, 1, 2, 8]


def test_torchrun_failure_summaries_name_the_rank_and_the_signal_or_exception():
    killed = """[W1201] Sending process 18760 closing signal SIGTERM
Root Cause (first observed failure):
[0]:
  time      : 2026-12-01_14:57:36
  host      : localhost
  rank      : 1 (local_rank: 1)
  exitcode  : -15 (pid: 18761)  (SIGTERM)
  error_file: <N/A>
  traceback : Signal 15 (SIGTERM) received by PID 18761
============================================================
"""
    assert failure(killed, 1) == ("failed", "rank 1 was killed by SIGTERM; torchrun stopped the other ranks")
    # Seen in CI: rank 1 killed, rank 0 stopped by torchrun within the same second, and the summary's root cause
    # (earliest by whole-second timestamps, ties to the lower rank) is rank 0, the one torchrun stopped.
    tie = """[W1201] Sending process 8708 closing signal SIGTERM
============================================================
agreement.py FAILED
------------------------------------------------------------
Failures:
[1]:
  time      : 2026-12-01_15:34:43
  rank      : 1 (local_rank: 1)
  exitcode  : -15 (pid: 8709)
  traceback : Signal 15 (SIGTERM) received by PID 8709
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-12-01_15:34:43
  rank      : 0 (local_rank: 0)
  exitcode  : -15 (pid: 8708)
  traceback : Signal 15 (SIGTERM) received by PID 8708
============================================================
"""
    assert failure(tie, 1) == ("failed", "rank 1 was killed by SIGTERM; torchrun stopped the other ranks")
    raised = """Root Cause (first observed failure):
[0]:
  rank      : 0 (local_rank: 0)
  exitcode  : 1 (pid: 18689)
  traceback : Traceback (most recent call last):
    File "worker.py", line 10, in main
  torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB
============================================================
"""
    status, error = failure(raised, 1)
    assert status == "oom"
    assert error.startswith("rank 0 exited 1 (torch.OutOfMemoryError: CUDA out of memory.")
    status, error = failure("a\nb\nRendezvous failed\n", 1)
    assert status == "failed" and "torchrun exited 1 without a failure summary: a / b / Rendezvous failed" in error


def test_the_child_runs_torchrun_with_nvlink_multicast_off():
    command = torchrun_command(2, Path("s.json"), Path("r.json"))
    assert command[1:] == [
        "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
        "-m", "gpubench.bench.rank_worker", "s.json", "r.json",
    ]  # fmt: skip
    env = child_environment(threads_per_rank=3)
    assert env["NCCL_NVLS_ENABLE"] == "0" and env["TORCH_SYMM_MEM_DISABLE_MULTICAST"] == "1"
    assert CHILD_ENVIRONMENT == {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1"}
    assert env["OMP_NUM_THREADS"] == "3"
    assert env["PYTHONPATH"].split(os.pathsep)[0] == str(REPO)


# ------------------------------------------------------------------------------------------------ config


def test_nproc_must_be_a_positive_integer():
    with pytest.raises(ConfigError, match=r"`distributed.nproc` = 0 is not valid"):
        DistributedConfig(nproc=0)
    with pytest.raises(ConfigError, match=r"`distributed.timeout_s`"):
        DistributedConfig(nproc=2, timeout_s=0)


def test_ddp_with_cuda_graphs_is_refused_naming_both_keys():
    with pytest.raises(ConfigError, match=r"`distributed.nproc` = 2 with `execution.compile` = 'reduce-overhead'"):
        BenchmarkConfig(distributed=DistributedConfig(nproc=2), execution=ExecutionConfig(compile="reduce-overhead"))
    # One process keeps reduce-overhead.
    BenchmarkConfig(execution=ExecutionConfig(compile="reduce-overhead"))


def test_more_processes_than_gpus_is_refused_before_launching():
    cfg = BenchmarkConfig(distributed=DistributedConfig(nproc=4))
    with pytest.raises(ConfigError, match=r"`distributed.nproc` = 4 is not valid here: this machine shows 2 CUDA"):
        check_launchable(cfg, torch.device("cuda", 0), gpu_count=lambda: 2)
    check_launchable(BenchmarkConfig(distributed=DistributedConfig(nproc=2)), torch.device("cuda", 0), lambda: 2)
    # The CPU runs as many processes as it has CPUs to give them, but not over NCCL.
    check_launchable(cfg, torch.device("cpu"), cpu_count=lambda: 4)
    with pytest.raises(ConfigError, match=r"`distributed.nproc` = 4 is not valid here: this process may use 3 CPU"):
        check_launchable(cfg, torch.device("cpu"), cpu_count=lambda: 3)
    nccl = BenchmarkConfig(distributed=DistributedConfig(nproc=2, backend="nccl"))
    with pytest.raises(ConfigError, match=r"`distributed.backend` = 'nccl' is not valid on the CPU"):
        check_launchable(nccl, torch.device("cpu"), cpu_count=lambda: 2)


def test_one_process_leaves_the_trained_network_unwrapped():
    context = ExecutionContext(device=torch.device("cpu"), batch_size=4)
    module = torch.nn.Linear(2, 1)
    assert context.parallel(module) is module


# ------------------------------------------------------------------------------------------------ 2 real ranks

#: Run by torchrun as 2 gloo ranks: the DDP hook's broadcast and gradient sync (on and off), then the batch search
#: with the agreement, rank 1 running out of memory above batch 40 and rank 0 only above 1,000.
AGREEMENT_SCRIPT = """
import gc, json, os, sys
import torch, torch.distributed as dist
from gpubench.bench.rank_worker import agree_across_ranks
from gpubench.measure.batch_search import find_max_batch_size
from gpubench.workload import ExecutionContext

dist.init_process_group("gloo")
rank = dist.get_rank()
out = {}
for sync in (True, False):
    torch.manual_seed(rank)  # different initial weights: DDP broadcasts rank 0's (outside a trial)
    context = ExecutionContext(device=torch.device("cpu"), batch_size=1, data_parallel=True, gradient_sync=sync)
    module = torch.nn.Linear(2, 1)
    wrapped = context.parallel(module)
    wrapped(torch.full((1, 2), float(rank + 1))).sum().backward()
    out[f"weight_sync_{sync}"] = module.weight.detach().tolist()
    out[f"grad_sync_{sync}"] = module.weight.grad.tolist()
    # As the worker does: the networks and their DDP reducers gone, then the ranks leave the group together.
    del module, wrapped, context
    gc.collect()
limit = 40 if rank == 1 else 1000
calls = []
def try_batch(size, steps):
    calls.append(size)
    if size > limit:
        raise torch.OutOfMemoryError(f"fake: {size} does not fit rank {rank}")
    return float(size)
search = find_max_batch_size(try_batch, 8, 256, agree=agree_across_ranks)
out.update(best=search.best_size, trials=[t.to_dict() for t in search.trials], calls=calls)
open(f"{sys.argv[1]}/rank{rank}.json", "w").write(json.dumps(out))
dist.barrier()
dist.destroy_process_group()
# As the worker does: past the teardown, where gloo's threads can abort the process.
os._exit(0)
"""


def test_two_gloo_ranks_agree_on_an_oom_of_one_and_ddp_syncs_only_outside_trials(tmp_path):
    script = tmp_path / "agreement.py"
    script.write_text(AGREEMENT_SCRIPT)
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
    # A deadlocked search would hang here: the timeout turns that into a failure.
    completed = subprocess.run(
        [*command, str(script), str(tmp_path)], env=environment(tmp_path), capture_output=True, text=True, timeout=180
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    # Doubling 16, 32, 64 (rank 1: OOM), then bisecting 48, 40, 44, 42, 41: rank 1's limit for both ranks.
    expected_sizes = [16, 32, 64, 48, 40, 44, 42, 41]
    for rank in ranks:
        assert rank["best"] == 40
        assert rank["calls"] == expected_sizes
        assert [t["size"] for t in rank["trials"]] == expected_sizes
        assert [t["status"] for t in rank["trials"]] == ["ok", "ok", "oom", "oom", "ok", "oom", "oom", "oom"]
        assert rank["trials"][2]["error"] == "rank 1: fake: 64 does not fit rank 1"
    assert ranks[0]["trials"] == ranks[1]["trials"]
    # DDP started both ranks from rank 0's weights; with sync the gradients (inputs 1 and 2) are averaged to
    # 1.5 on both. A trial (no sync) runs no collective at all: each rank keeps its own weights and gradients.
    assert ranks[0]["weight_sync_True"] == ranks[1]["weight_sync_True"]
    assert ranks[0]["weight_sync_False"] != ranks[1]["weight_sync_False"]
    assert ranks[0]["grad_sync_True"] == ranks[1]["grad_sync_True"] == [[1.5, 1.5]]
    assert (ranks[0]["grad_sync_False"], ranks[1]["grad_sync_False"]) == ([[1.0, 1.0]], [[2.0, 2.0]])


QUICK_DDP = ["hardware=cpu", "experiment=quick", "model=mlp", "distributed.nproc=2", "tracking.enabled=false"]


@pytest.fixture(scope="module")
def quick_ddp_run(tmp_path_factory) -> tuple[subprocess.CompletedProcess, dict, Path]:
    """One ``python -m gpubench hardware=cpu experiment=quick model=mlp distributed.nproc=2`` in a temp folder: its
    process, its report and the report's path."""
    folder = tmp_path_factory.mktemp("ddp")
    completed = subprocess.run(
        [sys.executable, "-m", "gpubench", *QUICK_DDP, "hardware.cpu_threads=1", "hardware.burn_in_max_seconds=0"],
        cwd=folder,
        env=environment(folder / "cache"),
        capture_output=True,
        text=True,
        timeout=600,
    )
    (report_path,) = folder.glob("outputs/*/*/report.json")
    return completed, json.loads(report_path.read_text()), report_path


@pytest.mark.slow
def test_the_cli_measures_two_processes_and_reports_their_scaling(quick_ddp_run):
    completed, written, report_path = quick_ddp_run
    assert completed.returncode == 0, completed.stderr[-3000:]
    report = RunReport.from_dict(written)
    mlp = report.models["mlp"]
    assert report.status == "complete" and mlp.status == "ok"
    scaling = mlp.distributed
    assert scaling is not None and scaling.status == "ok", scaling
    assert (scaling.world_size, scaling.backend, scaling.launcher) == (2, "gloo", "torchrun")
    # Weak scaling: each rank the 1-process batch and steps, the same warmup and measured epochs.
    assert scaling.batch_size_per_rank == mlp.batch_size and scaling.steps_per_epoch == mlp.steps_per_epoch
    n = len(mlp.raw_epoch_times_ms)
    assert [len(times) for times in scaling.per_rank_epoch_times_ms] == [n, n]
    assert scaling.raw_epoch_times_ms == [max(a, b) for a, b in zip(*scaling.per_rank_epoch_times_ms, strict=True)]
    assert len(scaling.warmup_epoch_times_ms) == len(mlp.warmup_epoch_times_ms)
    # The figures follow from the epochs in the report.
    samples_per_epoch = scaling.steps_per_epoch * scaling.samples_per_step_per_rank
    global_sps = 2 * samples_per_epoch / (np.mean(scaling.raw_epoch_times_ms) / 1000)
    assert scaling.global_samples_per_second == pytest.approx(global_sps)
    assert scaling.single_process_samples_per_second == pytest.approx(mlp.samples_per_second.mean)
    assert scaling.scaling_efficiency == pytest.approx(global_sps / (2 * mlp.samples_per_second.mean))
    low, high = scaling.scaling_efficiency_interval
    assert low <= scaling.scaling_efficiency <= high
    # The console's summary line, and the ranks' files beside the report.
    assert f"mlp: 2 processes: {scaling.global_samples_per_second:,.0f} window/s global, efficiency" in completed.stdout
    folder = report_path.parent / "distributed" / "mlp"
    assert {p.name for p in folder.iterdir()} >= {"spec.json", "result.json", "torchrun.log", "rank0.pid", "rank1.pid"}


def test_the_cli_refuses_ddp_with_cuda_graphs_as_bad_input(tmp_path):
    completed = subprocess.run(
        [sys.executable, "-m", "gpubench", *QUICK_DDP, "execution.compile=reduce-overhead"],
        cwd=tmp_path,
        env=environment(tmp_path / "cache"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert completed.returncode == 2
    assert "Traceback" not in completed.stderr
    assert "`distributed.nproc` = 2 with `execution.compile` = 'reduce-overhead'" in completed.stderr


def test_the_cli_refuses_more_ranks_than_cpus_on_the_cpu_before_measuring(tmp_path):
    from gpubench.hardware.host import available_cpus

    nproc = available_cpus() + 1
    completed = subprocess.run(
        [sys.executable, "-m", "gpubench", *QUICK_DDP, f"distributed.nproc={nproc}", "hardware.burn_in_max_seconds=0"],
        cwd=tmp_path,
        env=environment(tmp_path / "cache"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert completed.returncode == 2, completed.stderr
    message = " ".join(completed.stderr.split())
    assert "Traceback" not in message
    assert f"`distributed.nproc` = {nproc} is not valid here: this process may use {nproc - 1} CPU(s)" in message
    # Refused before any rank started or any model was measured.
    assert not list(tmp_path.glob("outputs/*/*/distributed")) and not list(tmp_path.glob("outputs/*/*/report.json"))


# ------------------------------------------------------------------------------------------------ signals (slow)

#: Long enough that the 2-process run is still going when the signal comes (it comes at the ranks' first measured
#: epoch: eleven more of at least 0.3 s follow), and no longer: each rank's epochs are the 1-process run's too, which
#: comes first. No burn-in: no test here reads it.
LONG_EPOCHS = 12
LONG_DDP = [
    *QUICK_DDP,
    "hardware.cpu_threads=1",
    f"epochs={LONG_EPOCHS}",
    "epoch.min_seconds=0.3",
    "hardware.burn_in_max_seconds=0",
    "data.days=3",
]


def start_long_run(folder: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "gpubench", *LONG_DDP],
        cwd=folder,
        env=environment(folder / "cache"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for_rank_pids(folder: Path, timeout_s: float = 240.0) -> list[int]:
    """The two ranks' pids, once both have written them (and rank 0's epochs have begun)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        pid_files = sorted(folder.glob("outputs/*/*/distributed/mlp/rank*.pid"))
        logs = list(folder.glob("outputs/*/*/distributed/mlp/torchrun.log"))
        if len(pid_files) == 2 and logs and "measured epoch" in logs[0].read_text():
            return [int(p.read_text()) for p in pid_files]
        time.sleep(0.2)
    raise AssertionError("the ranks did not start")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.slow
def test_sigterm_to_one_rank_fails_the_distributed_run_and_keeps_the_model(tmp_path):
    process = start_long_run(tmp_path)
    _, rank1 = wait_for_rank_pids(tmp_path)
    os.kill(rank1, signal.SIGTERM)
    stdout, stderr = process.communicate(timeout=300)
    # A failed data-parallel run fails the job (exit 1), as a failed model does; the report is complete.
    assert process.returncode == 1, stderr[-3000:]
    (report_path,) = tmp_path.glob("outputs/*/*/report.json")
    report = RunReport.from_dict(json.loads(report_path.read_text()))
    assert report.status == "complete" and report.recommendation is not None
    mlp = report.models["mlp"]
    assert mlp.status == "ok" and len(mlp.raw_epoch_times_ms) == LONG_EPOCHS and mlp.statistics is not None
    assert mlp.distributed.status == "failed"
    assert mlp.distributed.error.startswith("rank 1 was killed by SIGTERM")
    assert "mlp: 2 processes: failed (rank 1 was killed by SIGTERM" in stdout


@pytest.mark.slow
@pytest.mark.parametrize(("sent", "expected_code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_to_the_parent_stops_the_ranks_and_leaves_a_partial_report(tmp_path, sent, expected_code):
    process = start_long_run(tmp_path)
    pids = wait_for_rank_pids(tmp_path)
    process.send_signal(sent)
    _, stderr = process.communicate(timeout=300)
    assert process.returncode == expected_code, stderr[-3000:]
    assert "Traceback" not in stderr
    (report_path,) = tmp_path.glob("outputs/*/*/report.json")
    report = RunReport.from_dict(json.loads(report_path.read_text()))
    assert report.status == "interrupted"
    mlp = report.models["mlp"]
    assert mlp.status == "ok" and len(mlp.raw_epoch_times_ms) == LONG_EPOCHS
    assert mlp.distributed.status == "interrupted" and mlp.distributed.world_size == 2
    assert not any(alive(pid) for pid in pids)
