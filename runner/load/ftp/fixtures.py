"""Fixture files for the transfer workloads.

* Server-side files (what RETR downloads): named :func:`server_name` (``xferlab-<size>.bin``)
  in the user's home. When the backend knows the home as a local path
  (``Target.root``), they are written there directly; otherwise they are uploaded by
  STOR during an untimed setup step (see :func:`ensure_server_file`); a cell places the
  measured phase's file before it reads the server's CPU counters
  (:func:`place_phase_fixture`), so the upload is not charged to the phase.
* Client-side source files (what STOR uploads, via ``os.sendfile``): in the cache
  directory ``platformdirs.user_cache_dir("xferlab")/fixtures`` (or
  ``$XFERLAB_CACHE_DIR/fixtures``), created once and reused when the size matches.

Content is one random 1 MiB block repeated (incompressible to the block size; fast to
write: about disk speed).
"""
from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path

from runner.catalogue.workloads import WORKLOADS, WorkloadParams
from runner.config import get_settings
from runner.load.ftp.session import FTPError, FTPSession
from runner.load.target import Target

BLOCK = 1 << 20
#: While a fixture is written, a progress line every this many bytes (besides the first).
PROGRESS_EVERY = 256 * BLOCK
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
    """Client-side fixture directory: ``Settings.cache_dir / "fixtures"`` (``XFERLAB_CACHE_DIR``,
    default ``platformdirs.user_cache_dir("xferlab")``). Created if missing."""
    d = get_settings().cache_dir / "fixtures"
    d.mkdir(parents=True, exist_ok=True)
    return d


class FixtureSpaceError(OSError):
    """Not enough free space for a fixture file: the message names the path, the bytes
    needed and the bytes free (``errno.ENOSPC``). Raised before anything is written."""


