"""Instrumentation overhead: the same training loop timed plain and with gpubench's instrumentation, in percent.

Goal (issue 5): the instrumentation costs at most 2% of an epoch's time. "Instrumented" is what the runner adds to
a measured epoch: the NVML memory sampler running beside it (every ``memory.sample_interval_ms``, 10 ms by
default; in a child process, ``memory.sampler=process``, the default), the memory profiler and the device monitor
at the epoch's edges, and the stability checks (:class:`gpubench.measure.stability.StabilityMonitor`: ``observe``
on every step, one device read at the epoch's end).

The loop is a small MLP's Adam step (forward, MSE loss, backward, fused gradient norm, optimizer step) on a fixed
batch, so only the instrumentation differs between the two variants. The overhead is measured two ways:

* Bottom-up: the host cost of each piece timed directly (one NVML memory read, with its device-used and
  per-process queries also timed alone; one ``observe``; each epoch-edge call on its own, with the sampler
  running), turned into a share of epoch time as observe_cost / step_time + edge_cost / epoch_time. The read's
  share read_cost / sample_interval is printed but not added: the process sampler reads in another process, on
  another core. (A sampler thread would add it, and more where it contends with training for the GIL, which is
  why the sampler moved to a process; the paired test below catches either.)
* Paired blocks: plain and instrumented blocks of steps (``--min-seconds`` long, 0.25 s on CUDA) alternate in ABBA
  order (the order flips every pair, so drift and warming hit both alike); the overhead is the median over pairs
  of instrumented / plain - 1, with the sign test's distribution-free interval (order statistics of the pair
  ratios; it assumes only that pairs are independent). PASS needs the interval's upper end <= 2%: a median under
  2% whose interval reaches above it has not shown the goal is met. As in the runner, the epoch-edge calls run
  between the timed blocks, so the block length does not weigh them. On the H200's host the speed of a 1 s epoch
  drifts by up to 25% over a minute, and pairs of 1 s epochs scattered by ±8%: short blocks put the two halves
  of a pair closer in time, so the drift cancels better, and give more pairs per minute.

``--variants sampler observe thread-sampler`` adds ablations, each paired against the plain loop the same way: the
sampler process alone and ``observe()`` alone, to separate the two costs of the ``runner`` variant, and the
in-process sampler thread alone (``memory.sampler=thread``), for comparison. The sampler is started before and
stopped after each instrumented block, outside the timed region; for the process sampler that spawns a child per
block, which adds tens of ms of wall time per pair, not to the blocks.

Without NVML (the CPU) the sampler and device monitor have nothing to read, so only the stability checks and the
edge calls are measured. Run ``python benchmarks/instrumentation_overhead.py`` (CUDA when available, else a small
CPU configuration); on an H200 it takes about 90 s per variant.
"""

import argparse
import contextlib
import dataclasses
import itertools
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from gpubench.hardware.config import HardwareConfig
from gpubench.hardware.identity import open_nvml_device
from gpubench.hardware.monitor import DeviceMonitor
from gpubench.hardware.nvml import PROCESS_MEMORY_EVERY_N_READINGS, NvmlDevice
from gpubench.measure.config import MemoryConfig
from gpubench.measure.memory import MemoryProfiler
from gpubench.measure.stability import StabilityMonitor
from gpubench.stats.config import StabilityConfig
from gpubench.stats.epoch_times import median_interval
from gpubench.workload import StepResult

GOAL_PERCENT = 2.0
CONFIDENCE_LEVEL = 0.95
#: The runner's epoch length (``epoch.min_seconds``), for the bottom-up share of the epoch-edge calls.
RUNNER_EPOCH_S = 1.0
#: The sampler the runner uses by default (``memory.sampler``: a child process), which the ``runner`` and
#: ``sampler`` variants use.
RUNNER_SAMPLER = MemoryConfig().sampler

StepFn = Callable[[], StepResult]


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def make_step(device: torch.device, hidden: int, layers: int, batch: int) -> StepFn:
    """One Adam update of an MLP on a fixed batch; returns the loss and pre-clip gradient norm as device tensors."""
    torch.manual_seed(0)
    widths = [64] + [hidden] * layers
    blocks: list[nn.Module] = []
    for width_in, width_out in itertools.pairwise(widths):
        blocks += [nn.Linear(width_in, width_out), nn.ReLU()]
    model = nn.Sequential(*blocks, nn.Linear(hidden, 1)).to(device)
    parameters = list(model.parameters())
    optimizer = torch.optim.Adam(parameters, lr=1e-3)
    inputs = torch.randn(batch, 64, device=device)
    targets = torch.randn(batch, 1, device=device)

    def step() -> StepResult:
        optimizer.zero_grad(set_to_none=True)
        loss = nn.functional.mse_loss(model(inputs), targets)
        loss.backward()
        grad_norm = nn.utils.clip_grad_norm_(parameters, 1.0, foreach=True)
        optimizer.step()
        return StepResult(loss.detach(), grad_norm.detach())

    return step


