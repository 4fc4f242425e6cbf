"""Epoch sizing and block timing against a fake clock: exact known answers, no real time involved."""

import math

import pytest

from gpubench.measure.timing import BlockTimer, resize_after_warmup, size_epoch


class FakeDevice:
    """A fake clock and device: each step costs ``step_s`` of fake time; the first step costs ``first_s``."""

    def __init__(self, step_s: float, first_s: float | None = None) -> None:
        self.now_s = 100.0
        self.step_s = step_s
        self.first_s = first_s if first_s is not None else step_s
        self.steps_run = 0
        self.sync_count = 0
        self.events: list[str] = []

    def clock(self) -> float:
        self.events.append("clock")
        return self.now_s

    def synchronize(self) -> None:
        self.sync_count += 1
        self.events.append("sync")

    def run_steps(self, count: int) -> None:
        for _ in range(count):
            self.now_s += self.first_s if self.steps_run == 0 else self.step_s
            self.steps_run += 1
        self.events.append(f"steps:{count}")


def test_block_timer_syncs_before_start_and_before_stop_only():
    device = FakeDevice(step_s=0.01)
    timer = BlockTimer(device.synchronize, device.clock)
    seconds = timer.time_block(lambda: device.run_steps(5))
    assert seconds == pytest.approx(0.05)
    # sync, read clock, work, sync, read clock: nothing synchronises inside the block.
    assert device.events == ["sync", "clock", "steps:5", "sync", "clock"]


def test_size_epoch_reaches_min_seconds_with_the_smallest_count():
    device = FakeDevice(step_s=0.003, first_s=2.0)
    timer = BlockTimer(device.synchronize, device.clock)
    sizing = size_epoch(lambda n: timer.time_block(lambda: device.run_steps(n)), min_seconds=1.0, max_steps=10**6)
    assert sizing.first_step_s == pytest.approx(2.0)
    # 1.0 s / 3 ms per step = 333.33 -> 334 steps is the smallest count whose block lasts >= 1 s.
    assert sizing.steps_per_epoch == 334
    assert sizing.steps_per_epoch * 0.003 >= 1.0 > (sizing.steps_per_epoch - 1) * 0.003
    # The last probe lasted at least a quarter of the target; earlier ones did not.
    assert sizing.probe_seconds[-1] >= 0.25
    assert all(s < 0.25 for s in sizing.probe_seconds[:-1])
    assert sizing.calibration_seconds == pytest.approx(2.0 + sum(sizing.probe_seconds))
    assert sizing.automatic


def test_size_epoch_probe_count_is_logarithmic():
    # A step of 2**-20 s keeps the fake clock's sums exact in binary floating point.
    device = FakeDevice(step_s=2.0**-20)
    sizing = size_epoch(
        lambda n: BlockTimer(device.synchronize, device.clock).time_block(lambda: device.run_steps(n)),
        min_seconds=1.0,
        max_steps=10**8,
    )
    assert sizing.steps_per_epoch == 2**20
    # Growth is at most 8x per probe: from 1 step to >= 2**18 steps takes ceil(log8(2**18)) + 1 = 7 probes.
    assert len(sizing.probe_steps) <= math.ceil(math.log(2**18, 8)) + 1


def test_size_epoch_slow_step_uses_one_step():
    device = FakeDevice(step_s=3.0)
    sizing = size_epoch(
        lambda n: BlockTimer(device.synchronize, device.clock).time_block(lambda: device.run_steps(n)),
        min_seconds=1.0,
        max_steps=1000,
    )
    assert sizing.steps_per_epoch == 1
    assert sizing.probe_steps == (1,)


def test_size_epoch_respects_the_cap_and_fixed_steps():
    device = FakeDevice(step_s=1e-6)
    timer = BlockTimer(device.synchronize, device.clock)
    capped = size_epoch(lambda n: timer.time_block(lambda: device.run_steps(n)), min_seconds=1.0, max_steps=500)
    assert capped.steps_per_epoch == 500
    assert max(capped.probe_steps) <= 500
    fixed = size_epoch(
        lambda n: timer.time_block(lambda: device.run_steps(n)), min_seconds=1.0, max_steps=500, fixed_steps=42
    )
    assert fixed.steps_per_epoch == 42
    assert not fixed.automatic
    assert fixed.probe_steps == ()


def test_resize_after_warmup_only_grows():
    assert resize_after_warmup(100, last_warmup_s=0.5, min_seconds=1.0, max_steps=10**6) == 200
    assert resize_after_warmup(100, last_warmup_s=1.5, min_seconds=1.0, max_steps=10**6) == 100
    assert resize_after_warmup(100, last_warmup_s=0.1, min_seconds=1.0, max_steps=300) == 300
