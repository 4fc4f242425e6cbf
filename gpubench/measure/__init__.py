"""Measuring a workload: block timer, epoch loop, batch search, memory profiler and samplers, stability."""
