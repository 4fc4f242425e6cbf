"""The headline commands end with an answer about the models the user ran (issue 22): `model=tft` and `model=mlp`
decide on themselves, and the verdict line says a quick run is a smoke test."""

import json

import pytest

from gpubench.results import RunReport


@pytest.mark.slow
@pytest.mark.parametrize("model", ["tft", "mlp"])
def test_a_single_model_quick_run_ends_with_a_recommendation_about_that_model(gpubench_once, model):
    job = gpubench_once("experiment=quick", "hardware=cpu", "tracking.enabled=false", f"model={model}", "data.days=3")
    assert job.completed.returncode == 0, job.completed.stderr[-3000:]
    assert "Recommendation (smoke test: tiny shapes, not your training): LOCAL_GPU_VIABLE" in job.completed.stdout
    report = RunReport.from_dict(json.loads(job.report_path().read_text()))
    recommendation = report.recommendation
    assert recommendation.critical_models == [model] and recommendation.decided_on == [model]
    assert recommendation.decision is not None
