"""Checkpoint interval and expected wall time (hours) of a training on spot capacity under Poisson interruptions of
mean interval M: a checkpoint of δ hours every τ hours of work, R hours to restart. Young (1974): τ = sqrt(2 δ M);
Daly (2006, FGCS 22) its higher-order correction and the exact expected wall time for exponential interruptions.
Other lifetimes: :mod:`gpubench.decision.spot_simulation`."""

import math


def young_interval_hours(checkpoint_hours: float, mtbf_hours: float) -> float:
    """Young's checkpoint interval (h of work between checkpoints): sqrt(2 δ M)."""
    if checkpoint_hours <= 0 or mtbf_hours <= 0:
        raise ValueError(f"need δ > 0 and M > 0, got δ={checkpoint_hours!r}, M={mtbf_hours!r}")
    return math.sqrt(2.0 * checkpoint_hours * mtbf_hours)


def daly_interval_hours(checkpoint_hours: float, mtbf_hours: float) -> float:
    """Daly's checkpoint interval (h of work): Young's to higher order, M when δ >= 2M."""
    young = young_interval_hours(checkpoint_hours, mtbf_hours)
    if checkpoint_hours >= 2.0 * mtbf_hours:
        return mtbf_hours
    ratio = checkpoint_hours / (2.0 * mtbf_hours)
    return young * (1.0 + math.sqrt(ratio) / 3.0 + ratio / 9.0) - checkpoint_hours


def expected_wall_hours(
    work_hours: float, interval_hours: float, checkpoint_hours: float, restart_hours: float, mtbf_hours: float
) -> float:
    """Daly's expected wall time (h): M e^(R/M) (e^((τ + δ)/M) − 1) × work / τ; without checkpoints τ = work, δ = 0."""
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
