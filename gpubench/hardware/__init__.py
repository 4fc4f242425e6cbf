"""The device, and the only package that talks to it (NVML, torch.cuda's device queries and memory cap)."""
