"""Which models decide: one function reads ``decision.critical_models`` and its defaults."""

import pytest

from gpubench.decision.rule import critical_models
from gpubench.models import SEED_MODELS


@pytest.mark.parametrize(
    ("configured", "models_run", "expected"),
    [
        (["tft"], list(SEED_MODELS), ["tft"]),
        ([], ["tft"], ["tft"]),
        ([], list(SEED_MODELS), ["dqn", "ppo"]),
        ([], list(reversed(SEED_MODELS)), ["dqn", "ppo"]),
        ([], ["dqn", "mamba2"], ["dqn", "mamba2"]),
        ([], [*SEED_MODELS, "mlp"], [*SEED_MODELS, "mlp"]),
    ],
)
def test_critical_models_known_answers(configured: list[str], models_run: list[str], expected: list[str]) -> None:
    assert critical_models(configured, models_run) == expected


def test_the_full_default_run_is_the_four_seed_models() -> None:
    assert sorted(SEED_MODELS) == ["dqn", "mamba2", "ppo", "tft"]
