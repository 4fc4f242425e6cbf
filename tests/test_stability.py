"""Stability monitor (device-side accumulation, no per-step sync), loss trend and verdicts on synthetic runs."""

import json
import math

import numpy as np
import pytest
import torch
from scipy import stats

from gpubench.measure.config import StabilityConfig
from gpubench.measure.stability import (
    EpochHealth,
    StabilityMonitor,
    loss_rel_slope_per_epoch,
    loss_slope_p_value,
    loss_trend,
    stability_verdict,
)
from gpubench.workload import OpCounter, StepResult

NAN, INF = float("nan"), float("inf")

# (loss, grad_norm) of a hand-made epoch; comments say what each step must count as with the default thresholds
# (exploding > 1000, vanishing < 1e-7).
HAND_MADE_STEPS: list[tuple[float, float | None]] = [
    (1.0, 0.5),
    (2.0, 2000.0),  # exploding
    (3.0, 1e-9),  # vanishing
    (NAN, 1.0),  # non-finite loss
    (4.0, INF),  # non-finite gradient (not counted as exploding)
    (INF, NAN),  # non-finite loss and gradient
    (5.0, None),  # no gradient norm reported
    (6.0, 0.0),  # vanishing
    (7.0, 1500.0),  # exploding
]


def step(loss: float, grad_norm: float | None) -> StepResult:
    return StepResult(
        loss=torch.tensor(loss, dtype=torch.float32),
        grad_norm=None if grad_norm is None else torch.tensor(grad_norm, dtype=torch.float32),
    )


def run_epoch(monitor: StabilityMonitor, steps: list[tuple[float, float | None]]) -> EpochHealth:
    for loss, grad_norm in steps:
        monitor.observe(step(loss, grad_norm))
    return monitor.end_epoch()


def test_observe_launches_no_kernel_until_its_chunk_fills() -> None:
    # On a launch-bound GPU step every kernel costs ~10 µs of host time: observe() only keeps references, and the
    # reduction runs once per chunk.
    monitor = StabilityMonitor(StabilityConfig(), "cpu", chunk_steps=8)
    results = [step(float(i), 1.0) for i in range(8)]
    with OpCounter() as ops:
        for result in results[:7]:
            monitor.observe(result)
    assert ops.count == 0
    with OpCounter() as ops:
        monitor.observe(results[7])
    assert ops.count > 0
    assert monitor.end_epoch().mean_loss == pytest.approx(3.5)


def test_half_precision_losses_are_reduced_with_float32_norms() -> None:
    monitor = StabilityMonitor(StabilityConfig(), "cpu", chunk_steps=4)
    for loss in (0.5, 1.5, 2.5):
        monitor.observe(StepResult(torch.tensor(loss, dtype=torch.bfloat16), torch.tensor(2.0)))
    health = monitor.end_epoch()
    assert (health.mean_loss, health.mean_grad_norm, health.steps) == (pytest.approx(1.5), 2.0, 3)


@pytest.mark.parametrize("chunk_steps", [1, 2, 4, 9, 1024])
def test_hand_made_epoch_gives_exact_counts(chunk_steps: int) -> None:
    monitor = StabilityMonitor(StabilityConfig(), "cpu", chunk_steps=chunk_steps)
    health = run_epoch(monitor, HAND_MADE_STEPS)
    assert health.checked
    assert health.steps == 9
    assert health.grad_steps == 8
    assert health.mean_loss == pytest.approx((1 + 2 + 3 + 4 + 5 + 6 + 7) / 7)
    assert health.nonfinite_loss_steps == 2
    assert health.nonfinite_grad_steps == 2
    assert health.exploding_steps == 2
    assert health.vanishing_steps == 2
    assert health.max_grad_norm == 2000.0
    assert health.mean_grad_norm == pytest.approx((0.5 + 2000.0 + 1e-9 + 1.0 + 0.0 + 1500.0) / 6, rel=1e-7)
    assert health.diverged


def test_end_epoch_resets_the_totals() -> None:
    monitor = StabilityMonitor(StabilityConfig(), "cpu", chunk_steps=4)
    run_epoch(monitor, HAND_MADE_STEPS)
    health = run_epoch(monitor, [(0.5, 2.0), (1.5, 4.0)])
    assert health.steps == 2
    assert health.grad_steps == 2
    assert health.mean_loss == pytest.approx(1.0)
    assert health.mean_grad_norm == pytest.approx(3.0)
    assert health.max_grad_norm == pytest.approx(4.0)
    assert (health.nonfinite_loss_steps, health.nonfinite_grad_steps) == (0, 0)
    assert (health.exploding_steps, health.vanishing_steps) == (0, 0)
    assert not health.diverged


