"""compare knows the host (issue 22, item 6): the Mann-Whitney null distribution by enumeration and against scipy,
the probes' ratio interval as the inversion of scipy's Mann-Whitney test, the fair-share load factor and the
corrected interval worked by hand (``gpubench.stats.host_compare``); each report's host, the host share of a step
and the verdicts (``gpubench.output.compare_host``); and the command on two stored CPU quick reports: identical
runs at loads 3.1 and 6.1 on 2 CPUs, one read 0.53x as fast, must not read FASTER, and at equal loads they do."""

import copy
import itertools
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import stats as sps

from gpubench.cli.compare import main
from gpubench.output.compare import compare_reports
from gpubench.output.compare_host import host_difference, host_share, host_summary
from gpubench.results import RunReport
from gpubench.stats.compare import AMBIGUOUS, FASTER, SAME, SLOWER
from gpubench.stats.host_compare import (
    HOST_DIFFERS,
    ProbeRatio,
    fair_share_slowdown,
    host_corrected_interval,
    host_factor_range,
    mann_whitney_null_cdf,
    probe_ratio_interval,
)

FIXTURES = Path(__file__).parent / "fixtures"
#: ``python -m gpubench experiment=quick hardware=cpu tracking.enabled=false 'model.names=[dqn,ppo]'`` at bf189fb on
#: the 2-CPU development machine: 10 epochs a model in 4 rounds, each round with its host probe, and run.host.
QUICK_REPORT = FIXTURES / "report_main_bf189fb_cpu_quick_dqn_ppo.json"
#: A report from before the host was recorded: no run.host, no rounds.
OLD_REPORT = FIXTURES / "report_main_1092cdc_cpu_quick.json"
#: The issue's pair: identical quick runs at these 1-minute loads on 2 CPUs read "dqn FASTER (ratio 0.527)".
BUSY_LOAD, LESS_BUSY_LOAD, IDLE_LOAD = 6.1, 3.1, 0.3
ISSUE_RATIO = 0.53


def quick_report_data() -> dict[str, Any]:
    return json.loads(QUICK_REPORT.read_text())


def variant(
    data: dict[str, Any], *, load_1m: float | None = None, time_factor: float = 1.0, probe_factor: float = 1.0
) -> dict[str, Any]:
    """A copy of a report's JSON with its 1-minute load set, every epoch time (and round mean) times
    ``time_factor`` and every host probe reading times ``probe_factor``."""
    changed = copy.deepcopy(data)
    if load_1m is not None:
        changed["run"]["host"]["load_average_1m"] = load_1m
    for model in changed["models"].values():
        model["raw_epoch_times_ms"] = [t * time_factor for t in model["raw_epoch_times_ms"]]
        for measured in model.get("rounds", []):
            measured["mean_epoch_ms"] *= time_factor
            measured["host_probe"]["python_loop_ms"] *= probe_factor
    return changed


def as_report(data: dict[str, Any]) -> RunReport:
    return RunReport.from_dict(data)


def write(path: Path, data: dict[str, Any]) -> str:
    path.write_text(json.dumps(data))
    return str(path)


def verdicts_of(report_a: dict[str, Any], report_b: dict[str, Any]) -> dict[str, str]:
    return {c.model: c.verdict for c in compare_reports(as_report(report_a), as_report(report_b))}


# --------------------------------------------------------------------------------------------------- statistics


def enumerated_cdf(m: int, n: int) -> np.ndarray:
    """P(U <= u) by listing every placement of m x's among m + n ranks (U = pairs with the x above the y)."""
    counts = np.zeros(m * n + 1)
    for x_ranks in itertools.combinations(range(m + n), m):
        # An x at rank r has r values below it, of which the x's below it are not y's.
        counts[sum(rank - below for below, rank in enumerate(x_ranks))] += 1
    return np.cumsum(counts) / counts.sum()


@pytest.mark.parametrize(("m", "n"), [(1, 1), (3, 4), (4, 3), (5, 6), (2, 8)])
def test_the_mann_whitney_null_cdf_is_the_enumerated_one(m, n):
    np.testing.assert_allclose(mann_whitney_null_cdf(m, n), enumerated_cdf(m, n), rtol=1e-12, atol=1e-15)


