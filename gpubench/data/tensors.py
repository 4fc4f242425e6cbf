"""Feature tensors on the benchmark device, and window sampling from them without a host round-trip.

All symbols' bars are stacked in one ``(n_bars, n_features)`` tensor, symbol after symbol, each in time order.
Windows never cross a symbol boundary or the train/validation split: :meth:`FeatureTensors.window_starts` lists
the valid first rows of windows of a given length, and :meth:`FeatureTensors.gather` builds a batch of windows
from start rows with one indexed gather on the device.
"""

from dataclasses import dataclass

import torch

from gpubench.errors import ConfigError


@dataclass(frozen=True)
class FeatureTensors:
    """Normalised features and raw returns of every bar, on one device.

    Attributes:
        values: ``(n_bars, n_features)`` float32 features, normalised with statistics of the training split only.
        log_return: ``(n_bars,)`` float32 raw one-bar log return of the close (return from bar t-1 to t; the
            first bar of each symbol has 0). Used for rewards, not normalised.
        symbol_id: ``(n_bars,)`` int64 index into ``symbols``.
        is_train: ``(n_bars,)`` bool, True for bars in the training split (the first ``train_fraction`` of each
            symbol's bars, in time).
        feature_names: column names of ``values``.
        target_column: column of ``values`` holding the normalised return (the forecasting target).
        known_future_columns: columns known in advance (calendar / time-of-day features), for decoders.
        symbols: symbol names, indexed by ``symbol_id``.
    """

    values: torch.Tensor
    log_return: torch.Tensor
    symbol_id: torch.Tensor
    is_train: torch.Tensor
    feature_names: tuple[str, ...]
    target_column: int
    known_future_columns: tuple[int, ...]
    symbols: tuple[str, ...]

    @property
    def device(self) -> torch.device:
        return self.values.device

    @property
    def n_bars(self) -> int:
        return int(self.values.shape[0])

    @property
    def n_features(self) -> int:
        return int(self.values.shape[1])

    def window_starts(self, length: int, split: str = "train") -> torch.Tensor:
        """First rows of every window of ``length`` bars lying inside one symbol and one split.

        ``split`` is ``train``, ``validation`` or ``all``. Returns an int64 tensor on the device; raises
        ValueError when no window fits (the data is shorter than the window).
        """
        if split not in ("train", "validation", "all"):
            raise ValueError(f"split must be train, validation or all, not {split!r}")
        n = self.n_bars
        if length > n:
            raise ValueError(f"a window of {length} bars does not fit in {n} bars")
        # A window [s, s + length) is valid when its first and last rows share symbol and split; since each
        # symbol's bars are contiguous and its split is a prefix, checking the two ends is enough.
        first = torch.arange(n - length + 1, device=self.device)
        last = first + (length - 1)
        valid = self.symbol_id[first] == self.symbol_id[last]
        if split == "train":
            valid &= self.is_train[first] & self.is_train[last]
        elif split == "validation":
            valid &= ~self.is_train[first] & ~self.is_train[last]
        else:
            valid &= self.is_train[first] == self.is_train[last]
        starts = first[valid]
        if starts.numel() == 0:
            raise ValueError(f"no {split} window of {length} bars fits inside one symbol")
        return starts

    def longest_train_stretch(self) -> int:
        """The most training bars one symbol has (its split is a contiguous prefix): the longest window that fits."""
        return int(torch.bincount(self.symbol_id[self.is_train]).max()) if bool(self.is_train.any()) else 0

    def require_window(self, length: int, key: str, value: int) -> None:
        """Raise a :class:`~gpubench.errors.ConfigError` naming ``key`` (set to ``value``) when no training window
        of ``length`` bars fits inside one symbol: a config value too large for the data is bad input, found before
        anything is measured."""
        longest = self.longest_train_stretch()
        if length > longest:
            raise ConfigError(
                f"`{key}` = {value} is too large for the data: it makes a window of {length} bars, and the longest "
                f"training stretch of one symbol is {longest} bars. Give a smaller value, or more data (e.g. a "
                "larger data.days)."
            )

    def gather(self, starts: torch.Tensor, length: int) -> torch.Tensor:
        """Windows ``values[s : s + length]`` for each start row: ``(len(starts), length, n_features)``."""
        rows = starts.unsqueeze(1) + torch.arange(length, device=starts.device)
        return self.values[rows]

    def sample_starts(self, valid_starts: torch.Tensor, batch_size: int, generator: torch.Generator) -> torch.Tensor:
        """``batch_size`` start rows drawn uniformly with replacement from ``valid_starts``, on the device."""
        picks = torch.randint(0, valid_starts.numel(), (batch_size,), device=valid_starts.device, generator=generator)
        return valid_starts[picks]

    def evaluation_starts(self, length: int) -> torch.Tensor:
        """First rows of the validation windows of ``length`` bars, or of the training ones when the validation
        split is too short to hold one: an evaluation is timed either way (the same shapes, the same work)."""
        try:
            return self.window_starts(length, "validation")
        except ValueError:
            return self.window_starts(length, "train")
