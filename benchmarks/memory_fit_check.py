"""Check the memory split's batch predictions where one GPU can check them: on cards emulated by a VRAM cap.

For each model, an uncapped batch search (doubling from ``batch.min_size``, as a run's search does, up to
``--max-size`` or ``batch.trial_max_seconds``) measures the peak reserved memory of its trials; the line
``peak(B) = fixed + per_sample × B`` through them is the model's memory split
(:func:`gpubench.measure.memory_split.memory_split`, with the parameters, gradients and optimizer state counted on a
workload built at the configured batch). For each cap the script then predicts the largest batch under it exactly as
the report does for a catalog card (:func:`gpubench.decision.batch_fit.fits_at_batch`: ``batch.headroom`` × (the cap
less the uncapped run's memory outside the allocator)), caps the allocator as ``hardware.vram_limit_gb`` does
(:func:`gpubench.hardware.vram.apply_vram_limit`), and lets the batch finder measure the largest batch whose trial
peaks stay under the same headroom, bisected down to the exact integer from batch 1. It prints a table (model, cap,
predicted B, measured B, error %) and writes it, with each model's split, as JSON.

Caps are GB (GiB) or ``auto``: per model, the caps under which the split predicts 0.35 and 0.7 of the largest batch
the uncapped search measured: between the doubling search's trials (the prediction interpolates there rather than
hitting a trial's own peak), and batches large enough that one sample is far below the 5% it asserts.
Mamba-2 runs with ``workloads.mamba2.recompute_scan=false``: its ``auto`` setting recomputes the scan once the
batch would not fit the usable VRAM, which changes the memory per sample between the uncapped run and a cap. The
custom model is ``benchmarks/user_models/gpt_language_model.py`` at a context of 128 tokens (``GPT_LM_CONTEXT``),
so that its largest batches under the caps run to hundreds rather than a handful.

    python benchmarks/memory_fit_check.py --json memory_fit_check.json      # on CUDA: tft, mamba2, mlp, custom
    python benchmarks/memory_fit_check.py --models tft mlp --caps 4 8 16
    python benchmarks/memory_fit_check.py --from-reports benchmarks/results/2026-12-02-h200-s7-default-report.json \
        benchmarks/results/2026-12-01-h200-s6-rtx3050ti-report.json       # stored reports, no GPU
"""

import argparse
import json
import math
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Protocol

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _context import model_run_context

from gpubench.bench.model_run import ModelRunContext, batch_trial, build_workload
from gpubench.decision.batch_fit import fits_at_batch, peak_limit_mb, trial_peak_mb
from gpubench.hardware.vram import VramBudget, apply_vram_limit
from gpubench.measure.batch_search import SEARCH_STEPS, TryBatch, find_max_batch_size, release_device_memory
from gpubench.measure.memory_split import StateBytes, memory_split, state_bytes
from gpubench.output.console import memory_split_line
from gpubench.results import MemorySplit, RunReport
from gpubench.results.units import MB_PER_GB

USER_MODELS = Path(__file__).resolve().parent / "user_models"
#: Per model, the config overrides it is checked with (the module docstring says why).
MODEL_OVERRIDES: dict[str, list[str]] = {
    "tft": [],
    "mamba2": ["workloads.mamba2.recompute_scan=false"],
    "mlp": [],
    "custom": [
        "model=custom",
        "workloads.custom.factory=gpt_language_model:build",
        "workloads.custom.batch_size=16",
        "workloads.custom.sample_unit=sequence",
    ],
}
#: The custom model's context (tokens); set before its module is imported, which reads it.
CUSTOM_CONTEXT_TOKENS = "128"
#: ``--caps auto``: the caps put the predicted largest batch at these fractions of the largest the uncapped search
#: fit. A doubling search tried a quarter and a half of it; 0.35 and 0.7 lie between its trials, where the
#: prediction interpolates.
AUTO_FRACTIONS: tuple[float, ...] = (0.35, 0.7)
#: The error the GPU test accepts (percent of the measured batch).
TOLERANCE_PERCENT = 5.0
#: PyTorch's caching allocator serves requests between 1 and 10 MiB from 20 MiB segments (``kLargeBuffer`` in
#: c10/cuda/CUDACachingAllocator.cpp): a batch whose activations total less than one segment moves the peak in
#: steps of the segment, so its largest batch under a cap is the allocator's rounding, not the line's.
ALLOCATOR_SEGMENT_MB = 20.0


class MemoryOracle(Protocol):
    """What the check needs of a device: cap its allocator (None: no cap) and say what the cap leaves, run a
    model's batch-search trials under that budget, and count a model's parameters, gradients and optimizer state."""

    def cap(self, cap_gb: float | None) -> VramBudget: ...

    def try_batch(self, model: str, budget: VramBudget) -> TryBatch: ...

    def state(self, model: str) -> StateBytes: ...


