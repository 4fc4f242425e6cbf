"""System metrics' cost to the timed epochs: what one sample costs, and how much longer a block of training steps takes
while :class:`gpubench.output.tracking_system.SystemMetricsSampler` samples beside it, per sampling interval.

A reading runs on the sampler's own thread: the collectors (psutil's CPU and memory readings; NVML's on a GPU). The
readings are sent to the run, here a SQLite store in a temporary folder as by default, with the live run's next
epoch batch, between epochs. The training thread can only lose time to the reading where the two need the GIL at
once, so the cost is measured two ways:

* Bottom-up: one reading timed on its own, median over ``--samples``, and one point's share of a ``log_batch``
  (sent between epochs, not timed; what MLflow's own monitor thread would add to the epoch the sample falls in). At
  interval ``I`` the share of wall time the thread is busy is ``reading / I``.
* Paired blocks: blocks of a small MLP's Adam step on the CPU (Python-bound, so it needs the GIL all the time: the
  worst case for a thread beside it), ``--block-seconds`` long, alternately without and with the sampler, in ABBA
  order so drift hits both alike; the run's batch is sent after each block, outside the timing, as the runner
  does. Per interval: the median over pairs of sampled / plain - 1 with the sign test's distribution-free interval
  (:func:`gpubench.stats.epoch_times.median_interval`), and the largest block's excess over the median plain block.
  On a shared machine the pairs scatter by several percent either way, more than a reading can cost: there the
  bottom-up figure is the one to read, and the pairs show that nothing larger is hiding.

Run ``python benchmarks/system_metrics_overhead.py`` (about two minutes on the 2-core CPU machine with the defaults);
it prints a Markdown table.
"""

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn

from gpubench.output.config import TrackingConfig
from gpubench.output.tracking_live import LiveRun
from gpubench.output.tracking_record import RunRecord
from gpubench.stats.epoch_times import median_interval

CONFIDENCE_LEVEL = 0.95


def make_step(hidden: int, batch: int):
    """One Adam update of a two-layer MLP on a fixed CPU batch."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1))
    optimizer = torch.optim.Adam(model.parameters())
    inputs, targets = torch.randn(batch, hidden), torch.randn(batch, 1)

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        nn.functional.mse_loss(model(inputs), targets).backward()
        optimizer.step()

    return step


def steps_for(step, block_seconds: float) -> int:
    """The step count whose block takes about ``block_seconds``."""
    for _ in range(20):
        step()
    started = time.perf_counter()
    count = 0
    while time.perf_counter() - started < 0.5:
        step()
        count += 1
    return max(1, round(count * block_seconds / (time.perf_counter() - started)))


def block_seconds(step, steps: int) -> float:
    started = time.perf_counter()
    for _ in range(steps):
        step()
    return time.perf_counter() - started


def start_run(folder: Path, interval_s: float) -> LiveRun:
    config = TrackingConfig(
        uri=f"sqlite:///{folder / 'mlflow.db'}",
        artifact_location=str(folder / "artifacts"),
        experiment="overhead",
        system_metrics_interval_s=interval_s,
    )
    return LiveRun.start(config, run_name="overhead", params={}, tags={})


def sample_cost_ms(folder: Path, samples: int) -> tuple[float, float]:
    """Median milliseconds of one reading (the sampler thread's work) and of sending one point (``log_batch``)."""
    from gpubench.output.tracking_system import SystemMetricsSampler

    live = start_run(folder, 3600.0)
    sampler = SystemMetricsSampler.start(3600.0, gpu_indices=None)
    reading_ms, send_ms = [], []
    for _ in range(samples):
        started = time.perf_counter()
        sampler._sample()
        read = time.perf_counter()
        live._send_metrics(sampler.take())
        reading_ms.append((read - started) * 1e3)
        send_ms.append((time.perf_counter() - read) * 1e3)
    sampler.stop()
    live.finish(RunRecord(run_name="overhead"), "FINISHED")
    return statistics.median(reading_ms), statistics.median(send_ms)


def paired_overhead(folder: Path, step, steps: int, interval_s: float, pairs: int) -> tuple[np.ndarray, list[float]]:
    """Per pair, sampled / plain, and every plain block's seconds."""
    live = start_run(folder, interval_s)
    ratios, plain_s = [], []
    for pair in range(pairs):
        times = {}
        for sampled in (False, True) if pair % 2 == 0 else (True, False):
            if sampled:
                live.watch_system(gpu_indices=None)
            times[sampled] = block_seconds(step, steps)
            # Between epochs, as in the runner: the readings go out with the run's batch.
            live.flush()
            if sampled:
                live._stop_system_metrics()
        ratios.append(times[True] / times[False])
        plain_s.append(times[False])
    live.finish(RunRecord(run_name="overhead"), "FINISHED")
    return np.array(ratios), plain_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--intervals", type=float, nargs="+", default=[0.1, 1.0, 10.0], help="seconds")
    parser.add_argument("--pairs", type=int, default=24)
    parser.add_argument("--block-seconds", type=float, default=0.5)
    parser.add_argument("--samples", type=int, default=50)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--batch", type=int, default=32)
    arguments = parser.parse_args()
    torch.set_num_threads(1)
    step = make_step(arguments.hidden, arguments.batch)
    steps = steps_for(step, arguments.block_seconds)
    with tempfile.TemporaryDirectory() as folder:
        cost_ms, send_ms = sample_cost_ms(Path(folder) / "cost", arguments.samples)
        print(
            f"One reading (sampler thread): {cost_ms:.2f} ms; sending one point (log_batch, between epochs): "
            f"{send_ms:.2f} ms (medians of {arguments.samples})."
        )
        print(f"Blocks of {steps} MLP steps, about {arguments.block_seconds:g} s; {arguments.pairs} ABBA pairs each.\n")
        print(
            "| interval (s) | thread busy (%) | median overhead (%) | 95% interval (%) | max block excess (ms) "
            "| one reading / block (%) |"
        )
        print("|---|---|---|---|---|---|")
        for interval_s in arguments.intervals:
            # A fresh run per interval: samples step from 0 in each.
            run_folder = Path(folder) / f"i{interval_s:g}"
            ratios, plain_s = paired_overhead(run_folder, step, steps, interval_s, arguments.pairs)
            low, high, _ = median_interval(ratios, CONFIDENCE_LEVEL)
            median_plain_s = statistics.median(plain_s)
            excess_ms = (ratios.max() - 1.0) * median_plain_s * 1e3
            print(
                f"| {interval_s:g} | {100.0 * cost_ms / 1e3 / interval_s:.3f} | {100.0 * (np.median(ratios) - 1):+.2f} "
                f"| [{100.0 * (low - 1):+.2f}, {100.0 * (high - 1):+.2f}] | {excess_ms:.1f} "
                f"| {100.0 * cost_ms / 1e3 / median_plain_s:.2f} |"
            )


if __name__ == "__main__":
    main()
