"""Batch-size search against a real OOM boundary: an Adam MLP under a 4 GiB allocator cap (`pytest -m gpu`)."""

import gc
import time
from collections.abc import Callable, Iterator

import pytest
import torch
from torch import nn

from gpubench.measure.batch_search import (
    SEARCH_STEPS,
    UNVERIFIED_PEAK_FRACTION,
    TrialResult,
    choose_batch_size,
    find_max_batch_size,
    is_oom,
)
from gpubench.measure.config import BatchConfig

pytestmark = pytest.mark.gpu

CAP_BYTES = 4 * 2**30
CAP_MB = CAP_BYTES / 2**20
WIDTH = 4096
# Adam MLP 4096x4096 under a 4 GiB cap fits a few tens of thousands of rows (DESIGN.md: OOM past 32768).
MIN_SIZE, MAX_SIZE = 1024, 131072


@pytest.fixture
def capped_device() -> Iterator[torch.device]:
    """The GPU with the caching allocator capped at 4 GiB; the cap is lifted afterwards whatever happens."""
    device = torch.device("cuda", torch.cuda.current_device())
    gc.collect()
    torch.cuda.empty_cache()
    total_bytes = torch.cuda.get_device_properties(device).total_memory
    torch.cuda.set_per_process_memory_fraction(CAP_BYTES / total_bytes, device)
    try:
        yield device
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0, device)
        gc.collect()
        torch.cuda.empty_cache()


def adam_mlp_trial(device: torch.device) -> Callable[[int, int], TrialResult]:
    """``try_batch``: build a fresh 4096-wide Adam MLP, train ``steps`` steps at ``size`` rows."""

    def try_batch(size: int, steps: int) -> TrialResult:
        torch.manual_seed(0)
        # Built on the device: initialising 33M parameters on the host would dominate each trial's time.
        model = nn.Sequential(
            nn.Linear(WIDTH, WIDTH, device=device),
            nn.ReLU(),
            nn.Linear(WIDTH, WIDTH, device=device),
            nn.ReLU(),
            nn.Linear(WIDTH, 1, device=device),
        )
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
        inputs = torch.randn(size, WIDTH, device=device)
        targets = torch.randn(size, 1, device=device)
        torch.cuda.reset_peak_memory_stats(device)
        torch.cuda.synchronize(device)
        start_s = time.perf_counter()
        for _ in range(steps):
            optimizer.zero_grad(set_to_none=True)
            nn.functional.mse_loss(model(inputs), targets).backward()
            optimizer.step()
        torch.cuda.synchronize(device)
        elapsed_s = time.perf_counter() - start_s
        return TrialResult(
            peak_reserved_mb=torch.cuda.max_memory_reserved(device) / 2**20,
            samples_per_s=steps * size / elapsed_s,
            seconds=elapsed_s,
        )

    return try_batch


def runs_out_of_memory(try_batch: Callable[[int, int], TrialResult], size: int) -> bool:
    """True when the trial raises an OOM. Only a flag leaves the except block, so the trial's tensors are freed."""
    failed = False
    try:
        try_batch(size, SEARCH_STEPS)
    except torch.OutOfMemoryError:
        failed = True
    gc.collect()
    torch.cuda.empty_cache()
    return failed


def test_real_oom_is_classified_as_oom(capped_device: torch.device) -> None:
    oom: BaseException | None = None
    try:
        torch.empty(CAP_BYTES + 2**30, dtype=torch.uint8, device=capped_device)
    except RuntimeError as exc:
        oom = exc
    assert oom is not None
    assert is_oom(oom)