def test_the_mann_whitney_null_cdf_is_scipys_exact_one_sided_p_value():
    # Hand counts for 3 x's and 4 y's: 1, 1, 2, 3, 4, 4, 5, 4, 4, 3, 2, 1, 1 of the 35 placements.
    np.testing.assert_allclose(
        mann_whitney_null_cdf(3, 4) * 35, np.cumsum([1, 1, 2, 3, 4, 4, 5, 4, 4, 3, 2, 1, 1]), rtol=1e-12
    )
    rng = np.random.default_rng(7)
    for m, n in [(6, 9), (10, 10), (12, 5)]:
        cdf = mann_whitney_null_cdf(m, n)
        for _ in range(5):
            x, y = rng.normal(size=m), rng.normal(0.3, size=n)
            u = int(np.sum(x[:, None] > y[None, :]))
            scipy_p = sps.mannwhitneyu(x, y, alternative="less", method="exact").pvalue
            assert cdf[u] == pytest.approx(scipy_p, rel=1e-9)


@pytest.mark.parametrize(
    ("m", "n", "seed", "level"), [(8, 7, 0, 0.95), (4, 4, 1, 0.9), (12, 20, 2, 0.95), (10, 10, 3, 0.99)]
)
def test_the_probe_ratio_interval_is_where_scipys_mann_whitney_test_stops_rejecting(m, n, seed, level):
    rng = np.random.default_rng(seed)
    a, b = np.exp(rng.normal(2.0, 0.25, m)), np.exp(rng.normal(2.3, 0.25, n))
    probe = probe_ratio_interval(a, b, level)
    differences = np.sort((np.log(b)[None, :] - np.log(a)[:, None]).ravel())
    assert probe.ratio == pytest.approx(float(np.exp(np.median(differences))), rel=1e-12)
    assert (probe.count_a, probe.count_b) == (m, n)

    def p_at(shift: float) -> float:
        return sps.mannwhitneyu(np.log(b) - shift, np.log(a), method="exact").pvalue

    # Each end is one of the sorted differences; just beyond it the test rejects at 1 - level, just inside it not.
    low_rank = int(np.argmin(np.abs(differences - math.log(probe.low))))
    high_rank = int(np.argmin(np.abs(differences - math.log(probe.high))))
    assert math.exp(differences[low_rank]) == pytest.approx(probe.low, rel=1e-12)
    assert math.exp(differences[high_rank]) == pytest.approx(probe.high, rel=1e-12)
    assert low_rank == differences.size - 1 - high_rank
    below, above = differences[low_rank - 1 : low_rank + 2], differences[high_rank - 1 : high_rank + 2]
    assert p_at((below[0] + below[1]) / 2) <= 1 - level < p_at((below[1] + below[2]) / 2)
    assert p_at((above[1] + above[2]) / 2) <= 1 - level < p_at((above[0] + above[1]) / 2)


def test_the_hodges_lehmann_ratio_is_the_median_of_the_pairwise_ratios_worked_by_hand():
    # Pairwise b/a: 2/1, 4/1, 2/2, 4/2 = 2, 4, 1, 2: median 2. Two readings a side cannot give a 95% interval
    # (the full range covers 1 - 2/6 of the time), so the interval is unbounded and holds 1.
    probe = probe_ratio_interval([1.0, 2.0], [2.0, 4.0], 0.95)
    assert probe == ProbeRatio(2.0, 0.0, math.inf, 0.95, 2, 2)
    assert not probe.excludes_one


def test_many_readings_use_the_normal_approximation_within_one_order_statistic_of_the_exact_interval(monkeypatch):
    rng = np.random.default_rng(4)
    a, b = np.exp(rng.normal(2.0, 0.3, 100)), np.exp(rng.normal(2.1, 0.3, 101))
    approximate = probe_ratio_interval(a, b, 0.95)
    monkeypatch.setattr("gpubench.stats.host_compare._EXACT_MAX_PAIRS", 10**6)
    exact = probe_ratio_interval(a, b, 0.95)
    differences = np.sort((np.log(b)[None, :] - np.log(a)[:, None]).ravel())
    for got, want in ((approximate.low, exact.low), (approximate.high, exact.high)):
        rank_got, rank_want = np.searchsorted(differences, np.log([got, want]))
        assert abs(int(rank_got) - int(rank_want)) <= 1


