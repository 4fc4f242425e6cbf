"""A training on interruptible (spot) capacity: the checkpoint interval and the expected wall time.

Interruptions are taken as a Poisson process of rate λ per hour, so M = 1/λ hours pass between them on average.
A training of ``work`` hours (its time without checkpoints) saves a checkpoint costing δ hours after every τ hours
of work; an interruption loses the work since the last checkpoint and costs R hours to restart (the new instance
redoes the one-off costs: compilation, warmup) before work resumes.

* Young (1974): the interval that minimises the lost time to first order is τ = sqrt(2 δ M).
* Daly (2006, "A higher order estimate of the optimum checkpoint interval for restart dumps", FGCS 22): for
  δ < 2M, τ = sqrt(2 δ M) × (1 + (1/3) sqrt(δ / 2M) + (1/9) (δ / 2M)) − δ, else τ = M; and the expected wall
  time of the whole training is T = M e^(R/M) (e^((τ + δ)/M) − 1) × work / τ, exact for exponential
  interruptions that can strike during work, checkpoints and restarts alike.

Lifetimes that are not exponential (the preemption traces' are not) are simulated by
:mod:`gpubench.decision.spot_simulation`, which keeps Daly's interval. Times in hours, rates per hour. Pure
arithmetic.
"""

import math


def young_interval_hours(checkpoint_hours: float, mtbf_hours: float) -> float:
    """Young's checkpoint interval (h of work between checkpoints): sqrt(2 δ M)."""
    if checkpoint_hours <= 0 or mtbf_hours <= 0:
        raise ValueError(f"need δ > 0 and M > 0, got δ={checkpoint_hours!r}, M={mtbf_hours!r}")
    return math.sqrt(2.0 * checkpoint_hours * mtbf_hours)


def daly_interval_hours(checkpoint_hours: float, mtbf_hours: float) -> float:
    """Daly's checkpoint interval (h of work between checkpoints), Young's corrected to higher order; M when
    δ >= 2M (checkpoints so costly that one per expected interruption is the best to do)."""
    young = young_interval_hours(checkpoint_hours, mtbf_hours)
    if checkpoint_hours >= 2.0 * mtbf_hours:
        return mtbf_hours
    ratio = checkpoint_hours / (2.0 * mtbf_hours)
    return young * (1.0 + math.sqrt(ratio) / 3.0 + ratio / 9.0) - checkpoint_hours


def expected_wall_hours(
    work_hours: float, interval_hours: float, checkpoint_hours: float, restart_hours: float, mtbf_hours: float
) -> float:
    """Daly's expected wall time (h) of ``work_hours`` of work checkpointed every ``interval_hours`` (τ) at
    ``checkpoint_hours`` (δ) each, restarting in ``restart_hours`` (R), interruptions every ``mtbf_hours`` (M) on
    average: M e^(R/M) (e^((τ + δ)/M) − 1) × work / τ. Without checkpoints pass τ = work and δ = 0 (one segment,
    restarted from the start after each interruption)."""
    if work_hours < 0 or interval_hours <= 0 or checkpoint_hours < 0 or restart_hours < 0 or mtbf_hours <= 0:
        raise ValueError(
            f"need work >= 0, τ > 0, δ >= 0, R >= 0, M > 0; got work={work_hours!r}, τ={interval_hours!r}, "
            f"δ={checkpoint_hours!r}, R={restart_hours!r}, M={mtbf_hours!r}"
        )
    if work_hours == 0:
        return 0.0
    segments = work_hours / interval_hours
    segment_hours = (
        mtbf_hours * math.exp(restart_hours / mtbf_hours) * math.expm1((interval_hours + checkpoint_hours) / mtbf_hours)
    )
    return segment_hours * segments
