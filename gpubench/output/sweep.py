"""Sweep summaries: a Hydra callback that records every job of a multirun (``job_summary.json`` in its folder, written
wherever the launcher runs it) and, when the sweep ends, reads them back from the files into ``sweep_summary.csv``
and ``sweep_summary.md`` (one row per job and model, each overridden key a column). An exit handler writes the
summary when Hydra skips ``on_multirun_end`` (a job exits the process); a sweep with a failed job exits with 1."""

import atexit
import csv
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from hydra.core.utils import JobReturn, JobStatus
from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from gpubench import signals
from gpubench.cli.hydra_files import write_error_message
from gpubench.output import console
from gpubench.output.redact import install_log_redaction, redact
from gpubench.output.report_file import REPORT_FILE_NAME, ReportReadError, read_report, write_json_atomic
from gpubench.output.sweep_lock import SweepLock, hold_sweep_folder
from gpubench.output.sweep_run import SweepRun
from gpubench.results import ModelResult, RunReport, cheapest_rental

#: The per-job summary, in each job's output folder.
JOB_SUMMARY_FILE = "job_summary.json"
#: The sweep summaries, in the sweep folder.
SWEEP_CSV_FILE = "sweep_summary.csv"
SWEEP_MARKDOWN_FILE = "sweep_summary.md"

#: A finished job's statuses; a summary still ``running`` after the sweep is a job whose process ended early.
FINAL_JOB_STATUSES = ("ok", "failed")

#: Per model, what the summary keeps (ms, samples/s); ``time_per_sample_us`` (µs per ``sample_unit``) compares jobs
#: whose epochs hold different numbers of samples.
MODEL_COLUMNS = (
    *("model_status", "mean_epoch_time_ms", "steps_per_epoch", "time_per_sample_us", "sample_unit", "ci_low_ms"),
    *("ci_high_ms", "decision_ci_low_ms", "decision_ci_high_ms", "confidence_level", "coefficient_of_variation"),
    *("samples_per_second", "batch_size", "memory_usage_mb", "stability", "model_error"),
)
#: Per job, what the summary keeps of the recommendation (h, USD; the cheapest fitting rental as its label).
DECISION_COLUMNS = (
    *("decision", "estimated_hours", "estimated_hours_lower", "estimated_hours_upper", "cloud_cost_usd_per_training"),
    *("cheapest_rental", "cheapest_rental_usd"),
)
#: A row's columns: these, the overrides, the model's, the decision's, then the trailing ones.
JOB_COLUMNS = ("job_num", "job_status")
TRAILING_COLUMNS = ("job_error", "mlflow_run_id", "output_dir")

#: What the exit codes of ``python -m gpubench`` mean (128 + the signal's number for a handled signal).
_EXIT_CODE_MEANINGS = {
    1: "a model failed with an unexpected error",
    2: "bad input: config, data or output path (the job's stderr says which)",
    **{128 + int(handled): f"interrupted by {handled.name}" for handled in signals.HANDLED_SIGNALS},
}

_US_PER_MS = 1e3

_NOT_FINISHED = (
    "the job did not finish: its process exited or was killed before Hydra's on_job_end "
    "(a job that calls sys.exit, or a worker killed for time or memory)"
)


def _now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _read_json(path: Path) -> dict[str, Any] | None:
    """The job summary at ``path``, or None when it is missing or unreadable (a job killed while writing)."""
    try:
        content = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return content if isinstance(content, dict) else None


