"""The ``distributed`` keys."""

from dataclasses import dataclass

from gpubench.errors import ConfigError, require, require_choice, require_positive

#: ``auto``: NCCL on GPUs, gloo on the CPU.
BACKENDS: tuple[str, ...] = ("auto", "nccl", "gloo")


@dataclass
class DistributedConfig:
    """Data-parallel scaling: ``nproc`` DDP processes (1: none) per model after its 1-process run; ``timeout_s`` (s)
    bounds every collective, so that a rank waiting for a dead one fails rather than holds the job."""

    nproc: int = 1
    backend: str = "auto"
    timeout_s: float = 600.0

    def __post_init__(self) -> None:
        nproc_ok = isinstance(self.nproc, int) and self.nproc >= 1
        require(nproc_ok, "distributed.nproc", self.nproc, "an integer >= 1 (1: no data-parallel run)")
        self.backend = str(self.backend).lower()
        require_choice("distributed.backend", self.backend, BACKENDS)
        require_positive("distributed.timeout_s", self.timeout_s)

    @property
    def enabled(self) -> bool:
        """Whether each model is also measured data-parallel (``nproc`` > 1)."""
        return self.nproc > 1

    def resolved_backend(self, device_type: str) -> str:
        """The process group's backend on a ``device_type`` device, ``auto`` resolved."""
        if self.backend != "auto":
            return self.backend
        return "nccl" if device_type == "cuda" else "gloo"

    def check_execution(self, compile_mode: str) -> None:
        """Raise ConfigError for ``execution.compile=reduce-overhead`` with ``nproc`` > 1: CUDA graphs would replay
        DDP's all-reduce."""
        if self.enabled and compile_mode == "reduce-overhead":
            raise ConfigError(
                f"`distributed.nproc` = {self.nproc} with `execution.compile` = 'reduce-overhead' is not supported: "
                "CUDA graphs would capture DistributedDataParallel's gradient all-reduce inside the replayed step. "
                "Use execution.compile=false or true with distributed.nproc > 1, or distributed.nproc=1 to keep "
                "reduce-overhead."
            )
