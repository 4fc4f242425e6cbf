"""Batch-size finder and policy against OOM oracles: fakes that fail above a known limit, so answers are exact."""

import gc
import math
import weakref

import pytest
import torch

from gpubench.errors import ConfigError
from gpubench.measure.batch_search import (
    KNEE_FRACTION,
    SEARCH_STEPS,
    VERIFY_STEPS,
    TimedBatch,
    TrialResult,
    check_headroom,
    choose_batch_size,
    effective_policy,
    find_max_batch_size,
    gradient_accumulation_steps,
    is_oom,
    knee_batch_size,
    step_down_size,
    timed_batch,
)
from gpubench.measure.config import BatchConfig
from gpubench.results import BatchSearchResult, BatchTrial

OOM_MESSAGE = "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 4.00 GiB"
_FULL_COLLECT = gc.collect


@pytest.fixture(autouse=True)
def young_generation_gc(monkeypatch: pytest.MonkeyPatch) -> None:
    """The finder runs a full gc.collect() after every trial: about 50 ms with torch loaded, seconds over the
    hundreds of fake trials here. The fakes make no reference cycles, so collecting generation 0 is enough."""
    monkeypatch.setattr(gc, "collect", lambda generation=2: _FULL_COLLECT(0))


class OOMOracle:
    """``try_batch`` fake: raises ``torch.cuda.OutOfMemoryError`` above ``limit``; peak MB grows with size."""

    def __init__(self, limit: int, mb_per_sample: float = 1.0, base_mb: float = 100.0) -> None:
        self.limit = limit
        self.mb_per_sample = mb_per_sample
        self.base_mb = base_mb
        self.calls: list[int] = []

    def __call__(self, size: int, steps: int) -> TrialResult:
        self.calls.append(size)
        if size > self.limit:
            raise torch.cuda.OutOfMemoryError(OOM_MESSAGE)
        return TrialResult(peak_reserved_mb=self.base_mb + self.mb_per_sample * size, samples_per_s=10.0 * size)


def doubling_bisection_trial_bound(min_size: int, max_size: int) -> int:
    """Worst case of doubling from 2·min (ceil(log2(max/min)) trials, at least 1), min itself, then bisection over a
    gap <= max - min."""
    doubling = max(1, math.ceil(math.log2(max_size / min_size)))
    bisection = math.ceil(math.log2(max_size - min_size)) if max_size - min_size > 1 else 0
    return doubling + 1 + bisection


SEARCH_RANGES = [(1, 1), (1, 2), (1, 100), (3, 1000), (32, 4096), (32, 4095), (100, 100), (64, 65536), (7, 9)]


