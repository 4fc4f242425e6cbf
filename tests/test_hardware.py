"""Hardware manager on the CPU: device choice, NVML through a fake, index mapping, burn-in and thermal watch."""

import dataclasses
import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pynvml
import pytest
import torch
from fake_nvml import NVML_ERROR_LIBRARY_NOT_FOUND, FakeGpu, FakeNvml, three_gpus

from gpubench.errors import ConfigError
from gpubench.hardware import identity as identity_module
from gpubench.hardware import nvml as nvml_module
from gpubench.hardware import probe as probe_module
from gpubench.hardware import vram as vram_module
from gpubench.hardware.burn_in import burn_in
from gpubench.hardware.config import HardwareConfig
from gpubench.hardware.identity import CudaIdentity, device_sampler, nvml_index_for, open_nvml_device, parse_pci_bus_id
from gpubench.hardware.monitor import DeviceMonitor, energy_summary, temperature_status, throttle_verdict
from gpubench.hardware.nvml import DeviceSample, Nvml, decode_throttle_reasons
from gpubench.hardware.probe import probe
from gpubench.hardware.selection import CPU_NOTICE, resolve_device
from gpubench.hardware.vram import VramBudget, allocator_fraction, apply_vram_limit, non_allocator_overhead_mb
from gpubench.results import DeviceEpoch, EnergySummary

GIB = 1024**3


def identity(
    torch_index: int = 0,
    *,
    uuid: str | None = None,
    pci_location: tuple[int, int, int] | None = None,
) -> CudaIdentity:
    """What torch would report for a visible H200 (torch does not print the "GPU-" prefix of NVML's UUID)."""
    return CudaIdentity(
        torch_index=torch_index,
        name="NVIDIA H200",
        total_memory_bytes=140 * GIB,
        compute_capability="9.0",
        uuid=uuid,
        pci_location=pci_location,
    )


# --------------------------------------------------------------------------------------------------- device choice


def test_auto_without_cuda_falls_back_to_cpu_with_a_notice() -> None:
    device, notice = resolve_device(HardwareConfig(name="auto"), cuda_available=False)
    assert device == torch.device("cpu")
    assert notice == CPU_NOTICE == "no CUDA device found; benchmarking on the CPU"


def test_auto_with_cuda_picks_the_first_gpu_silently() -> None:
    assert resolve_device(HardwareConfig(name="auto"), cuda_available=True) == (torch.device("cuda", 0), None)


def test_cpu_stays_on_cpu_even_when_cuda_exists() -> None:
    assert resolve_device(HardwareConfig(name="cpu"), cuda_available=True) == (torch.device("cpu"), None)


def test_catalog_card_without_cuda_names_the_key_and_the_way_out() -> None:
    with pytest.raises(ConfigError) as raised:
        resolve_device(HardwareConfig(name="rtx3050ti", vram_gb=4.0, vram_limit_gb=4.0), cuda_available=False)
    message = str(raised.value)
    assert "`hardware` = 'rtx3050ti'" in message
    assert "emulates that card's VRAM" in message
    assert "hardware=cpu" in message and "hardware=auto" in message


def test_catalog_card_with_cuda_runs_on_the_gpu() -> None:
    device, notice = resolve_device(HardwareConfig(name="t4", vram_limit_gb=16.0), cuda_available=True)
    assert device == torch.device("cuda", 0) and notice is None


def test_allocator_fraction_leaves_the_overhead_out_of_the_limit() -> None:
    assert allocator_fraction(4096.0, 0.0, 16384.0) == 0.25
    assert allocator_fraction(16384.0, 0.0, 16384.0) == 1.0
    # 4 GiB card on a 16 GiB one, 1 GiB held by the CUDA context: the allocator gets 3 GiB of the 16.
    assert allocator_fraction(4096.0, 1024.0, 16384.0) == 0.1875


