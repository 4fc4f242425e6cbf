"""Temporal Fusion Transformer (Lim et al. 2021) forecasting returns over several bars, and its workload.

Follows the paper's figure 2 (equation numbers are the paper's), with per-variable and per-head work batched. Shapes:
B batch, k encoder bars, τ decoder bars, T = k + τ, V variables, d hidden size, H heads, Q quantiles."""

import math
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from gpubench.data.tensors import FeatureTensors
from gpubench.errors import DataError
from gpubench.models.tft.config import TFTConfig
from gpubench.workload import ExecutionContext, StepResult, Workload

#: The static covariate encoders' outputs, in the order the grouped GRN produces them.
_STATIC_CONTEXTS = ("selection", "enrichment", "state_h", "state_c")


class GroupedLinear(nn.Module):
    """``n_groups`` independent linear maps as one batched matmul: ``(..., n_groups, in) -> (..., n_groups, out)``."""

    def __init__(self, n_groups: int, in_features: int, out_features: int) -> None:
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        # nn.Linear's default initialisation, per group: U(-1/sqrt(in), 1/sqrt(in)) for weights and biases.
        bound = 1.0 / math.sqrt(in_features)
        self.weight = nn.Parameter(torch.empty(n_groups, in_features, out_features).uniform_(-bound, bound))
        self.bias = nn.Parameter(torch.empty(n_groups, out_features).uniform_(-bound, bound))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n_groups = self.weight.shape[0]
        leading = x.shape[:-2]
        # (N, groups, in) -> (groups, N, in) is a strided view, which batched GEMM reads without a copy.
        grouped = x.reshape(-1, n_groups, self.in_features).transpose(0, 1)
        out = torch.baddbmm(self.bias.unsqueeze(1), grouped, self.weight)
        return out.transpose(0, 1).reshape(*leading, n_groups, self.out_features)


class GroupedLayerNorm(nn.Module):
    """Layer norm over the last dimension with a separate gain and bias per group: ``(..., n_groups, size)``."""

    def __init__(self, n_groups: int, size: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n_groups, size))
        self.bias = nn.Parameter(torch.zeros(n_groups, size))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.addcmul(self.bias, F.layer_norm(x, self.weight.shape[-1:]), self.weight)


def _linear(in_features: int, out_features: int, n_groups: int | None) -> nn.Module:
    return (
        nn.Linear(in_features, out_features) if n_groups is None else GroupedLinear(n_groups, in_features, out_features)
    )


def _layer_norm(size: int, n_groups: int | None) -> nn.Module:
    return nn.LayerNorm(size) if n_groups is None else GroupedLayerNorm(n_groups, size)


class GLU(nn.Module):
    """Gated linear unit (eq. 5) with input dropout, value and gate from one linear layer (``F.glu``'s layout)."""

    def __init__(self, input_size: int, output_size: int, dropout: float = 0.0, n_groups: int | None = None) -> None:
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.linear = _linear(input_size, 2 * output_size, n_groups)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.glu(self.linear(self.dropout(x)), dim=-1)


class GateAddNorm(nn.Module):
    """Gated skip connection ``LayerNorm(residual + GLU(x))`` (eqs. 2, 17, 19, 22)."""

    def __init__(self, input_size: int, output_size: int, dropout: float = 0.0, n_groups: int | None = None) -> None:
        super().__init__()
        self.glu = GLU(input_size, output_size, dropout, n_groups)
        self.norm = _layer_norm(output_size, n_groups)

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return self.norm(residual + self.glu(x))


class GRN(nn.Module):
    """Gated residual network (eqs. 2-4) with optional context ``c``, per group with ``n_groups``."""

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        output_size: int,
        dropout: float = 0.0,
        context_size: int | None = None,
        n_groups: int | None = None,
    ) -> None:
        super().__init__()
        self.input_layer = _linear(input_size, hidden_size, n_groups)
        self.context_layer = None if context_size is None else nn.Linear(context_size, hidden_size, bias=False)
        self.hidden_layer = _linear(hidden_size, hidden_size, n_groups)
        self.skip = None if input_size == output_size else _linear(input_size, output_size, n_groups)
        self.gate_add_norm = GateAddNorm(hidden_size, output_size, dropout, n_groups)

    def forward(self, a: torch.Tensor, context: torch.Tensor | None = None) -> torch.Tensor:
        hidden = self.input_layer(a)
        if context is not None:
            if self.context_layer is None:
                raise ValueError("this GRN was built without context_size, so it takes no context")
            hidden = hidden + self.context_layer(context)
        hidden = self.hidden_layer(F.elu(hidden))
        residual = a if self.skip is None else self.skip(a)
        return self.gate_add_norm(hidden, residual)


