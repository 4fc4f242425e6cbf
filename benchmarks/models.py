"""Training-step speed of every workload against its plain reference and its peer's anchor, in one table.

Each ``models_<name>.py`` beside this file times our step in each execution mode, a plain reference of the same
maths in the same run, and (when the peer package is importable) the peer itself; this script runs the ones asked
for and prints one table (and writes it as JSON with ``--json``).

    python benchmarks/models.py                       # every model, on CUDA when present
    python benchmarks/models.py --models tft mamba2 --json rows.json
"""

import argparse
import importlib
import json
import sys
import time

import torch

#: Which benchmark module covers which model.
MODULES = {"tft": "models_tft", "mamba2": "models_mamba2", "dqn": "models_rl", "ppo": "models_rl"}


def _format_rows(rows: list[dict]) -> str:
    header = f"{'model':<7} {'case':<58} {'ms/step':>10} {'anchor ms':>10} {'anchor/ours':>11}  notes"
    lines = [header, "-" * len(header)]
    for row in rows:
        ours, anchor = row.get("ms_per_step"), row.get("reference_ms")
        ratio = f"{anchor / ours:.2f}x" if ours and anchor and ours == ours else "-"
        lines.append(
            f"{row['model']:<7} {row['case'][:58]:<58} {ours if ours is not None else float('nan'):>10.3f} "
            f"{anchor if anchor is not None else float('nan'):>10.1f} {ratio:>11}  {row.get('notes', '')}"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", choices=sorted(MODULES), default=sorted(MODULES))
    parser.add_argument("--json", help="also write the rows to this JSON file")
    args = parser.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device_name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    print(f"device: {device_name}, torch {torch.__version__}")
    rows: list[dict] = []
    done_modules: set[str] = set()
    for model in args.models:
        module_name = MODULES[model]
        if module_name in done_modules:
            continue
        done_modules.add(module_name)
        start_s = time.perf_counter()
        module_rows = importlib.import_module(module_name).benchmark(device)
        rows += [row for row in module_rows if row["model"] in args.models]
        print(f"{module_name}: {time.perf_counter() - start_s:.0f} s", file=sys.stderr, flush=True)
    print(_format_rows(rows))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump({"device": str(device), "torch": torch.__version__, "rows": rows}, handle, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
