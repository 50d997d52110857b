"""``xferlab images bootstrap | build | list``."""
from __future__ import annotations

import argparse
import sys

from runner.backends.docker.images.base import BASE_TAG, LABEL, ImageError, _client, bootstrap_base, image_exists
from runner.backends.docker.images.build import (
    BUILD_JOBS,
    LAB_IMAGES,
    SERVER_IMAGES,
    ensure_lab_images,
    ensure_server_images,
    list_images,
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The ``xferlab images`` subcommands (used by runner/cli.py)."""
    sub = p.add_subparsers(dest="images_cmd", metavar="ACTION")
    b = sub.add_parser("bootstrap", help=f"make {BASE_TAG} with debootstrap + docker import (no registry)")
    b.add_argument("--force", action="store_true", help="rebuild even if the tag exists")
    bd = sub.add_parser("build", help="build server images (NAME[=VERSION]...) or --all (servers + lab)")
    bd.add_argument("names", nargs="*", metavar="NAME[=VERSION]")
    bd.add_argument("--all", action="store_true", help="every server image and the lab's postgres/app images")
    bd.add_argument("--rebuild", action="store_true", help="build even when the context is unchanged")
    bd.add_argument("--jobs", type=_jobs, default=BUILD_JOBS, metavar="N",
                    help=f"server images built at once (default {BUILD_JOBS}; 1: one after another)")
    sub.add_parser("list", help="images xferlab made")


def _jobs(text: str) -> int:
    """``--jobs``: an integer from 1 to 8."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--jobs wants a whole number from 1 to 8, got {text!r}") from None
    if not 1 <= n <= 8:
        raise argparse.ArgumentTypeError(f"--jobs wants a whole number from 1 to 8, got {n}")
    return n


def main(args: argparse.Namespace) -> int:
    """Run ``xferlab images ACTION``. Returns the exit status (0 ok, 1 a build failed,
    2 usage). Errors are printed naming the image and the reason."""
    cmd = getattr(args, "images_cmd", None)
    try:
        if cmd == "bootstrap":
            bootstrap_base(force=args.force, progress=lambda m: print(m, flush=True))
            return 0
        if cmd == "build":
            if not args.names and not args.all:
                print("xferlab images build: give NAME[=VERSION]... or --all", file=sys.stderr)
                return 2
            client = _client()
            if not image_exists(client, BASE_TAG):
                bootstrap_base(client=client, progress=lambda m: print(m, flush=True))
            todo: list[tuple[str, str | None]] = [(n, None) for n in SERVER_IMAGES] if args.all else []
            for n in args.names:
                name, _, ver = n.partition("=")
                todo.append((name, ver or None))
            failed = []
            got = ensure_server_images(todo, client=client, rebuild=args.rebuild, jobs=args.jobs,
                                       progress=lambda m: print(m, flush=True))
            for (name, _ver), res in got.items():
                if isinstance(res, ImageError):
                    failed.append(name)
                    print(f"xferlab images: {res}", file=sys.stderr)
                else:
                    tag, iid, built = res
                    print(f"{tag}: {iid[7:19]}{'' if built else ' (up to date)'}", flush=True)
            if args.all:
                for tag, lab in ensure_lab_images(list(LAB_IMAGES), client=client, rebuild=args.rebuild,
                                                  jobs=args.jobs, progress=lambda m: print(m, flush=True)).items():
                    if isinstance(lab, ImageError):
                        failed.append(tag)
                        print(f"xferlab images: {lab}", file=sys.stderr)
                    else:
                        print(f"{tag}: {lab[7:19]}")
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
