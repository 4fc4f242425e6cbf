"""Statistics of measured times: pure numpy/scipy, no torch. ``epoch_times`` summarises one model's epochs;
``intervals`` holds the decision interval, :func:`decision_interval`, that the recommendation rests on.

``gpubench.stats.decision_interval`` is imported on first use: the config (``stats/config.py``) lives in this
package too, and composing a config (``--help``, a bad-input exit) must not pay for importing scipy."""

__all__ = ["decision_interval"]


def __getattr__(name: str):
    if name == "decision_interval":
        from gpubench.stats.intervals import decision_interval

        return decision_interval
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
