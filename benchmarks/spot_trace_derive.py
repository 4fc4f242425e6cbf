"""Derive spot lifetimes (hours from launch to interruption) from the "Can't Be Late" preemption traces.

Source: Z. Wu, W.-L. Chiang, Z. Mao, Z. Yang, E. Friedman, S. Shenker, I. Stoica, "Can't Be Late: Optimizing Spot
Instance Savings under Deadlines", NSDI '24 (2024); traces at https://github.com/skypilot-org/spot-traces.

A single-node preemption trace holds one sample per tick (``metadata.gap_seconds``): 1 while the spot instance the
collectors hold runs, 0 while they have none (before the first launch, and from an interruption until a relaunch
succeeds). A run of 1s is one instance's lifetime; it ends in an interruption when a 0 follows it, and is censored
(still running) when the trace ends first. From each family's runs this prints:

* the interruption rate λ = interruptions / running hours (the exponential rate's maximum-likelihood estimate with
  censoring) and n, the number of interruptions;
* the Kaplan-Meier quantiles of the lifetime (h) at levels 0, 0.025, ..., up to the highest level the estimate
  reaches, and the mean excess lifetime beyond the last quantile (running hours past it / interruptions past it),
  which gpubench samples as an exponential tail.

A 4-node trace counts the instances running; a drop from a to b counts a − b interruptions, and λ is interruptions
per instance-hour (the lifetimes of single nodes cannot be told apart there, so that family ships λ only). A
single-node family with fewer than 30 interruptions ships λ only as well.

Usage: ``python benchmarks/spot_trace_derive.py TRACE_DIR --commit SHA [--out gpubench/prices/spot_lifetimes.json]``
"""

import argparse
import hashlib
import itertools
import json
from pathlib import Path

import numpy as np

CITATION = (
    "Zhanghao Wu, Wei-Lin Chiang, Ziming Mao, Zongheng Yang, Eric Friedman, Scott Shenker, Ion Stoica. "
    "Can't Be Late: Optimizing Spot Instance Savings under Deadlines. 21st USENIX Symposium on Networked Systems "
    "Design and Implementation (NSDI '24), 2024."
)
PAPER_URL = "https://www.usenix.org/conference/nsdi24/presentation/wu-zhanghao"
TRACE_URL = "https://github.com/skypilot-org/spot-traces"

#: Quantile levels of the shipped table, kept up to the highest level the Kaplan-Meier estimate reaches.
LEVELS = np.round(np.arange(0.0, 0.976, 0.025), 3)

#: family -> (folder glob under the trace root, instance type, what it is).
SINGLE_NODE = {
    "aws-p3.2xlarge": (
        "preemption/1-node/aws-04-22-2023/*_v100_1.json",
        "p3.2xlarge (1x V100), AWS us-east-1c, us-east-1f, us-west-2b, us-west-2c, 7 days from 2023-04-22",
    ),
    "aws-r5.16xlarge": (
        "preemption/1-node/aws-04-19-2023/*_intel_64.json",
        "r5.16xlarge (64 vCPU, no GPU), AWS us-east-1b, us-east-1c, us-east-1d, 7 days from 2023-05-01",
    ),
    "gcp-c3-highcpu-88": (
        "preemption/1-node/gcp-04-30-2023/*.json",
        "c3-highcpu-88 (88 vCPU, no GPU), GCP us-central1-a/b/c (three identical files, read once), us-east1-b, "
        "2 days from 2023-04-30",
    ),
}
MULTI_NODE = {
    "aws-p3.2xlarge-4-node": (
        "preemption/4-node/aws-08-03-2023/*_v100_1.json",
        "4x p3.2xlarge (1x V100 each), AWS us-east-1f, us-east-2a, us-west-2c, 13 days from 2023-08-03",
    ),
}
#: The family a spot row uses when its GPU's family is not in the file.
DEFAULT_FAMILY = "aws-p3.2xlarge"
#: Fewer interruptions than this give no quantile table worth shipping (the GCP trace has 3): rate only.
MIN_INTERRUPTIONS_FOR_QUANTILES = 30
#: The keys a rate-only family keeps.
RATE_KEYS = ("description", "trace_files", "tick_seconds", "interruptions", "running_hours", "interruptions_per_hour")


def _distinct_traces(root: Path, pattern: str) -> list[tuple[str, dict]]:
    """The traces matching ``pattern``, each byte-identical file once (some zones' files are copies)."""
    seen: set[str] = set()
    traces = []
    for path in sorted(root.glob(pattern)):
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        if digest not in seen:
            seen.add(digest)
            traces.append((str(path.relative_to(root)), json.loads(path.read_text())))
    return traces


def lifetimes_hours(data: list[int], tick_seconds: float) -> tuple[np.ndarray, np.ndarray]:
    """Each run of running ticks as (lifetime h, interrupted?): a run is interrupted when a 0 follows it."""
    hours, ended = [], []
    runs = [(value, len(list(group))) for value, group in itertools.groupby(data)]
    for index, (value, length) in enumerate(runs):
        if value:
            hours.append(length * tick_seconds / 3600.0)
            ended.append(index + 1 < len(runs))
    return np.asarray(hours, dtype=float), np.asarray(ended, dtype=bool)


