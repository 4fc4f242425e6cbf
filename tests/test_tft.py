"""Temporal Fusion Transformer: building blocks against the paper's formulas, vectorised paths against plain loops,
causality, the quantile loss on a hand-computed example, the batch contract, and learning a learnable series."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from conftest import make_learnable_features

from gpubench.data.tensors import FeatureTensors
from gpubench.errors import DataError
from gpubench.models.tft.config import TFTConfig
from gpubench.models.tft.workload import (
    GLU,
    GRN,
    InterpretableMultiHeadAttention,
    TemporalFusionTransformer,
    TFTWorkload,
    VariableSelection,
    causal_mask,
    quantile_loss,
)
from gpubench.workload import ExecutionContext

QUANTILES = (0.1, 0.5, 0.9)


def _fill_parameters(module: torch.nn.Module, seed: int) -> None:
    """Overwrite every parameter with fixed N(0, 0.5²) values, layer-norm gains included (so none is trivially 1)."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in module.parameters():
            parameter.copy_(0.5 * torch.randn(parameter.shape, generator=generator))


def _numpy(tensor: torch.Tensor) -> np.ndarray:
    return tensor.detach().double().numpy()


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def _layer_norm(x: np.ndarray, gain: np.ndarray, bias: np.ndarray, eps: float = 1e-5) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    variance = x.var(-1, keepdims=True)
    return (x - mean) / np.sqrt(variance + eps) * gain + bias


def _tiny_model(n_encoder_inputs: int = 4, n_decoder_inputs: int = 2) -> TemporalFusionTransformer:
    torch.manual_seed(0)
    return TemporalFusionTransformer(
        n_encoder_inputs, n_decoder_inputs, n_static_categories=3, hidden_size=8, num_heads=2, n_quantiles=3
    ).eval()


# --------------------------------------------------------------------------------------------------- GLU and GRN


