"""The composed config: defaults, groups, environment variables, and errors that name the key."""

import pytest
from hydra import compose, initialize_config_dir

from gpubench.conf import CONF_DIR as CONF_DIR_PATH
from gpubench.config import BenchmarkConfig, register_configs, typed_config
from gpubench.decision.rule import MIN_DECISION_EPOCHS
from gpubench.errors import ConfigError
from gpubench.models import MODELS, SEED_MODELS
from gpubench.stats.intervals import MIN_EPOCHS

CONF_DIR = str(CONF_DIR_PATH)
register_configs()


def typed(*overrides: str) -> BenchmarkConfig:
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = compose(config_name="config", overrides=["output=/tmp/gpubench-test/report.json", *overrides])
    return typed_config(cfg)


def test_defaults_match_the_design_table():
    cfg = typed()
    assert cfg.model_names == list(SEED_MODELS) == ["dqn", "ppo", "mamba2", "tft"]
    assert (cfg.epochs, cfg.warmup_epochs) == (20, 2)
    assert cfg.hardware.name == "auto" and cfg.hardware.vram_limit_gb is None
    assert (cfg.batch.search, cfg.batch.min_size, cfg.batch.max_size) == (None, 32, 4096)
    assert (cfg.batch.headroom, cfg.batch.target_effective, cfg.batch.max_step_downs) == (0.9, 512, 2)
    assert (cfg.statistics.confidence_level, cfg.statistics.cv_threshold) == (0.95, 0.15)
    assert cfg.statistics.outlier_rule == "mad" and cfg.statistics.target_rel_halfwidth == 0.02
    assert (cfg.statistics.adaptive, cfg.statistics.max_epochs) == ("off", 50)
    assert (cfg.epoch.steps, cfg.epoch.min_seconds) == ("auto", 0.5)
    assert (cfg.execution.precision, cfg.execution.compile) == ("fp32", "false")
    assert (cfg.decision.local_max_hours, cfg.decision.cloud_min_hours) == (24, 48)
    assert cfg.decision.critical_models == ["dqn", "ppo"]
    assert cfg.data.source == "synthetic"
    assert cfg.tracking.enabled and cfg.tracking.uri == "sqlite:///mlruns/mlflow.db"
    assert cfg.tracking.experiment == "gpubench"
    assert cfg.stability.enabled


@pytest.mark.parametrize("model", ["dqn", "ppo", "mamba2", "tft", "mlp"])
def test_model_group_selects_one_model(model):
    assert typed(f"model={model}").model_names == [model]


@pytest.mark.parametrize(
    ("card", "vram_gb"),
    [
        ("rtx3050ti", 4),
        ("rtx3060", 12),
        ("t4", 16),
        ("l4", 24),
        ("a100_40gb", 40),
        ("a100_80gb", 80),
        ("h100", 80),
        ("h200", 141),
    ],
)
def test_catalog_cards_cap_vram_at_their_size(card, vram_gb):
    cfg = typed(f"hardware={card}")
    assert cfg.hardware.name == card
    assert cfg.hardware.vram_limit_gb == vram_gb == cfg.hardware.vram_gb
    assert cfg.hardware.peak_fp32_tflops > 0 and cfg.hardware.memory_bandwidth_gbps > 0


def test_environment_variables_set_defaults(monkeypatch):
    monkeypatch.setenv("GPU_BENCHMARK_EPOCHS", "7")
    monkeypatch.setenv("GPU_BENCHMARK_WARMUP_EPOCHS", "0")
    monkeypatch.setenv("GPU_BENCHMARK_CONFIDENCE_LEVEL", "0.9")
    monkeypatch.setenv("GPU_BENCHMARK_MAX_BATCH_SIZE", "1024")
    cfg = typed()
    assert (cfg.epochs, cfg.warmup_epochs, cfg.statistics.confidence_level, cfg.batch.max_size) == (7, 0, 0.9, 1024)
    # A command-line override still wins over the environment.
    assert typed("epochs=4").epochs == 4


def test_an_environment_variable_for_a_string_key_is_taken_verbatim(monkeypatch):
    # A glob is not YAML (``*`` starts an alias): string keys must not be decoded.
    monkeypatch.setenv("GPU_BENCHMARK_DATA_PATH", "*.dbn.zst")
    monkeypatch.setenv("GPU_BENCHMARK_BATCH_SEARCH", "false")
    cfg = typed("data=dbn")
    assert cfg.data.path == "*.dbn.zst" and cfg.batch.search is False


def test_an_unset_environment_variable_leaves_the_schema_default(monkeypatch):
    for name in ("GPU_BENCHMARK_EPOCHS", "GPU_BENCHMARK_MIN_BATCH_SIZE", "GPU_BENCHMARK_CACHE_DIR"):
        monkeypatch.delenv(name, raising=False)
    cfg = typed()
    schema = BenchmarkConfig()
    assert (cfg.epochs, cfg.batch.min_size, cfg.data.cache_dir) == (
        schema.epochs,
        schema.batch.min_size,
        schema.data.cache_dir,
    )


