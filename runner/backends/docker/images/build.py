"""Server and lab images: what each is built from, the build-context hash that decides
a rebuild, and the builds themselves (host networking, no registry)."""
from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from runner.backends.docker.images.base import (
    BASE_TAG,
    LABEL,
    ImageError,
    Progress,
    _client,
    bootstrap_base,
    image_exists,
)
from runner.backends.paths import REPO_ROOT, SERVERS_DIR

COMPOSE_DIR = REPO_ROOT / "compose"


@dataclass(frozen=True)
class ServerImage:
    """How to build one server's image.

    Attributes:
        name: server name as ServerRequest.name has it (``pyftpdlib``, ``tpd``, ...).
        context: build context folder (``servers/<name>``).
        dockerfile: Dockerfile path relative to ``context``; a family's Dockerfile lives
            outside it (``../Dockerfile.python``), and its bytes then count in the
            context hash.
        buildargs: fixed build arguments (the family Dockerfile's ``SERVER``, ``PACKAGE``).
        version_arg: build argument taking the version (pyftpdlib, twisted; empty = the
            newest release), else None: Debian-packaged servers and tpd have exactly one
            version per image (Debian bookworm's package; tpd's source tree).
        entrypoint_script: for an image whose Dockerfile does not install xferlab's
            container entrypoint (tpd's Dockerfile belongs to its author), the script the
            docker backend runs instead with ``/bin/sh -c`` (same environment interface).
    """

    name: str
    context: Path
    dockerfile: str = "Dockerfile"
    buildargs: dict[str, str] = field(default_factory=dict)
    version_arg: str | None = None
    entrypoint_script: Path | None = None

    def build_args(self, version: str | None) -> dict[str, str]:
        """The build arguments for ``version`` (None: the default, newest release)."""
        return {**self.buildargs, **({self.version_arg: version or ""} if self.version_arg else {})}

    def outside_dockerfile(self) -> Path | None:
        """The Dockerfile when it is outside the build context (a family's), else None."""
        df = (self.context / self.dockerfile).resolve()
        return None if df.is_relative_to(self.context.resolve()) else df


def _python(name: str) -> ServerImage:
    """A Python server from the package index (servers/Dockerfile.python)."""
    return ServerImage(name, SERVERS_DIR / name, "../Dockerfile.python", {"SERVER": name, "PACKAGE": name},
                       version_arg="VERSION")


def _debian(name: str, package: str, extra: str = "") -> ServerImage:
    """A server from Debian's ``package`` (and the packages ``extra``, space-separated) with an
    AuthUserFile-style user (servers/Dockerfile.debian)."""
    args = {"SERVER": name, "PACKAGE": package, "EXTRA": extra}
    return ServerImage(name, SERVERS_DIR / name, "../Dockerfile.debian", args)


def _debian_http(name: str, package: str) -> ServerImage:
    """An HTTP server from Debian's ``package``, one apt-get install (servers/Dockerfile.http)."""
    return ServerImage(name, SERVERS_DIR / name, "../Dockerfile.http", {"SERVER": name, "PACKAGE": package})


#: The servers under test: six FTP servers (tpd speaks HTTP too) and four HTTP-only ones.
SERVER_IMAGES: dict[str, ServerImage] = {
    "pyftpdlib": _python("pyftpdlib"),
    "twisted": _python("twisted"),
    "vsftpd": ServerImage("vsftpd", SERVERS_DIR / "vsftpd"),
    "proftpd": _debian("proftpd", "proftpd-core", "proftpd-mod-crypto"),  # mod_tls: FTPS
    "pureftpd": _debian("pureftpd", "pure-ftpd"),
    "tpd": ServerImage("tpd", SERVERS_DIR / "tpd",
                       entrypoint_script=SERVERS_DIR / "tpd" / "container" / "entrypoint.sh"),
    "go-http": ServerImage("go-http", SERVERS_DIR / "go-http"),
    "nginx": _debian_http("nginx", "nginx"),
    "node-http": _debian_http("node-http", "nodejs"),
    "uvicorn": ServerImage("uvicorn", SERVERS_DIR / "uvicorn", version_arg="VERSION"),
    "netty": ServerImage("netty", SERVERS_DIR / "netty"),
}