def test_epoch_without_gradient_norms_or_steps() -> None:
    monitor = StabilityMonitor(StabilityConfig(), "cpu")
    health = run_epoch(monitor, [(1.0, None), (3.0, None)])
    assert (health.steps, health.grad_steps, health.mean_loss) == (2, 0, 2.0)
    assert health.mean_grad_norm is None
    assert health.max_grad_norm is None
    empty = monitor.end_epoch()
    assert (empty.steps, empty.mean_loss, empty.nonfinite_loss_steps) == (0, None, 0)


def test_thresholds_come_from_the_config() -> None:
    cfg = StabilityConfig(grad_norm_exploding=10.0, grad_norm_vanishing=0.1)
    health = run_epoch(StabilityMonitor(cfg, "cpu"), [(1.0, 11.0), (1.0, 10.0), (1.0, 0.1), (1.0, 0.09)])
    assert (health.exploding_steps, health.vanishing_steps) == (1, 1)


def test_disabled_checks_still_give_the_mean_loss() -> None:
    monitor = StabilityMonitor(StabilityConfig(enabled=False), "cpu", chunk_steps=4)
    health = run_epoch(monitor, HAND_MADE_STEPS)
    assert not health.checked
    assert health.steps == 9
    assert health.mean_loss == pytest.approx(4.0)
    assert health.grad_steps == 0
    assert health.max_grad_norm is None
    assert health.nonfinite_loss_steps is None
    assert health.exploding_steps is None
    assert not health.diverged


_SYNC_METHODS = ("item", "tolist", "numpy", "cpu", "__bool__", "__float__", "__int__", "__index__", "__array__")


def forbid_host_reads(monkeypatch: pytest.MonkeyPatch, allowed_tolist_calls: list[int] | None = None) -> None:
    """Make every tensor-to-host read raise (on CUDA each is a synchronisation); optionally count tolist()."""

    def make_raiser(name: str):
        def raiser(self: torch.Tensor, *args: object, **kwargs: object) -> object:
            raise AssertionError(f"host read Tensor.{name}() during observe()")

        return raiser

    for name in _SYNC_METHODS:
        monkeypatch.setattr(torch.Tensor, name, make_raiser(name))
    if allowed_tolist_calls is not None:
        real_tolist = torch._C.TensorBase.tolist

        def counting_tolist(self: torch.Tensor) -> object:
            allowed_tolist_calls.append(1)
            return real_tolist(self)

        monkeypatch.setattr(torch.Tensor, "tolist", counting_tolist)


@pytest.mark.parametrize("enabled", [True, False])
def test_observe_reads_nothing_back_to_the_host(monkeypatch: pytest.MonkeyPatch, enabled: bool) -> None:
    # chunk_steps=4 makes observe() reduce its held steps twice within these 9 steps, so the reduction is covered.
    monitor = StabilityMonitor(StabilityConfig(enabled=enabled), "cpu", chunk_steps=4)
    steps = [step(loss, grad_norm) for loss, grad_norm in HAND_MADE_STEPS]
    with monkeypatch.context() as patch:
        forbid_host_reads(patch)
        with pytest.raises(AssertionError, match="host read"):
            bool(torch.tensor(1.0) > 0)  # the trap is armed
        for result in steps:
            monitor.observe(result)
    assert monitor.end_epoch().mean_loss == pytest.approx(4.0)


def test_end_epoch_reads_the_device_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monitor = StabilityMonitor(StabilityConfig(), "cpu", chunk_steps=4)
    for loss, grad_norm in HAND_MADE_STEPS:
        monitor.observe(step(loss, grad_norm))
    reads: list[int] = []
    with monkeypatch.context() as patch:
        forbid_host_reads(patch, allowed_tolist_calls=reads)
        health = monitor.end_epoch()
    assert reads == [1]
    assert health.exploding_steps == 2


