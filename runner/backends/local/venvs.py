"""Per-version Python virtual environments for Python FTP servers (pyftpdlib, Twisted).

Layout (one venv per package and version, created once and reused)::

    <user_cache_dir("xferlab")>/venvs/<package>-<version>/      the venv
    <user_cache_dir("xferlab")>/venvs/<package>-<version>/xferlab-venv.json
        {"package": ..., "requested": ..., "version": <resolved>, "python": ..., "created": <epoch s>}
    <user_cache_dir("xferlab")>/venvs/<package>-<version>.lock   fcntl lock guarding creation

``version=None`` means "latest at creation time": the venv is ``<package>-latest`` and
the version pip resolved is recorded in ``xferlab-venv.json`` (it is not upgraded later;
delete the folder to refresh it).

A venv is built in a temporary sibling folder and renamed into place only when pip
succeeded, so a half-built venv is never used. Pip uses its default index (whatever the
machine's pip configuration says).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from filelock import FileLock

from runner.backends.base import ServerSkipped

Progress = Callable[[str], None]

MARKER = "xferlab-venv.json"
# PEP 440-ish: digits, dots, letters for pre/post/dev tags. Anything else is refused
# before pip sees it (it is interpolated into a requirement string).
_VERSION_RE = re.compile(r"^[0-9]+(\.[0-9]+)*([._-]?[A-Za-z0-9]+)*$")


def cache_dir() -> Path:
    """xferlab's cache root: ``Settings.cache_dir`` (``XFERLAB_CACHE_DIR`` if set, else
    platformdirs ``user_cache_dir("xferlab")``, ``~/.cache/xferlab`` on Linux)."""
    from runner.config import get_settings

    return get_settings().cache_dir


@dataclass(frozen=True)
class VenvInfo:
    """A ready venv.

    Attributes:
        path: venv folder.
        python: the venv's interpreter (``<path>/bin/python``).
        package: distribution installed (e.g. ``"pyftpdlib"``).
        version: resolved installed version (e.g. ``"2.2.0"``).
        created: True when this call built it, False when it came from the cache.
        source: for a venv built from a source tree (runner.backends.local.srcbuild), the
            build record's ``source`` entry (runner.backends.source.ResolvedSource.info);
            None for a release from the package index.
    """

    path: Path
    python: Path
    package: str
    version: str
    created: bool
    source: dict[str, Any] | None = None


def _needs_asyncore_shim(package: str, version: str | None) -> bool:
    """pyftpdlib < 2.0 imports asyncore/asynchat, removed from Python 3.12: install the
    PyPI back-ports ``pyasyncore`` and ``pyasynchat`` when this interpreter lacks them."""
    if package != "pyftpdlib" or sys.version_info < (3, 12):
        return False
    if version is None:
        return False  # latest is >= 2.0, which vendors its own loop
    try:
        major = int(version.split(".")[0])
    except ValueError:
        return True
    return major < 2


def _run(cmd: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1",
                               "PIP_NO_INPUT": "1"})


def _tail(text: str, n: int = 12) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return "\n".join(lines[-n:])


def read_marker(path: Path) -> dict | None:
    """The ``xferlab-venv.json`` of venv ``path`` as a dict, or None if absent/unreadable."""
    try:
        return json.loads((path / MARKER).read_text())
    except (OSError, ValueError):
        return None


def ensure_venv(package: str, version: str | None, *, progress: Progress | None = None,
                extra: list[str] | None = None, pip_timeout: float = 600.0) -> VenvInfo:
    """Return a venv with ``package==version`` installed, building it if not cached.

    Args:
        package: PyPI distribution name (``"pyftpdlib"``, ``"twisted"``).
        version: exact version, or None for the latest (venv ``<package>-latest``).
        progress: called with one-line human messages (e.g. "creating venv ...").
        extra: additional requirements to install alongside.
        pip_timeout: bound on each pip/venv command, seconds.

    Raises:
        ServerSkipped: invalid version string, or pip failed (message has pip's output
            tail, e.g. "No matching distribution found for pyftpdlib==0.0.0").
        TimeoutError: another process held the creation lock too long.
    """
    say = progress or (lambda _m: None)
    if version is not None and not _VERSION_RE.match(version):
        raise ServerSkipped(f"{package}: invalid version string {version!r}")
    tag = version or "latest"
    root = cache_dir() / "venvs"
    path = root / f"{package}-{tag}"
    marker = read_marker(path)
    if marker:
        return VenvInfo(path, path / "bin" / "python", package, marker["version"], False)
    with FileLock(root / f"{package}-{tag}.lock"):
        marker = read_marker(path)  # someone else built it while we waited
        if marker:
            return VenvInfo(path, path / "bin" / "python", package, marker["version"], False)
        tmp = root / f".{package}-{tag}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        if path.exists():  # unmarked leftover: incomplete, rebuild
            shutil.rmtree(path, ignore_errors=True)
        try:
            say(f"creating venv for {package} {tag} in {path} (one time; cached)")
            base_python = getattr(sys, "_base_executable", None) or sys.executable
            r = _run([base_python, "-m", "venv", str(tmp)], pip_timeout)
            if r.returncode != 0:
                raise ServerSkipped(f"{package} {tag}: python -m venv failed:\n{_tail(r.stderr + r.stdout)}")
            reqs = [f"{package}=={version}" if version else package]
            if _needs_asyncore_shim(package, version):
                reqs += ["pyasyncore", "pyasynchat"]
            reqs += list(extra or [])
            say(f"pip install {' '.join(reqs)}")
            r = _run([str(tmp / "bin" / "python"), "-m", "pip", "install", "-q", *reqs], pip_timeout)
            if r.returncode != 0:
                raise ServerSkipped(f"{package} {tag}: pip install {' '.join(reqs)} failed:\n"
                                    f"{_tail(r.stderr + r.stdout)}")
            r = _run([str(tmp / "bin" / "python"), "-c",
                      f"import importlib.metadata as m; print(m.version({package!r}))"], 60)
            if r.returncode != 0:
                raise ServerSkipped(f"{package} {tag}: installed but version unreadable:\n{_tail(r.stderr)}")
            resolved = r.stdout.strip()
            (tmp / MARKER).write_text(json.dumps({
                "package": package, "requested": version, "version": resolved,
                "python": base_python, "created": time.time()}, indent=1))
            # venv scripts embed the folder path: rebuild would be needed after a rename
            # for console scripts, but we only ever run ``bin/python`` (a symlink), which
            # locates the venv through pyvenv.cfg next to it, so the rename is safe.
            os.replace(tmp, path)
            say(f"venv ready: {package} {resolved}")
            return VenvInfo(path, path / "bin" / "python", package, resolved, True)
        except subprocess.TimeoutExpired as e:
            raise ServerSkipped(f"{package} {tag}: venv creation timed out after {e.timeout:.0f} s") from e
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