def test_glu_equals_its_formula_on_fixed_weights():
    glu = GLU(input_size=3, output_size=2)
    w4 = np.array([[0.5, -1.0, 0.25], [1.5, 0.0, -0.5]])  # gate weights
    b4 = np.array([0.1, -0.2])
    w5 = np.array([[-0.3, 0.7, 1.0], [0.2, 0.4, -1.2]])  # value weights
    b5 = np.array([0.05, 0.3])
    with torch.no_grad():
        # The layer's first `output_size` rows are the value, the next ones the gate.
        glu.linear.weight.copy_(torch.tensor(np.concatenate([w5, w4])))
        glu.linear.bias.copy_(torch.tensor(np.concatenate([b5, b4])))
    gamma = np.array([[1.0, -2.0, 0.5], [0.0, 0.3, 3.0]])

    expected = _sigmoid(gamma @ w4.T + b4) * (gamma @ w5.T + b5)

    actual = glu(torch.tensor(gamma, dtype=torch.float32))
    np.testing.assert_allclose(_numpy(actual), expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize(
    ("input_size", "output_size", "context_size"),
    [(3, 2, 2), (4, 4, None)],
    ids=["projected-skip-with-context", "identity-skip-without-context"],
)
def test_grn_equals_its_formula_on_fixed_weights(input_size, output_size, context_size):
    hidden_size = 5
    grn = GRN(input_size, hidden_size, output_size, dropout=0.0, context_size=context_size)
    _fill_parameters(grn, seed=1)
    generator = torch.Generator().manual_seed(2)
    a = torch.randn(6, input_size, generator=generator)
    c = None if context_size is None else torch.randn(6, context_size, generator=generator)

    w2, b2 = _numpy(grn.input_layer.weight), _numpy(grn.input_layer.bias)
    w1, b1 = _numpy(grn.hidden_layer.weight), _numpy(grn.hidden_layer.bias)
    gate_linear = grn.gate_add_norm.glu.linear
    w5, w4 = np.split(_numpy(gate_linear.weight), 2)
    b5, b4 = np.split(_numpy(gate_linear.bias), 2)
    pre_activation = _numpy(a) @ w2.T + b2
    if c is not None:
        pre_activation = pre_activation + _numpy(c) @ _numpy(grn.context_layer.weight).T
    eta2 = np.where(pre_activation > 0, pre_activation, np.expm1(pre_activation))  # ELU
    eta1 = eta2 @ w1.T + b1
    gated = _sigmoid(eta1 @ w4.T + b4) * (eta1 @ w5.T + b5)
    skip = _numpy(a) if grn.skip is None else _numpy(a) @ _numpy(grn.skip.weight).T + _numpy(grn.skip.bias)
    norm = grn.gate_add_norm.norm
    expected = _layer_norm(skip + gated, _numpy(norm.weight), _numpy(norm.bias))

    np.testing.assert_allclose(_numpy(grn(a, c)), expected, rtol=1e-5, atol=1e-5)


def test_grn_rejects_a_context_it_was_not_built_for():
    grn = GRN(4, 4, 4)
    with pytest.raises(ValueError, match="without context_size"):
        grn(torch.zeros(2, 4), torch.zeros(2, 4))


# --------------------------------------------------------------------------------------------------- variable selection


def _per_variable_grn(grn: GRN, j: int, x: torch.Tensor) -> torch.Tensor:
    """Variable ``j``'s GRN (identity skip, no context) written out with its own slice of the grouped weights."""
    hidden = F.elu(x @ grn.input_layer.weight[j] + grn.input_layer.bias[j])
    hidden = hidden @ grn.hidden_layer.weight[j] + grn.hidden_layer.bias[j]
    gate_linear = grn.gate_add_norm.glu.linear
    value, gate = (hidden @ gate_linear.weight[j] + gate_linear.bias[j]).chunk(2, dim=-1)
    norm = grn.gate_add_norm.norm
    return F.layer_norm(x + value * torch.sigmoid(gate), x.shape[-1:], norm.weight[j], norm.bias[j])


def test_grouped_variable_selection_equals_a_per_variable_loop():
    n_variables, hidden_size = 5, 6
    selection = VariableSelection(n_variables, hidden_size, dropout=0.0, context_size=3)
    _fill_parameters(selection, seed=3)
    generator = torch.Generator().manual_seed(4)
    embedded = torch.randn(2, 7, n_variables, hidden_size, generator=generator)
    context = torch.randn(2, 1, 3, generator=generator)

    selected, weights = selection(embedded, context)

    expected_weights = torch.softmax(selection.weights_grn(embedded.flatten(-2), context), dim=-1)
    expected = sum(
        expected_weights[..., j : j + 1] * _per_variable_grn(selection.variable_grns, j, embedded[..., j, :])
        for j in range(n_variables)
    )
    torch.testing.assert_close(weights, expected_weights)
    torch.testing.assert_close(selected, expected, rtol=1e-5, atol=1e-5)


def test_selection_weights_are_a_distribution_over_variables():
    selection = VariableSelection(n_variables=4, hidden_size=6, dropout=0.0, context_size=6)
    generator = torch.Generator().manual_seed(5)
    _, weights = selection(torch.randn(3, 9, 4, 6, generator=generator), torch.randn(3, 1, 6, generator=generator))

    assert weights.shape == (3, 9, 4)
    assert bool((weights >= 0).all())
    torch.testing.assert_close(weights.sum(-1), torch.ones(3, 9))


def test_model_selection_weights_sum_to_one_over_encoder_and_decoder_variables():
    model = _tiny_model()
    generator = torch.Generator().manual_seed(6)
    output = model(
        torch.randn(2, 10, 4, generator=generator), torch.randn(2, 3, 2, generator=generator), torch.tensor([0, 2])
    )

    torch.testing.assert_close(output.encoder_weights.sum(-1), torch.ones(2, 10))
    torch.testing.assert_close(output.decoder_weights.sum(-1), torch.ones(2, 3))


# --------------------------------------------------------------------------------------------------- attention


def test_causal_mask_lets_decoder_queries_see_themselves_and_the_past():
    expected = torch.tensor([[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]], dtype=torch.bool)
    assert torch.equal(causal_mask(n_queries=2, n_keys=5), expected)
    assert torch.equal(causal_mask(3, 3), torch.tensor([[1, 0, 0], [1, 1, 0], [1, 1, 1]], dtype=torch.bool))


def test_attention_rows_sum_to_one_and_give_masked_keys_no_weight():
    attention = InterpretableMultiHeadAttention(hidden_size=8, num_heads=4).eval()
    x = torch.randn(2, 6, 8, generator=torch.Generator().manual_seed(7))
    mask = causal_mask(6, 6)

    _, weights = attention(x, x, x, mask)

    assert weights.shape == (2, 6, 6)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 6))
    assert bool((weights[:, ~mask] == 0).all())


