"""Data-parallel measurement: a model trained by ``distributed.nproc`` processes under torchrun and
DistributedDataParallel, its scaling efficiency against the same job's 1-process measurement."""