@dataclass
class Instrumentation:
    """What the runner wraps around a measured epoch."""

    profiler: MemoryProfiler
    monitor: DeviceMonitor
    stability: StabilityMonitor

    def start_epoch(self) -> None:
        self.profiler.start_epoch()
        self.monitor.start_epoch()

    def end_epoch(self) -> None:
        health = self.stability.end_epoch()  # the epoch's one device-to-host read of the checks
        self.monitor.end_epoch("measured", 1)
        self.profiler.end_epoch("measured", 1)
        if health.diverged:
            raise RuntimeError(f"non-finite loss or gradient norm in the benchmark loop: {health}")


def plain_epoch_s(step: StepFn, steps: int, device: torch.device) -> float:
    """Seconds for ``steps`` steps, the device synchronised at the edges only (as the runner times)."""
    synchronize(device)
    start_s = time.perf_counter()
    for _ in range(steps):
        step()
    synchronize(device)
    return time.perf_counter() - start_s


def instrumented_epoch_s(
    step: StepFn, steps: int, device: torch.device, instrumentation: Instrumentation, *, observe: bool = True
) -> float:
    """Seconds for the same epoch with the sampler running (started by the caller) and the checks on every step.

    As in the runner (``gpubench.measure.epochs``), the epoch-edge calls run outside the timed block: they cost wall
    time between epochs (reported bottom-up) but cannot bias a measured epoch time. What the block pays for is
    ``observe()`` on every step (unless ``observe`` is false, for the ablation) and the sampler running beside it.
    """
    check = instrumentation.stability.observe if observe else _discard
    instrumentation.start_epoch()
    synchronize(device)
    start_s = time.perf_counter()
    for _ in range(steps):
        check(step())
    synchronize(device)
    elapsed_s = time.perf_counter() - start_s
    instrumentation.end_epoch()
    return elapsed_s


def _discard(result: StepResult) -> None:
    """What the plain loop does with a step's result."""


def seconds_per_call(function: Callable[[], object], calls: int, device: torch.device) -> float:
    """Median over 5 blocks of the wall seconds per call of ``function`` (device synchronised at block edges)."""
    blocks_s = []
    for _ in range(5):
        synchronize(device)
        start_s = time.perf_counter()
        for _ in range(calls):
            function()
        synchronize(device)
        blocks_s.append((time.perf_counter() - start_s) / calls)
    return float(np.median(blocks_s))


def edge_seconds(instrumentation: Instrumentation, epochs: int, device: torch.device) -> dict[str, float]:
    """Median wall seconds of each epoch-edge call over ``epochs`` empty epochs, in the runner's order."""
    pieces: dict[str, Callable[[], object]] = {
        "memory profiler start_epoch": instrumentation.profiler.start_epoch,
        "device monitor start_epoch": instrumentation.monitor.start_epoch,
        "stability end_epoch": instrumentation.stability.end_epoch,
        "device monitor end_epoch": lambda: instrumentation.monitor.end_epoch("measured", 1),
        "memory profiler end_epoch": lambda: instrumentation.profiler.end_epoch("measured", 1),
    }
    samples_s: dict[str, list[float]] = {name: [] for name in pieces}
    for _ in range(epochs):
        synchronize(device)
        for name, call in pieces.items():
            start_s = time.perf_counter()
            call()
            samples_s[name].append(time.perf_counter() - start_s)
    return {name: float(np.median(values)) for name, values in samples_s.items()}