@pytest.mark.parametrize(("min_size", "max_size"), SEARCH_RANGES)
def test_finder_returns_exactly_the_limit_clamped_to_the_range(min_size: int, max_size: int) -> None:
    limits = {0, min_size - 1, min_size, min_size + 1, max_size - 1, max_size, max_size + 1, 10 * max_size}
    limits |= {(min_size + max_size) // 2, 2 * min_size + 1, 2 * min_size - 1, max_size // 3}
    bound = doubling_bisection_trial_bound(min_size, max_size)
    for limit in sorted(limits):
        oracle = OOMOracle(limit)
        search = find_max_batch_size(oracle, min_size, max_size)
        expected = None if limit < min_size else min(limit, max_size)
        assert search.best_size == expected, (limit, min_size, max_size)
        assert len(search.trials) == len(oracle.calls) <= bound, (limit, oracle.calls)
        assert max(oracle.calls) <= max_size
        assert [t.size for t in search.trials] == oracle.calls
        assert all((t.status == "ok") == (t.size <= limit) for t in search.trials)


def test_finder_follows_doubling_then_bisection_and_tries_max_size_itself() -> None:
    oracle = OOMOracle(limit=700)
    search = find_max_batch_size(oracle, 100, 1000)
    # 200 (so 100 fits too), 400, 800 (fails); bisection between 400 and 800.
    assert oracle.calls[:3] == [200, 400, 800]
    assert oracle.calls[3:] == [600, 700, 750, 725, 712, 706, 703, 701]
    assert search.best_size == 700

    fits_everything = OOMOracle(limit=10**9)
    search = find_max_batch_size(fits_everything, 100, 1000)
    assert fits_everything.calls == [200, 400, 800, 1000]
    assert search.best_size == 1000

    # A failure at 2·min tries min itself next, then bisects between them.
    small = OOMOracle(limit=130)
    assert find_max_batch_size(small, 100, 1000).best_size == 130
    assert small.calls == [200, 100, 150, 125, 137, 131, 128, 129, 130]


def test_default_range_meets_the_issues_trial_bound_for_every_limit() -> None:
    # Issue 5: the exact limit within 2·log2(max/min) + 4 = 18 trials for the default 32..4096. The worst case is
    # 6 doubling successes (64..2048), the failure at 4096 and 11 bisection steps over the 2048-wide gap; starting
    # the doubling at 32 itself would make it 19.
    bound = 2 * math.log2(4096 / 32) + 4
    assert len(find_max_batch_size(OOMOracle(4000), 32, 4096).trials) == 18 == bound
    assert len(find_max_batch_size(OOMOracle(1000), 32, 4096).trials) == 5 + 9
    for limit in range(0, 4200, 3):
        search = find_max_batch_size(OOMOracle(limit), 32, 4096)
        assert search.best_size == (None if limit < 32 else min(limit, 4096))
        assert len(search.trials) <= bound, limit


def test_finder_accepts_a_plain_peak_in_mb() -> None:
    def try_batch(size: int, steps: int) -> float:
        if size > 50:
            raise torch.cuda.OutOfMemoryError(OOM_MESSAGE)
        return 2.5 * size

    search = find_max_batch_size(try_batch, 8, 128)
    assert search.best_size == 50
    fifty = next(t for t in search.trials if t.size == 50)
    assert fifty.peak_reserved_mb == 125.0
    assert fifty.samples_per_s is None


def test_finder_rejects_an_empty_range() -> None:
    with pytest.raises(ValueError, match="min_size <= max_size"):
        find_max_batch_size(OOMOracle(10), 64, 32)
    with pytest.raises(ValueError, match="1 <= min_size"):
        find_max_batch_size(OOMOracle(10), 0, 32)


def test_non_oom_error_is_reraised_at_once() -> None:
    calls: list[int] = []
    illegal = RuntimeError("CUDA error: an illegal memory access was encountered")

    def try_batch(size: int, steps: int) -> float:
        calls.append(size)
        if size >= 128:
            raise illegal
        return float(size)

    with pytest.raises(RuntimeError) as raised:
        find_max_batch_size(try_batch, 32, 4096)
    assert raised.value is illegal
    assert calls == [64, 128]


def test_shape_error_is_not_mistaken_for_oom() -> None:
    def try_batch(size: int, steps: int) -> float:
        raise RuntimeError("mat1 and mat2 shapes cannot be multiplied (64x10 and 20x5)")

    with pytest.raises(RuntimeError, match="shapes cannot be multiplied"):
        choose_batch_size(try_batch, BatchConfig(policy="max"), usable_vram_mb=4096.0)


def _wrapped_oom() -> RuntimeError:
    try:
        raise torch.cuda.OutOfMemoryError(OOM_MESSAGE)
    except torch.cuda.OutOfMemoryError as oom:
        wrapped = RuntimeError("backend compiler failed")
        wrapped.__cause__ = oom
        return wrapped


def _error_during_oom_handling() -> RuntimeError:
    error = RuntimeError("CUDA error: an illegal memory access was encountered")
    error.__context__ = torch.cuda.OutOfMemoryError(OOM_MESSAGE)
    return error


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (torch.cuda.OutOfMemoryError(OOM_MESSAGE), True),
        (torch.OutOfMemoryError("XPU out of memory"), True),
        (RuntimeError("CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 3.95 GiB total capacity)"), True),
        (
            torch.AcceleratorError("CUDA error: out of memory\nCUDA kernel errors might be asynchronously reported"),
            True,
        ),
        (RuntimeError("CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`"), True),
        (RuntimeError("cuDNN error: CUDNN_STATUS_ALLOC_FAILED"), True),
        (RuntimeError("cuDNN error: CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED"), True),
        (_wrapped_oom(), True),
        (RuntimeError("CUDA error: an illegal memory access was encountered"), False),
        (torch.AcceleratorError("CUDA error: an illegal memory access was encountered"), False),
        (RuntimeError("CUDA error: device-side assert triggered"), False),
        (
            RuntimeError("CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasSgemm( handle, opa, ...)`"),
            False,
        ),
        (RuntimeError("mat1 and mat2 shapes cannot be multiplied (64x10 and 20x5)"), False),
        (
            RuntimeError(
                "cuDNN error: CUDNN_STATUS_NOT_SUPPORTED. "
                "This error may appear if you passed in a non-contiguous input."
            ),
            False,
        ),
        (RuntimeError("cuDNN error: CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED"), False),
        (RuntimeError("[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: can't allocate memory"), False),
        (MemoryError(), False),
        (ValueError("CUDA out of memory"), False),
        (KeyboardInterrupt(), False),
        (_error_during_oom_handling(), False),
    ],
    ids=lambda value: type(value).__name__ if isinstance(value, BaseException) else str(value),
)
def test_is_oom_classification(exc: BaseException, expected: bool) -> None:
    assert is_oom(exc) is expected


def test_failed_trial_objects_are_released_before_recovery_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    # A large tensor held only by the failing trial's frame: the OOM's traceback keeps that frame, so the tensor
    # is still alive while the `except` block runs. Recovery (gc.collect) must see it already gone.
    trial_refs: list[weakref.ref] = []
    alive_at_recovery: list[bool] = []
    real_collect = gc.collect

    def spy_collect(*args: int) -> int:
        alive_at_recovery.append(any(ref() is not None for ref in trial_refs))
        return real_collect(*args)

    def try_batch(size: int, steps: int) -> TrialResult:
        activations = torch.empty(size, 1024)
        if size > 100:
            trial_refs.append(weakref.ref(activations))
            raise torch.cuda.OutOfMemoryError(OOM_MESSAGE)
        return TrialResult(peak_reserved_mb=float(size))

    monkeypatch.setattr(gc, "collect", spy_collect)
    # Recovery runs where there is a CUDA cache to return (on the CPU it is skipped): as on a GPU.
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    search = find_max_batch_size(try_batch, 32, 256)
    assert search.best_size == 100
    assert len(trial_refs) == sum(t.status == "oom" for t in search.trials) > 0
    assert len(alive_at_recovery) == len(search.trials)
    assert not any(alive_at_recovery)


