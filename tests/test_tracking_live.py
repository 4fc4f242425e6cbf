"""The job's live MLflow run (issue 14, item 9), in process on the CPU with each model's run faked: the run exists
with status RUNNING while the models run, each model's epochs are in the store before the next model starts, and
the run ends FINISHED, FAILED (a model failed) or KILLED (Ctrl-C) with the report, the decision tag and the
recommendation metrics. A real SQLite store in a temp folder, one for the module (creating one costs a second or
more): each test's job logs to an experiment of its own."""

import hashlib
import json
import time
from dataclasses import replace
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from gpubench.bench import runner as runner_module
from gpubench.bench.job import RunContext
from gpubench.bench.model_run import ModelRun, ModelRunContext
from gpubench.conf import CONF_DIR
from gpubench.config import BenchmarkConfig, register_configs, typed_config
from gpubench.output.config import TrackingConfig
from gpubench.output.tracking import LiveRun, RunRecord
from gpubench.results import RunReport

# Skipped, not a collection error, where mlflow is not installed (a GPU machine running `pytest -m gpu` collects
# this module too).
MlflowClient = pytest.importorskip("mlflow.tracking", reason="the live MLflow run needs mlflow").MlflowClient

CPU_REPORT = Path(__file__).parent / "fixtures" / "report_main_1092cdc_cpu_quick.json"
MAIN_REPORT = RunReport.from_dict(json.loads(CPU_REPORT.read_text()))


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    """The module's SQLite store (created by the first job that logs to it)."""
    return tmp_path_factory.mktemp("store") / "mlflow.db"


@pytest.fixture
def experiment(request) -> str:
    """The test's own MLflow experiment in the module's store: its job's run is the only one there."""
    return request.node.name


def job_config(tmp_path: Path, store: Path, experiment: str, *overrides: str) -> BenchmarkConfig:
    """dqn then ppo on the CPU over a small synthetic market, tracked in ``experiment`` of the SQLite store
    ``store``; the report and the artifacts under ``tmp_path``."""
    register_configs()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(
            config_name="config",
            overrides=[
                f"output={tmp_path / 'run' / 'report.json'}",
                f"data.cache_dir={tmp_path / 'cache'}",
                "data.days=3",
                "data.symbols=[SYNA,SYNB]",
                "hardware=cpu",
                "model.names=[dqn,ppo]",
                "hardware.burn_in_max_seconds=0",
                "tracking.enabled=true",
                f"tracking.uri=sqlite:///{store}",
                f"tracking.experiment={experiment}",
                f"tracking.artifact_location={tmp_path / 'artifacts'}",
                *overrides,
            ],
        )
    return typed_config(cfg)


def only_run(store: Path, experiment: str):
    client = MlflowClient(tracking_uri=f"sqlite:///{store}")
    (run,) = client.search_runs([client.get_experiment_by_name(experiment).experiment_id])
    return client, run


def fake_models(store: Path, experiment: str, monkeypatch: pytest.MonkeyPatch, *, on_second=None) -> list[dict]:
    """Replace run_model: each model streams its fixture epochs through the context's hook, then returns its fixture
    section; before each model, what the store holds is recorded (the run's status, the epochs streamed so far)."""
    seen: list[dict] = []

    def fake_run_model(name: str, context: ModelRunContext) -> ModelRun:
        client, run = only_run(store, experiment)
        history = client.get_metric_history(run.info.run_id, "dqn/epoch_time_ms")
        seen.append({"model": name, "status": run.info.status, "dqn_epochs_in_store": len(history)})
        if name == "ppo" and on_second is not None:
            return on_second(context)
        result = MAIN_REPORT.models[name]
        for number, (time_ms, loss) in enumerate(
            zip(result.raw_epoch_times_ms, result.epoch_losses, strict=True), start=1
        ):
            context.epoch_observer(name, "measured", number, time_ms / 1e3, loss)
        return ModelRun(result, None)

    monkeypatch.setattr(runner_module, "run_model", fake_run_model)
    return seen


