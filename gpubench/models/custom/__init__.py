"""The custom workload: the user's own training step, from a ``build(batch_size, device)`` factory."""