def test_recovery_collects_and_empties_the_cuda_cache_only_when_cuda_is_initialised(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    events: list[str] = []
    monkeypatch.setattr(gc, "collect", lambda *args: events.append("collect") or 0)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: events.append("empty_cache"))
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    search = find_max_batch_size(OOMOracle(40), 32, 64)
    assert len(search.trials) == 7
    assert events == []  # no CUDA cache to return: no full collection either (0.15 s each with torch loaded)

    events.clear()
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    find_max_batch_size(OOMOracle(40), 32, 64)
    assert events == ["collect", "empty_cache"] * 7


def test_oom_trial_records_the_first_line_of_the_error() -> None:
    def try_batch(size: int, steps: int) -> float:
        raise RuntimeError("CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`\nframe #0")

    search = find_max_batch_size(try_batch, 32, 64)
    assert search.best_size is None
    assert search.trials == [
        BatchTrial(
            size=size,
            status="oom",
            phase="search",
            steps=SEARCH_STEPS,
            error="CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`",
        )
        for size in (64, 32)
    ]


def test_headroom_rejects_a_size_whose_peak_reserved_exceeds_it() -> None:
    # Never OOMs, but peak = 100 + 10 * size MB; 0.9 * 10000 MB allows sizes up to 890.
    oracle = OOMOracle(limit=10**9, mb_per_sample=10.0, base_mb=100.0)
    decision = choose_batch_size(oracle, BatchConfig(policy="max", min_size=32, max_size=4096), usable_vram_mb=10000.0)
    assert decision.record.status == "ok"
    assert decision.record.peak_limit_mb == pytest.approx(9000.0)
    assert decision.record.largest_fitting_size == 890
    assert decision.record.batch_size == 890
    assert decision.record.peak_reserved_mb == pytest.approx(9000.0)
    over = next(t for t in decision.search.trials if t.size == 891)
    assert over.status == "over_headroom"
    assert over.peak_reserved_mb == pytest.approx(9010.0)
    assert all(t.peak_reserved_mb <= 9000.0 for t in decision.search.trials if t.ok)


def test_without_usable_vram_there_is_no_headroom_limit() -> None:
    oracle = OOMOracle(limit=10**9, mb_per_sample=10.0)
    decision = choose_batch_size(oracle, BatchConfig(policy="max", min_size=32, max_size=4096), usable_vram_mb=None)
    assert decision.record.batch_size == 4096
    assert decision.record.peak_limit_mb is None


def test_winner_is_verified_the_requested_number_of_times() -> None:
    oracle = OOMOracle(limit=1000)
    decision = choose_batch_size(oracle, BatchConfig(policy="max", min_size=32, max_size=4096), usable_vram_mb=None)
    assert decision.record.batch_size == 1000
    assert [(t.size, t.status, t.phase) for t in decision.verification] == [(1000, "ok", "verify")] * 3
    assert oracle.calls[-3:] == [1000, 1000, 1000]
    assert len(oracle.calls) == len(decision.search.trials) + 3


def test_search_trials_run_the_search_steps_and_verification_the_longer_verify_steps() -> None:
    assert (SEARCH_STEPS, VERIFY_STEPS) == (2, 20)
    steps_by_phase: dict[str, set[int]] = {"search": set(), "verify": set()}
    oracle = OOMOracle(limit=1000)

    def try_batch(size: int, steps: int) -> TrialResult:
        # The verification trials are the last 3 calls; everything before them is the search.
        steps_by_phase["verify" if len(oracle.calls) >= 14 else "search"].add(steps)
        return oracle(size, steps)

    decision = choose_batch_size(try_batch, BatchConfig(policy="max", min_size=32, max_size=4096), usable_vram_mb=None)
    assert len(decision.search.trials) == 14
    assert steps_by_phase == {"search": {SEARCH_STEPS}, "verify": {VERIFY_STEPS}}
    assert {t.steps for t in decision.search.trials} == {SEARCH_STEPS}
    assert [t.steps for t in decision.verification] == [VERIFY_STEPS] * 3
    report = decision.record.to_dict()
    assert (report["search_steps"], report["verify_steps"]) == (SEARCH_STEPS, VERIFY_STEPS)
    assert "verified 3x over 20 steps" in decision.record.message

    custom = choose_batch_size(
        OOMOracle(limit=100), BatchConfig(policy="max", min_size=32, max_size=128), None, search_steps=2, verify_steps=7
    )
    assert {t.steps for t in custom.search.trials} == {2}
    assert {t.steps for t in custom.verification} == {7}


