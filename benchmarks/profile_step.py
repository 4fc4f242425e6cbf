"""Where one workload's training step spends its time: torch.profiler over a few steps, heaviest ops first.

    python benchmarks/profile_step.py --model dqn --steps 50          # on CUDA when present
    python benchmarks/profile_step.py --model ppo --compile true

Built from the quick experiment's data and the workload's default config, through the same runner code the CLI
uses, so the step profiled is the step the benchmark times.
"""

import argparse

import torch
from torch.profiler import ProfilerActivity, profile

from gpubench.config import BenchmarkConfig
from gpubench.data.config import DataConfig
from gpubench.data.loader import load_features
from gpubench.models import workload_class
from gpubench.workload import ExecutionContext


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, choices=["mlp", "dqn", "ppo", "mamba2", "tft"])
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--compile", default="false", choices=["false", "true", "reduce-overhead"])
    parser.add_argument("--rows", type=int, default=40)
    args = parser.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    cfg = BenchmarkConfig(data=DataConfig(days=5, symbols=["SYNA", "SYNB"], cache_dir="/tmp/gpubench-profile"))
    features, _ = load_features(cfg.data, device)
    workload_cfg = getattr(cfg.workloads, args.model)
    batch_size = getattr(workload_cfg, "batch_size", 256)
    context = ExecutionContext(device=device, batch_size=batch_size, compile_mode=args.compile)
    workload = workload_class(args.model)(workload_cfg, features, context)
    for _ in range(10):
        workload.train_step()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities) as profiler:
        for _ in range(args.steps):
            workload.train_step()
        if device.type == "cuda":
            torch.cuda.synchronize()
    print(f"{args.model}, {args.steps} steps, compile={args.compile}, device={device}")
    print(profiler.key_averages().table(sort_by="self_cpu_time_total", row_limit=args.rows))


if __name__ == "__main__":
    main()
