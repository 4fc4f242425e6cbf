"""A rented step that is mostly host work: the reasoning says the rented machine's CPU decides, the actions give this
machine's host probe and the measured remedy, on the stored H100 reports (default models: host-bound DQN and PPO;
the GPT LM: GPU-bound)."""

import json
import statistics
from pathlib import Path

from gpubench.conf import CONF_DIR
from gpubench.decision.actions import host_bound_actions
from gpubench.decision.advice import HOST_BOUND_SHARE, host_bound_models
from gpubench.decision.config import DecisionConfig
from gpubench.decision.recommendation import build_recommendation
from gpubench.hardware.catalog import load_catalog
from gpubench.results import RunReport, WhatIfEstimate

RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results"
CARD = "a100_80gb"


def recommend(folder: str, **decision: object):
    report = RunReport.from_dict(json.loads((RESULTS / folder / "report.json").read_text()))
    config = DecisionConfig(cloud_card=CARD, **decision)
    return report, build_recommendation(report, config, load_catalog(CONF_DIR))


def test_host_bound_models_are_named_with_the_probe_and_a_remedy_to_measure() -> None:
    report, recommendation = recommend("2026-12-06-h100-default")
    row = next(row for row in recommendation.projection if row.card == CARD)
    shares = {name: row.models[name].host_share for name in ("dqn", "ppo")}
    assert all(share is not None and share >= HOST_BOUND_SHARE for share in shares.values())
    assert "the rented machine's CPU decides" in recommendation.reasoning
    assert f"dqn {shares['dqn']:.0%}, ppo {shares['ppo']:.0%}" in recommendation.reasoning
    probes = [r.host_probe.torch_cpu_op_ms for name in ("dqn", "ppo") for r in report.models[name].rounds]
    # The action quotes the rounds' middle probe reading (the upper median for an even count).
    middle = sorted(probes)[len(probes) // 2]
    assert statistics.median_high(probes) == middle
    action = next(a for a in recommendation.recommended_actions if a.startswith("dqn, ppo: a rented"))
    assert f"host probe: {middle:.3g} ms per torch CPU operation" in action
    assert "measure execution.compile=reduce-overhead" in action


def test_a_gpu_bound_model_gets_no_host_sentence() -> None:
    _, recommendation = recommend("2026-12-06-h100-lm")
    row = next(row for row in recommendation.projection if row.card == CARD)
    assert all(model.host_share is None or model.host_share < HOST_BOUND_SHARE for model in row.models.values())
    assert "the rented machine's CPU decides" not in recommendation.reasoning
    assert not any("depends on its machine's CPU" in action for action in recommendation.recommended_actions)


def test_a_measured_remedy_is_quoted_with_its_command() -> None:
    report, recommendation = recommend("2026-12-06-h100-default")
    row = next(row for row in recommendation.projection if row.card == CARD)
    assert host_bound_models(["dqn", "ppo", "mamba2"], row).keys() == {"dqn", "ppo"}
    graphs = WhatIfEstimate(
        model="ppo", variant="reduce-overhead", description="CUDA graphs", status="ok", step_ms=2.0, speedup=2.4
    )
    slower = WhatIfEstimate(model="dqn", variant="compile", description="compiled", status="ok", speedup=0.8)
    actions = list(host_bound_actions(["dqn", "ppo"], report, row, [graphs, slower]))
    assert any(
        a.startswith("ppo:")
        and "CUDA graphs runs the step 2.40x faster (python -m gpubench execution.compile=reduce-overhead)" in a
        for a in actions
    )
    assert any(a.startswith("dqn:") and "measure execution.compile=reduce-overhead" in a for a in actions)
