"""What two reports say about their hosts, for ``gpubench compare``: each host's load and probe readings, how B's
host compared, and each model's verdict with that difference divided out (:mod:`gpubench.stats.host_compare`). A
report without them reads "not recorded"."""

import math
from dataclasses import dataclass

import numpy as np

from gpubench.results import RunReport
from gpubench.stats.compare import AMBIGUOUS, FASTER, SAME, SLOWER, verdict
from gpubench.stats.host_compare import (
    HOST_DIFFERS,
    ProbeRatio,
    fair_share_slowdown,
    host_corrected_interval,
    host_factor_range,
    probe_ratio_interval,
)


@dataclass(frozen=True)
class HostSummary:
    """One report's host: 1-minute load, CPUs, the run's own threads and every probe reading (ms)."""

    load_1m: float | None
    available_cpus: int | None
    cpu_count: int | None
    own_threads: int | None
    probe_python_loop_ms: tuple[float, ...]

    @property
    def slowdown(self) -> float | None:
        """How many times as long host work took at this load (fair share), None without a recorded load."""
        if self.load_1m is None or self.available_cpus is None or self.own_threads is None:
            return None
        return fair_share_slowdown(self.load_1m, self.available_cpus, self.own_threads)

    @property
    def load_text(self) -> str:
        if self.load_1m is None or self.available_cpus is None:
            return "load not recorded"
        threads = f"{self.own_threads} thread{'s' if self.own_threads != 1 else ''} of its own"
        return (
            f"1-minute load {self.load_1m:.2f} on {self.available_cpus} available CPUs (of {self.cpu_count}), "
            f"{threads}: host work {self.slowdown:.2f}x as long (fair share)"
        )

    @property
    def probe_text(self) -> str:
        readings = self.probe_python_loop_ms
        if not readings:
            return "host probe not recorded"
        return (
            f"host probe (Python loop) median {np.median(readings):.3g} ms, range {min(readings):.3g}–"
            f"{max(readings):.3g} ms over {len(readings)} round{'s' if len(readings) != 1 else ''}"
        )

    @property
    def text(self) -> str:
        """One line: the load and the probe, each "not recorded" where the report lacks it."""
        return f"{self.load_text}; {self.probe_text}"


def host_summary(report: RunReport) -> HostSummary:
    """The host as ``report`` recorded it (see :class:`HostSummary`)."""
    host = report.run.host
    probes = tuple(
        float(measured.host_probe.python_loop_ms)
        for result in report.models.values()
        for measured in result.rounds
        if measured.host_probe is not None
        and math.isfinite(measured.host_probe.python_loop_ms)
        and measured.host_probe.python_loop_ms > 0
    )
    load = host.load_average_1m if host else None
    # A load the OS could not give (None) or a hand-edited one that no OS gives is not a reading of the host.
    if host is None or load is None or not (math.isfinite(load) and load >= 0 and host.available_cpus >= 1):
        return HostSummary(None, None, None, None, probes)
    own_threads = max(1, host.torch_num_threads) if report.hardware.measured_on == "cpu" else 1
    return HostSummary(load, host.available_cpus, host.cpu_count, own_threads, probes)


@dataclass(frozen=True)
class HostDifference:
    """B's host against A's: load factor, probe ratio with its interval, and host factor range holding 1."""

    a: HostSummary
    b: HostSummary
    load_factor: float | None
    probe: ProbeRatio | None
    host_low: float
    host_high: float

    @property
    def differs(self) -> bool:
        """Whether the loads or probes say the hosts differ (the range is not just 1)."""
        return self.host_low < 1.0 or self.host_high > 1.0

    @property
    def range_text(self) -> str:
        return f"{self.host_low:.3g}–{self.host_high:.3g}x"

    @property
    def reason(self) -> str:
        """What the loads and the probes say, in B-against-A terms."""
        a, b = self.a, self.b
        if self.load_factor is None:
            load = "the loads were not recorded in both reports"
        else:
            loads = f"A {a.load_1m:.2f} on {a.available_cpus} CPUs, B {b.load_1m:.2f} on {b.available_cpus}"
            load = (
                f"the loads ({loads}) leave host work equally fast"
                if self.load_factor == 1.0
                else f"the loads ({loads}) make B's host work {self.load_factor:.3g}x as long as A's"
            )
        if self.probe is None:
            return f"{load}; the host probes were not recorded in both"
        level = f"{self.probe.confidence_level * 100:g}%"
        interval = f"{self.probe.low:.3g}–{self.probe.high:.3g}" if math.isfinite(self.probe.high) else "unbounded"
        verb = "excludes 1" if self.probe.excludes_one else "holds 1, within the readings' spread"
        return (
            f"{load}; B's host probe reads {self.probe.ratio:.2f}x A's, Hodges-Lehmann {level} interval {interval}, "
            f"which {verb}"
        )


