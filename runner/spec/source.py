"""Where a server's code comes from when it is built from source: a spec's ``source`` (a
local git checkout or a git URL) and ``ref`` (a commit, branch or tag), typed and
checked before anything runs::

    servers:
      - {name: pyftpdlib, source: /home/me/pyftpdlib, ref: 7f3c2a1}
      - {name: pyftpdlib, source: /home/me/pyftpdlib}            # the checkout as it is, edits included
      - {name: tpd, source: https://github.com/me/xferlab.git, ref: v0.3}   # servers/tpd of that tree
      - {name: proftpd, source: /home/me/proftpd, ref: my-patch}    # a proftpd tree, built by its recipe

Both values later reach ``git``'s argument vector (runner.backends.source), never a
shell: they are allow-listed here (:func:`check_source`, :func:`check_ref`) and passed
after ``--end-of-options`` there.
"""
from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlsplit

#: Servers that can be built from a source tree (runner.backends.local.srcbuild; the C
#: FTP servers vsftpd, proftpd, pureftpd by runner.backends.local.csrcbuild's recipes, on
#: the local backend only).
SOURCE_SERVERS: tuple[str, ...] = ("pyftpdlib", "twisted", "tpd", "go-http", "netty", "vsftpd", "proftpd", "pureftpd")

#: URL schemes a git source may use.
URL_SCHEMES: tuple[str, ...] = ("https", "ssh", "file")

#: A ref as ``git rev-parse`` takes it: a hex SHA, a branch or a tag name, optionally with
#: ``~N`` or ``^N`` suffixes. Starts with a letter or digit (never ``-``: it cannot be read
#: as an option); no ``..`` (a range), no ``@{`` (reflog syntax), no ``:`` (a path in a tree),
#: no whitespace, no shell or glob metacharacter; at most 200 characters.
REF_RE = re.compile(r"^(?!.*\.\.)(?!.*//)(?!.*\.lock(?:/|$))[A-Za-z0-9][A-Za-z0-9._/+-]{0,199}(?:[~^][0-9]{0,4})*$")
#: What a git URL may hold after its scheme: no whitespace, quotes, backslashes or control characters.
_URL_CHARS = re.compile(r"^[A-Za-z0-9._~:/?#@!$&()*+,;=%-]+$")
#: Longest source location accepted.
MAX_LOCATION = 1000

#: The ``server_version`` of the cells of a server built from source: one series across
#: commits (history tells the commits apart by the build row's ``info["source"]``).
SOURCE_SERIES_VERSION = "git"


def is_url(location: str) -> bool:
    """True when ``location`` is written as a URL (``scheme://...``)."""
    return "://" in location


def check_source(location: str) -> str:
    """``location`` checked: a git URL with a scheme of :data:`URL_SCHEMES` (``https`` and
    ``ssh`` need a host), or a path to an existing directory (returned absolute and
    resolved). Raises ValueError naming what is wrong."""
    if not location or len(location) > MAX_LOCATION:
        raise ValueError(f"want a directory or a git URL of 1 to {MAX_LOCATION} characters")
    if location.startswith("-"):
        raise ValueError(f"a source cannot start with '-': {location[:80]!r}")
    if is_url(location):
        parts = urlsplit(location)
        if parts.scheme not in URL_SCHEMES:
            raise ValueError(f"URL scheme {parts.scheme!r} is not allowed (want one of {', '.join(URL_SCHEMES)})")
        if not _URL_CHARS.fullmatch(location):
            raise ValueError(f"URL has characters a git URL does not need: {location[:80]!r}")
        if parts.scheme != "file" and not parts.hostname:
            raise ValueError(f"{parts.scheme} URL without a host: {location[:80]!r}")
        if parts.scheme == "file" and not Path(parts.path).is_dir():
            raise ValueError(f"file URL names no directory: {parts.path[:200]!r}")
        return location
    if any(ord(c) < 32 for c in location):
        raise ValueError("a source path cannot hold control characters")
    path = Path(location).expanduser().resolve()
    if not path.is_dir():
        raise ValueError(f"not a directory: {str(path)[:200]!r} (want a git checkout or a git URL "
                         f"with scheme {', '.join(URL_SCHEMES)})")
    return str(path)


def check_ref(ref: str) -> str:
    """``ref`` checked against :data:`REF_RE` (a SHA, branch or tag name). Raises ValueError
    naming the value."""
    if not REF_RE.fullmatch(ref):
        raise ValueError(f"not a git ref xferlab accepts: {ref[:80]!r} (want a SHA, a branch or a tag: letters, "
                         "digits, '.', '_', '/', '+', '-', optionally ~N or ^N; no '..', no leading '-')")
    return ref


def source_problem(name: str | None, source: str | None, ref: str | None, version: str | None,
                   external: bool) -> str | None:
    """Why a server entry's ``source``/``ref`` cannot be used together with its other
    fields, or None: a ``ref`` needs a ``source``; a source build has no ``version`` (the
    commit is its identity) and is not ``external``; only :data:`SOURCE_SERVERS` build
    from source; a URL needs a ``ref`` (there is no working tree to take)."""
    if source is None:
        return "'ref' needs a 'source' (a git checkout or URL)" if ref is not None else None
    if name is not None and name not in SOURCE_SERVERS:
        return f"{name} cannot be built from source here (servers that can: {', '.join(SOURCE_SERVERS)})"
    if version is not None:
        return "a server built from source has no 'version' (its commit names it); remove 'version'"
    if external:
        return "an external server is not built from source"
    if ref is None and is_url(source):
        return "a git URL needs a 'ref' (a commit, branch or tag)"
    return None