#: The lab's own images (docker-compose.yml): tag -> (context, dockerfile relative to context).
LAB_IMAGES: dict[str, tuple[Path, str]] = {
    "xferlab/postgres:15": (COMPOSE_DIR / "postgres", "Dockerfile"),
    "xferlab/app:latest": (REPO_ROOT, "compose/app/Dockerfile"),
}


_SKIP_PARTS = {"__pycache__", ".git", "build", ".venv", "node_modules"}


def context_hash(context: Path, extra: dict[str, Any] | None = None) -> str:
    """16 hex chars of sha256 over every file of a build context (relative path + bytes;
    ``build/``, ``__pycache__``, ``.git`` skipped, and what the context's
    ``.dockerignore`` leaves out of the build, as the engine reads it) and ``extra``
    (build args, base image ID): the key deciding whether an image is rebuilt."""
    ignore = context / ".dockerignore"
    if ignore.is_file():
        from docker.utils.build import exclude_paths

        patterns = [ln.strip() for ln in ignore.read_text().splitlines() if ln.strip() and not ln.startswith("#")]
        files = sorted(context / rel for rel in exclude_paths(str(context), patterns))
    else:
        files = sorted(context.rglob("*"))
    h = hashlib.sha256()
    for f in files:
        rel = f.relative_to(context)
        if f.is_file() and not (set(rel.parts) & _SKIP_PARTS):
            h.update(str(rel).encode() + b"\0")
            h.update(f.read_bytes())
    h.update(json.dumps(extra or {}, sort_keys=True).encode())
    return h.hexdigest()[:16]


def server_tag(name: str, version: str | None) -> str:
    """Image tag of a server build: ``xferlab/<name>:<version or "default">``."""
    v = re.sub(r"[^A-Za-z0-9_.-]", "_", version) if version else "default"
    return f"xferlab/{name}:{v}"


def server_context_hash(spec: ServerImage, version: str | None, base_id: str) -> str:
    """The ``xferlab.context_hash`` of ``spec``'s image at ``version`` on base image
    ``base_id``: :func:`context_hash` of its context with the build arguments, the base
    ID and, for a family Dockerfile outside the context, that file's sha256."""
    extra: dict[str, Any] = {"buildargs": spec.build_args(version), "base": base_id}
    family = spec.outside_dockerfile()
    if family is not None:  # not in the context: its bytes count here
        extra["dockerfile"] = hashlib.sha256(family.read_bytes()).hexdigest()
    return context_hash(spec.context, extra)


#: A classic-builder step line of the engine's build log, e.g. ``Step 3/9 : RUN apt-get update``.
_STEP = re.compile(r"^Step (\d+)/(\d+) : (.*)$")