def test_the_run_is_created_at_the_start_streams_epochs_and_ends_finished(tmp_path, store, experiment, monkeypatch):
    seen = fake_models(store, experiment, monkeypatch)
    cfg = job_config(tmp_path, store, experiment)
    assert runner_module.run(cfg, RunContext(run_dir=tmp_path / "run")) == 0
    # The run existed, RUNNING, before the first model; dqn's epochs were in the store before ppo started.
    dqn_epochs = len(MAIN_REPORT.models["dqn"].raw_epoch_times_ms)
    assert seen == [
        {"model": "dqn", "status": "RUNNING", "dqn_epochs_in_store": 0},
        {"model": "ppo", "status": "RUNNING", "dqn_epochs_in_store": dqn_epochs},
    ]
    client, run = only_run(store, experiment)
    assert run.info.status == "FINISHED"
    history = sorted(client.get_metric_history(run.info.run_id, "ppo/epoch_time_ms"), key=lambda m: m.step)
    assert [m.value for m in history] == pytest.approx(MAIN_REPORT.models["ppo"].raw_epoch_times_ms)
    # Each epoch once: the series streamed are not logged again at the end.
    assert len(client.get_metric_history(run.info.run_id, "dqn/epoch_time_ms")) == dqn_epochs
    report = json.loads((tmp_path / "run" / "report.json").read_text())
    assert report["run"]["mlflow_run_id"] == run.info.run_id
    recommendation = report["recommendation"]
    assert run.data.tags["gpubench.decision"] == (recommendation["decision"] or "none")
    assert run.data.metrics["recommendation/estimated_hours"] == pytest.approx(
        recommendation["estimated_full_training_hours"]
    )
    assert run.data.metrics["recommendation/estimated_hours_upper"] == pytest.approx(
        recommendation["estimated_full_training_hours_upper"]
    )
    # A figure the report does not have (None) is no metric.
    cost = recommendation["cost_analysis"]["cloud_cost_usd_per_training"]
    assert run.data.metrics.get("recommendation/cloud_cost_usd_per_training") == pytest.approx(cost)
    assert {"report.json", "config_resolved.yaml"} <= {a.path for a in client.list_artifacts(run.info.run_id)}
    # Named with its verdict once known; the reasoning is its description.
    # The fixture's 2 epochs per model are too few to decide on.
    assert recommendation["decision"] is None and recommendation["decision_basis"] == "too_few_epochs"
    assert run.info.run_name == "dqn+ppo · CPU · no verdict"
    assert run.data.tags["mlflow.note.content"].startswith(recommendation["reasoning"] + "\n\n- ")
    # Paths are tags, not params; the preset is a param (none here).
    assert run.data.params["experiment"] == "none" and run.data.params["data.days"] == "3"
    assert not {"output", "data.cache_dir", "tracking.uri", "tracking.artifact_location"} & set(run.data.params)
    assert run.data.tags["output"] == str(tmp_path / "run" / "report.json")
    assert run.data.tags["data.cache_dir"] == str(tmp_path / "cache")
    # The synthetic market is the run's training dataset, by the digest of its seed and shape.
    (dataset_input,) = run.inputs.dataset_inputs
    shape = {"days": 3, "generator": "gpubench-synthetic-market-v1", "seed": 7, "start_date": "2024-01-02"}
    digest = hashlib.blake2b(
        json.dumps({**shape, "symbols": ["SYNA", "SYNB"]}, sort_keys=True).encode(), digest_size=16
    )
    assert dataset_input.dataset.digest == digest.hexdigest()
    assert [(tag.key, tag.value) for tag in dataset_input.tags] == [("mlflow.data.context", "training")]
    assert json.loads(dataset_input.dataset.source) == {"uri": report["data"]["path"]}
    assert json.loads(dataset_input.dataset.profile)["bars"] == report["data"]["bars"]
    # System metrics of the CPU and memory, in the same run; the experiment is one of model training.
    assert {"system/cpu_utilization_percentage", "system/system_memory_usage_megabytes"} <= set(run.data.metrics)
    assert not [key for key in run.data.metrics if key.startswith("system/gpu")]
    assert client.get_experiment(run.info.experiment_id).tags["mlflow.experimentKind"] == "custom_model_development"


def test_a_failed_model_ends_the_run_failed(tmp_path, store, experiment, monkeypatch):
    def failing(context: ModelRunContext) -> ModelRun:
        return ModelRun(replace(MAIN_REPORT.models["ppo"], status="failed", error="ValueError: x"), None)

    fake_models(store, experiment, monkeypatch, on_second=failing)
    assert runner_module.run(job_config(tmp_path, store, experiment), RunContext(run_dir=tmp_path / "run")) == 1
    _, run = only_run(store, experiment)
    assert run.info.status == "FAILED" and run.data.tags["gpubench.status"] == "complete"