def test_observe_accepts_losses_that_require_grad_and_other_dtypes() -> None:
    weight = torch.tensor(2.0, requires_grad=True)
    monitor = StabilityMonitor(StabilityConfig(), "cpu")
    monitor.observe(StepResult(loss=weight * 1.5, grad_norm=torch.tensor(3.0, dtype=torch.float64)))
    monitor.observe(StepResult(loss=torch.tensor(1.0, dtype=torch.bfloat16), grad_norm=torch.tensor(5.0)))
    health = monitor.end_epoch()
    assert health.mean_loss == pytest.approx(2.0)
    assert health.mean_grad_norm == pytest.approx(4.0)


def test_observe_accepts_a_gradient_norm_that_requires_grad() -> None:
    weight = torch.tensor(3.0, requires_grad=True)
    monitor = StabilityMonitor(StabilityConfig(), "cpu")
    monitor.observe(StepResult(loss=torch.tensor(1.0), grad_norm=weight * 2.0))
    assert monitor.end_epoch().max_grad_norm == pytest.approx(6.0)


# ------------------------------------------------------------------------------------------------ loss trend


def test_relative_slope_matches_scipy_linregress() -> None:
    losses = [2.3, 2.1, 2.15, 1.9, 1.7, 1.75, 1.6]
    expected = stats.linregress(np.arange(len(losses)), losses).slope / np.mean(losses)
    assert loss_rel_slope_per_epoch(losses) == pytest.approx(expected, rel=1e-12)


def test_relative_slope_of_losses_crossing_zero_uses_the_mean_absolute_loss() -> None:
    losses = [-1.0, -0.5, 0.0, 0.5, 1.0]
    assert loss_rel_slope_per_epoch(losses) == pytest.approx(0.5 / 0.6)
    assert loss_rel_slope_per_epoch([0.0, 0.0, 0.0]) == 0.0


@pytest.mark.parametrize("bad", [[1.0], [], [1.0, float("nan")], [1.0, float("inf"), 2.0]])
def test_relative_slope_needs_two_finite_losses(bad: list[float]) -> None:
    with pytest.raises(ValueError, match="at least two finite epoch losses"):
        loss_rel_slope_per_epoch(bad)


def test_loss_trend_classifies_falling_flat_and_rising_curves() -> None:
    epochs = np.arange(10)
    assert loss_trend(list(2.0 * 0.9**epochs), 0.01) == "DECREASING"
    noise = np.random.default_rng(0).normal(0.0, 0.002, size=10)
    assert loss_trend(list(1.0 + noise), 0.01) == "STABLE"
    assert loss_trend(list(1.0 + 0.05 * epochs), 0.01) == "INCREASING"


def test_loss_trend_threshold_is_strict_and_relative() -> None:
    # slope 0.02 per epoch on a mean loss of 1.0 (losses 0.98, 1.0, 1.02): relative slope exactly 0.02
    rising = [0.98, 1.0, 1.02]
    assert loss_rel_slope_per_epoch(rising) == pytest.approx(0.02)
    assert loss_trend(rising, 0.019) == "INCREASING"
    assert loss_trend(rising, 0.021) == "STABLE"
    # the same absolute slope on a loss 100x larger is a 100x smaller relative slope
    assert loss_rel_slope_per_epoch([99.98, 100.0, 100.02]) == pytest.approx(0.0002)
    assert loss_trend([99.98, 100.0, 100.02], 0.019) == "STABLE"
    assert loss_trend([102.0, 100.0, 98.0], 0.019) == "DECREASING"


# ------------------------------------------------------------------------------------------------ verdicts


def synthetic_run(
    epoch_losses: list[float],
    cfg: StabilityConfig,
    *,
    nan_at: tuple[int, int] | None = None,
    grad_norm: float = 1.0,
    steps_per_epoch: int = 50,
) -> list[EpochHealth]:
    """Epochs whose steps scatter around the given mean losses; optionally one NaN loss at (epoch, step)."""
    rng = np.random.default_rng(1)
    monitor = StabilityMonitor(cfg, "cpu", chunk_steps=16)
    healths = []
    for epoch, mean_loss in enumerate(epoch_losses):
        noise = rng.normal(0.0, 0.01 * mean_loss, size=steps_per_epoch)
        for index in range(steps_per_epoch):
            loss = NAN if nan_at == (epoch, index) else mean_loss + noise[index]
            monitor.observe(step(loss, grad_norm))
        healths.append(monitor.end_epoch())
    return healths


