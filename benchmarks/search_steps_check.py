"""Whether a batch-search trial of 2 steps measures what one of 3 does, on the GPU: for each model, the uncapped
search (as a run's, under ``batch.headroom``) with 2 and with 3 steps per trial, interleaved ``--repeats`` times.
Prints per search the largest batch, the knee, the trials and their steps' seconds, then per model the largest
difference in peak reserved memory (MB and %) at the sizes both searches ran.

    python benchmarks/search_steps_check.py [--models tft mamba2 mlp] [--repeats 2]
"""

import argparse
import time
from collections import defaultdict

import torch
from memory_fit_check import MODEL_OVERRIDES, CudaOracle

from gpubench.measure.batch_search import find_max_batch_size, knee_batch_size

STEPS = (2, 3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["tft", "mamba2", "mlp"], choices=sorted(MODEL_OVERRIDES))
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    oracle = CudaOracle(torch.device("cuda", torch.cuda.current_device()), [])
    print(f"{'model':<8} {'steps':>5} {'rep':>3} {'largest':>8} {'knee':>6} {'trials':>6} {'steps s':>8} {'wall s':>7}")
    for model in args.models:
        batch = oracle.context(model).cfg.batch
        peaks: dict[int, dict[int, list[float]]] = {steps: defaultdict(list) for steps in STEPS}
        for repeat in range(args.repeats):
            for steps in STEPS if repeat % 2 == 0 else reversed(STEPS):
                budget = oracle.cap(None)
                start = time.perf_counter()
                search = find_max_batch_size(
                    oracle.try_batch(model, budget),
                    batch.min_size,
                    batch.max_size,
                    steps=steps,
                    peak_limit_mb=batch.headroom * budget.usable_vram_mb,
                    trial_max_seconds=batch.trial_max_seconds,
                )
                wall = time.perf_counter() - start
                curve = sorted((t.size, t.samples_per_s) for t in search.trials if t.ok and t.samples_per_s)
                for trial in search.trials:
                    if trial.peak_reserved_mb is not None:
                        peaks[steps][trial.size].append(trial.peak_reserved_mb)
                seconds = sum(t.seconds or 0.0 for t in search.trials)
                print(
                    f"{model:<8} {steps:>5} {repeat:>3} {search.best_size!s:>8} {knee_batch_size(curve)!s:>6} "
                    f"{len(search.trials):>6} {seconds:>8.2f} {wall:>7.2f}"
                )
        common = sorted(set(peaks[2]) & set(peaks[3]))
        differences = [(size, max(peaks[2][size]) - max(peaks[3][size])) for size in common]
        worst = max(differences, key=lambda pair: abs(pair[1]), default=None)
        if worst is not None:
            size, diff = worst
            print(
                f"{model}: {len(common)} sizes ran with both; largest peak difference (2 - 3 steps) {diff:+,.0f} MB "
                f"at batch {size} ({100 * diff / max(peaks[3][size]):+.2f}%)"
            )


if __name__ == "__main__":
    main()
