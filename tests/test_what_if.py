"""Measured what-ifs: which variants a model gets, the short measurement's config, the run on the CPU (the model
measured again under each variant, with statistics), the estimates beside the main answer, and the CLI end to end
with what-ifs forced on, and ``execution.matmul_precision`` reported."""

import dataclasses
import json

import pytest
import torch
from conftest import cpu_model_context, tiny_mlp_config
from report_factory import batch_search, cpu_hardware, model_section, noisy_epochs_ms, report
from test_cli import FAST, gpubench, only_report

from gpubench.bench.model_run import run_model
from gpubench.bench.what_if import matmul_precision, run_what_ifs, variants, what_if_config, what_if_enabled
from gpubench.decision.config import DecisionConfig
from gpubench.decision.recommendation import build_recommendation
from gpubench.hardware.catalog import load_catalog
from gpubench.results import RunReport, WhatIf
from gpubench.stats.config import ADAPTIVE_OFF

CATALOG = load_catalog()


def _main_with_knee(knee: int | None, batch: int = 256):
    search = batch_search(batch, largest_fitting_size=1024, knee_size=knee, peak_limit_mb=3000.0)
    return model_section(
        noisy_epochs_ms(1000.0), steps_per_epoch=10, samples_per_step=batch, sample_unit="window", batch_search=search
    )


def test_variants_skip_what_the_main_run_already_is(tmp_path):
    main = _main_with_knee(knee=128)
    # By default only the variants that cost seconds; the compile modes are asked for.
    assert [v.name for v in variants(main, tiny_mlp_config(tmp_path))] == ["bf16", "tf32", "knee"]
    every = tiny_mlp_config(tmp_path, "decision.what_if_variants=[bf16,tf32,compile,reduce-overhead,knee]")
    names = [v.name for v in variants(main, every)]
    assert names == ["bf16", "tf32", "compile", "reduce-overhead", "knee"]
    knee = next(v for v in variants(main, every) if v.name == "knee")
    assert knee.batch_size == 128 and knee.execution.precision == "fp32"
    bf16_run = tiny_mlp_config(
        tmp_path,
        "execution.precision=bf16",
        "execution.compile=reduce-overhead",
        "decision.what_if_variants=[bf16,tf32,compile,reduce-overhead,knee]",
    )
    # bf16 already; tf32 only matters for fp32 matmuls; the knee equal to the batch measures nothing new.
    assert [v.name for v in variants(_main_with_knee(knee=256), bf16_run)] == ["compile"]
    assert [v.name for v in variants(main, tiny_mlp_config(tmp_path, "decision.what_if_variants=[tf32]"))] == ["tf32"]
    tf32 = variants(main, tiny_mlp_config(tmp_path, "decision.what_if_variants=[tf32]"))[0]
    assert tf32.execution.matmul_precision == "high"


def test_a_what_if_is_a_short_fixed_measurement_at_the_variants_batch(tmp_path):
    cfg = tiny_mlp_config(
        tmp_path, "decision.what_if_epochs=4", "decision.what_if_epoch_seconds=0.2", "statistics=adaptive"
    )
    knee = next(v for v in variants(_main_with_knee(knee=128), cfg) if v.name == "knee")
    short = what_if_config(cfg, "mlp", knee)
    assert (short.epochs, short.warmup_epochs, short.epoch.min_seconds) == (4, 1, 0.2)
    assert short.statistics.adaptive == ADAPTIVE_OFF
    assert short.batch.search is False and short.batch.max_step_downs == 0
    assert short.workloads.mlp.batch_size == 128
    assert cfg.workloads.mlp.batch_size != 128  # the job's own config is untouched


def test_what_if_defaults_to_the_gpu_only(tmp_path):
    cfg = tiny_mlp_config(tmp_path)
    assert what_if_enabled(cfg, torch.device("cpu")) is False
    assert what_if_enabled(cfg, torch.device("cuda")) is True
    assert what_if_enabled(tiny_mlp_config(tmp_path, "decision.what_if=true"), torch.device("cpu")) is True


def test_the_matmul_precision_is_restored_after_a_variant():
    before = torch.get_float32_matmul_precision()
    with matmul_precision("medium"):
        assert torch.get_float32_matmul_precision() == "medium"
    assert torch.get_float32_matmul_precision() == before


def test_what_ifs_measure_the_model_again_under_each_variant(tmp_path, learnable_features):
    cfg = tiny_mlp_config(tmp_path, "decision.what_if_variants=[bf16,tf32]", "decision.what_if_epochs=3")
    context = cpu_model_context(cfg, learnable_features)
    main = run_model("mlp", context).result
    records = run_what_ifs("mlp", context, main)
    assert [(r.variant, r.precision, r.matmul_precision) for r in records] == [
        ("bf16", "bf16", "highest"),
        ("tf32", "fp32", "high"),
    ]
    for record in records:
        assert record.result.status == "ok", record.result.error
        assert len(record.result.raw_epoch_times_ms) == 3
        assert record.result.statistics is not None and record.result.statistics.n == 3
        assert record.result.batch_size == main.batch_size
        assert record.result.execution.precision == record.precision
        assert record.result.execution.matmul_precision == record.matmul_precision
    assert torch.get_float32_matmul_precision() == "highest"


