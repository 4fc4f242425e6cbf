"""The machine's history (gpubench/output/history.py), the run-to-run level it gives the bound
(gpubench/stats/run_level.py), the round means' serial test and the bound on ρ (gpubench/stats/serial.py), and the
first epoch after a gap (gpubench/stats/rounds.py)."""

import itertools
import json
import logging
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import statsmodels.formula.api as smf

from gpubench.decision.config import TrainingPlanConfig
from gpubench.decision.estimate import estimate_training_time
from gpubench.errors import ConfigError
from gpubench.hardware.config import HardwareConfig
from gpubench.output.history import MachineHistory, hardware_settings
from gpubench.output.report_file import read_report
from gpubench.results import ValidationCheck
from gpubench.stats.config import StatisticsConfig
from gpubench.stats.epoch_times import summarize_epoch_times
from gpubench.stats.rounds import DRIFT_AR1_BOUND, steady_rounds, two_level_interval
from gpubench.stats.run_level import run_level
from gpubench.stats.serial import MAX_RHO, rho_upper_bound, round_means_lag1, round_serial_test

RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results"


# ---------------------------------------------------------------------------------------------- run-to-run level


def test_the_run_to_run_component_is_statsmodels_mixedlm_reml_on_balanced_runs() -> None:
    # Six runs of eight independent epochs with a level per run: the ANOVA estimate from the runs' means and their
    # within-run variances s_k² / n equals the REML variance of a random intercept per run (balanced, positive).
    rng = np.random.default_rng(7)
    runs, n = 6, 8
    epochs = 100.0 + rng.normal(0.0, 3.0, (runs, 1)) + rng.normal(0.0, 2.0, (runs, n))
    means = epochs.mean(axis=1)
    variances = epochs.var(axis=1, ddof=1) / n / means.mean() ** 2
    level = run_level(means, variances)
    frame = pd.DataFrame({"y": epochs.ravel(), "run": np.repeat(np.arange(runs), n)})
    fit = smf.mixedlm("y ~ 1", frame, groups=frame["run"]).fit(reml=True)
    assert level.relative_variance * means.mean() ** 2 == pytest.approx(float(fit.cov_re.iloc[0, 0]), rel=1e-4)
    assert level.degrees_of_freedom == runs - 1 and level.runs == runs


def test_runs_that_agree_within_their_noise_add_nothing() -> None:
    # Means spread less than their own variances explain: the component is truncated at 0.
    level = run_level([100.0, 100.5, 99.5], [1e-4] * 3)
    assert level.relative_variance == 0.0
    with pytest.raises(ValueError, match="two runs"):
        run_level([100.0], [0.0])