def bottom_up_percent(
    step: StepFn,
    device: torch.device,
    instrumentation: Instrumentation,
    nvml_device: NvmlDevice | None,
    interval_ms: float,
    step_s: float,
) -> float:
    """Print each piece's host cost and its share of epoch time; return the share inside a timed epoch (the
    sampler's reads and ``observe()``) in percent."""
    shares: list[float] = []
    if nvml_device is not None:
        pid = os.getpid()
        device_read_s = seconds_per_call(nvml_device.device_used_mb, 200, device)
        process_read_s = seconds_per_call(lambda: nvml_device.process_used_mb(pid), 200, device)
        # The sampler's read: device-used every sample, this process's memory on one sample in N.
        read_s = seconds_per_call(nvml_device.memory_reading, 20 * PROCESS_MEMORY_EVERY_N_READINGS, device)
        read_share = read_s / (interval_ms / 1e3)
        print(f"  NVML device-used query {device_read_s * 1e6:8.1f} us")
        every = PROCESS_MEMORY_EVERY_N_READINGS
        print(f"  NVML process query     {process_read_s * 1e6:8.1f} us (on 1 sample in {every})")
        print(f"  NVML memory read      {read_s * 1e6:9.1f} us/sample  / {interval_ms:g} ms    = {read_share:7.3%}")
        print("    (read in the sampler's child process, on another core: not counted below; see thread-sampler)")
    else:
        print("  NVML memory read      not measured (no NVML)")
    result = step()
    observe_s = seconds_per_call(lambda: instrumentation.stability.observe(result), 2000, device)
    instrumentation.stability.end_epoch()
    shares.append(observe_s / step_s)
    print(f"  stability observe()   {observe_s * 1e6:9.1f} us/step    / {step_s * 1e3:.3f} ms = {shares[-1]:7.3%}")

    in_block_percent = sum(shares) * 100.0
    print(f"  inside a timed epoch  {in_block_percent:+.3f}% of epoch time (what the paired blocks measure)")

    # As in the runner, the edge calls run while the sampler does (the process sampler's file is read there).
    sampler = instrumentation.profiler.sampler
    with sampler if sampler is not None else contextlib.nullcontext():
        pieces_s = edge_seconds(instrumentation, 20, device)
    for name, piece_s in pieces_s.items():
        print(f"    {name:<28} {piece_s * 1e3:8.3f} ms")
    edges_s = sum(pieces_s.values())
    edge_share = edges_s / RUNNER_EPOCH_S
    print(f"  epoch-edge calls      {edges_s * 1e3:9.3f} ms/epoch   / {RUNNER_EPOCH_S:g} s      = {edge_share:7.3%}")
    print("    (between epochs, outside the measured epoch time; they lengthen the run's wall time by this much)")
    total_percent = in_block_percent + edge_share * 100.0
    print(f"  bottom-up total       {total_percent:+.3f}% of wall time")
    return in_block_percent


VARIANTS = {
    "runner": f"sampler {RUNNER_SAMPLER} + observe() on every step (what the runner measures with)",
    "sampler": f"sampler {RUNNER_SAMPLER} only (ablation)",
    "observe": "observe() on every step only (ablation)",
    "thread-sampler": "sampler thread only (memory.sampler=thread, for comparison)",
}
#: Variants that run the profiler's sampler beside the instrumented blocks.
SAMPLER_VARIANTS = ("runner", "sampler", "thread-sampler")


@dataclass
class PairedResult:
    """Instrumented / plain epoch-time ratios of one variant, and the sampler's gaps while it ran."""

    variant: str
    ratios: list[float]
    sample_gaps_ms: list[np.ndarray]

    def summary(self, interval_ms: float) -> str:
        """One paragraph: the median overhead, its sign-test interval, the verdict against the goal."""
        median_ratio = float(np.median(self.ratios))
        low_ratio, high_ratio, coverage = median_interval(self.ratios, CONFIDENCE_LEVEL)
        median_percent, low_percent, high_percent = ((r - 1.0) * 100.0 for r in (median_ratio, low_ratio, high_ratio))
        if high_percent <= GOAL_PERCENT:
            verdict = "PASS"
        elif low_percent > GOAL_PERCENT:
            verdict = "FAIL (the whole interval is above the goal)"
        else:
            verdict = "UNRESOLVED (the interval straddles the goal: run more pairs)"
        lines = [
            f"paired overhead, {VARIANTS[self.variant]}: median {median_percent:+.2f}% over {len(self.ratios)} pairs, "
            f"{coverage:.1%} sign-test interval [{low_percent:+.2f}%, {high_percent:+.2f}%]; "
            f"goal <= {GOAL_PERCENT:g}%: {verdict}"
        ]
        if self.sample_gaps_ms:
            gaps_ms = np.concatenate(self.sample_gaps_ms)
            lines.append(
                f"  sampler gaps: median {np.median(gaps_ms):.2f} ms, p95 {np.percentile(gaps_ms, 95):.2f} ms, "
                f"max {gaps_ms.max():.2f} ms over {gaps_ms.size} gaps (asked: {interval_ms:g} ms)"
            )
        return "\n".join(lines)