@dataclass(frozen=True)
class CapRow:
    """One model under one cap (GB): the peak limit (MB), the largest batch the split predicts, the largest the
    finder measured under the cap (None: not even batch 1), their error (percent of the measured batch; None where
    not comparable, ``note`` says why) and the trials the finder ran."""

    model: str
    cap_gb: float
    limit_mb: float
    predicted_batch: int | None
    measured_batch: int | None
    error_percent: float | None
    trials: int
    note: str | None = None


@dataclass(frozen=True)
class ModelCheck:
    """One model's check: its split from the uncapped search (``uncapped_largest``: the largest batch it fit,
    ``time_limited`` when it stopped on its trial time), the uncapped overhead (MB) and a row per cap."""

    model: str
    split: MemorySplit
    uncapped_largest: int | None
    time_limited: bool
    overhead_mb: float
    rows: list[CapRow]


def auto_caps(split: MemorySplit, overhead_mb: float, largest: int, fractions: Sequence[float]) -> list[float]:
    """The caps (GB) under which the split predicts ``fraction`` × ``largest`` samples: the peak the trials give half
    a sample above that batch (:func:`gpubench.decision.batch_fit.trial_peak_mb`), so that rounding puts the
    prediction on the batch itself."""
    assert split.activations_mb_per_sample is not None and split.headroom
    caps = []
    for fraction in fractions:
        target = max(1, round(fraction * largest))
        peak_mb = trial_peak_mb(split.fit_sizes, split.fit_peaks_mb, split.activations_mb_per_sample, target + 0.5)
        caps.append((peak_mb / split.headroom + overhead_mb) / MB_PER_GB)
    return caps


def _error_percent(
    predicted: int | None, measured: int | None, max_size: int, activations_mb_per_sample: float | None
) -> tuple[float | None, str | None]:
    if predicted is None:
        return None, "no prediction: the trials' peaks do not grow with the batch"
    if measured is None:
        return None, "not even batch 1 fits under the cap"
    if measured >= max_size:
        return None, f"the finder reached --max-size {max_size}: the largest batch is not known"
    if activations_mb_per_sample is not None and activations_mb_per_sample * measured < ALLOCATOR_SEGMENT_MB:
        return None, (
            f"the batch's activations ({activations_mb_per_sample * measured:.1f} MB) are under one allocator "
            f"segment ({ALLOCATOR_SEGMENT_MB:g} MB): the cap's largest batch is the allocator's rounding"
        )
    return 100.0 * (predicted - measured) / measured, None


class NoLineError(RuntimeError):
    """A model whose uncapped trials give no line to predict from (its peaks do not grow with the batch)."""


def check_model(
    model: str,
    oracle: MemoryOracle,
    caps_gb: Sequence[float] | None,
    *,
    headroom: float,
    min_size: int,
    max_size: int,
    trial_max_seconds: float | None,
) -> ModelCheck:
    """Split ``model``'s memory from an uncapped search, then compare each cap's predicted largest batch with the
    finder's (``caps_gb`` None: :func:`auto_caps`). The allocator is left uncapped."""
    uncapped = oracle.cap(None)
    search = find_max_batch_size(
        oracle.try_batch(model, uncapped),
        min_size,
        max_size,
        peak_limit_mb=headroom * uncapped.usable_vram_mb,
        trial_max_seconds=trial_max_seconds,
    )
    split = memory_split(oracle.state(model), search.trials, batch_size=None, measured_peak_mb=None, headroom=headroom)
    overhead_mb = uncapped.non_allocator_overhead_mb
    if caps_gb is None:
        if not split.has_fit or search.best_size is None:
            raise NoLineError(f"no line through the uncapped trials ({'; '.join(split.notes)})")
        caps_gb = auto_caps(split, overhead_mb, search.best_size, AUTO_FRACTIONS)
    rows = []
    try:
        for cap_gb in caps_gb:
            cap_mb = cap_gb * MB_PER_GB
            predicted = fits_at_batch(split, cap_mb, overhead_mb)
            budget = oracle.cap(cap_gb)
            capped = find_max_batch_size(
                oracle.try_batch(model, budget), 1, max_size, peak_limit_mb=headroom * budget.usable_vram_mb
            )
            error, note = _error_percent(predicted, capped.best_size, max_size, split.activations_mb_per_sample)
            rows.append(
                CapRow(
                    model=model,
                    cap_gb=cap_gb,
                    limit_mb=peak_limit_mb(cap_mb, overhead_mb, headroom),
                    predicted_batch=predicted,
                    measured_batch=capped.best_size,
                    error_percent=error,
                    trials=len(capped.trials),
                    note=note,
                )
            )
    finally:
        oracle.cap(None)
    return ModelCheck(
        model=model,
        split=split,
        uncapped_largest=search.best_size,
        time_limited=search.time_limited,
        overhead_mb=overhead_mb,
        rows=rows,
    )


