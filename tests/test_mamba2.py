"""Mamba-2: the chunked SSD scan equals the sequential recurrence, initialisation ranges, causality, learning."""

import dataclasses
import functools
import gc
import math
import warnings

import pytest
import torch
from conftest import make_learnable_features

from gpubench.errors import ConfigError
from gpubench.measure.stability import StabilityMonitor
from gpubench.models.mamba2.config import Mamba2Config
from gpubench.models.mamba2.workload import (
    DT_INIT_MAX,
    DT_INIT_MIN,
    Mamba2Forecaster,
    Mamba2Layer,
    Mamba2Mixer,
    Mamba2Workload,
    ssd_chunked,
    ssd_sequential,
)
from gpubench.stats.config import StabilityConfig
from gpubench.stats.stability import stability_verdict
from gpubench.workload import ExecutionContext

TINY = Mamba2Config(
    batch_size=16,
    seq_len=32,
    horizon=4,
    d_model=16,
    n_layers=2,
    expand=2,
    headdim=8,
    d_state=8,
    chunk_size=8,
    learning_rate=3e-3,
)


def scan_inputs(
    seqlen: int,
    nheads: int,
    ngroups: int,
    dtype: torch.dtype,
    *,
    dt_max: float = 0.3,
    seed: int = 0,
) -> tuple[torch.Tensor, ...]:
    """Random (x, dt, A, B, C) with decays mild enough that state carried across chunks matters."""
    generator = torch.Generator().manual_seed(seed)
    batch, headdim, d_state = 2, 3, 5

    def randn(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=generator, dtype=dtype)

    dt = 0.01 + (dt_max - 0.01) * torch.rand(batch, seqlen, nheads, generator=generator, dtype=dtype)
    A = -(0.05 + 2.0 * torch.rand(nheads, generator=generator, dtype=dtype))
    return (
        randn(batch, seqlen, nheads, headdim),
        dt,
        A,
        randn(batch, seqlen, ngroups, d_state),
        randn(batch, seqlen, ngroups, d_state),
    )


def relative_error(actual: torch.Tensor, expected: torch.Tensor) -> float:
    """Largest absolute difference over the largest absolute expected value."""
    return ((actual.double() - expected.double()).abs().max() / expected.double().abs().max()).item()


# (seqlen, chunk_size, nheads, ngroups): chunk 1, chunk > seqlen, lengths that are not a multiple of the chunk,
# one and several groups.
SCAN_CASES = [
    (16, 4, 4, 1),
    (16, 1, 4, 2),
    (13, 4, 4, 1),
    (13, 5, 4, 2),
    (10, 32, 2, 1),
    (37, 8, 8, 4),
    (64, 16, 4, 4),
]


