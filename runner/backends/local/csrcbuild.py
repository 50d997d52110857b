"""The Debian-packaged C FTP servers (vsftpd, proftpd, pure-ftpd) built from a source tree
at a commit (runner.backends.source) by a fixed recipe per server, with symbols kept
(``-g``, never stripped: profiles name the server's own functions)::

    <data_dir>/builds/<key>/tree/                 the exported tree
    <data_dir>/builds/<key>/c-<server>/           a copy of it, where the recipe runs
    <data_dir>/builds/<key>/c-<server>/.built     written once every step succeeded

The recipes (:data:`C_RECIPES`), each step an argument vector run in the copy (no shell)
with ``CFLAGS`` = :data:`CFLAGS` in the environment:

- proftpd: ``./configure --enable-openssl --with-modules=mod_tls`` (mod_tls compiled in:
  FTPS without a module folder; the lab's proftpd.conf needs no other module: mod_auth_file,
  mod_delay and sendfile are in the default build), then ``make -jN``;
- vsftpd: its own Makefile, ``make CFLAGS=... LINK=`` (its ``LINK = -Wl,-s`` would strip
  the binary; its ``-Werror`` is left out);
- pure-ftpd: ``./configure --with-puredb --with-tls`` (``./autogen.sh`` first when a git
  checkout has no ``configure``), then ``make -jN``; ``src/pure-pw`` is its PureDB tool.

The recipe's steps are fixed here: nothing of the spec reaches them but the tree (its
commit resolved by runner.backends.source). A step that fails is
:class:`runner.backends.base.ServerFailed` with the builder's last lines (stdout and
stderr as they came, plus the first ``error:`` line when it scrolled out): the cell is
failed, never skipped.
"""
from __future__ import annotations

import json
import os
import shlex
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock

from runner.backends.base import ServerFailed
from runner.backends.local.srcbuild import resolved_tree, run_builder
from runner.backends.source import ResolvedSource
from runner.spec.request import ServerRequest

#: Compiler flags of every C server build: symbols (``-g``), the usual optimisation, frame
#: pointers kept (perf's stacks walk cheaply even without DWARF unwinding).
CFLAGS = "-g -O2 -fno-omit-frame-pointer"
#: vsftpd's own Makefile flags (vsftpd 3.0.x) with ``-g``, without ``-Werror`` (newer
#: compilers warn where vsftpd's authors' did not).
VSFTPD_CFLAGS = (f"{CFLAGS} -fPIE -fstack-protector-strong -Wall -W -Wshadow -Wformat-security "
                 "-D_FORTIFY_SOURCE=2")
#: Seconds each build step may take.
STEP_TIMEOUT = 1200
#: Lines of the builder's output a failure carries.
TAIL_LINES = 20


def _jobs() -> str:
    return f"-j{max(1, min(os.cpu_count() or 1, 8))}"


@dataclass(frozen=True)
class CRecipe:
    """How one C server is built from its tree.

    Attributes:
        server: the ServerRequest name.
        steps: argument vectors run in order in the tree's copy; ``{jobs}`` in an argument
            becomes ``-jN`` (N: the CPUs, at most 8).
        binaries: role -> path in the tree's copy of each file the recipe makes (``server``
            is the one started).
        needs: files of the tree that tell it is this server's source (``configure``
            counted as present when ``bootstrap`` is).
        bootstrap: a script run first when the tree has no ``configure`` (a git checkout's
            ``autogen.sh``), else None.
        installed: role -> where an image installs that file (the server's container
            entrypoint runs it from there; servers/Dockerfile.c-source).
    """

    server: str
    steps: tuple[tuple[str, ...], ...]
    binaries: dict[str, str]
    needs: tuple[str, ...]
    bootstrap: str | None = None
    installed: tuple[tuple[str, str], ...] = ()


#: The recipes, by server name (module docstring).
C_RECIPES: dict[str, CRecipe] = {
    "proftpd": CRecipe("proftpd", (("./configure", "--enable-openssl", "--with-modules=mod_tls"), ("make", "{jobs}")),
                       {"server": "proftpd"}, ("configure", "src/main.c", "modules/mod_auth_file.c"),
                       installed=(("server", "/usr/sbin/proftpd"),)),
    "vsftpd": CRecipe("vsftpd", (("make", "{jobs}", f"CFLAGS={VSFTPD_CFLAGS}", "LINK="),),
                      {"server": "vsftpd"}, ("Makefile", "main.c", "builddefs.h"),
                      installed=(("server", "/usr/sbin/vsftpd"),)),
    "pureftpd": CRecipe("pureftpd", (("./configure", "--with-puredb", "--with-tls"), ("make", "{jobs}")),
                        {"server": "src/pure-ftpd", "pure-pw": "src/pure-pw"}, ("configure", "src/ftpd.c"),
                        bootstrap="autogen.sh", installed=(("server", "/usr/sbin/pure-ftpd"),
                                                           ("pure-pw", "/usr/bin/pure-pw"))),
}

#: Builds that failed in this process, by (server, cache key): the same ServerFailed for
#: the next cell instead of the same failing build again (a new process tries again).
_FAILED: dict[tuple[str, str], ServerFailed] = {}


@dataclass(frozen=True)
class CBuild:
    """A C server built from source.

    Attributes:
        binaries: role -> absolute path (``server``: the executable started; pure-ftpd also ``pure-pw``).
        source: the resolved commit.
        built: True when this call built it (False: the cache had it).
        seconds: the build's wall time (s), this call's or the cached build's recorded one.
    """

    binaries: dict[str, Path]
    source: ResolvedSource
    built: bool
    seconds: float

    def info(self, server: str) -> dict[str, object]:
        """The build_info entries of the build: ``version`` (``git-<commit[:12]>[+dirty]``),
        ``obtained``, ``source`` (ResolvedSource.info), ``build_seconds``, ``cflags``."""
        return {"version": f"git-{self.source.short}", "source": self.source.info(),
                "obtained": f"built from {self.source.location} at {self.source.commit} ({server} recipe)",
                "build_seconds": round(self.seconds, 1), "cflags": CFLAGS}


