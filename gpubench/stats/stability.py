"""Training health's verdict from per-epoch records: NaN/Inf, gradient norms, the loss trend (supervised only; on
the loss relative to a reference forecast where steps report one) and the RL signals."""

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Literal

import numpy as np

from gpubench.results import RLHealth, StabilityReport
from gpubench.stats.config import StabilityConfig
from gpubench.stats.regression import fit_slope

LossTrend = Literal["DECREASING", "STABLE", "INCREASING"]
Stability = Literal["STABLE", "UNSTABLE", "DIVERGING", "NOT_CHECKED"]


@dataclass(frozen=True)
class EpochRLHealth:
    """One epoch's RL signals (:class:`~gpubench.workload.RLSignals`): means and maxima over the finite values (None
    where no step reported one), and the largest critic-loss ceiling and |return| bound reported."""

    steps: int
    critic_loss_name: str
    mean_critic_loss: float | None
    critic_loss_ceiling: float
    mean_approx_kl: float | None
    max_approx_kl: float | None
    mean_clip_fraction: float | None
    max_clip_fraction: float | None
    mean_value_abs_max: float | None = None
    max_value_abs: float | None = None
    return_bound: float | None = None


@dataclass(frozen=True)
class EpochHealth:
    """One epoch's health, read from the device at its end: means and maxima over the finite values, counts None
    when unchecked; ``mean_relative_loss``: Σ loss / Σ reference loss (no near-zero reference dominates)."""

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
    rl: EpochRLHealth | None = None
    mean_relative_loss: float | None = None

    @property
    def diverged(self) -> bool:
        """True when a NaN/Inf loss or gradient norm was seen."""
        return bool(self.nonfinite_loss_steps) or bool(self.nonfinite_grad_steps)


def loss_rel_slope_per_epoch(epoch_losses: Sequence[float]) -> float:
    """Least-squares slope of loss per epoch over the mean |loss| (a fraction), 0 for all-zero losses."""
    losses = np.asarray(epoch_losses, dtype=float)
    if losses.size < 2 or not np.all(np.isfinite(losses)):
        raise ValueError(f"need at least two finite epoch losses, got {list(epoch_losses)}")
    slope = fit_slope(losses).slope
    scale = float(np.mean(np.abs(losses)))
    return slope / scale if scale > 0 else 0.0


TREND_SIGNIFICANCE = 0.05


def loss_slope_p_value(epoch_losses: Sequence[float]) -> float | None:
    """Two-sided t test p-value of the loss slope; None under three epochs, 0.0 on an exact line."""
    if len(epoch_losses) < 3:
        return None
    return fit_slope(epoch_losses).p_value


def loss_trend(epoch_losses: Sequence[float], rel_slope_threshold: float) -> LossTrend:
    """DECREASING / INCREASING where the relative slope is beyond ±``rel_slope_threshold`` and significant (with two
    epochs the magnitude alone decides), else STABLE."""
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


def _critic_growth(means: Sequence[float | None], ceiling: float, factor: float) -> tuple[int, int] | None:
    """(earlier, later) epochs of the critic loss's largest rise by ``factor`` or more to above ``ceiling``."""
    best: tuple[float, int, int] | None = None
    lowest: tuple[float, int] | None = None
    for index, mean in enumerate(means):
        if mean is None or not math.isfinite(mean):
            continue
        if lowest is not None and lowest[0] > 0 and mean > ceiling and mean >= factor * lowest[0]:
            ratio = mean / lowest[0]
            if best is None or ratio > best[0]:
                best = (ratio, lowest[1], index)
        if lowest is None or mean < lowest[0]:
            lowest = (mean, index)
    return None if best is None else (best[1], best[2])


@dataclass(frozen=True)
class GradNormGrowth:
    """Epoch ``epoch`` (0-based) reached ``ratio`` times the largest norm of the first ``baseline_epochs``."""

    epoch: int
    max_grad_norm: float
    baseline_epochs: int
    baseline_max_grad_norm: float

    @property
    def ratio(self) -> float:
        return self.max_grad_norm / self.baseline_max_grad_norm


