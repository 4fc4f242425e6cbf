"""The host and the log: the thread count is chosen from the load and recorded with it, a busy host is warned about,
gpubench's story is in Hydra's ``gpubench.log`` (and its debug lines on the terminal with ``hydra.verbose``), the
report follows the umask, and batch-search keys on the CPU get a notice."""

import json
import os
import re
import stat

import numpy as np
import pytest
import scipy.stats
import torch

from gpubench.hardware import host
from gpubench.results import HostLoad, RunReport


@pytest.mark.parametrize(
    ("cpus", "load", "expected"),
    [(2, 0.0, 2), (2, 0.9, 2), (2, 1.0, 1), (2, 4.85, 1), (16, 3.2, 13), (16, None, 16), (8, 7.99, 1)],
)
def test_auto_threads_are_the_idle_cpus(cpus, load, expected):
    assert host.auto_cpu_threads(cpus, load) == expected


def test_configured_threads_are_set_and_recorded(monkeypatch):
    previous = torch.get_num_threads()
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    try:
        threads, source = host.choose_cpu_threads(2, torch.device("cpu"))
        assert (threads, source) == (2, "hardware.cpu_threads")
        assert torch.get_num_threads() == 2
        recorded = host.host_load(source)
        assert recorded.torch_num_threads == 2 and recorded.threads_source == "hardware.cpu_threads"
        assert recorded.thread_environment == {"OMP_NUM_THREADS": "3"}
        assert recorded.available_cpus == len(os.sched_getaffinity(0))
        assert recorded.load_average_1m == pytest.approx(os.getloadavg()[0], abs=2.0)
    finally:
        torch.set_num_threads(previous)


def test_auto_on_the_cpu_follows_the_load(monkeypatch):
    previous = torch.get_num_threads()
    monkeypatch.setattr(host, "available_cpus", lambda: 4)
    monkeypatch.setattr(host, "load_average", lambda: (2.5, 2.0, 1.0))
    try:
        assert host.choose_cpu_threads(None, torch.device("cpu")) == (2, "auto: the idle CPUs")
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(previous)


def loaded(load_1m: float | None, cpus: int = 2) -> HostLoad:
    return HostLoad(
        cpu_count=cpus,
        available_cpus=cpus,
        load_average_1m=load_1m,
        load_average_5m=None,
        load_average_15m=None,
        torch_num_threads=1,
        torch_interop_threads=1,
        threads_source="auto: the idle CPUs",
    )


def test_a_busy_host_is_warned_about_with_its_load():
    assert host.busy_host_warning(loaded(2.0)) is None
    assert host.busy_host_warning(loaded(None)) is None
    warning = host.busy_host_warning(loaded(4.86))
    assert warning is not None and "load average 4.9 over 2 CPUs" in warning


def test_cpu_threads_must_be_positive(tmp_path):
    from gpubench.errors import ConfigError
    from gpubench.hardware.config import HardwareConfig

    with pytest.raises(ConfigError, match=r"`hardware.cpu_threads` = 0 is not valid"):
        HardwareConfig(cpu_threads=0)


def test_a_run_logs_its_story_records_the_host_and_follows_the_umask(tracked_mlp_job):
    # The job (tests/conftest.py) ran under umask 027 with batch.max_size=512 and hardware.cpu_threads=1.
    completed = tracked_mlp_job.completed
    assert completed.returncode == 0, completed.stderr
    run_dir = tracked_mlp_job.report_path().parent
    log = (run_dir / "gpubench.log").read_text()
    for line in (
        "[gpubench.bench.runner][INFO] - device: cpu",
        "model mlp: started",
        "model mlp: ok",
        "torch intra-op",
    ):
        assert line in log
    # Without hydra.verbose the log's story stays off the terminal (gpubench's own output is there).
    assert "[gpubench.bench.runner][INFO]" not in completed.stderr + completed.stdout
    assert "batch.max_size=512: the batch-size search runs on a GPU only" in " ".join(completed.stderr.split())
    report_path = run_dir / "report.json"
    assert stat.S_IMODE(report_path.stat().st_mode) == 0o640
    report = RunReport.from_dict(json.loads(report_path.read_text()))
    assert report.run.host is not None
    assert report.run.host.torch_num_threads == 1 and report.run.host.threads_source == "hardware.cpu_threads"
    assert report.run.host.available_cpus >= 1
    assert report.run.hardware_config["cpu_threads"] == 1


def test_the_logs_numbers_have_the_consoles_format_and_units(tracked_mlp_job):
    run_dir = tracked_mlp_job.report_path().parent
    log = (run_dir / "gpubench.log").read_text()
    report = RunReport.from_dict(json.loads((run_dir / "report.json").read_text()))
    mlp, host_load = report.models["mlp"], report.run.host
    # The model's line comes after its first round: its mean and t interval (scipy), one decimal, in ms.
    first = np.array(mlp.raw_epoch_times_ms[: mlp.rounds[0].epochs])
    level = mlp.statistics.confidence_level
    half = scipy.stats.t.ppf(0.5 + level / 2, len(first) - 1) * first.std(ddof=1) / np.sqrt(len(first))
    low, mean, high = first.mean() - half, first.mean(), first.mean() + half
    line = f"model mlp: ok, mean epoch {mean:.1f} ms ({level * 100:g}% CI {low:.1f}–{high:.1f}) over {len(first)} "
    assert line in log
    loads = f"{host_load.load_average_1m:.2f} / {host_load.load_average_5m:.2f} / {host_load.load_average_15m:.2f}"
    assert f"host: {host_load.available_cpus} of {host_load.cpu_count} CPUs usable, load average {loads}" in log
    # No float as Python writes it (`7519.232916499988`, `0.6455078125`) in the run's own lines.
    raw = [line for line in log.splitlines() if "[gpubench.bench." in line and re.search(r"\d\.\d{5,}", line)]
    assert raw == []


def test_hydra_verbose_shows_gpubenchs_debug_lines(quick_mlp_job):
    # The job (tests/conftest.py) ran with hydra.verbose=gpubench; its folder is its Hydra run folder.
    completed = quick_mlp_job.completed
    assert completed.returncode == 0, completed.stderr
    report = RunReport.from_dict(json.loads(quick_mlp_job.report_path().read_text()))
    # Every round's epochs are shown, numbered on across the rounds.
    epochs = len(report.models["mlp"].raw_epoch_times_ms)
    assert f"[gpubench.output.console][DEBUG] - mlp measured epoch {epochs}/{epochs}" in completed.stderr
    log = (quick_mlp_job.folder / "gpubench.log").read_text()
    assert f"[DEBUG] - mlp measured epoch 1/{epochs}" in log