def test_bad_probe_readings_or_level_raise():
    with pytest.raises(ValueError, match="finite and positive"):
        probe_ratio_interval([1.0, -2.0], [1.0], 0.95)
    with pytest.raises(ValueError, match="non-empty"):
        probe_ratio_interval([], [1.0], 0.95)
    with pytest.raises(ValueError, match="confidence"):
        probe_ratio_interval([1.0], [1.0], 1.0)


def test_fair_share_slowdown_worked_by_hand():
    # The issue's loads on 2 CPUs with the run's one thread: 4.1 and 7.1 runnable threads share 2 CPUs.
    assert fair_share_slowdown(3.1, 2, 1) == pytest.approx(2.05)
    assert fair_share_slowdown(6.1, 2, 1) == pytest.approx(3.55)
    assert fair_share_slowdown(0.3, 2, 1) == 1.0
    assert fair_share_slowdown(1.0, 2, 1) == 1.0
    assert fair_share_slowdown(2.0, 4, 4) == pytest.approx(1.5)
    with pytest.raises(ValueError, match="cpus"):
        fair_share_slowdown(1.0, 0, 1)


def test_host_factor_range_holds_one_the_load_factor_and_only_a_probe_interval_that_excludes_one():
    excluding = ProbeRatio(1.8, 1.6, 2.0, 0.95, 8, 8)
    holding = ProbeRatio(1.1, 0.9, 1.3, 0.95, 8, 8)
    assert host_factor_range(None, None) == (1.0, 1.0)
    assert host_factor_range(0.577, None) == (0.577, 1.0)
    assert host_factor_range(None, holding) == (1.0, 1.0)
    assert host_factor_range(None, excluding) == (1.0, 2.0)
    assert host_factor_range(0.5, excluding) == (0.5, 2.0)


def test_host_corrected_interval_worked_by_hand():
    # All host work (s = 1): divide by the host factor's ends; half (s = 0.5): by 1 - s + s h; none: unchanged.
    assert host_corrected_interval(0.3, 0.95, 0.5, 1.0, 1.0) == pytest.approx((0.3, 1.9))
    assert host_corrected_interval(0.3, 0.95, 0.5, 1.0, 0.5) == pytest.approx((0.3, 0.95 / 0.75))
    assert host_corrected_interval(1.2, 1.5, 1.0, 2.0, 1.0) == pytest.approx((0.6, 1.5))
    assert host_corrected_interval(0.3, 0.95, 0.5, 2.0, 0.0) == (0.3, 0.95)
    assert host_corrected_interval(-math.inf, math.inf, 0.5, 2.0, 1.0) == (-math.inf, math.inf)
    with pytest.raises(ValueError, match="hold 1"):
        host_corrected_interval(0.3, 0.95, 1.2, 2.0, 1.0)
    with pytest.raises(ValueError, match="host share"):
        host_corrected_interval(0.3, 0.95, 0.5, 1.0, 1.5)


# --------------------------------------------------------------------------------------------------- reports


def test_host_summary_of_a_report_with_rounds_and_of_one_from_before_the_host_was_recorded():
    data = quick_report_data()
    probes = [r["host_probe"]["python_loop_ms"] for m in data["models"].values() for r in m["rounds"]]
    summary = host_summary(as_report(data))
    assert summary.load_1m == data["run"]["host"]["load_average_1m"] and summary.available_cpus == 2
    assert summary.own_threads == data["run"]["host"]["torch_num_threads"] == 1
    assert summary.probe_python_loop_ms == tuple(probes) and len(probes) == 8
    assert f"median {np.median(probes):.3g} ms, range {min(probes):.3g}–{max(probes):.3g} ms over 8 rounds" in (
        summary.text
    )
    old = host_summary(as_report(json.loads(OLD_REPORT.read_text())))
    assert old.text == "load not recorded; host probe not recorded"
    assert old.slowdown is None


