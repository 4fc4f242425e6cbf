"""Is Mamba-2's rising epoch loss the model's or the sampled batches'? Train the real workload and read, per epoch,
its mean loss beside the zero forecast's on the same batches, their ratio, and its loss on fixed windows.

The H200's default run of session 9 read Mamba-2 UNSTABLE from a loss trend of +1.40% per epoch (p 0.035) on the
synthetic market. Each step draws 32 windows at random from the training split; a window from a volatile stretch has
targets with a large mean square, so an epoch's mean loss carries how hard its batches were. This script trains
:class:`~gpubench.models.mamba2.workload.Mamba2Workload` (built by :func:`~gpubench.bench.model_run.build_workload`, the
composed config: the default synthetic data, ``seed``) for ``--epochs`` epochs of ``--steps`` steps and prints a
table per epoch: the mean loss; the zero forecast's loss on the same batches (the step's ``reference_loss``, the
targets' mean square); their ratio (sum over sum, as the stability monitor reads it); the loss on 256 fixed training
and 256 fixed validation windows (no gradient). Then each series' loss trend as :func:`gpubench.stats.stability.
loss_trend` reads it over the measured epochs (after ``--warmup``).

``--zero-forecast-runs N`` prints instead how a model that learns nothing reads: over N seeded streams of
``--epochs`` x ``--steps`` batches of 32, the loss trend of the zero forecast's epoch losses (the batches alone),
and their coefficient of variation across epochs. No training: seconds.

    python benchmarks/mamba2_loss_trend.py workloads.mamba2.seq_len=128 workloads.mamba2.d_model=128 \
        workloads.mamba2.n_layers=2                                        # CPU: ~0.5 s a step
    python benchmarks/mamba2_loss_trend.py --device cuda                   # the default shapes, on a GPU
    python benchmarks/mamba2_loss_trend.py --zero-forecast-runs 2000       # the batches alone
"""

import argparse
import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _context import model_run_context

from gpubench.bench.model_run import build_workload
from gpubench.models.mamba2.workload import Mamba2Workload
from gpubench.stats.stability import loss_rel_slope_per_epoch, loss_slope_p_value, loss_trend

#: The report's threshold (``stability.loss_trend_rel_slope``).
REL_SLOPE_THRESHOLD = 0.01
#: Windows in each fixed batch, drawn once from their own seeded generator.
FIXED_WINDOWS = 256
BATCH = 32


