"""Training health: NaN/Inf losses and gradients, exploding and vanishing gradient norms, and the loss trend.

:class:`StabilityMonitor` watches every training step without a device-to-host synchronisation: each step's loss
and gradient norm (0-d device tensors from :class:`~gpubench.workload.StepResult`) are kept by reference, with no
kernel at all, and every ``chunk_steps`` steps they are stacked and reduced into device-side totals (a dozen
kernels per chunk). The host reads the totals once per benchmark epoch. Accumulating each check per step instead
would cost about twenty tiny kernel launches per step, and even one launch per step (writing the pair into a
buffer) cost 13 µs per step on the H200's host, 0.6% of a 2 ms step: a launch-bound workload (a small RL
network's step takes about 3 ms there) is timed by its launches.

:func:`stability_verdict` turns the per-epoch records into the report's ``stability`` and ``loss_trend``.
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch

from gpubench.measure.config import StabilityConfig
from gpubench.results import StabilityReport
from gpubench.stats.regression import fit_slope
from gpubench.workload import StepResult

LossTrend = Literal["DECREASING", "STABLE", "INCREASING"]
Stability = Literal["STABLE", "UNSTABLE", "DIVERGING", "NOT_CHECKED"]

#: Written in place of a missing gradient norm; a norm is >= 0 or NaN/Inf, never -1.
_ABSENT_GRAD_NORM = -1.0
#: Steps whose results are held before they are reduced into the epoch totals. Each held result keeps a 0-d
#: device tensor alive (one 512-byte allocator block), so 256 steps hold about 256 KB.
_DEFAULT_CHUNK_STEPS = 256

# Positions in the device-side totals vector.
_LOSS_SUM, _FINITE_LOSS_STEPS, _GRAD_SUM, _FINITE_GRAD_STEPS, _NONFINITE_GRAD_STEPS, _EXPLODING, _VANISHING = range(7)
_N_TOTALS = 7


@dataclass(frozen=True)
class EpochHealth:
    """One benchmark epoch's health, read from the device once at the epoch's end.

    ``mean_loss`` is the mean of the finite losses (None when no step had one). ``loss_steps`` and ``grad_steps``
    count the steps that reported a loss and a gradient norm; ``mean_grad_norm`` and ``max_grad_norm`` are over the
    finite ones (None when there were none). The other count fields are None when the checks are disabled
    (``checked`` false): only ``steps``, ``loss_steps`` and ``mean_loss`` are measured then.
    """

    steps: int
    mean_loss: float | None
    checked: bool
    loss_steps: int
    grad_steps: int
    mean_grad_norm: float | None
    max_grad_norm: float | None
    nonfinite_loss_steps: int | None
    nonfinite_grad_steps: int | None
    exploding_steps: int | None
    vanishing_steps: int | None

    @property
    def diverged(self) -> bool:
        """True when a NaN/Inf loss or gradient norm was seen (the runner stops the model as ``diverged``)."""
        return bool(self.nonfinite_loss_steps) or bool(self.nonfinite_grad_steps)


class StabilityMonitor:
    """Accumulates step health on the device; :meth:`end_epoch` reads it with a single synchronisation.

    With ``cfg.enabled`` the monitor counts non-finite losses and gradient norms, gradient norms above
    ``cfg.grad_norm_exploding`` (finite ones) and below ``cfg.grad_norm_vanishing``, and tracks the mean and
    maximum finite gradient norm. With checks disabled it ignores gradient norms and reports only the step count
    and the mean finite loss (the runner still needs the per-epoch loss). Either way :meth:`observe` launches no
    kernel and never synchronises: it keeps the step's tensors, which the workload must not write afterwards
    (:class:`~gpubench.workload.StepResult`).
    """

    def __init__(
        self, cfg: StabilityConfig, device: torch.device | str, *, chunk_steps: int = _DEFAULT_CHUNK_STEPS
    ) -> None:
        if chunk_steps < 1:
            raise ValueError(f"chunk_steps must be >= 1, got {chunk_steps}")
        self._cfg = cfg
        self._device = torch.device(device)
        self._chunk_steps = chunk_steps
        # The held steps' losses (of the steps that reported one) and gradient norms (_absent where a step reported
        # none); the totals accumulate in float64 so long epochs do not lose precision.
        self._losses: list[torch.Tensor] = []
        self._grad_norms: list[torch.Tensor] = []
        self._absent = torch.tensor(_ABSENT_GRAD_NORM, dtype=torch.float32, device=self._device)
        self._totals = torch.zeros(_N_TOTALS, dtype=torch.float64, device=self._device)
        self._max_grad_norm = torch.zeros((), dtype=torch.float64, device=self._device)
        self._no_losses = torch.zeros(0, dtype=torch.float64, device=self._device)
        self._steps = 0
        self._loss_steps = 0
        self._grad_steps = 0

    def observe(self, step: StepResult) -> None:
        """Record one training step's loss and gradient norm without a device-to-host synchronisation."""
        loss, grad_norm = step.loss, self._absent
        if self._cfg.enabled and step.grad_norm is not None:
            grad_norm = step.grad_norm
            self._grad_steps += 1
        # A held tensor that requires grad would keep the step's autograd graph alive; detach only those (a detach
        # builds a new tensor on the host, and workloads mostly return detached results).
        if loss is not None:
            self._losses.append(loss.detach() if loss.requires_grad else loss)
            self._loss_steps += 1
        self._grad_norms.append(grad_norm.detach() if grad_norm.requires_grad else grad_norm)
        self._steps += 1
        if len(self._grad_norms) == self._chunk_steps:
            self._reduce_held_steps()

    def _reduce_held_steps(self) -> None:
        """Fold the held steps into the device totals (device-side ops only: no synchronisation)."""
        if not self._grad_norms:
            return
        loss = torch.stack(self._losses).to(torch.float64) if self._losses else self._no_losses
        grad_norm = torch.stack(self._grad_norms).to(torch.float64)
        self._losses.clear()
        self._grad_norms.clear()
        loss_finite = torch.isfinite(loss)
        if not self._cfg.enabled:
            partial = torch.stack((torch.where(loss_finite, loss, 0.0).sum(), loss_finite.sum(dtype=torch.float64)))
            self._totals[_LOSS_SUM : _FINITE_LOSS_STEPS + 1].add_(partial)
            return
        present = grad_norm != _ABSENT_GRAD_NORM
        grad_finite = torch.isfinite(grad_norm) & present
        # Norms are >= 0, so 0 is neutral for the sum and the max of the finite ones.
        finite_grad_norm = torch.where(grad_finite, grad_norm, 0.0)
        totals = torch.stack(
            (
                torch.where(loss_finite, loss, 0.0).sum(),
                loss_finite.sum(dtype=torch.float64),
                finite_grad_norm.sum(),
                grad_finite.sum(dtype=torch.float64),
                (present & ~grad_finite).sum(dtype=torch.float64),
                (grad_finite & (grad_norm > self._cfg.grad_norm_exploding)).sum(dtype=torch.float64),
                # NaN compares false and the absent marker is excluded, so this counts real tiny norms only.
                (present & (grad_norm < self._cfg.grad_norm_vanishing)).sum(dtype=torch.float64),
            )
        )
        self._totals.add_(totals)
        torch.maximum(self._max_grad_norm, finite_grad_norm.max(), out=self._max_grad_norm)

    def end_epoch(self) -> EpochHealth:
        """Read the epoch's health from the device (one synchronisation) and reset for the next epoch."""
        self._reduce_held_steps()
        # The only device-to-host read: totals and max travel together.
        values = torch.cat((self._totals, self._max_grad_norm.reshape(1))).tolist()
        totals, max_grad_norm = values[:_N_TOTALS], values[_N_TOTALS]
        self._totals.zero_()
        self._max_grad_norm.zero_()
        steps, loss_steps, grad_steps = self._steps, self._loss_steps, self._grad_steps
        self._steps = self._loss_steps = self._grad_steps = 0

        finite_loss_steps = round(totals[_FINITE_LOSS_STEPS])
        finite_grad_steps = round(totals[_FINITE_GRAD_STEPS])
        mean_loss = totals[_LOSS_SUM] / finite_loss_steps if finite_loss_steps else None
        checked = self._cfg.enabled
        return EpochHealth(
            steps=steps,
            mean_loss=mean_loss,
            checked=checked,
            grad_steps=grad_steps,
            mean_grad_norm=totals[_GRAD_SUM] / finite_grad_steps if finite_grad_steps else None,
            max_grad_norm=max_grad_norm if finite_grad_steps else None,
            nonfinite_loss_steps=loss_steps - finite_loss_steps if checked else None,
            nonfinite_grad_steps=round(totals[_NONFINITE_GRAD_STEPS]) if checked else None,
            exploding_steps=round(totals[_EXPLODING]) if checked else None,
            vanishing_steps=round(totals[_VANISHING]) if checked else None,
            loss_steps=loss_steps,
        )


