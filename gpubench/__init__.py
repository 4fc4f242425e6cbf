"""gpubench: measure training time, memory fit and numerical health of real models on your GPU."""

__version__ = "0.1.0"
