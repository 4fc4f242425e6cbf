"""Training health on the device: NaN/Inf losses and gradients, gradient norms and the RL signals, per step.

Each step's 0-d tensors are held by reference and reduced on the device once per chunk of steps, and the host reads
the totals once per epoch: per-step checks would cost a launch-bound workload many kernel launches a step."""

import torch

from gpubench.stats.config import StabilityConfig
from gpubench.stats.stability import EpochHealth, EpochRLHealth
from gpubench.workload import RLSignals, StepResult

#: Written in place of a missing gradient norm; a norm is >= 0 or NaN/Inf, never -1.
_ABSENT_GRAD_NORM = -1.0
#: Steps held before their reduction; each holds a 0-d tensor (one 512-byte allocator block) alive.
_DEFAULT_CHUNK_STEPS = 256

# Positions in the device-side totals vector.
(
    _LOSS_SUM,
    _FINITE_LOSS_STEPS,
    _GRAD_SUM,
    _FINITE_GRAD_STEPS,
    _NONFINITE_GRAD_STEPS,
    _EXPLODING,
    _VANISHING,
    _CRITIC_SUM,
    _FINITE_CRITIC_STEPS,
    _KL_SUM,
    _FINITE_KL_STEPS,
    _CLIP_SUM,
    _FINITE_CLIP_STEPS,
    _VALUE_SUM,
    _FINITE_VALUE_STEPS,
    _PAIRED_LOSS_SUM,
    _REFERENCE_LOSS_SUM,
) = range(17)
_N_TOTALS = 17
# Positions in the device-side maxima vector (each over finite values; all are >= 0, so 0 is neutral).
_MAX_GRAD_NORM, _MAX_KL, _MAX_CLIP, _MAX_VALUE = range(4)
_N_MAXIMA = 4


def _held(tensor: torch.Tensor) -> torch.Tensor:
    # Detached only if it requires grad: it would keep the autograd graph.
    return tensor.detach() if tensor.requires_grad else tensor


def _finite_sum_and_count(values: torch.Tensor) -> torch.Tensor:
    finite = torch.isfinite(values)
    return torch.stack((torch.where(finite, values, 0.0).sum(), finite.sum(dtype=torch.float64)))


