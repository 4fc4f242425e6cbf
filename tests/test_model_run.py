"""One model end to end on the CPU: the frozen result and its report keys, the headroom check on the measured run's
peak, and the step-down when that check fails (with the memory profile faked)."""

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from conftest import cpu_model_context, tiny_mlp_config

from gpubench.bench import model_run
from gpubench.bench.model_run import ModelRunContext, build_workload, run_model
from gpubench.measure.batch_search import choose_batch_size
from gpubench.measure.config import BatchConfig
from gpubench.measure.flops import count_step
from gpubench.results import MemoryProfile, ModelResult

#: ``python -m gpubench experiment=quick tracking.enabled=false`` on the CPU, written by main at 1092cdc.
CPU_REPORT = Path(__file__).parent / "fixtures" / "report_main_1092cdc_cpu_quick.json"


def decision_with_limit(limit: int):
    """A real search over an oracle that fits every size up to ``limit``."""

    def try_batch(size: int, steps: int) -> float:
        if size > limit:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory (oracle)")
        return float(size)

    return choose_batch_size(
        try_batch, BatchConfig(policy="max", min_size=32, max_size=4096, target_effective=512), None
    )


@pytest.fixture
def cpu_context(tmp_path: Path, learnable_features) -> ModelRunContext:
    """The MLP on the CPU with a few short epochs, as if a 1,000 MB budget had been measured."""
    return cpu_model_context(tiny_mlp_config(tmp_path), learnable_features, usable_vram_mb=1000.0)


def test_a_cpu_run_returns_a_frozen_result_with_the_report_keys_of_main(cpu_context: ModelRunContext) -> None:
    run = run_model("mlp", dataclasses.replace(cpu_context, usable_vram_mb=None))
    result = run.result
    assert isinstance(result, ModelResult)
    assert result.status == "ok", result.error
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.status = "failed"  # type: ignore[misc]
    written = json.loads(CPU_REPORT.read_text())["models"]
    # Every model section main wrote on the CPU has one key set; this run's section has exactly that set, plus the
    # keys added since (each named here, so that a key lost or renamed still fails): validate's calibration steps,
    # issue 12's updates per step and measured evaluation and checkpoint, issue 13's launch and byte counts, issue
    # 24's memory split, issue 22's FLOPs by precision.
    added_since_1092cdc = {
        "calibration_steps",
        "updates_per_step",
        "evaluation",
        "checkpoint",
        "launches_per_step",
        "bytes_per_step",
        "memory_split",
        "flops_by_precision",
    }
    assert {frozenset(section) | added_since_1092cdc for section in written.values()} == {frozenset(result.to_dict())}
    assert result.launches_per_step is not None and result.launches_per_step > 0
    assert result.bytes_per_step is not None and result.bytes_per_step > 0
    assert len(result.raw_epoch_times_ms) == 3 and result.statistics is not None
    assert result.samples_per_second is not None and result.samples_per_second.mean > 0
    assert result.memory is not None and not result.memory.measured
    assert [epoch.phase for epoch in result.device_epochs] == ["measured"] * 3
    assert run.memory_timeline is None  # nothing is sampled on the CPU
    assert ModelResult.from_dict(json.loads(json.dumps(result.to_dict()))).to_dict() == result.to_dict()


def test_a_model_that_cannot_be_built_fails_with_its_error_and_traceback(cpu_context: ModelRunContext) -> None:
    cpu_context.cfg.workloads.mlp.window = 10**6  # longer than the data
    result = run_model("mlp", cpu_context).result
    assert result.status == "failed"
    assert result.error is not None and result.error.startswith("ValueError")
    assert result.traceback is not None and "Traceback" in result.traceback
    assert result.batch_size == cpu_context.cfg.workloads.mlp.batch_size
    assert result.statistics is None and result.raw_epoch_times_ms == []


