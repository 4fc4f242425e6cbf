"""Mamba-2 forecaster (Dao & Gu 2024, "Transformers are SSMs") of the next ``horizon`` normalised returns.

The SSD recurrence ``h_t = exp(dt_t A) h_{t-1} + dt_t x_t B_t^T``, ``y_t = h_t C_t`` runs step by step in
:func:`ssd_sequential` (the reference) and by chunks in batched matmuls in :func:`ssd_chunked`."""

import functools
import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
import torch.utils.checkpoint
from torch import nn

from gpubench.data.tensors import FeatureTensors
from gpubench.models.mamba2.config import Mamba2Config
from gpubench.results.units import BYTES_PER_MB
from gpubench.workload import ExecutionContext, StepResult, Workload

#: An SSD scan ``(x, dt, A, B, C) -> y`` with the shapes of :func:`ssd_sequential`.
SSDScan = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]

#: Range of the initial step size dt (bars), log-uniform per head: heads span slow and fast time scales.
DT_INIT_MIN = 1e-3
DT_INIT_MAX = 0.1
#: Range of -A at initialisation, uniform per head; A_log = log(-A) is trained.
A_INIT_MIN = 1.0
A_INIT_MAX = 16.0
RMS_EPS = 1e-5
#: Peak over the estimate without recompute: benchmarks/results/2026-12-06-evidence-bench.md.
ESTIMATE_ERROR_ALLOWANCE = 2.0


def ssd_sequential(
    x: torch.Tensor, dt: torch.Tensor, A: torch.Tensor, B: torch.Tensor, C: torch.Tensor
) -> torch.Tensor:
    """The SSD recurrence step by step from a zero state, without the D skip: ``x`` (batch, seqlen, nheads,
    headdim), ``dt`` (batch, seqlen, nheads) > 0, ``A`` (nheads,) < 0, ``B``, ``C`` (batch, seqlen, ngroups,
    d_state); ``y`` shaped like ``x``."""
    batch, seqlen, nheads, headdim = x.shape
    heads_per_group = nheads // B.shape[2]
    B_heads = B.repeat_interleave(heads_per_group, dim=2)
    C_heads = C.repeat_interleave(heads_per_group, dim=2)
    state = x.new_zeros(batch, nheads, headdim, B.shape[3])
    outputs = []
    for t in range(seqlen):
        decay = torch.exp(dt[:, t] * A)[:, :, None, None]
        update = (dt[:, t, :, None] * x[:, t])[:, :, :, None] * B_heads[:, t, :, None, :]
        state = decay * state + update
        outputs.append(torch.einsum("bhpn,bhn->bhp", state, C_heads[:, t]))
    return torch.stack(outputs, dim=1)


def _segment_sum(log_decay: torch.Tensor) -> torch.Tensor:
    """``out[..., i, j] = sum(log_decay[..., j+1 : i+1])`` for ``j <= i``, else ``-inf``, without cancellation."""
    length = log_decay.shape[-1]
    index = torch.arange(length, device=log_decay.device)
    strictly_below = index[:, None] > index[None, :]
    # Row i of column j holds log_decay[i] for i > j, so the cumulative sum down column j is the segment sum.
    sums = torch.where(strictly_below, log_decay[..., :, None], 0.0).cumsum(dim=-2)
    return torch.where(index[:, None] >= index[None, :], sums, -math.inf)


