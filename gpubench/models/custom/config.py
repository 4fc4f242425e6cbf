"""The ``workloads.custom`` keys: the user's own training step, timed like the built-in models."""

from dataclasses import dataclass

from gpubench.errors import require, require_positive
from gpubench.models.custom.factory import FACTORY_FORM, FACTORY_KEY, load_factory


@dataclass
class CustomConfig:
    """The user's training as a factory ``module.path:function``: ``build(batch_size, device)`` returns a step callable
    timed at ``batch_size``; ``samples_per_step`` is in ``sample_unit``."""

    factory: str | None = None
    batch_size: int = 64
    samples_per_step: float | None = None
    sample_unit: str = "sample"

    def __post_init__(self) -> None:
        require_positive("workloads.custom.batch_size", self.batch_size)
        if self.samples_per_step is not None:
            require_positive("workloads.custom.samples_per_step", self.samples_per_step)
        unit_ok = bool(self.sample_unit) and self.sample_unit.isidentifier()
        unit = "a non-empty word naming what one sample is (sample, token, image, ...)"
        require(unit_ok, "workloads.custom.sample_unit", self.sample_unit, unit)
        if self.factory is not None:
            load_factory(self.factory)

    def check_runnable(self, precision: str, compile_mode: str) -> None:
        """Check a factory is set and precision and compilation are left at their defaults."""
        require(self.factory is not None, FACTORY_KEY, self.factory, f"set when model=custom: {FACTORY_FORM}")
        require(
            precision == "fp32",
            "execution.precision",
            precision,
            "fp32 with model=custom: the build function owns its precision (use torch.autocast inside your step)",
        )
        require(
            compile_mode == "false",
            "execution.compile",
            compile_mode,
            "false with model=custom: the build function owns its compilation (torch.compile inside build)",
        )
