"""Subcommands around the lab: ``servers``, ``selftest``, ``db``, ``worker``, ``images``,
``loadgen``, ``serve``, ``dashboard``."""
from __future__ import annotations

import argparse
from datetime import UTC
from pathlib import Path

from runner.cli import common
from runner.cli.common import CliError


def _ago(when) -> str:
    """``45 s``, ``12 min``, ``2 h``, ``3 d`` since the aware datetime ``when``."""
    from datetime import datetime

    sec = max(0.0, (datetime.now(UTC) - when).total_seconds())
    for unit, n in (("d", 86400), ("h", 3600), ("min", 60)):
        if sec >= n:
            return f"{sec / n:.0f} {unit}"
    return f"{sec:.0f} s"


def _local_status(name: str, reason: str | None) -> dict:
    """The local backend's status of one server: ``can run``, ``on first use`` (a
    Debian package fetched into the cache when first run) or ``skipped`` with the reason."""
    if reason is None:
        return {"status": "can run", "detail": ""}
    from runner.backends.local import debs

    if name in debs.DEB_SERVERS and debs.find_server_binary(name) is None:
        return {"status": "on first use", "detail": f"fetched on first use (or now: xferlab servers --fetch {name})"}
    return {"status": "skipped", "detail": reason}


def _docker_statuses(names: list[str]) -> tuple[dict, dict[str, dict]]:
    """The docker engine (``{"answers": bool, "reason": str|None}``) and each server's
    image status under the docker backend; no build, no network beyond the engine's socket."""
    from runner.backends.docker import images

    try:
        import docker

        client = docker.from_env(timeout=10)
        client.ping()
    except Exception as e:  # noqa: BLE001 - any failure means: no engine to use
        return {"answers": False, "reason": f"{type(e).__name__}: {e}"}, {}
    engine = {"answers": True, "reason": None, "base_image": images.image_exists(client, images.BASE_TAG),
              "can_bootstrap": images.can_bootstrap()}
    versions: dict[str, list[str]] = {}
    for img in client.images.list(filters={"label": "xferlab=server", "dangling": False}):
        for tag in img.tags:
            repo, _, ver = tag.rpartition(":")
            if repo.startswith("xferlab/") and ver != "default":
                versions.setdefault(repo[len("xferlab/"):], []).append(ver)
    out: dict[str, dict] = {}
    for name in names:
        if name not in images.SERVER_IMAGES:
            out[name] = {"status": "no image", "detail": "no image for this server under the docker backend"}
            continue
        st = images.server_image_state(name, None, client=client)
        build = f"xferlab images build {name}"
        if st.state == "ready":
            detail = f"image ready ({st.tag}" + (f", built {_ago(st.created)} ago)" if st.created else ")")
        elif st.state == "outdated":
            detail = f"image outdated (build context changed): rebuilt on first use ({build})"
        elif st.state == "missing":
            detail = f"image built on first use ({build})"
        elif engine["can_bootstrap"]:
            detail = f"base image bootstrapped, then image built, on first use ({build})"
        else:
            detail = (f"base image {images.BASE_TAG} missing and cannot be made here (needs root and "
                      "debootstrap): xferlab run uses the local backend")
        other = sorted(versions.get(name, []))
        if other:
            detail += f"; also built: {', '.join(other)}"
        out[name] = {"status": st.state, "detail": detail, "tag": st.tag, "image_id": st.image_id,
                     "built": st.created.isoformat() if st.created else None, "versions": other}
    return engine, out