def _model_figures(result: ModelResult) -> dict[str, Any]:
    """One model's result reduced to :data:`MODEL_COLUMNS` (None where the report has no figure)."""
    stats = result.statistics
    t_low, t_high = stats.confidence_interval_ms if stats else (None, None)
    decision_low, decision_high = stats.decision_interval_ms if stats else (None, None)
    throughput = result.samples_per_second
    mean_ms, samples = result.mean_epoch_time_ms, result.samples_per_epoch
    return {
        "model_status": result.status,
        "mean_epoch_time_ms": mean_ms,
        "steps_per_epoch": result.steps_per_epoch,
        "time_per_sample_us": None if mean_ms is None or samples is None else mean_ms * _US_PER_MS / samples,
        "sample_unit": result.sample_unit,
        "ci_low_ms": t_low,
        "ci_high_ms": t_high,
        "decision_ci_low_ms": decision_low,
        "decision_ci_high_ms": decision_high,
        "confidence_level": stats.confidence_level if stats else None,
        "coefficient_of_variation": result.coefficient_of_variation,
        "samples_per_second": throughput.mean if throughput else None,
        "batch_size": result.batch_size,
        "memory_usage_mb": result.memory_usage_mb,
        "stability": result.stability,
        "model_error": result.error,
    }


def _decision_figures(report: RunReport) -> dict[str, Any]:
    """The job's recommendation reduced to :data:`DECISION_COLUMNS` (None where the report has no figure)."""
    recommendation = report.recommendation
    if recommendation is None:
        return dict.fromkeys(DECISION_COLUMNS)
    cost = recommendation.cost_analysis
    cheapest = cheapest_rental(recommendation.cost_table)
    return {
        "cheapest_rental": None if cheapest is None else cheapest.label,
        "cheapest_rental_usd": None if cheapest is None else cheapest.usd,
        "decision": recommendation.decision,
        "estimated_hours": recommendation.estimated_full_training_hours,
        "estimated_hours_lower": recommendation.estimated_full_training_hours_lower,
        "estimated_hours_upper": recommendation.estimated_full_training_hours_upper,
        "cloud_cost_usd_per_training": None if cost is None else cost.cloud_cost_usd_per_training,
    }


def _read_job_report(report_path: Path) -> RunReport | str:
    """The job's report, or why there is none to read (missing, cut short, or not a gpubench report)."""
    try:
        return read_report(report_path)
    except ReportReadError as exc:
        detail = f": it {exc.reason}" if report_path.exists() else ""
        return f"no readable report at {report_path}{detail}"


def job_summary(
    *,
    job_num: int | None,
    overrides: Sequence[str],
    output_dir: Path,
    report_path: Path,
    task_error: str | None = None,
    exit_code: int | None = None,
    started_at: str | None = None,
) -> dict[str, Any]:
    """The summary of a finished job from what Hydra saw (``task_error``: the exception the task raised;
    ``exit_code``: what it returned) and its report: ``failed`` when the task raised or exited non-zero, the report
    is missing or not ``complete``, or a model ``failed`` (an OOM or a divergence is a measured outcome)."""
    report = _read_job_report(report_path)
    reasons = []
    if task_error:
        reasons.append(task_error)
    if exit_code:
        meaning = _EXIT_CODE_MEANINGS.get(exit_code)
        reasons.append(f"exit code {exit_code}" + (f" ({meaning})" if meaning else ""))
    models: dict[str, dict[str, Any]] = {}
    recommendation: dict[str, Any] = dict.fromkeys(DECISION_COLUMNS)
    if isinstance(report, str):
        reasons.append(report)
    else:
        recommendation = _decision_figures(report)
        if report.status != "complete":
            ended = f": {report.error}" if report.error else ""
            reasons.append(f"report status is {report.status!r}, not 'complete'{ended}")
        for name, result in report.models.items():
            models[name] = _model_figures(result)
            if result.status == "failed":
                reasons.append(f"model {name} failed: {result.error}")
    return {
        "job_num": job_num,
        "overrides": list(overrides),
        "output_dir": str(output_dir),
        "report_path": str(report_path),
        "status": "failed" if reasons else "ok",
        "job_error": "; ".join(reasons) or None,
        "exit_code": exit_code,
        "started_at": started_at,
        "ended_at": _now_iso(),
        "mlflow_run_id": None if isinstance(report, str) else report.run.mlflow_run_id,
        "models": models,
        "recommendation": recommendation,
    }


