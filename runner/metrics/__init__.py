"""Server-side metrics: process-tree memory/CPU sampler and environment snapshot."""
from .environment import environment_class, snapshot
from .sampler import MemSnapshot, SamplerError, TreeAccessError, TreeSampler

__all__ = ["MemSnapshot", "SamplerError", "TreeAccessError", "TreeSampler", "environment_class", "snapshot"]