def loss_rel_slope_per_epoch(epoch_losses: Sequence[float]) -> float:
    """Least-squares slope of loss against epoch index, divided by the mean absolute loss (fraction per epoch).

    For losses of one sign the denominator is |mean loss|; using the mean of |loss| keeps the ratio meaningful
    for losses that cross zero (a policy-gradient objective can). All-zero losses have slope 0. Needs at least
    two finite values.
    """
    losses = np.asarray(epoch_losses, dtype=float)
    if losses.size < 2 or not np.all(np.isfinite(losses)):
        raise ValueError(f"need at least two finite epoch losses, got {list(epoch_losses)}")
    slope = fit_slope(losses).slope
    scale = float(np.mean(np.abs(losses)))
    return slope / scale if scale > 0 else 0.0


#: Two-sided p-value below which a fitted loss slope counts as a trend rather than epoch-to-epoch noise.
TREND_SIGNIFICANCE = 0.05


def loss_slope_p_value(epoch_losses: Sequence[float]) -> float | None:
    """Two-sided p-value of the least-squares slope of loss against epoch index (t test, n − 2 degrees of
    freedom); None with fewer than three epochs, 0.0 for an exact line."""
    if len(epoch_losses) < 3:
        return None
    return fit_slope(epoch_losses).p_value


