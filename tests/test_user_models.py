"""The user-written models gpubench validates itself with on the GPU (benchmarks/user_models/), built small on the
CPU: each runs a training step, and its first loss is the known answer for an untrained classifier, ln(classes)."""

import importlib
import math
import sys
from pathlib import Path

import pytest
import torch

USER_MODELS = Path(__file__).resolve().parents[1] / "benchmarks" / "user_models"


def _load(name: str, monkeypatch: pytest.MonkeyPatch, **environment: str):
    for key, value in environment.items():
        monkeypatch.setenv(key, value)
    monkeypatch.syspath_prepend(str(USER_MODELS))
    sys.modules.pop(name, None)
    return importlib.import_module(name)


def test_the_language_model_starts_at_the_uniform_loss_over_its_vocabulary(monkeypatch):
    module = _load("gpt_language_model", monkeypatch, GPT_LM_LAYERS="2", GPT_LM_WIDTH="96", GPT_LM_CONTEXT="32")
    step = module.build(2, torch.device("cpu"))
    first = float(step())
    # Small initial weights give near-uniform next-token probabilities: cross-entropy ln(50,304) = 10.83.
    assert first == pytest.approx(math.log(module.VOCAB), abs=0.1)
    assert float(step()) < first  # the same pool of batches, fitted a little


def test_the_full_size_language_model_has_gpt2_smalls_124m_parameters(monkeypatch):
    module = _load("gpt_language_model", monkeypatch)
    with torch.device("meta"):
        model = module.LanguageModel()
    assert sum(p.numel() for p in model.parameters()) == pytest.approx(124.08e6, rel=1e-3)


def test_the_resnet_has_resnet50s_parameters_and_trains_a_step(monkeypatch):
    module = _load("resnet50_classifier", monkeypatch, RESNET_IMAGE_SIZE="32")
    # He et al.'s ResNet-50: 25.56 M parameters.
    assert sum(p.numel() for p in module.ResNet50().parameters()) == pytest.approx(25.557e6, rel=1e-3)
    loss = float(module.build(4, torch.device("cpu"))())
    assert math.isfinite(loss) and abs(loss - math.log(module.CLASSES)) < 2.0
