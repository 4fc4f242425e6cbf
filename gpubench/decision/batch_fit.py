"""What fits where: the largest batch predicted to fit a card, from a model's memory split.

The batch search keeps a trial's peak reserved memory under ``batch.headroom`` × the usable VRAM (the card's memory
less what the process holds outside torch's allocator, :mod:`gpubench.hardware.vram`); a catalog card loses the same
overhead, so its limit is ``headroom × (card VRAM − overhead)``. The largest batch under it is read off the search's
peaks (:class:`~gpubench.results.MemorySplit`), made monotone, interpolated between trials and extended by the
line's per-sample slope beyond them: the line's intercept can miss small batches by more than a card's room. Sizes
in MB (MiB), batches in samples.
"""

import math
from collections.abc import Sequence

from gpubench.results import MemorySplit

#: Slack on a batch count that lands on an integer up to float rounding (a limit exactly on a trial's peak fits).
_ROUNDING_SLACK = 1e-9


def peak_limit_mb(card_vram_mb: float, overhead_mb: float, headroom: float) -> float:
    """The peak reserved memory (MB) a batch may reach on a card of ``card_vram_mb``: ``headroom`` × (the card's
    memory less the ``overhead_mb`` held outside the allocator), the batch search's own limit."""
    return headroom * (card_vram_mb - overhead_mb)


def _envelope(sizes: Sequence[int], peaks_mb: Sequence[float]) -> tuple[list[int], list[float]]:
    """The trials by size with their peaks made non-decreasing (a running maximum)."""
    ordered = sorted(zip(sizes, peaks_mb, strict=True))
    envelope: list[float] = []
    for _, peak in ordered:
        envelope.append(max(peak, envelope[-1]) if envelope else peak)
    return [size for size, _ in ordered], envelope


def trial_peak_mb(sizes: Sequence[int], peaks_mb: Sequence[float], per_sample_mb: float, batch: float) -> float:
    """The peak (MB) at ``batch`` read off the trials (``sizes``, ``peaks_mb``): linear between the two trials
    around it, ``per_sample_mb`` per sample beyond the first or the last."""
    ordered, envelope = _envelope(sizes, peaks_mb)
    if batch <= ordered[0]:
        return envelope[0] + per_sample_mb * (batch - ordered[0])
    for index in range(1, len(ordered)):
        if batch <= ordered[index]:
            low, high = ordered[index - 1], ordered[index]
            return envelope[index - 1] + (envelope[index] - envelope[index - 1]) * (batch - low) / (high - low)
    return envelope[-1] + per_sample_mb * (batch - ordered[-1])


def largest_batch(sizes: Sequence[int], peaks_mb: Sequence[float], per_sample_mb: float, limit_mb: float) -> int:
    """The largest batch whose peak (:func:`trial_peak_mb`) stays at or under ``limit_mb``; 0 when none does.
    ValueError without trials or unless ``per_sample_mb`` > 0 (a peak that does not grow predicts no limit)."""
    if not sizes:
        raise ValueError("a largest batch needs the trials' peaks")
    if per_sample_mb <= 0:
        raise ValueError(f"a largest batch needs memory that grows with the batch, got {per_sample_mb} MB per sample")
    ordered, envelope = _envelope(sizes, peaks_mb)
    # The last trial at or under the limit; the limit lies below the next one's peak (the envelope never falls).
    below = [index for index, peak in enumerate(envelope) if peak <= limit_mb]
    if not below:
        batches = ordered[0] + (limit_mb - envelope[0]) / per_sample_mb
    elif below[-1] == len(ordered) - 1:
        batches = ordered[-1] + (limit_mb - envelope[-1]) / per_sample_mb
    else:
        index = below[-1]
        low, high = ordered[index], ordered[index + 1]
        batches = low + (limit_mb - envelope[index]) * (high - low) / (envelope[index + 1] - envelope[index])
    return max(0, math.floor(batches + _ROUNDING_SLACK))


def fits_at_batch(split: MemorySplit | None, card_vram_mb: float | None, overhead_mb: float | None) -> int | None:
    """The largest batch predicted to fit a card of ``card_vram_mb`` (MB), with ``overhead_mb`` held outside the
    allocator (the measured device's, from the report's hardware), under the split's headroom; None where it cannot
    be predicted (no split or no line through the trials, the card's memory or the overhead unknown)."""
    if split is None or not split.has_fit or split.headroom is None:
        return None
    if card_vram_mb is None or overhead_mb is None:
        return None
    assert split.activations_mb_per_sample is not None  # has_fit
    limit_mb = peak_limit_mb(card_vram_mb, overhead_mb, split.headroom)
    return largest_batch(split.fit_sizes, split.fit_peaks_mb, split.activations_mb_per_sample, limit_mb)
