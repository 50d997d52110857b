"""Container images: the locally made Debian base, and one image per server under test.

No registry is needed: ``xferlab images bootstrap`` makes the Debian base image with
``debootstrap`` (mirror read from the host's APT sources at run time) and imports it
with ``docker import`` as :data:`BASE_TAG`, the ``FROM`` of every Dockerfile here. Every
other image then builds from Debian packages and PyPI through the tools' default
mirrors/indexes (builds use host networking, so a default bridge that cannot reach
the archive does not matter).

    xferlab images bootstrap [--force]      make xferlab/debian-base:bookworm (minutes; cached)
    xferlab images build [--all | NAME...]  build server images (and the lab's: postgres, app)
    xferlab images list                     images xferlab made, with ids and sizes

Server images are tagged ``xferlab/<server>:<version or "default">`` and labelled with
``xferlab.context_hash``, the sha256 of their build context, so an unchanged context
reuses the image and a changed one rebuilds it (see :func:`ensure_server_image`).
"""
from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

#: Tag of the locally bootstrapped Debian base (the Dockerfiles' ``FROM``).
BASE_TAG = "xferlab/debian-base:bookworm"
#: Debian suite of the base image.
SUITE = "bookworm"
#: Label put on every image and container xferlab makes.
LABEL = "xferlab"

REPO_ROOT = Path(__file__).resolve().parents[1]
SERVERS_DIR = Path(os.environ.get("XFERLAB_SERVERS_DIR") or REPO_ROOT / "servers")
COMPOSE_DIR = REPO_ROOT / "compose"

Progress = Callable[[str], None]


class ImageError(RuntimeError):
    """An image could not be made; the message says which and why (with the build log tail)."""


