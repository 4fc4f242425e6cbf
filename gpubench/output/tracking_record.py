"""What a job logs to MLflow, built from its config and report: params (the knobs runs are compared by; paths are
tags, off the parallel-coordinates plot), tags, metrics, the run's name and description, and its data as a dataset
input. No mlflow here: :mod:`gpubench.output.tracking_live` sends them."""

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpubench.data.config import SYNTHETIC_SYMBOLS, DataConfig
from gpubench.output.redact import redact
from gpubench.results import (
    CLOUD_GPU_RECOMMENDED,
    GRAY_ZONE,
    LOCAL_GPU_VIABLE,
    DataProvenance,
    RunReport,
    cheapest_rental,
    preset_choice,
)

#: The cost table's artifact and the row fields it shows, in order.
COST_TABLE_ARTIFACT = "cost_table.json"
COST_TABLE_FIELDS: tuple[str, ...] = (
    *("gpu", "provider", "spot", "gpu_count", "fits_in_vram", "hours", "hours_lower", "hours_upper", "usd"),
    *("usd_lower", "usd_upper", "price_usd_per_hour", "price_date", "instance", "checkpoint_interval_hours", "note"),
)
#: The tag that names the machine whose history record a run logged, and that record's artifact.
MACHINE_TAG = "gpubench.machine"
HISTORY_RECORD_ARTIFACT = "history_record.json"
#: MLflow's tags for a run's description and its parent run (the UI nests a run under the run this tag names).
DESCRIPTION_TAG = "mlflow.note.content"
PARENT_RUN_TAG = "mlflow.parentRunId"
#: MLflow's tag of the experiment's kind and its value for model training: the UI opens such an experiment on its
#: runs (one without the tag may open in the GenAI view).
EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
MODEL_TRAINING_KIND = "custom_model_development"
#: The param that names the ``experiment=`` preset, and its value without one.
PRESET_PARAM = "experiment"
NO_PRESET = "none"
#: The last part of a config key that holds a path or a location (logged as a tag, not a param).
PATH_KEY_NAMES = frozenset({"output", "path", "dir", "cache_dir", "artifact_location", "uri", "prices_dir"})
PATH_KEY_SUFFIXES = ("_dir", "_path", "_file")
#: How the run list spells each decision.
SHORT_DECISIONS = {LOCAL_GPU_VIABLE: "LOCAL", GRAY_ZONE: "GRAY ZONE", CLOUD_GPU_RECOMMENDED: "CLOUD"}
#: Joins the parts of a run's name.
NAME_SEPARATOR = " · "
#: MLflow's limit on a dataset's name.
MAX_DATASET_NAME_CHARS = 500
#: MLflow's dataset input context for data a run trained on.
TRAINING_CONTEXT = "training"
#: What the synthetic market's digest covers, besides its parameters: bump when the generator's bars change.
SYNTHETIC_GENERATOR = "gpubench-synthetic-market-v1"


@dataclass(frozen=True)
class DatasetRecord:
    """The data a job trained on, as an MLflow dataset input: ``name`` and ``digest`` (hex) identify it, ``source``
    is where it was read (redacted), ``profile`` what it held."""

    name: str
    digest: str
    source: str
    profile: dict[str, Any]
    context: str = TRAINING_CONTEXT


@dataclass(frozen=True)
class SweepJob:
    """A job of a sweep: its folder, number, the sweep's parent run (None without one) and its swept overrides."""

    sweep_dir: str
    job_num: int | None
    parent_run_id: str | None = None
    swept_overrides: tuple[str, ...] = ()


@dataclass
class RunRecord:
    """Everything one MLflow run logs: name, params, tags, metrics (None dropped), per-epoch series (step = epoch
    index), artifacts, tables (file name -> columns), the dataset (None when unknown) and the record the job appended
    to the machine's history (None when it appended none)."""

    run_name: str
    params: dict[str, Any] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    metrics: dict[str, float | None] = field(default_factory=dict)
    series: dict[str, Sequence[float | None]] = field(default_factory=dict)
    artifacts: list[Path] = field(default_factory=list)
    tables: dict[str, dict[str, list[Any]]] = field(default_factory=dict)
    dataset: DatasetRecord | None = None
    history_record: dict[str, Any] | None = None


