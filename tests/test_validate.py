"""``python -m gpubench.validate``: a report's predictions checked by real trainings in fresh processes, each in a
plain loop timed by its own clock.

The session's quick MLP job (tests/conftest.py) is validated for real through the command line (its repeats, a
signal in the middle), edited into each bad input a user can meet (each refused with exit 2 and one paragraph), and
planned in process for the facts that need no training: the steps and the prediction of a replay, the factor that
``--minutes`` chooses, an interrupted report's epochs. Exit codes 0 and 1 are pinned with a fake training whose
times are known.
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from gpubench.bench import replay
from gpubench.cli import validate
from gpubench.config import load_resolved_config
from gpubench.decision.estimate import estimate_training_time
from gpubench.results import HostProbe, RunReport, ValidationReport
from gpubench.stats.rounds import new_run_interval, split_rounds
from gpubench.workload import StepResult

USER_MODULE = """
import torch
from torch import nn


def build(batch_size, device):
    model = nn.Linear(16, 1).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    inputs = torch.randn(4096, 16, device=device)
    targets = inputs.sum(dim=1, keepdim=True)

    def step():
        rows = torch.randint(0, 4096, (batch_size,), device=device)
        loss = nn.functional.mse_loss(model(inputs[rows]), targets[rows])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss.detach()

    return step
"""


#: A custom model's quick CPU job: the user's module above as mytrain.py, its own plan.
CUSTOM_JOB = (
    "model=custom",
    "workloads.custom.factory=mytrain:build",
    "workloads.custom.batch_size=32",
    "decision.plan.samples.custom=1e6",
    "hardware=cpu",
    "experiment=quick",
    "hardware.burn_in_max_seconds=0",
    "tracking.enabled=false",
)


def _environment(**extra: str) -> dict[str, str]:
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    return {**inherited, "OMP_NUM_THREADS": "1", **extra}


def _validate(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gpubench.validate", *args],
        cwd=cwd,
        env=_environment(**env),
        capture_output=True,
        text=True,
        timeout=600,
    )


def _paragraph(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture(scope="module")
def job(quick_mlp_job) -> Path:
    """A completed quick job of the MLP on the CPU; its folder (report.json, config_resolved.yaml). The session's
    quick job (tests/conftest.py), which other modules read too."""
    assert quick_mlp_job.completed.returncode == 0, quick_mlp_job.completed.stderr
    return quick_mlp_job.folder


def _copy(job: Path, tmp_path: Path, edit_model=None, edit_config=None, edit_report=None) -> Path:
    """The job copied to ``tmp_path/job`` with its MLP section, its config text or its whole report edited;
    the copy's report path."""
    copy = tmp_path / "job"
    shutil.copytree(job, copy)
    report = json.loads((copy / "report.json").read_text())
    if edit_model:
        edit_model(report["models"]["mlp"])
    if edit_report:
        edit_report(report)
    (copy / "report.json").write_text(json.dumps(report))
    if edit_config:
        config = copy / "config_resolved.yaml"
        edited = edit_config(config.read_text())
        config.write_bytes(edited if isinstance(edited, bytes) else edited.encode())
    return copy / "report.json"


def _mlp(job: Path):
    return RunReport.from_dict(json.loads((job / "report.json").read_text())).models["mlp"]


# ------------------------------------------------------------------------------------------------ real trainings