def build_image(client, *, context: Path, dockerfile: str, tag: str, buildargs: dict[str, str],
                labels: dict[str, str], progress: Progress, timeout: float = 1800, prefix: str = "") -> str:
    """docker build with host networking (the archive and the package index are reached
    the way the host reaches them), reporting as it goes.

    ``progress`` gets, each prefixed with ``prefix``: ``building TAG from PATH``, one
    ``Step i/n: INSTRUCTION`` line per step of the engine's build log stream (the
    instruction cut to 70 characters), and ``built TAG (ID) in S s``.

    ``labels`` are one ``LABEL`` instruction appended to a copy of the Dockerfile
    (:func:`_with_labels`), not the build's ``labels`` parameter: the classic builder
    turns that into one step per label, each a layer commit of 2-5 s on this engine's
    fuse-overlayfs (four labels were about 18 s of every server image's cold build).

    Returns the image ID; raises ImageError naming the tag, with the last 25 lines of
    the build log (missing Dockerfile, missing base image, a failed step, ``timeout``
    seconds exceeded, an engine error)."""
    import docker

    if not (context / dockerfile).is_file():
        raise ImageError(f"building {tag}: {context / dockerfile} does not exist")
    if not image_exists(client, BASE_TAG):
        raise ImageError(f"base image {BASE_TAG} missing: run `xferlab images bootstrap` first "
                         "(or, where a registry is reachable, tag debian:bookworm-slim as it)")
    progress(f"{prefix}building {tag} from {context / dockerfile}")
    t0 = time.monotonic()
    tail: list[str] = []
    image_id = None
    scratch = Path(tempfile.mkdtemp(prefix="xferlab-dockerfile-"))
    try:
        df = str(_with_labels(context / dockerfile, labels, scratch)) if labels else dockerfile
        for chunk in client.api.build(path=str(context), dockerfile=df, tag=tag, buildargs=buildargs,
                                      network_mode="host", rm=True, forcerm=True, decode=True, timeout=timeout):
            if "stream" in chunk:
                for line in chunk["stream"].splitlines():
                    if line.strip():
                        tail = (tail + [line])[-25:]
                        m = _STEP.match(line.strip())
                        if m:
                            what = m.group(3) if len(m.group(3)) <= 70 else m.group(3)[:69] + "…"
                            progress(f"{prefix}Step {m.group(1)}/{m.group(2)}: {what}")
            if "aux" in chunk and "ID" in chunk["aux"]:
                image_id = chunk["aux"]["ID"]
            if "error" in chunk:
                raise ImageError(f"building {tag} failed: {chunk['error'].strip()}\n" + "\n".join(tail))
            if time.monotonic() - t0 > timeout:
                raise ImageError(f"building {tag}: gave up after {timeout:.0f} s\n" + "\n".join(tail))
    except docker.errors.APIError as e:
        raise ImageError(f"building {tag} failed: {e}\n" + "\n".join(tail)) from e
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    img = client.images.get(tag)
    progress(f"{prefix}built {tag} ({img.short_id}) in {time.monotonic() - t0:.0f} s")
    return image_id or img.id


def _with_labels(dockerfile: Path, labels: dict[str, str], folder: Path) -> Path:
    """A copy of ``dockerfile`` in ``folder`` ending in one ``LABEL`` instruction with
    every label, for the engine to read from outside the build context (the Docker SDK
    sends such a Dockerfile inside the context archive). In a multi-stage Dockerfile the
    labels go on the last stage, the image tagged. Values are double-quoted with ``\\``,
    ``"`` and ``$`` escaped (the Dockerfile's own quoting: no variable is expanded in
    them). Raises ValueError for a key or value with a line break."""
    def quote(v: str) -> str:
        if "\n" in v or "\r" in v:
            raise ValueError(f"image label {v!r}: line breaks cannot go in a LABEL line")
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$") + '"'

    out = folder / "Dockerfile"
    line = "LABEL " + " ".join(f"{quote(k)}={quote(v)}" for k, v in labels.items())
    out.write_text(dockerfile.read_text().rstrip("\n") + "\n" + line + "\n")
    return out


@dataclass(frozen=True)
class ImageState:
    """What the engine has for one server image, found without building anything.

    Attributes:
        name: server name; version: requested version (None: the default).
        tag: ``xferlab/<name>:<version or default>``.
        state: ``ready`` (tag present with the current context hash), ``outdated``
            (tag present, build context changed: rebuilt on first use), ``missing`` (no
            such tag: built on first use) or ``no-base`` (:data:`BASE_TAG` missing:
            bootstrapped, then built, on first use).
        image_id: the tagged image's ID (None when there is none).
        created: the tagged image's creation time (UTC), None when there is none.
    """

    name: str
    version: str | None
    tag: str
    state: str
    image_id: str | None = None
    created: datetime | None = None


def server_image_state(name: str, version: str | None = None, *, client=None) -> ImageState:
    """The :class:`ImageState` of server ``name`` at ``version``: reads the engine's
    image list and hashes the build context (no build, no network).

    Raises ImageError for an unknown server or when no engine answers."""
    import docker

    spec = SERVER_IMAGES.get(name)
    if spec is None:
        raise ImageError(f"no image for server {name!r}; known: {', '.join(SERVER_IMAGES)}")
    client = client or _client()
    tag = server_tag(name, version)
    try:
        img = client.images.get(tag)
    except docker.errors.ImageNotFound:
        img = None
    created = None
    if img is not None:
        text = (img.attrs.get("Created") or "")[:19]
        try:
            created = datetime.fromisoformat(text).replace(tzinfo=UTC)
        except ValueError:
            created = None
    iid = img.id if img is not None else None
    try:
        base_id = client.images.get(BASE_TAG).id
    except docker.errors.ImageNotFound:
        return ImageState(name, version, tag, "no-base", iid, created)
    if img is None:
        return ImageState(name, version, tag, "missing")
    current = (img.labels or {}).get("xferlab.context_hash") == server_context_hash(spec, version, base_id)
    return ImageState(name, version, tag, "ready" if current else "outdated", iid, created)