class Fragmenting(OOMOracle):
    """Peak reserved grows with the steps run, as the caching allocator fragments: 8 MB per sample up to 3 steps
    (a search trial runs fewer), then 0.25 MB per sample for each further step."""

    def __call__(self, size: int, steps: int) -> TrialResult:
        result = super().__call__(size, steps)
        fragmentation_mb = 0.25 * size * max(0, steps - 3)
        return TrialResult(result.peak_reserved_mb + fragmentation_mb, result.samples_per_s)


def test_verification_over_more_steps_catches_fragmentation_the_short_search_missed() -> None:
    # Limit 0.9 * 4096 = 3686.4 MB. After 3 steps: 100 + 8 * size fits up to size 448 (the search interpolates it
    # from 256 and 512's peaks, then 449 is over). After 20 steps the peak is 100 + 12.25 * size, under the limit up
    # to size 292: the searched size 448 (5588 MB) fails verification, the next smaller one searched, 256 (3236 MB),
    # passes.
    oracle = Fragmenting(limit=10**9, mb_per_sample=8.0, base_mb=100.0)
    decision = choose_batch_size(oracle, BatchConfig(policy="max", min_size=32, max_size=4096), usable_vram_mb=4096.0)
    assert decision.record.largest_fitting_size == 448
    assert decision.record.status == "ok"
    assert decision.record.batch_size == 256
    assert decision.record.peak_reserved_mb == pytest.approx(100 + 12.25 * 256)
    assert decision.record.peak_reserved_mb <= decision.record.peak_limit_mb
    assert [(t.size, t.status) for t in decision.verification] == [
        (448, "over_headroom"),
        (256, "ok"),
        (256, "ok"),
        (256, "ok"),
    ]
    assert "stepped down to 256: on re-verification 448 exceeded the headroom limit (peak reserved 5,588 MB)" in (
        decision.record.message
    )


class CurvedOracle(OOMOracle):
    """Peak reserved MB = base + a * size + b * size**2: a peak line that bends, so interpolation misjudges it."""

    def __init__(self, a_mb: float, b_mb: float) -> None:
        super().__init__(limit=10**9, mb_per_sample=a_mb, base_mb=100.0)
        self.b_mb = b_mb

    def __call__(self, size: int, steps: int) -> TrialResult:
        result = super().__call__(size, steps)
        return TrialResult(result.peak_reserved_mb + self.b_mb * size**2, result.samples_per_s)


def _bisection_trials(limit: int, min_size: int = 32, max_size: int = 4096) -> int:
    """The trials the doubling-then-bisection search takes when no peak is measured (an OOM at ``limit + 1``)."""
    return len(find_max_batch_size(OOMOracle(limit), min_size, max_size).trials)


@pytest.mark.parametrize("usable_mb", [10_000.0, 36_000.0, 40_000.0, 80_000.0])
def test_the_bisection_interpolates_on_the_peaks_and_finds_the_same_largest_batch_in_fewer_trials(
    usable_mb: float,
) -> None:
    oracle = OOMOracle(limit=10**9, mb_per_sample=19.6, base_mb=200.0)
    search = find_max_batch_size(oracle, 32, 4096, peak_limit_mb=0.9 * usable_mb)
    largest = math.floor((0.9 * usable_mb - 200.0) / 19.6)
    assert search.best_size == min(largest, 4096)
    if largest < 4096:
        assert any(t.size == largest + 1 and t.status == "over_headroom" for t in search.trials)
        assert len(search.trials) <= _bisection_trials(largest) - 4


@pytest.mark.parametrize("b_mb", [0.002, 0.02, -0.001])
def test_a_bending_peak_line_still_gives_the_exact_largest_batch(b_mb: float) -> None:
    oracle = CurvedOracle(a_mb=10.0, b_mb=b_mb)
    limit_mb = 9000.0
    search = find_max_batch_size(oracle, 32, 4096, peak_limit_mb=limit_mb)
    fitting = [size for size in range(32, 4097) if 100.0 + 10.0 * size + b_mb * size**2 <= limit_mb]
    assert search.best_size == max(fitting)
    assert len(search.trials) <= 2 * _bisection_trials(max(fitting))


def test_trial_step_counts_are_checked() -> None:
    with pytest.raises(ValueError, match="at least 2 steps"):
        find_max_batch_size(OOMOracle(100), 32, 64, steps=1)
    with pytest.raises(ValueError, match=r"verify_steps \(2\) must be at least search_steps \(3\)"):
        choose_batch_size(OOMOracle(100), BatchConfig(policy="max"), None, search_steps=3, verify_steps=2)


def test_headroom_check_flags_a_measured_peak_above_the_limit() -> None:
    check = check_headroom(4086.0, 4096.0, 0.9)
    assert check is not None
    assert check.exceeded is True
    assert check.peak_limit_mb == pytest.approx(3686.4)
    assert check.warning == (
        "peak reserved memory during the measured epochs was 4,086 MB, above the headroom limit 3,686 MB "
        "(`batch.headroom` 0.9 × 4,096 MB usable): at this batch size the model may run out of memory on the "
        "target card"
    )
    within = check_headroom(3686.0, 4096.0, 0.9)
    assert within is not None
    assert not within.exceeded
    assert within.warning is None
    assert within.exceeded is False
    assert check_headroom(None, 4096.0, 0.9) is None
    assert check_headroom(3000.0, None, 0.9) is None


