"""Mamba-2 training step: ours against a plain reference of the same maths, timed in one run.

Rows (``ms_per_step`` is the median over timed blocks, see ``_timing.time_per_step``):

* ``ours eager``, ``ours compiled`` (``torch.compile`` default mode) and, on CUDA, ``ours reduce-overhead``
  (CUDA graphs): the workload the runner times, in each execution mode it offers;
* ``reference chunked eager`` / ``reference chunked compiled``: the same model and step with a straightforward
  chunked SSD (B and C repeated per head, one einsum per term of the block decomposition);
* ``reference sequential eager``: the same step with the step-by-step recurrence (few steps: it is slow).

``reference_ms`` carries the issue's anchors for a straightforward pure-PyTorch chunked-SSD stack on the NVIDIA
H200 (43.6 ms eager, 18.8 ms compiled); they apply at the default size only. Compile times are cold (the inductor
caches are disabled while compiling), reported as a one-off cost in ``notes``.

Run ``python benchmarks/models_mamba2.py [--cases NAME ...] [--small]``: the default size on CUDA, a small size
on the CPU.
"""

import argparse
import functools
import gc
import math
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from _features import random_features
from _timing import time_per_step

from gpubench.data.tensors import FeatureTensors
from gpubench.models.mamba2.config import Mamba2Config
from gpubench.models.mamba2.workload import Mamba2Workload, SSDScan, ssd_sequential
from gpubench.workload import ExecutionContext

#: Issue 3's anchors on the NVIDIA H200, fp32, at the default size (ms per training step).
ANCHOR_EAGER_MS = 43.6
ANCHOR_COMPILED_MS = 18.8
#: Row names :func:`benchmark` can time.
CASES = (
    "ours eager",
    "ours compiled",
    "ours reduce-overhead",
    "reference chunked eager",
    "reference chunked compiled",
    "reference sequential eager",
)
#: Features per bar of the random market used here (the input projection's width).
N_FEATURES = 16
#: A size that keeps the CPU run to about a minute.
SMALL_CONFIG = Mamba2Config(
    batch_size=8, seq_len=128, horizon=8, d_model=64, n_layers=2, headdim=32, d_state=32, chunk_size=32
)


def reference_ssd_chunked(
    x: torch.Tensor, dt: torch.Tensor, A: torch.Tensor, B: torch.Tensor, C: torch.Tensor, chunk_size: int
) -> torch.Tensor:
    """Straightforward chunked SSD, the paper's block decomposition term by term; ``seqlen % chunk_size == 0``.

    Shapes as ``ssd_sequential``. B and C are repeated to every head and each term is one einsum, with decays
    from differences of a chunk-local running sum.
    """
    seqlen, nheads = x.shape[1], x.shape[2]
    nchunks = seqlen // chunk_size
    heads_per_group = nheads // B.shape[2]
    B = B.repeat_interleave(heads_per_group, dim=2).unflatten(1, (nchunks, chunk_size))  # (b, c, s, h, n)
    C = C.repeat_interleave(heads_per_group, dim=2).unflatten(1, (nchunks, chunk_size))  # (b, c, l, h, n)
    X = (x * dt[..., None]).unflatten(1, (nchunks, chunk_size))  # (b, c, s, h, p)
    log_decay_cumsum = (dt * A).unflatten(1, (nchunks, chunk_size)).permute(0, 3, 1, 2).cumsum(-1)  # (b,h,c,l)
    causal = torch.ones(chunk_size, chunk_size, dtype=torch.bool, device=x.device).tril()
    segment = log_decay_cumsum[..., :, None] - log_decay_cumsum[..., None, :]
    decay = torch.exp(segment.masked_fill(~causal, -math.inf))  # (b, h, c, l, s)
    y_within = torch.einsum("bclhn,bcshn,bhcls,bcshp->bclhp", C, B, decay, X)
    decay_to_end = torch.exp(log_decay_cumsum[..., -1:] - log_decay_cumsum)  # (b, h, c, s)
    chunk_states = torch.einsum("bcshn,bhcs,bcshp->bchpn", B, decay_to_end, X)
    chunk_states = torch.cat([torch.zeros_like(chunk_states[:, :1]), chunk_states], dim=1)  # zero initial state
    chunk_cumsum = F.pad(log_decay_cumsum[..., -1], (1, 0)).cumsum(-1)  # (b, h, c + 1)
    chunk_causal = torch.ones(nchunks + 1, nchunks + 1, dtype=torch.bool, device=x.device).tril()
    chunk_segment = chunk_cumsum[..., :, None] - chunk_cumsum[..., None, :]
    chunk_decay = torch.exp(chunk_segment.masked_fill(~chunk_causal, -math.inf))  # (b, h, c + 1, c + 1)
    entering_states = torch.einsum("bhzc,bchpn->bzhpn", chunk_decay, chunk_states)[:, :-1]
    y_from_state = torch.einsum("bclhn,bchpn,bhcl->bclhp", C, entering_states, torch.exp(log_decay_cumsum))
    return (y_within + y_from_state).flatten(1, 2)


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _time_step(
    config: Mamba2Config,
    data: FeatureTensors,
    device: torch.device,
    compile_mode: str,
    scan: SSDScan | None,
    timing: dict[str, int],
) -> tuple[float, float, float]:
    """(median ms per step, first step in s, first step's loss) of one workload, built from seed 0."""
    torch._dynamo.reset()
    context = ExecutionContext(device=device, batch_size=config.batch_size, compile_mode=compile_mode, seed=0)
    workload = Mamba2Workload(config, data, context, scan=scan)
    _synchronize(device)
    start = time.perf_counter()
    # Compilation happens in the first step; with the caches off its time is that of a first-ever compile.
    with torch._inductor.config.patch(force_disable_caches=True), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="dynamo_pgo force disabled")
        first_loss = workload.train_step().loss.item()
    first_step_s = time.perf_counter() - start
    ms_per_step = time_per_step(workload.train_step, device, **timing).median_ms
    del workload
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return ms_per_step, first_step_s, first_loss