def baseline_epoch_count(epochs: int) -> int:
    """The epochs that set the gradient norms' baseline: the first quarter, at least one."""
    return max(1, epochs // 4)


def grad_norm_growth(epoch_max_grad_norms: Sequence[float | None], factor: float) -> GradNormGrowth | None:
    """The later epoch whose largest gradient norm rose most, by over ``factor``, over the baseline's (the run's own
    reference: norms scale with the loss and the model)."""
    count = baseline_epoch_count(len(epoch_max_grad_norms))
    baseline = [norm for norm in epoch_max_grad_norms[:count] if norm is not None and math.isfinite(norm)]
    if not baseline or max(baseline) <= 0:
        return None
    reference = max(baseline)
    worst: GradNormGrowth | None = None
    for index, norm in enumerate(epoch_max_grad_norms[count:], start=count):
        if norm is not None and norm > factor * reference and (worst is None or norm > worst.max_grad_norm):
            worst = GradNormGrowth(
                epoch=index, max_grad_norm=norm, baseline_epochs=count, baseline_max_grad_norm=reference
            )
    return worst


def _epoch_means(records: Sequence[EpochRLHealth | None], name: str) -> list[float | None]:
    return [None if record is None else getattr(record, name) for record in records]


def _largest(values: Sequence[float | None]) -> float | None:
    known = [value for value in values if value is not None]
    return max(known) if known else None


def rl_health(epochs: Sequence[EpochHealth], cfg: StabilityConfig) -> tuple[RLHealth | None, list[str]]:
    """The RL signals over a model's epochs and the problems they show; ``(None, [])`` for a supervised model."""
    records = [epoch.rl for epoch in epochs]
    present = [record for record in records if record is not None]
    if not present:
        return None, []
    name = present[0].critic_loss_name
    ceiling = max(record.critic_loss_ceiling for record in present)
    critic_means = _epoch_means(records, "mean_critic_loss")
    kl_means = _epoch_means(records, "mean_approx_kl")
    clip_means = _epoch_means(records, "mean_clip_fraction")
    value_maxima = _epoch_means(records, "mean_value_abs_max")
    reports_kl = any(mean is not None for mean in kl_means)
    reports_clip = any(mean is not None for mean in clip_means)
    reports_values = any(mean is not None for mean in value_maxima)
    bounds = [record.return_bound for record in present if record.return_bound is not None]
    return_bound = max(bounds) if bounds else None
    health = RLHealth(
        critic_loss_name=name,
        epoch_mean_critic_losses=critic_means,
        critic_loss_ceiling=ceiling,
        critic_loss_ceiling_factor=cfg.critic_loss_ceiling_factor,
        critic_loss_growth_factor=cfg.critic_loss_growth_factor,
        steps=sum(record.steps for record in present),
        epoch_mean_approx_kls=kl_means if reports_kl else None,
        max_approx_kl=_largest([record.max_approx_kl for record in present]),
        approx_kl_bound=cfg.max_approx_kl if reports_kl else None,
        epoch_mean_clip_fractions=clip_means if reports_clip else None,
        max_clip_fraction=_largest([record.max_clip_fraction for record in present]),
        clip_fraction_bound=cfg.max_clip_fraction if reports_clip else None,
        epoch_mean_value_abs_maxima=value_maxima if reports_values else None,
        max_value_abs=_largest([record.max_value_abs for record in present]),
        return_bound=return_bound if reports_values else None,
    )
    problems: list[str] = []
    # A ceiling of 0 (all-zero rewards) leaves nothing to compare with.
    if ceiling > 0:
        limit = cfg.critic_loss_ceiling_factor * ceiling
        blown = [mean for mean in critic_means if mean is not None and mean > limit]
        if blown:
            problems.append(
                f"{name} blow-up: epoch mean up to {max(blown):.3g} in {len(blown)} of {len(epochs)} epochs, over "
                f"{cfg.critic_loss_ceiling_factor:g} x {ceiling:.3g}, the largest {name} of a critic within the "
                "rewards' return range (max |reward| / (1 - gamma))"
            )
        growth = _critic_growth(critic_means, ceiling, cfg.critic_loss_growth_factor)
        if growth is not None:
            low, high = critic_means[growth[0]], critic_means[growth[1]]
            assert low is not None and high is not None
            problems.append(
                f"{name} growth: {low:.3g} in epoch {growth[0]} to {high:.3g} in epoch {growth[1]} "
                f"({high / low:.0f}x, past the sane ceiling {ceiling:.3g})"
            )
    # Soft divergence (van Hasselt et al. 2018): a diverging Q-network can keep a small TD loss.
    if reports_values and return_bound is not None and return_bound > 0:
        beyond = [mean for mean in value_maxima if mean is not None and mean > return_bound]
        if beyond:
            problems.append(
                f"critic values beyond any return: each update's largest |value| averaged up to {max(beyond):.3g} "
                f"in {len(beyond)} of {len(epochs)} epochs, over {return_bound:.3g}, the largest discounted return "
                "the rewards allow (max |reward| / (1 - gamma)): the critic diverges"
            )
    for means, bound, what, meaning in (
        (kl_means, cfg.max_approx_kl, "approximate KL", "the policy moved far past the clip's trust region"),
        (clip_means, cfg.max_clip_fraction, "clip fraction", "most samples were pushed past the clip"),
    ):
        beyond = [mean for mean in means if mean is not None and mean > bound]
        if beyond:
            problems.append(
                f"{what}: epoch mean above {bound:g} in {len(beyond)} of {len(epochs)} epochs (up to "
                f"{max(beyond):.3g}): {meaning}"
            )
    return health, problems


def stability_verdict(epochs: Sequence[EpochHealth], cfg: StabilityConfig) -> StabilityReport:
    """A model's health from its per-epoch records (from a monitor built with the same ``cfg``)."""
    if not epochs:
        raise ValueError("stability_verdict needs at least one epoch")
    mean_losses = [epoch.mean_loss for epoch in epochs]
    relative_losses = [epoch.mean_relative_loss for epoch in epochs]
    relative = any(loss is not None for loss in relative_losses)
    trend_losses = relative_losses if relative else mean_losses
    finite_losses = [loss for loss in trend_losses if loss is not None and math.isfinite(loss)]
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

    report = partial(
        StabilityReport,
        loss_trend=trend,
        loss_rel_slope_per_epoch=rel_slope,
        loss_slope_p_value=slope_p_value,
        epochs=len(epochs),
        steps=steps,
        epoch_mean_losses=mean_losses,
        max_grad_norm=max_grad_norm,
        epoch_relative_losses=relative_losses if relative else None,
    )
    if not cfg.enabled:
        unchecked = dict.fromkeys(
            ("nonfinite_loss_steps", "nonfinite_grad_steps", "exploding_steps", "vanishing_steps")
        )
        reasons = ["stability.enabled=false: NaN/Inf and gradient-norm checks were skipped"]
        return report(stability="NOT_CHECKED", diverged=False, reasons=reasons, first_nonfinite_epoch=None, **unchecked)

    loss_steps = _total(epochs, "loss_steps")
    grad_steps = _total(epochs, "grad_steps")
    nonfinite_loss = _total(epochs, "nonfinite_loss_steps")
    nonfinite_grad = _total(epochs, "nonfinite_grad_steps")
    exploding = _total(epochs, "exploding_steps")
    vanishing = _total(epochs, "vanishing_steps")
    first_nonfinite = next((i for i, epoch in enumerate(epochs) if epoch.diverged), None)
    reasons: list[str] = []
    if not loss_steps:
        # A custom step may return no loss.
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
    epoch_max_grad_norms = [epoch.max_grad_norm for epoch in epochs]
    growth = grad_norm_growth(epoch_max_grad_norms, cfg.grad_norm_growth_factor)
    if growth is not None:
        reasons.append(
            f"gradient-norm explosion: largest norm {growth.max_grad_norm:.3g} in epoch {growth.epoch}, "
            f"{growth.ratio:.0f}x the {growth.baseline_max_grad_norm:.3g} of the first {growth.baseline_epochs} "
            f"measured epochs (threshold {cfg.grad_norm_growth_factor:g}x)"
        )
    rl, rl_problems = rl_health(epochs, cfg)
    # An RL loss is a surrogate or a TD loss: its trend is reported, but the RL signals judge the health.
    trend_judged = rl is None
    rising = trend_judged and trend == "INCREASING"
    if rising:
        measured = "loss relative to the reference forecast's on the same batches" if relative else "loss"
        reasons.append(
            f"loss trend INCREASING: {rel_slope:+.2%} of the mean {measured} per epoch "
            f"(threshold {cfg.loss_trend_rel_slope:.2%})"
        )
    reasons.extend(rl_problems)

    diverged = first_nonfinite is not None
    stability: Stability
    if diverged:
        stability = "DIVERGING"
    elif not loss_steps and not grad_steps:
        stability = "NOT_CHECKED"
    elif exploding or vanishing or growth is not None or rising or rl_problems:
        stability = "UNSTABLE"
    else:
        stability = "STABLE"
    return report(
        stability=stability,
        diverged=diverged,
        reasons=reasons,
        nonfinite_loss_steps=nonfinite_loss,
        nonfinite_grad_steps=nonfinite_grad,
        exploding_steps=exploding,
        vanishing_steps=vanishing,
        first_nonfinite_epoch=first_nonfinite,
        rl=rl,
        epoch_max_grad_norms=epoch_max_grad_norms,
        grad_norm_growth_factor=cfg.grad_norm_growth_factor,
    )
