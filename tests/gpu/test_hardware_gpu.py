"""Hardware manager on a real CUDA GPU: NVML probe, index mapping, burn-in, thermal watch, VRAM cap."""

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from gpubench.errors import ConfigError
from gpubench.hardware.burn_in import burn_in
from gpubench.hardware.config import HardwareConfig
from gpubench.hardware.identity import cuda_identity, nvml_index_for, open_nvml_device
from gpubench.hardware.monitor import DeviceMonitor
from gpubench.hardware.nvml import THROTTLE_REASON_BITS, default_nvml
from gpubench.hardware.probe import probe
from gpubench.hardware.selection import resolve_device
from gpubench.hardware.vram import apply_vram_limit

pytestmark = pytest.mark.gpu

DEVICE = torch.device("cuda", 0)
REPO_ROOT = Path(__file__).resolve().parents[2]


def _bare_uuid(uuid: str) -> str:
    return uuid.lower().removeprefix("gpu-")


def test_auto_and_catalog_cards_pick_the_gpu() -> None:
    assert resolve_device(HardwareConfig(name="auto")) == (DEVICE, None)
    assert resolve_device(HardwareConfig(name="rtx3050ti", vram_gb=4.0, vram_limit_gb=4.0)) == (DEVICE, None)


def test_probe_fills_every_field_from_torch_and_nvml() -> None:
    props = torch.cuda.get_device_properties(0)
    info = probe(DEVICE)

    assert info.measured_on == "cuda"
    assert info.nvml_available, info.notices
    assert info.notices == [], info.notices
    assert props.name in info.device_name or info.device_name in props.name
    assert info.total_vram_mb == props.total_memory / 2**20
    assert info.compute_capability == f"{props.major}.{props.minor}"
    assert info.cuda_version == torch.version.cuda
    assert info.driver_version and info.cuda_driver_version
    # The driver must support at least the CUDA runtime torch was built with, or nothing would run.
    driver_cuda = tuple(int(part) for part in info.cuda_driver_version.split("."))
    runtime_cuda = tuple(int(part) for part in torch.version.cuda.split(".")[:2])
    assert driver_cuda >= runtime_cuda
    assert info.uuid is not None and _bare_uuid(info.uuid) == _bare_uuid(str(props.uuid))
    assert info.power_limit_w is not None and 50.0 < info.power_limit_w < 2000.0
    assert info.sm_clock_mhz is not None and info.max_sm_clock_mhz is not None
    assert 0 < info.sm_clock_mhz <= info.max_sm_clock_mhz
    assert info.temperature_c is not None and 5.0 < info.temperature_c < 100.0
    assert info.throttle_reasons is not None and set(info.throttle_reasons) <= set(THROTTLE_REASON_BITS)
    assert info.energy_counter_available  # Volta and newer have the counter
    assert info.to_dict()["not_measured"] == ["warmup_stats"]


def test_nvml_index_matches_by_uuid_and_by_pci_alike() -> None:
    nvml = default_nvml()
    identity = cuda_identity(0)
    by_uuid = nvml_index_for(0)
    assert by_uuid is not None
    handle = nvml.query("nvmlDeviceGetHandleByIndex", by_uuid)
    assert _bare_uuid(nvml.query("nvmlDeviceGetUUID", handle)) == _bare_uuid(identity.uuid or "")
    assert identity.pci_location is not None, "torch did not expose the PCI location"
    by_pci = nvml_index_for(0, identity=dataclasses.replace(identity, uuid=None))
    assert by_pci == by_uuid