def _prefixed(progress: Progress, prefix: str) -> Progress:
    """``progress`` with ``prefix`` put before every message."""
    return lambda message: progress(prefix + message)


#: Image builds run at once by :func:`ensure_server_images` by default: two overlap one
#: build's downloads and layer commits with the other's package unpacking (a build is
#: rarely CPU-bound for long), without starving a 2-core machine.
BUILD_JOBS = 2


#: Longest wait for another process's build of the same image (s): a build's own bound
#: (:func:`build_image`'s ``timeout``) and a base bootstrap's.
BUILD_LOCK_TIMEOUT = 3600


def build_lock(tag: str) -> Any:
    """A cross-process lock (``filelock.FileLock``, in ``$TMPDIR/xferlab-image-locks/``) for
    building image ``tag`` on this machine's engine: two processes that want the same image
    at once (two campaigns, two test workers) build it once; the second finds it built.
    Raises filelock.Timeout after :data:`BUILD_LOCK_TIMEOUT` s."""
    from filelock import FileLock

    d = Path(tempfile.gettempdir()) / "xferlab-image-locks"
    d.mkdir(parents=True, exist_ok=True)
    return FileLock(d / (re.sub(r"[^A-Za-z0-9_.-]", "_", tag) + ".lock"), timeout=BUILD_LOCK_TIMEOUT)


def ensure_base(client, *, progress: Progress = print) -> None:
    """Bootstrap :data:`BASE_TAG` when this engine lacks it (first use: offline, from the
    host's APT sources, :func:`bootstrap_base`), under its :func:`build_lock`, so that
    processes starting at once bootstrap it once. Raises ImageError as bootstrap_base."""
    with build_lock(BASE_TAG):
        if not image_exists(client, BASE_TAG):
            progress(f"{BASE_TAG} missing: bootstrapping it with debootstrap (once, about a minute)")
            bootstrap_base(progress=progress, client=client)


def ensure_server_images(wanted: Sequence[tuple[str, str | None]], *, client=None, progress: Progress = print,
                         rebuild: bool = False,
                         jobs: int = BUILD_JOBS) -> dict[tuple[str, str | None], tuple[str, str, bool] | ImageError]:
    """Build every server image of ``wanted`` (``(name, version)`` pairs; duplicates
    once) that is missing or outdated, ``jobs`` builds at a time, saying how far it is.

    ``progress`` gets ``building image NAME i/n (why)`` before a build, then the build's
    own lines prefixed with ``image NAME i/n: `` (steps: :func:`build_image`), or
    ``image NAME i/n ready (TAG)`` when nothing is to be built; with ``jobs`` > 1 the
    lines of two builds interleave (each keeps its prefix) and ``progress`` is called
    from one thread at a time. The base image is bootstrapped first when missing (its
    lines prefixed with ``base image: ``). Each concurrent build uses a docker client of
    its own.

    Returns ``{(name, version): (tag, image ID, built now)}`` in the order of ``wanted``,
    or the ImageError of a server whose image could not be made (the others are still
    built). Raises ImageError only when no engine answers or the base image cannot be
    made; ValueError when ``jobs`` < 1."""
    if jobs < 1:
        raise ValueError(f"jobs must be at least 1, got {jobs}")
    todo = list(dict.fromkeys(wanted))
    client = client or _client()
    ensure_base(client, progress=lambda m: progress(f"base image: {m}"))
    n = len(todo)

    def one(i: int, key: tuple[str, str | None], c, say: Progress) -> tuple[str, str, bool] | ImageError:
        name, version = key
        label = name if version is None else f"{name} {version}"
        prefix = f"image {label} {i}/{n}: "
        try:
            st = server_image_state(name, version, client=c)
            if st.state == "ready" and not rebuild:
                say(f"image {label} {i}/{n} ready ({st.tag})")
            else:
                why = {"missing": "not built yet", "outdated": "build context changed"}.get(st.state, "rebuild")
                say(f"building image {label} {i}/{n} ({why})")
            return ensure_server_image(name, version, client=c, rebuild=rebuild, progress=_prefixed(say, prefix))
        except ImageError as e:
            say(f"image {label} {i}/{n} failed: {str(e).splitlines()[0]}")
            return e

    return _each(todo, one, client=client, progress=progress, jobs=jobs)


