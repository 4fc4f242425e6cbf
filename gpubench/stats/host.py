"""How much of a spread the host's speed explains: R² of a least-squares line. Pure numpy."""

from collections.abc import Sequence

import numpy as np

#: A line through two points explains everything; three are the fewest for which R² says something.
MIN_POINTS = 3


def explained_share(values: Sequence[float], host_readings: Sequence[float]) -> float | None:
    """R² of ``values`` regressed on ``host_readings`` (the squared Pearson correlation): the share of the values'
    variance that a straight line in the host reading accounts for. None with fewer than :data:`MIN_POINTS` pairs or
    when either side does not vary."""
    if len(values) != len(host_readings):
        raise ValueError(f"need as many values as host readings, got {len(values)} and {len(host_readings)}")
    if len(values) < MIN_POINTS:
        return None
    y, x = np.asarray(values, dtype=float), np.asarray(host_readings, dtype=float)
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return None
    return float(np.corrcoef(x, y)[0, 1] ** 2)
