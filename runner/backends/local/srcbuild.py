"""Servers built from a source tree for the local backend: a Python server pip-installed
from the exported tree into a venv of its own, or a C server built with ``make``; both
kept under the build cache key of the commit (runner.backends.source)::

    <data_dir>/builds/<key>/tree/                  the exported tree
    <data_dir>/builds/<key>/venv-<package>/        pip install <tree> (xferlab-venv.json once ready)
    <data_dir>/builds/<key>/tpd/tpd                make -C <tree>/servers/tpd OUT=...

A build that fails is :class:`runner.backends.base.ServerFailed` with the builder's last
lines (the cell is failed, never skipped).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from filelock import FileLock

from runner.backends.base import ServerFailed
from runner.backends.local.venvs import MARKER, VenvInfo, read_marker
from runner.backends.source import ResolvedSource, export, resolve
from runner.spec.request import ServerRequest

#: Seconds a venv creation, a pip install or a make may take.
BUILD_TIMEOUT = 900

#: Builds that failed in this process, by (what, cache key): the same ServerFailed again
#: for the next cell instead of the same failing build once per cell (a new process, e.g.
#: the next campaign, tries again).
_FAILED: dict[tuple[str, str], ServerFailed] = {}


def resolved_tree(req: ServerRequest) -> tuple[ResolvedSource, Path]:
    """``req``'s source resolved and exported: (the commit, the tree's directory).
    Raises ServerFailed (runner.backends.source) when it does not resolve."""
    assert req.source is not None
    src = resolve(req.source, req.ref)
    return src, export(src)


def _tail(text: str, n: int = 15) -> str:
    return "\n".join(text.strip().splitlines()[-n:])


def run_builder(what: str, argv: list[str], *, timeout: float = BUILD_TIMEOUT, env: dict[str, str] | None = None,
                merged: bool = False, tail: Callable[[str], str] = _tail, **kw) -> str:
    """Run one build step ``argv`` (no shell; ``kw``: more subprocess.run arguments such as
    ``cwd``) with this process's environment plus pip's quiet settings and ``env``, for at
    most ``timeout`` s, and return its standard output (with ``merged``: standard output
    and error interleaved as they came, which is then also what ``tail`` is given).

    Raises:
        ServerFailed: ``"<what> timed out after N s"``, ``"<what>: cannot run <argv0>: ..."``,
            or ``"<what> failed (exit N):"`` and ``tail`` of its output (default: the last 15 lines).
    """
    full_env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1", **(env or {})}
    try:
        r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT if merged else subprocess.PIPE,
                           text=True, errors="replace", timeout=timeout, env=full_env, **kw)
    except subprocess.TimeoutExpired as e:
        raise ServerFailed(f"{what} timed out after {timeout:.0f} s") from e
    except OSError as e:
        raise ServerFailed(f"{what}: cannot run {argv[0]}: {e}") from e
    if r.returncode != 0:
        raise ServerFailed(f"{what} failed (exit {r.returncode}):\n{tail(r.stdout + (r.stderr or ''))}")
    return r.stdout


def source_venv(package: str, req: ServerRequest, progress: Callable[[str], None]) -> VenvInfo:
    """A venv with ``package`` pip-installed (not editable) from ``req``'s source at its
    commit, made once per commit and dirty hash. ``VenvInfo.version`` is the package's
    version with the commit as a local label, e.g. ``2.2.0+g1a2b3c4d5e6f`` (``+dirty``
    appended for a checkout with changes), ``VenvInfo.source`` the build record's
    ``source`` entry.

    Raises:
        ServerFailed: the source does not resolve, venv or pip failed (pip's last lines),
            or the installed package has no readable version.
    """
    src, tree = resolved_tree(req)
    path = src.build_root / f"venv-{package}"

    def ready(created: bool) -> VenvInfo | None:
        m = read_marker(path)
        if not m:
            return None
        return VenvInfo(path, path / "bin" / "python", package, f"{m['version']}+g{src.short}", created,
                        source=src.info())

    got = ready(False)
    if got:
        return got
    if (package, src.key) in _FAILED:
        raise _FAILED[(package, src.key)]
    try:
        return _build_venv(package, src, tree, path, ready, progress)
    except ServerFailed as e:
        _FAILED[(package, src.key)] = e
        raise


def _build_venv(package: str, src: ResolvedSource, tree: Path, path: Path,
                ready: Callable[[bool], VenvInfo | None], progress: Callable[[str], None]) -> VenvInfo:
    """Make the venv of :func:`source_venv` under its file lock."""
    with FileLock(path.parent / f"{path.name}.lock", timeout=BUILD_TIMEOUT):
        got = ready(False)
        if got:
            return got
        shutil.rmtree(path, ignore_errors=True)
        progress(f"building {package} from {src.location} at {src.short} into {path}")
        base = getattr(sys, "_base_executable", None) or sys.executable
        what = f"{package} at {src.short}"
        run_builder(f"{what}: python -m venv", [base, "-m", "venv", str(path)])
        py = str(path / "bin" / "python")
        run_builder(f"{what}: pip install {tree}", [py, "-m", "pip", "install", "-q", str(tree)])
        ver = run_builder(f"{what}: reading the installed version",
                   [py, "-c", f"import importlib.metadata as m; print(m.version({package!r}))"]).strip()
        (path / MARKER).write_text(json.dumps({"package": package, "requested": src.commit, "version": ver,
                                               "python": base, "created": time.time()}, indent=1))
        made = ready(True)
        assert made is not None
        return made


def source_tpd(req: ServerRequest, progress: Callable[[str], None]) -> tuple[Path, ResolvedSource]:
    """tpd built with ``make -C <tree>/servers/tpd OUT=<build_root>/tpd`` from ``req``'s
    source (a checkout of this repository or a fork), once per commit and dirty hash.
    Returns (the binary, the resolved source).

    Raises:
        ServerFailed: the source does not resolve, has no ``servers/tpd/Makefile``, or make
            failed (its last lines).
    """
    src, tree = resolved_tree(req)
    tpd_src = tree / "servers" / "tpd"
    if not (tpd_src / "Makefile").is_file():
        raise ServerFailed(f"tpd at {src.short}: {src.location} has no servers/tpd/Makefile at that commit")
    out = src.build_root / "tpd"
    binary = out / "tpd"
    if binary.is_file() and (out / ".built").is_file():
        return binary, src
    if ("tpd", src.key) in _FAILED:
        raise _FAILED[("tpd", src.key)]
    out.mkdir(parents=True, exist_ok=True)
    with FileLock(out.parent / "tpd.lock", timeout=BUILD_TIMEOUT):
        if not (binary.is_file() and (out / ".built").is_file()):
            progress(f"building tpd from {src.location} at {src.short} into {out}")
            try:
                run_builder(f"tpd at {src.short}: make -C {tpd_src} OUT={out}",
                            ["make", "-C", str(tpd_src), f"OUT={out}"])
                if not binary.is_file():
                    raise ServerFailed(f"tpd at {src.short}: make succeeded but made no {binary}")
            except ServerFailed as e:
                _FAILED[("tpd", src.key)] = e
                raise
            (out / ".built").write_text(str(time.time()))
    return binary, src
