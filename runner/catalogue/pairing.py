"""Which (server, workload) pairs of a campaign can run: a workload speaks one protocol
(runner.catalogue.workloads.WorkloadInfo.protocol) and a server speaks one or both
(runner.catalogue.servers.SERVER_PROTOCOLS); an HTTP upload also needs a server that
stores its method (catalogue.upload_skip_reason). A pair that cannot run is a skipped
cell with the reason; a spec in which no pair can run is a spec error (runner.spec.model.parse_spec).

Plain functions of names and parameters: no backend, no driver, nothing started.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from runner.catalogue.servers import speaks, tls_skip_reason, upload_skip_reason
from runner.catalogue.workloads import WORKLOADS, WorkloadParams


def pair_skip_reason(server: str, workload: str, params: WorkloadParams | Mapping[str, Any]) -> str | None:
    """Why ``server`` (a ServerSpec name, e.g. ``"nginx"``) cannot run ``workload`` (a
    runner.catalogue.workloads.WORKLOADS name) with ``params`` (WorkloadParams, or their dict as a
    cell stores them), or None when it can. Examples: ``("go-http", "stor", ...)`` ->
    ``"go-http does not speak FTP: stor is an FTP workload"``; ``("nginx", "http_upload",
    {"method": "post"})`` -> the catalogue's note on nginx and POST. An unknown workload
    gives None (the spec rejects it elsewhere)."""
    info = WORKLOADS.get(workload)
    if info is None:
        return None
    if not speaks(server, info.protocol):
        proto = info.protocol.upper()
        return f"{server} does not speak {proto}: {workload} is an {proto} workload"
    if workload == "http_upload":
        method = params.method if isinstance(params, WorkloadParams) else str(params.get("method", "put"))
        return upload_skip_reason(server, method)
    return None


def tls_pair_skip_reason(server: str, variant: Mapping[str, Any], workload: str, driver: Any) -> str | None:
    """Why a cell with ``variant`` (its ``tls`` key: ``none``/``explicit``/``implicit``) cannot
    run ``workload`` on ``server`` with ``driver`` (an object with ``name`` and, when it
    speaks TLS, ``tls_modes``), or None. Reasons: the server lacks the mode
    (runner.catalogue.servers.tls_skip_reason), the mode is FTPS and the workload an
    HTTP one or the mode ``https`` and the workload an FTP one, or the driver lacks the mode."""
    mode = str(variant.get("tls", "none"))
    if mode == "none":
        return None
    info = WORKLOADS.get(workload)
    if info is not None and (info.protocol == "http") != (mode == "https"):
        what = "HTTPS, for HTTP workloads" if mode == "https" else "FTPS, for FTP workloads"
        return f"tls={mode} is {what}; {workload} is an {info.protocol.upper()} workload"
    if why := tls_skip_reason(server, mode):
        return why
    if mode not in getattr(driver, "tls_modes", ()):
        return (f"driver {getattr(driver, 'name', driver)!r} has no {mode} TLS "
                f"({'xferlab-http' if mode == 'https' else 'xferlab-ftp'} has)")
    return None


def no_valid_pair(servers: Iterable[Any], workloads: Iterable[Any]) -> str | None:
    """A sentence when no (server, workload) pair of a spec can run, else None.
    ``servers``: objects with ``.name`` (runner.spec.model.ServerSpec); ``workloads``: objects
    with ``.names()`` and ``.params`` (runner.spec.model.WorkloadSpec). The sentence names each
    pair's reason, at most 6 of them, e.g. ``"no server of the spec can run any of its
    workloads: go-http does not speak FTP: stor is an FTP workload"``."""
    reasons: list[str] = []
    for w in workloads:
        for name in w.names():
            for s in servers:
                why = pair_skip_reason(s.name, name, w.params)
                if why is None:
                    return None
                if why not in reasons:
                    reasons.append(why)
    if not reasons:
        return None
    more = f" (and {len(reasons) - 6} more)" if len(reasons) > 6 else ""
    return "no server of the spec can run any of its workloads: " + "; ".join(reasons[:6]) + more