def builder_tail(output: str, n: int = TAIL_LINES) -> str:
    """The last ``n`` lines of a builder's ``output``; when its first line holding
    ``error:`` (a compiler's diagnostic) is not among them, that line first, marked
    ``first error:``."""
    lines = output.strip().splitlines()
    tail = lines[-n:]
    first = next((ln for ln in lines if "error:" in ln), None)
    if first is not None and first not in tail:
        tail = [f"first error: {first}", "...", *tail]
    return "\n".join(tail)


def _step(what: str, argv: list[str], cwd: Path) -> None:
    """Run one build step (stdout and stderr merged, in order). Raises ServerFailed."""
    run_builder(f"{what}: {' '.join(argv)}", argv, timeout=STEP_TIMEOUT, env={"CFLAGS": CFLAGS, "LC_ALL": "C"},
                merged=True, tail=builder_tail, cwd=cwd)


def _recipe(server: str) -> CRecipe:
    r = C_RECIPES.get(server)
    if r is None:
        raise ValueError(f"no C build recipe for {server[:40]!r} (recipes: {', '.join(C_RECIPES)})")
    return r


def tree_problem(server: str, tree: Path) -> str | None:
    """Why ``tree`` is not a source tree of ``server`` (the files of its recipe's ``needs``
    it lacks), or None. Raises ValueError for a server without a recipe."""
    r = _recipe(server)
    missing = [n for n in r.needs if not (tree / n).is_file()
               and not (n == "configure" and r.bootstrap and (tree / r.bootstrap).is_file())]
    if missing:
        return f"has no {', '.join(missing)} at that commit (not a {server} source tree)"
    return None


def steps_of(server: str, tree: Path) -> list[list[str]]:
    """The argument vectors ``server``'s recipe runs in ``tree`` (``{jobs}`` filled in;
    the bootstrap script first when ``tree`` has no ``configure``). Raises ValueError for
    a server without a recipe."""
    r = _recipe(server)
    steps = [[a.replace("{jobs}", _jobs()) for a in s] for s in r.steps]
    if r.bootstrap and not (tree / "configure").is_file():
        steps.insert(0, ["sh", f"./{r.bootstrap}"])
    return steps


def build_script(server: str, tree: Path) -> str:
    """A POSIX shell script that runs ``server``'s recipe in the current directory (a copy
    of ``tree``) with :data:`CFLAGS` and installs what it made where the recipe's
    ``installed`` says: the build step of servers/Dockerfile.c-source (no
    ``/opt/server-version``: the docker backend names the build ``git-<commit[:12]>``, as
    the local one). Every word is quoted (shlex.quote). Raises ValueError for a server
    without a recipe."""
    r = _recipe(server)
    lines = ["set -eu", f"export CFLAGS={shlex.quote(CFLAGS)} LC_ALL=C"]
    lines += [" ".join(shlex.quote(a) for a in argv) for argv in steps_of(server, tree)]
    lines += [f"install -m 0755 {shlex.quote(r.binaries[role])} {shlex.quote(dest)}" for role, dest in r.installed]
    return "\n".join(lines) + "\n"


def build_c_server(server: str, req: ServerRequest, progress: Callable[[str], None]) -> CBuild:
    """``server`` built from ``req.source`` at ``req.ref`` by its recipe, once per commit
    and dirty hash (file lock against a parallel build; a failure remembered for this
    process).

    Raises:
        ValueError: ``server`` has no recipe.
        ServerFailed: the source does not resolve (git's words), the tree is not this
            server's, a step failed (the builder's last lines), or a binary is missing after
            the steps.
    """
    rec = _recipe(server)
    src, tree = resolved_tree(req)
    what = f"{server} at {src.short}"
    problem = tree_problem(server, tree)
    if problem:
        raise ServerFailed(f"{what}: {src.location} {problem}")
    work = src.build_root / f"c-{server}"
    done = work / ".built"

    def cached() -> CBuild | None:
        try:
            rec_done = json.loads(done.read_text())
        except (OSError, ValueError):
            return None
        paths = {k: work / v for k, v in rec.binaries.items()}
        if not all(p.is_file() for p in paths.values()):
            return None
        return CBuild(paths, src, False, float(rec_done.get("seconds", 0.0)))

    got = cached()
    if got:
        return got
    if (server, src.key) in _FAILED:
        raise _FAILED[(server, src.key)]
    with FileLock(src.build_root / f"c-{server}.lock", timeout=STEP_TIMEOUT * 3):
        got = cached()
        if got:
            return got
        progress(f"building {server} from {src.location} at {src.short} in {work}")
        t0 = time.monotonic()
        try:
            shutil.rmtree(work, ignore_errors=True)
            shutil.copytree(tree, work, symlinks=True)
            steps = steps_of(server, work)
            for argv in steps:
                _step(what, argv, work)
            missing = [v for v in rec.binaries.values() if not (work / v).is_file()]
            if missing:
                raise ServerFailed(f"{what}: the recipe succeeded but made no {', '.join(missing)}")
        except ServerFailed as e:
            _FAILED[(server, src.key)] = e
            raise
        seconds = time.monotonic() - t0
        done.write_text(json.dumps({"commit": src.commit, "dirty_hash": src.dirty_hash, "seconds": seconds,
                                    "cflags": CFLAGS, "steps": steps}, indent=1))
    return CBuild({k: work / v for k, v in rec.binaries.items()}, src, True, seconds)