def test_nvml_index_under_cuda_visible_devices() -> None:
    nvml = default_nvml()
    count = nvml.query("nvmlDeviceGetCount") or 0
    if count < 2:
        pytest.skip("needs two GPUs to make torch's and NVML's indices differ")
    last = count - 1
    last_uuid = nvml.query("nvmlDeviceGetUUID", nvml.query("nvmlDeviceGetHandleByIndex", last))
    # Only NVML's last GPU visible: it is torch's cuda:0 but NVML's index `last`.
    result = subprocess.run(
        [sys.executable, "-c", "from gpubench.hardware.identity import nvml_index_for; print(nvml_index_for(0))"],
        env={**os.environ, "CUDA_VISIBLE_DEVICES": last_uuid},
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert int(result.stdout.strip()) == last


def test_burn_in_settles_within_its_bound() -> None:
    stats = burn_in(DEVICE, max_seconds=10.0, matrix_size=2048, min_seconds=1.0)
    assert 1.0 <= stats.seconds < 10.0 + 1.0  # may overrun by the last iteration only
    assert stats.epochs >= 5
    assert stats.mean_time_ms > 0
    assert stats.achieved_tflops > 1.0  # any datacenter GPU multiplies 2048^2 fp32 matrices faster than this
    assert stats.final_sm_clock_mhz is not None and stats.peak_sm_clock_mhz is not None
    assert 0 < stats.final_sm_clock_mhz <= stats.peak_sm_clock_mhz
    assert stats.final_temperature_celsius is not None


def test_device_monitor_measures_energy_over_a_loaded_epoch() -> None:
    info = probe(DEVICE)
    monitor = DeviceMonitor(DEVICE, HardwareConfig(), reference_sm_clock_mhz=info.max_sm_clock_mhz)
    matrix = torch.randn(4096, 4096, device=DEVICE)
    torch.cuda.synchronize()
    monitor.start_epoch()
    # About a second of matmuls: the energy counter updates every few tens of ms.
    for _ in range(300):
        matrix = torch.tanh(matrix @ matrix.T * 1e-3)
    torch.cuda.synchronize()
    stats = monitor.end_epoch("measured", 1)

    assert stats.energy_j is not None and stats.energy_j > 0
    assert stats.mean_power_w is not None and info.power_limit_w is not None
    assert 10.0 < stats.mean_power_w < 1.2 * info.power_limit_w
    assert stats.temperature_status in ("ok", "warm", "hot", "stop")
    assert stats.throttled is not None
    assert stats.sm_clock_mhz is not None and stats.sm_clock_mhz > 0


def test_vram_cap_leaves_the_context_overhead_out_of_the_allocator() -> None:
    torch.cuda.empty_cache()
    try:
        budget = apply_vram_limit(DEVICE, 4.0)
        assert budget is not None
        assert budget.vram_limit_mb == 4096.0
        # The CUDA context alone is a few hundred MB on any recent GPU; more than 2 GB would leave no 4 GB card.
        assert 100.0 < budget.non_allocator_overhead_mb < 2048.0
        assert budget.usable_vram_mb == 4096.0 - budget.non_allocator_overhead_mb
        # Allocations still held by torch (cuBLAS workspaces) count against the cap too.
        free_mb = budget.usable_vram_mb - torch.cuda.memory_reserved(DEVICE) / 2**20
        fits = torch.empty(int((free_mb - 64) * 2**20), dtype=torch.uint8, device=DEVICE)
        del fits
        torch.cuda.empty_cache()
        with pytest.raises(torch.cuda.OutOfMemoryError):
            torch.empty(int((free_mb + 64) * 2**20), dtype=torch.uint8, device=DEVICE)
    finally:
        torch.cuda.empty_cache()
        uncapped = apply_vram_limit(DEVICE, None)
    assert uncapped is not None
    assert uncapped.vram_limit_mb == torch.cuda.get_device_properties(0).total_memory / 2**20
    assert uncapped.usable_vram_mb == uncapped.vram_limit_mb - uncapped.non_allocator_overhead_mb
    # Uncapped again: an allocation past the 4 GB limit now fits.
    large = torch.empty(5 * 1024**3, dtype=torch.uint8, device=DEVICE)
    assert large.numel() == 5 * 1024**3
    del large
    torch.cuda.empty_cache()


def test_overhead_agrees_with_nvml_for_this_process() -> None:
    budget = apply_vram_limit(DEVICE, None)
    assert budget is not None
    nvml_device = open_nvml_device(DEVICE)
    assert nvml_device is not None
    process_used_mb = nvml_device.process_used_mb(os.getpid())
    if process_used_mb is None:
        pytest.skip("NVML cannot attribute memory to this process here (PID namespace)")
    assert budget.overhead_source == "nvml_process"
    expected_mb = process_used_mb - torch.cuda.memory_reserved(DEVICE) / 2**20
    assert budget.non_allocator_overhead_mb == pytest.approx(expected_mb, abs=64.0)


def test_vram_limit_above_the_card_is_a_config_error() -> None:
    total_gb = torch.cuda.get_device_properties(0).total_memory / 1024**3
    with pytest.raises(ConfigError, match=r"`hardware\.vram_limit_gb` = .* is not valid"):
        apply_vram_limit(DEVICE, total_gb + 1.0)
