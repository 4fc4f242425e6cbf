"""gpubench: measure training time, memory fit and numerical health of real models on your GPU.
``gpubench.benchmark`` (:mod:`gpubench.bench.api`) is imported on first use, so ``import gpubench`` stays light."""

from typing import Any

__version__ = "0.1.0"

__all__ = ["__version__", "benchmark"]


def __getattr__(name: str) -> Any:
    if name == "benchmark":
        from gpubench.bench.api import benchmark

        return benchmark
    raise AttributeError(f"module 'gpubench' has no attribute {name!r}")
