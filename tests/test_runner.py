"""The coordinator on the CPU, with each model's run faked: the report is on disk after every model and typed end to
end, Ctrl-C leaves a partial report marked interrupted, and the MLflow record is read from the typed report."""

import json
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from gpubench.bench import runner as runner_module
from gpubench.bench.job import RunContext
from gpubench.bench.model_run import ModelRun, ModelRunContext
from gpubench.bench.runner import Runner
from gpubench.conf import CONF_DIR
from gpubench.config import register_configs, typed_config
from gpubench.output import tracking
from gpubench.results import ModelResult, RunReport

#: ``python -m gpubench experiment=quick tracking.enabled=false`` on the CPU, written by main at 1092cdc.
CPU_REPORT = Path(__file__).parent / "fixtures" / "report_main_1092cdc_cpu_quick.json"
MAIN_REPORT = RunReport.from_dict(json.loads(CPU_REPORT.read_text()))


@pytest.fixture
def cpu_runner(tmp_path: Path) -> Runner:
    """A Runner on the CPU for dqn and ppo over a small synthetic market, without burn-in."""
    register_configs()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(
            config_name="config",
            overrides=[
                f"output={tmp_path / 'report.json'}",
                f"data.cache_dir={tmp_path / 'cache'}",
                "data.days=3",
                "data.symbols=[SYNA,SYNB]",
                "hardware=cpu",
                "model.names=[dqn,ppo]",
                "hardware.burn_in_max_seconds=0",
            ],
        )
    return Runner(typed_config(cfg), RunContext(run_dir=tmp_path))


def on_disk(runner: Runner) -> RunReport:
    return RunReport.from_dict(json.loads(runner.writer.path.read_text()))


def test_each_model_is_on_disk_before_the_next_runs_and_the_run_completes(
    cpu_runner: Runner, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen_on_disk: list[list[str]] = []

    def fake_run_model(name: str, context: ModelRunContext) -> ModelRun:
        seen_on_disk.append(list(on_disk(cpu_runner).models))
        assert context.usable_vram_mb is None and context.device.type == "cpu"
        return ModelRun(MAIN_REPORT.models[name], None)

    monkeypatch.setattr(runner_module, "run_model", fake_run_model)
    completed = cpu_runner.run()
    assert seen_on_disk == [[], ["dqn"]]
    report = completed.report
    assert report.status == "complete"
    assert report.models == {"dqn": MAIN_REPORT.models["dqn"], "ppo": MAIN_REPORT.models["ppo"]}
    # The recommendation is computed from the models on disk: main's 3-epoch fixture models are too few to decide.
    assert report.recommendation is not None and report.recommendation.decision_basis == "too_few_epochs"
    assert report.hardware.measured_on == "cpu" and report.hardware.warmup_stats is not None
    assert report.data is not None and report.data.symbols == ["SYNA", "SYNB"]
    assert report.run.models == ["dqn", "ppo"]
    assert on_disk(cpu_runner) == report
    assert completed.memory_timelines == {}


def test_ctrl_c_during_a_model_leaves_a_partial_report_marked_interrupted(
    cpu_runner: Runner, monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupted_at_ppo(name: str, context: ModelRunContext) -> ModelRun:
        if name == "ppo":
            raise KeyboardInterrupt
        return ModelRun(MAIN_REPORT.models[name], None)

    monkeypatch.setattr(runner_module, "run_model", interrupted_at_ppo)
    with pytest.raises(KeyboardInterrupt):
        cpu_runner.run()
    report = on_disk(cpu_runner)
    assert report.status == "interrupted"
    # ppo was stopped before its measured epochs (tests/test_interrupts.py has the one stopped during them).
    assert list(report.models) == ["dqn", "ppo"] and report.models["ppo"].status == "interrupted"
    assert report.recommendation is not None and report.recommendation.decision != "LOCAL_GPU_VIABLE"


def test_the_tracking_record_takes_its_figures_from_the_typed_report() -> None:
    record = tracking.run_record(MAIN_REPORT)
    dqn: ModelResult = MAIN_REPORT.models["dqn"]
    assert record.run_name == "quick · CPU · smoke test" and record.params == {}
    assert record.tags["gpubench.models"] == "dqn,ppo,mamba2,tft"
    assert record.tags["gpubench.status"] == "complete"
    assert "gpubench.sweep" not in record.tags
    assert record.metrics["dqn/status_ok"] == 1.0
    assert record.metrics["dqn/mean_epoch_time_ms"] == dqn.mean_epoch_time_ms
    assert (record.metrics["dqn/ci_low_ms"], record.metrics["dqn/ci_high_ms"]) == dqn.confidence_interval_ms
    assert dqn.samples_per_second is not None
    assert record.metrics["dqn/samples_per_second"] == dqn.samples_per_second.mean
    assert record.series["dqn/epoch_time_ms"] == dqn.raw_epoch_times_ms
    swept = tracking.run_record(MAIN_REPORT, sweep=tracking.SweepJob(sweep_dir="/sweep", job_num=3))
    assert (swept.tags["gpubench.sweep"], swept.tags["gpubench.job_num"]) == ("/sweep", "3")