def test_each_model_default_comes_from_its_registry_entry():
    cfg = typed()
    plan = cfg.decision.plan
    for spec in MODELS:
        assert cfg.decision.memory_budget_mb.get(spec.name) == spec.memory_budget_mb
        assert plan.passes.get(spec.name) == spec.plan_passes and plan.env_steps.get(spec.name) == spec.plan_env_steps
        # A plan in samples is the user's to state (null until then), for every model.
        assert plan.samples[spec.name] is None
        assert isinstance(getattr(cfg.workloads, spec.name), spec.config)
    # The user's own model has no budget or plan gpubench could know.
    assert "custom" not in cfg.decision.memory_budget_mb
    assert "custom" not in plan.passes and "custom" not in plan.env_steps


def test_quick_experiment_is_small():
    cfg = typed("experiment=quick")
    # Ten epochs of 0.1 s: the fewest the decision interval and the decision take.
    assert cfg.epochs == 10 and cfg.warmup_epochs == 1 and cfg.epoch.min_seconds == 0.1
    assert cfg.epochs >= MIN_DECISION_EPOCHS
    assert cfg.workloads.tft.encoder_length == 32 and cfg.workloads.mamba2.seq_len == 64
    assert cfg.data.days == 5


def test_workload_keys_are_overridable():
    cfg = typed("workloads.mamba2.recompute_scan=false", "workloads.tft.hidden_size=64", "model.names=[mlp,tft]")
    assert cfg.workloads.mamba2.recompute_scan == "false" and cfg.workloads.tft.hidden_size == 64
    assert cfg.model_names == ["mlp", "tft"]


def test_compile_and_precision_accept_booleans_and_names():
    assert typed("execution.compile=true").execution.compile == "true"
    assert typed("execution.compile=reduce-overhead").execution.compile == "reduce-overhead"
    assert typed("execution.precision=bf16").execution.precision == "bf16"


@pytest.mark.parametrize(
    ("override", "key", "valid"),
    [
        ("epochs=0", "`epochs`", ">= 2"),
        ("epochs=-3", "`epochs`", ">= 2"),
        ("warmup_epochs=-1", "`warmup_epochs`", ">= 0"),
        ("statistics.confidence_level=1.5", "`statistics.confidence_level`", "strictly between 0 and 1"),
        ("statistics.confidence_level=0", "`statistics.confidence_level`", "strictly between 0 and 1"),
        ("statistics.outlier_rule=zscore", "`statistics.outlier_rule`", "mad, sigma, iqr, none"),
        ("execution.precision=fp8", "`execution.precision`", "fp32, bf16, fp16"),
        ("execution.compile=maybe", "`execution.compile`", "false, true, reduce-overhead"),
        ("batch.max_size=8", "`batch.max_size`", ">= batch.min_size"),
        ("batch.headroom=1.5", "`batch.headroom`", "in (0, 1]"),
        ("batch.verify_steps=2", "`batch.verify_steps`", ">= 3"),
        ("batch.max_step_downs=-1", "`batch.max_step_downs`", ">= 0"),
        ("epoch.steps=-5", "`epoch.steps`", "`auto` or a positive integer"),
        ("data=dbn", "`data.path`", "folder or glob"),
        ("workloads.tft.num_heads=3", "`workloads.tft.hidden_size`", "multiple of workloads.tft.num_heads"),
        ("decision.critical_models=[dqn,gpt]", "`decision.critical_models`", "one of mlp, dqn, ppo, mamba2, tft"),
        (
            "decision.what_if_variants=[fp8]",
            "`decision.what_if_variants`",
            "bf16, tf32, compile, reduce-overhead, knee",
        ),
        ("execution.matmul_precision=low", "`execution.matmul_precision`", "one of highest, high, medium"),
        ("decision.what_if_epochs=1", "`decision.what_if_epochs`", "an integer >= 2"),
    ],
)
def test_bad_values_name_the_key_and_what_is_valid(override, key, valid):
    with pytest.raises(ConfigError) as excinfo:
        typed(override)
    message = str(excinfo.value)
    assert key in message
    assert valid in message


def test_adaptive_measuring_needs_room_for_a_first_stage():
    with pytest.raises(ConfigError) as excinfo:
        typed("statistics=adaptive", f"statistics.max_epochs={MIN_EPOCHS - 1}", "epochs=2")
    assert f"`statistics.max_epochs` = {MIN_EPOCHS - 1}" in str(excinfo.value)
    assert f">= {MIN_EPOCHS} when statistics.adaptive=precision" in str(excinfo.value)
    enough = typed("statistics=adaptive", f"statistics.max_epochs={MIN_EPOCHS}", "epochs=2")
    assert enough.statistics.max_epochs == MIN_EPOCHS


def test_bad_environment_value_names_the_key(monkeypatch):
    monkeypatch.setenv("GPU_BENCHMARK_EPOCHS", "ten")
    with pytest.raises(ConfigError, match="epochs"):
        typed()


@pytest.mark.parametrize(
    ("overrides", "symbols"),
    [
        (["experiment=quick"], ["SYNA", "SYNB"]),
        # The preset's symbols are the synthetic market's: with the user's files, theirs (all, or those given).
        (["experiment=quick", "data=dbn", "data.path=/data/xnas"], None),
        (["experiment=quick", "data=parquet", "data.path=/data/bars"], None),
        (["experiment=quick", "data=dbn", "data.path=/data/xnas", "data.symbols=[AAPL]"], ["AAPL"]),
        (["experiment=quick", "data.symbols=[SYNC]"], ["SYNC"]),
    ],
)
def test_the_quick_presets_symbols_apply_to_the_synthetic_market_only(overrides, symbols):
    assert typed(*overrides).data.symbols == symbols