@pytest.mark.parametrize(("peak_reserved_mb", "exceeded"), [(950.0, True), (900.0, False)])
def test_measured_peak_is_checked_against_the_headroom_limit(
    cpu_context: ModelRunContext, monkeypatch: pytest.MonkeyPatch, peak_reserved_mb: float, exceeded: bool
) -> None:
    # The measured epochs' profile as a GPU would report it; batch.headroom 0.9 × 1,000 MB allows 900 MB.
    monkeypatch.setattr(
        model_run.MemoryProfiler, "result", lambda self: MemoryProfile(True, peak_reserved_mb=peak_reserved_mb)
    )
    section = run_model("mlp", cpu_context).result.to_dict()
    assert section["status"] == "ok", section["error"]
    assert section["memory"]["peak_reserved_mb"] == peak_reserved_mb
    assert section["memory"]["headroom_exceeded"] is exceeded
    assert section["memory"]["headroom_limit_mb"] == pytest.approx(900.0)
    if exceeded:
        assert section["warnings"] == [
            "peak reserved memory during the measured epochs was 950 MB, above the headroom limit 900 MB "
            "(`batch.headroom` 0.9 × 1,000 MB usable): at this batch size the model may run out of memory on the "
            "target card"
        ]
    else:
        assert "warnings" not in section


def test_headroom_is_not_measured_on_the_cpu(cpu_context: ModelRunContext) -> None:
    section = run_model("mlp", dataclasses.replace(cpu_context, usable_vram_mb=None)).result.to_dict()
    assert section["status"] == "ok", section["error"]
    assert section["memory"]["headroom_exceeded"] is None
    assert section["memory"]["headroom_limit_mb"] is None


class FragmentingGpu:
    """The GPU as a model run sees it, faked: each measured run's peak reserved memory is ``peak_mb(batch)`` for the
    batch of the last workload built, and builds and device-memory releases are recorded in order."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, peak_mb: Callable[[int], float]) -> None:
        self.events: list[str] = []
        self.notices: list[str] = []
        self.built: list[int] = []
        build = model_run.build_workload

        def recording_build(name, context, batch_size: int, *, eager: bool = False):
            self.built.append(batch_size)
            self.events.append(f"build {batch_size}")
            return build(name, context, batch_size, eager=eager)

        monkeypatch.setattr(model_run, "build_workload", recording_build)
        monkeypatch.setattr(model_run, "release_device_memory", lambda: self.events.append("release"))
        monkeypatch.setattr(
            model_run.MemoryProfiler,
            "result",
            lambda profiler: MemoryProfile(True, peak_reserved_mb=peak_mb(self.built[-1])),
        )
        monkeypatch.setattr(model_run.console, "notice", self.notices.append)


def search_fits_up_to(monkeypatch: pytest.MonkeyPatch, limit: int) -> None:
    """The model run's batch search, as if run on a GPU where every size up to ``limit`` fits its short trials."""
    decision = decision_with_limit(limit)
    monkeypatch.setattr(model_run, "choose_batch", lambda name, context: decision)


