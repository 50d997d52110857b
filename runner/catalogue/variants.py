"""Variant options: the catalogue of ``variant:`` keys a server build can take.

A variant option changes how one server build is configured (``use_sendfile: false``)
or where it runs (``storage: tmpfs``). Every key is listed here with the servers that
honour it and the backends that can apply it, so that a typo or a key a server would
silently ignore is rejected when the spec is validated, before anything runs
(:func:`check_variant`), and a key the chosen backend cannot apply makes the server
*skipped with its reason* (:func:`backend_problem`), never silently ignored.

``storage`` is the storage axis of seed 002 (the upload servers written to an SSD and
to tmpfs): ``disk`` (the default) or ``tmpfs`` for the home the server reads and
writes (FTP root; HTTP document root, with the uploads in ``uploads/``). The local
backend puts the server's run folder on a tmpfs mount (``XFERLAB_TMPFS_DIR``, default
``/dev/shm``) or on disk (``XFERLAB_RUN_DIR``, default the system temporary folder,
which must not itself be a tmpfs); the docker backend mounts a fresh named volume or a
``tmpfs`` at the container's home (``/srv/ftp``).

``tls`` is the TLS axis (runner.spec.model ``tls:``): ``explicit`` or ``implicit`` FTPS with the
campaign's certificates (runner.tls.certs).

The HTTP servers' keys: ``max_body`` (every HTTP server; :func:`parse_size`),
``keepalive`` (not tpd: it always keeps connections), ``workers`` (:data:`WORKER_SERVERS`).
"""
from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from runner.catalogue.servers import FTP_SERVERS, HTTP_SERVERS, WORKER_SERVERS

ALL_SERVERS = FTP_SERVERS | HTTP_SERVERS
STORAGE_KINDS = ("disk", "tmpfs")
#: The TLS axis: ``none`` (plain), ``explicit`` (AUTH TLS, RFC 4217) or
#: ``implicit`` FTPS (TLS from the first byte on a port of its own) for FTP workloads,
#: ``https`` for HTTP workloads.
TLS_MODES = ("none", "explicit", "implicit", "https")
#: Most worker processes (or threads) of a server that takes ``workers`` (WORKER_SERVERS):
#: node-http (cluster, round-robin), uvicorn (--workers), nginx (worker_processes), go-http
#: (GOMAXPROCS), netty (event loops).
MAX_WORKERS = 64


def _bool(v: Any) -> None:
    if not isinstance(v, bool):
        raise ValueError(f"want true or false, got {v!r}")


#: Largest listen() backlog worth asking for: the kernel caps the backlog at
#: net.core.somaxconn, which Linux kept within 65535 (a u16 queue length before 4.x,
#: and the value documented as its maximum); Python's listen() also refuses more than INT_MAX.
MAX_BACKLOG = 65535
#: Largest idle timeout tpd accepts (servers/tpd/src/config.c, ``--idle-timeout``: 1..604800 s, one week).
TPD_MAX_IDLE_TIMEOUT = 7 * 86400


def _int_range(lo: int, hi: int, why: str) -> Callable[[Any], None]:
    def check(v: Any) -> None:
        if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
            raise ValueError(f"want a whole number from {lo} to {hi} ({why}), got {v!r}")
    return check


def _one_of(*allowed: str) -> Callable[[Any], None]:
    def check(v: Any) -> None:
        if v not in allowed:
            raise ValueError(f"want {' or '.join(repr(a) for a in allowed)}, got {v!r}")
    return check


def _port_range(v: Any) -> None:
    parse_port_range(v)


def _address(v: Any) -> None:
    try:
        ipaddress.ip_address(str(v))
    except ValueError:
        raise ValueError(f"want an IP address (e.g. 192.0.2.10), got {v!r}") from None


def _size(v: Any) -> None:
    if not isinstance(v, str) or not v or not (v[:-1].isdigit() if v[-1] in "kKmMgG" else v.isdigit()):
        raise ValueError(f"want a size such as 512m or 2g, got {v!r}")


def _body_size(v: Any) -> None:
    parse_size(v)


def parse_size(v: Any) -> int:
    """A size in bytes: a whole number, or a string with a ``k``/``m``/``g`` suffix
    (powers of 1024): ``8192`` -> 8192, ``"64m"`` -> 67108864.

    Raises:
        ValueError: not such a size, or under 1 byte or over 1 TiB.
    """
    if isinstance(v, bool):
        raise ValueError(f"want a size in bytes such as 1048576 or 64m, got {v!r}")
    if isinstance(v, int):
        n = v
    elif isinstance(v, str) and v and (v.isdigit() or (v[:-1].isdigit() and v[-1] in "kKmMgG")):
        n = int(v) if v.isdigit() else int(v[:-1]) << (10 * " kmg".index(v[-1].lower()))
    else:
        raise ValueError(f"want a size in bytes such as 1048576 or 64m, got {v!r}")
    if not 1 <= n <= 1 << 40:
        raise ValueError(f"want a size from 1 byte to 1t, got {v!r}")
    return n


