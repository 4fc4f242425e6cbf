"""How much of a spread the host explains: R² of a line on the host probe's readings, or on the card's power."""

from collections.abc import Sequence

import numpy as np

#: A line through two points explains everything.
MIN_POINTS = 3
#: Rounds whose mean SM clocks lie within this fraction of each other ran at one clock.
STEADY_CLOCK_FRACTION = 0.01


def explained_share(values: Sequence[float], host_readings: Sequence[float]) -> float | None:
    """R² of ``values`` on ``host_readings`` (squared Pearson correlation); None under :data:`MIN_POINTS` pairs or
    when either side is constant."""
    if len(values) != len(host_readings):
        raise ValueError(f"need as many values as host readings, got {len(values)} and {len(host_readings)}")
    if len(values) < MIN_POINTS:
        return None
    y, x = np.asarray(values, dtype=float), np.asarray(host_readings, dtype=float)
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return None
    return float(np.corrcoef(x, y)[0, 1] ** 2)


def gpu_wait_share(
    round_means_ms: Sequence[float], power_w: Sequence[float], sm_clock_mhz: Sequence[float], throttled: Sequence[bool]
) -> float | None:
    """R² of the round means (ms) on their mean board power (W) where slower rounds drew less power at one SM clock
    (the card idled, waiting on its host); 0 where power did not fall as rounds slowed; None where the clock moved,
    a round throttled, or under :data:`MIN_POINTS` rounds or no variation."""
    if not len(round_means_ms) == len(power_w) == len(sm_clock_mhz) == len(throttled):
        raise ValueError("need one power, clock and throttle reading per round mean")
    if len(round_means_ms) < MIN_POINTS or any(throttled) or min(sm_clock_mhz) <= 0:
        return None
    if max(sm_clock_mhz) > min(sm_clock_mhz) * (1 + STEADY_CLOCK_FRACTION):
        return None
    y, x = np.asarray(round_means_ms, dtype=float), np.asarray(power_w, dtype=float)
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return None
    correlation = float(np.corrcoef(x, y)[0, 1])
    return correlation**2 if correlation < 0 else 0.0