@dataclass(frozen=True)
class SweepSummary:
    """What :func:`write_sweep_summary` read and wrote: the jobs, the rows, the varying override keys, the files."""

    sweep_dir: Path
    jobs: list[dict[str, Any]]
    rows: list[dict[str, Any]]
    varying_keys: list[str]
    csv_path: Path
    markdown_path: Path

    @property
    def failed_jobs(self) -> list[dict[str, Any]]:
        return [job for job in self.jobs if job["status"] != "ok"]


def _job_dirs(sweep_dir: Path) -> list[Path]:
    """Every job folder of the sweep: those with a job summary, and those Hydra created (``.hydra/overrides.yaml``)."""
    folders = {path.parent for path in sweep_dir.rglob(JOB_SUMMARY_FILE)}
    folders |= {path.parent.parent for path in sweep_dir.rglob("overrides.yaml") if path.parent.name == ".hydra"}
    # The sweep folder's own files (multirun.yaml) are not a job.
    folders.discard(sweep_dir)
    return sorted(folders)


def _hydra_job_record(job_dir: Path) -> tuple[int | None, list[str]]:
    """Job number and overrides from the files Hydra saved in the job folder (None / [] where absent)."""
    hydra_dir = job_dir / ".hydra"
    overrides: list[str] = []
    job_num: int | None = None
    if (hydra_dir / "overrides.yaml").exists():
        overrides = [str(o) for o in OmegaConf.to_container(OmegaConf.load(hydra_dir / "overrides.yaml"))]
    if (hydra_dir / "hydra.yaml").exists():
        num = OmegaConf.select(OmegaConf.load(hydra_dir / "hydra.yaml"), "hydra.job.num")
        job_num = None if num is None else int(num)
    return job_num, overrides


def read_job(job_dir: Path, interrupted_by: int | None = None) -> dict[str, Any]:
    """The final summary of the job in ``job_dir``: ``on_job_end``'s, else rebuilt from Hydra's files and the report,
    a job still ``running`` marked failed, unless the sweep was ``interrupted_by`` a signal after its report was
    complete."""
    saved = _read_json(job_dir / JOB_SUMMARY_FILE)
    if saved is not None and saved.get("status") in FINAL_JOB_STATUSES:
        return saved
    job_num, overrides = _hydra_job_record(job_dir)
    if saved is not None:
        job_num, overrides = saved.get("job_num", job_num), saved.get("overrides", overrides)
    report_path = Path(saved["report_path"]) if saved and saved.get("report_path") else job_dir / REPORT_FILE_NAME
    task_error = _NOT_FINISHED if saved is not None else None
    if saved is not None and interrupted_by is not None:
        report = _read_job_report(report_path)
        complete = not isinstance(report, str) and report.status == "complete"
        task_error = None if complete else f"interrupted by {signals.signal_name(interrupted_by)} while the job ran"
    return job_summary(
        job_num=job_num,
        overrides=overrides,
        output_dir=job_dir,
        report_path=report_path,
        task_error=task_error,
        started_at=(saved or {}).get("started_at"),
    )


def _final_job(job_dir: Path, interrupted_by: int | None) -> dict[str, Any]:
    """:func:`read_job`, with a rebuilt summary written back so that no ``running`` one stays on disk."""
    job = read_job(job_dir, interrupted_by)
    saved = _read_json(job_dir / JOB_SUMMARY_FILE)
    if saved is not None and saved.get("status") not in FINAL_JOB_STATUSES:
        write_json_atomic(job_dir / JOB_SUMMARY_FILE, job)
    return job


