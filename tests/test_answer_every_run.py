"""The headline commands end with an answer about the models the user ran (issue 22): `model=tft` and `model=mlp`
decide on themselves, and the verdict line says a quick run is a smoke test."""

import json
import re

import pytest

from gpubench.results import RunReport

#: A quick run of one model on the CPU, without the burn-in (no test here reads it).
QUICK = ("experiment=quick", "hardware=cpu", "tracking.enabled=false", "data.days=3", "hardware.burn_in_max_seconds=0")
#: The quick MLP run with ``epochs=10`` said: the quick preset's own ten, and the override that
#: test_a_run_that_cannot_decide_says_why_and_its_suggested_override_decides runs, so both tests read one process.
MLP_WITH_TEN_EPOCHS = ("model=mlp", "epochs=10")


@pytest.mark.slow
@pytest.mark.parametrize(("model", "args"), [("tft", ("model=tft",)), ("mlp", MLP_WITH_TEN_EPOCHS)], ids=["tft", "mlp"])
def test_a_single_model_quick_run_ends_with_a_recommendation_about_that_model(gpubench_once, model, args):
    job = gpubench_once(*QUICK, *args)
    assert job.completed.returncode == 0, job.completed.stderr[-3000:]
    assert "Recommendation (smoke test: tiny shapes, not your training): LOCAL_GPU_VIABLE" in job.completed.stdout
    report = RunReport.from_dict(json.loads(job.report_path().read_text()))
    recommendation = report.recommendation
    assert recommendation.critical_models == [model] and recommendation.decided_on == [model]
    assert recommendation.decision is not None


@pytest.mark.slow
def test_a_run_that_cannot_decide_says_why_and_its_suggested_override_decides(gpubench_once):
    args = (*QUICK, "model=mlp")
    short = gpubench_once(*args, "epochs=4")
    assert short.completed.returncode == 0, short.completed.stderr[-3000:]
    line = next(line for line in short.completed.stdout.splitlines() if line.startswith("Recommendation"))
    assert ": no decision — " in line and "mlp had 4 measured epochs, fewer than the 10 a decision needs" in line
    overrides = re.findall(r"`([\w.]+=[^`]+)`", line.split("To decide,", 1)[1])
    assert overrides == [MLP_WITH_TEN_EPOCHS[1]]
    decided = gpubench_once(*args, *overrides)
    assert decided.completed.returncode == 0, decided.completed.stderr[-3000:]
    report = RunReport.from_dict(json.loads(decided.report_path().read_text()))
    assert report.recommendation.decision is not None


@pytest.mark.slow
def test_a_run_missing_a_critical_model_names_the_overrides_that_decide(gpubench_once):
    args = (*QUICK, "model=mlp")
    missing = gpubench_once(*args, "decision.critical_models=[tft]")
    assert missing.completed.returncode == 0, missing.completed.stderr[-3000:]
    line = next(line for line in missing.completed.stdout.splitlines() if line.startswith("Recommendation"))
    assert ": no decision — " in line
    assert "`model.names=[mlp,tft]`" in line and "`decision.critical_models=[mlp]`" in line
    decided = gpubench_once(*args, "decision.critical_models=[mlp]")
    assert RunReport.from_dict(json.loads(decided.report_path().read_text())).recommendation.decision is not None