def flatten(tree: Any, prefix: str = "") -> dict[str, Any]:
    """Dotted-key view of nested dicts/lists: ``{"a": {"b": 1}}`` -> ``{"a.b": 1}``; lists stay whole values."""
    if not isinstance(tree, dict):
        return {prefix: tree}
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        dotted = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, dict):
            flat.update(flatten(value, dotted))
        else:
            flat[dotted] = value
    return flat


def is_path_key(key: str) -> bool:
    """Whether the dotted config ``key`` holds a path or location (``output``, ``data.cache_dir``, ``tracking.uri``)."""
    last = key.rsplit(".", 1)[-1]
    return last in PATH_KEY_NAMES or last.endswith(PATH_KEY_SUFFIXES)


def job_params(config_tree: dict[str, Any], choices: dict[str, str]) -> dict[str, Any]:
    """The job's params: the flattened config without its paths, and the ``experiment=`` preset from ``choices``."""
    params = {key: value for key, value in flatten(config_tree).items() if not is_path_key(key)}
    params[PRESET_PARAM] = preset_choice(choices) or NO_PRESET
    return params


def path_tags(config_tree: dict[str, Any]) -> dict[str, str]:
    """The config's paths and locations, dotted key -> value, as tags (those set; None is left out)."""
    return {key: str(value) for key, value in flatten(config_tree).items() if is_path_key(key) and value is not None}


def job_tags(
    models: Sequence[str], version: str, *, sweep: SweepJob | None, paths: dict[str, str] | None = None
) -> dict[str, str]:
    """The tags a job's run carries from its start: models, version, status ``running``, the config's ``paths``, and
    a sweep job's folder, number and parent run (which nests the run from the moment it exists)."""
    tags = {"gpubench.models": ",".join(models), "gpubench.version": version, "gpubench.status": "running"}
    tags.update(paths or {})
    if sweep is not None:
        tags["gpubench.sweep"] = sweep.sweep_dir
        tags["gpubench.job_num"] = str(sweep.job_num)
        if sweep.parent_run_id:
            tags[PARENT_RUN_TAG] = sweep.parent_run_id
    return tags


def _subject(models: Sequence[str], choices: dict[str, str]) -> str:
    """What ran: the models (``dqn+ppo``), after the preset (``quick``, alone when it runs its default models)."""
    preset = preset_choice(choices)
    names = "+".join(models)
    if preset is None:
        return names
    return preset if choices.get("model") in (None, "all") else f"{preset} {names}"


def _sweep_prefix(sweep: SweepJob | None) -> list[str]:
    """A sweep job's swept values (``seed=2 batch.max_size=1024``), or its number: they lead the name because MLflow's
    run list cuts long names, and they tell a sweep's runs apart."""
    if sweep is None:
        return []
    if sweep.swept_overrides:
        return [" ".join(sweep.swept_overrides)]
    return [f"job {sweep.job_num}"]


def starting_run_name(models: Sequence[str], choices: dict[str, str], sweep: SweepJob | None) -> str:
    """The run's name while the job runs: a sweep job's swept values first, then what ran and ``running``."""
    return NAME_SEPARATOR.join([*_sweep_prefix(sweep), _subject(models, choices), "running"])


def format_hours(hours: float) -> str:
    """Hours as the run list shows them: ``0.052 h``, ``3.1 h``, ``60 h``."""
    if hours >= 10:
        return f"{hours:.0f} h"
    if hours >= 1:
        return f"{hours:.1f} h"
    return f"{hours:.2g} h"


def device_label(report: RunReport) -> str:
    """The card the answer is about: the emulated card, else the measured GPU without its vendor prefix, or ``CPU``."""
    recommendation = report.recommendation
    if recommendation is not None and recommendation.emulated_card:
        return recommendation.emulated_card
    if report.hardware.measured_on == "cpu":
        return "CPU"
    name = report.hardware.device_name
    for prefix in ("NVIDIA ", "GeForce "):
        name = name.removeprefix(prefix)
    return name


def verdict_label(report: RunReport) -> str:
    """The verdict as the run list shows it: ``LOCAL 3.1 h``, a preset's ``smoke test``, ``no verdict``, or the status
    of a job that did not complete."""
    if report.status != "complete":
        return report.status
    note = report.run.preset_note
    if note:
        return note.split(":", 1)[0]
    recommendation = report.recommendation
    if recommendation is None or recommendation.decision is None:
        return "no verdict"
    short = SHORT_DECISIONS.get(recommendation.decision, recommendation.decision)
    hours = recommendation.estimated_full_training_hours
    return short if hours is None else f"{short} {format_hours(hours)}"


