"""Check the step projection where it can be checked on one card: fp32 -> tf32 / bf16 and eager -> compiled.

For each model the fp32 eager step is timed, its FLOPs, kernel launches and bytes counted and the step split as the
decision splits it (:func:`gpubench.decision.projection.split_step`): compute at the attainable rate, launches at
:data:`~gpubench.decision.projection.LAUNCH_COST_MS` each, and the rest; on a catalog GPU the rest splits again into
memory (the counted bytes at the card's catalog bandwidth) and host work. Each variant is then projected from that
split and measured:

* tf32 (``torch.set_float32_matmul_precision("high")``) and bf16 autocast: the compute part scaled by the
  attainable-throughput ratio of the two precisions, the rest kept (the decision's cross-card formula, here across
  precisions on one card). On a catalog GPU the attainable rates are the catalog peaks x the fp32 efficiency the
  matmul burn-in measured, as in the report; elsewhere (the CPU) they are matmul rates measured at each precision.
* compile (``torch.compile`` default): the launch part removed, compute and the rest kept.
* reduce-overhead (CUDA graphs): the launch part and the host work removed, compute and memory traffic kept (a
  replayed graph runs the same kernels without Python, dispatch or launch cost). Without a host part (the
  bandwidth unknown) it is projected as compile is.

It prints a table of projected against measured step times and the relative error, the figures the issue-13 note
quotes. Steps are timed as medians of blocks (``benchmarks/_timing.py``), not by the full statistics of a run.

    python benchmarks/projection_check.py                          # the four models on CUDA, their default shapes
    python benchmarks/projection_check.py --device cpu --quick     # smoke test: tiny shapes, bf16 and tf32 only
"""

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _context import model_run_context
from _timing import time_per_step

from gpubench.bench.model_run import ModelRunContext, build_workload
from gpubench.bench.what_if import matmul_precision
from gpubench.config import ExecutionConfig
from gpubench.decision.projection import DeviceThroughput, projected_step_ms, split_step
from gpubench.hardware.catalog import load_catalog, match_catalog_card
from gpubench.measure.flops import count_step
from gpubench.results.units import BYTES_PER_MB

MODELS = ("dqn", "ppo", "mamba2", "tft")
#: Each variant: the execution it runs with, and how its step is projected from the fp32 eager split.
VARIANTS: dict[str, tuple[ExecutionConfig, str]] = {
    "tf32": (ExecutionConfig(matmul_precision="high"), "precision"),
    "bf16": (ExecutionConfig(precision="bf16"), "precision"),
    "compile": (ExecutionConfig(compile="true"), "launches"),
    "reduce-overhead": (ExecutionConfig(compile="reduce-overhead"), "graph"),
}


def _matmul_tflops(device: torch.device, dtype: torch.dtype, size: int, setting: str) -> float:
    """Achieved TFLOP/s of ``size`` x ``size`` matmuls in ``dtype`` under matmul precision ``setting``."""
    a = torch.randn(size, size, device=device, dtype=dtype)
    b = torch.randn(size, size, device=device, dtype=dtype)
    with matmul_precision(setting):
        timing = time_per_step(lambda: a @ b, device, warmup_steps=3, steps_per_block=10, blocks=5)
    return 2 * size**3 / (timing.median_ms * 1e-3) / 1e12


def attainable_tflops(device: torch.device, quick: bool) -> tuple[dict[str, float], float | None, str]:
    """The attainable TFLOP/s of fp32, tf32 and bf16 matmuls on ``device``, its memory bandwidth (GB/s, the
    catalog's; None off the catalog) and where they come from."""
    size = 256 if device.type == "cpu" else 1024 if quick else 8192
    fp32 = _matmul_tflops(device, torch.float32, size, "highest")
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else None
    catalog = load_catalog()
    card_name = match_catalog_card(name, catalog) if name else None
    if card_name is not None:
        card = catalog[card_name]
        efficiency = min(1.0, fp32 / card.peak_fp32_tflops)
        rates = {
            "fp32": efficiency * card.peak_fp32_tflops,
            "tf32": efficiency * (card.peak_tflops("fp32", "high") or card.peak_fp32_tflops),
            "bf16": efficiency * card.peak_bf16_tflops,
        }
        basis = f"catalog {card_name} peaks x measured fp32 matmul efficiency {efficiency:.2f}"
        return rates, card.memory_bandwidth_gbps, basis
    rates = {
        "fp32": fp32,
        "tf32": _matmul_tflops(device, torch.float32, size, "high"),
        "bf16": _matmul_tflops(device, torch.bfloat16, size, "highest"),
    }
    return rates, None, f"matmul rates measured at {size}x{size} (not a catalog card)"


def _context(device: torch.device, quick: bool) -> ModelRunContext:
    overrides = ["hardware=cpu" if device.type == "cpu" else "hardware=auto"]
    return model_run_context([*overrides, "experiment=quick"] if quick else overrides, device)


def _time_model(name: str, context: ModelRunContext, execution: ExecutionConfig, blocks: int) -> float:
    """Median ms per step of model ``name`` at its configured batch, run with ``execution``."""
    variant = replace(context, cfg=replace(context.cfg, execution=execution))
    batch = getattr(variant.cfg.workloads, name).batch_size
    with matmul_precision(execution.matmul_precision):
        workload = build_workload(name, variant, batch)
        steps = 10 if context.device.type == "cpu" else 50
        return time_per_step(workload.train_step, context.device, steps_per_block=steps, blocks=blocks).median_ms


