"""Upstream source tarballs of Debian source packages, fetched into xferlab's cache with
``apt-get source --download-only`` under a private apt configuration: the system's apt
configuration and package lists are neither read for sources nor changed.

The mirror is the machine's own: the ``URIs`` and ``Signed-By`` of the first ``Types:
deb`` stanza of ``/etc/apt/sources.list.d/debian.sources`` (deb822) whose suites include
a release suite (a name without ``-``, e.g. ``bookworm``), written as a ``deb-src`` stanza
into a private sources folder::

    <cache>/debsrc/<package>/apt/src.sources        the deb-src stanza
    <cache>/debsrc/<package>/apt/lists/             its package lists (apt-get update)
    <cache>/debsrc/<package>/<package>_<v>.orig.tar.*   the upstream tarball (with .dsc, debian.tar.*)

Used for the source trees of the C servers' build recipes (runner.backends.local.csrcbuild)
and their tests; ``scripts/install.sh`` runs ``python -m runner.backends.local.debsrc
proftpd-dfsg`` once. Only the packages of :data:`SOURCE_PACKAGES` can be fetched.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from filelock import FileLock

from runner.backends.local.venvs import cache_dir

#: Debian source packages this module fetches. Debian's archive serves proftpd-dfsg's;
#: vsftpd's and pure-ftpd's source tarballs answered 404 from the machine's mirror here.
SOURCE_PACKAGES: tuple[str, ...] = ("proftpd-dfsg",)
#: The deb822 file the mirror is read from.
DEBIAN_SOURCES = Path("/etc/apt/sources.list.d/debian.sources")
#: Seconds ``apt-get update`` or ``apt-get source`` may take.
APT_TIMEOUT = 600


class DebSrcError(RuntimeError):
    """The source could not be fetched: no mirror found, or apt-get failed (its last lines)."""


def debsrc_dir(package: str) -> Path:
    """``<cache>/debsrc/<package>``. Raises ValueError for a package not in :data:`SOURCE_PACKAGES`."""
    if package not in SOURCE_PACKAGES:
        raise ValueError(f"not a source package xferlab fetches: {package[:60]!r} "
                         f"(known: {', '.join(SOURCE_PACKAGES)})")
    return cache_dir() / "debsrc" / package


def deb_src_stanza(sources_text: str) -> str:
    """A ``deb-src`` deb822 stanza for the first ``Types: deb`` stanza of ``sources_text``
    (a debian.sources file) with a release suite: its first URI, its release suites (no
    ``-``), ``Components: main`` and its ``Signed-By`` when it has one.

    Raises:
        DebSrcError: no such stanza.
    """
    for block in sources_text.split("\n\n"):
        fields: dict[str, str] = {}
        for line in block.splitlines():
            if line.startswith("#") or ":" not in line or line[:1].isspace():
                continue
            key, _, value = line.partition(":")
            fields[key.strip().lower()] = value.strip()
        suites = [s for s in fields.get("suites", "").split() if "-" not in s and "/" not in s]
        uris = fields.get("uris", "").split()
        if "deb" not in fields.get("types", "").split() or not suites or not uris:
            continue
        lines = ["Types: deb-src", f"URIs: {uris[0]}", f"Suites: {' '.join(suites)}", "Components: main"]
        if fields.get("signed-by"):
            lines.append(f"Signed-By: {fields['signed-by']}")
        return "\n".join(lines) + "\n"
    raise DebSrcError("no 'Types: deb' stanza with a release suite and a URI in the apt sources")


def orig_tarball(package: str) -> Path | None:
    """The fetched upstream tarball of ``package`` (``*.orig.tar.*``), None when not fetched."""
    found = sorted(debsrc_dir(package).glob(f"{package}_*.orig.tar.*"))
    return found[-1] if found else None


def _apt(argv: list[str], opts: list[str], cwd: Path) -> None:
    try:
        r = subprocess.run(["apt-get", "-q", *opts, *argv], cwd=cwd, capture_output=True, text=True,
                           timeout=APT_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise DebSrcError(f"apt-get {argv[0]}: {e}") from e
    if r.returncode != 0:
        tail = "\n".join((r.stdout + r.stderr).strip().splitlines()[-10:])
        raise DebSrcError(f"apt-get {argv[0]} exited {r.returncode}:\n{tail}")


def fetch_source(package: str, sources: Path = DEBIAN_SOURCES) -> Path:
    """The upstream tarball of ``package``, fetched once (file lock) into
    :func:`debsrc_dir` with the private apt configuration of the module docstring.

    Raises:
        ValueError: ``package`` is not in :data:`SOURCE_PACKAGES`.
        DebSrcError: ``sources`` is unreadable or has no usable stanza, or apt-get failed.
    """
    d = debsrc_dir(package)
    got = orig_tarball(package)
    if got is not None:
        return got
    d.mkdir(parents=True, exist_ok=True)
    with FileLock(d.parent / f"{package}.lock", timeout=APT_TIMEOUT * 2):
        got = orig_tarball(package)
        if got is not None:
            return got
        try:
            stanza = deb_src_stanza(sources.read_text())
        except OSError as e:
            raise DebSrcError(f"cannot read the apt sources {sources}: {e}") from e
        apt = d / "apt"
        (apt / "lists" / "partial").mkdir(parents=True, exist_ok=True)
        (apt / "cache" / "archives" / "partial").mkdir(parents=True, exist_ok=True)
        (apt / "src.sources").write_text(stanza)
        opts = ["-o", "Dir::Etc::sourcelist=/dev/null", "-o", f"Dir::Etc::sourceparts={apt}",
                "-o", f"Dir::State::Lists={apt / 'lists'}", "-o", f"Dir::Cache={apt / 'cache'}",
                "-o", "APT::Sandbox::User=root"]
        _apt(["update"], opts, d)
        _apt(["source", "--download-only", "--", package], opts, d)
        got = orig_tarball(package)
        if got is None:
            raise DebSrcError(f"apt-get source {package} left no {package}_*.orig.tar.* in {d}")
        return got


def main(argv: list[str] | None = None) -> int:
    """``python -m runner.backends.local.debsrc PACKAGE...``: fetch each (cached); prints
    each tarball's path. Exit status 1 when a fetch failed (its message on stderr)."""
    ap = argparse.ArgumentParser(prog="python -m runner.backends.local.debsrc", description=__doc__.split("\n\n")[0])
    ap.add_argument("packages", nargs="+", choices=SOURCE_PACKAGES)
    args = ap.parse_args(argv)
    rc = 0
    for p in args.packages:
        try:
            print(fetch_source(p))
        except DebSrcError as e:
            print(f"debsrc: {p}: {e}", file=sys.stderr)
            rc = 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