def test_ctrl_c_ends_the_run_killed_with_the_partial_report(tmp_path, store, experiment, monkeypatch):
    def interrupted(context: ModelRunContext) -> ModelRun:
        context.epoch_observer("ppo", "measured", 1, 0.5, 1.0)
        raise KeyboardInterrupt

    fake_models(store, experiment, monkeypatch, on_second=interrupted)
    with pytest.raises(KeyboardInterrupt):
        runner_module.run(job_config(tmp_path, store, experiment), RunContext(run_dir=tmp_path / "run"))
    client, run = only_run(store, experiment)
    assert run.info.status == "KILLED"
    assert run.data.tags["gpubench.status"] == "interrupted"
    assert "dqn/mean_epoch_time_ms" in run.data.metrics
    # The epoch streamed before the interrupt is kept.
    assert [m.value for m in client.get_metric_history(run.info.run_id, "ppo/epoch_time_ms")] == [500.0]
    (tmp_path / "down").mkdir()
    local = Path(client.download_artifacts(run.info.run_id, "report.json", str(tmp_path / "down")))
    assert json.loads(local.read_text())["status"] == "interrupted"


def test_epochs_are_sent_in_batches_per_model_or_interval_never_per_value(tmp_path, store, experiment, monkeypatch):
    now = [0.0]
    config = TrackingConfig(uri=f"sqlite:///{store}", artifact_location=str(tmp_path / "a"), experiment=experiment)
    live = LiveRun.start(config, run_name="x", params={}, tags={}, flush_interval_s=10.0, clock=lambda: now[0])
    batches: list[int] = []
    send = live._send_metrics
    monkeypatch.setattr(live, "_send_metrics", lambda entries: (batches.append(len(entries)), send(entries)))
    for number in range(1, 6):  # 5 epochs in 4 s: nothing sent yet
        now[0] += 0.8
        live.on_epoch("mlp", "measured", number, 0.8, 0.1)
    live.on_epoch("mlp", "warmup", 1, 0.8, 0.1)  # warmup epochs are not streamed
    assert batches == []
    now[0] += 7.0  # 11 s after the last batch: the sixth epoch goes with the five before it
    live.on_epoch("mlp", "measured", 6, 0.8, None)
    assert batches == [11]  # 6 times, 5 losses (the sixth is None)
    live.on_epoch("tft", "measured", 1, 2.0, 0.5)
    live.on_epoch("dqn", "measured", 1, 1.0, 0.5)  # a new model sends the previous model's epochs
    assert batches == [11, 2]
    outcome = live.finish(RunRecord(run_name="x"), "FINISHED")
    assert batches == [11, 2, 2] and outcome.warning is None
    client = MlflowClient(tracking_uri=config.uri)
    assert [m.step for m in client.get_metric_history(outcome.run_id, "mlp/epoch_time_ms")] == list(range(6))


def test_system_metrics_are_sampled_every_interval_and_once_more_at_the_end(tmp_path, store, experiment):
    config = TrackingConfig(
        uri=f"sqlite:///{store}",
        artifact_location=str(tmp_path / "a"),
        experiment=experiment,
        system_metrics_interval_s=0.25,
    )
    live = LiveRun.start(config, run_name="x", params={}, tags={})
    live.watch_system([])  # the job runs on the CPU: no GPU is sampled
    # This thread keeps a CPU busy: every point, the first one too, reads the CPU use since the previous one.
    deadline = time.monotonic() + 1.2
    while time.monotonic() < deadline:
        pass
    assert live.finish(RunRecord(run_name="x"), "FINISHED").warning is None
    client = MlflowClient(tracking_uri=config.uri)
    history = client.get_metric_history(live.run_id, "system/cpu_utilization_percentage")
    steps = sorted(m.step for m in history)
    # About 4 points in 1.2 s, the last taken at the end; at least 2 on a busy machine.
    assert 2 <= len(steps) <= 6 and steps == list(range(len(steps)))
    assert all(0.0 < m.value <= 100.0 for m in history), [m.value for m in history]
    memory = client.get_metric_history(live.run_id, "system/system_memory_usage_megabytes")
    assert len(memory) == len(steps) and all(m.value > 0 for m in memory)
    assert not [key for key in client.get_run(live.run_id).data.metrics if not key.startswith("system/")]


def test_system_metrics_off_logs_none(tmp_path, store, experiment):
    config = TrackingConfig(
        uri=f"sqlite:///{store}", artifact_location=str(tmp_path / "a"), experiment=experiment, system_metrics=False
    )
    live = LiveRun.start(config, run_name="x", params={}, tags={})
    live.watch_system([])
    live.finish(RunRecord(run_name="x", metrics={"m": 1.0}), "FINISHED")
    assert set(MlflowClient(tracking_uri=config.uri).get_run(live.run_id).data.metrics) == {"m"}
