"""The per-epoch watch of the device through NVML: temperature (°C), SM clock (MHz), power (W), throttling and
energy (J); every figure is None on the CPU."""

import time
from collections.abc import Callable, Sequence

import torch

from gpubench.hardware.config import HardwareConfig
from gpubench.hardware.identity import open_nvml_device
from gpubench.hardware.nvml import MILLI_PER_UNIT, DeviceSample
from gpubench.results import DeviceEpoch, EnergySummary

#: Reasons that mean heat or power holds the clock down (idle, sync boost and application clocks do not).
THERMAL_POWER_REASONS: frozenset[str] = frozenset(
    {"sw_power_cap", "hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown"}
)
#: An epoch whose SM clock is below this fraction of the sustained maximum counts as throttled.
THROTTLED_CLOCK_FRACTION = 0.75
NOT_MEASURED = "not measured"
THERMAL_STOP = "thermal_stop"


def temperature_status(temperature_c: float | None, cfg: HardwareConfig) -> str:
    """``ok``, ``warm``, ``hot`` or ``stop`` by the configured °C thresholds; ``not measured`` when unknown."""
    if temperature_c is None:
        return NOT_MEASURED
    limits = ((cfg.temperature_stop_c, "stop"), (cfg.temperature_throttle_c, "hot"), (cfg.temperature_warn_c, "warm"))
    return next((status for limit_c, status in limits if temperature_c >= limit_c), "ok")


def throttle_verdict(
    sm_clock_mhz: float | None, reference_sm_clock_mhz: float | None, reasons: list[str] | None
) -> tuple[bool | None, str | None]:
    """Whether an epoch was throttled (a thermal/power reason, or a low SM clock) and why; (None, None) unread."""
    causes = [reason for reason in reasons or () if reason in THERMAL_POWER_REASONS]
    reference = reference_sm_clock_mhz
    if sm_clock_mhz is not None and reference and sm_clock_mhz < THROTTLED_CLOCK_FRACTION * reference:
        causes.append(f"SM clock {sm_clock_mhz:.0f} MHz < {THROTTLED_CLOCK_FRACTION:.0%} of {reference:.0f} MHz")
    if causes:
        return True, "; ".join(causes)
    if sm_clock_mhz is None and reasons is None:
        return None, None
    return False, None


class DeviceMonitor:
    """An epoch observer of the device; ``reference_sm_clock_mhz`` (the burn-in's peak) judges throttling.
    ``sampler``, ``energy_reader`` (mJ) and ``clock`` (s) replace NVML and the clock in tests."""

    def __init__(
        self,
        device: torch.device,
        cfg: HardwareConfig,
        *,
        reference_sm_clock_mhz: float | None = None,
        sampler: Callable[[], DeviceSample] | None = None,
        energy_reader: Callable[[], int | None] | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.cfg = cfg
        self.reference_sm_clock_mhz = reference_sm_clock_mhz
        if sampler is None:
            nvml_device = open_nvml_device(device)
            sampler = nvml_device.sample if nvml_device is not None else DeviceSample
            if energy_reader is None:
                energy_reader = nvml_device.energy_mj if nvml_device is not None else lambda: None
        self._sampler = sampler
        # An epoch's start needs one query, not the full sample's six.
        self._read_energy_mj = energy_reader or (lambda: sampler().energy_mj)
        self._clock = clock
        self._start_energy_mj: int | None = None
        self._start_s: float | None = None
        self._epochs: list[DeviceEpoch] = []

    @property
    def epochs(self) -> list[DeviceEpoch]:
        return list(self._epochs)

    def start_epoch(self) -> None:
        self._start_energy_mj = self._read_energy_mj()
        self._start_s = self._clock()

    def end_epoch(self, phase: str, epoch: int) -> DeviceEpoch:
        """Read and record the device at the end of the epoch :meth:`start_epoch` opened."""
        if self._start_s is None:
            raise RuntimeError("DeviceMonitor.end_epoch called without start_epoch")
        end_s = self._clock()
        sample = self._sampler()
        energy_j = None
        if sample.energy_mj is not None and self._start_energy_mj is not None:
            energy_j = (sample.energy_mj - self._start_energy_mj) / MILLI_PER_UNIT
        seconds = end_s - self._start_s
        mean_power_w = energy_j / seconds if energy_j is not None and seconds > 0 else None
        reasons = None if sample.throttle_reasons is None else list(sample.throttle_reasons)
        throttled, cause = throttle_verdict(sample.sm_clock_mhz, self.reference_sm_clock_mhz, reasons)
        self._start_s = None
        record = DeviceEpoch(
            phase=phase,
            epoch=epoch,
            temperature_c=sample.temperature_c,
            temperature_status=temperature_status(sample.temperature_c, self.cfg),
            sm_clock_mhz=sample.sm_clock_mhz,
            power_w=sample.power_w,
            mean_power_w=mean_power_w,
            throttle_reasons=reasons,
            energy_j=energy_j,
            throttled=throttled,
            throttle_cause=cause,
        )
        self._epochs.append(record)
        return record

    def stop_reason(self) -> str | None:
        """``thermal_stop`` once the last epoch ended at ``hardware.temperature_stop_c`` or above."""
        return THERMAL_STOP if self._epochs and self._epochs[-1].temperature_status == "stop" else None


def energy_summary(epochs: Sequence[DeviceEpoch], samples_per_epoch: float) -> EnergySummary | None:
    """Mean joules per measured epoch and per sample; None where not measured."""
    joules = [epoch.energy_j for epoch in epochs if epoch.phase == "measured" and epoch.energy_j is not None]
    if not joules:
        return None
    per_epoch_j = sum(joules) / len(joules)
    return EnergySummary(
        joules_per_epoch=per_epoch_j,
        joules_per_sample=per_epoch_j / samples_per_epoch if samples_per_epoch else None,
        epochs=len(joules),
    )
