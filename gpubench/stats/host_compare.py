"""Could a difference in host speed explain a comparison's verdict? Pure numpy/scipy.

``python -m gpubench.compare`` reads B's mean time per sample over A's (:mod:`gpubench.stats.compare`). Two runs of
the same code on one host at different loads can differ by 2x (identical ``experiment=quick`` runs at recorded loads
of 3.1 and 6.1 on 2 CPUs read "dqn FASTER, ratio 0.527"), so a verdict about the code has to allow for the host.
This module measures how much faster or slower B's host was than A's, as a **host factor range** ``[h_low, h_high]``
that always holds 1 (h = host time of B / host time of A; below 1, B's host was faster), from two readings that
every report since 2026-12 carries:

* **The load** (``run.host``): the 1-minute load average L (runnable processes) at the run's start on C available
  CPUs, with the run's own t torch threads. Under the kernel's fair share, L + t runnable threads on C CPUs get
  C / (L + t) of a CPU each once they outnumber the CPUs, so host work takes :func:`fair_share_slowdown`
  ``max(1, (L + t) / C)`` times as long. The factor from the loads is B's slowdown over A's; it differs from 1 only
  where at least one run's threads outnumbered its CPUs and the two loads differ. The load is one reading at the
  start, so it is taken as a point, not as a measured interval.
* **The host probe** (``rounds[*].host_probe.python_loop_ms``): a fixed Python loop timed before every round. The
  factor from the probes is the Hodges-Lehmann ratio of B's readings over A's (the median of every pairwise ratio)
  with the distribution-free confidence interval that inverts the Mann-Whitney test (:func:`probe_ratio_interval`;
  Lehmann 1963, "Nonparametric confidence intervals for a shift parameter", Ann. Math. Statist. 34; Bauer 1972,
  JASA 67). It counts only when that interval excludes 1: probes that differ less than their own spread explains
  are equal hosts. Readings within a run are not independent (the H200's host switched between about 6.4 and
  11.5 ms within seconds), so the interval is narrower than it should be and errs towards refusing.

The range is the smallest interval holding 1, the load factor and the probe interval (where each counts).

**From host to model.** A step that is a share ``s`` host work (Python, dispatch, kernel launches) and ``1 − s``
device work takes ``(1 − s) + s·h`` times as long when the host takes ``h`` times as long (the step split's additive
model); a step with less host work than ``s`` moves less. So the ratio of B's code over A's, the time ratio with the
host divided out, lies in

    [low / (1 − s + s·h_high),  high / (1 − s + s·h_low)]          (:func:`host_corrected_interval`)

for the time ratio's interval ``[low, high]``. ``s`` is 1 on a CPU (the device is the host) and where nothing says
otherwise; on a GPU it is the host part of the report's step split (see :mod:`gpubench.output.compare_host`).

**Verdict.** Widening a ratio interval that is decisive (FASTER, SLOWER, SAME) can only make it AMBIGUOUS or keep
its verdict. Where the corrected interval keeps the verdict, the difference is beyond what the host can explain and
the verdict stands. Where it loses it, the comparison reads :data:`HOST_DIFFERS`: the measured difference is within
what the hosts' difference explains, so it says nothing about the code. Equal hosts (range ``[1, 1]``) leave every
verdict as it was, and a report compared with itself has equal hosts. Nothing here is a tuned constant: the loads,
CPUs, threads, probe readings and step split come from the two reports, the level is the comparison's own.
"""

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats as sps

#: The verdict of a comparison whose decisive interval stops deciding once the hosts' difference is divided out.
HOST_DIFFERS = "HOST_DIFFERS"
#: The exact null distribution of the Mann-Whitney count costs ``m·n`` vector operations of length ``m·n``; past
#: this many pairs of readings the normal approximation (with continuity correction) is within one order statistic.
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
    """``cdf[u] = P(U <= u)`` for u = 0 … m·n, where U counts the pairs (x_i > y_j) of m x's and n y's drawn from one
    continuous distribution (the Mann-Whitney statistic under the null hypothesis).

    Exact: the largest of the m + n values is an x with probability m / (m + n), and then beats all n y's, so
    ``P_{m,n}(u) = m/(m+n) · P_{m−1,n}(u − n) + n/(m+n) · P_{m,n−1}(u)``, every term a probability (no cancellation).
    """
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
    """The Hodges-Lehmann ratio of ``probes_b_ms`` over ``probes_a_ms`` (positive readings, ms) with the interval that
    inverts the two-sided Mann-Whitney test on the logarithms at ``confidence_level``: the set of shifts δ of log b
    that the test does not reject, ``[D_(k), D_(mn+1−k)]`` of the sorted differences D = log b_j − log a_i, where
    k − 1 is the most differences whose exclusion keeps ``P(U <= k − 1) <= (1 − level) / 2`` (Lehmann 1963)."""
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
