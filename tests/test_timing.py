"""Epoch sizing and block timing against a fake clock: exact known answers, no real time involved."""

import math
import statistics

import pytest

from gpubench.measure.timing import BlockTimer, resize_after_warmup, round_up_to_iterations, size_epoch


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


# ------------------------------------------------------------------------------------- epochs of whole iterations


def test_round_up_to_iterations_by_hand():
    assert round_up_to_iterations(100, 16) == 112  # 6.25 iterations -> 7
    assert round_up_to_iterations(112, 16) == 112
    assert round_up_to_iterations(1, 16) == 16
    assert round_up_to_iterations(0, 16) == 16  # never less than one iteration
    assert round_up_to_iterations(333, 1) == 333


def test_size_epoch_finishes_the_first_iteration_then_probes_and_sizes_in_whole_iterations():
    device = FakeDevice(step_s=0.003, first_s=2.0)
    timer = BlockTimer(device.synchronize, device.clock)
    sizing = size_epoch(
        lambda n: timer.time_block(lambda: device.run_steps(n)),
        min_seconds=1.0,
        max_steps=10**6,
        steps_per_iteration=16,
    )
    # The first step, then the 15 steps that finish its iteration; probes of 16 steps (48 ms, short of 250 ms)
    # and 16 x ceil(250 / 48) = 96 steps (288 ms). 1 s / 3 ms = 333.3 steps -> 21 iterations = 336 steps.
    assert sizing.probe_steps == (15, 16, 96)
    assert sizing.steps_per_epoch == 336
    assert sizing.probe_seconds == pytest.approx((0.045, 0.048, 0.288))
    assert sizing.calibration_seconds == pytest.approx(2.0 + 0.045 + 0.048 + 0.288)
    assert device.steps_run == 1 + 15 + 16 + 96  # 8 whole iterations: the epochs start at a boundary


def test_size_epoch_starts_from_where_the_workload_is_in_its_iteration():
    # A workload one step into its iteration (the FLOP count ran a step): its first step here is step 2 of 16,
    # so 14 steps finish the iteration.
    device = FakeDevice(step_s=0.003)
    sizing = size_epoch(
        lambda n: BlockTimer(device.synchronize, device.clock).time_block(lambda: device.run_steps(n)),
        min_seconds=1.0,
        max_steps=10**6,
        steps_per_iteration=16,
        steps_into_iteration=1,
    )
    assert sizing.probe_steps[0] == 14
    assert (1 + device.steps_run) % 16 == 0
    # A workload whose first step here ends its iteration needs no finishing block.
    device = FakeDevice(step_s=0.003)
    sizing = size_epoch(
        lambda n: BlockTimer(device.synchronize, device.clock).time_block(lambda: device.run_steps(n)),
        min_seconds=1.0,
        max_steps=10**6,
        steps_per_iteration=16,
        steps_into_iteration=15,
    )
    assert sizing.probe_steps == (16, 96)


def test_size_epoch_caps_and_fixed_steps_in_whole_iterations():
    device = FakeDevice(step_s=1e-6)
    timer = BlockTimer(device.synchronize, device.clock)

    def time_steps(n: int) -> float:
        return timer.time_block(lambda: device.run_steps(n))

    # The cap 500 rounds down to 31 iterations = 496 steps; probes grow 8x from 16 and stop there.
    capped = size_epoch(time_steps, min_seconds=1.0, max_steps=500, steps_per_iteration=16)
    assert capped.probe_steps == (15, 16, 128, 496)
    assert capped.steps_per_epoch == 496
    # A cap under one iteration still gives one iteration.
    assert size_epoch(time_steps, min_seconds=1.0, max_steps=10, steps_per_iteration=16).steps_per_epoch == 16
    # epoch.steps = 100 with 16-step iterations: 7 iterations, after the block that finishes the first one.
    fixed = size_epoch(time_steps, min_seconds=1.0, max_steps=500, fixed_steps=100, steps_per_iteration=16)
    assert fixed.steps_per_epoch == 112
    assert fixed.probe_steps == (15,)
    assert not fixed.automatic
    assert (
        size_epoch(time_steps, min_seconds=1.0, max_steps=500, fixed_steps=96, steps_per_iteration=16).steps_per_epoch
        == 96
    )


