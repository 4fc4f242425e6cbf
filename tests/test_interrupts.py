"""Interrupts keep what was measured: Ctrl-C, SIGTERM and SIGHUP all end a run with a valid report marked
``interrupted`` that holds the model in progress (its completed epochs, statistics from two on), a partial
recommendation, the report's path printed, and exit code 128 + the signal's number. Unit tests raise the
interrupt from a fake observer; the slow ones send real signals to ``python -m gpubench``."""

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpubench import signals
from gpubench.bench import model_run
from gpubench.bench import runner as runner_module
from gpubench.bench.model_run import ModelInterrupted, ModelRun, ModelRunContext, run_model
from gpubench.bench.runner import Runner
from gpubench.measure.epochs import INTERRUPTED, MeasurementInterrupted
from gpubench.results import RunReport
from tests.test_measurement import FakeClockWorkload, measure
from tests.test_model_run import cpu_context  # noqa: F401  (a fixture)
from tests.test_runner import MAIN_REPORT, cpu_runner, on_disk  # noqa: F401  (cpu_runner is a fixture)


class InterruptAtEpoch:
    """An epoch observer that raises KeyboardInterrupt (as Ctrl-C would) when measured epoch ``epoch`` starts,
    after ``warmup_epochs`` warmup epochs."""

    def __init__(self, epoch: int, warmup_epochs: int) -> None:
        self.interrupt_at = warmup_epochs + epoch
        self.started = 0

    def start_epoch(self) -> None:
        self.started += 1
        if self.started == self.interrupt_at:
            raise KeyboardInterrupt

    def end_epoch(self, phase: str, epoch: int) -> None:
        return None

    def stop_reason(self) -> None:
        return None


def test_an_interrupt_carries_the_epochs_completed_before_it():
    workload = FakeClockWorkload(lambda i: 2.0**-7)
    with pytest.raises(MeasurementInterrupted) as raised:
        measure(workload, epochs=10, warmup=2, observers=[InterruptAtEpoch(5, warmup_epochs=2)])
    partial = raised.value.measurement
    # Epochs 1-4 completed; the fifth was starting when the interrupt came.
    assert partial.stop_reason == INTERRUPTED
    assert partial.epoch_times_ms == pytest.approx([1000.0] * 4)
    assert len(partial.warmup_epoch_times_ms) == 2 and len(partial.health) == 4
    assert isinstance(raised.value, KeyboardInterrupt)


