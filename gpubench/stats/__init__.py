"""Statistics of measured times: pure numpy/scipy, no torch. :func:`decision_interval` is imported on first use, so
that composing a config (``stats/config.py``: ``--help``, a bad-input exit) does not import scipy."""

__all__ = ["decision_interval"]


def __getattr__(name: str):
    if name == "decision_interval":
        from gpubench.stats.intervals import decision_interval

        return decision_interval
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