def test_a_gpu_run_counts_one_thread_of_its_own_and_its_step_splits_host_share():
    data = quick_report_data()
    data["hardware"]["measured_on"] = "cuda"
    data["run"]["host"]["torch_num_threads"] = 16
    split = data["recommendation"]["per_model"]["dqn"]["step_split"]
    split.update(step_ms=10.0, compute_ms=6.0, other_ms=4.0, launch_ms=1.0, memory_ms=2.0, host_ms=1.0)
    ppo_split = data["recommendation"]["per_model"]["ppo"]["step_split"]
    ppo_split.update(step_ms=10.0, compute_ms=7.0, other_ms=3.0)
    ppo_split.pop("host_ms", None)
    gpu = as_report(data)
    assert host_summary(gpu).own_threads == 1
    # dqn: launches 1 ms + host 1 ms of a 10 ms step; ppo: no host/memory split, so all but the compute.
    assert host_share(gpu, gpu, "dqn") == (pytest.approx(0.2), "launches and host work in the step split")
    assert host_share(gpu, gpu, "ppo") == (pytest.approx(0.3), "all but the compute in the step split")
    # The larger of the two reports' shares: a CPU run is all host work.
    cpu = as_report(quick_report_data())
    assert host_share(gpu, cpu, "dqn")[0] == 1.0 and host_share(cpu, gpu, "dqn")[0] == 1.0
    data["recommendation"]["per_model"]["dqn"]["step_split"] = None
    assert host_share(as_report(data), gpu, "dqn") == (1.0, "no step split, so all of it may be")


def test_the_issues_pair_at_loads_3_1_and_6_1_is_refused_and_at_equal_loads_reads_faster():
    data = quick_report_data()
    busy = variant(data, load_1m=BUSY_LOAD)
    less_busy_faster = variant(data, load_1m=LESS_BUSY_LOAD, time_factor=ISSUE_RATIO)
    comparisons = compare_reports(as_report(busy), as_report(less_busy_faster))
    difference = host_difference(as_report(busy), as_report(less_busy_faster), 0.95)
    # B's host work took 2.05 / 3.55 of A's: the range [0.577, 1].
    assert difference.load_factor == pytest.approx(2.05 / 3.55) and difference.probe is not None
    assert not difference.probe.excludes_one
    assert (difference.host_low, difference.host_high) == pytest.approx((2.05 / 3.55, 1.0))
    for comparison in comparisons:
        assert comparison.result.verdict == FASTER, comparison
        assert comparison.verdict == HOST_DIFFERS, comparison
        low, high = comparison.result.ratio_interval
        assert comparison.host.interval == pytest.approx((low, high / (2.05 / 3.55)))
        assert "Refused (FASTER as measured)" in comparison.explanation
    # The same pair at equal, light loads: the loads and probes agree, so the verdict is the measurement's.
    assert verdicts_of(variant(data, load_1m=IDLE_LOAD), variant(data, load_1m=IDLE_LOAD, time_factor=ISSUE_RATIO)) == {
        "dqn": FASTER,
        "ppo": FASTER,
    }


def test_a_difference_beyond_what_the_hosts_explain_keeps_its_verdict():
    data = quick_report_data()
    comparisons = compare_reports(
        as_report(variant(data, load_1m=BUSY_LOAD)), as_report(variant(data, load_1m=LESS_BUSY_LOAD, time_factor=0.2))
    )
    for comparison in comparisons:
        assert comparison.host is not None and comparison.host.interval[1] < 0.95
        assert comparison.verdict == FASTER
        assert "still lies below 0.95" in comparison.explanation


@pytest.mark.parametrize("load_1m", [IDLE_LOAD, BUSY_LOAD])
def test_identical_reports_read_same_at_any_load(load_1m):
    data = variant(quick_report_data(), load_1m=load_1m)
    assert verdicts_of(data, data) == {"dqn": SAME, "ppo": SAME}


def test_probe_medians_1_8x_apart_are_refused_and_equal_probes_are_not():
    data = variant(quick_report_data(), load_1m=IDLE_LOAD)
    slower_host = variant(data, time_factor=ISSUE_RATIO, probe_factor=1 / 1.8)
    difference = host_difference(as_report(data), as_report(slower_host), 0.95)
    assert difference.load_factor == 1.0
    assert difference.probe.ratio == pytest.approx(1 / 1.8) and difference.probe.excludes_one
    assert verdicts_of(data, slower_host) == {"dqn": HOST_DIFFERS, "ppo": HOST_DIFFERS}
    assert verdicts_of(data, variant(data, time_factor=ISSUE_RATIO)) == {"dqn": FASTER, "ppo": FASTER}
    # The other way round (B's host slower, B's times longer) is refused as SLOWER would be.
    slower = variant(data, time_factor=1 / ISSUE_RATIO, probe_factor=1.8)
    plain = compare_reports(as_report(data), as_report(variant(data, time_factor=1 / ISSUE_RATIO)))
    refused = compare_reports(as_report(data), as_report(slower))
    for measured, corrected in zip(plain, refused, strict=True):
        assert measured.verdict in (SLOWER, AMBIGUOUS)
        assert corrected.verdict == (HOST_DIFFERS if measured.verdict == SLOWER else AMBIGUOUS)