def loss_trend(epoch_losses: Sequence[float], rel_slope_threshold: float) -> LossTrend:
    """DECREASING / STABLE / INCREASING from :func:`loss_rel_slope_per_epoch` compared with ±threshold.

    ``rel_slope_threshold`` is a fraction per epoch (0.01: the fitted line moves 1% of the mean loss per
    epoch). A trend needs both a slope strictly beyond it and a slope that is significant
    (:func:`loss_slope_p_value` < :data:`TREND_SIGNIFICANCE`): per-epoch losses of RL and minibatch training are
    noisy, and a line fitted through noise alone would otherwise be called a trend (and INCREASING makes a model
    UNSTABLE). With two epochs there is no test and the magnitude alone decides.
    """
    rel_slope = loss_rel_slope_per_epoch(epoch_losses)
    p_value = loss_slope_p_value(epoch_losses)
    if p_value is not None and p_value >= TREND_SIGNIFICANCE:
        return "STABLE"
    if rel_slope > rel_slope_threshold:
        return "INCREASING"
    if rel_slope < -rel_slope_threshold:
        return "DECREASING"
    return "STABLE"


def _total(epochs: Sequence[EpochHealth], name: str) -> int:
    return sum(getattr(epoch, name) or 0 for epoch in epochs)


def stability_verdict(epochs: Sequence[EpochHealth], cfg: StabilityConfig) -> StabilityReport:
    """Judge a model's health from its per-epoch records (from a monitor built with the same ``cfg``)."""
    if not epochs:
        raise ValueError("stability_verdict needs at least one epoch")
    mean_losses = [epoch.mean_loss for epoch in epochs]
    finite_losses = [loss for loss in mean_losses if loss is not None and math.isfinite(loss)]
    trend: LossTrend | None = None
    rel_slope: float | None = None
    slope_p_value: float | None = None
    if len(finite_losses) >= 2:
        rel_slope = loss_rel_slope_per_epoch(finite_losses)
        slope_p_value = loss_slope_p_value(finite_losses)
        trend = loss_trend(finite_losses, cfg.loss_trend_rel_slope)
    finite_max_norms = [epoch.max_grad_norm for epoch in epochs if epoch.max_grad_norm is not None]
    max_grad_norm = max(finite_max_norms) if finite_max_norms else None
    steps = sum(epoch.steps for epoch in epochs)

    if not cfg.enabled:
        return StabilityReport(
            stability="NOT_CHECKED",
            loss_trend=trend,
            loss_rel_slope_per_epoch=rel_slope,
            loss_slope_p_value=slope_p_value,
            diverged=False,
            reasons=["stability.enabled=false: NaN/Inf and gradient-norm checks were skipped"],
            epochs=len(epochs),
            steps=steps,
            epoch_mean_losses=mean_losses,
            max_grad_norm=max_grad_norm,
            nonfinite_loss_steps=None,
            nonfinite_grad_steps=None,
            exploding_steps=None,
            vanishing_steps=None,
            first_nonfinite_epoch=None,
        )

    loss_steps = _total(epochs, "loss_steps")
    grad_steps = _total(epochs, "grad_steps")
    nonfinite_loss = _total(epochs, "nonfinite_loss_steps")
    nonfinite_grad = _total(epochs, "nonfinite_grad_steps")
    exploding = _total(epochs, "exploding_steps")
    vanishing = _total(epochs, "vanishing_steps")
    first_nonfinite = next((i for i, epoch in enumerate(epochs) if epoch.diverged), None)
    reasons: list[str] = []
    if not loss_steps:
        # A user's step may return no loss (model=custom): nothing can then say whether the loss is finite or falls.
        reasons.append(f"no loss reported in {steps} steps: NaN/Inf losses and the loss trend were not checked")
    if nonfinite_loss:
        reasons.append(f"non-finite loss (NaN/Inf) in {nonfinite_loss} of {steps} steps")
    if nonfinite_grad:
        reasons.append(f"non-finite gradient norm (NaN/Inf) in {nonfinite_grad} of {steps} steps")
    if first_nonfinite is not None:
        reasons.append(f"first NaN/Inf in epoch {first_nonfinite}")
    if exploding:
        reasons.append(
            f"exploding gradients: {exploding} steps with norm > {cfg.grad_norm_exploding:g} (max {max_grad_norm:.3g})"
        )
    if vanishing:
        reasons.append(f"vanishing gradients: {vanishing} steps with norm < {cfg.grad_norm_vanishing:g}")
    if trend == "INCREASING":
        reasons.append(
            f"loss trend INCREASING: {rel_slope:+.2%} of the mean loss per epoch "
            f"(threshold {cfg.loss_trend_rel_slope:.2%})"
        )

    diverged = first_nonfinite is not None
    stability: Stability
    if diverged:
        stability = "DIVERGING"
    elif not loss_steps and not grad_steps:
        stability = "NOT_CHECKED"
    elif exploding or vanishing or trend == "INCREASING":
        stability = "UNSTABLE"
    else:
        stability = "STABLE"
    return StabilityReport(
        stability=stability,
        loss_trend=trend,
        loss_rel_slope_per_epoch=rel_slope,
        loss_slope_p_value=slope_p_value,
        diverged=diverged,
        reasons=reasons,
        epochs=len(epochs),
        steps=steps,
        epoch_mean_losses=mean_losses,
        max_grad_norm=max_grad_norm,
        nonfinite_loss_steps=nonfinite_loss,
        nonfinite_grad_steps=nonfinite_grad,
        exploding_steps=exploding,
        vanishing_steps=vanishing,
        first_nonfinite_epoch=first_nonfinite,
    )
