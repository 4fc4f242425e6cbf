"""Unit conversions used across gpubench, in one place. Memory sizes are binary (MiB, GiB), as CUDA and NVML
report them; the report's ``*_mb`` figures are MiB."""

BYTES_PER_MB = 1024**2
MB_PER_GB = 1024.0
MS_PER_S = 1e3
SECONDS_PER_HOUR = 3600.0
HOURS_PER_DAY = 24.0
JOULES_PER_KWH = 3.6e6
MONTHS_PER_YEAR = 12
