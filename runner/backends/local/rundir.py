"""The per-start scratch folder of a local server and the filesystem checks on it."""
from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import psutil

from runner.backends.base import ServerSkipped


@dataclass
class RunDir:
    """Per-start scratch folder: ``path``, ``home`` (FTP root), ``logs``; ``storage``
    (``disk`` or ``tmpfs``) and ``fs_type`` (the filesystem it is on, e.g. ``ext4``)."""

    path: Path
    home: Path
    logs: Path
    storage: str = "disk"
    fs_type: str = ""

    @classmethod
    def create(cls, name: str, storage: str = "disk") -> RunDir:
        """Make the folder on ``storage`` (``XFERLAB_RUN_DIR``, default the system
        temporary folder; for ``tmpfs`` ``XFERLAB_TMPFS_DIR``, default ``/dev/shm``).

        Raises:
            ServerSkipped: the configured folder is missing, or is not on the kind of
                filesystem asked for (``disk`` on a tmpfs, ``tmpfs`` on a disk).
        """
        from runner.config import get_settings

        settings = get_settings()
        base = settings.tmpfs_dir if storage == "tmpfs" else (settings.run_dir or Path(tempfile.gettempdir()))
        var = "XFERLAB_TMPFS_DIR" if storage == "tmpfs" else "XFERLAB_RUN_DIR"
        if not base.is_dir():
            raise ServerSkipped(f"storage={storage}: {base} is not a folder (set {var})")
        fs = filesystem_type(base)
        in_memory = fs in ("tmpfs", "ramfs")
        if (storage == "tmpfs") != in_memory:
            raise ServerSkipped(f"storage={storage}: {base} is on {fs or 'an unknown filesystem'}; "
                                f"set {var} to a folder on {'a tmpfs' if storage == 'tmpfs' else 'a disk'}")
        p = Path(tempfile.mkdtemp(prefix=f"xferlab-{name}-", dir=base))
        os.chmod(p, 0o755)  # servers that switch uid must traverse it
        (p / "home").mkdir()
        (p / "logs").mkdir()
        return cls(p, p / "home", p / "logs", storage, fs)


def filesystem_type(path: Path) -> str:
    """Filesystem type of the mount holding ``path`` (``"ext4"``, ``"tmpfs"``...),
    from the longest matching mount point in psutil's partition list; ``""`` if none."""
    real = os.path.realpath(path)
    best, fs = "", ""
    for part in psutil.disk_partitions(all=True):
        mp = part.mountpoint
        if (real == mp or real.startswith(mp.rstrip("/") + "/")) and len(mp) >= len(best):
            best, fs = mp, part.fstype
    return fs


def log_tail(logs: Path, max_bytes: int = 3000) -> str:
    """The last ``max_bytes`` of every file in ``logs``, each under a ``--- name (tail) ---``
    header; ``"(server logs are empty)"`` when there is nothing."""
    parts = []
    for f in sorted(logs.glob("*")):
        try:
            data = f.read_bytes()[-max_bytes:].decode("utf-8", "replace").strip()
        except OSError:
            continue
        if data:
            parts.append(f"--- {f.name} (tail) ---\n{data}")
    return "\n".join(parts) if parts else "(server logs are empty)"
