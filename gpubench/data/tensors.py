"""Feature tensors on the benchmark device, and window sampling from them without a host round-trip."""

from dataclasses import dataclass

import torch

from gpubench.errors import ConfigError


@dataclass(frozen=True)
class FeatureTensors:
    """Normalised ``values`` (n_bars, n_features), raw ``log_return`` (for rewards), ``symbol_id`` and ``is_train``
    of every bar, symbol after symbol in time order, on one device."""

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
        """First rows (int64, on the device) of every window of ``length`` bars inside one symbol and one ``split``
        (``train``, ``validation`` or ``all``); ValueError when none fits."""
        if split not in ("train", "validation", "all"):
            raise ValueError(f"split must be train, validation or all, not {split!r}")
        n = self.n_bars
        if length > n:
            raise ValueError(f"a window of {length} bars does not fit in {n} bars")
        # Each symbol's bars are contiguous and its split a prefix, so checking a window's two ends is enough.
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
        """Raise a ConfigError naming ``key`` (set to ``value``) when no training window of ``length`` bars fits
        inside one symbol."""
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
        """First rows of the validation windows of ``length`` bars, or of the training ones when validation holds
        none."""
        try:
            return self.window_starts(length, "validation")
        except ValueError:
            return self.window_starts(length, "train")