@pytest.mark.parametrize(("seqlen", "chunk_size", "nheads", "ngroups"), SCAN_CASES)
def test_chunked_equals_sequential_fp64(seqlen: int, chunk_size: int, nheads: int, ngroups: int) -> None:
    x, dt, A, B, C = scan_inputs(seqlen, nheads, ngroups, torch.float64)
    expected = ssd_sequential(x, dt, A, B, C)
    actual = ssd_chunked(x, dt, A, B, C, chunk_size)
    assert actual.shape == (2, seqlen, nheads, 3)
    torch.testing.assert_close(actual, expected, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize(("seqlen", "chunk_size", "nheads", "ngroups"), SCAN_CASES)
def test_chunked_fp32_within_1e_4_of_exact(seqlen: int, chunk_size: int, nheads: int, ngroups: int) -> None:
    inputs64 = scan_inputs(seqlen, nheads, ngroups, torch.float64)
    exact = ssd_sequential(*inputs64)
    chunked32 = ssd_chunked(*(t.float() for t in inputs64), chunk_size)
    assert chunked32.dtype == torch.float32
    assert relative_error(chunked32, exact) < 1e-4


def test_state_carried_across_chunks_reaches_later_chunks() -> None:
    # Guards the inter-chunk path: an input in the first chunk must change outputs three chunks later.
    x, dt, A, B, C = scan_inputs(32, 4, 1, torch.float64)
    changed = x.clone()
    changed[:, 0] += 1.0
    before = ssd_chunked(x, dt, A, B, C, 8)
    after = ssd_chunked(changed, dt, A, B, C, 8)
    assert (after[:, 24:] - before[:, 24:]).abs().max() > 1e-3


def test_chunked_is_finite_and_exact_under_strong_decay() -> None:
    # dt up to 5 with A down to -2 gives cumulative log-decays near -600 in a chunk: exp must never overflow.
    x, dt, A, B, C = scan_inputs(40, 4, 2, torch.float32, dt_max=5.0)
    A = A * 8.0
    exact = ssd_sequential(*(t.double() for t in (x, dt, A, B, C)))
    actual = ssd_chunked(x, dt, A, B, C, 16)
    assert torch.isfinite(actual).all()
    assert relative_error(actual, exact) < 1e-4


@pytest.mark.parametrize(("seqlen", "chunk_size", "ngroups"), [(13, 4, 2), (16, 8, 1), (9, 16, 2)])
def test_gradients_of_chunked_equal_sequential(seqlen: int, chunk_size: int, ngroups: int) -> None:
    inputs = [t.requires_grad_() for t in scan_inputs(seqlen, 4, ngroups, torch.float64)]
    weights = torch.randn(2, seqlen, 4, 3, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    grads_chunked = torch.autograd.grad((ssd_chunked(*inputs, chunk_size) * weights).sum(), inputs)
    grads_sequential = torch.autograd.grad((ssd_sequential(*inputs) * weights).sum(), inputs)
    for name, chunked, sequential in zip(["x", "dt", "A", "B", "C"], grads_chunked, grads_sequential, strict=True):
        assert sequential.abs().max() > 0, name
        torch.testing.assert_close(chunked, sequential, rtol=1e-9, atol=1e-10, msg=f"gradient w.r.t. {name}")


def test_dt_bias_and_A_initialisation_ranges() -> None:
    torch.manual_seed(0)
    config = Mamba2Config(d_model=128, expand=2, headdim=1, d_state=4)
    mixer = Mamba2Mixer(config, ssd_sequential)
    dt = torch.nn.functional.softplus(mixer.dt_bias.detach())
    assert dt.numel() == 256
    assert dt.min() >= DT_INIT_MIN * (1 - 1e-5)
    assert dt.max() <= DT_INIT_MAX * (1 + 1e-5)
    # Log-uniform: half the heads below the geometric midpoint 1e-2, and both ends of the range reached.
    below_midpoint = (dt < math.sqrt(DT_INIT_MIN * DT_INIT_MAX)).float().mean()
    assert 0.35 < below_midpoint < 0.65
    assert dt.min() < 2e-3 and dt.max() > 0.05
    A = -torch.exp(mixer.A_log.detach())
    assert A.min() >= -16.0 and A.max() <= -1.0
    assert A.min() < -14.0 and A.max() > -3.0


def test_causal_conv_sees_only_the_past() -> None:
    torch.manual_seed(0)
    mixer = Mamba2Mixer(TINY, ssd_sequential).double()
    xBC = torch.randn(2, 20, mixer.conv_channels, dtype=torch.float64)
    changed = xBC.clone()
    changed[:, 12] += 1.0
    before, after = mixer.causal_conv(xBC), mixer.causal_conv(changed)
    assert before.shape == xBC.shape
    torch.testing.assert_close(after[:, :12], before[:, :12], rtol=0, atol=1e-12)
    # The change reaches exactly the d_conv outputs that see position 12.
    reached = (after - before).abs().amax(dim=(0, 2)) > 1e-9
    assert reached.tolist() == [t in range(12, 12 + TINY.d_conv) for t in range(20)]


def test_block_is_causal() -> None:
    torch.manual_seed(0)
    config = dataclasses.replace(TINY, ngroups=2)
    layer = Mamba2Layer(config, functools.partial(ssd_chunked, chunk_size=8)).double()
    hidden = torch.randn(2, 30, config.d_model, dtype=torch.float64)
    changed = hidden.clone()
    changed[:, 21] += 1.0
    with torch.no_grad():
        before, after = layer(hidden), layer(changed)
    torch.testing.assert_close(after[:, :21], before[:, :21], rtol=0, atol=1e-12)
    assert (after[:, 21:] - before[:, 21:]).abs().amax(dim=(0, 2)).min() > 1e-9


def test_forecaster_forward_has_no_graph_break() -> None:
    torch.manual_seed(0)
    model = Mamba2Forecaster(6, TINY)
    explanation = torch._dynamo.explain(model)(torch.randn(3, 20, 6))
    assert explanation.graph_break_count == 0
    assert explanation.graph_count == 1


def test_train_step_returns_0d_device_tensors_and_uses_context_batch() -> None:
    context = ExecutionContext(device=torch.device("cpu"), batch_size=5)
    workload = Mamba2Workload(TINY, make_learnable_features(), context)
    result = workload.train_step()
    assert result.loss.ndim == 0 and result.grad_norm is not None and result.grad_norm.ndim == 0
    assert not result.loss.requires_grad
    assert torch.isfinite(result.loss) and result.grad_norm > 0
    assert workload.samples_per_step == 5.0
    assert workload.sample_unit == "window"


def test_workload_learns_the_synthetic_series() -> None:
    context = ExecutionContext(device=torch.device("cpu"), batch_size=TINY.batch_size, seed=0)
    workload = Mamba2Workload(TINY, make_learnable_features(), context)
    losses = torch.stack([workload.train_step().loss for _ in range(60)])
    assert losses[-10:].mean() <= 0.5 * losses[:5].mean()


def test_train_step_reports_the_zero_forecasts_loss_on_the_batch_it_trained_on() -> None:
    features = make_learnable_features()
    context = ExecutionContext(device=torch.device("cpu"), batch_size=6, seed=4)
    workload = Mamba2Workload(TINY, features, context)
    for _ in range(3):
        # The batch the step will draw: the same generator state, read ahead and put back.
        state = context.generator.get_state()
        starts = features.sample_starts(workload.train_starts, 6, context.generator)
        context.generator.set_state(state)
        targets = features.gather(starts, workload.window_bars)[:, TINY.seq_len :, features.target_column]
        result = workload.train_step()
        assert result.reference_loss is not None and result.reference_loss.ndim == 0
        assert float(result.reference_loss) == pytest.approx(float((targets.double() ** 2).mean()), rel=1e-6)


def test_a_short_training_on_a_learnable_series_reads_its_loss_relative_to_the_zero_forecast() -> None:
    cfg = StabilityConfig()
    context = ExecutionContext(device=torch.device("cpu"), batch_size=TINY.batch_size, seed=0)
    workload = Mamba2Workload(TINY, make_learnable_features(), context)
    monitor = StabilityMonitor(cfg, "cpu")
    healths = []
    for _ in range(8):
        for _ in range(8):
            monitor.observe(workload.train_step())
        healths.append(monitor.end_epoch())
    report = stability_verdict(healths, cfg)
    assert report.epoch_relative_losses is not None
    assert report.stability == "STABLE" and report.loss_trend != "INCREASING"
    # The sine is forecastable: the model ends far below the zero forecast's loss (about 0.1 of it).
    assert report.epoch_relative_losses[-1] < 0.25
    assert report.epoch_relative_losses[-1] < 0.5 * report.epoch_relative_losses[0]


def saved_bytes(module: torch.nn.Module, *inputs: torch.Tensor) -> int:
    """Bytes of the distinct storages autograd keeps for backward during ``module(*inputs)``, parameters excluded."""
    parameters = {p.untyped_storage().data_ptr() for p in module.parameters()}
    storages: dict[int, int] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in parameters:
            storages[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        module(*inputs)
    return sum(storages.values())


def test_mixer_keeps_only_projections_and_conv_outputs_for_backward() -> None:
    # The activation budget, pinned: with recompute_scan the mixer keeps its input, the in_proj output, the conv
    # output before and after SiLU, dt before and after softplus, and out_proj's input -- nothing of size
    # chunk x chunk and no copy of x per head. Without it, the scan's intermediates come on top.
    batch, seqlen = 2, 32
    mixer = Mamba2Mixer(TINY, functools.partial(ssd_chunked, chunk_size=TINY.chunk_size))
    hidden = torch.randn(batch, seqlen, TINY.d_model, requires_grad=True)
    d_inner, channels, nheads = mixer.d_inner, mixer.conv_channels, mixer.nheads
    floats_per_position = TINY.d_model + (d_inner + channels + nheads) + channels + 2 * nheads + d_inner
    conv_output_floats = channels * (seqlen + TINY.d_conv - 1)
    budget_bytes = 4 * batch * (seqlen * floats_per_position + conv_output_floats)
    assert saved_bytes(mixer, hidden) == budget_bytes
    mixer.recompute = False
    chunks = seqlen // TINY.chunk_size
    decay_bytes = 4 * batch * chunks * nheads * TINY.chunk_size**2
    assert saved_bytes(mixer, hidden) > budget_bytes + 2 * decay_bytes


def test_recomputed_mixer_equals_the_plain_one() -> None:
    torch.manual_seed(0)
    mixer = Mamba2Mixer(dataclasses.replace(TINY, ngroups=2), functools.partial(ssd_chunked, chunk_size=8)).double()
    hidden = torch.randn(2, 29, TINY.d_model, dtype=torch.float64, requires_grad=True)
    weights = torch.randn(2, 29, TINY.d_model, dtype=torch.float64)
    results = []
    for recompute in (True, False):
        mixer.recompute = recompute
        output = mixer(hidden)
        results.append([output, *torch.autograd.grad((output * weights).sum(), [hidden, *mixer.parameters()])])
    for recomputed, plain in zip(*results, strict=True):
        torch.testing.assert_close(recomputed, plain, rtol=1e-12, atol=1e-12)


# --------------------------------------------------------------------------------------------------- recompute


def _workload(batch_size: int, usable_vram_mb: float | None, recompute_scan: str = "auto") -> Mamba2Workload:
    context = ExecutionContext(device=torch.device("cpu"), batch_size=batch_size, usable_vram_mb=usable_vram_mb)
    return Mamba2Workload(dataclasses.replace(TINY, recompute_scan=recompute_scan), make_learnable_features(), context)


def test_the_memory_estimate_is_the_saved_activations_times_the_batch_plus_the_adamw_state() -> None:
    workload = _workload(batch_size=6, usable_vram_mb=1e6)
    for layer in workload.model.layers:
        layer.mixer.recompute = False
    window = torch.zeros(1, TINY.seq_len, workload.data.n_features)
    per_window_bytes = saved_bytes(workload.model, window)
    state_bytes = 16 * sum(p.numel() for p in workload.model.parameters())  # fp32 weights, grads, two moments
    for layer in workload.model.layers:
        layer.mixer.recompute = True
    expected_mb = (6 * per_window_bytes + state_bytes) / 2**20
    assert workload.estimated_memory_mb_without_recompute() == pytest.approx(expected_mb)
    assert workload.memory_mb_without_recompute == pytest.approx(expected_mb)
    # The estimate turns recompute off for its forward only: the mixers are left as they were.
    assert all(layer.mixer.recompute is True for layer in workload.model.layers)


def _live_tensors() -> int:
    gc.collect()
    # The walk meets torch's deprecated torch.distributed.reduce_op, whose instance check warns.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return sum(1 for obj in gc.get_objects() if isinstance(obj, torch.Tensor))


def test_the_memory_estimate_leaves_no_activation_alive() -> None:
    # Its forward's graph is dropped unrun: every tensor it saved must die with it. A pack hook that returned the
    # tensor tied each saved output to its own grad_fn (a cycle in autograd's C++ graph, invisible to gc), so each
    # estimate leaked its activations; on the H200 672 MB stayed allocated after one Mamba-2 run.
    workload = _workload(batch_size=6, usable_vram_mb=1e6)
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t.shape), lambda packed: packed):
        workload.model(torch.zeros(1, TINY.seq_len, workload.data.n_features))
    workload.estimated_memory_mb_without_recompute()
    before = _live_tensors()
    estimates = [workload.estimated_memory_mb_without_recompute() for _ in range(3)]
    # Other tests' garbage may die meanwhile; a leak would add every saved tensor, three times over.
    assert _live_tensors() - before < len(saved)
    # Nothing kept alive, yet the same figure every time: no storage address is reused within one forward.
    assert estimates == [estimates[0]] * 3


def test_auto_recomputes_only_when_the_step_would_not_fit() -> None:
    # The flip is at the estimate times its error allowance (2): a step may take that much more than estimated.
    needed_mb = _workload(batch_size=6, usable_vram_mb=1e6).memory_mb_without_recompute
    roomy = _workload(batch_size=6, usable_vram_mb=needed_mb * 2 * 1.01)
    tight = _workload(batch_size=6, usable_vram_mb=needed_mb * 2 * 0.99)
    assert roomy.recompute is False and "so the scan is kept" in roomy.recompute_reason
    assert tight.recompute is True and "over the usable" in tight.recompute_reason
    assert all(layer.mixer.recompute for layer in tight.model.layers)
    assert not any(layer.mixer.recompute for layer in roomy.model.layers)
    described = tight.describe()
    assert (described["recompute_scan"], described["recompute_scan_setting"]) == (True, "auto")


def test_no_cap_keeps_the_scan_and_forced_settings_win() -> None:
    uncapped = _workload(batch_size=4, usable_vram_mb=None)
    assert uncapped.recompute is False and uncapped.memory_mb_without_recompute is None
    assert "not capped" in uncapped.recompute_reason
    assert _workload(batch_size=4, usable_vram_mb=None, recompute_scan="true").recompute is True
    assert _workload(batch_size=4, usable_vram_mb=1e-3, recompute_scan="false").recompute is False


def test_a_bad_recompute_setting_names_the_key() -> None:
    with pytest.raises(ConfigError, match=r"workloads\.mamba2\.recompute_scan"):
        Mamba2Config(recompute_scan="sometimes")