@pytest.mark.slow
def test_each_real_training_of_the_repeats_is_checked_against_the_reports_own_bound(job: Path, tmp_path: Path):
    output = tmp_path / "validation.json"
    completed = _validate(
        str(job / "report.json"), "--factor", "1", "--repeats", "2", "--output", str(output), cwd=tmp_path
    )
    validation = ValidationReport.from_dict(json.loads(output.read_text()))
    assert validation.status == "complete" and validation.factor == 1.0 and validation.repeats == 2
    assert [(c.model, c.repeat, c.status) for c in validation.checks] == [("mlp", 1, "ok"), ("mlp", 2, "ok")]
    result = _mlp(job)
    n = len(result.raw_epoch_times_ms)
    # The prediction by hand: the one-off costs (calibration, warmup) plus n epochs of the mean epoch time; the
    # bounds are one new training's of exactly those n epochs: the fixed costs plus n x the prediction interval of
    # a new run's mean epoch (stats.rounds.new_run_interval, over the report's rounds).
    one_off_s = result.calibration_seconds + sum(result.warmup_epoch_times_ms) / 1e3
    plan = load_resolved_config(job / "config_resolved.yaml").decision.plan
    replay_plan = replace(
        plan,
        samples={**plan.samples, "mlp": n * result.samples_per_epoch},
        eval_every_steps=None,
        checkpoint_every_steps=None,
    )
    estimate = estimate_training_time("mlp", result, replay_plan)
    for check in validation.checks:
        assert check.epochs == n and check.factor == 1.0
        assert check.steps == result.calibration_steps + result.steps_per_epoch * (
            len(result.warmup_epoch_times_ms) + n
        )
        assert check.predicted_s == pytest.approx(one_off_s + n * result.statistics.mean_ms / 1e3)
        rounds = result.statistics.rounds
        # ρ bounded from the run and each later round's first epoch left out, as the report's own bound.
        low_ms, high_ms = new_run_interval(
            split_rounds(result.raw_epoch_times_ms, rounds.epochs_per_round),
            n,
            0.95,
            rounds.gaps_epochs,
            from_run=rounds.steady_mean_ms is not None,
            earlier_runs=rounds.earlier_runs,
        )
        assert (check.lower_s, check.upper_s) == pytest.approx(
            # Above, a flagged drift's part too; the one-off costs at either end of their range (none on the CPU).
            (
                estimate.fixed_lower_seconds + n * low_ms / 1e3,
                estimate.fixed_upper_seconds + n * high_ms / 1e3 + estimate.drift_margin_seconds,
            )
        )
        assert check.lower_s < check.predicted_s < check.upper_s
        assert check.actual_s > 0
        assert check.error_pct == pytest.approx(100 * (check.actual_s - check.predicted_s) / check.predicted_s)
        assert check.inside_bound == (check.lower_s <= check.actual_s <= check.upper_s)
        # The host probe, read in the training's own process around its timed region.
        assert check.host_probe_before.python_loop_ms > 0 and check.host_probe_after.python_loop_ms > 0
    # On a shared 2-core host a training may land outside its bound: the exit code says which happened.
    assert completed.returncode == (0 if all(c.inside_bound for c in validation.checks) else 1), completed.stderr
    rows = [line.split() for line in completed.stdout.splitlines() if line.startswith("mlp ")]
    assert [row[1] for row in rows] == ["1", "2"]
    assert [row[-1] for row in rows] == [
        f"{c.host_probe_before.python_loop_ms:.1f}/{c.host_probe_after.python_loop_ms:.1f}" for c in validation.checks
    ]
    assert "Traceback" not in completed.stderr