def servers_report() -> dict:
    """What ``xferlab servers`` shows, as data (its ``--json``): ``run_backend`` (what
    ``xferlab run`` picks by default), ``docker_engine`` (answers, reason when not, base
    image present, can bootstrap), and ``servers``: one dict per server with ``name``,
    ``local`` and ``docker`` (``status``, ``detail``: what happens or what to run) and
    ``variant_options``, ``protocols`` (``["ftp"]``, ``["ftp", "http"]``, ``["http"]``);
    then seed 002's servers that cannot run here (Grizzly, Mordor, vibe.d) with status
    ``not available`` and the reason on both sides. Fast: nothing is built, fetched or
    downloaded."""
    from runner.backends import local
    from runner.catalogue.servers import SERVER_PROTOCOLS, UNAVAILABLE_SERVERS
    from runner.catalogue.variants import options_for

    local_rows = local.available_servers()
    names = [n for n, _ in local_rows]
    from runner.backends.docker import images

    names += [n for n in images.SERVER_IMAGES if n not in names]
    engine, docker_rows = _docker_statuses(names)
    # as runner.campaign.loop.resolve_backend("auto") decides, without making a backend
    run_backend = "docker" if engine["answers"] and (engine["base_image"] or engine["can_bootstrap"]) else "local"
    reasons = dict(local_rows)
    servers = []
    for name in names:
        loc = (_local_status(name, reasons[name]) if name in reasons
               else {"status": "skipped", "detail": "no local recipe"})
        dk = docker_rows.get(name) or {"status": "no engine", "detail": ""}
        servers.append({"name": name, "protocols": sorted(SERVER_PROTOCOLS.get(name, ())), "local": loc,
                        "docker": dk, "variant_options": list(options_for(name))})
    for name, why in UNAVAILABLE_SERVERS.items():  # seed 002's servers that cannot run here
        gone = {"status": "not available", "detail": why}
        servers.append({"name": name, "protocols": ["http"], "local": gone, "docker": dict(gone),
                        "variant_options": []})
    return {"run_backend": run_backend, "docker_engine": engine, "servers": servers}


def cmd_servers(args: argparse.Namespace) -> int:
    import json

    from rich.table import Table

    console = common.console()
    if args.fetch:
        from runner.backends.base import ServerSkipped
        from runner.backends.local.debs import DEB_SERVERS, fetch_debian_server

        if args.fetch not in DEB_SERVERS:
            raise CliError(f"--fetch {args.fetch!r}: not a Debian-packaged server; one of {', '.join(DEB_SERVERS)}")
        try:
            path = fetch_debian_server(args.fetch)
        except ServerSkipped as exc:
            raise CliError(f"--fetch {args.fetch}: {exc}") from None
        if not args.json:
            console.print(f"{args.fetch}: extracted to {path}")
    rep = servers_report()
    if args.json:
        print(json.dumps(rep, indent=2))
        return 0
    engine = rep["docker_engine"]
    style = {"can run": "green", "ready": "green", "on first use": "cyan", "missing": "cyan", "outdated": "cyan",
             "no-base": "yellow", "skipped": "yellow", "no engine": "dim", "no image": "yellow",
             "not available": "dim"}
    t = Table("server", "protocols", "local backend", "docker backend", "variant options (* docker backend only)")
    for row in rep["servers"]:
        cells = []
        for side in ("local", "docker"):
            st = row[side]
            text = f"[{style.get(st['status'], 'white')}]{st['status']}[/]"
            cells.append(text + (f"\n{st['detail']}" if st["detail"] else ""))
        t.add_row(row["name"], ", ".join(row["protocols"]), *cells, ", ".join(row["variant_options"]))
    console.print(t)
    if not engine["answers"]:
        console.print(f"docker backend: no Docker engine answers ({engine['reason']})", markup=False)
    console.print(f"xferlab run uses the {rep['run_backend']} backend by default (--backend local|docker to choose)")
    return 0


def cmd_selftest(args: argparse.Namespace) -> int:
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "loadgen_selftest.py"
    if not path.exists():
        raise CliError(f"selftest script not found at {path}")
    spec = importlib.util.spec_from_file_location("loadgen_selftest", path)
    if spec is None or spec.loader is None:
        raise CliError(f"cannot load the selftest script {path}")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return int(mod.main(args.rest) or 0)


def cmd_db(args: argparse.Namespace) -> int:
    engine = common.engine()  # connects and migrates
    print(engine.url.render_as_string(hide_password=True))
    return 0


def cmd_worker(args: argparse.Namespace) -> int:
    from runner.campaign import worker

    return int(worker.main(args) or 0)


def cmd_images(args: argparse.Namespace) -> int:
    from runner.cli import images

    return int(images.main(args) or 0)


def cmd_loadgen(args: argparse.Namespace) -> int:
    from runner.multihost import loadgen as loadgen_remote

    return int(loadgen_remote.main(args) or 0)


def cmd_serve(args: argparse.Namespace) -> int:
    from runner.multihost import serve

    return int(serve.serve_main(args) or 0)


def cmd_dashboard(args: argparse.Namespace) -> int:
    import uvicorn

    uvicorn.run("dashboard.app:create_app", factory=True, host=args.host, port=args.port, log_level="info")
    return 0

