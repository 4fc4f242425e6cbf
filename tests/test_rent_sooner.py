"""The local-or-rent comparison in the recommended actions: a rental that finishes in at most half the local lower
bound, even at its own upper bound, is named with both times and its cost, whatever the verdict; and a CPU's
verdict says it is about the CPU."""

from report_factory import cost_row

from gpubench.decision.actions import _sooner_rental_action
from gpubench.decision.advice import Outcome, _verdict_text
from gpubench.decision.config import DecisionConfig
from gpubench.decision.estimate import TotalTime
from gpubench.decision.rule import UPPER_BELOW_LOCAL, Verdict
from gpubench.results import LOCAL_GPU_VIABLE

LOCAL = TotalTime(hours=1.9, lower_hours=1.7, upper_hours=2.1)


def outcome(total: TotalTime, on_cpu: bool = True) -> Outcome:
    verdict = Verdict(
        decision=LOCAL_GPU_VIABLE,
        basis=UPPER_BELOW_LOCAL,
        total=total,
        bound_models=["tft"],
        plain_decision=LOCAL_GPU_VIABLE,
        cannot_run=[],
        missing=[],
        too_few={},
        widened=[],
        epochs_to_settle=None,
    )
    return Outcome(verdict, [], total, 0.95, [], "AMD EPYC" if on_cpu else "NVIDIA H100", on_cpu)


def test_a_rental_much_sooner_than_here_is_named_with_both_times_and_its_cost() -> None:
    # Cheapest first: the A6000 row (5 min, $0.04; upper 6.25 min) is at most half of 1.7 h; the slower T4 row
    # costs less but takes 1.5 h (upper 1.875 h), more than half: it is not the one named.
    rows = [cost_row("t4", 0.03, hours=1.5), cost_row("rtx_a6000", 0.04, hours=5 / 60, provider="verda")]
    (action,) = _sooner_rental_action(outcome(LOCAL), rows)
    assert action == (
        "Renting rtx_a6000 at verda (on-demand) finishes in 5.0 min instead of 1.9 h here on AMD EPYC, for $0.04 "
        "(at most 6.2 min and $0.05; price of 2026-10-29)."
    )


def test_no_rental_is_named_when_none_is_at_least_twice_as_fast_at_its_upper_bound() -> None:
    rows = [cost_row("l4", 0.5, hours=0.7)]  # upper 0.875 h: more than half of the 1.7 h lower bound
    assert _sooner_rental_action(outcome(LOCAL), rows) == []


def test_a_cpus_local_verdict_says_it_is_about_the_cpu_not_a_gpu() -> None:
    text = _verdict_text(outcome(LOCAL), DecisionConfig())
    assert text == (
        "The upper bound is under the 24 h local limit: LOCAL_GPU_VIABLE (here: training on this CPU, AMD EPYC, not "
        "on a GPU)."
    )
    assert _verdict_text(outcome(LOCAL, on_cpu=False), DecisionConfig()).endswith(": LOCAL_GPU_VIABLE.")