def _each(keys: list[Any], build: Callable[[int, Any, Any, Progress], Any], *, client, progress: Progress,
          jobs: int) -> dict[Any, Any]:
    """``build(i, key, client, say)`` for each of ``keys`` (``i`` from 1), ``jobs`` at a
    time; returns ``{key: its result}`` in the order of ``keys``. With one job (or one
    key) every call gets the caller's ``client``; otherwise each worker thread opens a
    docker client of its own (closed at the end; an ImageError opening it is that key's
    result). ``say`` is ``progress`` called from one thread at a time."""
    lock = threading.Lock()

    def say(message: str) -> None:
        with lock:
            progress(message)

    if jobs == 1 or len(keys) < 2:
        return {key: build(i, key, client, say) for i, key in enumerate(keys, 1)}
    from concurrent.futures import ThreadPoolExecutor

    local = threading.local()
    clients: list[Any] = []

    def in_thread(i: int, key: Any) -> Any:
        if not hasattr(local, "client"):
            try:
                local.client = _client()
            except ImageError as e:
                return e
            with lock:
                clients.append(local.client)
        return build(i, key, local.client, say)

    try:
        with ThreadPoolExecutor(max_workers=min(jobs, len(keys)), thread_name_prefix="image-build") as pool:
            futures = [pool.submit(in_thread, i, key) for i, key in enumerate(keys, 1)]
            return {key: f.result() for key, f in zip(keys, futures, strict=True)}
    finally:
        for c in clients:
            c.close()


def ensure_server_image(name: str, version: str | None = None, *, client=None, progress: Progress = print,
                        rebuild: bool = False) -> tuple[str, str, bool]:
    """Build the image for server ``name`` at ``version`` unless an image with the same
    tag and the same context hash (label ``xferlab.context_hash``) exists.

    The base image is bootstrapped first when missing (:func:`bootstrap_base`).
    Returns (tag, image ID, built now). Raises ImageError for an unknown server, a
    server without a Dockerfile, a base image that cannot be bootstrapped, or a failed build."""
    spec = SERVER_IMAGES.get(name)
    if spec is None:
        raise ImageError(f"no image for server {name!r}; known: {', '.join(SERVER_IMAGES)}")
    if not (spec.context / spec.dockerfile).is_file():
        raise ImageError(f"{name}: {spec.context / spec.dockerfile} does not exist")
    if version is not None and spec.version_arg is None:
        raise ImageError(f"{name}: one version per image (Debian's package / the source tree); "
                         f"version {version!r} cannot be requested")
    client = client or _client()

    ensure_base(client, progress=progress)
    base_id = client.images.get(BASE_TAG).id
    buildargs = spec.build_args(version)
    chash = server_context_hash(spec, version, base_id)
    tag = server_tag(name, version)
    with build_lock(tag):
        return _build_server_image(client, spec, name, version, tag, chash, buildargs, rebuild=rebuild,
                                   progress=progress)


def _build_server_image(client, spec, name: str, version: str | None, tag: str, chash: str,
                        buildargs: dict[str, str], *, rebuild: bool, progress: Progress) -> tuple[str, str, bool]:
    """The body of :func:`ensure_server_image` once its build lock is held: the tagged image
    when its context hash is ``chash`` (and not ``rebuild``), else a new build."""
    import docker

    if not rebuild:
        try:
            img = client.images.get(tag)
            if img.labels.get("xferlab.context_hash") == chash:
                return tag, img.id, False
            progress(f"{tag}: build context changed; rebuilding")
        except docker.errors.ImageNotFound:
            pass
    labels = {LABEL: "server", "xferlab.server": name, "xferlab.version": version or "",
              "xferlab.context_hash": chash}
    iid = build_image(client, context=spec.context, dockerfile=spec.dockerfile, tag=tag, buildargs=buildargs,
                 labels=labels, progress=progress)
    return tag, iid, True