@pytest.mark.parametrize(
    ("current", "peak_reserved_mb", "peak_limit_mb", "expected"),
    [
        (52, 3138.0, 3078.0, 51),  # mamba2 under a 4 GB cap: floor(52 × 3078 / 3138) = floor(51.006)
        (100, 2000.0, 1000.0, 50),  # twice the limit: half the batch
        (100, 1050.0, 900.0, 85),  # floor(85.71)
        (40, 2000.0, 1000.0, 32),  # floor(20) is below min_size 32: clamped to it
        (33, 1000.5, 1000.0, 32),  # just over the limit, one above min_size
    ],
)
def test_step_down_is_proportional_to_the_peak_overshoot(
    current: int, peak_reserved_mb: float, peak_limit_mb: float, expected: int
) -> None:
    assert step_down_size(current, peak_reserved_mb, peak_limit_mb, min_size=32) == expected


def test_step_down_is_at_least_one_smaller_when_the_ratio_rounds_back_up() -> None:
    # 13 × 3686.4 / (3686.4 + one ulp) rounds to exactly 13.0 in floating point: the proportional size alone
    # would measure the same batch again.
    peak_reserved_mb = math.nextafter(3686.4, math.inf)
    assert math.floor(13 * 3686.4 / peak_reserved_mb) == 13
    assert step_down_size(13, peak_reserved_mb, 3686.4, min_size=1) == 12


def test_no_step_down_within_the_limit_or_at_min_size() -> None:
    assert step_down_size(52, 3078.0, 3078.0, min_size=32) is None  # at the limit is within it
    assert step_down_size(52, 3000.0, 3078.0, min_size=32) is None
    assert step_down_size(32, 3138.0, 3078.0, min_size=32) is None
    assert step_down_size(1, 5000.0, 1000.0, min_size=1) is None


class FlakyAtWinner(OOMOracle):
    """Fits up to ``limit`` during the search, but ``limit`` itself fails every re-run (e.g. fragmentation)."""

    def __call__(self, size: int, steps: int) -> TrialResult:
        if size == self.limit and size in self.calls:
            self.calls.append(size)
            raise torch.cuda.OutOfMemoryError(OOM_MESSAGE)
        return super().__call__(size, steps)


def test_verification_failure_steps_down_to_the_next_smaller_successful_size() -> None:
    oracle = FlakyAtWinner(limit=1000)
    decision = choose_batch_size(oracle, BatchConfig(policy="max", min_size=32, max_size=4096), usable_vram_mb=None)
    next_smaller = max(t.size for t in decision.search.trials if t.ok and t.size < 1000)
    assert next_smaller == 992  # bisection between 512 and 1024 passes 768, 896, 960, 992, then 1000
    assert decision.record.status == "ok"
    assert decision.record.largest_fitting_size == 1000
    assert decision.record.batch_size == 992
    assert [(t.size, t.status) for t in decision.verification] == [(1000, "oom"), (992, "ok"), (992, "ok"), (992, "ok")]
    assert "stepped down to 992: on re-verification 1000 ran out of memory" in decision.record.message


def test_min_size_oom_gives_an_oom_decision_with_a_clear_message() -> None:
    decision = choose_batch_size(
        OOMOracle(limit=10), BatchConfig(policy="max", min_size=32, max_size=4096), usable_vram_mb=4096.0
    )
    assert decision.record.status == "oom"
    assert decision.record.batch_size is None
    assert decision.record.gradient_accumulation_steps is None
    assert [t.size for t in decision.search.trials] == [64, 32]
    assert decision.verification == []
    assert decision.record.message.startswith("`batch.min_size`=32 does not fit: out of memory (CUDA out of memory.")


def test_min_size_over_headroom_gives_an_oom_decision_naming_the_limit() -> None:
    oracle = OOMOracle(limit=10**9, mb_per_sample=100.0, base_mb=0.0)
    decision = choose_batch_size(oracle, BatchConfig(policy="max", min_size=32, max_size=4096), usable_vram_mb=2000.0)
    assert decision.record.status == "oom"
    assert decision.record.message == (
        "`batch.min_size`=32 does not fit: peak reserved 3200 MB exceeds `batch.headroom` 0.9 × 2000 MB usable = "
        "1800 MB. Lower `batch.min_size` or use a larger GPU."
    )


def test_nothing_passing_verification_is_an_oom_decision() -> None:
    class FailsEveryRerun(OOMOracle):
        def __call__(self, size: int, steps: int) -> TrialResult:
            if size in self.calls:
                raise torch.cuda.OutOfMemoryError(OOM_MESSAGE)
            return super().__call__(size, steps)

    decision = choose_batch_size(FailsEveryRerun(limit=100), BatchConfig(policy="max", min_size=32, max_size=128), None)
    assert decision.record.status == "oom"
    assert decision.record.largest_fitting_size == 100
    assert decision.record.batch_size is None
    assert "no batch size passed 3 re-runs" in decision.record.message
    # One failed re-run per size that fit in the search, largest first, then min_size (never run in the search,
    # so its first re-run is its first call here, which fits; the second fails).
    assert [t.size for t in decision.verification] == [100, 96, 64, 32, 32]


