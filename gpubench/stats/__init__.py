"""Statistics of measured times: pure numpy/scipy, no torch. ``epoch_times`` summarises one model's epochs."""