def test_finder_finds_the_real_boundary_and_the_process_recovers(capped_device: torch.device) -> None:
    allocated_before = torch.cuda.memory_allocated(capped_device)
    try_batch = adam_mlp_trial(capped_device)

    search = find_max_batch_size(try_batch, MIN_SIZE, MAX_SIZE)

    best = search.best_size
    assert best is not None
    assert MIN_SIZE <= best < MAX_SIZE
    status_by_size = {trial.size: trial.status for trial in search.trials}
    assert status_by_size[best] == "ok"
    assert status_by_size[best + 1] == "oom"
    assert all(trial.peak_reserved_mb <= CAP_MB for trial in search.trials if trial.ok)
    # The boundary is real and repeatable: the found size trains again, twice that size does not.
    assert try_batch(best, SEARCH_STEPS).peak_reserved_mb <= CAP_MB
    assert runs_out_of_memory(try_batch, 2 * best)

    # Recovered: nothing of the failed trials stays allocated (each held over 500 MB of weights and Adam state;
    # the margin allows for cuBLAS workspaces, which stay allocated), and most of the cap can be taken at once.
    gc.collect()
    torch.cuda.empty_cache()
    assert torch.cuda.memory_allocated(capped_device) - allocated_before < 256 * 2**20
    block = torch.empty(3 * 2**30, dtype=torch.uint8, device=capped_device)
    block.fill_(1)
    assert int(block[-1]) == 1


def test_policy_keeps_peak_reserved_under_the_headroom(capped_device: torch.device) -> None:
    batch_cfg = BatchConfig(policy="max", min_size=MIN_SIZE, max_size=MAX_SIZE, headroom=0.9, target_effective=512)
    decision = choose_batch_size(adam_mlp_trial(capped_device), batch_cfg, usable_vram_mb=CAP_MB, verify_repeats=2)

    assert decision.record.status == "ok", decision.record.message
    assert decision.record.batch_size is not None
    assert decision.record.peak_limit_mb == pytest.approx(0.9 * CAP_MB)
    assert decision.record.peak_reserved_mb <= 0.9 * CAP_MB
    assert all(trial.peak_reserved_mb <= 0.9 * CAP_MB for trial in decision.verification if trial.ok)
    status_by_size = {trial.size: trial.status for trial in decision.search.trials}
    assert status_by_size[decision.record.largest_fitting_size + 1] in ("oom", "over_headroom")
    assert [trial.status for trial in decision.verification[-2:]] == ["ok", "ok"]
    assert {trial.steps for trial in decision.search.trials} == {SEARCH_STEPS}
    assert {trial.steps for trial in decision.verification} == {decision.record.verify_steps}
    assert decision.record.gradient_accumulation_steps == 1
    assert decision.record.knee_size is not None
    assert decision.record.knee_size <= decision.record.batch_size


def test_configured_policy_times_the_recipe_and_verifies_only_it(capped_device: torch.device) -> None:
    batch_cfg = BatchConfig(min_size=MIN_SIZE, max_size=MAX_SIZE, headroom=0.9)
    decision = choose_batch_size(
        adam_mlp_trial(capped_device), batch_cfg, usable_vram_mb=CAP_MB, configured_size=2048, verify_repeats=2
    )
    assert decision.record.status == "ok", decision.record.message
    assert decision.record.batch_size == 2048 and decision.record.gradient_accumulation_steps == 1
    assert decision.record.largest_fitting_size > 2048
    assert {trial.size for trial in decision.verification} <= {2048}
    # A configured size whose searched peak is under half the limit is timed by the search and not re-run.
    searched = [t.peak_reserved_mb for t in decision.search.trials if t.size == 2048 and t.ok and t.peak_reserved_mb]
    if not searched or max(searched) > UNVERIFIED_PEAK_FRACTION * decision.record.peak_limit_mb:
        assert {trial.size for trial in decision.verification} == {2048}


def test_a_time_bound_stops_the_search_early(capped_device: torch.device) -> None:
    # A bound far below a 4096-wide Adam step at tens of thousands of rows: the search stops doubling early.
    batch_cfg = BatchConfig(policy="max", min_size=MIN_SIZE, max_size=MAX_SIZE, trial_max_seconds=0.01)
    decision = choose_batch_size(adam_mlp_trial(capped_device), batch_cfg, usable_vram_mb=CAP_MB, verify_repeats=1)
    assert decision.search.time_limited
    slow = decision.search.trials[-1]
    assert slow.ok and slow.seconds > 0.01
    assert all(trial.status != "oom" for trial in decision.search.trials)