def kaplan_meier_quantiles(hours: np.ndarray, ended: np.ndarray, levels: np.ndarray) -> tuple[list, list]:
    """Kaplan-Meier lifetime quantiles (h) at ``levels``, the levels the estimate reaches, and the quantiles."""
    times = np.unique(hours[ended])
    survival = np.cumprod([1.0 - np.sum((hours == t) & ended) / np.sum(hours >= t) for t in times])
    failed = 1.0 - survival
    kept_levels, quantiles = [], []
    for level in levels:
        reached = np.nonzero(failed >= level - 1e-12)[0]
        if level == 0.0:
            kept_levels.append(0.0)
            quantiles.append(float(times[0]))
        elif reached.size:
            kept_levels.append(float(level))
            quantiles.append(float(times[reached[0]]))
    return kept_levels, quantiles


def single_node_family(root: Path, pattern: str, description: str) -> dict:
    """λ, n and the lifetime quantile table of one single-node family."""
    traces = _distinct_traces(root, pattern)
    all_hours, all_ended = [], []
    for _, trace in traces:
        hours, ended = lifetimes_hours(trace["data"], float(trace["metadata"]["gap_seconds"]))
        all_hours.append(hours)
        all_ended.append(ended)
    hours, ended = np.concatenate(all_hours), np.concatenate(all_ended)
    interruptions = int(ended.sum())
    running_hours = float(hours.sum())
    levels, quantiles = kaplan_meier_quantiles(hours, ended, LEVELS)
    last = quantiles[-1]
    beyond = hours > last
    tail_events = int(np.sum(beyond & ended))
    tail_mean = float(np.sum(hours[beyond] - last) / tail_events) if tail_events else None
    return {
        "description": description,
        "trace_files": [path for path, _ in traces],
        "tick_seconds": sorted({float(trace["metadata"]["gap_seconds"]) for _, trace in traces}),
        "lifetimes": int(hours.size),
        "interruptions": interruptions,
        "censored": int(hours.size - interruptions),
        "running_hours": round(running_hours, 3),
        "interruptions_per_hour": round(interruptions / running_hours, 5),
        "quantile_levels": levels,
        "hours_to_interruption": [round(q, 4) for q in quantiles],
        "tail_interruptions": tail_events,
        "tail_mean_excess_hours": None if tail_mean is None else round(tail_mean, 4),
    }


def multi_node_family(root: Path, pattern: str, description: str) -> dict:
    """λ per instance-hour and n of one multi-node family (a drop in the running count is that many interruptions)."""
    traces = _distinct_traces(root, pattern)
    interruptions, instance_hours = 0, 0.0
    for _, trace in traces:
        counts = np.asarray(trace["data"], dtype=int)
        tick_hours = float(trace["metadata"]["gap_seconds"]) / 3600.0
        interruptions += int(np.sum(np.clip(counts[:-1] - counts[1:], 0, None)))
        instance_hours += float(counts.sum()) * tick_hours
    return {
        "description": description,
        "trace_files": [path for path, _ in traces],
        "tick_seconds": sorted({float(trace["metadata"]["gap_seconds"]) for _, trace in traces}),
        "interruptions": interruptions,
        "running_hours": round(instance_hours, 3),
        "interruptions_per_hour": round(interruptions / instance_hours, 5),
    }


def derive(root: Path, commit: str) -> dict:
    """The shipped document: the citation, the trace's commit, and every family's derived numbers."""
    single = {name: single_node_family(root, *spec) for name, spec in SINGLE_NODE.items()}
    rate_only = {
        name: {key: family[key] for key in RATE_KEYS} for name, family in single.items() if not _has_quantiles(family)
    }
    rate_only.update({name: multi_node_family(root, *spec) for name, spec in MULTI_NODE.items()})
    return {
        "citation": CITATION,
        "paper_url": PAPER_URL,
        "trace_repository": TRACE_URL,
        "trace_commit": commit,
        "derived_by": "benchmarks/spot_trace_derive.py",
        "method": (
            "single-node preemption traces: a run of running ticks is one instance's lifetime (interrupted when the "
            "instance is gone at the next tick, censored at the trace's end); interruptions_per_hour = interruptions "
            "/ running hours; hours_to_interruption = Kaplan-Meier quantiles at quantile_levels; beyond the last "
            "quantile, lifetimes are exponential with mean tail_mean_excess_hours. Multi-node traces: a drop in the "
            "running count is that many interruptions, per instance-hour."
        ),
        "default_family": DEFAULT_FAMILY,
        "families": {name: family for name, family in single.items() if _has_quantiles(family)},
        "rate_only_families": rate_only,
    }


def _has_quantiles(family: dict) -> bool:
    """Whether a single-node family has enough interruptions, and one past its last quantile, to ship a table."""
    return family["interruptions"] >= MIN_INTERRUPTIONS_FOR_QUANTILES and family["tail_interruptions"] > 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace_dir", type=Path, help="a checkout of github.com/skypilot-org/spot-traces")
    parser.add_argument("--commit", required=True, help="the trace repository's commit the checkout holds")
    parser.add_argument("--out", type=Path, help="write the JSON here as well as printing it")
    args = parser.parse_args()
    text = json.dumps(derive(args.trace_dir, args.commit), indent=1) + "\n"
    print(text, end="")
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