def _link(v: Any) -> None:
    from runner.net.conditions import LinkError, link_text

    try:
        text = link_text(v)
    except LinkError as exc:
        raise ValueError(str(exc)) from None
    if text != v:
        raise ValueError(f"write the link as {text!r} (its canonical form), got {v!r}")


#: A sysctl name of the container's network namespace: ``net.`` then dot-separated words.
SYSCTL_NAME_RE = re.compile(r"^net(\.[a-z0-9_]{1,40}){1,5}$")
#: A sysctl value: up to 4 space-separated words of letters, digits, ``_`` and ``.``
#: (``4096``, ``32768 60999``, ``bbr``), or a whole number.
SYSCTL_VALUE_RE = re.compile(r"^-?[A-Za-z0-9_.]{1,20}( -?[A-Za-z0-9_.]{1,20}){0,3}$")


def _sysctls(v: Any) -> None:
    if not isinstance(v, dict) or not v or len(v) > 32:
        raise ValueError(f"want a mapping of 1..32 net.* sysctls to values (per-container namespace), got {v!r}")
    for k, x in v.items():
        if not isinstance(k, str) or not SYSCTL_NAME_RE.match(k):
            raise ValueError(f"sysctl {str(k)[:80]!r}: want net. then dot-separated words of a-z, 0-9, _")
        if isinstance(x, bool) or not isinstance(x, (int, str)) or not SYSCTL_VALUE_RE.match(str(x)):
            raise ValueError(f"sysctl {k}: value {str(x)[:80]!r}: want a number or up to 4 words of letters, "
                             "digits, _ and .")


def parse_port_range(v: Any) -> tuple[int, int]:
    """``"30000-30999"`` (or a ``[lo, hi]`` pair) -> ``(30000, 30999)``.

    Raises:
        ValueError: not LO-HI with 1024 <= LO <= HI <= 65535.
    """
    try:
        lo, hi = (int(x) for x in (v.split("-") if isinstance(v, str) else v))
    except (TypeError, ValueError):
        raise ValueError(f"want LO-HI, e.g. 30000-30999, got {v!r}") from None
    if not 1024 <= lo <= hi <= 65535:
        raise ValueError(f"want LO-HI within 1024-65535, got {v!r}")
    return lo, hi


@dataclass(frozen=True)
class VariantOption:
    """One variant key.

    Attributes:
        help: what it does, one line.
        servers: server names that honour it.
        backends: backends that can apply it (``local``, ``docker``).
        check: raises ValueError naming what is wrong with a value.
    """

    help: str
    servers: frozenset[str]
    backends: frozenset[str]
    check: Callable[[Any], None]


BOTH = frozenset({"local", "docker"})
DOCKER = frozenset({"docker"})

