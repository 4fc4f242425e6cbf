"""The device: choice, NVML (only here), probe, burn-in, thermal monitor, VRAM cap and the card catalog."""
