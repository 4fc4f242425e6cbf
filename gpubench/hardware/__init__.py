"""The device, and the only package that talks to it (NVML, torch.cuda's device queries and memory cap).

``selection`` chooses the device; ``identity`` finds torch's device in NVML; ``nvml`` holds the NVML queries
(without torch, for the memory sampler's child process, ``memory_sampler_process``); ``vram`` measures the
budget and caps the allocator; ``probe`` describes the device; ``burn_in`` settles it; ``monitor`` watches it per
epoch; ``catalog`` holds the cards' spec sheets.
"""
