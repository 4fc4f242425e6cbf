"""The ``distributed`` keys."""

from dataclasses import dataclass

from gpubench.config_checks import require, require_choice

#: ``auto``: NCCL on GPUs, gloo on the CPU.
BACKENDS: tuple[str, ...] = ("auto", "nccl", "gloo")


@dataclass
class DistributedConfig:
    """Data-parallel scaling. ``nproc`` processes (1: none, the default) train each model under
    DistributedDataParallel after its 1-process measurement; ``backend`` is the process group's."""

    nproc: int = 1
    backend: str = "auto"

    def __post_init__(self) -> None:
        require(
            isinstance(self.nproc, int) and self.nproc >= 1,
            "distributed.nproc",
            self.nproc,
            "an integer >= 1 (1: no data-parallel run)",
        )
        self.backend = str(self.backend).lower()
        require_choice("distributed.backend", self.backend, BACKENDS)
