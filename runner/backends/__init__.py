"""Backends: how servers under test are started (see base.py for the contract).

``get_backend(name)`` returns a backend instance; valid names are in ``BACKENDS``.
"""
from __future__ import annotations

from typing import Any

from runner.backends.base import Backend, MachineLacks, ServerFailed, ServerHandle, ServerSkipped
from runner.load.target import Target
from runner.spec.request import ServerRequest

#: Backend names get_backend() accepts.
BACKENDS = ("local", "docker")


def get_backend(name: str, **kwargs: Any) -> Backend:
    """Return a new backend by name (``"local"`` or ``"docker"``); ``kwargs`` go to its
    constructor (e.g. ``progress=print``). Raises ValueError naming the valid backends;
    for ``"docker"``, ImportError without the Docker SDK and RuntimeError when no Docker
    engine answers (``resolve_backend("auto")`` then falls back to local)."""
    if name == "local":
        from runner.backends.local import LocalBackend
        return LocalBackend(**kwargs)
    if name == "docker":
        from runner.backends.docker import DockerBackend
        return DockerBackend(**kwargs)
    raise ValueError(f"unknown backend {name!r}; valid backends: {', '.join(BACKENDS)}")


__all__ = ["BACKENDS", "Backend", "MachineLacks", "ServerFailed", "ServerHandle", "ServerRequest", "ServerSkipped",
           "Target", "get_backend"]