def check(device: torch.device, models: list[str], variants: list[str], quick: bool) -> dict:
    """Every model's fp32 eager split and each variant's projected and measured step (ms)."""
    context = _context(device, quick)
    rates, bandwidth_gbps, rates_basis = attainable_tflops(device, quick)
    source = DeviceThroughput(str(device), None, rates["fp32"], None, bandwidth_gbps, rates_basis)
    blocks = 3 if quick else 7
    rows = []
    for name in models:
        start_s = time.perf_counter()
        batch = getattr(context.cfg.workloads, name).batch_size
        counts = count_step(build_workload(name, context, batch, eager=True))
        base_ms = _time_model(name, context, ExecutionConfig(), blocks)
        split = split_step(base_ms, counts.flops, rates["fp32"], counts.launches, counts.bytes, bandwidth_gbps)
        for variant in variants:
            execution, method = VARIANTS[variant]
            if method == "precision":
                rate = rates["bf16" if execution.precision == "bf16" else "tf32"]
                target = replace(source, name=variant, attainable_tflops=rate)
                projected = projected_step_ms(split, source, target)
            elif method == "graph" and split.host_ms is not None:
                projected = split.compute_ms + (split.memory_ms or 0.0)
            else:
                projected = base_ms - (split.launch_ms or 0.0)
            measured = _time_model(name, context, execution, blocks)
            rows.append(
                {
                    "model": name,
                    "variant": variant,
                    "fp32_eager_ms": base_ms,
                    "compute_ms": split.compute_ms,
                    "launch_ms": split.launch_ms,
                    "other_ms": base_ms - split.compute_ms - (split.launch_ms or 0.0),
                    "memory_ms": split.memory_ms if split.host_ms is not None else None,
                    "host_ms": split.host_ms,
                    "flops_per_step": counts.flops,
                    "launches_per_step": counts.launches,
                    "bytes_per_step": counts.bytes,
                    "projected_ms": projected,
                    "measured_ms": measured,
                    "error": None if projected is None else (projected - measured) / measured,
                }
            )
            # Each row as it is measured: a compile variant can take minutes, and a run cut short by a time limit
            # keeps the rows before it.
            print(_row_line(rows[-1]), file=sys.stderr, flush=True)
        print(f"{name}: {time.perf_counter() - start_s:.0f} s", file=sys.stderr, flush=True)
    return {
        "device": str(device),
        "attainable_tflops": rates,
        "memory_bandwidth_gbps": bandwidth_gbps,
        "attainable_basis": rates_basis,
        "rows": rows,
    }


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _row_line(row: dict) -> str:
    """One row of the table: a model's variant, its fp32 split, projected and measured step (ms) and the error."""
    error = f"{row['error']:+.1%}" if row["error"] is not None else "-"
    projected = f"{row['projected_ms']:.3f}" if row["projected_ms"] is not None else "-"
    traffic_mb = "-" if row["bytes_per_step"] is None else f"{row['bytes_per_step'] / BYTES_PER_MB:.3g}"
    return (
        f"{row['model']:<7} {row['variant']:<16} {row['fp32_eager_ms']:>9.3f} {row['compute_ms'] or 0:>8.3f} "
        f"{row['launch_ms'] or 0:>8.3f} {row['other_ms']:>8.3f} {_ms(row['memory_ms']):>8} "
        f"{_ms(row['host_ms']):>8} {traffic_mb:>9} {projected:>10} {row['measured_ms']:>9.3f} {error:>8}"
    )


def _table(result: dict) -> str:
    header = (
        f"{'model':<7} {'variant':<16} {'fp32 ms':>9} {'compute':>8} {'launch':>8} {'other':>8} {'memory':>8} "
        f"{'host':>8} {'MB':>9} {'projected':>10} {'measured':>9} {'error':>8}"
    )
    lines = [header, "-" * len(header)]
    lines.extend(_row_line(row) for row in result["rows"])
    errors = [abs(row["error"]) for row in result["rows"] if row["error"] is not None]
    if errors:
        lines.append(f"mean |error| {sum(errors) / len(errors):.1%}, max {max(errors):.1%} over {len(errors)} cases")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--quick", action="store_true", help="tiny shapes (experiment=quick), fewer blocks")
    parser.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS))
    parser.add_argument(
        "--variants", nargs="+", choices=sorted(VARIANTS), help="default: all on CUDA, tf32 and bf16 on the CPU"
    )
    parser.add_argument("--json", help="also write the result to this JSON file")
    args = parser.parse_args()
    device = torch.device(args.device)
    variants = args.variants or (list(VARIANTS) if device.type == "cuda" else ["tf32", "bf16"])
    result = check(device, args.models, variants, args.quick)
    print(f"device {result['device']}, torch {torch.__version__}; attainable {result['attainable_basis']}:")
    bandwidth = result["memory_bandwidth_gbps"]
    print(
        ", ".join(f"{key} {value:.3g} TFLOP/s" for key, value in result["attainable_tflops"].items())
        + (
            f"; memory bandwidth {bandwidth:g} GB/s"
            if bandwidth
            else "; memory bandwidth unknown: memory and host unsplit"
        )
    )
    print(_table(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
