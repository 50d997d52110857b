"""Server images built from a source tree at a commit (runner.backends.source), tagged
``xferlab/<server>:git-<commit[:16]>[-<dirty[:12]>]`` and labelled with the commit:

- pyftpdlib, twisted: ``servers/Dockerfile.python-source`` over a context made in the
  build cache (``<build_root>/docker-<server>/``: that Dockerfile, ``servers/<server>/`` as
  ``server/`` and the exported tree as ``src/``);
- tpd, go-http, netty: the exported tree's own ``servers/<server>`` folder and Dockerfile, as that
  commit has them (tpd's container entrypoint is this checkout's, as for every tpd image);
- proftpd: ``servers/Dockerfile.c-source`` over a context made in the build cache
  (``<build_root>/docker-proftpd/``: that Dockerfile, ``servers/proftpd/`` as ``server/``,
  the exported tree as ``src/`` and ``build.sh``, the local backend's recipe as a script:
  runner.backends.local.csrcbuild.build_script).

An image already tagged for the same commit and dirty hash is reused.
"""
from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runner.backends.docker.images.base import LABEL, ImageError, Progress, image_exists
from runner.backends.docker.images.build import build_image
from runner.backends.paths import SERVERS_DIR
from runner.backends.source import ResolvedSource, export, resolve

#: Servers whose image can be built from a source tree, and the package each installs.
SOURCE_IMAGES: dict[str, str | None] = {"pyftpdlib": "pyftpdlib", "twisted": "twisted", "tpd": None, "go-http": None,
                                          "netty": None, "proftpd": None}
#: Of those, the C servers built by their recipe in servers/Dockerfile.c-source.
C_SOURCE_IMAGES: tuple[str, ...] = ("proftpd",)
#: The label holding the commit (and dirty hash) an image was built from.
SOURCE_LABEL = "xferlab.source"


@dataclass(frozen=True)
class SourceImage:
    """A server image built from source: ``tag``, ``image_id``, ``built`` (now, not reused)
    and ``source`` (the resolved commit)."""

    tag: str
    image_id: str
    built: bool
    source: ResolvedSource


def _context(name: str, src: ResolvedSource, tree: Path, dockerfile: str, files: dict[str, str]) -> Path:
    """The build context ``<build_root>/docker-<name>/`` of server ``name`` at ``src``, made
    once per commit: ``servers/<dockerfile>`` as ``Dockerfile``, ``servers/<name>/`` as
    ``server/``, the exported ``tree`` as ``src/`` and ``files`` (name -> text)."""
    ctx = src.build_root / f"docker-{name}"
    if (ctx / ".ready").is_file():
        return ctx
    shutil.rmtree(ctx, ignore_errors=True)
    ctx.mkdir(parents=True)
    shutil.copy2(SERVERS_DIR / dockerfile, ctx / "Dockerfile")
    shutil.copytree(SERVERS_DIR / name, ctx / "server", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(tree, ctx / "src", symlinks=True)
    for fname, text in files.items():
        (ctx / fname).write_text(text)
    (ctx / ".ready").write_text(src.commit + "\n")
    return ctx


def _c_context(name: str, src: ResolvedSource, tree: Path) -> Path:
    """The build context of a C server at ``src`` (:func:`_context` with
    ``Dockerfile.c-source`` and the recipe's ``build.sh``). Raises ImageError when the
    tree is not that server's."""
    from runner.backends.local.csrcbuild import build_script, tree_problem

    problem = tree_problem(name, tree)
    if problem:
        raise ImageError(f"{name} at {src.short}: {src.location} {problem}")
    return _context(name, src, tree, "Dockerfile.c-source", {"build.sh": build_script(name, tree)})


def ensure_source_image(name: str, location: str, ref: str | None, *, client: Any,
                        progress: Progress) -> SourceImage:
    """The image of server ``name`` built from ``location`` at ``ref`` (see the module
    docstring), built when no image has its tag and commit label.

    Raises:
        ServerFailed: the source does not resolve or export (runner.backends.source).
        ImageError: no such server can be built from source, the tree has no tpd
            Dockerfile, or the build failed (the build log's last lines).
    """
    if name not in SOURCE_IMAGES:
        raise ImageError(f"{name} cannot be built from source (servers that can: {', '.join(SOURCE_IMAGES)})")
    src = resolve(location, ref)
    tree = export(src)
    tag = f"xferlab/{name}:git-{src.key}"
    if image_exists(client, tag):
        img = client.images.get(tag)
        if (img.labels or {}).get(SOURCE_LABEL) == src.key:
            return SourceImage(tag, img.id, False, src)
    package = SOURCE_IMAGES[name]
    if name in C_SOURCE_IMAGES:
        context, dockerfile, args = _c_context(name, src, tree), "Dockerfile", {"SERVER": name}
    elif package is not None:
        context, dockerfile = _context(name, src, tree, "Dockerfile.python-source", {}), "Dockerfile"
        args = {"SERVER": name, "PACKAGE": package}
    else:
        context, dockerfile, args = tree / "servers" / name, "Dockerfile", {}
        if not (context / dockerfile).is_file():
            raise ImageError(f"{name} at {src.short}: {location} has no servers/{name}/Dockerfile at that commit")
    iid = build_image(client, context=context, dockerfile=dockerfile, tag=tag, buildargs=args,
                      labels={LABEL: "server", "xferlab.server": name, SOURCE_LABEL: src.key,
                              "xferlab.source_commit": src.commit},
                      progress=progress, prefix=f"{name} at {src.short}: ")
    return SourceImage(tag, iid, True, src)