def run_name(report: RunReport, sweep: SweepJob | None) -> str:
    """The run's final name: swept values, what ran, the card, the verdict (``seed=2 · tft · H200 · LOCAL 3.1 h``)."""
    subject = _subject(report.run.models, report.run.choices)
    return NAME_SEPARATOR.join([*_sweep_prefix(sweep), subject, device_label(report), verdict_label(report)])


def description(report: RunReport) -> str | None:
    """The run's description (Markdown): a preset's note, the reasoning and the actions, or the error; None if none."""
    parts = []
    if report.run.preset_note:
        parts.append(f"**{report.run.preset} preset — {report.run.preset_note}.**")
    recommendation = report.recommendation
    if recommendation is not None:
        parts.append(recommendation.reasoning)
        if recommendation.recommended_actions:
            parts.append("\n".join(f"- {action}" for action in recommendation.recommended_actions))
    elif report.error:
        parts.append(f"The job ended early: {report.error}")
    return "\n\n".join(parts) if parts else None


def synthetic_digest(seed: int, symbols: Sequence[str], days: int, start_date: str) -> str:
    """The synthetic market's digest: BLAKE2b (128 bits, hex) of its generator, seed and shape as sorted JSON."""
    shape = dict(generator=SYNTHETIC_GENERATOR, seed=seed, symbols=list(symbols), days=days, start_date=start_date)
    return hashlib.blake2b(json.dumps(shape, sort_keys=True).encode(), digest_size=16).hexdigest()


def dataset_record(data: DataProvenance, config: DataConfig | None) -> DatasetRecord | None:
    """The dataset input of a job that read ``data`` with ``config``: the synthetic market by its seed and shape,
    files by their contents' digest (None without one)."""
    profile: dict[str, Any] = {
        "source": data.source,
        "files": data.files,
        "bars": data.bars,
        "symbols": data.symbols,
        "first_timestamp": data.first_timestamp,
        "last_timestamp": data.last_timestamp,
    }
    source = data.source
    if data.path:
        # A local path is made absolute (the run may be read from elsewhere); a URI is kept as given, redacted.
        source = redact(data.path if "://" in data.path else str(Path(data.path).expanduser().absolute()))
    if data.source == "synthetic" and config is not None:
        symbols = list(config.symbols or SYNTHETIC_SYMBOLS)
        profile.update(seed=config.seed, days=config.days, start_date=config.start_date)
        name = f"synthetic market (seed {config.seed}, {len(symbols)} symbols, {config.days} days)"
        digest = synthetic_digest(config.seed, symbols, config.days, config.start_date)
        return DatasetRecord(name=name, digest=digest, source=source, profile=profile)
    if data.content_hash is None:
        return None
    name = f"{data.source} {Path(data.path).name}" if data.path else data.source
    return DatasetRecord(
        name=redact(name)[:MAX_DATASET_NAME_CHARS], digest=data.content_hash, source=source, profile=profile
    )