def test_vram_limit_larger_than_the_card_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"`hardware.vram_limit_gb` = 80.0 is not valid.*\(40.0 GB\)"):
        allocator_fraction(80 * 1024.0, 500.0, 40 * 1024.0)


def test_overhead_filling_the_limit_is_a_config_error() -> None:
    with pytest.raises(
        ConfigError,
        match=r"`hardware.vram_limit_gb` = 1.0 is not valid: the CUDA context and libraries already hold 1,100 MB",
    ):
        allocator_fraction(1024.0, 1100.0, 40 * 1024.0)


def test_non_allocator_overhead_prefers_nvml_and_falls_back_to_device_used() -> None:
    reserved_bytes = 550 * 2**20
    # NVML: 1,300 MB for this process; cudaMemGetInfo's used memory (2,000 MB) also counts other processes.
    free_bytes = 16 * GIB - 2000 * 2**20
    assert non_allocator_overhead_mb(reserved_bytes, 1300.0, free_bytes, 16 * GIB) == (750.0, "nvml_process")
    assert non_allocator_overhead_mb(reserved_bytes, None, free_bytes, 16 * GIB) == (1450.0, "device_used")
    # Readings are not atomic: a reservation read after the NVML figure can exceed it; the overhead stays >= 0.
    assert non_allocator_overhead_mb(reserved_bytes, 500.0, free_bytes, 16 * GIB) == (0.0, "nvml_process")


def test_vram_limit_is_ignored_on_the_cpu() -> None:
    assert apply_vram_limit(torch.device("cpu"), 4.0) is None


class _FakeCudaProperties:
    total_memory = 16 * GIB


@pytest.fixture
def fake_cuda_allocator(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """A 16 GiB CUDA card whose context holds 750 MB outside the allocator; returns the fractions the cap was set to."""
    fractions: list[float] = []
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: _FakeCudaProperties())
    monkeypatch.setattr(torch.cuda, "set_per_process_memory_fraction", lambda f, device: fractions.append(f))
    monkeypatch.setattr(vram_module, "_measure_non_allocator_overhead", lambda device: (750.0, "nvml_process"))
    return fractions


def test_vram_limit_caps_the_allocator_at_the_limit_less_the_overhead(fake_cuda_allocator: list[float]) -> None:
    budget = apply_vram_limit(torch.device("cuda", 0), 4.0)
    assert budget == VramBudget(
        vram_limit_mb=4096.0, non_allocator_overhead_mb=750.0, usable_vram_mb=3346.0, overhead_source="nvml_process"
    )
    assert fake_cuda_allocator == [3346.0 / 16384.0]
    # The probe carries the budget into the report's hardware object.
    hardware = probe(torch.device("cuda", 0), budget, nvml=Nvml(FakeNvml([FakeGpu()])), identity=identity())
    written = hardware.to_dict()
    assert {field.name: written[field.name] for field in dataclasses.fields(VramBudget)} == {
        "vram_limit_mb": 4096.0,
        "non_allocator_overhead_mb": 750.0,
        "usable_vram_mb": 3346.0,
        "overhead_source": "nvml_process",
    }


def test_no_vram_limit_uncaps_the_allocator_and_still_reports_the_overhead(fake_cuda_allocator: list[float]) -> None:
    budget = apply_vram_limit(torch.device("cuda", 0), None)
    assert fake_cuda_allocator == [1.0]
    assert budget is not None
    assert (budget.vram_limit_mb, budget.usable_vram_mb) == (16384.0, 16384.0 - 750.0)


def test_vram_limit_larger_than_the_card_raises_before_capping(fake_cuda_allocator: list[float]) -> None:
    with pytest.raises(ConfigError, match=r"`hardware.vram_limit_gb` = 20.0 is not valid"):
        apply_vram_limit(torch.device("cuda", 0), 20.0)
    assert fake_cuda_allocator == []


# --------------------------------------------------------------------------------------------------- NVML names