def fixed_windows(workload: Mamba2Workload, starts: torch.Tensor, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(inputs, targets) of ``FIXED_WINDOWS`` windows from ``starts``, the same every epoch."""
    generator = torch.Generator(device=starts.device).manual_seed(seed)
    picks = starts[torch.randint(0, starts.numel(), (FIXED_WINDOWS,), device=starts.device, generator=generator)]
    windows = workload.data.gather(picks, workload.window_bars)
    seq_len = workload.config.seq_len
    return windows[:, :seq_len], windows[:, seq_len:, workload.data.target_column]


def fixed_loss(workload: Mamba2Workload, batch: tuple[torch.Tensor, torch.Tensor]) -> float:
    with torch.no_grad():
        return float(F.mse_loss(workload.model(batch[0]).float(), batch[1]))


def trend_line(name: str, series: list[float]) -> str:
    return (
        f"{name:>22}: {loss_trend(series, REL_SLOPE_THRESHOLD):10s} slope {loss_rel_slope_per_epoch(series):+.2%} "
        f"of the mean per epoch, p {loss_slope_p_value(series):.3f}"
    )


def train(args: argparse.Namespace) -> None:
    device = torch.device(args.device)
    hardware = ["hardware=cpu"] if device.type == "cpu" else []
    context = model_run_context([*hardware, "model=mamba2", *args.overrides], device)
    workload = build_workload("mamba2", context, BATCH)
    assert isinstance(workload, Mamba2Workload)
    fixed_train = fixed_windows(workload, workload.train_starts, seed=1)
    fixed_validation = fixed_windows(workload, workload.data.evaluation_starts(workload.window_bars), seed=2)
    config = workload.config
    print(
        f"Mamba-2 d_model {config.d_model}, {config.n_layers} layers, seq_len {config.seq_len}, batch {BATCH}, "
        f"lr {config.learning_rate:g}; {args.epochs} epochs of {args.steps} steps, the first {args.warmup} warmup"
    )
    print(f"{'epoch':>5} {'loss':>7} {'zero fc':>7} {'ratio':>6} {'fixed train':>11} {'fixed val':>9}")
    rows = []
    for epoch in range(args.epochs):
        losses, references = [], []
        for _ in range(args.steps):
            result = workload.train_step()
            assert result.loss is not None and result.reference_loss is not None
            losses.append(float(result.loss))
            references.append(float(result.reference_loss))
        row = (
            float(np.mean(losses)),
            float(np.mean(references)),
            sum(losses) / sum(references),
            fixed_loss(workload, fixed_train),
            fixed_loss(workload, fixed_validation),
        )
        rows.append(row)
        print(f"{epoch:>5} {row[0]:7.3f} {row[1]:7.3f} {row[2]:6.3f} {row[3]:11.3f} {row[4]:9.3f}", flush=True)
    measured = rows[args.warmup :]
    names = ("loss", "zero forecast's loss", "ratio", "fixed train windows", "fixed val windows")
    for column, name in enumerate(names):
        print(trend_line(name, [row[column] for row in measured]))


def zero_forecast_runs(args: argparse.Namespace) -> None:
    context = model_run_context(["hardware=cpu", "model=mamba2", *args.overrides], torch.device("cpu"))
    config, data = context.cfg.workloads.mamba2, context.features
    starts = data.window_starts(config.seq_len + config.horizon, "train")
    targets = data.values[:, data.target_column]
    offsets = torch.arange(config.seq_len, config.seq_len + config.horizon)
    counts = {"DECREASING": 0, "STABLE": 0, "INCREASING": 0}
    variation = []
    for seed in range(args.zero_forecast_runs):
        generator = torch.Generator().manual_seed(seed)
        picks = starts[torch.randint(0, starts.numel(), (args.epochs * args.steps * BATCH,), generator=generator)]
        epoch_losses = targets[picks[:, None] + offsets].square().reshape(args.epochs, -1).mean(dim=1).tolist()
        counts[loss_trend(epoch_losses, REL_SLOPE_THRESHOLD)] += 1
        variation.append(float(np.std(epoch_losses) / np.mean(epoch_losses)))
    runs = args.zero_forecast_runs
    print(
        f"zero forecast, {runs} streams of {args.epochs} epochs x {args.steps} steps x {BATCH} windows "
        f"(seq_len {config.seq_len}, horizon {config.horizon}):"
    )
    print(f"{'loss trend':>12} {'runs':>6} {'share':>7}")
    for trend, count in counts.items():
        print(f"{trend:>12} {count:>6} {count / runs:7.2%}")
    median, high = np.median(variation), np.quantile(variation, 0.9)
    print(f"epoch loss coefficient of variation: median {median:.3f}, 90th percentile {high:.3f}")


def main() -> None:
    torch.set_num_threads(1)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epochs", type=int, default=22, help="epochs, warmup included (default 22: 2 + 20)")
    parser.add_argument("--steps", type=int, default=19, help="steps per epoch (default 19, as on the H200)")
    parser.add_argument("--warmup", type=int, default=2, help="first epochs left out of the trends")
    parser.add_argument(
        "--device", default="cpu", help="cpu, or cuda: the default shapes take ~30 s a step on a busy CPU"
    )
    parser.add_argument("--zero-forecast-runs", type=int, default=0, help="N: the batches alone, no training")
    parser.add_argument("overrides", nargs="*", help="config overrides (workloads.mamba2.*, seed, data.*)")
    args = parser.parse_args()
    if args.zero_forecast_runs:
        args.epochs -= args.warmup
        zero_forecast_runs(args)
    else:
        train(args)


if __name__ == "__main__":
    main()