def paired_overhead(
    step: StepFn,
    steps: int,
    device: torch.device,
    instrumentation: Instrumentation,
    variant: str,
    pairs: int,
    budget_s: float,
) -> PairedResult:
    """``pairs`` plain/instrumented epoch pairs in ABBA order (stopping after ``budget_s``), printing each pair.

    The variant's sampler is ``instrumentation.profiler``'s: the caller picks the profiler (process or thread).
    """
    profiler = instrumentation.profiler
    sampler = profiler.sampler if variant in SAMPLER_VARIANTS else None
    observe = variant in ("runner", "observe")
    print(f"variant: {VARIANTS[variant]}")
    print(f"{'pair':>4} {'order':>5} {'plain ms':>10} {'instr. ms':>10} {'overhead %':>11}")
    result = PairedResult(variant, [], [])
    started_s = time.perf_counter()
    for pair in range(pairs + 1):  # pair 0 warms both paths and is not counted
        if pair > 1 and time.perf_counter() - started_s > budget_s:
            print(f"time budget of {budget_s:g} s reached after {pair - 1} pairs")
            break
        order = ("plain", "instrumented") if pair % 2 == 0 else ("instrumented", "plain")
        times_s: dict[str, float] = {}
        for which in order:
            if which == "plain":
                times_s[which] = plain_epoch_s(step, steps, device)
                continue
            # The sampler runs across epochs in the runner; start and stop it outside the timed region.
            first_sample = len(sampler) if sampler is not None else 0
            with sampler if sampler is not None else contextlib.nullcontext():
                times_s[which] = instrumented_epoch_s(step, steps, device, instrumentation, observe=observe)
            if sampler is not None:
                result.sample_gaps_ms.append(np.diff(sampler.timeline(first_sample).times_s) * 1e3)
        if pair == 0:
            continue
        plain_ms, instrumented_ms = times_s["plain"] * 1e3, times_s["instrumented"] * 1e3
        result.ratios.append(instrumented_ms / plain_ms)
        label = "PI" if order[0] == "plain" else "IP"
        print(f"{pair:>4} {label:>5} {plain_ms:>10.2f} {instrumented_ms:>10.2f} {(result.ratios[-1] - 1) * 100:>11.2f}")
    return result


def main() -> None:
    on_cuda = torch.cuda.is_available()
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pairs", type=int, default=300 if on_cuda else 20, help="plain/instrumented block pairs")
    parser.add_argument("--min-seconds", type=float, default=0.25 if on_cuda else 0.1, help="plain block length")
    parser.add_argument(
        "--budget-seconds", type=float, default=85.0, help="stop adding pairs of one variant after this long"
    )
    parser.add_argument("--hidden", type=int, default=1024 if on_cuda else 128)
    parser.add_argument("--layers", type=int, default=3 if on_cuda else 2)
    parser.add_argument("--batch", type=int, default=1024 if on_cuda else 128)
    parser.add_argument("--sample-interval-ms", type=float, default=MemoryConfig().sample_interval_ms)
    parser.add_argument(
        "--variants",
        nargs="+",
        choices=list(VARIANTS),
        default=["runner"],
        help="what to pair against the plain loop; 'sampler' and 'observe' separate the two costs, "
        "'thread-sampler' is the in-process sampler thread alone",
    )
    args = parser.parse_args()
    started_s = time.perf_counter()

    device = torch.device("cuda", 0) if on_cuda else torch.device("cpu")
    step = make_step(device, args.hidden, args.layers, args.batch)
    plain_epoch_s(step, 20, device)  # warm-up: allocator, cuBLAS handles, Adam state
    step_s = seconds_per_call(step, 50, device)
    steps = max(10, math.ceil(args.min_seconds / step_s))

    nvml_device = open_nvml_device(device)  # the sampler's reads, timed on their own below
    instrumentation = Instrumentation(
        MemoryProfiler(device, sample_interval_ms=args.sample_interval_ms, sampler=RUNNER_SAMPLER),
        DeviceMonitor(device, HardwareConfig()),
        StabilityMonitor(StabilityConfig(), device),
    )
    thread_instrumentation = dataclasses.replace(
        instrumentation, profiler=MemoryProfiler(device, sample_interval_ms=args.sample_interval_ms, sampler="thread")
    )
    profiler = instrumentation.profiler
    print(
        f"device {device}; MLP 64-{args.hidden}x{args.layers}-1, batch {args.batch}, Adam; {step_s * 1e3:.3f} ms/step"
    )
    sampler_state = (
        f"({RUNNER_SAMPLER}) every {args.sample_interval_ms:g} ms" if profiler.sampler is not None else "off (no NVML)"
    )
    print(f"memory sampler {sampler_state}; stability observe() per step; profiler, monitor, checks at epoch edges")

    print("bottom-up (host cost of each piece; share of epoch time):")
    bottom_up = bottom_up_percent(step, device, instrumentation, nvml_device, args.sample_interval_ms, step_s)

    print(f"paired blocks: {steps} steps (~{steps * step_s:.2f} s) each, ABBA order")
    summaries = []
    for variant in args.variants:
        variant_instrumentation = thread_instrumentation if variant == "thread-sampler" else instrumentation
        pairs = paired_overhead(step, steps, device, variant_instrumentation, variant, args.pairs, args.budget_seconds)
        summaries.append(pairs.summary(args.sample_interval_ms))
    print(f"bottom-up overhead inside a timed epoch: {bottom_up:+.2f}% of epoch time")
    for line in summaries:
        print(line)
    print(f"benchmark wall time {time.perf_counter() - started_s:.1f} s")


if __name__ == "__main__":
    main()