# --------------------------------------------------------------------------------------------------- command


def test_cli_on_the_issues_stored_pair_prints_the_hosts_and_does_not_read_faster(tmp_path):
    data = quick_report_data()
    path_a = write(tmp_path / "a.json", variant(data, load_1m=BUSY_LOAD))
    path_b = write(tmp_path / "b.json", variant(data, load_1m=LESS_BUSY_LOAD, time_factor=ISSUE_RATIO))
    completed = subprocess.run(
        [sys.executable, "-m", "gpubench.compare", path_a, path_b, "--markdown", "-"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    markdown = completed.stdout
    assert "Host A: 1-minute load 6.10 on 2 available CPUs" in markdown
    assert "Host B: 1-minute load 3.10 on 2 available CPUs" in markdown
    assert "host probe (Python loop) median" in markdown and "Hosts differ: B's host took 0.577–1x A's time" in markdown
    rows = [line for line in markdown.splitlines() if line.startswith(("| dqn", "| ppo"))]
    assert len(rows) == 2 and all(row.endswith("| HOST_DIFFERS |") for row in rows)
    assert "FASTER |" not in markdown
    assert "HOST_DIFFERS" in completed.stderr


def test_cli_at_equal_loads_reads_faster_and_says_the_hosts_agree(tmp_path, capsys):
    data = quick_report_data()
    path_a = write(tmp_path / "a.json", variant(data, load_1m=IDLE_LOAD))
    path_b = write(tmp_path / "b.json", variant(data, load_1m=IDLE_LOAD, time_factor=ISSUE_RATIO))
    assert main([path_a, path_b]) == 0
    out = capsys.readouterr().out
    assert "Hosts: no difference the reports can show" in out
    assert "dqn (FASTER)" in out and "ppo (FASTER)" in out and "HOST_DIFFERS" not in out.split("Each measured")[0]


def test_cli_on_reports_from_before_the_host_says_not_recorded_and_compares_as_before(tmp_path, capsys):
    data = quick_report_data()
    for model in data["models"].values():
        model.pop("rounds")
        model.pop("host_probe_explained_share")
    data["run"].pop("host")
    path_a = write(tmp_path / "a.json", data)
    path_b = write(tmp_path / "b.json", variant(data, time_factor=ISSUE_RATIO))
    assert main([path_a, path_b]) == 0
    out = capsys.readouterr().out
    assert out.count("load not recorded; host probe not recorded") == 2
    assert "the loads were not recorded in both reports; the host probes were not recorded in both" in out
    assert "dqn (FASTER)" in out and "ppo (FASTER)" in out


def test_a_same_that_the_hosts_could_explain_is_refused_too():
    # Epoch times steady to 0.2%: a rerun 1% slower reads SAME on equal hosts; at loads 6.1 and 3.1 B's code could
    # be anywhere from as fast to 1.7x as slow, so SAME is not shown either.
    data = quick_report_data()
    rng = np.random.default_rng(5)
    for model in data["models"].values():
        model.pop("rounds")
        model["raw_epoch_times_ms"] = list(100.0 * (1 + 0.002 * rng.standard_normal(20)))
    rerun = variant(data, time_factor=1.01)
    assert verdicts_of(variant(data, load_1m=IDLE_LOAD), variant(rerun, load_1m=IDLE_LOAD)) == {
        "dqn": SAME,
        "ppo": SAME,
    }
    (dqn, _) = compare_reports(
        as_report(variant(data, load_1m=LESS_BUSY_LOAD)), as_report(variant(rerun, load_1m=BUSY_LOAD))
    )
    assert dqn.result.verdict == SAME and dqn.verdict == HOST_DIFFERS
    assert dqn.host.corrected_verdict == AMBIGUOUS
    assert "Refused (SAME as measured)" in dqn.explanation and "no longer lies inside [0.95, 1.05]" in dqn.explanation
