"""Runner decisions that need no device: which batch a model is timed at after a batch-size search."""

import torch

from gpubench.batch_size import choose_batch_size
from gpubench.config import BatchConfig
from gpubench.runner import timed_batch


def decision_with_limit(limit: int):
    """A real search over an oracle that fits every size up to ``limit``."""

    def try_batch(size: int) -> float:
        if size > limit:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory (oracle)")
        return float(size)

    return choose_batch_size(try_batch, BatchConfig(min_size=32, max_size=4096, target_effective=512), None)


def test_supervised_models_train_at_the_largest_fitting_batch_with_accumulation():
    decision = decision_with_limit(96)
    assert decision.batch_size == 96
    batch, accumulation, why = timed_batch(64, decision, is_hyperparameter=False)
    assert (batch, accumulation) == (96, 6)  # ceil(512 / 96)
    assert "largest batch that fits" in why


def test_rl_keeps_its_configured_batch_unless_it_does_not_fit():
    assert timed_batch(256, decision_with_limit(4096), is_hyperparameter=True)[:2] == (256, 1)
    batch, accumulation, why = timed_batch(256, decision_with_limit(200), is_hyperparameter=True)
    assert (batch, accumulation) == (200, 1)
    assert "configured batch size 256" in why
