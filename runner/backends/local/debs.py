"""Finding vsftpd / proftpd / pure-ftpd binaries, side by side despite Debian conflicts.

Debian's ``vsftpd``, ``proftpd-core`` and ``pure-ftpd`` packages each conflict with the
virtual package ``ftp-server``, so only one can be *installed* on a host. xferlab does
not need them installed, only their binaries: :func:`fetch_debian_server` runs
``apt-get download <pkg>`` and ``dpkg -x`` into ``<cache>/debs/<name>/root`` (nothing
is registered with dpkg, no maintainer script runs, no service starts, no conflict).
The extracted binaries link against ordinary shared libraries (libwrap0, libmemcached11,
...) which *can* be installed normally; :func:`missing_libs` reports any that are absent.

Lookup order (:func:`find_server_binary`): ``PATH`` and ``/usr/sbin`` first (an installed
package wins), then the cache. Cache layout::

    <cache>/debs/<name>/root/usr/sbin/<binary>      extracted package tree(s)
    <cache>/debs/<name>/info.json                   {"packages": {pkg: version}, "fetched": epoch}
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock

from runner.backends.base import ServerSkipped
from runner.backends.local.venvs import cache_dir
from runner.catalogue.servers import SERVERS, ServerInfo

#: The Debian-packaged servers (runner.catalogue.servers.ServerInfo with ``debian`` packages):
#: their ``binary``, ``debian`` packages (the first holds the binary) and ``helpers``.
DEB_SERVERS: dict[str, ServerInfo] = {n: s for n, s in SERVERS.items() if s.debian}


def _binary(spec: ServerInfo) -> str:
    """The executable of a Debian-packaged server (its record's ``binary``, else its name)."""
    return spec.binary or spec.name


@dataclass(frozen=True)
class FoundBinary:
    """A located server binary.

    Attributes:
        path: absolute path of the executable.
        obtained: ``"system"`` (PATH or /usr/sbin) or ``"debian-extract"`` (xferlab cache).
        root: extraction root for cached binaries (module dirs are relative to it), else None.
        package_version: Debian package version when known (from dpkg-query or info.json).
    """

    path: Path
    obtained: str
    root: Path | None
    package_version: str | None


def debs_dir(name: str) -> Path:
    """``<cache>/debs/<name>``: where :func:`fetch_debian_server` extracts ``name``."""
    return cache_dir() / "debs" / name


def _which(binary: str) -> Path | None:
    p = shutil.which(binary)
    if p:
        return Path(p)
    for d in ("/usr/sbin", "/usr/bin", "/usr/local/sbin"):
        c = Path(d) / binary
        if c.is_file() and os.access(c, os.X_OK):
            return c
    return None


def _dpkg_version(pkg: str) -> str | None:
    try:
        r = subprocess.run(["dpkg-query", "-W", "-f", "${Status}|${Version}", pkg],
                           capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if r.returncode == 0 and r.stdout.startswith("install ok installed|"):
        return r.stdout.split("|", 1)[1]
    return None


def find_tool(name: str, tool: str) -> Path | None:
    """Path of helper executable ``tool`` (e.g. ``pure-pw``) for server ``name``:
    system first, then the extraction cache; None if absent."""
    p = _which(tool)
    if p:
        return p
    root = debs_dir(name) / "root"
    for d in ("usr/sbin", "usr/bin"):
        c = root / d / tool
        if c.is_file():
            return c
    return None


def find_server_binary(name: str) -> FoundBinary | None:
    """Locate the binary of Debian-packaged server ``name``; None when neither installed
    nor fetched. Raises KeyError for an unknown ``name``."""
    spec = DEB_SERVERS[name]
    p = _which(_binary(spec))
    if p:
        return FoundBinary(p, "system", None, _dpkg_version(spec.debian[0]))
    root = debs_dir(name) / "root"
    c = root / "usr" / "sbin" / _binary(spec)
    if c.is_file():
        ver = None
        try:
            ver = json.loads((debs_dir(name) / "info.json").read_text())["packages"].get(spec.debian[0])
        except (OSError, ValueError, KeyError):
            pass
        return FoundBinary(c, "debian-extract", root, ver)
    return None


def missing_libs(binary: Path) -> list[str]:
    """Shared libraries ``ldd binary`` reports as "not found" (e.g. ``["libwrap.so.0"]``).
    Empty list when all resolve. Raises ServerSkipped if ldd itself cannot run."""
    try:
        r = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ServerSkipped(f"cannot run ldd on {binary}: {e}") from e
    return [ln.split("=>")[0].strip() for ln in r.stdout.splitlines() if "not found" in ln]


def lib_packages(name: str) -> list[str]:
    """Debian library packages the server's packages depend on that are not installed
    (from the ``Depends`` field; ``lib*`` names only), i.e. what ``apt-get install``
    needs to make the extracted binary run."""
    spec = DEB_SERVERS[name]
    out: list[str] = []
    for pkg in spec.debian:
        try:
            r = subprocess.run(["apt-cache", "depends", pkg], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            continue
        for ln in r.stdout.splitlines():
            ln = ln.strip()
            if ln.startswith(("Depends:", "|Depends:")):
                dep = ln.split(":", 1)[1].strip()
                if dep.startswith("lib") and not dep.startswith("<") and _dpkg_version(dep) is None:
                    out.append(dep)
    return sorted(set(out))


def fetch_debian_server(name: str, *, timeout: float = 300.0) -> Path:
    """Download and extract the Debian packages of server ``name`` into
    ``<cache>/debs/<name>/root`` (``apt-get download`` + ``dpkg -x``; nothing is
    installed) and return the binary's path. Idempotent: an existing extraction is
    replaced. Needs a working apt (``apt-get update`` done) and network to the
    configured Debian mirror.

    Raises:
        KeyError: unknown ``name`` (valid: keys of DEB_SERVERS).
        ServerSkipped: apt-get/dpkg missing or failing (message has their output tail).
    """
    spec = DEB_SERVERS[name]
    if not shutil.which("apt-get") or not shutil.which("dpkg"):
        raise ServerSkipped(f"{name}: apt-get/dpkg not available to fetch {', '.join(spec.debian)}")
    dest = debs_dir(name)
    dest.mkdir(parents=True, exist_ok=True)
    with FileLock(dest.parent / f"{name}.lock", timeout=timeout):
        with tempfile.TemporaryDirectory(prefix=f"xferlab-deb-{name}-") as tmp:
            os.chmod(tmp, 0o755)  # apt's _apt sandbox user must write here
            try:
                r = subprocess.run(["apt-get", "download", *spec.debian], cwd=tmp,
                                   capture_output=True, text=True, timeout=timeout)
            except subprocess.TimeoutExpired as e:
                raise ServerSkipped(f"{name}: apt-get download timed out after {timeout:.0f} s") from e
            debs = sorted(Path(tmp).glob("*.deb"))
            if r.returncode != 0 or not debs:
                tail = "\n".join((r.stderr + r.stdout).strip().splitlines()[-6:])
                raise ServerSkipped(f"{name}: apt-get download {' '.join(spec.debian)} failed "
                                    f"(run apt-get update?):\n{tail}")
            new_root = dest / f"root.tmp-{os.getpid()}"
            shutil.rmtree(new_root, ignore_errors=True)
            versions: dict[str, str] = {}
            for deb in debs:
                x = subprocess.run(["dpkg", "-x", str(deb), str(new_root)],
                                   capture_output=True, text=True, timeout=timeout)
                if x.returncode != 0:
                    shutil.rmtree(new_root, ignore_errors=True)
                    raise ServerSkipped(f"{name}: dpkg -x {deb.name} failed: {x.stderr.strip()[-500:]}")
                f = subprocess.run(["dpkg-deb", "-f", str(deb), "Package", "Version"],
                                   capture_output=True, text=True, timeout=30)
                kv = dict(ln.split(": ", 1) for ln in f.stdout.splitlines() if ": " in ln)
                if "Package" in kv:
                    versions[kv["Package"]] = kv.get("Version", "?")
            shutil.rmtree(dest / "root", ignore_errors=True)
            os.replace(new_root, dest / "root")
            (dest / "info.json").write_text(json.dumps(
                {"packages": versions, "fetched": time.time()}, indent=1))
    binary = dest / "root" / "usr" / "sbin" / _binary(spec)
    if not binary.is_file():
        raise ServerSkipped(f"{name}: {_binary(spec)} not found in extracted {', '.join(spec.debian)}")
    return binary