@pytest.mark.slow
def test_a_signal_mid_training_keeps_the_finished_trainings_and_exits_130(job: Path, tmp_path: Path):
    output = tmp_path / "validation.json"
    scratch = tmp_path / "scratch"  # the training processes' spec files live here (TMPDIR)
    scratch.mkdir()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gpubench.validate",
            *(str(job / "report.json"), "--factor", "2", "--repeats", "3"),
            "--output",
            str(output),
        ],
        cwd=tmp_path,
        env=_environment(TMPDIR=str(scratch)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 300
    while not (output.is_file() and json.loads(output.read_text())["checks"]):
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()
        time.sleep(0.2)
    # The second training's process is starting or training now.
    time.sleep(3.0)
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr and "interrupted (SIGINT)" in _paragraph(stderr)
    validation = ValidationReport.from_dict(json.loads(output.read_text()))
    assert validation.status == "interrupted"
    assert 1 <= len(validation.checks) < 3 and all(check.status == "ok" for check in validation.checks)
    assert "interrupted: the trainings above are those that finished" in stdout
    # The training in progress was stopped with the check, not left running.
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert str(scratch) not in ps


def test_minutes_chooses_each_models_factor_from_the_reports_prediction(job: Path) -> None:
    result = _mlp(job)
    n, mean_s = len(result.raw_epoch_times_ms), result.statistics.mean_ms / 1e3
    one_off_s = result.calibration_seconds + sum(result.warmup_epoch_times_ms) / 1e3
    minutes = (one_off_s + 37 * mean_s) / 60  # by hand: 37 epochs of the mean, after the one-off costs
    (check,) = replay.prepare(job / "report.json", minutes=minutes).planned
    assert check.epochs == 37 and check.factor == pytest.approx(37 / n)
    assert check.predicted_s == pytest.approx(60 * minutes)
    # A target shorter than the one-off costs still trains one epoch.
    (short,) = replay.prepare(job / "report.json", minutes=one_off_s / 600).planned
    assert short.epochs == 1


# ------------------------------------------------------------------------------------------------ the loop


def test_the_training_is_timed_between_synchronisations_around_all_of_its_steps() -> None:
    events: list[str] = []
    times = iter([10.0, 12.5])

    def clock() -> float:
        events.append("clock")
        return next(times)

    seconds = replay.timed_training(lambda: events.append("step"), 3, lambda: events.append("wait"), clock)
    assert seconds == 2.5
    assert events == ["wait", "clock", "step", "step", "step", "wait", "clock"]


class CountingWorkload:
    """Counts the steps it is asked for."""

    def __init__(self) -> None:
        self.steps = 0

    def train_step(self) -> StepResult:
        self.steps += 1
        return StepResult(loss=torch.tensor(1.0), grad_norm=torch.tensor(0.5))


def test_a_replay_builds_the_model_as_measured_and_trains_exactly_its_steps(job: Path, monkeypatch) -> None:
    built: list[tuple[str, int]] = []
    workload = CountingWorkload()

    def build(name, context, batch_size, **kwargs):
        built.append((name, batch_size))
        return workload

    monkeypatch.setattr("gpubench.bench.model_run.build_workload", build)
    recorded = RunReport.from_dict(json.loads((job / "report.json").read_text())).run.host.torch_num_threads
    spec = replay.ReplaySpec(
        config_path=str(job / "config_resolved.yaml"), model="mlp", batch_size=48, steps=75, torch_threads=recorded
    )
    threads_before = torch.get_num_threads()
    try:
        torch.set_num_threads(recorded + 1)
        training = replay.replay(spec)
        # The benchmark's recorded thread count, not the one the process had.
        assert torch.get_num_threads() == recorded
    finally:
        torch.set_num_threads(threads_before)
    assert built == [("mlp", 48)]
    assert workload.steps == 75
    assert training.actual_s >= 0
    # The host probe is read on either side of the training, outside its timed region.
    assert training.probe_before.python_loop_ms > 0 and training.probe_after.python_loop_ms > 0


def _planned(model: str, lower_s: float, upper_s: float) -> replay.PlannedCheck:
    spec = replay.ReplaySpec(config_path="config_resolved.yaml", model=model, batch_size=8, steps=100)
    return replay.PlannedCheck(
        spec=spec, factor=2.0, epochs=10, steps_per_epoch=9, predicted_s=10.0, lower_s=lower_s, upper_s=upper_s
    )


def test_a_training_is_stopped_within_two_weeks_however_wide_its_bound() -> None:
    # A bound of 10 days: ten times it would pass the limit poll() can wait (24.8 days) and raise OverflowError.
    limits: list[float] = []

    def train(spec: replay.ReplaySpec, timeout_s: float) -> replay.TimedTraining:
        limits.append(timeout_s)
        return replay.TimedTraining(10.0)

    replay.run_checks([_planned("mlp", 1.0, 10 * 86400.0)], 1, lambda row: None, train)
    assert limits == [14 * 86400.0]


def test_repeats_interleave_the_models_and_each_training_is_judged_on_its_own() -> None:
    order: list[str] = []
    # dqn's trainings take 10 s then 14 s, ppo's 9 s then 9 s; both predicted 10 s within [8, 12] s.
    times = {"dqn": iter([10.0, 14.0]), "ppo": iter([9.0, 9.0])}

    def train(spec: replay.ReplaySpec, timeout_s: float) -> replay.TimedTraining:
        order.append(spec.model)
        assert timeout_s == 60.0 + 10.0 * 12.0
        return replay.TimedTraining(next(times[spec.model]))

    rows = []
    replay.run_checks([_planned("dqn", 8.0, 12.0), _planned("ppo", 8.0, 12.0)], 2, rows.append, train)
    assert order == ["dqn", "ppo", "dqn", "ppo"]
    assert [(r.model, r.repeat, r.actual_s, r.inside_bound) for r in rows] == [
        ("dqn", 1, 10.0, True),
        ("ppo", 1, 9.0, True),
        ("dqn", 2, 14.0, False),
        ("ppo", 2, 9.0, True),
    ]
    assert rows[2].error_pct == pytest.approx(40.0)


@pytest.mark.parametrize(
    ("outcome", "code", "status"),
    [("inside", 0, "ok"), ("outside", 1, "ok"), ("failed", 1, "failed")],
)
def test_the_exit_code_is_0_only_when_every_training_lands_inside_its_bound(
    job: Path, tmp_path: Path, monkeypatch, capsys, outcome: str, code: int, status: str
) -> None:
    (check,) = replay.prepare(job / "report.json", factor=2.0).planned
    times = iter([check.predicted_s, {"inside": check.upper_s, "outside": 1.01 * check.upper_s}.get(outcome)])

    def train(spec, timeout_s):
        actual_s = next(times)
        if actual_s is None:
            raise replay.TrainingFailed("the training process exited 1: RuntimeError: boom")
        # A host that was fast before the training and slow after it (the probe's fixed loop, ms).
        return replay.TimedTraining(actual_s, HostProbe(9.0, 2.0), HostProbe(18.6, 3.5))

    monkeypatch.setattr(replay, "_run_fresh", train)
    output = tmp_path / "validation.json"
    arguments = [str(job / "report.json"), "--factor", "2", "--repeats", "2", "--output", str(output)]
    assert validate.main(arguments) == code
    validation = ValidationReport.from_dict(json.loads(output.read_text()))
    assert [c.status for c in validation.checks] == ["ok", status]
    assert validation.passed == (code == 0)
    # Each trained row keeps the host probes read around its training; the table prints them.
    assert validation.checks[0].host_probe_before == HostProbe(9.0, 2.0)
    assert validation.checks[0].host_probe_after == HostProbe(18.6, 3.5)
    out = capsys.readouterr().out
    assert f"gpubench validate: 2 training(s) planned, predicted {2 * check.predicted_s / 60:.1f} min in all" in out
    first_row = next(line for line in out.splitlines() if line.startswith("mlp "))
    assert first_row.split()[-1] == "9.0/18.6"
    assert "probe ms: the host's fixed Python loop" in out
    assert ("failed: the training process exited 1" in out) == (outcome == "failed")


# ------------------------------------------------------------------------------------------------ what is checked


def test_an_interrupted_reports_measured_epochs_are_checked(job: Path, tmp_path: Path) -> None:
    def interrupted(report: dict) -> None:
        report["status"] = "interrupted"
        report["models"]["mlp"].update(status="interrupted", error="interrupted after 10 measured epochs")

    path = _copy(job, tmp_path, edit_report=interrupted)
    preparation = replay.prepare(path, factor=2.0)
    (check,) = preparation.planned
    result = _mlp(job)
    assert not preparation.skipped
    assert check.epochs == 2 * len(result.raw_epoch_times_ms)
    one_off_s = result.calibration_seconds + sum(result.warmup_epoch_times_ms) / 1e3
    assert check.predicted_s == pytest.approx(one_off_s + check.epochs * result.statistics.mean_ms / 1e3)


def _one_epoch_left(report: dict) -> None:
    mlp = report["models"]["mlp"]
    mlp.update(status="interrupted", raw_epoch_times_ms=mlp["raw_epoch_times_ms"][:1], statistics=None)


def _unknown_model(report: dict) -> None:
    report["models"] = {"resnet": report["models"]["mlp"]}


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda r: r["models"]["mlp"].update(status="oom"), "mlp: status oom with 10 measured epoch(s)"),
        (_one_epoch_left, "mlp: status interrupted with 1 measured epoch(s): a prediction needs at least 2"),
        (_unknown_model, "resnet: gpubench does not know a model named 'resnet' (it knows mlp, dqn,"),
    ],
    ids=["oom", "interrupted-after-one-epoch", "unknown-model"],
)
def test_nothing_to_check_is_bad_input_with_the_reason(job: Path, tmp_path: Path, edit, message: str) -> None:
    path = _copy(job, tmp_path, edit_report=edit)
    completed = _validate(str(path), cwd=tmp_path)
    assert completed.returncode == 2, completed.stderr
    err = _paragraph(completed.stderr)
    assert f"nothing in {path} can be checked" in err and message in err
    assert "decision.plan" not in err and "Traceback" not in completed.stderr
    assert not (path.parent / "validation.json").exists()


