"""Statistics of measured times: pure numpy/scipy, no torch. ``epoch_times`` summarises one model's epochs;
``intervals`` holds the decision interval, :func:`decision_interval`, that the recommendation rests on."""

from gpubench.stats.intervals import decision_interval

__all__ = ["decision_interval"]