def check_free_space(path: Path, need: int) -> None:
    """Raise FixtureSpaceError unless the file system holding ``path`` (its folder) has
    ``need`` bytes free for an unprivileged writer (``statvfs``: ``f_bavail * f_frsize``),
    plus a margin of 1% of the file system or 64 MiB, whichever is smaller, so a fixture
    does not fill the disk the server writes to.

    Args:
        path: the file to be written (its parent folder must exist).
        need: bytes to write.
    """
    st = os.statvfs(Path(path).parent)
    free = st.f_bavail * st.f_frsize
    margin = min(st.f_blocks * st.f_frsize // 100, 64 * BLOCK)
    if need + margin > free:
        raise FixtureSpaceError(
            errno.ENOSPC,
            f"fixture {path}: needs {need} bytes ({need / BLOCK:.1f} MiB) plus a margin of "
            f"{margin / BLOCK:.0f} MiB, but only {free} bytes ({free / BLOCK:.1f} MiB) are free there; "
            f"free space or use a smaller size")


def _mib(n: int) -> str:
    return f"{n / BLOCK:,.0f} MiB" if n >= BLOCK else f"{n:,} bytes"


def write_fixture(path: Path, size: int, progress: Callable[[str], None] | None = None) -> Path:
    """Make ``path`` a file of exactly ``size`` bytes of the repeated random block.
    Reuses an existing file of the right size (no rewrite). Checks the free space first
    (:func:`check_free_space`: the whole size, as an old file of another size is only
    replaced once the new one is complete). Written to
    a temporary name then renamed, so a crash never leaves a half file of the right
    name; on any error (ENOSPC, EFBIG, an interrupt) the temporary file is removed.

    ``progress`` (optional) gets ``making fixture 10 MiB (PATH)`` when the file is
    written (nothing when reused), then ``fixture NAME: 256/1,024 MiB`` every
    :data:`PROGRESS_EVERY` bytes of a large one.

    Returns ``path``. Raises FixtureSpaceError (too little free space) or OSError on
    I/O failure."""
    path = Path(path)
    try:
        if path.stat().st_size == size:
            return path
    except FileNotFoundError:
        pass
    check_free_space(path, size)
    if progress is not None:
        progress(f"making fixture {_mib(size)} ({path})")
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    blk = _block()
    try:
        with open(tmp, "wb") as f:  # buffered: write() writes all of it or raises OSError
            left = size
            for _ in range(size // BLOCK + 1):  # bounded: one write per block
                if left <= 0:
                    break
                k = min(left, BLOCK)
                f.write(blk[:k] if k < BLOCK else blk)
                left -= k
                if progress is not None and left > 0 and (size - left) % PROGRESS_EVERY == 0:
                    progress(f"fixture {path.name}: {_mib(size - left)}/{_mib(size)}")
        os.replace(tmp, path)
    except BaseException:
        try:
            tmp.unlink()
        except FileNotFoundError:
            pass
        raise
    return path


def client_source(size: int, progress: Callable[[str], None] | None = None) -> Path:
    """Local source file of ``size`` bytes for STOR, in :func:`cache_dir`, created once
    (``progress``: as :func:`write_fixture`)."""
    return write_fixture(cache_dir() / f"src-{size}.bin", size, progress)


async def ensure_server_file(session: FTPSession | None, root: Path | None, size: int,
                             progress: Callable[[str], None] | None = None) -> str:
    """Make sure the server has the RETR fixture of ``size`` bytes; return its name
    (relative to the user's home).

    With ``root`` (the home as a local path) the file is written there directly and
    ``session`` may be None. Without it, ``session`` (logged in, ``TYPE I``) checks
    ``SIZE`` and uploads the client-side source file by STOR when missing or of
    another size. Untimed setup; raises FTPError / OSError on failure. ``progress``
    (optional) hears about a file being written (:func:`write_fixture`) or uploaded
    (``uploading fixture 10 MiB by STOR``).
    """
    name = server_name(size)
    if root is not None:
        write_fixture(Path(root) / name, size, progress)
        return name
    if session is None:
        raise ValueError("ensure_server_file: need a session when the server root is unknown")
    try:
        if await session.size(name) == size:
            return name
    except FTPError as e:
        if e.kind not in ("reply_5xx", "reply_4xx", "reply_425"):
            raise
    src = client_source(size, progress)
    if progress is not None:
        progress(f"uploading fixture {_mib(size)} by STOR ({name})")
    with open(src, "rb") as f:
        await session.stor(name, f, size)
    return name


async def place_server_file(target: Target, size: int) -> str:
    """The RETR fixture of ``size`` bytes in the server's home, before a phase whose
    load comes from other processes or hosts: written directly when the home is a local
    path (``target.root``, local backend), else uploaded by STOR over one session
    (docker backend). Returns its name. Raises FTPError / OSError as
    :func:`ensure_server_file`."""
    if target.root is not None:
        return await ensure_server_file(None, target.root, size)
    session = FTPSession(target.host, target.port, op_timeout=120, tls=target.tls)
    try:
        await session.connect()
        await session.login(target.user, target.password)
        await session.type_binary()
        return await ensure_server_file(session, None, size)
    finally:
        session.close()


async def place_http_fixture(target: Target, size: int,
                             progress: Callable[[str], None] | None = None) -> tuple[str, str | None]:
    """The HTTP download fixture of ``size`` bytes (the RETR fixture's name, served as
    ``GET /<name>``) in the server's home, before an ``http_download`` phase: written
    directly when the home is a local path (``target.root``), else uploaded by STOR when
    the server has an FTP listener (tpd in a container: its FTP and HTTP sides share the
    home). Returns ``(name, note)``: the note (a sentence) says the file was expected in
    place because neither way exists (an HTTP-only server without a local home) or the
    STOR failed (its reason; the phase's GETs then show whether the file is there), else
    None. Raises OSError (incl. FixtureSpaceError) when it cannot be written into
    ``target.root``."""
    name = server_name(size)
    if target.root is not None:
        write_fixture(Path(target.root) / name, size, progress)
        return name, None
    if target.speaks_ftp:
        try:
            await place_server_file(target, size)
            return name, None
        except (FTPError, OSError) as e:  # the GETs will say whether it is there (404: non-2xx)
            return name, f"fixture {name}: not uploaded by STOR ({e}); expected in place on the server"
    return name, f"fixture {name}: expected in place on the server (no local root, no FTP listener)"


def place_phase_fixture(workload: str, target: Target, params: WorkloadParams) -> None:
    """Place the file that a ``workload`` phase with ``params`` downloads
    (runner.catalogue.workloads.WorkloadInfo.fixture_size) before the phase, from the
    calling thread (in ``target.netns`` when set): an FTP workload's by
    :func:`place_server_file`, an HTTP one's by :func:`place_http_fixture` (written into
    a local home, or uploaded by STOR when the server speaks FTP; otherwise nothing is
    done and the phase's own note says so). No-op for a workload without a fixture.

    Why before: without a local home the file is uploaded by STOR, and a server's STOR
    costs 0.5-0.75 s of its CPU per GiB (docs/methodology.md, "What server CPU
    counts"), so an upload inside the measured window is charged to the download phase.

    Raises FTPError / OSError as :func:`place_server_file` (FTP workloads only: an HTTP
    fixture that cannot be placed is left to the phase, which notes it).
    """
    from runner.load import loop as event_loop

    info = WORKLOADS[workload]
    size = info.fixture_size(params)
    if size is None:
        return
    if info.protocol == "ftp":
        event_loop.run_at(target.netns, lambda: place_server_file(target, size))
    else:
        event_loop.run_at(target.netns, lambda: place_http_fixture(target, size))