class CudaOracle:
    """The real device: each model built from the composed config with its :data:`MODEL_OVERRIDES`, as a run
    builds it, its trials those of a run's batch search (:func:`gpubench.bench.model_run.batch_trial`)."""

    def __init__(self, device: torch.device, extra_overrides: Sequence[str]) -> None:
        self.device = device
        self.extra_overrides = list(extra_overrides)
        self._contexts: dict[str, ModelRunContext] = {}

    def context(self, model: str) -> ModelRunContext:
        """The model's run context (its config composed once, its data on the device)."""
        if model not in self._contexts:
            # One model's data on the device at a time: another model's would sit in every peak measured.
            self._contexts.clear()
            release_device_memory()
            overrides = [*MODEL_OVERRIDES[model], *self.extra_overrides]
            self._contexts[model] = model_run_context(overrides, self.device)
        return self._contexts[model]

    def cap(self, cap_gb: float | None) -> VramBudget:
        release_device_memory()
        budget = apply_vram_limit(self.device, cap_gb)
        assert budget is not None  # a CUDA device
        return budget

    def try_batch(self, model: str, budget: VramBudget) -> TryBatch:
        # The workload sees the budget as in a run under that cap (Mamba-2's recompute choice reads it).
        return batch_trial(model, replace(self.context(model), usable_vram_mb=budget.usable_vram_mb))

    def state(self, model: str) -> StateBytes:
        context = self.context(model)
        workload = build_workload(model, context, getattr(context.cfg.workloads, model).batch_size)
        for _ in range(SEARCH_STEPS):
            workload.train_step()
        torch.cuda.synchronize(self.device)
        counted = state_bytes(workload.modules(), workload.optimizers())
        del workload
        release_device_memory()
        return counted


def _table(checks: Sequence[ModelCheck]) -> list[str]:
    lines = [f"{'model':<8} {'cap GB':>7} {'limit MB':>9} {'predicted B':>12} {'measured B':>11} {'error %':>8}"]
    for check in checks:
        for row in check.rows:
            error = "-" if row.error_percent is None else f"{row.error_percent:+.2f}"
            lines.append(
                f"{row.model:<8} {row.cap_gb:>7.2f} {row.limit_mb:>9,.0f} {_fmt(row.predicted_batch):>12} "
                f"{_fmt(row.measured_batch):>11} {error:>8}" + (f"  ({row.note})" if row.note else "")
            )
    errors = [abs(row.error_percent) for check in checks for row in check.rows if row.error_percent is not None]
    if errors:
        lines.append(
            f"max |error| {max(errors):.2f}% over {len(errors)} caps; within ±{TOLERANCE_PERCENT:g}%: "
            f"{sum(error <= TOLERANCE_PERCENT for error in errors)}"
        )
    return lines


