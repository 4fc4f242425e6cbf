"""The seed preset's memory against the seed guide's table, and the widths that would land in it.

The seed guide (RTX 3050 Ti, 4 GB) lists each model's VRAM: DQN 100-200 MB, PPO 150-300, Mamba-2 300-600, TFT
1,500-2,800 MB. ``experiment=seed`` reproduces the seed's shapes (225 input features, 60-bar windows, the guide's
batches) but not its networks' widths, which the seed does not state. For each model and each width given, this
builds the workload exactly as ``python -m gpubench experiment=seed hardware=rtx3050ti`` would (the same composed
config, the emulated card's usable VRAM for Mamba-2's recompute choice), runs ``--steps`` optimizer steps after
emptying the allocator's cache and resetting its peaks, and prints the peak allocated and reserved MB (reserved is
what the report's ``memory_usage_mb`` holds), the parameter count and the step time, beside the guide's range.

    python benchmarks/seed_memory.py                     # on CUDA: the preset and the width grid below
    python benchmarks/seed_memory.py --json seed_memory.json
"""

import argparse
import gc
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _context import model_run_context

from gpubench.bench.model_run import build_workload

#: The seed guide's VRAM per model on its 4 GB card (MB, low and high end).
SEED_GUIDE_MB: dict[str, tuple[float, float]] = {
    "dqn": (100.0, 200.0),
    "ppo": (150.0, 300.0),
    "mamba2": (300.0, 600.0),
    "tft": (1500.0, 2800.0),
}
#: The RTX 3050 Ti's usable VRAM under gpubench's emulation (its 4 GB less the CUDA context), MB.
EMULATED_USABLE_MB = 3420.0
#: Per model, the overrides tried: the preset itself first, then narrower networks.
GRID: dict[str, list[list[str]]] = {
    "dqn": [[], ["workloads.dqn.hidden_sizes=[128,128]"]],
    "ppo": [[], ["workloads.ppo.hidden_sizes=[64,64]"], ["workloads.ppo.num_steps=16"]],
    "mamba2": [[], ["workloads.mamba2.d_model=128"], ["workloads.mamba2.d_model=64", "workloads.mamba2.n_layers=4"]],
    "tft": [
        [],
        ["workloads.tft.hidden_size=128"],
        ["workloads.tft.hidden_size=64"],
        ["workloads.tft.hidden_size=32"],
        ["workloads.tft.hidden_size=64", "workloads.tft.batch_size=128"],
    ],
}


def measure(name: str, overrides: list[str], device: torch.device, steps: int) -> dict:
    """Peak allocated/reserved MB and ms per step of model ``name`` built with the seed preset and ``overrides``."""
    context = model_run_context(["experiment=seed", *overrides], device, EMULATED_USABLE_MB)
    batch = getattr(context.cfg.workloads, name).batch_size
    gc.collect()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats(device)
    row: dict = {"model": name, "overrides": overrides, "batch": batch}
    try:
        workload = build_workload(name, context, batch)
        workload.train_step()
        torch.cuda.synchronize(device)
        start_s = time.perf_counter()
        for _ in range(steps):
            workload.train_step()
        torch.cuda.synchronize(device)
        row["ms_per_step"] = 1000.0 * (time.perf_counter() - start_s) / steps
        row["parameters"] = workload.parameter_count()
        row["recompute_scan"] = workload.describe().get("recompute_scan")
    except torch.OutOfMemoryError as exc:
        row["error"] = f"out of memory: {str(exc).splitlines()[0]}"
    row["peak_allocated_mb"] = torch.cuda.max_memory_allocated(device) / 2**20
    row["peak_reserved_mb"] = torch.cuda.max_memory_reserved(device) / 2**20
    del context
    gc.collect()
    torch.cuda.empty_cache()
    return row


def _table(rows: list[dict]) -> str:
    lines = [
        f"{'model':<7} {'overrides':<60} {'batch':>5} {'params':>11} {'alloc MB':>9} {'reserved MB':>11} "
        f"{'ms/step':>8} {'guide MB':>11}"
    ]
    for row in rows:
        low, high = SEED_GUIDE_MB[row["model"]]
        params = f"{row['parameters']:,}" if "parameters" in row else "-"
        ms = f"{row['ms_per_step']:.2f}" if "ms_per_step" in row else row.get("error", "")[:20]
        lines.append(
            f"{row['model']:<7} {' '.join(row['overrides']) or '(preset)':<60} {row['batch']:>5} {params:>11} "
            f"{row['peak_allocated_mb']:>9,.0f} {row['peak_reserved_mb']:>11,.0f} {ms:>8} {low:>5,.0f}-{high:,.0f}"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default=",".join(GRID), help="comma-separated models")
    parser.add_argument("--steps", type=int, default=10, help="optimizer steps after the first")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("seed_memory.py measures CUDA memory: it needs a GPU.", file=sys.stderr)
        return 2
    device = torch.device("cuda", 0)
    rows = []
    for name in args.models.split(","):
        for overrides in GRID[name]:
            rows.append(measure(name, overrides, device, args.steps))
            print(_table(rows[-1:]).splitlines()[-1], flush=True)
    print(_table(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