def resumable_report(report_path: Path, overrides: Sequence[str]) -> RunReport | None:
    """The earlier report at ``report_path`` when it can stand for this job under ``sweep.resume``: complete, no
    model ``failed``, run with the same ``overrides`` (``sweep.resume`` aside); else None."""
    report = _read_job_report(report_path)
    if isinstance(report, str) or report.status != "complete":
        return None
    if any(model.status == "failed" for model in report.models.values()):
        return None

    def job_overrides(given: Sequence[str]) -> list[str]:
        return [o for o in given if _split_override(o)[0] != "sweep.resume"]

    return report if job_overrides(report.run.overrides) == job_overrides(overrides) else None


def _split_override(override: str) -> tuple[str, str]:
    """``key=value`` -> (key, value), with Hydra's ``+``/``++`` prefixes dropped and ``~key`` as deleted."""
    if override.startswith("~"):
        key, _, value = override[1:].partition("=")
        return key, f"(deleted{' ' + value if value else ''})"
    key, _, value = override.lstrip("+").partition("=")
    return key, redact(value)


def _job_num_order(job: dict[str, Any]) -> tuple[bool, int, str]:
    """Sort key: by job number, jobs without one last, then by folder."""
    num = job.get("job_num")
    return (num is None, num or 0, job.get("output_dir") or "")


def sweep_rows(jobs: Sequence[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str], list[str]]:
    """One row per job and model (a job without models is one row with an empty model), the override keys in
    first-seen order, and those among them whose values differ between jobs."""
    keys: list[str] = []
    values_by_key: dict[str, set[str]] = {}
    parsed = []
    for job in jobs:
        overrides = dict(_split_override(o) for o in job.get("overrides", []))
        parsed.append(overrides)
        for key in overrides:
            if key not in values_by_key:
                keys.append(key)
                values_by_key[key] = set()
    for overrides in parsed:
        for key in keys:
            values_by_key[key].add(overrides.get(key, ""))
    varying = [key for key in keys if len(values_by_key[key]) > 1]
    rows = []
    for job, overrides in zip(jobs, parsed, strict=True):
        base = {
            "job_num": job.get("job_num"),
            "job_status": job["status"],
            **{key: overrides.get(key, "") for key in keys},
        }
        trailing = {column: job.get(column) for column in TRAILING_COLUMNS}
        decision = job.get("recommendation") or {}
        decision_cells = {column: decision.get(column) for column in DECISION_COLUMNS}
        models = job.get("models") or {"": dict.fromkeys(MODEL_COLUMNS)}
        for name, figures in models.items():
            model_cells = {c: figures.get(c) for c in MODEL_COLUMNS}
            rows.append({**base, "model_name": name, **model_cells, **decision_cells, **trailing})
    return rows, keys, varying


def _fmt(value: Any) -> str:
    """A table cell: 4 significant digits for floats, '–' for missing values, pipes escaped."""
    if value is None or value == "":
        return "–"
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 1e4 else f"{value:.4g}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def _ms(value: Any) -> str:
    """A time in ms with one decimal, as the console shows it (``1,234.5``); '–' when missing."""
    return "–" if value is None or value == "" else f"{value:,.1f}"


def _interval(low: Any, high: Any) -> str:
    """An interval in ms, one decimal each (``10.1–12.3``); '–' when missing."""
    return "–" if low is None or high is None else f"{_ms(low)}–{_ms(high)}"


def _hours(estimate: Any, low: Any, high: Any) -> str:
    """The estimate with its bounds as :func:`console.fmt_hours` writes them (``24.1 min (10.6 min–1.05 h)``), or the
    one bound a report has (``24.1 min (≤ 1.05 h)``); '–' without an estimate."""
    if estimate is None:
        return "–"
    text = console.fmt_hours
    if low is not None and high is not None:
        return f"{text(estimate)} ({text(low)}–{text(high)})"
    if high is not None:
        return f"{text(estimate)} (≤ {text(high)})"
    return text(estimate) + ("" if low is None else f" (≥ {text(low)})")


