"""A server's source resolved to a commit and exported into the build cache.

:func:`resolve` turns a request's ``source`` and ``ref`` (already allow-listed by
runner.spec.source) into a :class:`ResolvedSource`: the commit (``git rev-parse --verify
--end-of-options REF^{commit}``), for a checkout taken as it is (no ref) the sha256 of
``git diff HEAD --binary`` plus its untracked files, the commit's subject and author date.
:func:`export` writes that tree once into the build cache, keyed by commit and dirty
hash::

    <data_dir>/builds/mirrors/<sha256(url)[:16]>.git       a git URL's bare mirror
    <data_dir>/builds/<commit[:16]>[-<dirty[:12]>]/tree/   the exported tree (git archive)
    <data_dir>/builds/<commit[:16]>[-<dirty[:12]>]/<what>/ what each builder makes of it

git runs with an argument vector (no shell), ``GIT_TERMINAL_PROMPT=0`` and a time bound;
a ref that does not resolve, a URL that cannot be fetched or an export that fails raises
:class:`runner.backends.base.ServerFailed` with git's last lines: the cell is failed.
"""
from __future__ import annotations

import hashlib
import io
import os
import re
import shutil
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from filelock import FileLock

from runner.backends.base import ServerFailed
from runner.config import get_settings

#: Seconds a git command may take (a clone of a large repository included).
GIT_TIMEOUT = 600
#: Settings of a checkout's own configuration that would run a program, turned off for every
#: git command: the file-system monitor hook, hooks. (External diff drivers and text
#: conversion filters are turned off by ``--no-ext-diff --no-textconv`` where a diff is made.)
SAFE_CONFIG = ("-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null", "-c", "protocol.ext.allow=never")


def builds_dir() -> Path:
    """Root of the source builds: ``Settings.data_dir / "builds"``."""
    return get_settings().data_dir / "builds"


def git(args: list[str], *, cwd: Path | None = None, timeout: float = GIT_TIMEOUT, what: str = "git") -> bytes:
    """Run ``git ARGS`` (no shell, no prompt) and return its standard output.

    Raises:
        ServerFailed: git is absent, timed out or exited non-zero (its last 15 lines of
            output, prefixed with ``what``).
    """
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "/bin/true", "LC_ALL": "C"}
    try:
        r = subprocess.run(["git", *SAFE_CONFIG, *args], cwd=cwd, capture_output=True, timeout=timeout, env=env)
    except FileNotFoundError as e:
        raise ServerFailed(f"{what}: git is not installed (apt-get install git)") from e
    except subprocess.TimeoutExpired as e:
        raise ServerFailed(f"{what}: git {args[0]} timed out after {timeout:.0f} s") from e
    if r.returncode != 0:
        tail = "\n".join((r.stdout + r.stderr).decode(errors="replace").strip().splitlines()[-15:])
        raise ServerFailed(f"{what} (git {args[0]} exited {r.returncode}):\n{tail}")
    return r.stdout


@dataclass(frozen=True)
class ResolvedSource:
    """A source at one commit.

    Attributes:
        location: the spec's ``source`` (directory or URL).
        ref: the spec's ``ref``; None for a checkout taken as it is.
        repo: the git directory commands run in (the checkout, or a URL's mirror).
        commit: 40 hex digits.
        dirty_hash: for a checkout with uncommitted changes taken as it is: 64 hex digits
            of sha256 over ``git diff HEAD --binary`` and the untracked files; else None.
        subject: the commit's subject line.
        author_date: the commit's author date, ISO 8601 (``git log --format=%aI``).
        commit_index: the number of commits reachable from ``commit`` (``git rev-list
            --count``): the position in the repository's order; None when unknown.
    """

    location: str
    ref: str | None
    repo: Path
    commit: str
    dirty_hash: str | None
    subject: str
    author_date: str
    commit_index: int | None

    @property
    def key(self) -> str:
        """The build cache key: ``<commit[:16]>`` or ``<commit[:16]>-<dirty[:12]>``."""
        return self.commit[:16] + (f"-{self.dirty_hash[:12]}" if self.dirty_hash else "")

    @property
    def short(self) -> str:
        """``<commit[:12]>``, with ``+dirty`` for a dirty checkout: a build's version suffix."""
        return self.commit[:12] + ("+dirty" if self.dirty_hash else "")

    def info(self) -> dict[str, Any]:
        """The build record's ``source`` entry: location, ref, commit, dirty_hash, subject,
        author_date, commit_index (exactly these keys)."""
        return {"location": self.location, "ref": self.ref, "commit": self.commit, "dirty_hash": self.dirty_hash,
                "subject": self.subject, "author_date": self.author_date, "commit_index": self.commit_index}

    @property
    def build_root(self) -> Path:
        """``<builds_dir>/<key>``: the exported tree and each build made of it."""
        return builds_dir() / self.key


