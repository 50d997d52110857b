"""Container images: the locally made Debian base, and one image per server under test.

No registry is needed: ``xferlab images bootstrap`` makes the Debian base image with
``debootstrap`` (mirror read from the host's APT sources at run time) and imports it
with ``docker import`` as :data:`BASE_TAG`, the ``FROM`` of every Dockerfile here
(:mod:`.base`). Every other image then builds from Debian packages and PyPI through the
tools' default mirrors/indexes (builds use host networking, so a default bridge that
cannot reach the archive does not matter; :mod:`.build`).

    xferlab images bootstrap [--force]      make xferlab/debian-base:bookworm (minutes; cached)
    xferlab images build [--all | NAME...]  build server images (and the lab's: postgres, app)
    xferlab images list                     images xferlab made, with ids and sizes

Server images are tagged ``xferlab/<server>:<version or "default">`` and labelled with
``xferlab.context_hash``, the sha256 of their build context, so an unchanged context
reuses the image and a changed one rebuilds it (see :func:`ensure_server_image`). One
Dockerfile serves a family: ``servers/Dockerfile.python`` (pyftpdlib, twisted) and
``servers/Dockerfile.debian`` (proftpd, pure-ftpd), with build arguments.
"""
from __future__ import annotations

from runner.backends.docker.images.base import (
    BASE_TAG,
    LABEL,
    SUITE,
    ImageError,
    apt_mirror,
    bootstrap_base,
    can_bootstrap,
    image_exists,
)
from runner.backends.docker.images.build import (
    COMPOSE_DIR,
    LAB_IMAGES,
    SERVER_IMAGES,
    ImageState,
    ServerImage,
    build_image,
    build_lock,
    compose_command,
    context_hash,
    ensure_base,
    ensure_lab_image,
    ensure_lab_images,
    ensure_server_image,
    ensure_server_images,
    list_images,
    server_context_hash,
    server_image_state,
    server_tag,
)
from runner.backends.paths import REPO_ROOT, SERVERS_DIR

__all__ = ["BASE_TAG", "COMPOSE_DIR", "LABEL", "LAB_IMAGES", "REPO_ROOT", "SERVERS_DIR", "SERVER_IMAGES", "SUITE",
           "ImageError", "ImageState", "ServerImage", "apt_mirror", "bootstrap_base", "build_image", "build_lock",
           "can_bootstrap", "compose_command", "context_hash", "ensure_base", "ensure_lab_image", "ensure_lab_images",
           "ensure_server_image", "ensure_server_images", "image_exists", "list_images", "server_context_hash",
           "server_image_state", "server_tag"]
