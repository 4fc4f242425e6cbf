"""The ``distributed`` keys."""

from dataclasses import dataclass

from gpubench.errors import ConfigError, require, require_choice, require_positive

#: ``auto``: NCCL on GPUs, gloo on the CPU.
BACKENDS: tuple[str, ...] = ("auto", "nccl", "gloo")


@dataclass
class DistributedConfig:
    """Data-parallel scaling. ``nproc`` processes (1: none, the default) train each model under
    DistributedDataParallel after its 1-process measurement; ``backend`` is the process group's. ``timeout_s`` (s)
    bounds every collective of the process group: a rank left waiting for one that died or hangs fails after it,
    instead of holding the job."""

    nproc: int = 1
    backend: str = "auto"
    timeout_s: float = 600.0

    def __post_init__(self) -> None:
        require(
            isinstance(self.nproc, int) and self.nproc >= 1,
            "distributed.nproc",
            self.nproc,
            "an integer >= 1 (1: no data-parallel run)",
        )
        self.backend = str(self.backend).lower()
        require_choice("distributed.backend", self.backend, BACKENDS)
        require_positive("distributed.timeout_s", self.timeout_s)

    @property
    def enabled(self) -> bool:
        """Whether each model is also measured data-parallel (``nproc`` > 1)."""
        return self.nproc > 1

    def resolved_backend(self, device_type: str) -> str:
        """The process group's backend on a ``device_type`` (``cuda`` or ``cpu``) device: ``backend``, with
        ``auto`` read as NCCL on GPUs and gloo on the CPU."""
        if self.backend != "auto":
            return self.backend
        return "nccl" if device_type == "cuda" else "gloo"

    def check_execution(self, compile_mode: str) -> None:
        """Refuse ``execution.compile=reduce-overhead`` with ``nproc`` > 1: the RL workloads capture a whole step,
        the gradient all-reduce included, in one CUDA graph, and the other workloads' CUDA-graph trees would replay
        DDP's communication hooks; neither is a training DDP runs. Raises ConfigError naming both keys."""
        if self.enabled and compile_mode == "reduce-overhead":
            raise ConfigError(
                f"`distributed.nproc` = {self.nproc} with `execution.compile` = 'reduce-overhead' is not supported: "
                "CUDA graphs would capture DistributedDataParallel's gradient all-reduce inside the replayed step. "
                "Use execution.compile=false or true with distributed.nproc > 1, or distributed.nproc=1 to keep "
                "reduce-overhead."
            )