def _rounds(seed: int, level_ms: float = 0.0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return 1000.0 + level_ms + rng.normal(0.0, 5.0, (5, 1)) + rng.normal(0.0, 10.0, (5, 4))


def test_a_history_of_disagreeing_runs_widens_the_bound_and_one_of_agreeing_runs_confirms_it() -> None:
    rounds = _rounds(1)
    alone = two_level_interval(rounds, 0.95, [15.0] * 4)
    relative = alone.variance_of_mean_ms2 / alone.mean_ms**2
    disagreeing = two_level_interval(rounds, 0.95, [15.0] * 4, earlier_runs=[(900.0, relative), (1100.0, relative)])
    assert disagreeing.halfwidth_ms > 3 * alone.halfwidth_ms
    assert disagreeing.history_runs == 3 and disagreeing.run_level_dof == 2
    agreeing = [(alone.mean_ms, relative), (alone.mean_ms * 1.0001, relative)]
    assert two_level_interval(rounds, 0.95, [15.0] * 4, earlier_runs=agreeing).halfwidth_ms == pytest.approx(
        alone.halfwidth_ms
    )
    # One earlier run is too few to estimate a spread: the bound is this run's.
    one = two_level_interval(rounds, 0.95, [15.0] * 4, earlier_runs=[(900.0, relative)])
    assert one.halfwidth_ms == alone.halfwidth_ms and one.history_runs == 0


# ------------------------------------------------------------------------------------------ the history file


def _report():
    """A stored H200 report, each model's statistics computed again from its epochs and rounds."""
    report = read_report(RESULTS / "2026-12-03-h200-s9-default-report.json")
    models = {}
    for name, result in report.models.items():
        if result.statistics is not None and len(result.rounds) > 1:
            stats = summarize_epoch_times(
                result.raw_epoch_times_ms,
                rounds=result.epochs_per_round,
                round_gaps_epochs=result.statistics.rounds.gaps_epochs,
            )
            result = replace(result, statistics=stats)
        models[name] = result
    return replace(report, models=models)


def test_the_history_is_per_machine_and_per_config(tmp_path: Path) -> None:
    report = _report()
    settings = hardware_settings(HardwareConfig())
    history = MachineHistory.open(str(tmp_path), report.hardware, settings)
    assert history.records == ()
    history.record_run(report)
    history.record_run(report)
    again = MachineHistory.open(str(tmp_path), report.hardware, settings)
    measured = {n: r for n, r in report.models.items() if r.statistics and r.statistics.rounds}
    assert measured
    for result in measured.values():
        runs = again.earlier_runs(result)
        assert len(runs) == 2
        assert runs[0][0] == pytest.approx(result.statistics.decision_mean_ms)
    result = next(iter(measured.values()))
    # Another config (a batch of another size, another emulated card), another machine: nothing.
    assert again.earlier_runs(replace(result, batch_size=(result.batch_size or 1) + 1)) == ()
    assert MachineHistory.open(str(tmp_path), report.hardware, {**settings, "name": "t4"}).earlier_runs(result) == ()
    elsewhere = MachineHistory.open(str(tmp_path), replace(report.hardware, uuid="GPU-other"), settings)
    assert elsewhere.path != again.path and elsewhere.earlier_runs(result) == ()
    # A record of another machine copied into this machine's file is not read either.
    line = json.loads(again.path.read_text().splitlines()[0])
    with again.path.open("a") as handle:
        handle.write(json.dumps({**line, "machine": "another"}) + "\n")
    assert len(MachineHistory.open(str(tmp_path), report.hardware, settings).earlier_runs(result)) == 2


def test_a_corrupt_history_is_reported_once_and_ignored(tmp_path: Path, caplog) -> None:
    report = _report()
    settings = hardware_settings(HardwareConfig())
    history = MachineHistory.open(str(tmp_path), report.hardware, settings)
    history.record_run(report)
    with history.path.open("a") as handle:
        handle.write('{"kind": "run", "models": {"dqn": {"mean_step_ms": -1, "relative_variance": 0}}}\n{not json\n')
    history.record_run(report)
    with caplog.at_level(logging.WARNING):
        again = MachineHistory.open(str(tmp_path), report.hardware, settings)
    assert len(again.records) == 2
    warnings = [r for r in caplog.records if "unreadable" in r.getMessage()]
    assert len(warnings) == 1 and "2 unreadable" in warnings[0].getMessage()


def test_an_unwritable_history_does_not_stop_the_run(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    history = MachineHistory.open(str(blocker), _report().hardware, {})
    history.record_run(_report())  # the folder cannot be made under a file: logged, not raised
    assert blocker.read_text() == ""


def test_a_validate_training_is_a_run_of_its_config(tmp_path: Path) -> None:
    report = _report()
    history = MachineHistory.open(str(tmp_path), report.hardware, {})
    name, result = next((n, r) for n, r in report.models.items() if r.statistics and r.statistics.rounds)
    mean_ms = result.statistics.decision_mean_ms
    # 100 epochs predicted at 200 s took 210 s: the mean epoch was 100 ms longer than predicted.
    check = ValidationCheck(
        model=name, status="ok", epochs=100, predicted_s=200.0, lower_s=190, upper_s=209, actual_s=210
    )
    history.record_validation(result, check)
    (record,) = MachineHistory.open(str(tmp_path), report.hardware, {}).records
    assert record["kind"] == "validation" and record["actual_s"] == 210
    (run,) = MachineHistory.open(str(tmp_path), report.hardware, {}).earlier_runs(result)
    assert run == pytest.approx((mean_ms + 100.0, 0.0))


def test_statistics_history_must_be_a_boolean() -> None:
    with pytest.raises(ConfigError, match=r"`statistics\.history`"):
        StatisticsConfig(history="sometimes")  # type: ignore[arg-type]


# --------------------------------------------------------------------------------- serial correlation of rounds


def test_the_round_serial_test_of_three_rounds_by_hand() -> None:
    # Means 1, 2, 4 (mean 7/3): centred -4/3, -1/3, 5/3, squares 42/9. In ninths, the neighbours' products of the
    # orders 1 2 4: 4 - 5 = -1; 1 4 2: -20 - 5 = -25; 2 1 4: 4 - 20 = -16; each reversed alike. The observed order
    # has the largest r1 = -1/42: p = 2/6.
    observed, p_value = round_serial_test([1.0, 2.0, 4.0])
    assert observed == pytest.approx(-1.0 / 42.0)
    orders = [round_means_lag1(np.array(o, dtype=float)) for o in itertools.permutations([1.0, 2.0, 4.0])]
    assert p_value == pytest.approx(np.mean([r >= observed - 1e-12 for r in orders]))
    assert sorted(round(float(r) * 42) for r in orders) == [-25, -25, -16, -16, -1, -1]
    assert p_value == pytest.approx(2 / 6)


def test_rounds_that_drift_together_are_carried_and_widen_the_bound() -> None:
    # Five round means doubling their step: 4 of the 120 orders reach their r1 (p = 1/30), where an even ramp ties
    # with 8 (p = 1/15, not significant at 5%); the interval carries φ and is wider than without it.
    assert round_serial_test([1.0, 2.0, 4.0, 8.0, 16.0])[1] == pytest.approx(4 / 120)
    assert round_serial_test([1.0, 2.0, 3.0, 4.0, 5.0])[1] == pytest.approx(8 / 120)
    rng = np.random.default_rng(3)
    rounds = 1000.0 + 10.0 * 2.0 ** np.arange(5)[:, None] + rng.normal(0.0, 1.0, (5, 4))
    interval = two_level_interval(rounds, 0.95, [15.0] * 4, from_run=True, rho=DRIFT_AR1_BOUND)
    assert interval.round_correlation > 0
    shuffled = two_level_interval(rounds[[2, 0, 4, 1, 3]], 0.95, [15.0] * 4, from_run=True, rho=DRIFT_AR1_BOUND)
    assert shuffled.round_correlation == 0 and interval.halfwidth_ms > shuffled.halfwidth_ms
    assert round_serial_test([1.0, 2.0]) == (0.0, 1.0)


# ------------------------------------------------------------------------------------------------ the bound on ρ


def _ar1(rng: np.random.Generator, n: int, rho: float) -> np.ndarray:
    x = np.empty(n)
    x[0] = rng.standard_normal()
    for t in range(1, n):
        x[t] = rho * x[t - 1] + np.sqrt(1 - rho**2) * rng.standard_normal()
    return x


@pytest.mark.parametrize("rho", [0.0, 0.5, 0.8])
def test_the_upper_bound_on_rho_holds_at_its_level(rho: float) -> None:
    # 400 seeded one-model runs of 5 rounds of 4, 15 epochs apart: the bound (one-sided 97.5% at level 0.95) is
    # under the true ρ at most 2.5% of the time (+ 3 Monte-Carlo standard errors).
    rng = np.random.default_rng(11)
    below = 0
    for _ in range(400):
        x = _ar1(rng, 5 * 19, rho).reshape(5, 19)[:, :4]
        below += rho_upper_bound(list(x), [15.0] * 4, 0.95) < rho - 1e-9
    assert below / 400 <= 0.025 + 3 * np.sqrt(0.025 * 0.975 / 400)


def test_the_bound_on_rho_is_low_for_independent_epochs_and_the_cap_for_a_trend() -> None:
    rng = np.random.default_rng(12)
    assert rho_upper_bound([rng.standard_normal(40)], None, 0.95) < 0.5
    assert rho_upper_bound([np.arange(20.0)], None, 0.95) == MAX_RHO


# ------------------------------------------------------------------------------------- first epoch after a gap


def test_the_first_epoch_after_each_gap_is_left_out_and_paid_once() -> None:
    rounds = [
        np.array([10.0, 10.0, 10.0]),
        np.array([13.0, 10.0, 11.0]),
        np.array([12.0, 11.0]),
        np.array([14.0, 12.0, 12.0]),
    ]
    kept, gaps, excess = steady_rounds(rounds, [5.0, 5.0, 5.0])
    assert [k.tolist() for k in kept] == [[10.0, 10.0, 10.0], [10.0, 11.0], [12.0, 11.0], [12.0, 12.0]]
    assert gaps == [6.0, 5.0, 6.0]  # a round of two keeps both epochs
    assert excess == pytest.approx(((13.0 - 10.5) + (14.0 - 12.0)) / 2)
    times = [t for r in rounds for t in r]
    summary = summarize_epoch_times(times, rounds=[3, 3, 2, 3], round_gaps_epochs=[5.0] * 3)
    assert summary.mean_ms == pytest.approx(np.mean(times))
    assert summary.decision_mean_ms == pytest.approx(98.0 / 9.0)
    assert summary.rounds.first_epoch_excess_ms == pytest.approx(excess)


def test_the_estimate_takes_the_steady_mean_and_adds_the_first_epochs_excess_once() -> None:
    report = _report()
    name, result = next((n, r) for n, r in report.models.items() if r.statistics and r.statistics.rounds)
    stats = result.statistics
    plan = TrainingPlanConfig(samples={name: 1000 * (result.samples_per_epoch or 1.0)})
    estimate = estimate_training_time(name, result, plan)
    assert estimate.mean_epoch_ms == stats.decision_mean_ms
    without = replace(result, statistics=replace(stats, rounds=replace(stats.rounds, first_epoch_excess_ms=0.0)))
    added = estimate.one_off_seconds - estimate_training_time(name, without, plan).one_off_seconds
    assert added == pytest.approx(max(stats.rounds.first_epoch_excess_ms, 0.0) / 1000.0)


def test_the_reasoning_says_whether_the_bounds_rest_on_this_run_or_on_the_machines_history() -> None:
    from gpubench.decision.advice import history_text

    report = _report()
    name, result = next((n, r) for n, r in report.models.items() if r.statistics and r.statistics.rounds)
    assert "hold for the host's speed as seen during this run" in history_text(report.models, [name])
    mean_ms = result.statistics.decision_mean_ms
    told = summarize_epoch_times(
        result.raw_epoch_times_ms,
        rounds=result.epochs_per_round,
        round_gaps_epochs=result.statistics.rounds.gaps_epochs,
        earlier_runs=[(0.8 * mean_ms, 0.0), (1.2 * mean_ms, 0.0)],
    )
    text = history_text({name: replace(result, statistics=told)}, [name])
    assert text.startswith("The bounds carry the spread between this machine's runs") and "2 earlier runs" in text
    assert told.decision_halfwidth_ms > result.statistics.decision_halfwidth_ms