#: Every variant key xferlab knows, by name.
VARIANT_OPTIONS: dict[str, VariantOption] = {
    "use_sendfile": VariantOption("false: read+send through a buffer instead of sendfile() for RETR / GET",
                                  frozenset({"pyftpdlib", "vsftpd", "proftpd", "tpd", "nginx"}), BOTH, _bool),
    "storage": VariantOption("where the server's home (FTP root, HTTP document root) lives: disk (default) or "
                             "tmpfs (seed 002's storage axis)", ALL_SERVERS, BOTH, _one_of(*STORAGE_KINDS)),
    "tls": VariantOption("TLS: none (default); FTPS explicit (AUTH TLS, PBSZ 0, PROT P) or implicit (TLS from "
                         "the first byte); https (HTTP workloads); a server that cannot is a skipped cell "
                         "(catalogue.FTPS_MODES, HTTPS_SERVERS)", ALL_SERVERS, BOTH, _one_of(*TLS_MODES)),
    "pasv_ports": VariantOption("passive data port range LO-HI", FTP_SERVERS, BOTH, _port_range),
    "masquerade_address": VariantOption("address announced in PASV replies (NAT, other hosts)", FTP_SERVERS,
                                        BOTH, _address),
    "workers": VariantOption(f"worker processes (node-http: cluster, round-robin; uvicorn; nginx) or threads "
                             f"(go-http: GOMAXPROCS; netty: event loops); default 1 (go-http: every CPU), at most "
                             f"{MAX_WORKERS}", WORKER_SERVERS, BOTH, _int_range(1, MAX_WORKERS, "processes")),
    "keepalive": VariantOption("false: close every HTTP connection after one response (default true)",
                               HTTP_SERVERS - {"tpd"}, BOTH, _bool),
    "max_body": VariantOption("largest HTTP upload body, bytes or 64m-style (default 1g); larger: 413",
                              HTTP_SERVERS, BOTH, _body_size),
    "backlog": VariantOption("listen() backlog (default 1024; the kernel caps it at net.core.somaxconn)",
                             frozenset({"pyftpdlib", "twisted"}), BOTH,
                             _int_range(1, MAX_BACKLOG, "the kernel caps it at net.core.somaxconn, at most 65535")),
    "idle_timeout": VariantOption("idle session timeout, s (default 300; at most 604800)", frozenset({"tpd"}), BOTH,
                                  _int_range(1, TPD_MAX_IDLE_TIMEOUT, "tpd's --idle-timeout range, one week")),
    "tmpfs_size": VariantOption("size of the tmpfs with storage=tmpfs (default 2g)", ALL_SERVERS, DOCKER,
                                _size),
    "memory": VariantOption("container memory limit (default 4g)", ALL_SERVERS, DOCKER, _size),
    "network": VariantOption("container network: netns (default: the load generator joins the server's "
                             "namespace), bridge (through Docker's bridge) or host", ALL_SERVERS, DOCKER,
                             _one_of("netns", "bridge", "host")),
    "sysctls": VariantOption("extra net.* sysctls of the container's network namespace", ALL_SERVERS, DOCKER,
                             _sysctls),
    "link": VariantOption("the path between load and server (runner.net.conditions): loopback (default) or a "
                          "shaped veth link such as 100mbit or 100mbit/1ms/0.1% (the spec's link axis sets it)",
                          ALL_SERVERS, BOTH, _link),
}


def parse_variant_text(text: str) -> dict[str, Any]:
    """``"use_sendfile=false, backlog=512"`` -> ``{"use_sendfile": False, "backlog": 512}``
    (items separated by commas or semicolons; true/false -> bool, then int, float, else
    str), as the CLI's ``--servers`` and the dashboard's launch form take them.

    Raises:
        ValueError: an item is not ``key=value``.
    """
    out: dict[str, Any] = {}
    for item in (x.strip() for x in text.replace(";", ",").split(",")):
        if not item:
            continue
        k, sep, v = item.partition("=")
        k, v = k.strip(), v.strip()
        if not sep or not k:
            raise ValueError(f"expected key=value, got {item!r}")
        low = v.lower()
        if low in ("true", "false"):
            out[k] = low == "true"
            continue
        for conv in (int, float):
            try:
                out[k] = conv(v)
                break
            except ValueError:
                continue
        else:
            out[k] = v
    return out


def options_for(server: str) -> list[str]:
    """The variant keys ``server`` honours, in catalogue order, each marked ``*`` when
    only the docker backend can apply it (``xferlab servers`` prints this)."""
    return [key + ("*" if opt.backends == DOCKER else "")
            for key, opt in VARIANT_OPTIONS.items() if server in opt.servers]


def check_variant(server: str, variant: dict[str, Any]) -> list[tuple[str, str]]:
    """Validate ``variant`` for ``server`` (any backend).

    Returns:
        ``[(key, message), ...]``, empty when every key is known, honoured by ``server``
        and has a valid value. ``external`` takes no variant keys (xferlab does not
        configure a server it did not start).
    """
    problems: list[tuple[str, str]] = []
    for key, value in variant.items():
        opt = VARIANT_OPTIONS.get(key)
        if opt is None:
            ours = sorted(k for k, o in VARIANT_OPTIONS.items() if server in o.servers)
            problems.append((key, f"unknown variant option; {server} takes: {', '.join(ours) or 'none'}"))
            continue
        if server not in opt.servers:
            who = ", ".join(sorted(opt.servers))
            problems.append((key, f"{server} does not honour it (servers that do: {who})"))
            continue
        try:
            opt.check(value)
        except ValueError as exc:
            problems.append((key, str(exc)))
    return problems


def backend_problem(server: str, variant: dict[str, Any], backend: str) -> str | None:
    """Why ``backend`` cannot apply ``variant`` to ``server``, or None when it can.
    The backends raise ServerSkipped with this reason."""
    for key in variant:
        opt = VARIANT_OPTIONS.get(key)
        if opt is None:
            continue
        if backend not in opt.backends:
            need = " or ".join(sorted(opt.backends))
            return f"{server}: variant option {key!r} needs the {need} backend (this cell runs under {backend})"
    return None