class StabilityMonitor:
    """Accumulates step health on the device; :meth:`end_epoch` reads it with one synchronisation. Disabled, only
    the step count and the mean finite loss. The workload must not write a step's tensors after :meth:`observe`."""

    def __init__(
        self, cfg: StabilityConfig, device: torch.device | str, *, chunk_steps: int = _DEFAULT_CHUNK_STEPS
    ) -> None:
        if chunk_steps < 1:
            raise ValueError(f"chunk_steps must be >= 1, got {chunk_steps}")
        self._cfg = cfg
        self._device = torch.device(device)
        self._chunk_steps = chunk_steps
        self._losses: list[torch.Tensor] = []
        self._grad_norms: list[torch.Tensor] = []
        self._paired_losses: list[torch.Tensor] = []
        self._reference_losses: list[torch.Tensor] = []
        self._absent = torch.tensor(_ABSENT_GRAD_NORM, dtype=torch.float32, device=self._device)
        # float64, so long epochs lose no precision.
        self._totals = torch.zeros(_N_TOTALS, dtype=torch.float64, device=self._device)
        self._maxima = torch.zeros(_N_MAXIMA, dtype=torch.float64, device=self._device)
        self._no_losses = torch.zeros(0, dtype=torch.float64, device=self._device)
        self._steps = 0
        self._loss_steps = 0
        self._grad_steps = 0
        self._critic_losses: list[torch.Tensor] = []
        self._approx_kls: list[torch.Tensor] = []
        self._clip_fractions: list[torch.Tensor] = []
        self._value_maxima: list[torch.Tensor] = []
        self._rl_steps = 0
        self._critic_loss_name = ""
        self._critic_loss_ceiling = 0.0
        self._return_bound: float | None = None

    def observe(self, step: StepResult) -> None:
        """Hold one step's tensors: no kernel, no synchronisation."""
        loss, grad_norm = step.loss, self._absent
        if self._cfg.enabled and step.grad_norm is not None:
            grad_norm = step.grad_norm
            self._grad_steps += 1
        if loss is not None:
            self._losses.append(_held(loss))
            self._loss_steps += 1
            if step.reference_loss is not None:
                self._paired_losses.append(self._losses[-1])
                self._reference_losses.append(_held(step.reference_loss))
        self._grad_norms.append(_held(grad_norm))
        if self._cfg.enabled and step.rl is not None:
            self._observe_rl(step.rl)
        self._steps += 1
        if len(self._grad_norms) == self._chunk_steps:
            self._reduce_held_steps()

    def _observe_rl(self, signals: RLSignals) -> None:
        self._critic_losses.append(_held(signals.critic_loss))
        self._critic_loss_name = signals.critic_loss_name
        self._critic_loss_ceiling = max(self._critic_loss_ceiling, signals.critic_loss_ceiling)
        self._rl_steps += 1
        if signals.approx_kl is not None:
            self._approx_kls.append(_held(signals.approx_kl))
        if signals.clip_fraction is not None:
            self._clip_fractions.append(_held(signals.clip_fraction))
        if signals.value_abs_max is not None:
            self._value_maxima.append(_held(signals.value_abs_max))
        if signals.return_bound is not None:
            self._return_bound = max(self._return_bound or 0.0, signals.return_bound)

    def _reduce_held_rl(self) -> None:
        if self._critic_losses:
            critic = torch.stack(self._critic_losses).to(torch.float64)
            self._totals[_CRITIC_SUM : _FINITE_CRITIC_STEPS + 1].add_(_finite_sum_and_count(critic))
        for held, total, largest in (
            (self._approx_kls, _KL_SUM, _MAX_KL),
            (self._clip_fractions, _CLIP_SUM, _MAX_CLIP),
            (self._value_maxima, _VALUE_SUM, _MAX_VALUE),
        ):
            if not held:
                continue
            values = torch.stack(held).to(torch.float64)
            finite = torch.isfinite(values)
            finite_values = torch.where(finite, values, 0.0)
            self._totals[total : total + 2].add_(torch.stack((finite_values.sum(), finite.sum(dtype=torch.float64))))
            torch.maximum(self._maxima[largest], finite_values.max(), out=self._maxima[largest])
        for held in (self._critic_losses, self._approx_kls, self._clip_fractions, self._value_maxima):
            held.clear()

    def _reduce_held_references(self) -> None:
        if not self._reference_losses:
            return
        loss = torch.stack(self._paired_losses).to(torch.float64)
        reference = torch.stack(self._reference_losses).to(torch.float64)
        self._paired_losses.clear()
        self._reference_losses.clear()
        finite = torch.isfinite(loss) & torch.isfinite(reference)
        partial = torch.stack((torch.where(finite, loss, 0.0).sum(), torch.where(finite, reference, 0.0).sum()))
        self._totals[_PAIRED_LOSS_SUM : _REFERENCE_LOSS_SUM + 1].add_(partial)

    def _reduce_held_steps(self) -> None:
        """Fold the held steps into the device totals (no synchronisation)."""
        if not self._grad_norms:
            return
        self._reduce_held_references()
        loss = torch.stack(self._losses).to(torch.float64) if self._losses else self._no_losses
        grad_norm = torch.stack(self._grad_norms).to(torch.float64)
        self._losses.clear()
        self._grad_norms.clear()
        if not self._cfg.enabled:
            self._totals[_LOSS_SUM : _FINITE_LOSS_STEPS + 1].add_(_finite_sum_and_count(loss))
            return
        loss_finite = torch.isfinite(loss)
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
        self._totals[:_CRITIC_SUM].add_(totals)
        largest = self._maxima[_MAX_GRAD_NORM]
        torch.maximum(largest, finite_grad_norm.max(), out=largest)
        self._reduce_held_rl()

    def end_epoch(self) -> EpochHealth:
        """The epoch's health, read with one synchronisation; resets for the next epoch."""
        self._reduce_held_steps()
        values = torch.cat((self._totals, self._maxima)).tolist()
        totals, maxima = values[:_N_TOTALS], values[_N_TOTALS:]
        max_grad_norm = maxima[_MAX_GRAD_NORM]
        self._totals.zero_()
        self._maxima.zero_()
        steps, loss_steps, grad_steps = self._steps, self._loss_steps, self._grad_steps
        self._steps = self._loss_steps = self._grad_steps = 0
        rl = self._epoch_rl(totals, maxima)

        finite_loss_steps = round(totals[_FINITE_LOSS_STEPS])
        finite_grad_steps = round(totals[_FINITE_GRAD_STEPS])
        mean_loss = totals[_LOSS_SUM] / finite_loss_steps if finite_loss_steps else None
        reference_sum = totals[_REFERENCE_LOSS_SUM]
        mean_relative_loss = totals[_PAIRED_LOSS_SUM] / reference_sum if reference_sum > 0 else None
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
            rl=rl,
            mean_relative_loss=mean_relative_loss,
        )

    def _epoch_rl(self, totals: list[float], maxima: list[float]) -> EpochRLHealth | None:
        """The epoch's RL signals (None when no step reported any), and a reset."""
        steps, name, ceiling = self._rl_steps, self._critic_loss_name, self._critic_loss_ceiling
        bound = self._return_bound
        self._rl_steps = 0
        self._critic_loss_ceiling = 0.0
        self._return_bound = None
        if not steps:
            return None

        def mean(total: int) -> float | None:
            # Each sum sits just before its count of finite values in the totals vector.
            count = round(totals[total + 1])
            return totals[total] / count if count else None

        kl_mean, clip_mean, value_mean = mean(_KL_SUM), mean(_CLIP_SUM), mean(_VALUE_SUM)
        return EpochRLHealth(
            steps=steps,
            critic_loss_name=name,
            mean_critic_loss=mean(_CRITIC_SUM),
            critic_loss_ceiling=ceiling,
            mean_approx_kl=kl_mean,
            max_approx_kl=None if kl_mean is None else maxima[_MAX_KL],
            mean_clip_fraction=clip_mean,
            max_clip_fraction=None if clip_mean is None else maxima[_MAX_CLIP],
            mean_value_abs_max=value_mean,
            max_value_abs=None if value_mean is None else maxima[_MAX_VALUE],
            return_bound=bound,
        )
