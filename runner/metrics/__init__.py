"""Server-side metrics: process-tree memory/CPU sampler and environment snapshot."""
from runner.metrics.environment import environment_class, snapshot
from runner.metrics.sampler import MemSnapshot, SamplerError, TreeAccessError, TreeSampler

__all__ = ["MemSnapshot", "SamplerError", "TreeAccessError", "TreeSampler", "environment_class", "snapshot"]