def host_difference(report_a: RunReport, report_b: RunReport, confidence_level: float) -> HostDifference:
    """B's host against A's from the loads and the probes both reports recorded (see the module docstring)."""
    a, b = host_summary(report_a), host_summary(report_b)
    slowdown_a, slowdown_b = a.slowdown, b.slowdown
    load_factor = None if slowdown_a is None or slowdown_b is None else slowdown_b / slowdown_a
    probe = (
        probe_ratio_interval(a.probe_python_loop_ms, b.probe_python_loop_ms, confidence_level)
        if a.probe_python_loop_ms and b.probe_python_loop_ms
        else None
    )
    host_low, host_high = host_factor_range(load_factor, probe)
    return HostDifference(a, b, load_factor, probe, host_low, host_high)


def _report_host_share(report: RunReport, model: str) -> tuple[float, str]:
    """The share (0-1) of ``model``'s step that is host work in one report, and where it comes from."""
    if report.hardware.measured_on == "cpu":
        return 1.0, "a CPU run, where the device is the host"
    estimate = report.recommendation.per_model.get(model) if report.recommendation else None
    split = estimate.step_split if estimate else None
    if split is None or split.compute_ms is None or not split.step_ms > 0:
        return 1.0, "no step split, so all of it may be"
    if split.host_ms is not None:
        host_ms = split.host_ms + (split.launch_ms or 0.0)
        return min(1.0, max(0.0, host_ms / split.step_ms)), "launches and host work in the step split"
    return min(1.0, max(0.0, (split.other_ms or 0.0) / split.step_ms)), "all but the compute in the step split"


def host_share(report_a: RunReport, report_b: RunReport, model: str) -> tuple[float, str]:
    """The share (0-1) of ``model``'s step taken as host work: the larger of A's and B's, and where it comes from."""
    return max(_report_host_share(report_a, model), _report_host_share(report_b, model), key=lambda share: share[0])


@dataclass(frozen=True)
class HostCorrection:
    """One model's ratio interval with the host factor divided out, and the verdict that survives."""

    host_share: float
    share_basis: str
    interval: tuple[float, float]
    corrected_verdict: str
    verdict: str


def correct_for_host(
    measured_verdict: str,
    ratio_interval: tuple[float, float],
    threshold: float,
    difference: HostDifference,
    share: tuple[float, str],
) -> HostCorrection:
    """``measured_verdict`` once ``difference``'s host range is divided out of host share ``share``."""
    interval = host_corrected_interval(*ratio_interval, difference.host_low, difference.host_high, share[0])
    corrected = verdict(interval, threshold)
    # A wider interval decides nothing new; a decisive verdict it does not keep is the host's as much as the code's.
    kept = corrected == measured_verdict or measured_verdict == AMBIGUOUS
    return HostCorrection(share[0], share[1], interval, corrected, measured_verdict if kept else HOST_DIFFERS)


def _band_text(verdict_name: str, threshold: float) -> str:
    return {
        FASTER: f"lies below {1 - threshold:g}",
        SLOWER: f"lies above {1 + threshold:g}",
        SAME: f"lies inside [{1 - threshold:g}, {1 + threshold:g}]",
    }.get(verdict_name, "")


def format_ratio_interval(interval: tuple[float, float]) -> str:
    """A ratio's interval: ``low–high``, ``≤ high`` where only bounded above, or ``unbounded``."""
    low, high = interval
    if not math.isfinite(high):
        return "unbounded"
    return f"≤ {high:.3f}" if low == 0 else f"{low:.3f}–{high:.3f}"


def host_explanation(
    model: str, measured_verdict: str, correction: HostCorrection, difference: HostDifference, threshold: float
) -> str:
    """The sentence on the host behind a verdict: why it was refused, or that it survived the hosts' difference."""
    interval = format_ratio_interval(correction.interval)
    share = f"up to {correction.host_share:.0%} of {model}'s step is host work ({correction.share_basis})"
    if correction.verdict == HOST_DIFFERS:
        return (
            f" Refused ({measured_verdict} as measured): B's host took {difference.range_text} A's time (see Hosts) "
            f"and {share}, so with the host divided out the ratio lies in {interval}, which no longer "
            f"{_band_text(measured_verdict, threshold)}: the host could explain the difference. Rerun both on "
            "equal hosts (an idle machine) to compare the code."
        )
    if measured_verdict == AMBIGUOUS:
        return ""
    return (
        f" B's host took {difference.range_text} A's time (see Hosts), but with the host divided out ({share}) the "
        f"ratio lies in {interval}, which still {_band_text(measured_verdict, threshold)}."
    )


def host_lines(difference: HostDifference) -> list[str]:
    """Plain-text lines on A's host, B's host and how they compare (for the terminal and markdown)."""
    lines = [f"Host {label}: {summary.text}." for label, summary in (("A", difference.a), ("B", difference.b))]
    if difference.differs:
        lines.append(f"Hosts differ: B's host took {difference.range_text} A's time: {difference.reason}.")
    else:
        lines.append(f"Hosts: no difference the reports can show: {difference.reason}.")
    return lines