def test_an_interrupted_model_keeps_its_measured_epochs_and_their_statistics(
    cpu_context: ModelRunContext,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    context = dataclasses.replace(cpu_context, usable_vram_mb=None, cfg=dataclasses.replace(cpu_context.cfg, epochs=10))
    real_measure = model_run.measure_workload

    def measure_until_the_fourth_epoch(workload, **kwargs):
        observer = InterruptAtEpoch(4, warmup_epochs=kwargs["warmup_epochs"])
        return real_measure(workload, **{**kwargs, "observers": [*kwargs["observers"], observer]})

    monkeypatch.setattr(model_run, "measure_workload", measure_until_the_fourth_epoch)
    with pytest.raises(ModelInterrupted) as raised:
        run_model("mlp", context)
    result = raised.value.run.result
    assert result.status == "interrupted"
    assert result.error is not None and "after 3 measured epochs" in result.error
    assert len(result.raw_epoch_times_ms) == 3
    assert result.statistics is not None and result.statistics.n == 3
    assert result.mean_epoch_time_ms == pytest.approx(sum(result.raw_epoch_times_ms) / 3)


def test_the_runner_writes_the_interrupted_model_and_a_partial_recommendation(
    cpu_runner: Runner,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    partial_ppo = dataclasses.replace(
        MAIN_REPORT.models["ppo"], status="interrupted", error="interrupted after 3 measured epochs"
    )

    def interrupted_at_ppo(name: str, context: ModelRunContext) -> ModelRun:
        if name == "ppo":
            raise ModelInterrupted(ModelRun(partial_ppo, None))
        return ModelRun(MAIN_REPORT.models[name], None)

    monkeypatch.setattr(runner_module, "run_model", interrupted_at_ppo)
    with pytest.raises(KeyboardInterrupt):
        cpu_runner.run()
    report = on_disk(cpu_runner)
    assert report.status == "interrupted"
    assert report.models == {"dqn": MAIN_REPORT.models["dqn"], "ppo": partial_ppo}
    # The rule never decides from a critical model it lacks: ppo has no estimate, so no LOCAL answer.
    recommendation = report.recommendation
    assert recommendation is not None and recommendation.decision != "LOCAL_GPU_VIABLE"
    assert "ppo" in {missing.model for missing in recommendation.missing_critical_models}
    assert f"Report: {cpu_runner.writer.path}" in capsys.readouterr().out


def test_an_interrupt_before_the_measured_epochs_still_names_the_model(
    cpu_runner: Runner,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def interrupted_in_ppos_search(name: str, context: ModelRunContext) -> ModelRun:
        if name == "ppo":
            raise KeyboardInterrupt
        return ModelRun(MAIN_REPORT.models[name], None)

    monkeypatch.setattr(runner_module, "run_model", interrupted_in_ppos_search)
    with pytest.raises(KeyboardInterrupt):
        cpu_runner.run()
    report = on_disk(cpu_runner)
    assert report.models["ppo"].status == "interrupted" and report.models["ppo"].raw_epoch_times_ms == []
    assert "before its measured epochs" in (report.models["ppo"].error or "")


@pytest.mark.parametrize(("sent", "expected"), [(signal.SIGTERM, 143), (signal.SIGHUP, 129), (signal.SIGINT, 130)])
def test_handled_signals_raise_keyboard_interrupt_and_give_128_plus_the_signal(sent, expected, monkeypatch):
    monkeypatch.setattr(signals, "_received", [])
    previous = {handled: signal.getsignal(handled) for handled in signals.HANDLED_SIGNALS}
    try:
        signals.install()
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), sent)
            time.sleep(5)  # the handler runs between bytecodes; the sleep is interrupted at once
        assert signals.received_signal() == sent
        assert signals.interrupt_exit_code() == expected
    finally:
        for handled, handler in previous.items():
            signal.signal(handled, handler)


# --------------------------------------------------------------------------------------- real signals, real runs

FAST = ["hardware=cpu", "data.days=3", "data.symbols=[SYNA,SYNB]", "hardware.burn_in_max_seconds=0"]


def start(cwd: Path, cache: Path, *args: str) -> subprocess.Popen:
    environment = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    environment.update({"OMP_NUM_THREADS": "1", "GPU_BENCHMARK_CACHE_DIR": str(cache)})
    return subprocess.Popen(
        [sys.executable, "-m", "gpubench", *args],
        cwd=cwd,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for_line(process: subprocess.Popen, stderr_path: Path, line: str) -> None:
    """Wait until the run has printed ``line`` (its stderr goes to ``stderr_path``)."""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and process.poll() is None:
        if stderr_path.exists() and line in stderr_path.read_text():
            return
        time.sleep(0.2)
    raise AssertionError(f"the run never printed {line!r}: {stderr_path.read_text()[-2000:]}")


def run_and_signal(
    tmp_path: Path, sent: signal.Signals, *args: str, after: str = "tft measured epoch 4/"
) -> tuple[int, str, str]:
    """Run gpubench with ``args``, send ``sent`` once it prints ``after`` (by default its fourth measured tft
    epoch); its (exit code, stdout, stderr)."""
    stderr_path = tmp_path / "stderr.txt"
    environment = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    environment.update({"OMP_NUM_THREADS": "1", "GPU_BENCHMARK_CACHE_DIR": str(tmp_path / "cache")})
    with stderr_path.open("w") as stderr_file:
        process = subprocess.Popen(
            [sys.executable, "-m", "gpubench", *args],
            cwd=tmp_path,
            env=environment,
            stdout=subprocess.PIPE,
            stderr=stderr_file,
            text=True,
        )
        try:
            wait_for_line(process, stderr_path, after)
            process.send_signal(sent)
            stdout, _ = process.communicate(timeout=120)
        finally:
            if process.poll() is None:
                process.kill()
    return process.returncode, stdout, stderr_path.read_text()


TFT_RUN = [
    "model.names=[mlp,tft]",
    "experiment=quick",
    "epochs=30",
    "warmup_epochs=1",
    "epoch.min_seconds=0.2",
    "tracking.enabled=false",
    *FAST,
]


@pytest.mark.slow
@pytest.mark.parametrize(("sent", "expected_code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_during_a_model_keeps_its_epochs_and_prints_the_report(tmp_path, sent, expected_code):
    code, stdout, stderr = run_and_signal(tmp_path, sent, *TFT_RUN)
    assert code == expected_code, stderr[-3000:]
    assert "Traceback" not in stderr
    assert f"interrupted ({sent.name})" in stderr
    (report_path,) = tmp_path.glob("outputs/*/*/report.json")
    assert f"Report: {report_path}" in stdout.replace("\n", "")
    report = RunReport.from_dict(json.loads(report_path.read_text()))
    assert report.status == "interrupted"
    assert report.models["mlp"].status == "ok"
    tft = report.models["tft"]
    assert tft.status == "interrupted"
    assert 4 <= len(tft.raw_epoch_times_ms) < 30
    assert tft.statistics is not None and tft.statistics.n == len(tft.raw_epoch_times_ms)
    assert report.recommendation is not None
    # Its HTML page says it is partial and draws the epochs measured, the interrupted model's too.
    page = (report_path.parent / "report.html").read_text()
    assert "Partial report: the run was interrupted." in page and 'data-plot="tft_epoch_times"' in page


@pytest.mark.slow
def test_a_signal_in_a_later_rounds_first_epoch_still_stops_the_run(tmp_path):
    # 15 epochs are 5 rounds of 3: the signal, sent after tft's 4th epoch, lands in its second round, which then has
    # 1 epoch. The within level needs 2 a round; that round's statistics raised, the error was taken for a failed
    # round, and the run went on with the signal lost. The lone epoch is now counted with the round before.
    run = [arg if arg != "epochs=30" else "epochs=15" for arg in TFT_RUN]
    code, _, stderr = run_and_signal(tmp_path, signal.SIGINT, *run)
    assert code == 130, stderr[-3000:]
    assert "later rounds stopped" not in stderr and "Traceback" not in stderr
    (report_path,) = tmp_path.glob("outputs/*/*/report.json")
    tft = RunReport.from_dict(json.loads(report_path.read_text())).models["tft"]
    assert tft.status == "interrupted" and len(tft.raw_epoch_times_ms) >= 4
    assert tft.statistics is not None and tft.statistics.n == len(tft.raw_epoch_times_ms)
    assert sum(r.epochs for r in tft.rounds) == len(tft.raw_epoch_times_ms)
    counted = [r.epochs for r in tft.rounds]
    if counted[-1] == 1:
        assert any("counted with round" in warning for warning in tft.warnings)
        counted = [*counted[:-2], counted[-2] + 1]
    if len(counted) > 1:
        assert list(tft.statistics.rounds.epochs_per_round) == counted
    else:  # one counted round (3 + 1 epochs) is one block: no round statistics
        assert tft.statistics.rounds is None


@pytest.mark.slow
def test_sigterm_to_a_sweep_still_writes_the_sweep_summary(tmp_path):
    sweep_dir = tmp_path / "sweep"
    code, _, stderr = run_and_signal(
        tmp_path, signal.SIGTERM, "-m", *TFT_RUN, "seed=1,2", f"hydra.sweep.dir={sweep_dir}"
    )
    assert code == 143, stderr[-3000:]
    assert "Traceback" not in stderr
    summary = (sweep_dir / "sweep_summary.md").read_text()
    assert "The sweep was interrupted by SIGTERM" in summary and "did not finish" not in summary
    report = json.loads((sweep_dir / "0" / "report.json").read_text())
    assert report["status"] == "interrupted" and report["models"]["tft"]["status"] == "interrupted"


def test_ctrl_c_during_startup_prints_no_traceback(tmp_path):
    # Half a second in, Python is still importing Hydra and composing the config.
    process = start(tmp_path, tmp_path / "cache", "model=mlp", "tracking.enabled=false", *FAST)
    time.sleep(0.5)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr
    assert "interrupted (SIGINT)" in stderr


@pytest.mark.slow
def test_sigterm_in_a_tracked_sweeps_second_job_nests_its_run_and_kills_the_parent(tmp_path):
    """Job 0 (3 epochs) completes; SIGTERM comes in job 1's fifth epoch (of 30). The summary blames the signal, no
    job summary stays running, job 1's MLflow run is nested under the sweep's parent, which ends KILLED."""
    from mlflow.tracking import MlflowClient

    sweep_dir, store = tmp_path / "sweep", tmp_path / "mlflow.db"
    args = ["-m", "model=mlp", "experiment=quick", "epoch.min_seconds=0.2", "epochs=3,30", *FAST]
    args += ["tracking.enabled=true", f"tracking.uri=sqlite:///{store}", f"hydra.sweep.dir={sweep_dir}"]
    stderr_path = tmp_path / "stderr.txt"
    environment = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    environment.update({"OMP_NUM_THREADS": "1", "GPU_BENCHMARK_CACHE_DIR": str(tmp_path / "cache")})
    with stderr_path.open("w") as stderr_file:
        process = subprocess.Popen(
            [sys.executable, "-m", "gpubench", *args],
            cwd=tmp_path,
            env=environment,
            stdout=subprocess.PIPE,
            stderr=stderr_file,
            text=True,
        )
        try:
            deadline = time.monotonic() + 300
            while "mlp measured epoch 5/30" not in stderr_path.read_text() and time.monotonic() < deadline:
                assert process.poll() is None, stderr_path.read_text()[-3000:]
                time.sleep(0.2)
            process.send_signal(signal.SIGTERM)
            process.communicate(timeout=120)
        finally:
            if process.poll() is None:
                process.kill()
    stderr = stderr_path.read_text()
    assert process.returncode == 143, stderr[-3000:]
    assert "Traceback" not in stderr
    jobs = {num: json.loads((sweep_dir / str(num) / "job_summary.json").read_text()) for num in (0, 1)}
    assert jobs[0]["status"] == "ok"
    assert jobs[1]["status"] == "failed" and jobs[1]["job_error"].startswith("interrupted by SIGTERM while the job ran")
    markdown = (sweep_dir / "sweep_summary.md").read_text()
    assert "killed for time or memory" not in markdown and "The sweep was interrupted by SIGTERM" in markdown
    client = MlflowClient(tracking_uri=f"sqlite:///{store}")
    runs = client.search_runs([client.get_experiment_by_name("gpubench").experiment_id])
    (parent,) = [run for run in runs if run.data.tags.get("gpubench.sweep_parent") == "true"]
    assert parent.info.status == "KILLED"
    children = {run.data.tags["gpubench.job_num"]: run for run in runs if run is not parent}
    assert {num: run.info.status for num, run in children.items()} == {"0": "FINISHED", "1": "KILLED"}
    assert all(run.data.tags.get("mlflow.parentRunId") == parent.info.run_id for run in children.values())
    # The parent spans the sweep: created before job 0, ended after job 1 was killed.
    assert parent.info.start_time <= min(run.info.start_time for run in children.values())
    assert parent.info.end_time >= max(run.info.end_time for run in children.values())
    assert parent.info.run_name.endswith(" · 1/2 jobs ok · interrupted")
    assert children["1"].info.run_name == "epochs=30 · quick mlp · CPU · interrupted"
    assert json.loads((sweep_dir / "1" / "report.json").read_text())["run"]["mlflow_run_id"] == (
        children["1"].info.run_id
    )


@pytest.mark.slow
@pytest.mark.parametrize("tracking", ["false", "true"])
def test_a_signal_in_the_first_models_first_measured_epoch_stops_the_run(tmp_path, tracking):
    """SIGINT lands in mlp's first measured epoch (3 s long), before it holds an epoch: the stability verdict's
    error on no epoch used to replace the interrupt (mlp `failed`, dqn run, the report `complete`, exit 1)."""
    args = ["model.names=[mlp,dqn]", "experiment=quick", "epochs=10", "epoch.min_seconds=3", *FAST]
    args += [f"tracking.enabled={tracking}", f"tracking.uri=sqlite:///{tmp_path / 'mlflow.db'}"]
    code, _, stderr = run_and_signal(tmp_path, signal.SIGINT, *args, after="mlp warmup epoch 1/1")
    assert code == 130, stderr[-3000:]
    assert "Traceback" not in stderr and "interrupted (SIGINT)" in stderr
    assert "dqn" not in stderr
    (report_path,) = tmp_path.glob("outputs/*/*/report.json")
    report = RunReport.from_dict(json.loads(report_path.read_text()))
    assert report.status == "interrupted"
    assert list(report.models) == ["mlp"]
    mlp = report.models["mlp"]
    assert mlp.status == "interrupted" and mlp.raw_epoch_times_ms == [] and mlp.stability is None
