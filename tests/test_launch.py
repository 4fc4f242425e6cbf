"""End to end through the CLI: a quick CPU job's report has a cost table (8 GPU types, 4 providers, on-demand and
spot, price dates), and ``python -m gpubench.launch`` turns it into SkyPilot and dstack task files that the tools'
own parsers accept (``sky.Task.from_yaml``, dstack's run-configuration model; skipped where the ``[cloud]`` extra
is not installed, CI installs it), with ``--force`` since a quick run is a smoke test, which launch refuses
without it. Bad input exits 2 with one paragraph."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from gpubench.cli.launch import MEASURED_REPORT, choose, training_command
from gpubench.results import RunReport

QUICK_ARGS = (
    "hardware=cpu",
    "experiment=quick",
    "model=mlp",
    "data.days=3",
    "hardware.burn_in_max_seconds=0",
    "tracking.enabled=false",
)


#: The user's own training, carried by --run into both task formats (the [cloud] tests parse them).
RUN = ("--run", "python train.py --epochs 90")


def run_launch(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gpubench.launch", *args], capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def quick_report(gpubench_once) -> Path:
    job = gpubench_once(*QUICK_ARGS)
    assert job.completed.returncode == 0, job.completed.stderr
    return job.report_path()


def test_a_quick_cpu_run_prices_8_gpu_types_at_4_providers_on_demand_and_spot_with_dates(quick_report: Path) -> None:
    recommendation = json.loads(quick_report.read_text())["recommendation"]
    table = recommendation["cost_table"]
    assert len({row["gpu"] for row in table}) >= 8
    assert len({row["provider"] for row in table}) >= 4
    assert {row["spot"] for row in table} == {False, True}
    for row in table:
        assert row["price_date"] and row["price_source"].startswith("https://")
        assert row["usd"] == pytest.approx(row["hours"] * row["price_usd_per_hour"])
        assert row["hours_lower"] <= row["hours"] <= row["hours_upper"]
    costs = [row["usd"] for row in table]
    assert costs == sorted(costs)
    assert recommendation["price_snapshot"]["snapshot_date"] and recommendation["local_cost"]["electricity_source"]


def test_the_training_command_drops_the_measuring_machine_and_keeps_a_custom_factory(quick_report: Path) -> None:
    report = RunReport.from_dict(json.loads(quick_report.read_text()))
    command = training_command(report)
    assert command.startswith("python -m gpubench ") and "model=mlp" in command and "hardware=cpu" not in command
    assert command.endswith(f"tracking.enabled=false output={MEASURED_REPORT}")
    custom = RunReport.from_dict(
        {
            **json.loads(quick_report.read_text()),
            "run": {
                **json.loads(quick_report.read_text())["run"],
                "overrides": ["model=custom", "workloads.custom.factory=mypkg.train:build", "output=/tmp/r.json"],
            },
        }
    )
    assert training_command(custom) == (
        "python -m gpubench model=custom workloads.custom.factory=mypkg.train:build tracking.enabled=false "
        f"output={MEASURED_REPORT}"
    )


def test_the_skypilot_task_carries_the_fitting_gpus_cheapest_first_and_the_hours(quick_report: Path, tmp_path) -> None:
    out = tmp_path / "task.yaml"
    completed = run_launch(str(quick_report), "--target", "skypilot", "--out", str(out), "--force")
    assert completed.returncode == 0, completed.stderr
    choice = choose(RunReport.from_dict(json.loads(quick_report.read_text())))
    task = yaml.safe_load(out.read_text())
    accelerators = [entry["accelerators"] for entry in task["resources"]["ordered"]]
    assert accelerators[0].split(":")[0] in {"RTXA6000", "L40S", "A10", "A10G", "H100", "H200", "A100", "A100-80GB"}
    assert len(accelerators) == len(choice.rows) and task["resources"]["use_spot"] == choice.spot
    assert task["run"] == training_command(RunReport.from_dict(json.loads(quick_report.read_text())))
    assert "gpubench rent THIS_REPORT rented.json" in out.read_text()
    text = out.read_text()
    assert "task.set_time_estimator(" in text and f"{choice.best.hours:.3g} h [" in text


@pytest.mark.skipif(importlib.util.find_spec("sky") is None, reason="skypilot is in the [cloud] extra")
def test_skypilot_parses_the_task_and_its_time_estimator_snippet_runs(quick_report: Path, tmp_path: Path) -> None:
    import sky

    out = tmp_path / "task.yaml"
    assert run_launch(str(quick_report), "--target", "skypilot", "--out", str(out), "--force", *RUN).returncode == 0
    task = sky.Task.from_yaml(str(out))
    assert task.run == "python train.py --epochs 90"
    choice = choose(RunReport.from_dict(json.loads(quick_report.read_text())))
    assert len(task.resources) == len(choice.rows)
    assert all(resources.use_spot == choice.spot for resources in task.resources)
    # The snippet in the file's comment, run as written: SkyPilot then estimates the measured hours.
    comment = out.read_text().split("instead of its one-hour default:\n", 1)[1]
    snippet = [line[4:] for line in comment.splitlines() if line.startswith("#   ")]
    code = "\n".join(line for line in snippet if "from_yaml" not in line and "sky.launch" not in line)
    scope = {"sky": sky, "task": task}
    exec(code, scope)
    first = next(iter(task.resources))
    assert task.estimate_runtime(first) == pytest.approx(3600 * scope["hours"][next(iter(first.accelerators))])


@pytest.mark.skipif(importlib.util.find_spec("dstack") is None, reason="dstack is in the [cloud] extra")
def test_dstack_parses_the_task(quick_report: Path, tmp_path: Path) -> None:
    from dstack._internal.core.models.configurations import parse_run_configuration

    out = tmp_path / "task.dstack.yml"
    assert run_launch(str(quick_report), "--target", "dstack", "--out", str(out), "--force", *RUN).returncode == 0
    config = parse_run_configuration(yaml.safe_load(out.read_text()))
    choice = choose(RunReport.from_dict(json.loads(quick_report.read_text())))
    assert config.type == "task" and config.resources.gpu.count.min == choice.best.gpus_used
    assert str(config.spot_policy.value) == ("spot" if choice.spot else "on-demand")
    assert config.commands[-1] == "python train.py --epochs 90"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cannot read the report"),
        ("{", "is not a JSON report"),
        ('{"timestamp": "x"}', "is not a gpubench report"),
    ],
)
def test_bad_input_is_one_paragraph_and_exit_2(tmp_path: Path, content: str | None, message: str) -> None:
    path = tmp_path / "report.json"
    if content is not None:
        path.write_text(content)
    completed = run_launch(str(path), "--target", "dstack")
    assert completed.returncode == 2 and message in completed.stderr
    assert "Traceback" not in completed.stderr and len(completed.stderr.strip().splitlines()) == 1


def _edited(quick_report: Path, tmp_path: Path, **changes) -> Path:
    data = json.loads(quick_report.read_text())
    data["run"]["choices"] = {**data["run"]["choices"], "experiment": "None"}
    for key, value in changes.items():
        if key == "decision":
            data["recommendation"]["decision"] = value
        else:
            data[key] = value
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(data))
    return path


def test_a_smoke_test_an_interrupted_and_an_undecided_report_are_refused_unless_forced(quick_report, tmp_path):
    cases = [
        (quick_report, "smoke test"),
        (_edited(quick_report, tmp_path / "a", status="interrupted"), "its status is interrupted"),
        (_edited(quick_report, tmp_path / "b", decision=None), "holds no decision"),
    ]
    for path, reason in cases:
        completed = run_launch(str(path), "--target", "dstack")
        assert completed.returncode == 2, completed.stdout
        assert reason in completed.stderr and "--force writes the task" in completed.stderr
        assert "Traceback" not in completed.stderr and len(completed.stderr.strip().splitlines()) == 1
    assert run_launch(str(quick_report), "--target", "dstack", "--force").returncode == 0


def test_run_carries_the_users_command_into_both_formats(quick_report: Path, tmp_path: Path) -> None:
    for target, key in (("skypilot", "run"), ("dstack", "commands")):
        out = tmp_path / f"{target}.yaml"
        assert run_launch(str(quick_report), "--target", target, "--out", str(out), "--force", *RUN).returncode == 0
        task = yaml.safe_load(out.read_text())
        assert (task[key] if key == "run" else task[key][-1]) == "python train.py --epochs 90"
        assert "runs your command (--run)" in out.read_text()


@pytest.mark.parametrize("where", ["missing folder", "a folder", "read-only file system"])
def test_an_out_that_cannot_be_written_is_one_paragraph_and_exit_2_with_nothing_left(quick_report, tmp_path, where):
    # /proc refuses new files to every user, root included (CI runs as root, for whom a chmod-ed folder is writable).
    target = {
        "missing folder": tmp_path / "nope" / "task.yaml",
        "a folder": tmp_path,
        "read-only file system": Path("/proc/gpubench-task.yaml"),
    }[where]
    completed = run_launch(str(quick_report), "--target", "skypilot", "--force", "--out", str(target))
    assert completed.returncode == 2 and "--out" in completed.stderr
    assert "Traceback" not in completed.stderr and len(completed.stderr.strip().splitlines()) == 1
    assert not target.is_file()
