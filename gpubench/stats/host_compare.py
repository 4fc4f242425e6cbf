"""Could a difference in host speed explain a comparison's verdict? Pure numpy/scipy.

The host factor range ``[h_low, h_high]`` (h = B's host time / A's; it holds 1) comes from the loads
(:func:`fair_share_slowdown`) and the host probes (:func:`probe_ratio_interval`, counted where it excludes 1);
:func:`host_corrected_interval` divides it out of the host share of a step. A decisive verdict the corrected
interval loses reads :data:`HOST_DIFFERS`: within what the hosts explain."""

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats as sps

#: The verdict of a comparison whose decisive interval stops deciding once the hosts' difference is divided out.
HOST_DIFFERS = "HOST_DIFFERS"
#: Past this many pairs of readings the normal approximation (with continuity correction) replaces the exact null
#: distribution, whose cost grows as (m·n)²; it is then within one order statistic.
_EXACT_MAX_PAIRS = 10_000


def fair_share_slowdown(load_1m: float, cpus: int, own_threads: int) -> float:
    """How many times as long host work takes when ``load_1m`` runnable processes and ``own_threads`` threads of
    the run share ``cpus`` CPUs: ``max(1, (load_1m + own_threads) / cpus)`` (dimensionless, at least 1)."""
    if cpus < 1 or own_threads < 1 or not math.isfinite(load_1m) or load_1m < 0:
        raise ValueError(
            f"need cpus >= 1, own_threads >= 1 and a finite load >= 0, got {cpus}, {own_threads}, {load_1m}"
        )
    return max(1.0, (load_1m + own_threads) / cpus)


def mann_whitney_null_cdf(m: int, n: int) -> np.ndarray:
    """``cdf[u] = P(U <= u)`` for u = 0 … m·n, U the Mann-Whitney count of pairs (x_i > y_j) under the null, by the
    exact recursion ``P_{m,n}(u) = m/(m+n) · P_{m−1,n}(u − n) + n/(m+n) · P_{m,n−1}(u)``."""
    if m < 1 or n < 1:
        raise ValueError(f"need at least one value on each side, got {m} and {n}")
    size = m * n + 1
    # by_x[i] is the distribution for i x's and the y's counted so far (none yet: U = 0 whatever i is).
    by_x = np.zeros((m + 1, size))
    by_x[:, 0] = 1.0
    for ys in range(1, n + 1):
        for xs in range(1, m + 1):
            shifted = np.zeros(size)
            shifted[ys:] = by_x[xs - 1, : size - ys]
            # by_x[xs - 1] already holds ys y's (updated this pass); by_x[xs] still holds ys - 1.
            by_x[xs] = xs / (xs + ys) * shifted + ys / (xs + ys) * by_x[xs]
    return np.cumsum(by_x[m])


def _excluded_per_side(m: int, n: int, confidence_level: float) -> int:
    """The most pairwise differences that can be cut from each end of the sorted list while the interval keeps
    ``confidence_level``: the largest k with ``P(U <= k − 1) <= (1 − level) / 2``, as a count k − 1 (−1 when even the
    full range of differences covers less than the level)."""
    tail = (1.0 - confidence_level) / 2.0
    if m * n <= _EXACT_MAX_PAIRS:
        cdf = mann_whitney_null_cdf(m, n)
        # A relative tolerance keeps an exact tie of the tail with a cdf value (7 / 70 at 10%) on the covering side.
        return int(np.searchsorted(cdf, tail * (1 + 1e-12), side="right")) - 1
    mean, sd = m * n / 2.0, math.sqrt(m * n * (m + n + 1) / 12.0)
    # Largest integer c with P(U <= c) <= tail under N(mean, sd²) with continuity correction: c + 0.5 <= quantile.
    return math.floor(mean + sd * sps.norm.ppf(tail) - 0.5)


@dataclass(frozen=True)
class ProbeRatio:
    """B's host probe readings over A's: the Hodges-Lehmann ratio (median of all pairwise ratios b_j / a_i) and its
    distribution-free interval at ``confidence_level`` (``(0, inf)`` when the readings are too few for one);
    ``count_a`` and ``count_b`` readings. Dimensionless; above 1, B's host was slower."""

    ratio: float
    low: float
    high: float
    confidence_level: float
    count_a: int
    count_b: int

    @property
    def excludes_one(self) -> bool:
        """Whether the hosts differ beyond what the readings' own spread explains."""
        return self.high < 1.0 or self.low > 1.0


def probe_ratio_interval(probes_a_ms: ArrayLike, probes_b_ms: ArrayLike, confidence_level: float) -> ProbeRatio:
    """The Hodges-Lehmann ratio of ``probes_b_ms`` over ``probes_a_ms`` (positive, ms) with the interval inverting the
    two-sided Mann-Whitney test on the logarithms at ``confidence_level`` (Lehmann 1963)."""
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
    """The host factor range ``(h_low, h_high)`` (B's host time over A's, dimensionless): the smallest interval
    holding 1, ``load_factor`` (where given) and the probe interval (where it excludes 1)."""
    points = [1.0]
    if load_factor is not None:
        points.append(load_factor)
    if probe is not None and probe.excludes_one:
        points += [probe.low, probe.high]
    return min(points), max(points)


def host_corrected_interval(
    low: float, high: float, host_low: float, host_high: float, host_share: float
) -> tuple[float, float]:
    """The interval of B's code over A's, from ``[low, high]`` (the time ratio's interval) with a host factor anywhere
    in ``[host_low, host_high]`` (which holds 1) divided out of a step that is at most ``host_share`` (0-1) host
    work: ``[low / (1 − s + s·host_high), high / (1 − s + s·host_low)]``. Unbounded ends stay unbounded."""
    if not (host_low <= 1.0 <= host_high and host_low > 0):
        raise ValueError(f"the host factor range must hold 1 and be positive, got [{host_low}, {host_high}]")
    if not 0.0 <= host_share <= 1.0:
        raise ValueError(f"the host share of a step lies in [0, 1], got {host_share}")
    return low / (1.0 - host_share + host_share * host_high), high / (1.0 - host_share + host_share * host_low)
