"""Check the projection from the CPU: each model's step counted on the CPU, rebuilt onto a catalog card from its
counts (:func:`gpubench.decision.projection.counted_step_ms`: FLOPs at the card's peak × the assumed matmul
efficiency, launches at :data:`~gpubench.decision.projection.LAUNCH_COST_MS`, bytes at the card's bandwidth), against
the fp32 eager steps ``benchmarks/projection_check.py`` measured on that card (its ``--json`` output, or the merged
file of several runs stored under ``benchmarks/results/``). It prints the rebuilt and measured steps and their ratio,
the figures behind :data:`~gpubench.decision.projection.CPU_REBUILD_FACTOR`.

    python benchmarks/cpu_rebuild_check.py benchmarks/results/2026-12-01-h200-s6-projection-check.json --card h200
    python benchmarks/cpu_rebuild_check.py benchmarks/results/2026-12-06-h100-default/report.json --card h100
"""

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _context import model_run_context

from gpubench.bench.model_run import build_workload
from gpubench.decision.config import DecisionConfig
from gpubench.decision.projection import CPU_REBUILD_FACTOR, DeviceThroughput, counted_step_ms, target_throughput
from gpubench.hardware.catalog import load_catalog
from gpubench.measure.flops import count_step


def measured_steps_ms(path: Path) -> dict[str, list[float]]:
    """Every fp32 eager step (ms) of each model in a projection_check JSON: one run's, or each run's of a merged
    file (a dict of runs), once per run; or, from a gpubench report run in fp32 eager, each model's mean step."""
    document = json.loads(path.read_text())
    if "models" in document:
        run = document["run"]
        if run.get("precision", "fp32") != "fp32" or run.get("compile", "false") != "false":
            raise SystemExit(f"{path}: not an fp32 eager run ({run.get('precision')}, compile {run.get('compile')})")
        return {
            name: [model["statistics"]["mean_ms"] / model["steps_per_epoch"]]
            for name, model in document["models"].items()
            if model.get("status") == "ok" and model.get("statistics") and model.get("steps_per_epoch")
        }
    runs = [document] if "rows" in document else list(document.values())
    steps: dict[str, list[float]] = {}
    for run in runs:
        for model in dict.fromkeys(row["model"] for row in run["rows"]):
            row = next(row for row in run["rows"] if row["model"] == model)
            steps.setdefault(model, []).append(row["fp32_eager_ms"])
    return steps


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("measured", type=Path, help="projection_check.py's JSON, or a fp32 eager report, from the card")
    parser.add_argument("--card", default="h200", help="the catalog card the steps were measured on")
    parser.add_argument("overrides", nargs="*", help="config overrides the card's run used (default: none)")
    # Intermixed: the overrides may follow --card.
    args = parser.parse_intermixed_args()
    # The card as a target of the CPU's projection, as the report makes it (fp32, the assumed matmul efficiency).
    cpu = DeviceThroughput("cpu", None, None, None, None, "the CPU's counts", on_gpu=False)
    efficiency = DecisionConfig().assumed_matmul_efficiency
    target = target_throughput(args.card, load_catalog()[args.card], "fp32", cpu, efficiency)
    context = model_run_context(["hardware=cpu", *args.overrides], torch.device("cpu"))
    print(f"{'model':<7} {'launches':>8} {'GFLOP':>9} {'MB':>9} {'rebuilt ms':>10}  measured ms / rebuilt")
    ratios = []
    for name, measured in measured_steps_ms(args.measured).items():
        counts = count_step(build_workload(name, context, getattr(context.cfg.workloads, name).batch_size))
        assert counts.flops is not None and counts.launches is not None
        rebuilt = counted_step_ms(counts.flops, counts.launches, target, counts.bytes)
        assert rebuilt is not None
        ratios.extend(step / rebuilt for step in measured)
        cells = ", ".join(f"{step:.2f} / {step / rebuilt:.2f}" for step in measured)
        print(
            f"{name:<7} {counts.launches:>8} {counts.flops / 1e9:>9.3g} {(counts.bytes or 0) / 1e6:>9.3g} "
            f"{rebuilt:>10.2f}  {cells}"
        )
    print(
        f"measured / rebuilt from {min(ratios):.2f} to {max(ratios):.2f} over {len(ratios)} steps "
        f"(CPU_REBUILD_FACTOR {CPU_REBUILD_FACTOR:g}: {1 / CPU_REBUILD_FACTOR:g} to {CPU_REBUILD_FACTOR:g})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