def ensure_lab_image(tag: str, *, client=None, progress: Progress = print, rebuild: bool = False) -> str:
    """Build one of :data:`LAB_IMAGES` (postgres, app) unless its context is unchanged.
    Returns the image ID; raises ImageError."""
    if tag not in LAB_IMAGES:
        raise ImageError(f"unknown lab image {tag!r}; known: {', '.join(LAB_IMAGES)}")
    context, dockerfile = LAB_IMAGES[tag]
    client = client or _client()
    import docker

    ensure_base(client, progress=progress)
    base_id = client.images.get(BASE_TAG).id
    if context == REPO_ROOT:  # the app image: hash what it copies, not the whole checkout
        parts = [REPO_ROOT / p for p in ("pyproject.toml", "runner", "dashboard", "migrations", "alembic.ini",
                                         "servers", dockerfile)]
        h = hashlib.sha256(base_id.encode())
        for p in parts:
            if p.is_file():
                h.update(p.read_bytes())
            elif p.is_dir():
                h.update(context_hash(p).encode())
        chash = h.hexdigest()[:16]
    else:
        chash = context_hash(context, {"base": base_id})
    if not rebuild:
        try:
            if client.images.get(tag).labels.get("xferlab.context_hash") == chash:
                return client.images.get(tag).id
        except docker.errors.ImageNotFound:
            pass
    return build_image(client, context=context, dockerfile=dockerfile, tag=tag, buildargs={},
                  labels={LABEL: "lab", "xferlab.context_hash": chash}, progress=progress)


def ensure_lab_images(tags: Sequence[str], *, client=None, progress: Progress = print, rebuild: bool = False,
                      jobs: int = BUILD_JOBS) -> dict[str, str | ImageError]:
    """:func:`ensure_lab_image` for each of ``tags`` (duplicates once), ``jobs`` at a time
    (with more than one, each worker thread with a docker client of its own), its lines
    prefixed with ``TAG: `` (``progress`` is called from one thread at a time). Returns ``{tag: image ID}`` in
    the order of ``tags``, or the ImageError of a tag that could not be built (the
    others are still built). Raises ValueError when ``jobs`` < 1."""
    if jobs < 1:
        raise ValueError(f"jobs must be at least 1, got {jobs}")
    todo = list(dict.fromkeys(tags))
    client = client or _client()
    ensure_base(client, progress=lambda m: progress(f"base image: {m}"))  # once, before the builds that need it

    def one(_i: int, tag: str, c, say: Progress) -> str | ImageError:
        try:
            return ensure_lab_image(tag, client=c, rebuild=rebuild, progress=_prefixed(say, f"{tag}: "))
        except ImageError as e:
            say(f"{tag}: failed: {str(e).splitlines()[0]}")
            return e

    return _each(todo, one, client=client, progress=progress, jobs=jobs)


def list_images(client=None) -> list[dict[str, Any]]:
    """Images labelled ``xferlab`` (base, servers, lab): dicts with tags, id (short),
    kind, server, context_hash, size_mib, created."""
    client = client or _client()
    out = []
    for img in client.images.list(filters={"label": LABEL, "dangling": False}):
        lb = img.labels or {}
        out.append({"tags": img.tags, "id": img.short_id, "kind": lb.get(LABEL, ""),
                    "server": lb.get("xferlab.server", ""), "context_hash": lb.get("xferlab.context_hash", ""),
                    "size_mib": round(img.attrs.get("Size", 0) / 2**20, 1),
                    "created": img.attrs.get("Created", "")[:19]})
    return sorted(out, key=lambda d: (d["kind"], d["tags"]))


def compose_command() -> list[str]:
    """The Compose command line here: ``["docker", "compose"]`` (v2 plugin) when it
    answers, else ``["docker-compose"]`` (v1). Raises ImageError when neither exists."""
    if shutil.which("docker"):
        r = subprocess.run(["docker", "compose", "version"], capture_output=True, text=True, timeout=30)
        if r.returncode == 0:
            return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    raise ImageError("neither `docker compose` (v2) nor `docker-compose` (v1) is installed")
