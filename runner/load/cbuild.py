"""Building the lab's small C helpers on first use (clientspawn of the real-client drivers,
netlimit of the self-test): the system C compiler (``cc``, else ``gcc``, ``clang``) into
``<cache_dir>/<name>/<name>-<hash>`` (``Settings.cache_dir``), keyed by the SHA-256 of the
source, the compiler's path and the flags, so an edited source is rebuilt."""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from runner.config import get_settings

CFLAGS = ("-O2", "-Wall", "-Wextra", "-std=gnu11")
COMPILERS = ("cc", "gcc", "clang")


class CBuildError(RuntimeError):
    """A C helper could not be built: no compiler, no source, or a compile error (the
    message says which, with the compiler's output)."""


def find_compiler() -> str:
    """Path of the first of ``cc``, ``gcc``, ``clang`` on PATH.

    Raises CBuildError when none is found."""
    for name in COMPILERS:
        path = shutil.which(name)
        if path:
            return path
    raise CBuildError(f"no C compiler on PATH (tried {', '.join(COMPILERS)}): xferlab's C helpers are built on "
                        "first use; install one (Debian: build-essential)")


def build(source: Path, name: str, build_dir: Path | None = None, compiler: str | None = None) -> Path:
    """The binary of the C program ``source``, compiled once per source/compiler/flags hash.

    ``build_dir`` defaults to ``<cache_dir>/<name>``; ``compiler`` to :func:`find_compiler`;
    ``name`` names the binary (``<name>-<hash>``; runner.load.tools.spawn builds its
    ``clientspawn`` with it).
    Concurrent builds are safe (compiled to a temporary name, then renamed). Raises
    CBuildError when there is no compiler, the source is missing or it does not compile
    (with the compiler's output)."""
    if not source.is_file():
        raise CBuildError(f"{name} source not found: {source}")
    cc = compiler or find_compiler()
    digest = hashlib.sha256(source.read_bytes() + "\0".join((cc, *CFLAGS)).encode()).hexdigest()[:16]
    out_dir = build_dir if build_dir is not None else get_settings().cache_dir / name
    binary = out_dir / f"{name}-{digest}"
    if binary.is_file() and os.access(binary, os.X_OK):
        return binary
    out_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{name}-", dir=out_dir)
    os.close(fd)
    try:
        r = subprocess.run([cc, *CFLAGS, "-o", tmp, str(source)], capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            raise CBuildError(f"compiling {source} with {cc} failed (exit {r.returncode}):\n"
                                f"{(r.stderr or r.stdout)[-2000:]}")
        os.replace(tmp, binary)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return binary