class RealEmbedding(nn.Module):
    """Each real input variable to the hidden size by its own linear map: ``(..., V)`` -> ``(..., V, d)``."""

    def __init__(self, n_variables: int, hidden_size: int) -> None:
        super().__init__()
        # nn.Linear(1, d)'s default initialisation: U(-1, 1) for a single input feature.
        self.weight = nn.Parameter(torch.empty(n_variables, hidden_size).uniform_(-1.0, 1.0))
        self.bias = nn.Parameter(torch.empty(n_variables, hidden_size).uniform_(-1.0, 1.0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.addcmul(self.bias, x.unsqueeze(-1), self.weight)


class VariableSelection(nn.Module):
    """Variable selection network (eqs. 6-8), one grouped GRN across variables."""

    def __init__(self, n_variables: int, hidden_size: int, dropout: float = 0.0, context_size: int | None = None):
        super().__init__()
        self.weights_grn = GRN(n_variables * hidden_size, hidden_size, n_variables, dropout, context_size)
        self.variable_grns = GRN(hidden_size, hidden_size, hidden_size, dropout, n_groups=n_variables)

    def forward(self, embedded: torch.Tensor, context: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Select from ``embedded`` ``(..., V, d)``: the selected input ``(..., d)`` and the weights ``(..., V)``."""
        weights = torch.softmax(self.weights_grn(embedded.flatten(-2), context), dim=-1)
        processed = self.variable_grns(embedded)
        selected = (weights.unsqueeze(-2) @ processed).squeeze(-2)
        return selected, weights


def causal_mask(n_queries: int, n_keys: int, device: torch.device | None = None) -> torch.Tensor:
    """Boolean ``(n_queries, n_keys)`` mask, True where a query (at the last ``n_queries`` positions) may attend."""
    return torch.ones(n_queries, n_keys, dtype=torch.bool, device=device).tril(n_keys - n_queries)


class InterpretableMultiHeadAttention(nn.Module):
    """Interpretable multi-head attention (eqs. 13-16): per-head queries and keys, one shared value."""

    def __init__(self, hidden_size: int, num_heads: int, dropout: float = 0.0) -> None:
        super().__init__()
        if hidden_size % num_heads:
            raise ValueError(f"hidden_size {hidden_size} is not a multiple of num_heads {num_heads}")
        self.num_heads = num_heads
        self.head_size = hidden_size // num_heads
        # All heads' query (and key) projections as one matrix: columns [h·d_attn, (h+1)·d_attn) are head h's.
        self.query_projection = nn.Linear(hidden_size, hidden_size)
        self.key_projection = nn.Linear(hidden_size, hidden_size)
        self.value_projection = nn.Linear(hidden_size, self.head_size)
        self.output_projection = nn.Linear(self.head_size, hidden_size)
        self.dropout = nn.Dropout(dropout)

    def forward(
        self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, mask: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Attend ``query`` to ``key``/``value`` under ``mask``; the output and head-averaged attention."""
        heads = (self.num_heads, self.head_size)
        queries = self.query_projection(query).unflatten(-1, heads).transpose(1, 2)
        keys = self.key_projection(key).unflatten(-1, heads).transpose(1, 2)
        scores = (queries @ keys.transpose(-1, -2)) / math.sqrt(self.head_size)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        attention = self.dropout(torch.softmax(scores, dim=-1)).mean(dim=1)
        output = self.output_projection(attention @ self.value_projection(value))
        return output, attention


class TFTOutput(NamedTuple):
    """The forecast and the interpretable quantities the paper reads off the model."""

    #: ``(B, τ, Q)`` forecast quantiles of the target at each decoder step.
    quantiles: torch.Tensor
    #: ``(B, k, V_encoder)`` selection weights of the past inputs.
    encoder_weights: torch.Tensor
    #: ``(B, τ, V_decoder)`` selection weights of the known-future inputs.
    decoder_weights: torch.Tensor
    #: ``(B, τ, T)`` head-averaged attention of each decoder step over all positions.
    attention: torch.Tensor


def quantile_loss(prediction: torch.Tensor, target: torch.Tensor, quantiles: torch.Tensor) -> torch.Tensor:
    """Pinball loss (eq. 24), summed over ``quantiles`` and averaged over the rest: 0-d, in the target's units."""
    error = target.unsqueeze(-1) - prediction
    return torch.maximum(quantiles * error, (quantiles - 1.0) * error).sum(dim=-1).mean()


class TemporalFusionTransformer(nn.Module):
    """The TFT (figure 2) for one static categorical covariate; ``hidden_size`` a multiple of ``num_heads``."""

    def __init__(
        self,
        n_encoder_inputs: int,
        n_decoder_inputs: int,
        n_static_categories: int,
        hidden_size: int,
        num_heads: int,
        n_quantiles: int,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        d = hidden_size
        self.static_embedding = nn.Embedding(n_static_categories, d)
        self.encoder_embedding = RealEmbedding(n_encoder_inputs, d)
        self.decoder_embedding = RealEmbedding(n_decoder_inputs, d)
        # With one static covariate its selection weight is always 1; kept so another needs no change.
        self.static_selection = VariableSelection(1, d, dropout)
        self.encoder_selection = VariableSelection(n_encoder_inputs, d, dropout, context_size=d)
        self.decoder_selection = VariableSelection(n_decoder_inputs, d, dropout, context_size=d)
        self.static_encoders = GRN(d, d, d, dropout, n_groups=len(_STATIC_CONTEXTS))
        self.encoder_lstm = nn.LSTM(d, d, batch_first=True)
        self.decoder_lstm = nn.LSTM(d, d, batch_first=True)
        self.lstm_gate = GateAddNorm(d, d, dropout)
        self.static_enrichment = GRN(d, d, d, dropout, context_size=d)
        self.attention = InterpretableMultiHeadAttention(d, num_heads, dropout)
        self.attention_gate = GateAddNorm(d, d, dropout)
        self.position_wise = GRN(d, d, d, dropout)
        self.output_gate = GateAddNorm(d, d, dropout)
        self.quantile_head = nn.Linear(d, n_quantiles)

    def forward(
        self, encoder_inputs: torch.Tensor, decoder_inputs: torch.Tensor, static_ids: torch.Tensor
    ) -> TFTOutput:
        """Forecast from past ``(B, k, V_enc)``, known-future ``(B, τ, V_dec)`` and static ``(B,)`` inputs."""
        encoder_length = encoder_inputs.shape[1]
        total_length = encoder_length + decoder_inputs.shape[1]

        static, _ = self.static_selection(self.static_embedding(static_ids).unsqueeze(-2))
        contexts = self.static_encoders(static.unsqueeze(-2).expand(-1, len(_STATIC_CONTEXTS), -1))
        context_selection, context_enrichment, state_h, state_c = contexts.unbind(dim=-2)

        selection_context = context_selection.unsqueeze(1)
        past, encoder_weights = self.encoder_selection(self.encoder_embedding(encoder_inputs), selection_context)
        future, decoder_weights = self.decoder_selection(self.decoder_embedding(decoder_inputs), selection_context)

        # cuDNN's LSTM rejects strided initial states ("hx is not contiguous"), and unbind leaves them strided.
        initial_state = (state_h.unsqueeze(0).contiguous(), state_c.unsqueeze(0).contiguous())
        encoded, state = self.encoder_lstm(past, initial_state)
        decoded, _ = self.decoder_lstm(future, state)
        temporal = self.lstm_gate(torch.cat([encoded, decoded], dim=1), torch.cat([past, future], dim=1))
        enriched = self.static_enrichment(temporal, context_enrichment.unsqueeze(1))

        # Only decoder positions are forecast, so only they query; each sees itself and every earlier position.
        queries = enriched[:, encoder_length:]
        mask = causal_mask(queries.shape[1], total_length, device=queries.device)
        attended, attention = self.attention(queries, enriched, enriched, mask)
        attended = self.attention_gate(attended, queries)
        fused = self.output_gate(self.position_wise(attended), temporal[:, encoder_length:])
        return TFTOutput(self.quantile_head(fused), encoder_weights, decoder_weights, attention)


class TFTBatch(NamedTuple):
    """One training batch of windows, split into what the model may see and what it must forecast."""

    #: ``(B,)`` first row of each window in the feature tensors.
    starts: torch.Tensor
    #: ``(B, k, n_features)`` every feature over the encoder bars.
    encoder_inputs: torch.Tensor
    #: ``(B, τ, n_known)`` only the known-future (calendar) features over the decoder bars.
    decoder_inputs: torch.Tensor
    #: ``(B,)`` int64 symbol of each window.
    static_ids: torch.Tensor
    #: ``(B, τ)`` normalised return over the decoder bars.
    target: torch.Tensor


class TFTWorkload(Workload):
    """One clipped Adam update of a quantile TFT on ``context.batch_size`` training windows."""

    name = "tft"

    @classmethod
    def check_data(cls, config: TFTConfig, data: FeatureTensors) -> None:
        data.require_window(
            config.encoder_length + config.decoder_length, "workloads.tft.encoder_length", config.encoder_length
        )

    def __init__(self, config: TFTConfig, data: FeatureTensors, context: ExecutionContext) -> None:
        if not data.known_future_columns:
            raise DataError(
                "the TFT decoder needs known-future (calendar) features, but the feature tensors list none in "
                "known_future_columns"
            )
        self.config = config
        self.data = data
        self.context = context
        self.window_length = config.encoder_length + config.decoder_length
        self._train_starts = data.window_starts(self.window_length, "train")
        self._eval_starts = data.evaluation_starts(self.window_length)
        self._known_columns = torch.tensor(data.known_future_columns, device=data.device)
        self.model = TemporalFusionTransformer(
            n_encoder_inputs=data.n_features,
            n_decoder_inputs=len(data.known_future_columns),
            n_static_categories=len(data.symbols),
            hidden_size=config.hidden_size,
            num_heads=config.num_heads,
            n_quantiles=len(config.quantiles),
            dropout=config.dropout,
        ).to(context.device)
        self.model.train()
        self._forward = context.compile(context.parallel(self.model))
        self._quantiles = torch.tensor(config.quantiles, dtype=torch.float32, device=context.device)
        # Fused everywhere, so a CPU run counts the launches a GPU would make (gpubench.measure.flops).
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=config.learning_rate, fused=True)

    @property
    def samples_per_step(self) -> float:
        return float(self.context.batch_size)

    def sample_batch(self, valid_starts: torch.Tensor | None = None) -> TFTBatch:
        """Draw windows from ``valid_starts`` (default: training) and split them, on the device."""
        valid_starts = self._train_starts if valid_starts is None else valid_starts
        starts = self.data.sample_starts(valid_starts, self.context.batch_size, self.context.generator)
        windows = self.data.gather(starts, self.window_length)
        encoder_length = self.config.encoder_length
        return TFTBatch(
            starts=starts,
            encoder_inputs=windows[:, :encoder_length],
            decoder_inputs=windows[:, encoder_length:].index_select(-1, self._known_columns),
            static_ids=self.data.symbol_id[starts],
            target=windows[:, encoder_length:, self.data.target_column],
        )

    def train_step(self) -> StepResult:
        batch = self.sample_batch()
        with self.context.autocast():
            output = self._forward(batch.encoder_inputs, batch.decoder_inputs, batch.static_ids)
            # Autocast leaves the head's output in half precision; the loss and its mean are taken in fp32.
            loss = quantile_loss(output.quantiles.float(), batch.target, self._quantiles)
        grad_norm = self.context.optimize(loss, self.optimizer, self.model.parameters(), self.config.max_grad_norm)
        return StepResult(loss=loss.detach(), grad_norm=grad_norm)

    def evaluate(self) -> torch.Tensor:
        """The quantile loss on one batch of validation windows, without gradients and without dropout."""
        batch = self.sample_batch(self._eval_starts)
        self.model.eval()
        try:
            with torch.no_grad(), self.context.autocast():
                output = self.model(batch.encoder_inputs, batch.decoder_inputs, batch.static_ids)
                return quantile_loss(output.quantiles.float(), batch.target, self._quantiles)
        finally:
            self.model.train()

    def modules(self) -> list[nn.Module]:
        return [self.model]

    def describe(self) -> dict[str, object]:
        return {
            **super().describe(),
            "encoder_length_bars": self.config.encoder_length,
            "decoder_length_bars": self.config.decoder_length,
            "hidden_size": self.config.hidden_size,
            "num_heads": self.config.num_heads,
            "encoder_inputs": self.data.n_features,
            "decoder_inputs": len(self.data.known_future_columns),
            "quantiles": list(self.config.quantiles),
        }