# ------------------------------------------------------------------------------------------------ bad input


def _bad_config(old: str, new: str):
    def edit(text: str) -> str:
        edited = re.sub(old, new, text, count=1, flags=re.MULTILINE)
        assert edited != text
        return edited

    return edit


@pytest.mark.parametrize(
    ("edits", "message"),
    [
        (
            {"edit_model": lambda m: m.update(raw_epoch_times_ms="fast")},
            "raw_epoch_times_ms`: expected a list, got str 'fast'",
        ),
        (
            {"edit_model": lambda m: m.update(steps_per_epoch=-5)},
            "model mlp: `steps_per_epoch` = -5 is not a whole number above 0",
        ),
        (
            {"edit_model": lambda m: m.update(raw_epoch_times_ms=[100.0, float("nan")])},
            "`raw_epoch_times_ms` holds nan",
        ),
        ({"edit_config": _bad_config(r"^epochs: \d+$", "epochs: -3")}, "`epochs` = -3 is not valid"),
        ({"edit_config": lambda text: text + "nosuch_key: 1\n"}, "`nosuch_key` is not a gpubench config key"),
        ({"edit_config": _bad_config(r"^epochs: \d+$", "epochs: fast")}, "`epochs`: Value 'fast'"),
        ({"edit_config": lambda text: text + "broken: [\n"}, "is not valid YAML"),
        ({"edit_config": lambda text: ""}, "is empty: replayed, it would run the default config, not the job's"),
        (
            {"edit_config": lambda text: ("# café\n" + text).encode("latin-1")},
            "is not UTF-8 text (byte 0xe9 at offset 5)",
        ),
    ],
    ids=[
        "times-a-string",
        "negative-steps",
        "nan-time",
        "config-bad-value",
        "config-unknown-key",
        "config-bad-type",
        "config-not-yaml",
        "config-empty",
        "config-not-utf8",
    ],
)
def test_a_bad_report_or_config_is_one_paragraph_and_exit_2(job: Path, tmp_path: Path, edits, message: str) -> None:
    path = _copy(job, tmp_path, **edits)
    completed = _validate(str(path), cwd=tmp_path)
    assert completed.returncode == 2, completed.stderr
    err = _paragraph(completed.stderr)
    assert message in err and "Traceback" not in completed.stderr
    if "edit_config" in edits:
        assert f"the job's config {path.parent / 'config_resolved.yaml'}" in err
    assert "training" not in completed.stdout


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["missing.json"], "missing.json cannot be read"),
        (["{job}/report.json", "--factor", "0"], "--factor 0 is not valid"),
        (
            ["{job}/report.json", "--factor", "10.5"],
            "--factor 10.5 is not valid: give a multiple of the measured work above 0 and at most 10",
        ),
        (
            ["{job}/report.json", "--factor", "2", "--minutes", "1"],
            "argument --minutes: not allowed with argument --factor",
        ),
        (["{job}/report.json", "--minutes", "-1"], "--minutes -1 is not valid"),
        (["{job}/report.json", "--models", "tft"], "--models names tft, which the report did not run"),
        (["{job}/report.json", "--repeats", "0"], "--repeats 0 is not valid"),
        (
            ["{job}/report.json", "--minutes", "100000"],
            "--minutes 100000 is not valid: give a training's length in minutes, above 0 and at most 10080 (a week)",
        ),
        (["{job}/report.json", "--repeats", "1000000"], "--repeats 1000000 is not valid: give a whole number from 1"),
        (
            ["{job}/report.json", "--minutes", "6000", "--repeats", "2"],
            "the planned trainings (1 model(s) × 2 repeat(s)) are predicted to take 200.00 h, more than the 168 h",
        ),
        (["{job}/report.json", "--output", "{job}/report.json/validation.json"], "cannot be written"),
        ([], "give the report to validate"),
    ],
)
def test_bad_arguments_are_one_paragraph_and_exit_2(job: Path, tmp_path: Path, arguments, message) -> None:
    completed = _validate(*(a.format(job=job) for a in arguments), cwd=tmp_path)
    assert completed.returncode == 2, completed.stderr
    assert message in _paragraph(completed.stderr)
    # Refused before any training.
    assert "Traceback" not in completed.stderr and "training" not in completed.stdout


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full, a device whose every write is ENOSPC")
def test_a_full_disk_keeps_the_trainings_on_stdout_and_exits_2(job: Path, tmp_path: Path) -> None:
    # /dev/full is written in place (replacing it would replace the device), and every write fails as on a full
    # disk: the trainings used to end in three chained OSError tracebacks, exit 1 and no row anywhere.
    completed = _validate(str(job / "report.json"), "--factor", "0.5", "--output", "/dev/full", cwd=tmp_path)
    assert completed.returncode == 2, completed.stderr
    assert "Traceback" not in completed.stderr
    err = _paragraph(completed.stderr)
    assert "--output /dev/full cannot be written (No space left on device): the validation is printed above" in err
    printed = ValidationReport.from_dict(json.loads(completed.stdout[completed.stdout.index("\n{") :]))
    assert printed.status == "complete"
    assert [(c.model, c.status) for c in printed.checks] == [("mlp", "ok")] and printed.checks[0].actual_s > 0
    assert Path("/dev/full").is_char_device()


