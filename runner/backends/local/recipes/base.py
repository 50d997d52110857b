"""What every local recipe shares: the :class:`Recipe` interface, the :class:`Launch` it
returns, and the helpers recipes use to render configs, build from source (once per
source hash) and read versions."""
from __future__ import annotations

import hashlib
import string
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from filelock import FileLock

from runner.backends import paths
from runner.backends.base import ServerFailed, ServerSkipped, target_tls, tls_mode  # noqa: F401 - the recipes take them from here
from runner.catalogue import variants
from runner.load.target import Target
from runner.spec.request import ServerRequest

if TYPE_CHECKING:
    from runner.backends.local.rundir import RunDir


class RecipeHost(Protocol):
    """What a recipe uses of the backend that runs it (LocalBackend implements it):
    the address servers bind, whether missing Debian binaries may be fetched, and the
    progress sink for long steps (fetch, build)."""

    host: str
    auto_fetch: bool
    progress: Callable[[str], None]

#: The FTP user every recipe serves (vsftpd aside: it serves a system account).
FTP_USER = "xferlab"


@dataclass
class Launch:
    """What a recipe tells the backend to run.

    Attributes:
        argv: command line (argv[0] absolute).
        target: where to connect once ready.
        config_text: the rendered config (written by the recipe) for the hash, with
            per-run values normalised (port, run dir, password replaced by fixed
            placeholders, so two runs of one server/version/variant hash the same).
        info: build_info entries (version, binary, interpreter, obtained, ...).
        env: extra environment variables.
        ready_timeout: seconds to wait for the login probe.
    """

    argv: list[str]
    target: Target
    config_text: str
    info: dict[str, Any]
    env: dict[str, str] = field(default_factory=dict)
    ready_timeout: float = 20.0


class Recipe:
    """How to check, prepare and launch one server kind. Subclasses set ``name`` (the
    ServerRequest.name they serve) and implement :meth:`launch`."""

    name = "?"

    def __init__(self, backend: RecipeHost):
        self.backend = backend

    @property
    def host(self) -> str:
        """The address the server binds and the client connects to (the backend's)."""
        return self.backend.host

    def quick_check(self) -> str | None:
        """Cheap availability check (no download/build): None or a skip reason."""
        return None

    def check(self, req: ServerRequest) -> None:
        """Raise ServerSkipped if ``req`` cannot run here: with :meth:`quick_check`'s reason
        when it gives one (a tool absent), else whatever :meth:`prepare` raises
        (ServerFailed when a build fails)."""
        reason = self.quick_check()
        if reason:
            raise ServerSkipped(reason)
        self.prepare(req)

    def prepare(self, req: ServerRequest) -> None:
        """What :meth:`check` does once :meth:`quick_check` passed: download or build what
        ``req`` needs (cached). Raises ServerSkipped when something it needs is absent,
        ServerFailed when a build fails. Nothing by default."""

    def launch(self, req: ServerRequest, run: RunDir, port: int) -> Launch:
        """Write the server's config into ``run`` and say how to start it on ``port``."""
        raise NotImplementedError


def source_hash(src: Path, suffixes: frozenset[str]) -> str:
    """16 hex chars of sha256 over the files of ``src`` with one of ``suffixes``
    (relative path + bytes): a build cache key."""
    h = hashlib.sha256()
    for f in sorted(src.rglob("*")):
        if f.is_file() and f.suffix in suffixes:
            h.update(str(f.relative_to(src)).encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:16]


def build_once(out: Path, built: Callable[[], bool], timeout: float, build: Callable[[], None]) -> None:
    """Run ``build`` unless ``built()`` says the build in ``out`` is done, under the file
    lock ``<out>.lock`` (another process may be building the same source): ``out`` is
    made, the lock taken (waiting at most ``timeout`` s; filelock.Timeout past it) and
    ``built()`` asked again before ``build`` runs."""
    if built():
        return
    out.mkdir(parents=True, exist_ok=True)
    with FileLock(out.parent / f"{out.name}.lock", timeout=timeout):
        if not built():
            build()


def run_build(what: str, argv: list[str], timeout: int, *, done: Callable[[int], bool] = lambda rc: rc == 0,
              failed: str = "", **run: Any) -> None:
    """Run the build command ``argv`` (output captured; ``run``: more subprocess.run
    arguments such as ``cwd`` and ``env``) for at most ``timeout`` s.

    A build that was run and did not succeed is a failure of the server, never a skip: the
    tools were there (the recipe's :meth:`Recipe.quick_check` said so) and the source did
    not build.

    Raises:
        ServerFailed: ``"<what> timed out after <timeout> s"``, or, when ``done(exit
            status)`` is false (default: a non-zero status), ``"<what> failed (<failed>exit
            N):"`` and the last 15 lines of its output.
        ServerSkipped: ``argv[0]`` cannot be executed (OSError: the builder is absent).
    """
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, **run)
    except subprocess.TimeoutExpired as e:
        raise ServerFailed(f"{what} timed out after {timeout} s") from e
    except OSError as e:
        raise ServerSkipped(f"{what}: cannot run {argv[0]}: {e}") from e
    if not done(r.returncode):
        tail = "\n".join((r.stdout + r.stderr).strip().splitlines()[-15:])
        raise ServerFailed(f"{what} failed ({failed}exit {r.returncode}):\n{tail}")


def command_output(argv: list[str]) -> str:
    """``argv``'s standard output, stripped (a version query such as ``node --version``);
    ``""`` when it cannot be run within 10 s."""
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return ""


def server_file(*parts: str) -> Path:
    """A file of ``servers/`` (e.g. ``server_file("vsftpd", "vsftpd.conf.tmpl")``), read
    from :data:`runner.backends.paths.SERVERS_DIR` at call time."""
    return paths.SERVERS_DIR.joinpath(*parts)


def pasv_range(variant: dict[str, Any]) -> tuple[int, int] | None:
    """The variant's ``pasv_ports`` as (low, high), None when absent. Raises
    ServerSkipped naming the bad value."""
    v = variant.get("pasv_ports")
    if not v:
        return None
    try:
        return variants.parse_port_range(v)
    except ValueError as e:
        raise ServerSkipped(f"invalid pasv_ports: {e}") from None


def sha256(text: str) -> str:
    """Hex sha256 of ``text`` (UTF-8)."""
    return hashlib.sha256(text.encode()).hexdigest()


def render(template: Path, values: dict[str, Any]) -> str:
    """Fill ``${name}`` placeholders of ``template`` (string.Template); KeyError names a missing one."""
    return string.Template(template.read_text()).substitute({k: str(v) for k, v in values.items()})