def test_resize_after_warmup_grows_in_whole_iterations():
    # 96 steps lasting 0.7 s: 96 / 0.7 = 137.1 -> 138 steps for 1 s -> 9 iterations of 16 = 144.
    assert resize_after_warmup(96, last_warmup_s=0.7, min_seconds=1.0, max_steps=10**6, steps_per_iteration=16) == 144
    assert resize_after_warmup(96, last_warmup_s=0.5, min_seconds=1.0, max_steps=10**6, steps_per_iteration=16) == 192
    assert resize_after_warmup(96, last_warmup_s=1.2, min_seconds=1.0, max_steps=10**6, steps_per_iteration=16) == 96
    # The cap rounds down to whole iterations, as in size_epoch: 500 -> 496.
    assert resize_after_warmup(96, last_warmup_s=0.1, min_seconds=1.0, max_steps=500, steps_per_iteration=16) == 496


class FakeIterationDevice:
    """A PPO-like workload on a fake clock: step ``k`` (counted from the workload's first) costs ``update_s``, plus
    ``rollout_s`` when ``k % steps_per_iteration == 0`` (that step collects the rollout). From step
    ``speedup_at`` on, updates cost half as much (the model warmed up), so the warmup resizes the epoch.

    Durations are powers of two, so the fake clock's sums are exact and equal epochs compare equal."""

    def __init__(self, steps_per_iteration: int, steps_run: int, speedup_at: int) -> None:
        self.steps_per_iteration = steps_per_iteration
        self.steps_run = steps_run
        self.speedup_at = speedup_at
        self.update_s = 2.0**-9
        self.rollout_s = 2.0**-5
        self.now_s = 0.0
        #: (first step, step count) of every block timed.
        self.blocks: list[tuple[int, int]] = []

    def time_steps(self, count: int) -> float:
        self.blocks.append((self.steps_run, count))
        start_s = self.now_s
        for _ in range(count):
            k = self.steps_run
            self.now_s += self.update_s / (2 if k >= self.speedup_at else 1)
            if k % self.steps_per_iteration == 0:
                self.now_s += self.rollout_s
            self.steps_run += 1
        return self.now_s - start_s


def epoch_times_as_the_loop_times_them(
    device: FakeIterationDevice, steps_per_iteration: int, warmup_epochs: int = 2, epochs: int = 6
) -> tuple[list[float], list[float]]:
    """Size, warm up, resize and measure in the order :func:`gpubench.measure.epochs.measure_workload` does;
    returns (warmup, measured) epoch seconds."""
    sizing = size_epoch(
        device.time_steps,
        min_seconds=0.25,
        max_steps=10**5,
        steps_per_iteration=steps_per_iteration,
        steps_into_iteration=device.steps_run % steps_per_iteration,
    )
    steps = sizing.steps_per_epoch
    warmup = [device.time_steps(steps) for _ in range(warmup_epochs)]
    steps = resize_after_warmup(steps, warmup[-1], 0.25, 10**5, steps_per_iteration)
    measured = [device.time_steps(steps) for _ in range(epochs)]
    return warmup, measured


@pytest.mark.parametrize("steps_before", [0, 1, 7])
def test_epochs_of_whole_iterations_from_a_boundary_take_equal_times(steps_before: int):
    # 16 steps an iteration (62.5 ms, half of it the rollout); the workload ran `steps_before` steps before sizing
    # (1: the FLOP count). Calibration ends at step 32 in each case (first step, the rest of its iteration, one
    # 16-step probe), sizing 4 iterations for 0.25 s; from then on updates are twice as fast, so the warmup epochs
    # last 0.1875 s and the epoch grows to 6 iterations.
    device = FakeIterationDevice(16, steps_run=steps_before, speedup_at=32)
    warmup, measured = epoch_times_as_the_loop_times_them(device, steps_per_iteration=16)
    # The invariant: after the first step and the block finishing its iteration, every block starts at an
    # iteration boundary and holds whole iterations.
    for first_step, count in device.blocks[2 if (steps_before + 1) % 16 else 1 :]:
        assert first_step % 16 == 0 and count % 16 == 0
    assert [count for _, count in device.blocks[-8:]] == [64] * 2 + [96] * 6
    assert warmup == [0.1875] * 2
    assert measured == [0.28125] * 6  # exactly equal, not merely close


def test_epochs_sized_at_any_step_count_swing_with_the_rollouts():
    # The same workload sized as if every step cost the same: epochs straddle rollouts, and their times differ
    # by where the rollouts fall. This is what the whole-iteration sizing removes.
    device = FakeIterationDevice(16, steps_run=1, speedup_at=32)
    _, measured = epoch_times_as_the_loop_times_them(device, steps_per_iteration=1)
    assert len(set(measured)) > 1
    assert statistics.stdev(measured) / statistics.mean(measured) > 0.01