def run_record(report: RunReport, *, sweep: SweepJob | None = None, data_config: DataConfig | None = None) -> RunRecord:
    """The MLflow view of a job's report (complete or partial): name, description, tags, metrics (per model
    ``<model>/...`` in ms, MB, samples/s; the recommendation's in h and USD), per-epoch series, the cost table and the
    dataset. Params are logged when the run starts (:func:`job_params`)."""
    run = report.run
    tags = job_tags(run.models, report.benchmark_version, sweep=sweep)
    tags["gpubench.device"] = report.hardware.device_name or run.device
    tags["gpubench.status"] = report.status
    preset = preset_choice(run.choices)
    optional = {
        "gpubench.preset": preset,
        "gpubench.preset_note": run.preset_note,
        DESCRIPTION_TAG: description(report),
        "torch.version": run.torch_version,
        "python.version": run.python_version,
        "mlflow.source.git.commit": run.git_commit or None,
    }
    tags.update({key: value for key, value in optional.items() if value is not None})
    metrics: dict[str, float | None] = {}
    series: dict[str, Sequence[float | None]] = {}
    for name, result in report.models.items():
        stats = result.statistics
        throughput = result.samples_per_second
        metrics[f"{name}/status_ok"] = 1.0 if result.status == "ok" else 0.0
        metrics[f"{name}/mean_epoch_time_ms"] = result.mean_epoch_time_ms
        metrics[f"{name}/p95_latency_ms"] = result.p95_latency_ms
        metrics[f"{name}/p99_latency_ms"] = result.p99_latency_ms
        metrics[f"{name}/coefficient_of_variation"] = result.coefficient_of_variation
        if stats is not None:
            metrics[f"{name}/ci_low_ms"], metrics[f"{name}/ci_high_ms"] = stats.confidence_interval_ms
            metrics[f"{name}/decision_ci_low_ms"], metrics[f"{name}/decision_ci_high_ms"] = stats.decision_interval_ms
            if stats.rounds is not None:
                metrics[f"{name}/between_round_share"] = stats.rounds.between_share
        metrics[f"{name}/host_probe_explained_share"] = result.host_probe_explained_share
        metrics[f"{name}/gpu_wait_explained_share"] = result.gpu_wait_explained_share
        if throughput is not None:
            metrics[f"{name}/samples_per_second"] = throughput.mean
        metrics[f"{name}/memory_usage_mb"] = result.memory_usage_mb
        metrics[f"{name}/batch_size"] = result.batch_size
        scaling = result.distributed
        if scaling is not None:
            metrics[f"{name}/world_size"] = float(scaling.world_size)
            metrics[f"{name}/distributed_status_ok"] = 1.0 if scaling.status == "ok" else 0.0
            metrics[f"{name}/global_samples_per_second"] = scaling.global_samples_per_second
            metrics[f"{name}/scaling_efficiency"] = scaling.scaling_efficiency
            if scaling.scaling_efficiency_interval is not None:
                low, high = scaling.scaling_efficiency_interval
                metrics[f"{name}/scaling_efficiency_low"], metrics[f"{name}/scaling_efficiency_high"] = low, high
        series[f"{name}/epoch_time_ms"] = result.raw_epoch_times_ms
        series[f"{name}/epoch_loss"] = result.epoch_losses
        if result.memory is not None and result.memory.peak_reserved_mb_per_epoch:
            series[f"{name}/epoch_peak_reserved_mb"] = result.memory.peak_reserved_mb_per_epoch
    recommendation = report.recommendation
    if recommendation is not None:
        tags["gpubench.decision"] = recommendation.decision or "none"
        if recommendation.decision_basis:
            tags["gpubench.decision_basis"] = recommendation.decision_basis
        metrics["recommendation/estimated_hours"] = recommendation.estimated_full_training_hours
        metrics["recommendation/estimated_hours_lower"] = recommendation.estimated_full_training_hours_lower
        metrics["recommendation/estimated_hours_upper"] = recommendation.estimated_full_training_hours_upper
        cost = recommendation.cost_analysis
        if cost is not None:
            metrics["recommendation/cloud_training_hours"] = cost.cloud_training_hours
            metrics["recommendation/cloud_cost_usd_per_training"] = cost.cloud_cost_usd_per_training
            metrics["recommendation/local_energy_cost_usd_per_training"] = cost.local_energy_cost_usd_per_training
            metrics["recommendation/annual_savings_usd"] = cost.annual_savings_usd
            metrics["recommendation/cheapest_cloud_hours"] = cost.cheapest_card_training_hours
            metrics["recommendation/cheapest_cloud_cost_usd_per_training"] = cost.cheapest_card_cost_usd_per_training
    tables: dict[str, dict[str, list[Any]]] = {}
    if recommendation is not None and recommendation.cost_table:
        rows = recommendation.cost_table
        tables[COST_TABLE_ARTIFACT] = {name: [getattr(row, name) for row in rows] for name in COST_TABLE_FIELDS}
        cheapest = cheapest_rental(rows)
        metrics["recommendation/cheapest_rental_usd"] = None if cheapest is None else cheapest.usd
        if cheapest is not None:
            tags["gpubench.cheapest_rental"] = cheapest.label
            tags["gpubench.cheapest_price_date"] = cheapest.price_date
    return RunRecord(
        run_name=run_name(report, sweep),
        tags=tags,
        metrics=metrics,
        series=series,
        tables=tables,
        dataset=None if report.data is None else dataset_record(report.data, data_config),
    )
