"""One sweep per folder: the lock a sweep holds on its folder, the refusal of a second sweep into it (one paragraph,
exit 2, nothing written), a lock left by a killed sweep, and two real sweeps started at once into one folder."""

import errno
import os
import signal
import subprocess
import sys
from unittest import mock

import pytest
from hydra.core.utils import JobStatus

from gpubench.output import sweep
from gpubench.output.sweep_lock import LOCK_FILE, SweepFolderBusy, SweepLock
from tests.test_sweep import hydra_config, job_return, read_csv, report, run_job
from tests.test_sweep_launchers import SMALL, run_sweep


def test_a_second_lock_on_a_held_folder_is_refused_and_names_the_holder(tmp_path):
    held = SweepLock.acquire(tmp_path / "sweep")
    with pytest.raises(SweepFolderBusy) as refused:
        SweepLock.acquire(tmp_path / "sweep")
    message = str(refused.value)
    assert f"another gpubench sweep (process {os.getpid()} on " in message
    assert f"is writing the sweep folder {tmp_path / 'sweep'}: two sweeps in one folder overwrite" in message
    held.release()
    SweepLock.acquire(tmp_path / "sweep").release()


def test_a_lock_left_by_a_killed_sweep_blocks_nothing(tmp_path):
    # A process that takes the lock and is killed holding it, as a sweep killed with SIGKILL is.
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time; from pathlib import Path; from gpubench.output.sweep_lock import SweepLock; "
            f"lock = SweepLock.acquire(Path({str(tmp_path)!r})); print('held', flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline().strip() == "held"
    with pytest.raises(SweepFolderBusy):
        SweepLock.acquire(tmp_path)
    holder.send_signal(signal.SIGKILL)
    holder.wait(timeout=30)
    assert (tmp_path / LOCK_FILE).exists()
    SweepLock.acquire(tmp_path).release()


def test_the_callback_refuses_a_held_folder_before_writing_anything_and_releases_its_own_at_the_end(tmp_path, capsys):
    other = SweepLock.acquire(tmp_path)
    refused = sweep.SweepSummaryCallback()
    with mock.patch.object(sweep, "atexit") as fake_atexit, pytest.raises(SystemExit) as exited:
        refused.on_multirun_start(config=hydra_config(tmp_path))
    assert exited.value.code == 2
    # No exit handler: the refused sweep must not write a summary into the other sweep's folder.
    fake_atexit.register.assert_not_called()
    err = " ".join(capsys.readouterr().err.split())
    assert f"gpubench: error: another gpubench sweep (process {os.getpid()} on" in err
    assert str(tmp_path) in err
    other.release()

    callback = sweep.SweepSummaryCallback()
    with mock.patch.object(sweep, "atexit"):
        callback.on_multirun_start(config=hydra_config(tmp_path))
        with pytest.raises(SweepFolderBusy):
            SweepLock.acquire(tmp_path)
        run_job(callback, tmp_path, 0, report([10.0, 12.0]), job_return(JobStatus.COMPLETED, 0))
        callback.on_multirun_end(config=hydra_config(tmp_path))
    SweepLock.acquire(tmp_path).release()


def test_a_filesystem_without_locks_runs_the_sweep_and_says_it_is_unguarded(tmp_path, capsys):
    callback = sweep.SweepSummaryCallback()
    no_locks = OSError(errno.ENOLCK, "No locks available")
    with mock.patch.object(sweep, "atexit"), mock.patch("fcntl.flock", side_effect=no_locks):
        callback.on_multirun_start(config=hydra_config(tmp_path))
        run_job(callback, tmp_path, 0, report([10.0, 12.0]), job_return(JobStatus.COMPLETED, 0))
        callback.on_multirun_end(config=hydra_config(tmp_path))
    err = " ".join(capsys.readouterr().err.split())
    assert f"the filesystem of the sweep folder {tmp_path} takes no file locks (No locks available)" in err
    assert "1 jobs: 1 ok, 0 failed." in (tmp_path / sweep.SWEEP_MARKDOWN_FILE).read_text()


def test_a_cli_sweep_into_a_folder_another_sweep_holds_exits_2_and_writes_no_job(tmp_path):
    sweep_dir = tmp_path / "sweep"
    held = SweepLock.acquire(sweep_dir)
    completed = run_sweep(tmp_path, "seed=1,2", f"hydra.sweep.dir={sweep_dir}")
    held.release()
    assert completed.returncode == 2, completed.stderr[-3000:]
    stderr = " ".join(completed.stderr.split())
    assert f"another gpubench sweep (process {os.getpid()} on " in stderr
    assert f"is writing the sweep folder {sweep_dir}:" in stderr
    assert sorted(path.name for path in sweep_dir.iterdir()) == [LOCK_FILE]


@pytest.mark.slow
def test_two_sweeps_started_at_once_into_one_folder_run_one_and_refuse_the_other(tmp_path):
    sweep_dir = tmp_path / "sweep"
    environment = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    environment.update({"OMP_NUM_THREADS": "1", "GPU_BENCHMARK_CACHE_DIR": str(tmp_path / "cache")})
    command = [sys.executable, "-m", "gpubench", "-m", *SMALL, "seed=1,2", f"hydra.sweep.dir={sweep_dir}"]
    logs = [tmp_path / f"stderr{i}.txt" for i in range(2)]
    sweeps = []
    for log in logs:
        with log.open("w") as handle:
            sweeps.append(subprocess.Popen(command, cwd=tmp_path, env=environment, stderr=handle, text=True))
    ended = [(process.wait(timeout=600), log.read_text()) for process, log in zip(sweeps, logs, strict=True)]
    assert sorted(code for code, _ in ended) == [0, 2], [err[-2000:] for _, err in ended]
    (refusal,) = [" ".join(err.split()) for code, err in ended if code == 2]
    assert f"is writing the sweep folder {sweep_dir}:" in refusal and "Sweep summary:" not in refusal
    rows = read_csv(sweep_dir / sweep.SWEEP_CSV_FILE)
    assert [(r["job_num"], r["seed"], r["job_status"]) for r in rows] == [("0", "1", "ok"), ("1", "2", "ok")]