def _mirror(url: str, ref: str | None) -> Path:
    """The bare mirror of ``url`` under the builds dir, cloned once, fetched on each call
    unless ``ref`` is a full commit SHA the mirror already has (a commit never changes)."""
    root = builds_dir() / "mirrors"
    root.mkdir(parents=True, exist_ok=True)
    path = root / (hashlib.sha256(url.encode()).hexdigest()[:16] + ".git")
    with FileLock(root / f"{path.name}.lock", timeout=GIT_TIMEOUT):
        if (path / "HEAD").is_file() and ref is not None and re.fullmatch(r"[0-9a-f]{40}", ref):
            try:
                git(["cat-file", "-e", "--end-of-options", f"{ref}^{{commit}}"], cwd=path, what="git cat-file")
                return path
            except ServerFailed:
                pass
        if (path / "HEAD").is_file():
            git(["fetch", "--prune", "--tags", "--force", "origin"], cwd=path, what=f"fetching {url}")
        else:
            shutil.rmtree(path, ignore_errors=True)
            git(["clone", "--mirror", "--", url, str(path)], what=f"cloning {url}")
    return path


def dirty_hash(repo: Path) -> str | None:
    """sha256 (hex) of a checkout's uncommitted changes: ``git diff HEAD --binary`` then each
    untracked, not ignored file (path and bytes), or None when there is none."""
    diff = git(["diff", "--binary", "--no-ext-diff", "--no-textconv", "HEAD"], cwd=repo, what="git diff")
    untracked = [p for p in git(["ls-files", "-z", "--others", "--exclude-standard"], cwd=repo,
                                what="git ls-files").split(b"\0") if p]
    if not diff and not untracked:
        return None
    h = hashlib.sha256(diff)
    for rel in sorted(untracked):
        f = repo / os.fsdecode(rel)
        h.update(b"\0" + rel + b"\0" + (f.read_bytes() if f.is_file() and not f.is_symlink() else b""))
    return h.hexdigest()


def resolve(location: str, ref: str | None) -> ResolvedSource:
    """Resolve a request's source to a commit (see the module docstring).

    Args:
        location: a directory (a git checkout) or a git URL, as runner.spec.source checked it.
        ref: a commit, branch or tag; None: the checkout's HEAD plus its uncommitted changes.

    Raises:
        ServerFailed: the directory is not a git checkout, the URL cannot be fetched, or
            ``ref`` does not name a commit there (git's message).
    """
    if "://" in location:
        repo = _mirror(location, ref)
    else:
        repo = Path(location)
        top = git(["rev-parse", "--show-toplevel"], cwd=repo, what=f"{location}: not a git checkout")
        repo = Path(top.decode().strip())
    rev = f"{ref or 'HEAD'}^{{commit}}"
    commit = git(["rev-parse", "--verify", "--end-of-options", rev], cwd=repo,
                 what=f"{location}: ref {ref or 'HEAD'!r} does not resolve to a commit").decode().strip()
    meta = git(["log", "-1", "--format=%s%x00%aI", "--end-of-options", commit], cwd=repo, what="git log").decode()
    subject, _, date = meta.strip().partition("\0")
    try:
        index: int | None = int(git(["rev-list", "--count", "--end-of-options", commit], cwd=repo,
                                    what="git rev-list").decode())
    except (ServerFailed, ValueError):
        index = None
    dirty = dirty_hash(repo) if ref is None else None
    return ResolvedSource(location, ref, repo, commit, dirty, subject, date, index)


def export(src: ResolvedSource) -> Path:
    """The tree of ``src`` in ``<build_root>/tree`` (made once; file lock against a
    parallel export): ``git archive`` of the commit, or for a dirty checkout its tracked
    and untracked, not ignored files as they are on disk. Returns the tree's directory.

    Raises:
        ServerFailed: git failed, or the archive holds a member outside the tree.
    """
    root = src.build_root
    tree = root / "tree"
    done = root / ".exported"
    if done.is_file():
        return tree
    root.mkdir(parents=True, exist_ok=True)
    with FileLock(root.parent / f"{root.name}.lock", timeout=GIT_TIMEOUT):
        if done.is_file():
            return tree
        shutil.rmtree(tree, ignore_errors=True)
        tree.mkdir()
        if src.dirty_hash is None:
            data = git(["archive", "--format=tar", "--end-of-options", src.commit], cwd=src.repo, what="git archive")
            try:
                with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tf:
                    tf.extractall(tree, filter="data")
            except (tarfile.TarError, OSError) as e:
                raise ServerFailed(f"exporting {src.commit[:12]} of {src.location}: {e}") from e
        else:
            files = git(["ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=src.repo,
                        what="git ls-files")
            for rel in sorted({p for p in files.split(b"\0") if p}):
                name = os.fsdecode(rel)
                s, d = src.repo / name, tree / name
                if not s.exists() and not s.is_symlink():  # deleted in the working tree
                    continue
                d.parent.mkdir(parents=True, exist_ok=True)
                if s.is_symlink():
                    d.symlink_to(os.readlink(s))
                elif s.is_file():
                    shutil.copy2(s, d)
        done.write_text(src.commit + "\n")
    return tree