@dataclass(frozen=True)
class _Case:
    name: str
    compile_mode: str
    scan: SSDScan | None
    anchor_ms: float | None
    timing: dict[str, int]


def benchmark(
    device: torch.device, config: Mamba2Config | None = None, cases: Sequence[str] | None = None
) -> list[dict]:
    """Time our Mamba-2 training step and plain references of the same maths on ``device``, fp32.

    ``config`` defaults to the issue's benchmark size (``Mamba2Config()``); ``cases`` picks rows by name from
    :data:`CASES` (default: all; ``ours reduce-overhead`` only on CUDA). Returns one row per case:
    ``{"model", "case", "ms_per_step", "reference_ms", "notes"}``.
    """
    config = config or Mamba2Config()
    data = random_features(device, n_symbols=2, bars_per_symbol=20_000, n_observed=N_FEATURES)
    at_default_size = config == Mamba2Config()
    eager_anchor = ANCHOR_EAGER_MS if at_default_size else None
    compiled_anchor = ANCHOR_COMPILED_MS if at_default_size else None
    full = {"warmup_steps": 10, "steps_per_block": 20, "blocks": 5}
    reference_chunked = functools.partial(reference_ssd_chunked, chunk_size=config.chunk_size)
    available = [
        _Case("ours eager", "false", None, eager_anchor, full),
        _Case("ours compiled", "true", None, compiled_anchor, full),
        _Case("ours reduce-overhead", "reduce-overhead", None, compiled_anchor, full),
        _Case("reference chunked eager", "false", reference_chunked, eager_anchor, full),
        _Case("reference chunked compiled", "true", reference_chunked, compiled_anchor, full),
        _Case(
            "reference sequential eager",
            "false",
            ssd_sequential,
            None,
            {"warmup_steps": 1, "steps_per_block": 2, "blocks": 2},
        ),
    ]
    chosen = [
        case
        for case in available
        if (cases is None or case.name in cases) and (case.compile_mode != "reduce-overhead" or device.type == "cuda")
    ]
    measured = {
        case.name: _time_step(config, data, device, case.compile_mode, case.scan, case.timing) for case in chosen
    }

    matmul_precision = "TF32" if device.type == "cuda" and torch.backends.cuda.matmul.allow_tf32 else "fp32"
    size = (
        f"d_model {config.d_model}, {config.n_layers} layers, headdim {config.headdim}, d_state {config.d_state}, "
        f"chunk {config.chunk_size}, seq {config.seq_len}, batch {config.batch_size}, matmul {matmul_precision}"
    )
    first_case = chosen[0].name
    baseline_loss = measured[first_case][2]
    rows = []
    for case in chosen:
        ms_per_step, first_step_s, first_loss = measured[case.name]
        notes = [size] if case.name == first_case else []
        if case.compile_mode != "false":
            notes.append(f"first step {first_step_s:.1f} s (cold compile, one-off)")
        same_mode = "reference chunked " + ("eager" if case.compile_mode == "false" else "compiled")
        if case.name.startswith("ours") and same_mode in measured:
            notes.append(f"{measured[same_mode][0] / ms_per_step:.2f}x faster than {same_mode}")
        if case.name != first_case:
            notes.append(f"first loss rel. diff vs {first_case} {abs(first_loss - baseline_loss) / baseline_loss:.1e}")
        rows.append(
            {
                "model": "mamba2",
                "case": case.name,
                "ms_per_step": ms_per_step,
                "reference_ms": case.anchor_ms,
                "notes": "; ".join(notes),
            }
        )
    return rows


def _print_rows(rows: list[dict]) -> None:
    print(f"{'case':<28} {'ms/step':>10} {'anchor ms':>10}  notes")
    for row in rows:
        anchor = "-" if row["reference_ms"] is None else f"{row['reference_ms']:.1f}"
        print(f"{row['case']:<28} {row['ms_per_step']:>10.2f} {anchor:>10}  {row['notes']}")


def main() -> None:
    """Default size on CUDA when available, else the small size on the CPU; prints the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", choices=CASES, help="rows to time (default: all)")
    parser.add_argument("--small", action="store_true", help="the small size even on CUDA")
    args = parser.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    config = SMALL_CONFIG if args.small or device.type == "cpu" else None
    _print_rows(benchmark(device, config, args.cases))


if __name__ == "__main__":
    main()