FALLING = [2.0 * 0.85**epoch for epoch in range(8)]
FLAT = [1.0, 1.002, 0.998, 1.001, 0.999, 1.0, 1.001, 0.999]
RISING = [1.0 + 0.1 * epoch for epoch in range(8)]


def test_falling_loss_is_stable_and_decreasing() -> None:
    cfg = StabilityConfig()
    report = stability_verdict(synthetic_run(FALLING, cfg), cfg)
    assert (report.stability, report.loss_trend, report.diverged) == ("STABLE", "DECREASING", False)
    assert report.reasons == []
    assert report.epochs == 8
    assert report.steps == 400
    assert report.loss_rel_slope_per_epoch < -0.01
    assert report.epoch_mean_losses == pytest.approx(FALLING, rel=0.01)


def test_flat_loss_is_stable_with_a_stable_trend() -> None:
    cfg = StabilityConfig()
    report = stability_verdict(synthetic_run(FLAT, cfg), cfg)
    assert (report.stability, report.loss_trend) == ("STABLE", "STABLE")


def test_rising_loss_is_unstable_and_increasing() -> None:
    cfg = StabilityConfig()
    report = stability_verdict(synthetic_run(RISING, cfg), cfg)
    assert (report.stability, report.loss_trend, report.diverged) == ("UNSTABLE", "INCREASING", False)
    assert len(report.reasons) == 1
    assert report.reasons[0].startswith("loss trend INCREASING: +")


def test_injected_nan_is_diverging() -> None:
    cfg = StabilityConfig()
    healths = synthetic_run(FALLING, cfg, nan_at=(3, 17))
    assert [health.diverged for health in healths] == [False, False, False, True, False, False, False, False]
    assert healths[3].nonfinite_loss_steps == 1
    report = stability_verdict(healths, cfg)
    assert (report.stability, report.diverged, report.first_nonfinite_epoch) == ("DIVERGING", True, 3)
    assert report.nonfinite_loss_steps == 1
    assert report.loss_trend == "DECREASING"  # the other 49 steps of epoch 3 still have a finite mean
    assert "non-finite loss (NaN/Inf) in 1 of 400 steps" in report.reasons
    assert "first NaN/Inf in epoch 3" in report.reasons


def test_non_finite_gradient_alone_is_diverging() -> None:
    cfg = StabilityConfig()
    healths = [run_epoch(StabilityMonitor(cfg, "cpu"), [(1.0, 1.0), (0.9, INF)])]
    report = stability_verdict(healths, cfg)
    assert (report.stability, report.nonfinite_grad_steps, report.loss_trend) == ("DIVERGING", 1, None)


def test_exploding_and_vanishing_gradients_are_unstable() -> None:
    cfg = StabilityConfig()
    exploding = stability_verdict(synthetic_run(FALLING, cfg, grad_norm=5000.0), cfg)
    assert exploding.stability == "UNSTABLE"
    assert exploding.exploding_steps == 400
    assert exploding.max_grad_norm == pytest.approx(5000.0)
    assert exploding.reasons == ["exploding gradients: 400 steps with norm > 1000 (max 5e+03)"]
    vanishing = stability_verdict(synthetic_run(FALLING, cfg, grad_norm=1e-9), cfg)
    assert (vanishing.stability, vanishing.vanishing_steps) == ("UNSTABLE", 400)
    assert vanishing.reasons == ["vanishing gradients: 400 steps with norm < 1e-07"]


def test_hand_made_epoch_verdict_lists_every_reason() -> None:
    cfg = StabilityConfig()
    report = stability_verdict([run_epoch(StabilityMonitor(cfg, "cpu"), HAND_MADE_STEPS)], cfg)
    assert report.stability == "DIVERGING"
    assert report.reasons == [
        "non-finite loss (NaN/Inf) in 2 of 9 steps",
        "non-finite gradient norm (NaN/Inf) in 2 of 9 steps",
        "first NaN/Inf in epoch 0",
        "exploding gradients: 2 steps with norm > 1000 (max 2e+03)",
        "vanishing gradients: 2 steps with norm < 1e-07",
    ]
    assert json.loads(json.dumps(report.to_dict()))["nonfinite_grad_steps"] == 2