def test_searched_batch_over_the_headroom_in_the_measured_run_is_stepped_down(
    cpu_context: ModelRunContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Fragmentation over the measured epochs: 10.5 MB per sample against a limit of 0.9 × 1,000 MB = 900 MB.
    # Batch 100 peaks at 1,050 MB -> floor(100 × 900 / 1,050) = 85, which peaks at 892.5 MB.
    flops_at_85 = count_step(build_workload("mlp", cpu_context, 85)).flops
    search_fits_up_to(monkeypatch, 100)
    gpu = FragmentingGpu(monkeypatch, lambda batch: 10.5 * batch)
    section = run_model("mlp", cpu_context).result.to_dict()
    assert section["status"] == "ok", section["error"]
    assert section["batch_search"]["batch_size"] == 100
    assert section["batch_size"] == 85
    assert section["gradient_accumulation_steps"] == 7  # ceil(512 / 85), recomputed for the new size
    assert section["flops_per_step"] == flops_at_85
    assert section["memory"]["peak_reserved_mb"] == 892.5
    assert section["memory"]["headroom_exceeded"] is False
    assert "warnings" not in section
    [abandoned] = section["batch_step_downs"]
    assert abandoned["batch_size"] == 100
    assert abandoned["peak_reserved_mb"] == 1050.0
    assert abandoned["headroom_limit_mb"] == pytest.approx(900.0)
    assert abandoned["mean_epoch_time_ms"] > 0 and abandoned["samples_per_second"] > 0
    assert section["batch_policy"].endswith(
        "; stepped down from 100 to 85 because the measured peak reserved memory 1,050 MB exceeded the headroom "
        "limit 900 MB"
    )
    # The abandoned workload's memory is released before the smaller one is built.
    assert gpu.events == ["release", "build 100", "release", "build 85"]
    assert len(gpu.notices) == 1 and "stepped down from 100 to 85" in gpu.notices[0]


def test_step_downs_stop_at_max_step_downs_and_the_last_overshoot_keeps_its_warning(
    cpu_context: ModelRunContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A fixed 200 MB makes the proportional guess optimistic: 100 -> 1,000 MB, 90 -> 920 MB, 88 -> 904 MB.
    search_fits_up_to(monkeypatch, 100)
    gpu = FragmentingGpu(monkeypatch, lambda batch: 8.0 * batch + 200.0)
    section = run_model("mlp", cpu_context).result.to_dict()
    assert section["status"] == "ok", section["error"]
    assert gpu.built == [100, 90, 88]  # floor(100 × 900 / 1,000), floor(90 × 900 / 920); batch.max_step_downs=2
    assert section["batch_size"] == 88
    assert [(s["batch_size"], s["peak_reserved_mb"]) for s in section["batch_step_downs"]] == [(100, 1000), (90, 920)]
    assert "from 100 to 90" in section["batch_policy"] and "from 90 to 88" in section["batch_policy"]
    assert section["memory"]["headroom_exceeded"] is True
    assert section["warnings"] == [
        "peak reserved memory during the measured epochs was 904 MB, above the headroom limit 900 MB "
        "(`batch.headroom` 0.9 × 1,000 MB usable): at this batch size the model may run out of memory on the "
        "target card"
    ]


def test_max_step_downs_zero_keeps_the_batch_with_a_warning(
    cpu_context: ModelRunContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    cpu_context.cfg.batch.max_step_downs = 0
    search_fits_up_to(monkeypatch, 100)
    gpu = FragmentingGpu(monkeypatch, lambda batch: 10.5 * batch)
    section = run_model("mlp", cpu_context).result.to_dict()
    assert section["status"] == "ok", section["error"]
    assert gpu.built == [100]
    assert section["batch_size"] == 100
    assert section["gradient_accumulation_steps"] == 6
    assert section["memory"]["headroom_exceeded"] is True
    assert len(section["warnings"]) == 1 and "1,050 MB" in section["warnings"][0]
    assert "batch_step_downs" not in section
    assert "stepped down" not in section["batch_policy"]


def test_searched_batch_at_min_size_is_kept_with_a_warning(
    cpu_context: ModelRunContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    search_fits_up_to(monkeypatch, 32)  # batch.min_size
    gpu = FragmentingGpu(monkeypatch, lambda batch: 30.0 * batch)
    section = run_model("mlp", cpu_context).result.to_dict()
    assert section["status"] == "ok", section["error"]
    assert gpu.built == [32]
    assert section["memory"]["headroom_exceeded"] is True
    assert len(section["warnings"]) == 1
    assert "batch_step_downs" not in section


@pytest.mark.parametrize(("fit_limit", "timed"), [(100, 100), (200, 128)])
def test_a_configured_batch_is_never_stepped_down_only_warned_about(
    cpu_context: ModelRunContext, monkeypatch: pytest.MonkeyPatch, fit_limit: int, timed: int
) -> None:
    # batch.policy=configured (the default; RL always): the recipe's 128, capped to 100 when only 100 fits. A
    # measured run over the headroom keeps that batch (changing it would time another training) with a warning.
    cpu_context.cfg.workloads.mlp.batch_size = 128

    def try_batch(size: int, steps: int) -> float:
        if size > fit_limit:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory (oracle)")
        return float(size)

    decision = choose_batch_size(try_batch, BatchConfig(min_size=32, max_size=4096), None, configured_size=128)
    monkeypatch.setattr(model_run, "choose_batch", lambda name, context: decision)
    gpu = FragmentingGpu(monkeypatch, lambda batch: 10.5 * batch)
    section = run_model("mlp", cpu_context).result.to_dict()
    assert section["status"] == "ok", section["error"]
    assert gpu.built == [timed]
    assert section["batch_size"] == timed
    assert section["gradient_accumulation_steps"] == 1
    assert section["batch_policy"].startswith(f"timed at batch size {timed}: the configured batch 128")
    assert "batch_step_downs" not in section
    assert len(section["warnings"]) == 1


def test_a_batch_search_where_nothing_fits_is_an_oom_result(
    cpu_context: ModelRunContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    def nothing_fits(size: int, steps: int) -> float:
        raise torch.cuda.OutOfMemoryError("CUDA out of memory (oracle)")

    decision = choose_batch_size(nothing_fits, BatchConfig(policy="max", min_size=32, max_size=64), None)
    monkeypatch.setattr(model_run, "choose_batch", lambda name, context: decision)
    result = run_model("mlp", cpu_context).result
    assert result.status == "oom" and result.error == decision.record.message
    assert result.batch_search == decision.record and result.batch_size is None


def test_the_measured_run_times_one_evaluation_and_one_checkpoint(cpu_context: ModelRunContext) -> None:
    result = run_model("mlp", cpu_context).result
    assert result.status == "ok", result.error
    assert result.updates_per_step == 1.0 and result.updates_per_env_step is None
    assert result.evaluation is not None and result.evaluation.ms_per_call > 0
    assert result.evaluation.samples_per_call == result.batch_size
    assert result.checkpoint is not None and result.checkpoint.ms_per_save > 0
    # The file holds the float32 parameters and AdamW's two moments of each, at least.
    assert result.checkpoint.size_mb * 2**20 > 3 * 4 * result.workload["parameters"]
    cpu_context.cfg.decision.plan.eval_every_steps = None
    cpu_context.cfg.decision.plan.checkpoint_every_steps = None
    off = run_model("mlp", cpu_context).result
    assert off.evaluation is None and off.checkpoint is None


def test_the_memory_split_counts_the_trained_networks_state_and_fits_the_searchs_trials(
    cpu_context: ModelRunContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The search's oracle peaks at exactly `size` MB (decision_with_limit): the line is 1 MB a sample, nothing fixed.
    search_fits_up_to(monkeypatch, 4096)
    result = run_model("mlp", cpu_context).result
    split = result.memory_split
    assert split is not None
    workload = build_workload("mlp", cpu_context, 32)
    parameters = workload.parameter_count()
    tensors = len(list(workload.modules()[0].parameters()))
    fp32_mb = 4 * parameters / 2**20
    assert split.parameters_mb == pytest.approx(fp32_mb) and split.gradients_mb == pytest.approx(fp32_mb)
    # AdamW: two fp32 moments per parameter, and a 0-d fp32 step counter per tensor (on the CPU, with them).
    assert split.optimizer_state_mb == pytest.approx(2 * fp32_mb + 4 * tensors / 2**20)
    assert split.activations_mb_per_sample == pytest.approx(1.0) and split.fixed_mb == pytest.approx(0.0, abs=1e-6)
    assert split.fit_sizes == [64, 128, 256, 512, 1024, 2048, 4096]
    assert split.batch_size == result.batch_size and split.headroom == cpu_context.cfg.batch.headroom
