"""Which server sources a spec that comes through the dashboard may build.

A server entry's ``source`` (runner.spec.source) is built by running the tree's own code
(pip's build backend, a Makefile, ``go build``) and then run as the server under test,
both by the worker, which runs as root. Anyone holding the dashboard's token can submit a
spec, so through the dashboard and its API (the launch form, a YAML upload, ``POST
/api/campaigns``, the bisect form) a source is accepted only when the operator allowed it:

* a checkout, or a ``file://`` URL, whose real path (symlinks and ``..`` resolved) lies
  under one of ``XFERLAB_SOURCE_DIRS`` (``:``-separated; default none);
* an ``https://`` or ``ssh://`` URL that starts with one of ``XFERLAB_SOURCE_URLS``
  (space-separated prefixes, e.g. ``https://github.com/giampaolo/pyftpdlib``; default none;
  a prefix ends at a ``/`` boundary: ``https://example.org/a`` does not allow
  ``https://example.org/ab``).

The command line (``xferlab run``, ``check``, ``bisect``) builds what its own user names:
that user can run the code anyway. The refusal says which setting allows the source,
and, for a path outside the allowed folders, nothing about whether it exists.
"""
from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit


class SourcePolicyError(ValueError):
    """The source is not allowed for a spec from the dashboard; the message names the setting."""


def _under(p: Path, dirs: list[Path]) -> bool:
    return any(p == d or d in p.parents for d in dirs)


def allowed_source(location: str) -> None:
    """Raise SourcePolicyError unless ``location`` (already checked by
    runner.spec.source.check_source) is allowed for a spec from the dashboard (module
    docstring)."""
    from runner.config import get_settings

    settings = get_settings()
    if "://" in location:
        parts = urlsplit(location)
        if parts.scheme == "file":
            path = parts.path
        else:
            for prefix in settings.source_urls:
                if location == prefix or location.startswith(prefix.rstrip("/") + "/"):
                    return
            raise SourcePolicyError(f"a source URL from the dashboard must start with one of XFERLAB_SOURCE_URLS "
                                    f"(now: {' '.join(settings.source_urls) or 'none'}): the worker runs the "
                                    "tree's code as root")
    else:
        path = location
    real = Path(os.path.realpath(path))
    dirs = [Path(os.path.realpath(d)) for d in settings.source_dirs]
    if not _under(real, dirs):
        raise SourcePolicyError("a source checkout from the dashboard must lie in one of XFERLAB_SOURCE_DIRS "
                                f"(now: {':'.join(str(d) for d in dirs) or 'none'}): the worker runs the "
                                "tree's code as root")