def test_a_report_without_its_config_names_the_file_it_needs(job: Path, tmp_path: Path) -> None:
    shutil.copy(job / "report.json", tmp_path / "report.json")
    report = json.loads((tmp_path / "report.json").read_text())
    report["run"]["output_dir"] = str(tmp_path)
    (tmp_path / "report.json").write_text(json.dumps(report))
    completed = _validate(str(tmp_path / "report.json"), cwd=tmp_path)
    assert completed.returncode == 2
    assert "no config_resolved.yaml beside" in _paragraph(completed.stderr)


@pytest.mark.slow
def test_a_custom_model_whose_factory_does_not_import_here_is_named(tmp_path: Path, monkeypatch) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "mytrain.py").write_text(USER_MODULE)
    job = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpubench",
            *CUSTOM_JOB,
            f"hydra.run.dir={project / 'run'}",
            f"data.cache_dir={tmp_path / 'cache'}",
        ],
        cwd=project,
        env=_environment(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert job.returncode == 0, job.stderr
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    completed = _validate(str(project / "run" / "report.json"), cwd=elsewhere)
    assert completed.returncode == 2, completed.stderr
    err = _paragraph(completed.stderr)
    assert "`workloads.custom.factory` = 'mytrain:build' is not valid: module mytrain could not be imported" in err
    assert "Traceback" not in completed.stderr and "training" not in completed.stdout
    # From the project's folder, where the factory imports, the same report plans its check.
    monkeypatch.chdir(project)
    try:
        (check,) = replay.prepare(project / "run" / "report.json", factor=1.0).planned
    finally:
        sys.modules.pop("mytrain", None)
    assert check.spec.model == "custom" and check.spec.batch_size == 32
