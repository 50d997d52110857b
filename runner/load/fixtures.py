"""Fixture files for the transfer workloads.

* Server-side files (what RETR downloads): named :func:`server_name` (``xferlab-<size>.bin``)
  in the user's home. When the backend knows the home as a local path
  (``Target.root``), they are written there directly; otherwise they are uploaded by
  STOR during an untimed setup step (see :func:`ensure_server_file`).
* Client-side source files (what STOR uploads, via ``os.sendfile``): in the cache
  directory ``platformdirs.user_cache_dir("xferlab")/fixtures`` (or
  ``$XFERLAB_CACHE_DIR/fixtures``), created once and reused when the size matches.

Content is one random 1 MiB block repeated (incompressible to the block size; fast to
write: about disk speed).
"""
from __future__ import annotations

import os
from pathlib import Path

from runner.load.ftp import FTPError, FTPSession

BLOCK = 1 << 20
_block_cache: bytes | None = None


def _block() -> bytes:
    global _block_cache
    if _block_cache is None:
        _block_cache = os.urandom(BLOCK)
    return _block_cache


def server_name(size: int) -> str:
    """Server-side fixture file name for ``size`` bytes, e.g. ``xferlab-10485760.bin``."""
    return f"xferlab-{size}.bin"


def cache_dir() -> Path:
    """Client-side fixture directory: ``$XFERLAB_CACHE_DIR/fixtures`` when set, else
    ``platformdirs.user_cache_dir("xferlab")/fixtures``. Created if missing."""
    base = os.environ.get("XFERLAB_CACHE_DIR")
    if not base:
        from platformdirs import user_cache_dir
        base = user_cache_dir("xferlab")
    d = Path(base) / "fixtures"
    d.mkdir(parents=True, exist_ok=True)
    return d


def write_fixture(path: Path, size: int) -> Path:
    """Make ``path`` a file of exactly ``size`` bytes of the repeated random block.
    Reuses an existing file of the right size (no rewrite). Written to a temporary
    name then renamed, so a crash never leaves a half file of the right name.
    Returns ``path``. Raises OSError on I/O failure."""
    path = Path(path)
    try:
        if path.stat().st_size == size:
            return path
    except FileNotFoundError:
        pass
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    blk = _block()
    with open(tmp, "wb", buffering=0) as f:
        left = size
        for _ in range(size // BLOCK + 1):  # bounded: one write per block
            if left <= 0:
                break
            k = min(left, BLOCK)
            f.write(blk[:k] if k < BLOCK else blk)
            left -= k
    os.replace(tmp, path)
    return path


def client_source(size: int) -> Path:
    """Local source file of ``size`` bytes for STOR, in :func:`cache_dir`, created once."""
    return write_fixture(cache_dir() / f"src-{size}.bin", size)


async def ensure_server_file(session: FTPSession | None, root: Path | None, size: int) -> str:
    """Make sure the server has the RETR fixture of ``size`` bytes; return its name
    (relative to the user's home).

    With ``root`` (the home as a local path) the file is written there directly and
    ``session`` may be None. Without it, ``session`` (logged in, ``TYPE I``) checks
    ``SIZE`` and uploads the client-side source file by STOR when missing or of
    another size. Untimed setup; raises FTPError / OSError on failure.
    """
    name = server_name(size)
    if root is not None:
        write_fixture(Path(root) / name, size)
        return name
    if session is None:
        raise ValueError("ensure_server_file: need a session when the server root is unknown")
    try:
        if await session.size(name) == size:
            return name
    except FTPError as e:
        if e.kind not in ("reply_5xx", "reply_4xx"):
            raise
    src = client_source(size)
    with open(src, "rb") as f:
        await session.stor(name, f, size)
    return name
