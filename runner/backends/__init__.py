"""Backends: how servers under test are started (see base.py for the contract).

``get_backend(name)`` returns a backend instance; valid names are in ``BACKENDS``.
"""
from __future__ import annotations

from typing import Any

from .base import Backend, ServerFailed, ServerHandle, ServerRequest, ServerSkipped, Target

#: Backend names get_backend() accepts ("docker" comes later).
BACKENDS = ("local",)


def get_backend(name: str, **kwargs: Any) -> Backend:
    """Return a new backend by name (``"local"``); ``kwargs`` go to its constructor
    (e.g. ``progress=print``). Raises ValueError naming the valid backends."""
    if name == "local":
        from .local import LocalBackend
        return LocalBackend(**kwargs)
    raise ValueError(f"unknown backend {name!r}; valid backends: {', '.join(BACKENDS)}")


__all__ = ["BACKENDS", "Backend", "ServerFailed", "ServerHandle", "ServerRequest", "ServerSkipped",
           "Target", "get_backend"]