def ssd_chunked(
    x: torch.Tensor, dt: torch.Tensor, A: torch.Tensor, B: torch.Tensor, C: torch.Tensor, chunk_size: int
) -> torch.Tensor:
    """The SSD scan by chunks of ``chunk_size`` steps, as :func:`ssd_sequential`; a ragged tail gets ``dt = 0``."""
    batch, seqlen, nheads, headdim = x.shape
    ngroups, d_state = B.shape[2], B.shape[3]
    heads_per_group = nheads // ngroups
    chunk = min(chunk_size, seqlen)
    pad = -seqlen % chunk
    if pad:
        x = F.pad(x, (0, 0, 0, 0, 0, pad))
        dt = F.pad(dt, (0, 0, 0, pad))
        B = F.pad(B, (0, 0, 0, 0, 0, pad))
        C = F.pad(C, (0, 0, 0, 0, 0, pad))
    nchunks = (seqlen + pad) // chunk

    # Layouts: b batch, c chunk, l/s position in the chunk (output/input), h head, g group, p headdim, n state.
    X = (x * dt[..., None]).unflatten(1, (nchunks, chunk))  # (b, c, l, h, p): dt-scaled inputs
    log_decay = (dt * A).unflatten(1, (nchunks, chunk)).transpose(2, 3)  # (b, c, h, l), all <= 0
    B_chunks = B.unflatten(1, (nchunks, chunk)).permute(0, 1, 3, 2, 4)  # (b, c, g, s, n)
    C_chunks = C.unflatten(1, (nchunks, chunk)).permute(0, 1, 3, 2, 4)  # (b, c, g, l, n)

    # 1. Within each chunk: y_l = sum_{s<=l} L[l, s] (C_l . B_s) X_s, the quadratic (attention-like) form.
    decay = torch.exp(_segment_sum(log_decay))  # (b, c, h, l, s)
    scores_by_group = C_chunks @ B_chunks.transpose(-1, -2)  # (b, c, g, l, s), shared by the group's heads
    # Broadcast over heads, not repeated, to keep the largest tensor at (b, c, h, l, s).
    scores = (decay.unflatten(2, (ngroups, heads_per_group)) * scores_by_group[:, :, :, None]).flatten(2, 3)
    y_within = scores @ X.transpose(2, 3)  # (b, c, h, l, p)

    # 2. Each chunk's own contribution to the state at its end: sum_s L[last, s] X_s B_s^T.
    decay_to_end = decay[..., -1, :].transpose(2, 3)  # (b, c, s, h): the last row of L
    X_to_end = (X * decay_to_end[..., None]).unflatten(3, (ngroups, heads_per_group)).flatten(4, 5)
    chunk_states = B_chunks.transpose(-1, -2) @ X_to_end.transpose(2, 3)  # (b, c, g, n, hg*p)

    # 3. Across chunks: one matmul with the decay matrix over chunks gives each chunk's entering state.
    log_decay_cumsum = log_decay.cumsum(dim=-1)  # (b, c, h, l): from the chunk's start to l inclusive
    chunk_log_decay = log_decay_cumsum[..., -1].transpose(1, 2)  # (b, h, c): over a whole chunk
    states_by_head = (
        chunk_states.unflatten(4, (heads_per_group, headdim))
        .permute(0, 2, 4, 1, 3, 5)
        .reshape(batch, nheads, nchunks, d_state * headdim)
    )  # (b, h, c, n*p)
    chunk_decay = torch.exp(_segment_sum(chunk_log_decay[..., :-1]))  # (b, h, c-1, c-1)
    leaving_states = chunk_decay @ states_by_head[:, :, :-1]  # states leaving chunks 0 .. c-2
    entering_states = F.pad(leaving_states, (0, 0, 1, 0))  # (b, h, c, n*p)

    # 4. The entering state's effect inside the chunk: y_l += exp(sum_{k<=l} dt_k A) C_l h_in.
    entering_by_group = (
        entering_states.unflatten(1, (ngroups, heads_per_group))
        .unflatten(4, (d_state, headdim))
        .permute(0, 3, 1, 4, 2, 5)
        .reshape(batch, nchunks, ngroups, d_state, heads_per_group * headdim)
    )  # (b, c, g, n, hg*p)
    y_from_state = (C_chunks @ entering_by_group).unflatten(4, (heads_per_group, headdim))  # (b, c, g, l, hg, p)
    y_from_state = y_from_state.transpose(2, 3).flatten(3, 4)  # (b, c, l, h, p)
    y = y_from_state * torch.exp(log_decay_cumsum).transpose(2, 3)[..., None] + y_within.transpose(2, 3)
    return y.flatten(1, 2)[:, :seqlen]