@pytest.mark.parametrize(
    ("batch", "target", "steps"), [(200, 512, 3), (512, 512, 1), (4096, 512, 1), (100, 512, 6), (1, 1, 1), (3, 10, 4)]
)
def test_gradient_accumulation_steps_reach_the_target(batch: int, target: int, steps: int) -> None:
    assert gradient_accumulation_steps(batch, target) == steps
    assert batch * steps >= target
    assert steps == 1 or batch * (steps - 1) < target


def test_decision_accumulation_and_effective_batch() -> None:
    decision = choose_batch_size(
        OOMOracle(limit=200), BatchConfig(policy="max", target_effective=1000), None, verify_repeats=1
    )
    assert decision.record.batch_size == 200
    assert decision.record.gradient_accumulation_steps == 5
    assert decision.record.effective_batch_size == 1000
    assert decision.record.target_effective_batch_size == 1000


def test_knee_is_the_smallest_size_reaching_ninety_percent_of_the_best_throughput() -> None:
    assert KNEE_FRACTION == 0.9
    curve = [(32, 100.0), (64, 500.0), (128, 899.0), (256, 900.0), (512, 1000.0), (1024, 950.0)]
    assert knee_batch_size(curve) == 256
    assert knee_batch_size(curve, fraction=0.5) == 64
    assert knee_batch_size([(64, 10.0)]) == 64
    assert knee_batch_size([]) is None


def test_decision_reports_throughput_curve_and_knee_beside_the_largest_size() -> None:
    class Saturating(OOMOracle):
        """Throughput grows linearly to batch 400 and is flat after: the best is 4000 samples/s."""

        def __call__(self, size: int, steps: int) -> TrialResult:
            result = super().__call__(size, steps)
            return TrialResult(result.peak_reserved_mb, samples_per_s=10.0 * min(size, 400))

    decision = choose_batch_size(Saturating(limit=1000), BatchConfig(policy="max", min_size=32, max_size=4096), None)
    ok_sizes = sorted(t.size for t in decision.search.trials if t.ok)
    assert [point.size for point in decision.record.throughput_curve] == ok_sizes
    assert [(p.size, p.samples_per_s) for p in decision.record.throughput_curve[:4]] == [
        (64, 640.0),
        (128, 1280.0),
        (256, 2560.0),
        (512, 4000.0),
    ]
    # 90% of 4000 is 3600: 256 reaches 2560, the next sampled size 512 reaches 4000.
    assert decision.record.knee_size == 512
    assert decision.record.batch_size == 1000
    record = decision.record
    assert BatchSearchResult.from_dict(record.to_dict()) == record
    report = record.to_dict()
    assert report["knee_size"] == 512
    assert report["batch_size"] == 1000
    assert report["throughput_curve"][0] == {"size": 64, "samples_per_s": 640.0}
    assert len(report["trials"]) == len(decision.search.trials) + 3
    assert report["trials"][-1]["phase"] == "verify"
    assert {t["status"] for t in report["trials"]} == {"ok", "oom"}


def test_throughput_curve_excludes_failed_over_headroom_and_unmeasured_trials() -> None:
    oracle = OOMOracle(limit=10**9, mb_per_sample=10.0, base_mb=0.0)
    decision = choose_batch_size(oracle, BatchConfig(policy="max", min_size=32, max_size=4096), usable_vram_mb=1000.0)
    assert decision.record.batch_size == 90
    assert max(point.size for point in decision.record.throughput_curve) == 90
    plain = choose_batch_size(
        lambda size, steps: float(size), BatchConfig(policy="max", min_size=32, max_size=64), None
    )
    assert plain.record.throughput_curve == []
    assert plain.record.knee_size is None
    assert plain.record.batch_size == 64


def test_try_batch_returning_something_else_is_a_clear_type_error() -> None:
    with pytest.raises(
        TypeError, match=r"try_batch\(64, 3\) returned \(120.0, 5000.0\): expected the peak reserved MB"
    ):
        find_max_batch_size(lambda size, steps: (120.0, 5000.0), 32, 64, steps=3)


# --------------------------------------------------------------------------------------------------- the timed batch


class SlowOracle(OOMOracle):
    """Fits up to ``limit``; a trial's steps take ``seconds_per_sample × size`` seconds (a fake clock)."""

    def __init__(self, limit: int, seconds_per_sample: float) -> None:
        super().__init__(limit)
        self.seconds_per_sample = seconds_per_sample

    def __call__(self, size: int, steps: int) -> TrialResult:
        result = super().__call__(size, steps)
        return TrialResult(
            result.peak_reserved_mb,
            samples_per_s=10.0 * min(size, 400),
            seconds=self.seconds_per_sample * size * steps,
        )