@pytest.mark.parametrize(
    "module", [identity_module, probe_module, nvml_module], ids=["identity.py", "probe.py", "nvml.py"]
)
def test_fake_and_module_use_real_pynvml_names(module: ModuleType) -> None:
    """A misspelt NVML function would silently read None in production; check every name against nvidia-ml-py."""
    source = Path(module.__file__).read_text(encoding="utf-8")
    used = set(re.findall(r'"(nvml[A-Z][A-Za-z_]+|NVML_[A-Z_]+)"', source))
    faked = {name for name in dir(FakeNvml) if name.startswith(("nvml", "NVML_"))}
    assert used, f"no NVML names found in {module.__file__}"
    assert used <= faked, f"{module.__file__} uses names the fake lacks: {used - faked}"
    assert {name for name in faked if not hasattr(pynvml, name)} == set()
    assert FakeNvml.NVML_CLOCK_SM == pynvml.NVML_CLOCK_SM
    assert FakeNvml.NVML_TEMPERATURE_GPU == pynvml.NVML_TEMPERATURE_GPU


def test_throttle_reason_bits_match_pynvml() -> None:
    for name, bit in nvml_module.THROTTLE_REASON_BITS.items():
        camel = "".join(word.capitalize() for word in name.split("_"))
        assert getattr(pynvml, f"nvmlClocksEventReason{camel}") == bit, name


def test_decode_throttle_reasons() -> None:
    assert decode_throttle_reasons(None) is None
    assert decode_throttle_reasons(0) == []
    assert decode_throttle_reasons(0x1 | 0x100) == ["gpu_idle", "display_clock_setting"]
    assert decode_throttle_reasons(0x4 | 0x40) == ["sw_power_cap", "hw_thermal_slowdown"]


def test_nvml_is_initialised_once_per_session() -> None:
    fake = FakeNvml([FakeGpu()])
    nvml = Nvml(fake)
    for _ in range(3):
        assert nvml.query("nvmlDeviceGetCount") == 1
    assert fake.init_calls == 1
    assert nvml_module.default_nvml() is nvml_module.default_nvml()


# --------------------------------------------------------------------------------------------------- index mapping


def test_parse_pci_bus_id_ignores_domain_width_and_case() -> None:
    assert parse_pci_bus_id("00000000:3B:00.0") == parse_pci_bus_id("0000:3b:00.0") == (0, 0x3B, 0)
    assert parse_pci_bus_id("not a bus id") is None
    assert parse_pci_bus_id(None) is None


def test_index_mapping_follows_pci_when_cuda_visible_devices_reorders() -> None:
    # CUDA_VISIBLE_DEVICES=2,0: torch's cuda:0 is NVML's device 2 (bus 0x5d), torch's cuda:1 is NVML's 0 (0x19).
    nvml = Nvml(FakeNvml(three_gpus()))
    assert nvml_index_for(0, nvml=nvml, identity=identity(0, pci_location=(0, 0x5D, 0))) == 2
    assert nvml_index_for(1, nvml=nvml, identity=identity(1, pci_location=(0, 0x19, 0))) == 0


def test_index_mapping_by_uuid_tolerates_torch_format() -> None:
    nvml = Nvml(FakeNvml(three_gpus()))
    torch_style = "1AAAAAAA-0000-0000-0000-000000000001"  # no "GPU-" prefix, other case
    assert nvml_index_for(0, nvml=nvml, identity=identity(uuid=torch_style)) == 1


def test_uuid_wins_over_a_contradicting_pci_location() -> None:
    nvml = Nvml(FakeNvml(three_gpus()))
    found = nvml_index_for(
        0, nvml=nvml, identity=identity(uuid="2aaaaaaa-0000-0000-0000-000000000002", pci_location=(0, 0x19, 0))
    )
    assert found == 2