class Mamba2Mixer(nn.Module):
    """The Mamba-2 block's causal sequence mixer, ``(batch, seqlen, d_model)`` in and out."""

    def __init__(self, config: Mamba2Config, scan: SSDScan) -> None:
        super().__init__()
        self.scan = scan
        # ``auto`` starts recomputing; the workload turns it off where the memory allows.
        self.recompute = config.recompute_scan != "false"
        self.d_inner = config.expand * config.d_model
        self.headdim = config.headdim
        self.nheads = self.d_inner // config.headdim
        self.ngroups = config.ngroups
        self.d_state = config.d_state
        self.conv_channels = self.d_inner + 2 * config.ngroups * config.d_state
        # One matmul for all five projections: z, (x, B, C), dt.
        self.in_proj = nn.Linear(config.d_model, self.d_inner + self.conv_channels + self.nheads, bias=False)
        self.conv = nn.Conv1d(
            self.conv_channels,
            self.conv_channels,
            kernel_size=config.d_conv,
            groups=self.conv_channels,
            padding=config.d_conv - 1,
        )
        dt_init = torch.exp(
            torch.rand(self.nheads) * (math.log(DT_INIT_MAX) - math.log(DT_INIT_MIN)) + math.log(DT_INIT_MIN)
        )
        self.dt_bias = nn.Parameter(dt_init + torch.log(-torch.expm1(-dt_init)))
        self.A_log = nn.Parameter(torch.log(torch.empty(self.nheads).uniform_(A_INIT_MIN, A_INIT_MAX)))
        self.D = nn.Parameter(torch.ones(self.nheads))
        self.gate_norm_weight = nn.Parameter(torch.ones(self.d_inner))
        self.out_proj = nn.Linear(self.d_inner, config.d_model, bias=False)

    def causal_conv(self, xBC: torch.Tensor) -> torch.Tensor:
        """Depthwise causal convolution + SiLU over time: ``(batch, seqlen, channels)`` in and out."""
        seqlen = xBC.shape[1]
        # Back to time-major memory: x, B and C then slice into views the scan's batched matmuls use uncopied.
        return F.silu(self.conv(xBC.transpose(1, 2))[..., :seqlen]).transpose(1, 2).contiguous()

    def mix(self, x: torch.Tensor, dt: torch.Tensor, B: torch.Tensor, C: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        """The SSD scan, the D skip and the gated RMSNorm: ``(batch, seqlen, d_inner)`` ready for ``out_proj``."""
        y = self.scan(x, dt, -torch.exp(self.A_log), B, C)
        y = (y + x * self.D[:, None]).flatten(-2)
        return F.rms_norm(y * F.silu(z), (self.d_inner,), self.gate_norm_weight, RMS_EPS)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        z, xBC, dt = torch.split(self.in_proj(hidden), [self.d_inner, self.conv_channels, self.nheads], dim=-1)
        x, B, C = torch.split(
            self.causal_conv(xBC), [self.d_inner, self.ngroups * self.d_state, self.ngroups * self.d_state], dim=-1
        )
        x = x.unflatten(-1, (self.nheads, self.headdim))
        dt = F.softplus(dt + self.dt_bias)
        B = B.unflatten(-1, (self.ngroups, self.d_state))
        C = C.unflatten(-1, (self.ngroups, self.d_state))
        if not self.recompute:
            return self.out_proj(self.mix(x, dt, B, C, z))
        # Recomputes the scan's large intermediates in backward; the scan is deterministic (no RNG restore).
        mixed = torch.utils.checkpoint.checkpoint(
            self.mix, x, dt, B, C, z, use_reentrant=False, preserve_rng_state=False
        )
        return self.out_proj(mixed)


class Mamba2Layer(nn.Module):
    """Pre-norm residual block: ``hidden + mixer(RMSNorm(hidden))``."""

    def __init__(self, config: Mamba2Config, scan: SSDScan) -> None:
        super().__init__()
        self.norm = nn.RMSNorm(config.d_model, eps=RMS_EPS)
        self.mixer = Mamba2Mixer(config, scan)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return hidden + self.mixer(self.norm(hidden))


class Mamba2Forecaster(nn.Module):
    """Bar features ``(batch, seq_len, n_features)`` -> the next ``horizon`` returns; ``scan`` defaults to chunked."""

    def __init__(self, n_features: int, config: Mamba2Config, scan: SSDScan | None = None) -> None:
        super().__init__()
        if scan is None:
            scan = functools.partial(ssd_chunked, chunk_size=config.chunk_size)
        self.embed = nn.Linear(n_features, config.d_model)
        self.layers = nn.ModuleList(Mamba2Layer(config, scan) for _ in range(config.n_layers))
        self.final_norm = nn.RMSNorm(config.d_model, eps=RMS_EPS)
        self.head = nn.Linear(config.d_model, config.horizon)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        # The residual stream stays fp32 under autocast: sums of many bf16 block outputs would lose precision.
        hidden = self.embed(features).float()
        for layer in self.layers:
            hidden = layer(hidden)
        return self.head(self.final_norm(hidden[:, -1]))


def zero_forecast_loss(target: torch.Tensor) -> torch.Tensor:
    """The MSE of forecasting 0 (the targets' mean square): the stability monitor's reference loss."""
    return target.detach().float().square().mean()


class Mamba2Workload(Workload):
    """One AdamW step of the Mamba-2 forecaster on a batch of training windows of ``seq_len + horizon`` bars."""

    name = "mamba2"

    @classmethod
    def check_data(cls, config: Mamba2Config, data: FeatureTensors) -> None:
        data.require_window(config.seq_len + config.horizon, "workloads.mamba2.seq_len", config.seq_len)

    def __init__(
        self, config: Mamba2Config, data: FeatureTensors, context: ExecutionContext, *, scan: SSDScan | None = None
    ) -> None:
        self.config = config
        self.data = data
        self.context = context
        self.window_bars = config.seq_len + config.horizon
        self.train_starts = data.window_starts(self.window_bars, "train")
        self._eval_starts = data.evaluation_starts(self.window_bars)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(context.seed)
            self.model = Mamba2Forecaster(data.n_features, config, scan)
        self.model.to(context.device)
        self.recompute, self.recompute_reason, self.memory_mb_without_recompute = self._decide_recompute()
        for layer in self.model.layers:
            layer.mixer.recompute = self.recompute
        self._trained = context.parallel(self.model)
        # Weight decay on matrices only.
        parameters = list(self.model.parameters())
        self.optimizer = torch.optim.AdamW(
            [
                {"params": [p for p in parameters if p.ndim >= 2], "weight_decay": config.weight_decay},
                {"params": [p for p in parameters if p.ndim < 2], "weight_decay": 0.0},
            ],
            lr=config.learning_rate,
            # Fused on every device: the same operations on the CPU as on a GPU.
            fused=True,
        )
        self._loss = context.compile(self._forward_loss)

    @property
    def samples_per_step(self) -> float:
        return float(self.context.batch_size)

    def estimated_memory_mb_without_recompute(self) -> float:
        """The step's memory (MB) without scan recompute: saved activations × batch, plus weights and AdamW state."""
        parameters = list(self.model.parameters())
        parameter_storages = {p.untyped_storage().data_ptr() for p in parameters}
        # Kept alive so addresses are not reused; returning the tensor would leak activations through a C++ cycle.
        saved: dict[int, torch.UntypedStorage] = {}

        def pack(tensor: torch.Tensor) -> None:
            storage = tensor.untyped_storage()
            if storage.data_ptr() not in parameter_storages:
                saved[storage.data_ptr()] = storage

        window = torch.zeros(1, self.config.seq_len, self.data.n_features, device=self.context.device)
        mixers = [layer.mixer for layer in self.model.layers]
        recompute = [mixer.recompute for mixer in mixers]
        for mixer in mixers:
            mixer.recompute = False
        try:
            with torch.autograd.graph.saved_tensors_hooks(pack, lambda packed: packed), self.context.autocast():
                self.model(window)
        finally:
            for mixer, value in zip(mixers, recompute, strict=True):
                mixer.recompute = value
        state_bytes = 4 * sum(p.numel() * p.element_size() for p in parameters)
        return (
            sum(storage.nbytes() for storage in saved.values()) * self.context.batch_size + state_bytes
        ) / BYTES_PER_MB

    def _decide_recompute(self) -> tuple[bool, str, float | None]:
        """Whether to recompute the scan, why, and the memory estimate (MB) without it (None if not estimated)."""
        setting = self.config.recompute_scan
        if setting != "auto":
            return setting == "true", f"workloads.mamba2.recompute_scan={setting}", None
        usable_mb = self.context.usable_vram_mb
        if usable_mb is None:
            return False, "auto: memory is not capped (no VRAM budget), so the scan is kept, not recomputed", None
        needed_mb = self.estimated_memory_mb_without_recompute()
        if needed_mb * ESTIMATE_ERROR_ALLOWANCE > usable_mb:
            reason = (
                f"auto: without recompute the step needs an estimated {needed_mb:,.0f} MB, which with the "
                f"estimate's error (x{ESTIMATE_ERROR_ALLOWANCE:.2f}) is over the usable {usable_mb:,.0f} MB"
            )
            return True, reason, needed_mb
        reason = (
            f"auto: without recompute the step needs an estimated {needed_mb:,.0f} MB, which with the estimate's "
            f"error (x{ESTIMATE_ERROR_ALLOWANCE:.2f}) fits the usable {usable_mb:,.0f} MB, so the scan is kept"
        )
        return False, reason, needed_mb

    def _forward_loss(self, inputs: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        with self.context.autocast():
            prediction = self._trained(inputs)
        return F.mse_loss(prediction.float(), target)

    def train_step(self) -> StepResult:
        if self.context.compile_mode == "reduce-overhead":
            # Else CUDA-graph trees keep the previous step's outputs alive.
            torch.compiler.cudagraph_mark_step_begin()
        starts = self.data.sample_starts(self.train_starts, self.context.batch_size, self.context.generator)
        windows = self.data.gather(starts, self.window_bars)
        inputs = windows[:, : self.config.seq_len]
        target = windows[:, self.config.seq_len :, self.data.target_column]
        loss = self._loss(inputs, target)
        grad_norm = self.context.optimize(loss, self.optimizer, self.model.parameters(), self.config.max_grad_norm)
        # A clone, because under CUDA graphs the compiled output's memory is reused by the next step.
        return StepResult(loss=loss.detach().clone(), grad_norm=grad_norm, reference_loss=zero_forecast_loss(target))

    def evaluate(self) -> torch.Tensor:
        """The mean squared error on one batch of validation windows, without gradients, in eager mode."""
        starts = self.data.sample_starts(self._eval_starts, self.context.batch_size, self.context.generator)
        windows = self.data.gather(starts, self.window_bars)
        with torch.no_grad(), self.context.autocast():
            prediction = self.model(windows[:, : self.config.seq_len])
        return F.mse_loss(prediction.float(), windows[:, self.config.seq_len :, self.data.target_column])

    def modules(self) -> list[nn.Module]:
        return [self.model]

    def describe(self) -> dict[str, object]:
        mixer = self.model.layers[0].mixer
        return {
            **super().describe(),
            "seq_len": self.config.seq_len,
            "horizon": self.config.horizon,
            "d_inner": mixer.d_inner,
            "nheads": mixer.nheads,
            "chunk_size": self.config.chunk_size,
            "recompute_scan": self.recompute,
            "recompute_scan_setting": self.config.recompute_scan,
            "recompute_scan_reason": self.recompute_reason,
            "memory_mb_without_recompute": self.memory_mb_without_recompute,
        }
