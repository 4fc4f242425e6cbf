"""Instrumentation overhead: the same training loop timed plain and with gpubench's instrumentation, in percent.

Goal (issue 5): the instrumentation costs at most 2% of an epoch's time. "Instrumented" is what the runner adds to
a measured epoch: the NVML memory sampler running on its own thread (every ``memory.sample_interval_ms``, 10 ms
by default), the memory profiler and the device monitor at the epoch's edges, and the stability checks: each
step's loss and gradient norm written into a device buffer (one kernel, no host sync), whose finite entries are
counted on the device and read once at the epoch's end. The check is written inline here, in the shape of what
the stability module does, so the benchmark does not depend on that module's internals.

The loop is a small MLP's Adam step (forward, MSE loss, backward, fused gradient norm, optimizer step) on a fixed
batch, so only the instrumentation differs between the two variants. Epochs have a fixed step count, sized so a
plain epoch lasts about ``--min-seconds`` (the runner's ``epoch.min_seconds`` is 1 s). Plain and instrumented
epochs alternate in pairs, the order flipped each pair so drift and warming hit both alike; the overhead is the
median over pairs of instrumented / plain - 1. Without NVML (the CPU) the sampler and device monitor have nothing
to read, so only the finite checks and the edge calls are measured.

Run ``python benchmarks/instrumentation_overhead.py`` (CUDA when available, else a small CPU configuration).
"""

import argparse
import itertools
import math
import statistics
import time
from collections.abc import Callable

import torch
from torch import nn

from gpubench.config import HardwareConfig, MemoryConfig
from gpubench.hardware import DeviceMonitor
from gpubench.memory import MemoryProfiler

GOAL_PERCENT = 2.0

StepFn = Callable[[], tuple[torch.Tensor, torch.Tensor]]


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

    def step() -> tuple[torch.Tensor, torch.Tensor]:
        optimizer.zero_grad(set_to_none=True)
        loss = nn.functional.mse_loss(model(inputs), targets)
        loss.backward()
        grad_norm = nn.utils.clip_grad_norm_(parameters, 1.0, foreach=True)
        optimizer.step()
        return loss.detach(), grad_norm.detach()

    return step


def plain_epoch_s(step: StepFn, steps: int, device: torch.device) -> float:
    """Seconds for ``steps`` steps, the device synchronised at the edges only (as the runner times)."""
    synchronize(device)
    start_s = time.perf_counter()
    for _ in range(steps):
        step()
    synchronize(device)
    return time.perf_counter() - start_s


def instrumented_epoch_s(
    step: StepFn, steps: int, device: torch.device, profiler: MemoryProfiler, monitor: DeviceMonitor
) -> float:
    """Seconds for the same epoch with the profiler's sampler running and finite checks on every step."""
    health = torch.empty(steps, 2, device=device)
    synchronize(device)
    start_s = time.perf_counter()
    profiler.start_epoch()
    monitor.start_epoch()
    for index in range(steps):
        loss, grad_norm = step()
        # One small kernel per step and no host sync: keep the step's loss and gradient norm on the device.
        torch.stack((loss, grad_norm), out=health[index])
    finite_counts = torch.isfinite(health).sum(dim=0).tolist()  # the epoch's one host read, as in the runner
    synchronize(device)
    monitor.end_epoch()
    profiler.end_epoch()
    elapsed_s = time.perf_counter() - start_s
    if finite_counts != [steps, steps]:
        raise RuntimeError(f"non-finite loss or gradient norm in the benchmark loop: {finite_counts} of {steps} finite")
    return elapsed_s


def main() -> None:
    on_cuda = torch.cuda.is_available()
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pairs", type=int, default=10 if on_cuda else 6, help="plain/instrumented epoch pairs")
    parser.add_argument("--min-seconds", type=float, default=1.0 if on_cuda else 0.2, help="plain epoch length")
    parser.add_argument("--hidden", type=int, default=1024 if on_cuda else 128)
    parser.add_argument("--layers", type=int, default=3 if on_cuda else 2)
    parser.add_argument("--batch", type=int, default=1024 if on_cuda else 128)
    parser.add_argument("--sample-interval-ms", type=float, default=MemoryConfig().sample_interval_ms)
    args = parser.parse_args()

    device = torch.device("cuda", 0) if on_cuda else torch.device("cpu")
    step = make_step(device, args.hidden, args.layers, args.batch)
    plain_epoch_s(step, 20, device)  # warm-up: allocator, cuBLAS handles, Adam state
    per_step_s = plain_epoch_s(step, 50, device) / 50
    steps = max(10, math.ceil(args.min_seconds / per_step_s))

    profiler = MemoryProfiler(device, sample_interval_ms=args.sample_interval_ms)
    monitor = DeviceMonitor(device, HardwareConfig())
    print(f"device {device}; MLP 64-{args.hidden}x{args.layers}-1, batch {args.batch}, Adam; {steps} steps/epoch")
    sampler_state = f"every {args.sample_interval_ms:g} ms" if profiler.sampler is not None else "off (no NVML)"
    print(f"memory sampler {sampler_state}; finite checks per step; profiler and monitor at epoch edges")
    print(f"{'pair':>4} {'plain ms':>10} {'instr. ms':>10} {'overhead %':>11}")

    ratios: list[float] = []
    for pair in range(args.pairs + 1):  # pair 0 warms both paths and is not counted
        times_s: dict[str, float] = {}
        for variant in ("plain", "instrumented") if pair % 2 == 0 else ("instrumented", "plain"):
            if variant == "plain":
                times_s[variant] = plain_epoch_s(step, steps, device)
            else:
                # The sampler runs across epochs in the runner; start and stop it outside the timed region.
                with profiler:
                    times_s[variant] = instrumented_epoch_s(step, steps, device, profiler, monitor)
        if pair == 0:
            continue
        plain_ms, instrumented_ms = times_s["plain"] * 1e3, times_s["instrumented"] * 1e3
        ratios.append(instrumented_ms / plain_ms)
        print(f"{pair:>4} {plain_ms:>10.2f} {instrumented_ms:>10.2f} {(ratios[-1] - 1) * 100:>11.2f}")

    overhead_percent = (statistics.median(ratios) - 1.0) * 100.0
    verdict = "within goal" if overhead_percent <= GOAL_PERCENT else "ABOVE GOAL"
    samples = profiler.result().nvml_samples
    print(f"NVML samples taken: {samples}")
    print(
        f"instrumentation overhead: {overhead_percent:+.2f}% of epoch time (median of {len(ratios)} pairs; "
        f"goal <= {GOAL_PERCENT:g}%): {verdict}"
    )


if __name__ == "__main__":
    main()
