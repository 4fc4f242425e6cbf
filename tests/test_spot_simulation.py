"""The spot simulation against Daly's closed form, and the shipped lifetimes.

The shipped lifetimes are derived from the spot preemption traces of Zhanghao Wu, Wei-Lin Chiang, Ziming Mao,
Zongheng Yang, Eric Friedman, Scott Shenker and Ion Stoica, "Can't Be Late: Optimizing Spot Instance Savings under
Deadlines", NSDI '24 (2024), https://github.com/skypilot-org/spot-traces.
"""

import json
import math
import re
from importlib import resources

import numpy as np
import pytest

from gpubench.decision.spot import daly_interval_hours, expected_wall_hours
from gpubench.decision.spot_simulation import (
    EmpiricalLifetimes,
    ExponentialLifetimes,
    load_spot_lifetimes,
    load_spot_trace,
    simulate_billed_hours,
    spot_billed_hours,
)

#: (work h, checkpoint h, restart h, mean lifetime h): long and short trainings, cheap and dear checkpoints and
#: restarts, interruptions from one an hour to one in twenty.
DALY_CASES = [
    (100.0, 0.05, 0.1, 10.0),
    (50.0, 0.1, 0.25, 5.0),
    (200.0, 0.02, 0.05, 20.0),
    (24.0, 0.1, 0.2, 2.0),
    (10.0, 0.05, 0.1, 1.0),
]
SIMULATIONS = 20_000


def _never_interrupted() -> EmpiricalLifetimes:
    """Lifetimes of a million hours and more: no training here is ever interrupted."""
    return EmpiricalLifetimes("never", (0.0, 0.5), (1e6, 2e6), 1e6, 1e-6, 0, "test")


@pytest.mark.parametrize(("work", "checkpoint", "restart", "mtbf"), DALY_CASES)
def test_exponential_lifetimes_reproduce_daly_within_2_percent(work, checkpoint, restart, mtbf):
    interval = min(work, daly_interval_hours(checkpoint, mtbf))
    daly = expected_wall_hours(work, interval, checkpoint, restart, mtbf)
    result = simulate_billed_hours(work, interval, checkpoint, restart, ExponentialLifetimes(mtbf), SIMULATIONS, 3)
    # The Monte Carlo error is a small part of the 2% allowed, so a 2% miss is the model's, not the sampling's.
    assert result.standard_error_hours < 0.002 * daly
    assert result.mean_hours == pytest.approx(daly, rel=0.02)
    # Interruptions strike at rate 1/M over the whole wall time.
    assert result.mean_interruptions == pytest.approx(daly / mtbf, rel=0.03)
    assert result.median_hours <= result.p90_hours
    assert result.interval_hours == pytest.approx(interval)


def test_without_checkpoints_an_interruption_restarts_from_the_start_as_daly_says():
    work, restart, mtbf = 2.0, 0.1, 4.0
    daly = expected_wall_hours(work, work, 0.0, restart, mtbf)
    result = spot_billed_hours(work, None, restart, ExponentialLifetimes(mtbf), SIMULATIONS, 5)
    assert result.standard_error_hours < 0.005 * daly
    assert result.mean_hours == pytest.approx(daly, rel=0.02)
    assert result.interval_hours is None


def test_never_interrupted_billed_hours_are_the_work_and_its_checkpoints():
    work, checkpoint = 10.0, 0.1
    result = simulate_billed_hours(work, 3.0, checkpoint, 0.5, _never_interrupted(), 1_000, 0)
    # Segments of 3, 3, 3 and 1 h of work, each ending in a checkpoint.
    assert result.mean_hours == pytest.approx(work + 4 * checkpoint)
    assert result.median_hours == pytest.approx(work + 4 * checkpoint)
    assert result.p90_hours == pytest.approx(work + 4 * checkpoint)
    assert result.mean_interruptions == 0.0
    assert result.standard_error_hours == pytest.approx(0.0, abs=1e-9)


def test_a_seed_fixes_the_result_and_another_seed_changes_it():
    lifetimes = ExponentialLifetimes(3.0)
    first = simulate_billed_hours(20.0, 1.0, 0.05, 0.1, lifetimes, 2_000, 11)
    assert simulate_billed_hours(20.0, 1.0, 0.05, 0.1, lifetimes, 2_000, 11) == first
    assert simulate_billed_hours(20.0, 1.0, 0.05, 0.1, lifetimes, 2_000, 12).mean_hours != first.mean_hours


