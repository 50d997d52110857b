"""The locally made Debian base image (:data:`BASE_TAG`), the ``FROM`` of every
Dockerfile: ``debootstrap`` with the mirror read from the host's APT sources at run
time, imported with ``docker import``; and the engine client the image code uses."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path

#: Tag of the locally bootstrapped Debian base (the Dockerfiles' ``FROM``).
BASE_TAG = "xferlab/debian-base:bookworm"
#: Debian suite of the base image.
SUITE = "bookworm"
#: Label put on every image and container xferlab makes.
LABEL = "xferlab"

Progress = Callable[[str], None]


class ImageError(RuntimeError):
    """An image could not be made; the message says which and why (with the build log tail)."""


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
        client.api.import_image_from_file(
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
