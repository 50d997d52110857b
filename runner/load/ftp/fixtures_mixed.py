"""Fixtures of the ``mixed`` workload (runner.load.ftp.mixed), made once and checked before
each phase, like the single-file fixtures of :mod:`runner.load.ftp.fixtures`:

* the **size set**: one RETR fixture per distinct size of the distribution
  (runner.catalogue.mixed.SizeDist.fixture_set), the same ``xferlab-<size>.bin`` files as
  the other workloads (reused when of the right size);
* the **storm directory** of a ``storm`` distribution: ``xferlab-storm-<count>x<size>/`` with
  ``f<i>.bin`` for i in 0..count-1, each ``size`` bytes;
* the **listing directory** of LIST/MLSD/CWD: ``xferlab-dir-<n>/`` with exactly the ``n``
  empty files ``e<i>`` (i in 0..n-1).

With the home as a local path (``Target.root``) they are written and checked there (a
file of the wrong size is rewritten, a missing one made, a listing directory must hold
exactly its n names); without it they are made over FTP on a logged-in session (SIZE of
every size-set file; NLST of a directory, then STOR of the missing names). Untimed.
"""
from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from runner.catalogue.mixed import SizeDist
from runner.load.ftp.fixtures import _block, check_free_space, client_source, ensure_server_file, server_name
from runner.load.ftp.listing import listing_names
from runner.load.ftp.session import FTPSession


@dataclass(frozen=True)
class FileSet:
    """What the RETR-like operations of a phase draw from.

    Attributes:
        files: ``[(name relative to the home, size in bytes, weight)]``; a ``storm``
            distribution has one entry per file of its directory (equal weights).
        list_dir: the listing directory's name (relative to the home).
        list_entries: its entries (count).
    """

    files: list[tuple[str, int, float]]
    list_dir: str
    list_entries: int


def storm_dir(dist: SizeDist) -> str:
    """The name of a storm distribution's directory, ``xferlab-storm-10000x4096``."""
    return f"xferlab-storm-{dist.count}x{dist.size}"


def listing_dir(n: int) -> str:
    """The name of the listing directory of ``n`` entries, ``xferlab-dir-1000``."""
    return f"xferlab-dir-{n}"


def _local_dir(root: Path, name: str, names: list[str], size: int) -> None:
    """``root/name`` holds exactly ``names`` as files of ``size`` bytes (others removed)."""
    d = Path(root) / name
    d.mkdir(exist_ok=True)
    want = set(names)
    have = {e.name: e for e in os.scandir(d)}
    for extra in set(have) - want:
        os.unlink(d / extra)
    missing = [n for n in names if n not in have or not have[n].is_file() or have[n].stat().st_size != size]
    if not missing:
        return
    check_free_space(d / names[0], size * len(missing))
    blk = _block()
    data = (blk * (size // len(blk) + 1))[:size] if size > len(blk) else blk[:size]
    for n in missing:
        with open(d / n, "wb") as f:
            f.write(data)


async def _ftp_dir(session: FTPSession, name: str, names: list[str], size: int) -> None:
    """Over FTP: make directory ``name`` and STOR every name of ``names`` missing from its
    NLST (each ``size`` bytes, from the client-side source file)."""
    await session.mkd(name)
    have = set(listing_names(await session.listing("NLST", name), "NLST"))
    missing = [n for n in names if n not in have]
    if not missing:
        return
    with open(client_source(max(size, 1)), "rb") as f:
        for n in missing:
            await session.stor(f"{name}/{n}", f, size, verify_size=False)


async def ensure_file_set(session: FTPSession | None, root: Path | None, dist: SizeDist, seed: int,
                          dir_entries: int, progress: Callable[[str], None] | None = None, *,
                          files_needed: bool = True, dir_needed: bool = True) -> FileSet:
    """Make and check every fixture of a mixed phase (module docstring); return the
    :class:`FileSet`. ``session`` (logged in, ``TYPE I``) is needed when ``root`` is None.
    ``files_needed`` False (no RETR, resume, SIZE or MDTM in the mix): the size set's
    files are named but not made (STOR only draws their sizes); ``dir_needed`` False (no
    LIST, MLSD or CWD): the listing directory is named but not made.
    Raises FTPError / OSError (FixtureSpaceError) on failure."""
    if root is None and session is None:
        raise ValueError("ensure_file_set: need a session when the server root is unknown")
    files: list[tuple[str, int, float]] = []
    if dist.kind == "storm":
        d = storm_dir(dist)
        names = [f"f{i}.bin" for i in range(dist.count)]
        if progress is not None and files_needed:
            progress(f"storm directory {d}: {dist.count} files of {dist.size} bytes")
        if root is not None and files_needed:
            _local_dir(Path(root), d, names, dist.size)
        elif files_needed:
            assert session is not None
            await _ftp_dir(session, d, names, dist.size)
        files = [(f"{d}/{n}", dist.size, 1.0) for n in names]
    else:
        for size, weight in dist.fixture_set(seed):
            name = (await ensure_server_file(session if root is None else None, root, size, progress)
                    if files_needed else server_name(size))
            files.append((name, size, weight))
    ld = listing_dir(dir_entries)
    entries = [f"e{i}" for i in range(dir_entries)]
    if not dir_needed:
        return FileSet(files, ld, dir_entries)
    if progress is not None:
        progress(f"listing directory {ld}: {dir_entries} entries")
    if root is not None:
        _local_dir(Path(root), ld, entries, 0)
    else:
        assert session is not None
        await _ftp_dir(session, ld, entries, 0)
    return FileSet(files, ld, dir_entries)