def test_spot_billed_hours_uses_dalys_interval_for_the_lifetimes_mean():
    lifetimes = load_spot_lifetimes()
    result = spot_billed_hours(50.0, 0.05, 0.1, lifetimes, 2_000, 0)
    assert result.interval_hours == pytest.approx(daly_interval_hours(0.05, lifetimes.mean_hours))
    assert result.mean_lifetime_hours == pytest.approx(lifetimes.mean_hours)
    assert 50.0 < result.median_hours <= result.p90_hours
    assert spot_billed_hours(0.0, 0.05, 0.1, lifetimes, 100, 0).mean_hours == 0.0


def test_a_restart_longer_than_every_lifetime_is_refused_not_looped_forever(monkeypatch):
    monkeypatch.setattr("gpubench.decision.spot_simulation.MAX_INSTANCES", 50)
    short = EmpiricalLifetimes("short", (0.0, 0.5), (0.01, 0.02), 0.01, 50.0, 10, "test")
    with pytest.raises(RuntimeError, match="still unfinished after 50 instances"):
        simulate_billed_hours(5.0, 1.0, 0.05, 1.0, short, 100, 0)


def test_empirical_sampling_follows_the_table_and_its_mean():
    lifetimes = EmpiricalLifetimes("table", (0.0, 0.5, 0.8), (1.0, 3.0, 5.0), 2.0, 0.3, 100, "test")
    samples = lifetimes.sample_hours(np.random.default_rng(0), 400_000)
    assert np.quantile(samples, 0.25) == pytest.approx(2.0, rel=0.01)
    assert np.quantile(samples, 0.65) == pytest.approx(4.0, rel=0.01)
    # Past level 0.8: 5 h plus an exponential excess of mean 2 h, so its median is 5 + 2 ln 2.
    assert np.quantile(samples, 0.9) == pytest.approx(5.0 + 2.0 * math.log(2.0), rel=0.01)
    # Mean: 0.5 × 2 + 0.3 × 4 + 0.2 × (5 + 2) = 3.6 h.
    assert lifetimes.mean_hours == pytest.approx(3.6)
    assert samples.mean() == pytest.approx(3.6, rel=0.01)
    assert samples.min() >= 1.0


@pytest.mark.parametrize(
    ("levels", "hours", "message"),
    [
        ((0.1, 0.5), (1.0, 2.0), "must start at 0"),
        ((0.0, 0.5, 0.4), (1.0, 2.0, 3.0), "must start at 0 and increase"),
        ((0.0, 0.5), (0.0, 2.0), "positive and non-decreasing"),
        ((0.0, 0.5), (2.0, 1.0), "positive and non-decreasing"),
    ],
)
def test_a_bad_table_is_refused_by_name(levels, hours, message):
    with pytest.raises(ValueError, match=f"bad: .*{message}"):
        EmpiricalLifetimes("bad", levels, hours, 1.0, 0.5, 10, "test")


def test_shipped_lifetimes_cite_the_cant_be_late_trace_and_are_well_formed():
    document = json.loads(resources.files("gpubench.prices").joinpath("spot_lifetimes.json").read_text())
    assert "Can't Be Late: Optimizing Spot Instance Savings under Deadlines" in document["citation"]
    assert "Zhanghao Wu" in document["citation"] and "NSDI" in document["citation"]
    assert document["trace_repository"] == "https://github.com/skypilot-org/spot-traces"
    assert len(document["trace_commit"]) == 40
    trace = load_spot_trace()
    assert trace.default_family in trace.families
    for name, family in document["families"].items():
        hours = np.asarray(family["hours_to_interruption"])
        assert hours[0] > 0 and np.all(np.diff(hours) >= 0), name
        assert np.all(np.diff(family["quantile_levels"]) > 0), name
        assert len(hours) >= 20 and family["interruptions"] >= 30, name
        # λ = interruptions / running hours, as derived.
        assert family["interruptions_per_hour"] == pytest.approx(
            family["interruptions"] / family["running_hours"], rel=1e-3
        )
        # The shipped distribution's mean agrees with the trace's 1/λ (both are estimates of one mean lifetime).
        assert trace.families[name].mean_hours == pytest.approx(1.0 / family["interruptions_per_hour"], rel=0.1)
    lifetimes = load_spot_lifetimes()
    assert lifetimes.family == "aws-p3.2xlarge"
    assert "Can't Be Late" in lifetimes.source and lifetimes.interruptions >= 100
    with pytest.raises(KeyError, match=re.escape("no spot lifetimes for family 'tpu-v9'; shipped: aws-p3.2xlarge")):
        load_spot_lifetimes("tpu-v9")