def test_configured_policy_times_the_recipe_batch_and_still_reports_what_fits() -> None:
    oracle = SlowOracle(limit=1000, seconds_per_sample=0.0)
    decision = choose_batch_size(oracle, BatchConfig(min_size=32, max_size=4096), None, configured_size=64)
    assert decision.record.policy == "configured"
    assert (decision.record.batch_size, decision.record.gradient_accumulation_steps) == (64, 1)
    assert decision.record.largest_fitting_size == 1000
    assert decision.record.knee_size == 512  # 90% of 4,000 samples/s first reached at 512
    # Only the timed batch is re-verified, not the largest that fits.
    assert {t.size for t in decision.verification} == {64}
    assert "the configured batch 64 (batch.policy=configured)" in decision.record.message
    record = decision.record
    assert (record.policy, record.configured_size, record.time_limited) == ("configured", 64, False)
    assert BatchSearchResult.from_dict(record.to_dict()) == record


def test_knee_and_max_policies_time_the_knee_and_the_largest_with_accumulation() -> None:
    knee = choose_batch_size(SlowOracle(1000, 0.0), BatchConfig(policy="knee", target_effective=2048), None)
    assert (knee.record.batch_size, knee.record.gradient_accumulation_steps, knee.record.effective_batch_size) == (
        512,
        4,
        2048,
    )
    largest = choose_batch_size(SlowOracle(1000, 0.0), BatchConfig(policy="max", target_effective=2048), None)
    assert (largest.record.batch_size, largest.record.gradient_accumulation_steps) == (1000, 3)  # ceil(2048 / 1000)


def test_max_size_caps_every_timed_batch_the_configured_one_too() -> None:
    capped = choose_batch_size(SlowOracle(10**6, 0.0), BatchConfig(max_size=256), None, configured_size=1024)
    assert capped.record.batch_size == 256
    assert "the configured batch 1024 capped by `batch.max_size` to 256" in capped.record.message
    # The README's sweep over batch limits with batch.policy=max: each limit times the largest batch under it.
    for limit in (256, 1024, 4096):
        swept = choose_batch_size(SlowOracle(10**6, 0.0), BatchConfig(policy="max", max_size=limit), None)
        assert swept.record.batch_size == limit
    # A configured batch that does not fit is capped by the largest that does.
    small_card = choose_batch_size(SlowOracle(100, 0.0), BatchConfig(), None, configured_size=1024)
    assert small_card.record.batch_size == 100
    assert "the configured batch 1024 stepped down to 100, the largest that fit: 101 ran out of memory" in (
        small_card.record.message
    )


def test_search_stops_doubling_once_a_trial_takes_longer_than_the_time_bound() -> None:
    # 1 ms per sample and step: trials of 3 steps take 0.192 s at 64, ..., 1.536 s at 512, 3.072 s at 1024.
    oracle = SlowOracle(limit=10**6, seconds_per_sample=1e-3)
    decision = choose_batch_size(
        oracle, BatchConfig(policy="max", trial_max_seconds=2.0), None, search_steps=3, verify_repeats=1, verify_steps=3
    )
    assert [t.size for t in decision.search.trials] == [64, 128, 256, 512, 1024]
    assert decision.search.time_limited
    assert decision.record.largest_fitting_size == decision.record.batch_size == 1024
    assert "the search: fits at least up to 1024 (the search stopped" in decision.record.message
    assert decision.record.time_limited is True
    assert decision.record.trials[0].seconds == pytest.approx(0.192)


def test_time_bound_also_ends_the_bisection() -> None:
    # Doubling: 64 .. 512 fit quickly, 1024 fails; bisection tries 768, which fits but takes 2.3 s: stop there.
    oracle = SlowOracle(limit=800, seconds_per_sample=1e-3)
    search = find_max_batch_size(oracle, 32, 4096, steps=3, trial_max_seconds=2.0)
    assert [t.size for t in search.trials] == [64, 128, 256, 512, 1024, 768]
    assert search.best_size == 768 and search.time_limited


def test_a_configured_batch_that_fails_verification_falls_back_to_a_smaller_searched_size() -> None:
    class FailsRerunsAbove(OOMOracle):
        """Short search trials fit up to 1,000; longer re-runs only up to 100."""

        def __call__(self, size: int, steps: int) -> TrialResult:
            if steps > SEARCH_STEPS and size > 100:
                raise torch.cuda.OutOfMemoryError(OOM_MESSAGE)
            return super().__call__(size, steps)

    decision = choose_batch_size(FailsRerunsAbove(1000), BatchConfig(), None, configured_size=200)
    assert decision.record.batch_size == 64
    assert [t.size for t in decision.verification if not t.ok] == [200, 128]
    assert "stepped down to 64: on re-verification 200 ran out of memory" in decision.record.message


def test_without_a_search_the_configured_batch_is_timed_capped_by_max_size() -> None:
    assert timed_batch(64, None, 4096, "configured") == TimedBatch(64, 1, None)
    capped = timed_batch(2048, None, 256, "configured")
    assert (capped.batch_size, capped.gradient_accumulation_steps) == (256, 1)
    assert capped.policy == "timed at the configured batch 2048 capped by `batch.max_size` to 256"
    no_search = timed_batch(64, None, 4096, "max")
    assert no_search.batch_size == 64 and "batch.policy=max needs the batch search" in no_search.policy