def test_index_mapping_falls_back_to_pci_when_uuid_is_unreadable() -> None:
    nvml = Nvml(FakeNvml(three_gpus(), unsupported={"nvmlDeviceGetUUID"}))
    found = nvml_index_for(
        0, nvml=nvml, identity=identity(uuid="1aaaaaaa-0000-0000-0000-000000000001", pci_location=(0, 0x3B, 0))
    )
    assert found == 1


def test_unknown_device_maps_to_none() -> None:
    nvml = Nvml(FakeNvml(three_gpus()))
    assert nvml_index_for(0, nvml=nvml, identity=identity(uuid="ffffffff", pci_location=(0, 0x99, 0))) is None
    assert nvml_index_for(0, nvml=Nvml(FakeNvml([])), identity=identity(pci_location=(0, 0x19, 0))) is None


# --------------------------------------------------------------------------------------------------- probe


def test_probe_reads_every_field_from_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.version, "cuda", "12.4")
    gpus = three_gpus()
    gpus[2].throttle_mask = 0x4 | 0x40
    gpus[2].temperature_c = 64
    gpus[2].sm_clock_mhz = 1755
    nvml = Nvml(FakeNvml(gpus, driver_version="550.54.15", cuda_driver_version=12040))

    info = probe(torch.device("cuda", 1), nvml=nvml, identity=identity(1, pci_location=(0, 0x5D, 0)))

    assert info.measured_on == "cuda"
    assert (info.torch_index, info.nvml_index) == (1, 2)
    assert info.device_name == "NVIDIA H200"
    assert info.uuid == "GPU-2aaaaaaa-0000-0000-0000-000000000002"
    assert info.total_vram_mb == 140 * 1024
    assert info.driver_version == "550.54.15"
    assert info.cuda_driver_version == "12.4"
    assert info.cuda_version == "12.4"
    assert info.compute_capability == "9.0"
    assert info.power_limit_w == 700.0
    assert (info.sm_clock_mhz, info.max_sm_clock_mhz) == (1755.0, 1980.0)
    assert info.temperature_c == 64.0
    assert info.throttle_reasons == ["sw_power_cap", "hw_thermal_slowdown"]
    assert info.nvml_available and info.energy_counter_available
    assert info.notices == []

    report = info.to_dict()
    for key in ("device_name", "total_vram_mb", "cuda_version", "driver_version", "compute_capability"):
        assert report[key] is not None, key
    assert report["warmup_stats"] is None
    assert report["not_measured"] == ["warmup_stats"]
    json.dumps(report)


def test_probe_reports_warmup_stats_under_the_report_keys() -> None:
    nvml = Nvml(FakeNvml([FakeGpu()]))
    probed = probe(torch.device("cuda", 0), nvml=nvml, identity=identity(pci_location=(0, 0x19, 0)))
    warmup_stats = burn_in(
        torch.device("cpu"), matrix_size=8, min_seconds=0.0, clock=scripted_clock([20] * 5), sampler=DeviceSample
    )
    info = dataclasses.replace(probed, warmup_stats=warmup_stats)
    warmup = info.to_dict()["warmup_stats"]
    assert warmup["epochs"] == 5
    assert warmup["mean_time_ms"] == pytest.approx(20.0)
    assert "final_temperature_celsius" in warmup
    assert "warmup_stats" not in info.to_dict()["not_measured"]


def test_probe_degrades_when_nvml_cannot_start() -> None:
    nvml = Nvml(FakeNvml([FakeGpu()], init_error=NVML_ERROR_LIBRARY_NOT_FOUND))
    assert not nvml.available
    assert nvml.query("nvmlDeviceGetCount") is None

    info = probe(torch.device("cuda", 0), nvml=nvml, identity=identity(pci_location=(0, 0x19, 0)))

    assert info.device_name == "NVIDIA H200"  # from torch
    assert info.total_vram_mb == 140 * 1024
    assert info.compute_capability == "9.0"
    assert not info.nvml_available and not info.energy_counter_available
    for name in ("driver_version", "temperature_c", "sm_clock_mhz", "throttle_reasons", "nvml_index"):
        assert getattr(info, name) is None, name
        assert name in info.to_dict()["not_measured"]
    assert len(info.notices) == 1 and info.notices[0].startswith("NVML unavailable (NVMLError")