def _fmt(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


def report(checks: Sequence[ModelCheck], device_name: str, headroom: float) -> dict:
    """The JSON written by ``--json``: the device, the headroom, each model's split and rows."""
    return {
        "device": device_name,
        "headroom": headroom,
        "tolerance_percent": TOLERANCE_PERCENT,
        "models": [
            {
                "model": check.model,
                "uncapped_largest_batch": check.uncapped_largest,
                "uncapped_time_limited": check.time_limited,
                "non_allocator_overhead_mb": check.overhead_mb,
                "split": check.split.to_dict(),
                "rows": [asdict(row) for row in check.rows],
            }
            for check in checks
        ],
    }


def run_checks(
    models: Sequence[str],
    oracle: MemoryOracle,
    caps_gb: Sequence[float] | None,
    *,
    headroom: float,
    min_size: int,
    max_size: int,
    trial_max_seconds: float | None,
    show: Callable[[str], None] = print,
) -> list[ModelCheck]:
    """:func:`check_model` for each of ``models``, each model's split line shown as it completes; a model with no
    line to predict from (:class:`NoLineError`) is shown as skipped, with the reason, and left out."""
    checks = []
    for model in models:
        try:
            check = check_model(
                model,
                oracle,
                caps_gb,
                headroom=headroom,
                min_size=min_size,
                max_size=max_size,
                trial_max_seconds=trial_max_seconds,
            )
        except NoLineError as exc:
            # The MLP on the H200: its activations are lost in the allocator's rounding; the others still count.
            show(f"{model}: skipped, {exc}")
            continue
        line = memory_split_line(model, check.split)
        show(line or f"{model}: {'; '.join(check.split.notes)}")
        checks.append(check)
    return checks


def from_reports(uncapped: RunReport, capped: RunReport) -> list[ModelCheck]:
    """The same comparison from two stored reports of one device: each model's split from the ``uncapped`` run's
    search trials predicts the largest batch on the ``capped`` run's card, whose own search measured it. The
    parameters, gradients and optimizer state are not in older reports; the prediction does not use them."""
    overhead_mb = uncapped.hardware.non_allocator_overhead_mb
    cap_mb = capped.hardware.vram_limit_mb
    if overhead_mb is None or cap_mb is None or capped.hardware.usable_vram_mb is None:
        raise ValueError("the uncapped report needs its non-allocator overhead, the capped one its VRAM limit")
    nothing = StateBytes(parameters_bytes=0, gradients_bytes=0, optimizer_state_bytes=0)
    checks = []
    for model, result in uncapped.models.items():
        measured = capped.models.get(model)
        if result.batch_search is None or measured is None or measured.batch_search is None:
            continue
        search = measured.batch_search
        assert search.peak_limit_mb is not None
        headroom = search.peak_limit_mb / capped.hardware.usable_vram_mb
        split = memory_split(
            nothing, result.batch_search.trials, batch_size=None, measured_peak_mb=None, headroom=headroom
        )
        predicted = fits_at_batch(split, cap_mb, overhead_mb)
        error, note = _error_percent(
            predicted, search.largest_fitting_size, search.search_max_size, split.activations_mb_per_sample
        )
        if search.time_limited:
            error, note = None, "the capped search stopped on its trial time: its batch is a lower bound"
        row = CapRow(
            model=model,
            cap_gb=cap_mb / MB_PER_GB,
            limit_mb=peak_limit_mb(cap_mb, overhead_mb, headroom),
            predicted_batch=predicted,
            measured_batch=search.largest_fitting_size,
            error_percent=error,
            trials=len([trial for trial in search.trials if trial.phase == "search"]),
            note=note,
        )
        checks.append(
            ModelCheck(
                model=model,
                split=split,
                uncapped_largest=result.batch_search.largest_fitting_size,
                time_limited=result.batch_search.time_limited,
                overhead_mb=overhead_mb,
                rows=[row],
            )
        )
    return checks


def _caps(values: Sequence[str]) -> list[float] | None:
    if list(values) == ["auto"]:
        return None
    caps = [float(value) for value in values]
    if any(not math.isfinite(cap) or cap <= 0 for cap in caps):
        raise ValueError(f"--caps must be positive GB or `auto`, got {' '.join(values)}")
    return caps


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(MODEL_OVERRIDES), choices=list(MODEL_OVERRIDES))
    parser.add_argument("--caps", nargs="+", default=["auto"], help="caps in GB, or `auto` (the default)")
    parser.add_argument("--max-size", type=int, default=None, help="largest batch tried (default: batch.max_size)")
    parser.add_argument("--json", type=Path, default=None, help="write the table and the splits here")
    parser.add_argument(
        "--from-reports",
        nargs=2,
        type=Path,
        metavar=("UNCAPPED", "CAPPED"),
        help="compare two stored reports of one GPU instead (no GPU needed): an uncapped run's split against a "
        "capped run's search",
    )
    parser.add_argument("overrides", nargs="*", help="config overrides for every model (e.g. batch.headroom=0.8)")
    args = parser.parse_args(argv)
    if args.from_reports is not None:
        uncapped, capped = (RunReport.from_dict(json.loads(path.read_text())) for path in args.from_reports)
        checks = from_reports(uncapped, capped)
        for line in _table(checks):
            print(line)
        if args.json is not None:
            args.json.write_text(json.dumps(report(checks, uncapped.hardware.device_name, 0.0), indent=2))
        return 0
    try:
        caps = _caps(args.caps)
    except ValueError as exc:
        print(f"memory_fit_check: {exc}", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("memory_fit_check: needs a CUDA device (a VRAM cap emulates the smaller cards)", file=sys.stderr)
        return 2
    os.environ.setdefault("GPT_LM_CONTEXT", CUSTOM_CONTEXT_TOKENS)
    sys.path.insert(0, str(USER_MODELS))
    device = torch.device("cuda", torch.cuda.current_device())
    oracle = CudaOracle(device, args.overrides)
    batch = oracle.context(args.models[0]).cfg.batch
    checks = run_checks(
        args.models,
        oracle,
        caps,
        headroom=batch.headroom,
        min_size=batch.min_size,
        max_size=args.max_size or batch.max_size,
        trial_max_seconds=batch.trial_max_seconds,
    )
    for line in _table(checks):
        print(line)
    if args.json is not None:
        args.json.write_text(json.dumps(report(checks, torch.cuda.get_device_name(device), batch.headroom), indent=2))
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