def test_the_recommendation_quotes_the_measured_what_ifs(tmp_path):
    # The main run: 10 steps of 100 ms per epoch; the bf16 what-if measured 10 steps of 50 ms per epoch.
    main = model_section(noisy_epochs_ms(1000.0), steps_per_epoch=10, samples_per_step=256, sample_unit="window")
    faster = model_section(
        noisy_epochs_ms(500.0, seed=3), steps_per_epoch=10, samples_per_step=256, sample_unit="window"
    )
    what_if = WhatIf(
        variant="bf16",
        description="bf16 autocast",
        precision="bf16",
        compile="false",
        matmul_precision="highest",
        batch_size=256,
        epochs=10,
        epoch_min_seconds=0.1,
        result=faster,
    )
    with_what_ifs = dataclasses.replace(report({"tft": main}, hardware=cpu_hardware()), what_ifs={"tft": [what_if]})
    recommendation = build_recommendation(with_what_ifs, DecisionConfig(critical_models=[]), CATALOG)
    (row,) = recommendation.what_ifs
    assert row.step_ms == pytest.approx(50.0)
    assert row.main_step_ms == pytest.approx(100.0)
    assert row.speedup == pytest.approx(2.0)
    main_hours = recommendation.per_model["tft"].estimated_hours
    assert row.main_hours == pytest.approx(main_hours)
    # Half the epoch time over the same planned epochs, the same one-off costs (calibration and warmup).
    one_off_h = (2.0 + 1.5 + 1.1) / 3600
    assert row.hours == pytest.approx((main_hours - one_off_h) / 2 + one_off_h)
    assert row.hours_lower < row.hours < row.hours_upper
    text = "\n".join(recommendation.recommended_actions)
    assert "tft, measured alternatives: bf16 autocast: step 50 ms vs 100 ms (2.00x)" in text
    assert "python -m gpubench execution.precision=bf16" in text
    # The report with its what-ifs reads back to the same record.
    full = dataclasses.replace(with_what_ifs, recommendation=recommendation)
    assert RunReport.from_dict(json.loads(json.dumps(full.to_dict()))) == full


@pytest.mark.slow
def test_cli_with_what_ifs_forced_on_the_cpu(tmp_path):
    cache = tmp_path / "cache"
    completed = gpubench(
        tmp_path,
        cache,
        "model=mlp",
        "epochs=2",
        "warmup_epochs=0",
        "tracking.enabled=false",
        "execution.matmul_precision=high",
        "decision.what_if=true",
        "decision.what_if_variants=[bf16,knee]",
        "decision.what_if_epochs=2",
        *FAST,
    )
    assert completed.returncode == 0, completed.stderr
    written = only_report(tmp_path / "outputs")
    assert written["run"]["matmul_precision"] == "high"
    assert written["models"]["mlp"]["execution"]["matmul_precision"] == "high"
    assert written["models"]["mlp"]["launches_per_step"] > 0
    # No batch search on the CPU, so no knee: only the bf16 variant ran.
    (record,) = written["what_ifs"]["mlp"]
    assert (record["variant"], record["precision"], record["epochs"]) == ("bf16", "bf16", 2)
    assert record["result"]["status"] == "ok"
    assert len(record["result"]["raw_epoch_times_ms"]) == 2
    (estimate,) = written["recommendation"]["what_ifs"]
    assert estimate["model"] == "mlp" and estimate["hours"] > 0
    assert any(
        "mlp, measured alternatives: bf16 autocast" in a for a in written["recommendation"]["recommended_actions"]
    )
    RunReport.from_dict(written)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["decision.what_if_variants=[fp8]"], "`decision.what_if_variants`"),
        # These two messages are pinned in process by tests/test_config.py (as is the first); the command line's exit
        # 2 for a bad what-if key by the first case: their own runs are in the slow pass.
        pytest.param(["execution.matmul_precision=low"], "`execution.matmul_precision`", marks=pytest.mark.slow),
        pytest.param(["decision.what_if_epochs=1"], "`decision.what_if_epochs`", marks=pytest.mark.slow),
    ],
)
def test_bad_what_if_and_matmul_keys_exit_2_naming_the_key(tmp_path, args, expected):
    completed = gpubench(tmp_path, tmp_path / "cache", "model=mlp", "tracking.enabled=false", *FAST, *args)
    assert completed.returncode == 2
    assert expected in completed.stderr
    assert "Traceback" not in completed.stderr


@pytest.mark.parametrize("rl_model", ["dqn", "ppo"])
def test_an_rl_model_gets_no_knee_what_if(tmp_path, learnable_features, rl_model):
    # On the H200 the knee what-if of ppo (whose config has no batch_size) ended the default run with a TypeError;
    # an RL batch is the algorithm's own, so the knee is not offered.
    cfg = tiny_mlp_config(tmp_path, f"model={rl_model}", "decision.what_if_variants=[knee]")
    context = cpu_model_context(cfg, learnable_features)
    main = _main_with_knee(knee=128)
    assert [v.name for v in variants(main, cfg)] == ["knee"]
    assert run_what_ifs(rl_model, context, main) == []


def test_ppo_whose_config_has_no_batch_size_is_measured_in_a_variant(tmp_path, learnable_features):
    # On the H200 every what-if of ppo ended the default run: the variant's config set a batch_size its config lacks.
    cfg = tiny_mlp_config(tmp_path, "model=ppo", "decision.what_if_variants=[tf32]", "decision.what_if_epochs=2")
    variant_cfg = what_if_config(cfg, "ppo", variants(_main_with_knee(knee=None), cfg)[0])
    assert variant_cfg.workloads.ppo == cfg.workloads.ppo
    assert variant_cfg.execution.matmul_precision == "high"