def test_attention_equals_a_per_head_loop_with_shared_values():
    hidden_size, num_heads = 8, 4
    head_size = hidden_size // num_heads
    attention = InterpretableMultiHeadAttention(hidden_size, num_heads).eval()
    generator = torch.Generator().manual_seed(8)
    query, key = (
        torch.randn(2, 3, hidden_size, generator=generator),
        torch.randn(2, 7, hidden_size, generator=generator),
    )
    mask = causal_mask(3, 7)

    output, _ = attention(query, key, key, mask)

    values = attention.value_projection(key)
    head_outputs = []
    for h in range(num_heads):
        columns = slice(h * head_size, (h + 1) * head_size)
        q = query @ attention.query_projection.weight[columns].T + attention.query_projection.bias[columns]
        k = key @ attention.key_projection.weight[columns].T + attention.key_projection.bias[columns]
        scores = (q @ k.transpose(-1, -2) / math.sqrt(head_size)).masked_fill(~mask, float("-inf"))
        head_outputs.append(torch.softmax(scores, dim=-1) @ values)
    expected = attention.output_projection(torch.stack(head_outputs).mean(0))
    torch.testing.assert_close(output, expected, rtol=1e-5, atol=1e-6)


def test_masked_attention_output_ignores_later_positions():
    attention = InterpretableMultiHeadAttention(hidden_size=8, num_heads=2).eval()
    x = torch.randn(2, 6, 8, generator=torch.Generator().manual_seed(9))
    changed = x.clone()
    changed[:, 3] += 1.0

    before, _ = attention(x, x, x, causal_mask(6, 6))
    after, _ = attention(changed, changed, changed, causal_mask(6, 6))

    torch.testing.assert_close(after[:, :3], before[:, :3], rtol=0, atol=1e-6)
    assert not torch.allclose(after[:, 3:], before[:, 3:], atol=1e-4)


@pytest.mark.parametrize("changed_step", [1, 2, 3])
def test_model_decoder_outputs_ignore_later_decoder_inputs(changed_step):
    model = _tiny_model()
    generator = torch.Generator().manual_seed(10)
    encoder_inputs = torch.randn(2, 10, 4, generator=generator)
    decoder_inputs = torch.randn(2, 4, 2, generator=generator)
    static_ids = torch.tensor([1, 2])
    changed = decoder_inputs.clone()
    changed[:, changed_step] += 1.0

    with torch.no_grad():
        before = model(encoder_inputs, decoder_inputs, static_ids).quantiles
        after = model(encoder_inputs, changed, static_ids).quantiles

    torch.testing.assert_close(after[:, :changed_step], before[:, :changed_step], rtol=0, atol=1e-6)
    assert not torch.allclose(after[:, changed_step], before[:, changed_step], atol=1e-4)


# --------------------------------------------------------------------------------------------------- loss


