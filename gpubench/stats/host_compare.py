"""Could a difference in host speed explain a comparison's verdict? The host factor range (B's host time / A's) from
the loads and the host probes is divided out of the host share of a step; a decisive verdict that does not survive
reads :data:`HOST_DIFFERS`."""

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats as sps

HOST_DIFFERS = "HOST_DIFFERS"
#: Past this many pairs the normal approximation replaces the exact null distribution (cost (m·n)²).
_EXACT_MAX_PAIRS = 10_000


def fair_share_slowdown(load_1m: float, cpus: int, own_threads: int) -> float:
    """How many times as long host work takes on a loaded host: ``max(1, (load_1m + own_threads) / cpus)``."""
    if cpus < 1 or own_threads < 1 or not math.isfinite(load_1m) or load_1m < 0:
        raise ValueError(
            f"need cpus >= 1, own_threads >= 1 and a finite load >= 0, got {cpus}, {own_threads}, {load_1m}"
        )
    return max(1.0, (load_1m + own_threads) / cpus)


def mann_whitney_null_cdf(m: int, n: int) -> np.ndarray:
    """``cdf[u] = P(U <= u)`` for u = 0 … m·n, U the Mann-Whitney count of pairs (x_i > y_j) under the null, by the
    exact recursion over m and n."""
    if m < 1 or n < 1:
        raise ValueError(f"need at least one value on each side, got {m} and {n}")
    size = m * n + 1
    # by_x[i]: the distribution for i x's and the y's counted so far.
    by_x = np.zeros((m + 1, size))
    by_x[:, 0] = 1.0
    for ys in range(1, n + 1):
        for xs in range(1, m + 1):
            shifted = np.zeros(size)
            shifted[ys:] = by_x[xs - 1, : size - ys]
            by_x[xs] = xs / (xs + ys) * shifted + ys / (xs + ys) * by_x[xs]
    return np.cumsum(by_x[m])


def _excluded_per_side(m: int, n: int, confidence_level: float) -> int:
    """How many sorted pairwise differences to cut from each end at ``confidence_level`` (−1: the full range covers
    less)."""
    tail = (1.0 - confidence_level) / 2.0
    if m * n <= _EXACT_MAX_PAIRS:
        cdf = mann_whitney_null_cdf(m, n)
        # A tie of the tail with a cdf value (7 / 70 at 10%) stays on the covering side.
        return int(np.searchsorted(cdf, tail * (1 + 1e-12), side="right")) - 1
    mean, sd = m * n / 2.0, math.sqrt(m * n * (m + n + 1) / 12.0)
    # With continuity correction.
    return math.floor(mean + sd * sps.norm.ppf(tail) - 0.5)


@dataclass(frozen=True)
class ProbeRatio:
    """The Hodges-Lehmann ratio of B's host probe readings over A's (above 1: B's host slower) and its
    distribution-free interval (``(0, inf)`` when the readings are too few)."""

    ratio: float
    low: float
    high: float
    confidence_level: float
    count_a: int
    count_b: int

    @property
    def excludes_one(self) -> bool:
        return self.high < 1.0 or self.low > 1.0


def probe_ratio_interval(probes_a_ms: ArrayLike, probes_b_ms: ArrayLike, confidence_level: float) -> ProbeRatio:
    """The ratio with the interval that inverts the Mann-Whitney test on the logarithms (Lehmann 1963)."""
    a, b = np.asarray(probes_a_ms, dtype=float), np.asarray(probes_b_ms, dtype=float)
    if a.ndim != 1 or b.ndim != 1 or a.size == 0 or b.size == 0:
        raise ValueError(f"need a non-empty 1-D list of readings on each side, got shapes {a.shape} and {b.shape}")
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b)) and np.all(a > 0) and np.all(b > 0)):
        raise ValueError("host probe readings must be finite and positive")
    if not 0 < confidence_level < 1:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence_level}")
    differences = np.sort((np.log(b)[None, :] - np.log(a)[:, None]).ravel())
    estimate = float(np.exp(np.median(differences)))
    cut = _excluded_per_side(a.size, b.size, confidence_level)
    if cut < 0:
        low, high = 0.0, math.inf
    else:
        low, high = float(np.exp(differences[cut])), float(np.exp(differences[differences.size - 1 - cut]))
    return ProbeRatio(estimate, low, high, confidence_level, int(a.size), int(b.size))


def host_factor_range(load_factor: float | None, probe: ProbeRatio | None) -> tuple[float, float]:
    """The smallest range of B's host time over A's holding 1, ``load_factor`` and the probe interval (where it
    excludes 1)."""
    points = [1.0]
    if load_factor is not None:
        points.append(load_factor)
    if probe is not None and probe.excludes_one:
        points += [probe.low, probe.high]
    return min(points), max(points)


def host_corrected_interval(
    low: float, high: float, host_low: float, host_high: float, host_share: float
) -> tuple[float, float]:
    """The interval of B's code over A's: the time ratio's ``[low, high]`` with a host factor in ``[host_low,
    host_high]`` divided out of a step at most ``host_share`` (0-1) host work."""
    if not (host_low <= 1.0 <= host_high and host_low > 0):
        raise ValueError(f"the host factor range must hold 1 and be positive, got [{host_low}, {host_high}]")
    if not 0.0 <= host_share <= 1.0:
        raise ValueError(f"the host share of a step lies in [0, 1], got {host_share}")
    return low / (1.0 - host_share + host_share * host_high), high / (1.0 - host_share + host_share * host_low)
