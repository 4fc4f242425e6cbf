"""Sweeps on an existing distributed engine and reruns: a small sweep through Hydra's submitit launcher in local mode
(the jobs run in their own processes, as on a Slurm cluster) leaves its job folders and a summary read from them;
``sweep.resume=true`` into the same ``hydra.sweep.dir`` (a copy of that sweep's, one of its reports made
interrupted) skips the jobs whose report is complete and reruns the others."""

import csv
import json
import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from gpubench.output import sweep
from gpubench.results import RunReport
from tests.test_sweep import report as one_model_report

SMALL = [
    "hardware=cpu",
    "tracking.enabled=false",
    "experiment=quick",
    "model=mlp",
    "hardware.burn_in_max_seconds=0",
    "data.days=3",
    "data.symbols=[SYNA,SYNB]",
    "epochs=2",
    "warmup_epochs=0",
    "epoch.min_seconds=0.05",
]


def run_sweep(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    environment.update({"OMP_NUM_THREADS": "1", "GPU_BENCHMARK_CACHE_DIR": str(cwd / "cache")})
    return subprocess.run(
        [sys.executable, "-m", "gpubench", "-m", *SMALL, *args],
        cwd=cwd,
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
    )


def rows(sweep_dir: Path) -> list[dict[str, str]]:
    with (sweep_dir / sweep.SWEEP_CSV_FILE).open(newline="") as handle:
        return list(csv.DictReader(handle))


# ------------------------------------------------------------------------------------------- resumable_report


def test_only_a_complete_report_of_the_same_overrides_is_resumed(tmp_path):
    overrides = ["model=mlp", "seed=1"]
    complete = one_model_report([10.0, 11.0, 12.0])
    complete = replace(complete, run=replace(complete.run, overrides=[*overrides, "sweep.resume=true"]))
    path = tmp_path / "report.json"

    def resumed(content: RunReport | None, given: list[str]) -> bool:
        if content is None:
            path.unlink(missing_ok=True)
        else:
            path.write_text(json.dumps(content.to_dict()))
        return sweep.resumable_report(path, given) is not None

    # The earlier launch may have been without sweep.resume: that override is not compared.
    assert resumed(complete, overrides)
    assert resumed(complete, [*overrides, "sweep.resume=true"])
    assert not resumed(complete, ["model=mlp", "seed=2"])  # another sweep's job with the same number
    assert not resumed(replace(complete, status="interrupted"), overrides)
    assert not resumed(replace(complete, status="running"), overrides)
    failed = one_model_report([10.0, 11.0], status="failed")
    assert not resumed(replace(failed, run=replace(failed.run, overrides=overrides)), overrides)
    assert not resumed(None, overrides)
    path.write_text('{"status": "complete", "cut sho')
    assert sweep.resumable_report(path, overrides) is None


# ------------------------------------------------------------------------------------------- real sweeps


@pytest.fixture(scope="module")
def submitit_sweep(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    """A two-job sweep (``seed=1,2``) through the submitit local launcher: its sweep folder and its process. Read by
    the launcher's test, and copied by the resume test as the earlier launch it resumes."""
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher")
    folder = tmp_path_factory.mktemp("submitit_sweep")
    sweep_dir = folder / "sweep"
    completed = run_sweep(
        folder,
        "seed=1,2",
        "hydra/launcher=submitit_local",
        "hydra.launcher.timeout_min=10",
        f"hydra.sweep.dir={sweep_dir}",
    )
    return sweep_dir, completed


@pytest.mark.slow
def test_a_sweep_through_the_submitit_local_launcher_writes_job_folders_and_the_summary(submitit_sweep):
    sweep_dir, completed = submitit_sweep
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert "Submitit 'local' sweep output dir" in completed.stdout
    # Its jobs ran side by side on this machine, and the sweep said so before they started.
    assert "hydra/launcher=submitit_local starts every job at once" in completed.stderr
    # submitit's own folder holds each job's pickled call, logs and result.
    submitit_jobs = [p for p in (sweep_dir / ".submitit").iterdir() if any(p.glob("*_result.pkl"))]
    assert len(submitit_jobs) == 2
    for num, seed in ((0, 1), (1, 2)):
        job_dir = sweep_dir / str(num)
        report = RunReport.from_dict(json.loads((job_dir / "report.json").read_text()))
        assert report.status == "complete" and report.run.seed == seed and report.run.job_num == num
        assert report.run.sweep_dir == str(sweep_dir)
        assert json.loads((job_dir / sweep.JOB_SUMMARY_FILE).read_text())["status"] == "ok"
        assert "model mlp: started" in (job_dir / "gpubench.log").read_text()
    table = rows(sweep_dir)
    assert [(r["job_num"], r["seed"], r["job_status"], r["model_status"]) for r in table] == [
        ("0", "1", "ok", "ok"),
        ("1", "2", "ok", "ok"),
    ]
    assert all(float(r["mean_epoch_time_ms"]) > 0 for r in table)
    assert "2 jobs: 2 ok, 0 failed." in (sweep_dir / sweep.SWEEP_MARKDOWN_FILE).read_text()


@pytest.mark.slow
def test_a_resumed_sweep_skips_complete_jobs_and_reruns_the_rest(submitit_sweep, tmp_path):
    # The earlier launch is the submitit sweep's (a copy of its folder; the launcher runs no part of the job's
    # overrides, so the resumed launch, on the default launcher here, matches its jobs all the same).
    launched_dir, first = submitit_sweep
    assert first.returncode == 0, first.stderr[-3000:]
    sweep_dir = tmp_path / "sweep"
    shutil.copytree(launched_dir, sweep_dir)
    kept = (sweep_dir / "0" / "report.json").read_text()
    # Job 1 as a killed job leaves it: its report says interrupted.
    job1 = sweep_dir / "1" / "report.json"
    interrupted = json.loads(job1.read_text())
    interrupted["status"] = "interrupted"
    job1.write_text(json.dumps(interrupted))

    second = run_sweep(tmp_path, "seed=1,2", "sweep.resume=true", f"hydra.sweep.dir={sweep_dir}")
    assert second.returncode == 0, second.stderr[-3000:]
    stderr = " ".join(second.stderr.split())
    assert "job 0: skipped (sweep.resume=true)" in stderr and "job 1: skipped" not in stderr
    assert (sweep_dir / "0" / "report.json").read_text() == kept
    rerun = RunReport.from_dict(json.loads(job1.read_text()))
    assert rerun.status == "complete" and rerun.timestamp >= interrupted["timestamp"]
    assert [(r["job_num"], r["job_status"]) for r in rows(sweep_dir)] == [("0", "ok"), ("1", "ok")]


def test_resume_without_an_explicit_sweep_dir_says_there_is_nothing_to_resume(tmp_path):
    completed = run_sweep(tmp_path, "seed=1", "sweep.resume=true", "hydra/launcher=basic")
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert "sweep.resume=true without hydra.sweep.dir" in " ".join(completed.stderr.split())


# ------------------------------------------------------------------------------------------- parallel launchers


def launcher_config(*overrides: str):
    """``hydra.launcher`` as Hydra composes it for gpubench's config with ``overrides``."""
    from hydra import compose, initialize_config_dir

    from gpubench.config import CONF_DIR, register_configs

    register_configs()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose(config_name="config", overrides=list(overrides), return_hydra_config=True).hydra.launcher


def test_launchers_that_time_jobs_side_by_side_are_named_with_the_way_to_run_them_one_at_a_time():
    pytest.importorskip("hydra_plugins.hydra_joblib_launcher")
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher")
    joblib = sweep.parallel_launcher_warning(launcher_config("hydra/launcher=joblib"))
    assert joblib.startswith(
        "hydra/launcher=joblib runs as many jobs as this machine has CPU cores at once on this machine: the jobs "
        "share its GPU and CPUs, so every timing in this sweep is contended"
    )
    assert "one at a time with hydra.launcher.n_jobs=1, or hydra/launcher=basic (the default)" in joblib
    assert "hydra/launcher=submitit_slurm" in joblib
    four = sweep.parallel_launcher_warning(launcher_config("hydra/launcher=joblib", "hydra.launcher.n_jobs=4"))
    assert four.startswith("hydra/launcher=joblib runs up to 4 jobs at once")
    local = sweep.parallel_launcher_warning(launcher_config("hydra/launcher=submitit_local"))
    assert local.startswith("hydra/launcher=submitit_local starts every job at once, each a process of its own")
    # One at a time, or one node per job: nothing to say.
    assert sweep.parallel_launcher_warning(launcher_config("hydra/launcher=joblib", "hydra.launcher.n_jobs=1")) is None
    assert sweep.parallel_launcher_warning(launcher_config()) is None  # basic, the default
    assert sweep.parallel_launcher_warning(launcher_config("hydra/launcher=submitit_slurm")) is None
