"""A server built from a source tree at a commit, started by the docker backend: the image
is tagged and labelled by the commit (runner.backends.docker.images.source)."""
from __future__ import annotations

from typing import Any


def start_at_commit(dbackend: Any, client: Any, req: Any, commit: str, version: str) -> Any:
    """Start ``req`` (a ServerRequest with ``source`` and a ``ref`` resolving to ``commit``,
    40 hex digits) on ``dbackend`` and check its image: tagged
    ``xferlab/SERVER:git-<commit16>``, labelled with the commit, the build row's version
    ``version`` and source commit ``commit``; returns the started handle (the caller stops
    it). Raises AssertionError (the server stopped) when a check fails."""
    dbackend.check(req)
    h = dbackend.start(req)
    try:
        info = h.build_info
        assert info["source"]["commit"] == commit, (info["source"], commit)
        assert info["image_tag"] == f"xferlab/{req.name}:git-{commit[:16]}"
        assert info["version"] == version, (info["version"], version)
        assert client.images.get(info["image_tag"]).labels["xferlab.source_commit"] == commit
    except BaseException:
        h.stop()
        raise
    return h
