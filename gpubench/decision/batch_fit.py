"""What fits where: the largest batch predicted to fit a card, from a model's memory split.

The batch search on the measured card keeps a trial's peak reserved memory under ``batch.headroom`` × the usable
VRAM, the usable VRAM being the card's memory less what the process holds outside torch's allocator (the CUDA
context, kernels, library handles: :mod:`gpubench.hardware.vram`). A card of the catalog loses the same overhead,
so its limit is ``headroom × (card VRAM − overhead)``, and with the split's line ``peak(B) = fixed + per_sample × B``
(:class:`~gpubench.results.MemorySplit`) the largest batch under it is ``floor((limit − fixed) / per_sample)``,
0 when not even one sample fits. Sizes in MB (MiB), batches in samples. Pure arithmetic on typed records.
"""

import math

from gpubench.results import MemorySplit


def peak_limit_mb(card_vram_mb: float, overhead_mb: float, headroom: float) -> float:
    """The peak reserved memory (MB) a batch may reach on a card of ``card_vram_mb``: ``headroom`` × (the card's
    memory less the ``overhead_mb`` held outside the allocator), the batch search's own limit."""
    return headroom * (card_vram_mb - overhead_mb)


def largest_batch(fixed_mb: float, per_sample_mb: float, limit_mb: float) -> int:
    """The largest batch whose line ``fixed_mb + per_sample_mb × B`` stays at or under ``limit_mb`` (MB):
    ``floor((limit_mb − fixed_mb) / per_sample_mb)``, 0 when none does. ValueError unless ``per_sample_mb`` > 0."""
    if per_sample_mb <= 0:
        raise ValueError(f"a largest batch needs memory that grows with the batch, got {per_sample_mb} MB per sample")
    # A ratio that lands on an integer up to rounding (limit exactly on the line) counts as fitting.
    ratio = (limit_mb - fixed_mb) / per_sample_mb
    return max(0, math.floor(ratio + 1e-9))


def fits_at_batch(split: MemorySplit | None, card_vram_mb: float | None, overhead_mb: float | None) -> int | None:
    """The largest batch predicted to fit a card of ``card_vram_mb`` (MB), with ``overhead_mb`` held outside the
    allocator (the measured device's, from the report's hardware), under the split's headroom; None where it cannot
    be predicted (no split or no line through the trials, the card's memory or the overhead unknown)."""
    if split is None or not split.has_fit or split.headroom is None:
        return None
    if card_vram_mb is None or overhead_mb is None:
        return None
    assert split.fixed_mb is not None and split.activations_mb_per_sample is not None  # has_fit
    limit_mb = peak_limit_mb(card_vram_mb, overhead_mb, split.headroom)
    return largest_batch(split.fixed_mb, split.activations_mb_per_sample, limit_mb)