@dataclass(frozen=True)
class ServerImage:
    """How to build one server's image.

    Attributes:
        name: server name as ServerRequest.name has it (``pyftpdlib``, ``tpd``, ...).
        context: build context folder (``servers/<name>``).
        dockerfile: Dockerfile path relative to ``context``.
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
    version_arg: str | None = None
    entrypoint_script: Path | None = None


#: The six servers under test.
SERVER_IMAGES: dict[str, ServerImage] = {
    "pyftpdlib": ServerImage("pyftpdlib", SERVERS_DIR / "pyftpdlib", version_arg="PYFTPDLIB_VERSION"),
    "twisted": ServerImage("twisted", SERVERS_DIR / "twisted", version_arg="TWISTED_VERSION"),
    "vsftpd": ServerImage("vsftpd", SERVERS_DIR / "vsftpd"),
    "proftpd": ServerImage("proftpd", SERVERS_DIR / "proftpd"),
    "pureftpd": ServerImage("pureftpd", SERVERS_DIR / "pureftpd"),
    "tpd": ServerImage("tpd", SERVERS_DIR / "tpd", entrypoint_script=SERVERS_DIR / "tpd" / "container" / "entrypoint.sh"),
}

#: The lab's own images (docker-compose.yml): tag -> (context, dockerfile relative to context).
LAB_IMAGES: dict[str, tuple[Path, str]] = {
    "xferlab/postgres:15": (COMPOSE_DIR / "postgres", "Dockerfile"),
    "xferlab/app:latest": (REPO_ROOT, "compose/app/Dockerfile"),
}


def _client():
    """A Docker SDK client from the environment (DOCKER_HOST or the local socket).
    Raises ImageError when the SDK is missing or no engine answers."""
    try:
        import docker
    except ImportError as e:  # pragma: no cover - dependency of the project
        raise ImageError("the Docker SDK for Python is not installed (pip install 'docker>=7')") from e
    try:
        c = docker.from_env(timeout=600)
        c.ping()
        return c
    except Exception as e:
        raise ImageError(f"no Docker engine answers ({type(e).__name__}: {e}); "
                         "is dockerd running and /var/run/docker.sock reachable?") from e


# ----------------------------------------------------------------------------- bootstrap

def apt_mirror(suite: str = SUITE, roots: Iterable[Path] = (Path("/etc/apt/sources.list"),
                                                          Path("/etc/apt/sources.list.d"))) -> str:
    """The URI of the host's APT source serving ``suite`` (exactly, not ``suite-security``)
    with component ``main``, read from one-line ``.list`` and deb822 ``.sources`` files.

    Returns e.g. the archive URI the host itself uses. Raises ImageError when no source
    lists ``suite``: debootstrap needs a mirror and none is hard-coded here."""
    files: list[Path] = []
    for r in roots:
        if r.is_dir():
            files += sorted(p for p in r.iterdir() if p.suffix in (".list", ".sources"))
        elif r.is_file():
            files.append(r)
    for f in files:
        try:
            text = f.read_text()
        except OSError:
            continue
        if f.suffix == ".sources":
            for stanza in re.split(r"\n\s*\n", text):
                fields: dict[str, str] = {}
                for line in stanza.splitlines():
                    if line.startswith("#") or ":" not in line or line[:1].isspace():
                        continue
                    k, v = line.split(":", 1)
                    fields[k.strip().lower()] = v.strip()
                if ("deb" in fields.get("types", "").split() and suite in fields.get("suites", "").split()
                        and "main" in fields.get("components", "").split()
                        and fields.get("enabled", "yes").lower() != "no"):
                    return fields["uris"].split()[0]
        else:
            for line in text.splitlines():
                line = re.sub(r"\[[^]]*\]", "", line.split("#", 1)[0]).split()  # type: ignore[assignment]
                if len(line) >= 4 and line[0] == "deb" and line[2] == suite and "main" in line[3:]:
                    return line[1]
    raise ImageError(f"no APT source for Debian {suite!r} (component main) in "
                     f"{', '.join(str(r) for r in roots)}; debootstrap needs a mirror")


def can_bootstrap() -> bool:
    """True when :func:`bootstrap_base` can run here: root and debootstrap present."""
    return os.geteuid() == 0 and bool(shutil.which("debootstrap") or Path("/usr/sbin/debootstrap").exists())


def image_exists(client, tag: str) -> bool:
    """True when the engine has an image tagged ``tag``."""
    import docker

    try:
        client.images.get(tag)
        return True
    except docker.errors.ImageNotFound:
        return False


def _add_local_cas(root: Path, src: Path = Path("/usr/local/share/ca-certificates")) -> list[str]:
    """Copy the host's locally added CA certificates (Debian's place for them, e.g. a
    TLS-intercepting proxy's CA) into the debootstrap tree and run
    ``update-ca-certificates`` there (chroot), so builds reach the package index the way
    the host does. Returns the names copied (none: nothing to do)."""
    crts = sorted(p for p in src.glob("**/*.crt") if p.is_file()) if src.is_dir() else []
    if not crts:
        return []
    dst = root / "usr/local/share/ca-certificates"
    dst.mkdir(parents=True, exist_ok=True)
    for c in crts:
        shutil.copy2(c, dst / c.name)
    r = subprocess.run(["chroot", str(root), "update-ca-certificates"], capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise ImageError(f"update-ca-certificates in the base tree failed: {(r.stderr or r.stdout).strip()[-500:]}")
    return [c.name for c in crts]


def bootstrap_base(*, force: bool = False, progress: Progress = print, client=None,
                   timeout: float = 1800) -> str:
    """Make :data:`BASE_TAG` locally: ``debootstrap --variant=minbase bookworm`` into a
    temporary folder, then import that tree as an image (``docker import``). Skipped
    when the tag exists (unless ``force``).

    Returns the image ID. Raises ImageError (not root, debootstrap missing, no APT
    source, debootstrap failed or timed out after ``timeout`` seconds)."""
    client = client or _client()
    if not force and image_exists(client, BASE_TAG):
        img = client.images.get(BASE_TAG)
        progress(f"{BASE_TAG} exists ({img.short_id}); not rebuilding (use --force)")
        return img.id
    if os.geteuid() != 0:
        raise ImageError("images bootstrap: debootstrap needs root")
    deb = shutil.which("debootstrap") or ("/usr/sbin/debootstrap" if Path("/usr/sbin/debootstrap").exists() else None)
    if not deb:
        raise ImageError("images bootstrap: debootstrap not found; apt-get install debootstrap")
    mirror = apt_mirror()
    tmp = Path(tempfile.mkdtemp(prefix="xferlab-debootstrap-"))
    root = tmp / "root"
    try:
        progress(f"debootstrap --variant=minbase {SUITE} into {root} (mirror from the host's APT sources)")
        t0 = time.monotonic()
        try:
            r = subprocess.run([deb, "--variant=minbase", "--include=ca-certificates", SUITE, str(root), mirror],
                               capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired as e:
            raise ImageError(f"debootstrap timed out after {timeout:.0f} s") from e
        if r.returncode != 0:
            tail = "\n".join((r.stdout + r.stderr).strip().splitlines()[-20:])
            raise ImageError(f"debootstrap failed (exit {r.returncode}):\n{tail}")
        progress(f"debootstrap done in {time.monotonic() - t0:.0f} s; trimming and importing")
        # Smaller image; apt caches are refilled by each Dockerfile's apt-get update.
        for sub in ("var/cache/apt/archives", "var/lib/apt/lists"):
            d = root / sub
            for p in d.glob("*"):
                if p.is_file():
                    p.unlink()
        (root / "etc/apt/apt.conf.d/99xferlab").write_text(
            'APT::Install-Recommends "false";\nAPT::Install-Suggests "false";\n')
        added = _add_local_cas(root)
        if added:
            progress(f"base image trusts the host's locally added CA certificates: {', '.join(added)}")
        tar = tmp / "rootfs.tar"
        r = subprocess.run(["tar", "--numeric-owner", "--xattrs", "-C", str(root), "-cf", str(tar), "."],
                           capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            raise ImageError(f"tar of the debootstrap tree failed: {r.stderr.strip()[-800:]}")
        repo, tag = BASE_TAG.split(":")
        out = client.api.import_image_from_file(
            str(tar), repository=repo, tag=tag,
            changes=['CMD ["/bin/bash"]', "ENV DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8",
                     # pip (certifi) and requests use Debian's CA store, which includes the
                     # host's locally added CAs (TLS-intercepting proxies)
                     "ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt "
                     "REQUESTS_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt "
                     "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt PIP_DISABLE_PIP_VERSION_CHECK=1",
                     f"LABEL {LABEL}=base"])
        img = client.images.get(BASE_TAG)
        progress(f"imported {BASE_TAG} as {img.short_id} ({img.attrs.get('Size', 0) / 2**20:.0f} MiB)")
        return img.id
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# ----------------------------------------------------------------------------- builds

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


def _build(client, *, context: Path, dockerfile: str, tag: str, buildargs: dict[str, str],
           labels: dict[str, str], progress: Progress, timeout: float = 1800) -> str:
    """docker build with host networking (the archive and the package index are reached
    the way the host reaches them). Returns the image ID; raises ImageError with the
    last lines of the build log."""
    import docker

    if not (context / dockerfile).is_file():
        raise ImageError(f"building {tag}: {context / dockerfile} does not exist")
    if not image_exists(client, BASE_TAG):
        raise ImageError(f"base image {BASE_TAG} missing: run `xferlab images bootstrap` first "
                         "(or, where a registry is reachable, tag debian:bookworm-slim as it)")
    progress(f"building {tag} from {context / dockerfile}")
    t0 = time.monotonic()
    tail: list[str] = []
    image_id = None
    try:
        for chunk in client.api.build(path=str(context), dockerfile=dockerfile, tag=tag, buildargs=buildargs,
                                      labels=labels, network_mode="host", rm=True, forcerm=True, decode=True,
                                      timeout=timeout):
            if "stream" in chunk:
                for line in chunk["stream"].splitlines():
                    if line.strip():
                        tail = (tail + [line])[-25:]
            if "aux" in chunk and "ID" in chunk["aux"]:
                image_id = chunk["aux"]["ID"]
            if "error" in chunk:
                raise ImageError(f"building {tag} failed: {chunk['error'].strip()}\n" + "\n".join(tail))
            if time.monotonic() - t0 > timeout:
                raise ImageError(f"building {tag}: gave up after {timeout:.0f} s\n" + "\n".join(tail))
    except docker.errors.APIError as e:
        raise ImageError(f"building {tag} failed: {e}\n" + "\n".join(tail)) from e
    img = client.images.get(tag)
    progress(f"built {tag} ({img.short_id}) in {time.monotonic() - t0:.0f} s")
    return image_id or img.id


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
    import docker

    if not image_exists(client, BASE_TAG):  # first use on this engine: make the base offline
        progress(f"{BASE_TAG} missing: bootstrapping it with debootstrap (once, about a minute)")
        bootstrap_base(progress=progress, client=client)
    base_id = client.images.get(BASE_TAG).id
    buildargs = {spec.version_arg: version or ""} if spec.version_arg else {}
    chash = context_hash(spec.context, {"buildargs": buildargs, "base": base_id})
    tag = server_tag(name, version)
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
    iid = _build(client, context=spec.context, dockerfile=spec.dockerfile, tag=tag, buildargs=buildargs,
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

    if not image_exists(client, BASE_TAG):  # first use on this engine: make the base offline
        progress(f"{BASE_TAG} missing: bootstrapping it with debootstrap (once, about a minute)")
        bootstrap_base(progress=progress, client=client)
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
    return _build(client, context=context, dockerfile=dockerfile, tag=tag, buildargs={},
                  labels={LABEL: "lab", "xferlab.context_hash": chash}, progress=progress)


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


# ----------------------------------------------------------------------------- CLI

def add_arguments(p: argparse.ArgumentParser) -> None:
    """The ``xferlab images`` subcommands (used by runner/cli.py)."""
    sub = p.add_subparsers(dest="images_cmd", metavar="ACTION")
    b = sub.add_parser("bootstrap", help=f"make {BASE_TAG} with debootstrap + docker import (no registry)")
    b.add_argument("--force", action="store_true", help="rebuild even if the tag exists")
    bd = sub.add_parser("build", help="build server images (NAME[=VERSION]...) or --all (servers + lab)")
    bd.add_argument("names", nargs="*", metavar="NAME[=VERSION]")
    bd.add_argument("--all", action="store_true", help="every server image and the lab's postgres/app images")
    bd.add_argument("--rebuild", action="store_true", help="build even when the context is unchanged")
    sub.add_parser("list", help="images xferlab made")


def main(args: argparse.Namespace) -> int:
    """Run ``xferlab images ACTION``. Returns the exit status (0 ok, 1 a build failed,
    2 usage). Errors are printed naming the image and the reason."""
    cmd = getattr(args, "images_cmd", None)
    try:
        if cmd == "bootstrap":
            bootstrap_base(force=args.force)
            return 0
        if cmd == "build":
            if not args.names and not args.all:
                print("xferlab images build: give NAME[=VERSION]... or --all", file=sys.stderr)
                return 2
            client = _client()
            if not image_exists(client, BASE_TAG):
                bootstrap_base(client=client)
            todo: list[tuple[str, str | None]] = [(n, None) for n in SERVER_IMAGES] if args.all else []
            for n in args.names:
                name, _, ver = n.partition("=")
                todo.append((name, ver or None))
            failed = []
            for name, ver in todo:
                try:
                    tag, iid, built = ensure_server_image(name, ver, client=client, rebuild=args.rebuild)
                    print(f"{tag}: {iid[7:19]}{'' if built else ' (up to date)'}")
                except ImageError as e:
                    failed.append(name)
                    print(f"xferlab images: {e}", file=sys.stderr)
            if args.all:
                for tag in LAB_IMAGES:
                    try:
                        iid = ensure_lab_image(tag, client=client, rebuild=args.rebuild)
                        print(f"{tag}: {iid[7:19]}")
                    except ImageError as e:
                        failed.append(tag)
                        print(f"xferlab images: {e}", file=sys.stderr)
            try:  # untagged leftovers of rebuilt images and build stages
                client.images.prune(filters={"dangling": True, "label": LABEL})
            except Exception:  # noqa: BLE001 - pruning is housekeeping only
                pass
            if failed:
                print(f"xferlab images: failed: {', '.join(failed)}", file=sys.stderr)
                return 1
            return 0
        if cmd == "list":
            rows = list_images()
            print(f"{'tag':44} {'id':12} {'kind':7} {'size':>9}  created")
            for r in rows:
                for t in r["tags"] or ["<none>"]:
                    print(f"{t:44} {r['id'][7:]:12} {r['kind']:7} {r['size_mib']:7.1f}Mi  {r['created']}")
            return 0
        print("xferlab images: give an action: bootstrap, build or list", file=sys.stderr)
        return 2
    except ImageError as e:
        print(f"xferlab images: {e}", file=sys.stderr)
        return 1