def test_disabled_checks_give_not_checked_with_a_loss_trend() -> None:
    cfg = StabilityConfig(enabled=False)
    report = stability_verdict(synthetic_run(RISING, cfg, nan_at=(2, 0), grad_norm=5000.0), cfg)
    assert (report.stability, report.diverged, report.loss_trend) == ("NOT_CHECKED", False, "INCREASING")
    assert report.exploding_steps is None
    assert report.nonfinite_loss_steps is None
    assert report.reasons == ["stability.enabled=false: NaN/Inf and gradient-norm checks were skipped"]


def test_verdict_skips_epochs_without_a_finite_mean_loss_for_the_trend() -> None:
    cfg = StabilityConfig()
    all_nan = run_epoch(StabilityMonitor(cfg, "cpu"), [(NAN, 1.0)])
    assert all_nan.mean_loss is None
    healthy = synthetic_run([1.0, 0.8], cfg)
    report = stability_verdict([*healthy, all_nan], cfg)
    assert report.epoch_mean_losses[2] is None
    assert report.loss_trend == "DECREASING"
    assert report.stability == "DIVERGING"
    assert math.isclose(report.loss_rel_slope_per_epoch, loss_rel_slope_per_epoch(report.epoch_mean_losses[:2]))


def test_verdict_needs_an_epoch() -> None:
    with pytest.raises(ValueError, match="at least one epoch"):
        stability_verdict([], StabilityConfig())


def test_slope_p_value_equals_scipy_linregress() -> None:
    from scipy import stats

    losses = [1.00, 0.97, 1.02, 0.95, 0.99, 0.93, 0.96, 0.94]
    assert loss_slope_p_value(losses) == pytest.approx(stats.linregress(range(len(losses)), losses).pvalue, rel=1e-9)
    assert loss_slope_p_value([1.0, 2.0]) is None
    assert loss_slope_p_value([1.0, 2.0, 3.0]) == 0.0


def test_a_slope_through_noise_is_not_a_trend() -> None:
    # Fitted slope +1.6% of the mean per epoch (beyond a 1% threshold), but the noise makes it insignificant.
    noisy = [1.00, 1.30, 0.80, 1.25, 0.95, 1.20]
    assert loss_rel_slope_per_epoch(noisy) > 0.01
    assert loss_slope_p_value(noisy) > 0.05
    assert loss_trend(noisy, 0.01) == "STABLE"
    # The same rise without the noise is a trend.
    assert loss_trend([1.00, 1.02, 1.04, 1.06, 1.08, 1.10], 0.01) == "INCREASING"


# ------------------------------------------------------------------------------------------------ steps without a loss


@pytest.mark.parametrize("chunk_steps", [1, 2, 3, 256])
def test_steps_without_a_loss_are_left_out_of_the_loss_checks(chunk_steps: int) -> None:
    # A user's step (model=custom) may return no loss: those steps count as steps, not as non-finite losses.
    monitor = StabilityMonitor(StabilityConfig(), "cpu", chunk_steps=chunk_steps)
    losses = [1.0, None, NAN, None, 5.0, None, None]
    for loss in losses:
        monitor.observe(StepResult(loss=None if loss is None else torch.tensor(loss), grad_norm=torch.tensor(1.0)))
    health = monitor.end_epoch()
    assert (health.steps, health.loss_steps, health.grad_steps) == (7, 3, 7)
    assert health.nonfinite_loss_steps == 1 and health.mean_loss == pytest.approx(3.0)


def test_an_epoch_with_no_loss_at_all_still_checks_the_gradient_norms() -> None:
    cfg = StabilityConfig()
    monitor = StabilityMonitor(cfg, "cpu", chunk_steps=4)
    healths = []
    for norm in (1.0, 5000.0):
        for _ in range(5):
            monitor.observe(StepResult(loss=None, grad_norm=torch.tensor(norm)))
        healths.append(monitor.end_epoch())
    assert [(h.loss_steps, h.mean_loss, h.exploding_steps) for h in healths] == [(0, None, 0), (0, None, 5)]
    verdict = stability_verdict(healths, cfg)
    # The gradient norms were seen, so the verdict is theirs; the missing loss is stated, not hidden.
    assert verdict.stability == "UNSTABLE" and verdict.loss_trend is None
    assert verdict.reasons[0] == "no loss reported in 10 steps: NaN/Inf losses and the loss trend were not checked"