def _rental(choice: Any, usd: Any) -> str:
    """The cheapest rental cell: ``card at provider (kind): USD``, – without a cost table."""
    if choice in (None, ""):
        return "–"
    return f"{choice}: {_fmt(usd)}"


def _markdown(
    sweep_dir: Path,
    jobs: list[dict],
    rows: list[dict],
    keys: list[str],
    varying: list[str],
    *,
    aborted: bool,
    interrupted_by: int | None = None,
) -> str:
    failed = [job for job in jobs if job["status"] != "ok"]
    common = [f"`{key}={rows[0][key]}`" for key in keys if key not in varying and rows and rows[0][key] != ""]
    lines = [f"# Sweep `{sweep_dir}`", "", f"{len(jobs)} jobs: {len(jobs) - len(failed)} ok, {len(failed)} failed."]
    if interrupted_by is not None:
        lines.append(
            f"The sweep was interrupted by {signals.signal_name(interrupted_by)}; jobs that never started are not "
            "listed."
        )
    elif aborted:
        lines.append(
            "Hydra ended the sweep early (a job ended the process, or a job raised and the sweeper re-raised it); "
            "jobs that never started are not listed."
        )
    if common:
        lines += ["", "Common overrides: " + " ".join(common)]
    header = [
        *("job", "job status", *varying, "model", "model status", "mean epoch (ms)", "steps/epoch", "µs/sample"),
        *("t interval (ms)", "decision interval (ms)", "level", "CV", "samples/s", "batch", "decision"),
        *("training time (bounds)", "cloud USD", "cheapest rental (USD)"),
    ]
    lines += ["", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        cells = [
            _fmt(row["job_num"]),
            row["job_status"],
            *(_fmt(row[key]) for key in (*varying, "model_name", "model_status")),
            _ms(row["mean_epoch_time_ms"]),
            *(_fmt(row[key]) for key in ("steps_per_epoch", "time_per_sample_us")),
            _interval(row["ci_low_ms"], row["ci_high_ms"]),
            _interval(row["decision_ci_low_ms"], row["decision_ci_high_ms"]),
            *(_fmt(row[key]) for key in ("confidence_level", "coefficient_of_variation", "samples_per_second")),
            *(_fmt(row[key]) for key in ("batch_size", "decision")),
            _hours(row["estimated_hours"], row["estimated_hours_lower"], row["estimated_hours_upper"]),
            _fmt(row["cloud_cost_usd_per_training"]),
            _rental(row.get("cheapest_rental"), row.get("cheapest_rental_usd")),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    if failed:
        lines += ["", "## Failed jobs", ""]
        for job in failed:
            overrides = " ".join(job.get("overrides", []))
            lines.append(f"- job {_fmt(job.get('job_num'))} (`{overrides}`): {job.get('job_error')}")
    return "\n".join(lines) + "\n"


def write_sweep_summary(sweep_dir: Path, *, aborted: bool = False, interrupted_by: int | None = None) -> SweepSummary:
    """Read every job of the sweep in ``sweep_dir`` and write :data:`SWEEP_CSV_FILE` (every override key, full
    precision) and :data:`SWEEP_MARKDOWN_FILE` (the varying keys, the failed jobs with their reasons) there;
    ``aborted``: the sweep ended before all jobs ran, ``interrupted_by`` the signal's number that ended it."""
    sweep_dir = Path(sweep_dir)
    jobs = sorted((_final_job(job_dir, interrupted_by) for job_dir in _job_dirs(sweep_dir)), key=_job_num_order)
    rows, keys, varying = sweep_rows(jobs)
    csv_path = sweep_dir / SWEEP_CSV_FILE
    columns = [*JOB_COLUMNS, *keys, "model_name", *MODEL_COLUMNS, *DECISION_COLUMNS, *TRAILING_COLUMNS]
    with csv_path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
    markdown_path = sweep_dir / SWEEP_MARKDOWN_FILE
    markdown_path.write_text(
        _markdown(sweep_dir, jobs, rows, keys, varying, aborted=aborted, interrupted_by=interrupted_by)
    )
    return SweepSummary(sweep_dir, jobs, rows, varying, csv_path, markdown_path)


def parallel_launcher_warning(launcher: Any) -> str | None:
    """The warning for a launcher config (``hydra.launcher``) that runs a sweep's jobs at once on this machine
    (joblib unless ``n_jobs`` is 1, submitit_local): jobs timed side by side share the device and the CPUs."""
    target = str(OmegaConf.select(launcher, "_target_", default="") or "") if launcher is not None else ""
    name = target.rsplit(".", 1)[-1]
    if name == "JoblibLauncher":
        n_jobs = OmegaConf.select(launcher, "n_jobs", default=-1)
        if n_jobs == 1:
            return None
        at_once = "as many jobs as this machine has CPU cores" if n_jobs in (-1, None) else f"up to {n_jobs} jobs"
        how = "hydra/launcher=joblib runs " + at_once + " at once"
        one_at_a_time = "hydra.launcher.n_jobs=1, or hydra/launcher=basic (the default)"
    elif name == "LocalLauncher" and "submitit" in target:
        how = "hydra/launcher=submitit_local starts every job at once, each a process of its own"
        one_at_a_time = "hydra/launcher=basic (the default)"
    else:
        return None
    return (
        f"{how} on this machine: the jobs share its GPU and CPUs, so every timing in this sweep is contended and "
        f"none is the training's alone. Run them one at a time with {one_at_a_time}; to spread a sweep over "
        "machines, use hydra/launcher=submitit_slurm (each job gets a node of its own)."
    )


class SweepSummaryCallback(Callback):
    """Hydra callback (``hydra.callbacks`` in ``gpubench/conf/config.yaml``): per-job summaries during a multirun, the
    sweep summary, its folder's lock and its MLflow parent run; nothing for a single run."""

    def __init__(self) -> None:
        self._pending_config: DictConfig | None = None
        self._parent: SweepRun | None = None
        self._lock: SweepLock | None = None

    @staticmethod
    def _is_multirun(config: DictConfig) -> bool:
        return OmegaConf.select(config, "hydra.mode") == RunMode.MULTIRUN

    @staticmethod
    def _job_paths(config: DictConfig) -> tuple[Path, Path]:
        """The job's output folder and its report path (``output`` may point outside the folder)."""
        output_dir = Path(config.hydra.runtime.output_dir)
        report = OmegaConf.select(config, "output", default=None)
        return output_dir, Path(report) if report else output_dir / REPORT_FILE_NAME

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        # First, before this sweep writes anything in its folder: a folder another sweep is writing is refused.
        sweep_dir = Path(str(config.hydra.sweep.dir))
        self._lock = hold_sweep_folder(sweep_dir)
        # Hydra skips on_multirun_end when a job ends the process; the exit handler writes the summary then.
        self._pending_config = config
        hydra_overrides = OmegaConf.select(config, "hydra.overrides.hydra", default=None) or []
        if OmegaConf.select(config, "sweep.resume") and not any(
            str(o).startswith("hydra.sweep.dir=") for o in hydra_overrides
        ):
            console.notice(
                "sweep.resume=true without hydra.sweep.dir: the default sweep folder is new at every launch, so "
                "there is nothing to resume in it; give the earlier sweep's folder, hydra.sweep.dir=<folder>."
            )
        launcher_warning = parallel_launcher_warning(OmegaConf.select(config, "hydra.launcher", default=None))
        if launcher_warning:
            console.notice(launcher_warning)
        atexit.register(self._finish, aborted=True)
        # The launcher logs each job's overrides next ("#0 : tracking.uri=http://user:password@host ..."): every log
        # record of this process is redacted from now on.
        install_log_redaction()
        SweepRun.forget(sweep_dir)
        self._parent = SweepRun.create(config)
        for message in self._parent.begin() if self._parent is not None else ():
            console.notice(message)

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        if not self._is_multirun(config):
            return
        output_dir, report_path = self._job_paths(config)
        running = {
            "job_num": int(config.hydra.job.num),
            "overrides": list(OmegaConf.to_container(config.hydra.overrides.task)),
            "output_dir": str(output_dir),
            "report_path": str(report_path),
            "status": "running",
            "started_at": _now_iso(),
        }
        write_json_atomic(output_dir / JOB_SUMMARY_FILE, running)

    def on_job_end(self, config: DictConfig, job_return: JobReturn, **kwargs: Any) -> None:
        if not self._is_multirun(config):
            return
        output_dir, report_path = self._job_paths(config)
        started = _read_json(output_dir / JOB_SUMMARY_FILE) or {}
        task_error = exit_code = None
        # ``return_value`` re-raises a failed job's exception; the private field holds it without raising.
        if job_return.status == JobStatus.FAILED:
            error = job_return._return_value
            task_error = f"{type(error).__name__}: {error}".strip()
        elif isinstance(job_return._return_value, int) and not isinstance(job_return._return_value, bool):
            exit_code = job_return._return_value
        summary = job_summary(
            job_num=int(config.hydra.job.num),
            overrides=list(OmegaConf.to_container(config.hydra.overrides.task)),
            output_dir=output_dir,
            report_path=report_path,
            task_error=task_error,
            exit_code=exit_code,
            started_at=started.get("started_at"),
        )
        write_json_atomic(output_dir / JOB_SUMMARY_FILE, summary)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        self._pending_config = config
        summary = self._finish(aborted=False)
        if summary is not None and summary.failed_jobs:
            # Jobs that return their exit code instead of ending the process leave Hydra's exit status at 0; a sweep
            # with a failed job must fail as a single failed run does. Raised last, after every file is written
            # (SystemExit passes Hydra's guard around callbacks, which turns exceptions into warnings).
            sys.exit(1)

    def _finish(self, *, aborted: bool) -> SweepSummary | None:
        """Write the sweep summary and its MLflow run once (at the sweep's end or at exit); None when done before."""
        config, self._pending_config = self._pending_config, None
        if config is None:
            return None
        atexit.unregister(self._finish)
        try:
            return self._summarise(config, aborted=aborted)
        finally:
            if self._lock is not None:
                self._lock.release()
                self._lock = None

    def _summarise(self, config: DictConfig, *, aborted: bool) -> SweepSummary | None:
        """Write the sweep summary of ``config``'s folder and end its MLflow run (see :meth:`_finish`)."""
        sweep_dir = Path(str(config.hydra.sweep.dir))
        # At exit after a signal (the entry point runs the exit handlers before it exits 128 + the signal).
        interrupted_by = signals.interrupting_signal() if aborted else None
        try:
            summary = write_sweep_summary(sweep_dir, aborted=aborted, interrupted_by=interrupted_by)
        except OSError as exc:
            # A full or read-only sweep folder. At exit the error that ended the sweep was said already (often the
            # same folder), and the exit code is set: a notice. At the sweep's end it is the error, exit 2.
            if aborted:
                console.notice(f"no sweep summary: it cannot be written in {sweep_dir} ({exc.strerror or exc}).")
                return None
            console.error(write_error_message(exc))
            sys.exit(2)
        parent, self._parent = self._parent or SweepRun.create(config), None
        if parent is not None:
            outcome = parent.end(
                summary.jobs,
                [summary.csv_path, summary.markdown_path],
                summary.markdown_path.read_text(),
                aborted=aborted,
                interrupted=interrupted_by is not None,
            )
            if outcome.warning:
                console.notice(outcome.warning)
        console.notice(
            f"Sweep summary: {summary.markdown_path} ({len(summary.jobs)} jobs, {len(summary.failed_jobs)} failed"
            + (", the sweep ended early" if aborted else "")
            + ")"
        )
        return summary
