"""The largest batch predicted to fit a card: under ``headroom × (card VRAM − overhead)``, the batch search's own
limit, read off the search's peaks made monotone, linear between trials and at the per-sample slope beyond them (the
line's intercept can miss small batches by more than a card's room). Sizes in MB (MiB), batches in samples."""

import math
from collections.abc import Sequence

from gpubench.results import MemorySplit

#: A limit exactly on a trial's peak fits despite float rounding.
_ROUNDING_SLACK = 1e-9


def peak_limit_mb(card_vram_mb: float, overhead_mb: float, headroom: float) -> float:
    """The peak reserved memory (MB) a batch may reach on a card: ``headroom × (card_vram_mb − overhead_mb)``."""
    return headroom * (card_vram_mb - overhead_mb)


def _envelope(sizes: Sequence[int], peaks_mb: Sequence[float]) -> tuple[list[int], list[float]]:
    """The trials by size, their peaks a running maximum."""
    ordered = sorted(zip(sizes, peaks_mb, strict=True))
    envelope: list[float] = []
    for _, peak in ordered:
        envelope.append(max(peak, envelope[-1]) if envelope else peak)
    return [size for size, _ in ordered], envelope


def trial_peak_mb(sizes: Sequence[int], peaks_mb: Sequence[float], per_sample_mb: float, batch: float) -> float:
    """The peak (MB) at ``batch``: linear between trials, ``per_sample_mb`` per sample beyond them."""
    ordered, envelope = _envelope(sizes, peaks_mb)
    if batch <= ordered[0]:
        return envelope[0] + per_sample_mb * (batch - ordered[0])
    for index in range(1, len(ordered)):
        if batch <= ordered[index]:
            low, high = ordered[index - 1], ordered[index]
            return envelope[index - 1] + (envelope[index] - envelope[index - 1]) * (batch - low) / (high - low)
    return envelope[-1] + per_sample_mb * (batch - ordered[-1])


def largest_batch(sizes: Sequence[int], peaks_mb: Sequence[float], per_sample_mb: float, limit_mb: float) -> int:
    """The largest batch whose peak (:func:`trial_peak_mb`) stays within ``limit_mb``, or 0; ValueError without
    trials or growth."""
    if not sizes:
        raise ValueError("a largest batch needs the trials' peaks")
    if per_sample_mb <= 0:
        raise ValueError(f"a largest batch needs memory that grows with the batch, got {per_sample_mb} MB per sample")
    ordered, envelope = _envelope(sizes, peaks_mb)
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
    """The largest batch predicted to fit a card of ``card_vram_mb`` with the device's ``overhead_mb`` outside the
    allocator; None where it cannot be predicted."""
    if split is None or not split.has_fit or split.headroom is None:
        return None
    if card_vram_mb is None or overhead_mb is None:
        return None
    assert split.activations_mb_per_sample is not None  # has_fit
    limit_mb = peak_limit_mb(card_vram_mb, overhead_mb, split.headroom)
    return largest_batch(split.fit_sizes, split.fit_peaks_mb, split.activations_mb_per_sample, limit_mb)