def test_probe_degrades_field_by_field_on_unsupported_queries() -> None:
    unsupported = {
        "nvmlDeviceGetTotalEnergyConsumption",
        "nvmlDeviceGetTemperature",
        "nvmlDeviceGetEnforcedPowerLimit",  # falls back to the management limit
        "nvmlDeviceGetCurrentClocksEventReasons",  # falls back to the pre-R535 name
    }
    gpu = FakeGpu(throttle_mask=0x20)
    nvml = Nvml(FakeNvml([gpu], unsupported=unsupported))

    info = probe(torch.device("cuda", 0), nvml=nvml, identity=identity(pci_location=(0, 0x19, 0)))

    assert info.temperature_c is None
    assert not info.energy_counter_available
    assert info.power_limit_w == 700.0
    assert info.throttle_reasons == ["sw_thermal_slowdown"]
    assert info.sm_clock_mhz == 1980.0
    assert info.notices == ["NVML could not read: temperature_c, energy counter"]


def test_probe_says_so_when_nvml_does_not_list_the_device() -> None:
    nvml = Nvml(FakeNvml(three_gpus()))
    info = probe(torch.device("cuda", 0), nvml=nvml, identity=identity(pci_location=(0, 0x99, 0)))
    assert info.nvml_index is None and info.temperature_c is None
    assert info.notices == ["NVML could not find torch's cuda:0 by UUID or PCI bus id; GPU telemetry not measured"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the real pynvml on a machine without an NVIDIA driver")
def test_real_pynvml_without_a_driver_degrades() -> None:
    nvml = Nvml()
    assert not nvml.available
    assert nvml.notice is not None and "GPU telemetry not measured" in nvml.notice


def test_probe_on_cpu_describes_the_processor_and_marks_gpu_fields() -> None:
    info = probe(torch.device("cpu"))
    assert info.measured_on == "cpu"
    assert info.device_name == info.cpu_name != ""
    assert info.cpu_logical_cores == os.cpu_count()
    assert info.ram_mb is not None and info.ram_mb > 0
    assert not info.nvml_available
    report = info.to_dict()
    device_fields = [
        "total_vram_mb",
        "cuda_version",
        "cuda_driver_version",
        "driver_version",
        "compute_capability",
        "uuid",
        "nvml_index",
        "power_limit_w",
        "sm_clock_mhz",
        "max_sm_clock_mhz",
        "temperature_c",
        "throttle_reasons",
        "warmup_stats",
    ]
    assert report["not_measured"] == device_fields
    assert all(report[name] is None for name in device_fields)
    # Nor is there a VRAM budget on the CPU: its fields are written, as None.
    assert all(report[field.name] is None for field in dataclasses.fields(VramBudget))
    json.dumps(report)


# --------------------------------------------------------------------------------------------------- burn-in


def scripted_clock(iteration_ms: list[float]) -> Callable[[], float]:
    """A clock for burn_in: one read at the start, then (begin, end) per iteration lasting iteration_ms[i].

    Running past the script raises StopIteration, so a burn-in that ignores its bound fails the test.
    """
    readings = [0.0]
    elapsed_ms = 0.0
    for duration_ms in iteration_ms:
        readings += [elapsed_ms / 1e3, (elapsed_ms + duration_ms) / 1e3]
        elapsed_ms += duration_ms
    iterator = iter(readings)
    return lambda: next(iterator)


def scripted_sampler(sm_clocks_mhz: list[float], temperature_c: float = 50.0) -> Callable[[], DeviceSample]:
    iterator = iter(sm_clocks_mhz)
    return lambda: DeviceSample(temperature_c=temperature_c, sm_clock_mhz=next(iterator))


CPU = torch.device("cpu")


def test_burn_in_stops_once_times_and_clock_settle() -> None:
    times_ms = [80, 40, 25, 20.0, 20.1, 19.9, 20.0, 20.2, 20.0, 20.0, 20.0]
    stats = burn_in(
        CPU,
        matrix_size=8,
        min_seconds=0.0,
        clock=scripted_clock(times_ms),
        sampler=scripted_sampler([1980.0] * len(times_ms)),
    )
    # Iterations 3..7 are the first window of five within 2% (spread 0.3 / 20.0 = 1.5%).
    assert stats.stabilised
    assert stats.epochs == 8
    assert stats.mean_time_ms == pytest.approx((20.0 + 20.1 + 19.9 + 20.0 + 20.2) / 5)
    assert stats.seconds == pytest.approx(sum(times_ms[:8]) / 1e3)
    assert (stats.final_sm_clock_mhz, stats.peak_sm_clock_mhz, stats.final_temperature_celsius) == (
        1980.0,
        1980.0,
        50.0,
    )


def test_burn_in_waits_for_the_clock_to_settle_too() -> None:
    times_ms = [80, 40, 25] + [20.0] * 17
    clocks = [1980.0] * 7 + [1850.0, 1800.0] + [1790.0] * 11
    stats = burn_in(
        CPU, matrix_size=8, min_seconds=0.0, clock=scripted_clock(times_ms), sampler=scripted_sampler(clocks)
    )
    # Times settle at iteration 7; the clock window first fits 2% at iterations 8..12 (1800..1790).
    assert stats.stabilised and stats.epochs == 13
    assert stats.final_sm_clock_mhz == 1790.0
    assert stats.peak_sm_clock_mhz == 1980.0


def test_burn_in_respects_its_time_bound() -> None:
    times_ms = [20.0, 25.0] * 100  # 22% spread: never settles
    stats = burn_in(
        CPU, matrix_size=8, max_seconds=1.0, min_seconds=0.0, clock=scripted_clock(times_ms), sampler=DeviceSample
    )
    # 22 pairs take 0.99 s; the 45th iteration ends at 1.01 s, the first reading past the bound.
    assert not stats.stabilised
    assert stats.epochs == 45
    assert stats.seconds == pytest.approx(1.01)


def test_burn_in_runs_at_least_min_seconds() -> None:
    stats = burn_in(CPU, matrix_size=8, min_seconds=0.5, clock=scripted_clock([20.0] * 100), sampler=DeviceSample)
    assert stats.stabilised and stats.epochs == 25


def test_burn_in_on_cpu_is_capped_in_time_and_size() -> None:
    stats = burn_in(
        CPU, max_seconds=30.0, min_seconds=0.0, clock=scripted_clock([150.0, 200.0] * 20), sampler=DeviceSample
    )
    # Capped at 1 s: 2 pairs take 0.70 s, the 6th iteration ends at 1.05 s.
    assert stats.epochs == 6 and not stats.stabilised
    assert stats.seconds == pytest.approx(1.05)
    assert stats.matrix_size == 256
    assert stats.final_sm_clock_mhz is None and stats.peak_sm_clock_mhz is None


def test_burn_in_on_cpu_with_the_real_clock() -> None:
    stats = burn_in(CPU, max_seconds=0.2, matrix_size=64, min_seconds=0.0)
    assert stats.epochs >= 1 and stats.mean_time_ms > 0 and stats.achieved_tflops > 0
    assert stats.seconds < 0.2 + 1.0  # stops at the first iteration past the bound


# --------------------------------------------------------------------------------------------------- thermal watch


@pytest.mark.parametrize(
    ("temperature_c", "status"),
    [
        (None, "not measured"),
        (69.9, "ok"),
        (70.0, "warm"),
        (79.9, "warm"),
        (80.0, "hot"),
        (89.9, "hot"),
        (90.0, "stop"),
    ],
)
def test_temperature_status_default_thresholds(temperature_c: float | None, status: str) -> None:
    assert temperature_status(temperature_c, HardwareConfig()) == status


def test_temperature_status_follows_configured_thresholds() -> None:
    cfg = HardwareConfig(temperature_warn_c=60.0, temperature_throttle_c=65.0, temperature_stop_c=75.0)
    assert [temperature_status(t, cfg) for t in (59.0, 64.0, 65.0, 75.0)] == ["ok", "warm", "hot", "stop"]


def test_throttle_verdict() -> None:
    assert throttle_verdict(None, 1980.0, None) == (None, None)
    assert throttle_verdict(1500.0, 1980.0, []) == (False, None)  # 1500 >= 0.75 * 1980 = 1485
    assert throttle_verdict(1500.0, 1980.0, ["gpu_idle", "sync_boost"]) == (False, None)
    throttled, cause = throttle_verdict(1400.0, 1980.0, [])
    assert throttled and cause == "SM clock 1400 MHz < 75% of 1980 MHz"
    assert throttle_verdict(1980.0, 1980.0, ["hw_thermal_slowdown"]) == (True, "hw_thermal_slowdown")
    assert throttle_verdict(None, None, ["sw_power_cap"]) == (True, "sw_power_cap")
    assert throttle_verdict(1400.0, None, []) == (False, None)  # no reference: the clock alone cannot tell


def fake_gpu_monitor(gpu: FakeGpu, readings_s: list[float], *, unsupported: set[str] | None = None) -> DeviceMonitor:
    """A monitor of one fake GPU with a 1980 MHz reference clock and a clock reading ``readings_s`` in turn."""
    nvml = Nvml(FakeNvml([gpu], unsupported=unsupported))
    device = torch.device("cuda", 0)
    sampler = device_sampler(device, nvml=nvml, identity=identity(pci_location=(0, 0x19, 0)))
    clock = iter(readings_s)
    return DeviceMonitor(
        device, HardwareConfig(), reference_sm_clock_mhz=1980.0, sampler=sampler, clock=lambda: next(clock)
    )


def test_monitor_measures_epoch_energy_and_mean_power() -> None:
    gpu = FakeGpu(energy_mj=1_000_000)
    monitor = fake_gpu_monitor(gpu, [10.0, 12.0])
    monitor.start_epoch()
    gpu.energy_mj += 123_456
    gpu.power_mw, gpu.temperature_c = 350_000, 72
    stats = monitor.end_epoch("measured", 1)
    assert (stats.phase, stats.epoch) == ("measured", 1)
    assert stats.energy_j == pytest.approx(123.456)
    assert stats.mean_power_w == pytest.approx(123.456 / 2.0)
    assert stats.power_w == 350.0
    assert (stats.temperature_c, stats.temperature_status) == (72.0, "warm")
    assert stats.throttled is False


def test_monitor_reads_only_the_energy_counter_at_the_epoch_start() -> None:
    gpu = FakeGpu(energy_mj=1_000_000)
    fake = FakeNvml([gpu])
    nvml_device = open_nvml_device(
        torch.device("cuda", 0), nvml=Nvml(fake), identity=identity(pci_location=(0, 0x19, 0))
    )
    assert nvml_device is not None
    clock = iter([0.0, 2.0])
    monitor = DeviceMonitor(
        CPU,
        HardwareConfig(),
        sampler=nvml_device.sample,
        energy_reader=nvml_device.energy_mj,
        clock=lambda: next(clock),
    )
    fake.calls.clear()
    monitor.start_epoch()
    assert fake.calls == ["nvmlDeviceGetTotalEnergyConsumption"]
    gpu.energy_mj += 50_000
    stats = monitor.end_epoch("measured", 1)
    assert stats.energy_j == pytest.approx(50.0) and stats.mean_power_w == pytest.approx(25.0)
    assert stats.temperature_c == 35.0 and stats.sm_clock_mhz == 1980.0


def test_monitor_without_energy_counter_reports_none() -> None:
    monitor = fake_gpu_monitor(FakeGpu(), [0.0, 1.0], unsupported={"nvmlDeviceGetTotalEnergyConsumption"})
    monitor.start_epoch()
    stats = monitor.end_epoch("measured", 1)
    assert stats.energy_j is None and stats.mean_power_w is None


def test_monitor_flags_a_slow_clock_and_a_thermal_reason() -> None:
    gpu = FakeGpu()
    monitor = fake_gpu_monitor(gpu, [0.0, 1.0, 1.0, 2.0, 2.0, 3.0])
    monitor.start_epoch()
    gpu.sm_clock_mhz = 1400
    slow = monitor.end_epoch("warmup", 1)
    monitor.start_epoch()
    gpu.sm_clock_mhz, gpu.throttle_mask = 1980, 0x40
    hot = monitor.end_epoch("measured", 1)
    monitor.start_epoch()
    gpu.throttle_mask = 0x1
    idle = monitor.end_epoch("measured", 2)
    assert slow.throttled and slow.throttle_cause is not None and slow.throttle_cause.startswith("SM clock 1400")
    assert hot.throttled and hot.throttle_reasons == ["hw_thermal_slowdown"]
    assert idle.throttled is False and idle.throttle_reasons == ["gpu_idle"]
    assert monitor.epochs == [slow, hot, idle]


def test_monitor_needs_start_before_end() -> None:
    monitor = fake_gpu_monitor(FakeGpu(), [0.0, 1.0])
    with pytest.raises(RuntimeError, match="without start_epoch"):
        monitor.end_epoch("measured", 1)


def test_monitor_on_cpu_measures_nothing() -> None:
    monitor = DeviceMonitor(CPU, HardwareConfig())
    monitor.start_epoch()
    stats = monitor.end_epoch("warmup", 1)
    assert stats.temperature_status == "not measured"
    assert stats.throttled is None
    measured = {key: value for key, value in stats.to_dict().items() if key not in ("phase", "epoch")}
    assert all(value is None for key, value in measured.items() if key != "temperature_status"), measured
    assert monitor.stop_reason() is None
    assert energy_summary(monitor.epochs, samples_per_epoch=100.0) is None


def test_monitor_asks_to_stop_once_the_card_passes_its_stop_temperature() -> None:
    gpu = FakeGpu(temperature_c=85)
    monitor = fake_gpu_monitor(gpu, [0.0, 1.0, 1.0, 2.0])
    monitor.start_epoch()
    monitor.end_epoch("measured", 1)
    assert monitor.stop_reason() is None  # hot (>= 80 °C), not yet stop
    gpu.temperature_c = 90
    monitor.start_epoch()
    assert monitor.end_epoch("measured", 2).temperature_status == "stop"
    assert monitor.stop_reason() == "thermal_stop"


def device_epoch(phase: str, energy_j: float | None) -> DeviceEpoch:
    return DeviceEpoch(phase, 1, None, "not measured", None, None, None, None, energy_j, None, None)


def test_energy_summary_averages_the_measured_epochs_only() -> None:
    epochs = [device_epoch("warmup", 500.0), device_epoch("measured", 90.0), device_epoch("measured", 110.0)]
    assert energy_summary(epochs, samples_per_epoch=400.0) == EnergySummary(
        joules_per_epoch=100.0, joules_per_sample=0.25, epochs=2
    )
    assert energy_summary([*epochs, device_epoch("measured", None)], 400.0) == energy_summary(epochs, 400.0)
    assert energy_summary(epochs, samples_per_epoch=0.0) == EnergySummary(100.0, None, 2)