def test_quantile_loss_equals_a_hand_computed_example():
    # Sample 1: y = 1, errors y - ŷ = (1, -0.5, -2): 0.1·1 + 0.5·0.5 + 0.1·2 = 0.55.
    # Sample 2: y = -1, errors (1, 0, -1.5): 0.1·1 + 0 + 0.1·1.5 = 0.25. Mean over samples: 0.4.
    prediction = torch.tensor([[0.0, 1.5, 3.0], [-2.0, -1.0, 0.5]])
    target = torch.tensor([1.0, -1.0])

    loss = quantile_loss(prediction, target, torch.tensor(QUANTILES))

    assert loss.dim() == 0
    assert loss.item() == pytest.approx(0.4, abs=1e-7)


# --------------------------------------------------------------------------------------------------- workload


def _workload(features: FeatureTensors, *, batch_size: int = 16, device: str = "cpu", **overrides) -> TFTWorkload:
    settings = {"encoder_length": 24, "decoder_length": 5, "hidden_size": 16, "num_heads": 2, "dropout": 0.0}
    config = TFTConfig(batch_size=batch_size, **{**settings, **overrides})
    torch.manual_seed(0)
    return TFTWorkload(config, features, ExecutionContext(torch.device(device), batch_size=batch_size, seed=0))


def test_batch_holds_past_features_known_future_inputs_and_future_targets(learnable_features):
    workload = _workload(learnable_features)
    batch = workload.sample_batch()
    data = learnable_features

    rows = batch.starts[:, None] + torch.arange(24 + 5)
    assert bool(data.is_train[rows].all())
    assert bool((data.symbol_id[rows] == data.symbol_id[batch.starts][:, None]).all())
    assert torch.equal(batch.encoder_inputs, data.values[rows[:, :24]])
    assert torch.equal(batch.decoder_inputs, data.values[rows[:, 24:]][..., list(data.known_future_columns)])
    assert torch.equal(batch.target, data.values[rows[:, 24:], data.target_column])
    assert torch.equal(batch.static_ids, data.symbol_id[batch.starts])
    assert batch.decoder_inputs.shape == (16, 5, len(data.known_future_columns))


def test_train_step_returns_detached_zero_dimensional_tensors(learnable_features):
    workload = _workload(learnable_features)
    result = workload.train_step()

    for value in (result.loss, result.grad_norm):
        assert value.dim() == 0
        assert not value.requires_grad
        assert bool(torch.isfinite(value))
    assert workload.samples_per_step == 16.0
    assert workload.sample_unit == "window"


def test_workload_needs_known_future_features():
    features = make_learnable_features()
    without_calendar = FeatureTensors(**{**features.__dict__, "known_future_columns": ()})
    with pytest.raises(DataError, match="known-future"):
        _workload(without_calendar)


def test_workload_learns_a_learnable_series(learnable_features):
    workload = _workload(learnable_features, batch_size=32, learning_rate=3e-3)
    losses = [workload.train_step().loss.item() for _ in range(200)]

    first, last = np.mean(losses[:20]), np.mean(losses[-20:])
    assert last <= 0.5 * first, f"loss fell from {first:.4f} to {last:.4f}, less than 50%"


@pytest.mark.gpu
def test_training_runs_on_cuda_and_forecasts_as_on_the_cpu():
    workload = _workload(make_learnable_features(device="cuda"), device="cuda")
    results = [workload.train_step() for _ in range(3)]
    assert all(r.loss.device.type == "cuda" and r.loss.dim() == 0 and bool(torch.isfinite(r.loss)) for r in results)

    model = workload.model.eval()
    batch = workload.sample_batch()
    with torch.no_grad():
        on_cuda = model(batch.encoder_inputs, batch.decoder_inputs, batch.static_ids).quantiles
        model.to("cpu")
        on_cpu = model(batch.encoder_inputs.cpu(), batch.decoder_inputs.cpu(), batch.static_ids.cpu()).quantiles
    # cuDNN may run the LSTM in TF32, so agreement is to about 1e-3, not to fp32 rounding.
    torch.testing.assert_close(on_cuda.cpu(), on_cpu, rtol=1e-2, atol=1e-2)