def test_rl_batches_follow_the_configured_policy_whatever_batch_policy_says() -> None:
    assert effective_policy("max", is_hyperparameter=True) == "configured"
    assert effective_policy("knee", is_hyperparameter=False) == "knee"
    searched = choose_batch_size(SlowOracle(10**6, 0.0), BatchConfig(), None, configured_size=256)
    timed = timed_batch(256, searched, 4096, "configured")
    assert (timed.batch_size, timed.gradient_accumulation_steps) == (256, 1)
    assert timed.policy == f"timed at {searched.record.message}"


def test_policy_is_a_checked_key() -> None:
    with pytest.raises(ConfigError, match=r"`batch.policy` = 'largest' is not valid: it must be one of configured"):
        BatchConfig(policy="largest")
    with pytest.raises(ConfigError, match=r"`batch.trial_max_seconds`"):
        BatchConfig(trial_max_seconds=0)


class SlowFirstStepOracle(OOMOracle):
    """A user's model with cuDNN autotuning on: every trial builds a fresh model whose first step autotunes for
    ``first_step_s`` seconds (a fake clock), whatever the size; it fits up to ``limit``."""

    def __init__(self, limit: int, first_step_s: float) -> None:
        super().__init__(limit)
        self.first_step_s = first_step_s

    def __call__(self, size: int, steps: int) -> TrialResult:
        result = super().__call__(size, steps)
        return TrialResult(result.peak_reserved_mb, samples_per_s=result.samples_per_s, seconds=self.first_step_s)


def test_a_search_stopped_on_time_never_caps_the_configured_batch() -> None:
    # The issue's ResNet-50: the first trial (64) takes 3.3 s, past the 2 s bound, so the search knows only that 64
    # fits. The configured 256 is timed: its re-verification shows that it fits.
    oracle = SlowFirstStepOracle(limit=10**6, first_step_s=3.3)
    decision = choose_batch_size(oracle, BatchConfig(trial_max_seconds=2.0), None, configured_size=256)
    assert [t.size for t in decision.search.trials] == [64]
    assert decision.search.time_limited and decision.record.largest_fitting_size == 64
    assert decision.record.batch_size == 256
    assert {t.size for t in decision.verification} == {256}
    assert decision.record.message.startswith("batch size 256: the configured batch 256 (batch.policy=configured)")
    assert "the search: fits at least up to 64 (the search stopped" in decision.record.message
    assert "stepped down" not in decision.record.message


def test_only_a_real_out_of_memory_steps_a_configured_batch_down_after_a_search_stopped_on_time() -> None:
    # Same slow first step, but 256 does not fit (the limit is 200): its re-verification runs out of memory, and
    # the batch steps down to the largest size known to fit, saying why.
    oracle = SlowFirstStepOracle(limit=200, first_step_s=3.3)
    decision = choose_batch_size(oracle, BatchConfig(trial_max_seconds=2.0), None, configured_size=256)
    assert decision.record.batch_size == 64
    assert [(t.size, t.status) for t in decision.verification][:2] == [(256, "oom"), (64, "ok")]
    assert "stepped down to 64: on re-verification 256 ran out of memory" in decision.record.message


def test_a_failure_seen_before_the_time_limit_still_caps_the_configured_batch() -> None:
    # Doubling: 64 .. 512 fit, 1024 runs out of memory; bisection's 768 fits but is slow: the search stops there.
    # A configured 2048 is above a size that failed, so it steps down to 768; a configured 900 is not, so it is
    # timed as configured (and fits: the limit is 1000).
    oracle = SlowOracle(limit=1000, seconds_per_sample=1e-3)
    config = BatchConfig(trial_max_seconds=2.0)
    above = choose_batch_size(
        oracle, config, None, configured_size=2048, search_steps=3, verify_repeats=1, verify_steps=3
    )
    assert above.search.time_limited and above.record.batch_size == 768
    assert "stepped down to 768, the largest that fit: 1024 ran out of memory" in above.record.message
    between = choose_batch_size(
        oracle, config, None, configured_size=900, search_steps=3, verify_repeats=1, verify_steps=3
    )
    assert between.record.batch_size == 900


def test_a_timed_batch_far_under_the_limit_is_not_re_verified_and_one_near_it_is() -> None:
    # Peak = 100 + 10 * size MB under a 9,000 MB limit (0.9 x 10,000): size 64 peaks at 740 MB (8% of the limit),
    # size 512 at 5,220 MB (58%).
    oracle = OOMOracle(limit=10**9, mb_per_sample=10.0, base_mb=100.0)
    config = BatchConfig(policy="configured", min_size=32, max_size=4096)
    far = choose_batch_size(oracle, config, usable_vram_mb=10000.0, configured_size=64)
    assert (far.record.batch_size, far.verification) == (64, [])
    assert "not re-verified: its peak, 740 MB, is under 50% of the 9,000 MB limit" in far.record.message
    near = choose_batch_size(oracle, config, usable_vram_mb=10000.0, configured_size=512)
    assert [(t.size, t.status) for t in near.verification] == [(512, "ok")] * 3
    assert "verified 3x over 20 steps" in near.record.message
