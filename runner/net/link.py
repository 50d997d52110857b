"""The shaped path itself: three network namespaces, client, router and server, two veth
pairs through the router, and ``tc`` on the router's two egress devices (the link of
runner.net.conditions).

::

    client namespace xl-PID-N-c     router namespace xl-PID-N-r       server namespace xl-PID-N-s
    (the load generator joins it:                                     (local backend) or the
     Target.netns)                                                    server container's own
      xl-client 10.213.0.6/30 <-veth-> xl-rc 10.213.0.5                (docker: `ip netns attach`)
                                       xl-rs 10.213.0.1 <-veth-> xl-server 10.213.0.2/30
                                       egress of xl-rc and xl-rs:
                                       tbf / netem

The queues are in the router, as a switch's or a router's are on a real path, and not on
an egress of the client or the server: a packet a sender's own qdisc drops never left the
sender, so its TCP sees no loss to repair (no duplicate ACK, no SACK) but a local error,
and a socket that has nothing in flight then waits on its probe timer, whose failures an
orphaned socket (closed by the server with its file still queued) survives only 8 times
(``tcp_orphan_retries``) before it is destroyed without a word to the client. Measured
with the queues on the two veth ends (2026-11-25, 512 wget downloads of 1 MiB over
100mbit, local backend): tpd left 211 clients waiting for data that never came (211
``aborts on timeout`` in the server's namespace, 14,023 drops, 28 retransmits), vsftpd
the same way. Through the router, drops are the path's: the sender retransmits them.

The router's egress towards the client (``xl-rc``) carries a RETR's data, the one
towards the server (``xl-rs``) a STOR's; both are shaped, and so are the ACKs and
commands going back. Every link uses the same addresses, 10.213.0.0/30 on the server
side and 10.213.0.4/30 on the client side: each set of namespaces is a network of its
own, so links never meet, and a server's configuration (its listen address, 10.213.0.2)
is the same in every cell over a link, so its config hash and build row are too. A
container keeps its default route (its bridge) and gets one route to the client side
through the router. Offloads (GSO/TSO) keep the veth defaults; tbf's burst covers a 64
KiB GSO packet (runner.net.conditions).

Teardown (:meth:`LinkNet.close`, also when creation fails half way) deletes the client
and router namespaces (which destroys both veth pairs) and the server namespace's name (a
namespace the lab made dies with its last process; a container's lives on with the
container). :func:`sweep_stale` deletes ``xl-`` namespaces whose creating process is gone.

A server namespace the lab makes gets ``net.ipv4.tcp_syncookies=0``, as the docker
backend gives its containers (docs/methodology.md, "Slow is a figure": with cookies on,
a connect that meets a full accept queue can wait for a greeting that never comes;
measured over this link, vsftpd with 512 wget clients: 102 SYN cookies sent).

Needs root (``ip netns add`` mounts, setns(2) needs CAP_SYS_ADMIN, ``tc`` and veth
CAP_NET_ADMIN), ``ip`` and ``tc`` (iproute2), and netem in the kernel for a delay or a
loss (:func:`link_problem` says what is missing: such cells are skipped with it).
"""
from __future__ import annotations

import ipaddress
import itertools
import json
import os
import re
import shutil
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

from runner.net.conditions import LinkSpec, parse_qdisc_json, qdisc_argvs

NETNS_DIR = "/run/netns"
#: The lab's namespace names: ``xl-<creator pid>-<n>-<c|r|s>`` and ``xl-<pid>-probe``.
NAME_RE = re.compile(r"^xl-(\d+)-(?:\d+-[crs]|probe)$")
#: The link's two /30s (module docstring): server side router .1, server .2; client side
#: router .5, client .6.
SUBNET = ipaddress.ip_network("10.213.0.0/30")
CLIENT_SUBNET = ipaddress.ip_network("10.213.0.4/30")
CLIENT_DEV, SERVER_DEV = "xl-client", "xl-server"
#: The router's devices: towards the client (a RETR's data leaves by it) and the server.
ROUTER_CLIENT_DEV, ROUTER_SERVER_DEV = "xl-rc", "xl-rs"
COMMAND_TIMEOUT_S = 10.0
#: Per-namespace sysctls read from both ends of every link and stored with it: a new
#: namespace takes its own values of these (the kernel's defaults or the initial
#: namespace's, depending on the key and kernel), a container's are the backend's.
NS_SYSCTLS = ("net.core.somaxconn", "net.ipv4.tcp_max_syn_backlog", "net.ipv4.tcp_syncookies",
              "net.ipv4.tcp_congestion_control",
              "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem", "net.ipv4.ip_local_port_range")

_counter = itertools.count()
_netem_lock = threading.Lock()
_netem_problem: list[str | None] = []  # cached per process: [] untested, [None] works, [reason]


class LinkUnavailable(Exception):
    """A link cannot be made here (not root, no ip/tc, no netem); ``str()`` is the reason
    a cell is skipped with."""


class LinkFailed(Exception):
    """A command making or reading the link failed; the message has its argv and stderr."""


def tool(name: str) -> str | None:
    """The path of ``ip`` or ``tc``: on PATH, else /usr/sbin or /sbin (not on a non-root
    PATH), else None."""
    found = shutil.which(name)
    if found:
        return found
    for d in ("/usr/sbin", "/sbin"):
        if os.access(f"{d}/{name}", os.X_OK):
            return f"{d}/{name}"
    return None


def _run(argv: list[str]) -> str:
    exe = tool(argv[0])
    if exe is None:
        raise LinkUnavailable(f"{argv[0]} not found (apt-get install iproute2)")
    try:
        proc = subprocess.run([exe, *argv[1:]], capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise LinkFailed(f"{' '.join(argv)}: no answer in {COMMAND_TIMEOUT_S:g} s") from None
    if proc.returncode != 0:
        raise LinkFailed(f"{' '.join(argv)}: exit {proc.returncode}: {proc.stderr.strip()[:500]}")
    return proc.stdout


def base_problem() -> str | None:
    """Why no link can be made by this process, or None: not root, or ``ip``/``tc`` missing."""
    if os.geteuid() != 0:
        return (f"link conditions need root (ip netns add, veth and tc need CAP_SYS_ADMIN and CAP_NET_ADMIN); "
                f"this process runs as uid {os.geteuid()}: run xferlab as root or use link: loopback")
    for name in ("ip", "tc"):
        if tool(name) is None:
            return f"link conditions need {name} (iproute2), not found: apt-get install iproute2"
    return None


def netem_problem() -> str | None:
    """Why netem (a delay or a loss) is not available, or None; tried once per process by
    adding a netem qdisc to ``lo`` of a throwaway namespace (``xl-PID-probe``), which is
    deleted again. E.g. ``"netem is not in this kernel (CONFIG_NET_SCH_NETEM): tc: Error:
    Specified qdisc kind is unknown."``."""
    with _netem_lock:
        if not _netem_problem:
            _netem_problem.append(_try_netem())
        return _netem_problem[0]


def _try_netem() -> str | None:
    why = base_problem()
    if why:
        return why
    name = f"xl-{os.getpid()}-probe"
    try:
        _run(["ip", "netns", "add", name])
        _run(["tc", "-n", name, "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms"])
        return None
    except LinkFailed as exc:
        if "unknown" in str(exc).lower():
            return (f"a delay or a loss needs netem, which is not in this kernel (CONFIG_NET_SCH_NETEM, "
                    f"modprobe sch_netem): {str(exc).split(': ', 1)[-1]}")
        return f"netem could not be tried: {exc}"
    finally:
        _delete_netns(name)


_qdisc_problems: dict[str, str | None] = {}


def qdisc_problem(kind: str) -> str | None:
    """Why the queueing discipline ``kind`` (``pfifo``, ``fq_codel``) cannot be used here,
    or None; tried once per process and kind by adding it to ``lo`` of a throwaway
    namespace, deleted again. E.g. ``"fq_codel is not in this kernel (modprobe
    sch_fq_codel): Error: Specified qdisc kind is unknown."``."""
    with _netem_lock:
        if kind not in _qdisc_problems:
            why = base_problem()
            name = f"xl-{os.getpid()}-probe"
            if why is None:
                try:
                    _run(["ip", "netns", "add", name])
                    _run(["tc", "-n", name, "qdisc", "add", "dev", "lo", "root", kind])
                except LinkFailed as exc:
                    why = (f"{kind} is not in this kernel (modprobe sch_{kind}): {str(exc).split(': ', 1)[-1]}"
                           if "unknown" in str(exc).lower() else f"{kind} could not be tried: {exc}")
                finally:
                    _delete_netns(name)
            _qdisc_problems[kind] = why
        return _qdisc_problems[kind]


def link_problem(link: LinkSpec) -> str | None:
    """Why ``link`` cannot be made here, or None (loopback: always None). The reason a
    cell over that link is skipped with."""
    if link.loopback:
        return None
    why = base_problem()
    if why is None and link.needs_netem:
        why = netem_problem()
    if why is None and link.rate_bit is not None and link.qdisc != "tbf":
        why = qdisc_problem(link.qdisc)
    return why


def link_problem_is_the_machine(link: LinkSpec) -> bool:
    """Whether :func:`link_problem` of ``link`` is the machine's own: this process is not
    root, or netem (a delay or a loss) or the queue's discipline cannot be used in this kernel. False when there is
    no problem, or when ``ip``/``tc`` is missing (iproute2, which the install step
    provides)."""
    if link_problem(link) is None:
        return False
    if os.geteuid() != 0:
        return True
    return all(tool(name) is not None for name in ("ip", "tc"))


def ns_sysctls(path: str) -> dict[str, str]:
    """The :data:`NS_SYSCTLS` of the network namespace ``path`` as ``{name: value}``
    (whitespace collapsed; a key this kernel lacks is left out), read from /proc/sys/net
    by a thread that joined the namespace (runner.net.netns.call_in_netns).

    Raises:
        runner.net.netns.NetnsError: the namespace cannot be joined.
    """
    from runner.net.netns import call_in_netns

    def read() -> dict[str, str]:
        out = {}
        for key in NS_SYSCTLS:
            try:
                with open("/proc/sys/" + key.replace(".", "/")) as f:
                    out[key] = " ".join(f.read().split())
            except OSError:
                continue
        return out

    return call_in_netns(path, read)


def _delete_netns(name: str) -> bool:
    if not os.path.exists(f"{NETNS_DIR}/{name}"):
        return False
    try:
        _run(["ip", "netns", "delete", name])
        return True
    except (LinkFailed, LinkUnavailable):
        return False


def lab_namespaces() -> list[str]:
    """The names under /run/netns that the lab makes (``xl-PID-...``), sorted."""
    try:
        return sorted(n for n in os.listdir(NETNS_DIR) if NAME_RE.match(n))
    except FileNotFoundError:
        return []


def sweep_stale() -> list[str]:
    """Delete the lab's namespaces whose creating process no longer runs (a runner that
    was killed before its teardown); returns their names. Never touches names of a
    living process, nor names not of the lab's form."""
    gone = []
    for name in lab_namespaces():
        m = NAME_RE.match(name)
        assert m is not None
        pid = int(m.group(1))
        if pid == os.getpid() or os.path.exists(f"/proc/{pid}"):
            continue
        if _delete_netns(name):
            gone.append(name)
    return gone


@dataclass(frozen=True)
class LinkEnd:
    """One end of the veth pair: namespace name, its file (for setns: Target.netns), the
    device and its IPv4 address."""

    netns: str
    path: str
    dev: str
    address: str


@dataclass
class LinkNet:
    """A made link (use :func:`open_link` / :func:`link_net`).

    Attributes:
        link: what it shapes.
        client / server: the two ends (the load's namespace, the server's).
        router: the router namespace's name; its egress devices hold the queues
            (:data:`ROUTER_CLIENT_DEV`: server -> client, :data:`ROUTER_SERVER_DEV`: client ->
            server).
        applied: the tc commands run, in order (argv lists).
        owns_server_ns: the server namespace was created here (local backend), not
            attached to a container's.
    """

    link: LinkSpec
    client: LinkEnd
    server: LinkEnd
    router: str = ""
    applied: list[list[str]] = field(default_factory=list)
    owns_server_ns: bool = True
    closed: bool = False
    sysctls: dict[str, dict[str, str]] = field(default_factory=dict)

    def qdiscs(self) -> dict[str, list[dict[str, Any]]]:
        """``{"client": [...], "server": [...]}``: the qdiscs, with their counters now, of
        the queue each side sends into (``server``: the router's egress towards the client,
        ``client``: towards the server; runner.net.conditions.parse_qdisc_json: kind,
        options, bytes sent, packets, drops, overlimits, backlog).

        Raises:
            LinkFailed: tc failed or printed no JSON.
        """
        out = {}
        for side, dev in (("client", ROUTER_SERVER_DEV), ("server", ROUTER_CLIENT_DEV)):
            text = _run(["tc", "-n", self.router, "-s", "-j", "qdisc", "show", "dev", dev])
            try:
                out[side] = parse_qdisc_json(json.loads(text))
            except ValueError as exc:
                raise LinkFailed(f"tc qdisc show dev {dev}: {exc}") from None
        return out

    def record(self) -> dict[str, Any]:
        """What the cell stores about its link: ``{"link": text, "client_address",
        "server_address", "server_namespace": "lab" or "container", "queues": "router",
        "tc": [commands as text, without the per-cell namespace name],
        "sysctls": {"client": {...}, "server": {...}}}`` (:data:`NS_SYSCTLS` of each end),
        e.g. ``"tc qdisc add dev xl-rc root handle 1: tbf rate 100000000bit burst 65536
        latency 250000us"`` (``link`` names the queue: ``100mbit/queue=250ms``)."""
        return {"link": self.link.text(), "client_address": self.client.address,
                "server_address": self.server.address,
                "server_namespace": "lab" if self.owns_server_ns else "container", "queues": "router",
                "tc": [" ".join(a[:1] + a[3:] if a[1:2] == ["-n"] else a) for a in self.applied],
                "sysctls": self.sysctls}

    def close(self) -> None:
        """Delete the client and router namespaces (and with them both veth pairs) and the
        server namespace's name. Idempotent; never raises (what cannot be deleted is left
        for :func:`sweep_stale`)."""
        if self.closed:
            return
        self.closed = True
        _delete_netns(self.client.netns)
        if self.router:
            _delete_netns(self.router)
        _delete_netns(self.server.netns)


def open_link(link: LinkSpec, *, server_pid: int | None = None) -> LinkNet:
    """Make the link (module docstring) and return it; the caller must :meth:`LinkNet.close`
    it (or use :func:`link_net`).

    Args:
        link: a shaped link (not loopback).
        server_pid: put the server end into this process's network namespace (a
            container's), named with ``ip netns attach``; None: a new namespace.

    Raises:
        LinkUnavailable: :func:`link_problem` (not root, no ip/tc, no netem).
        LinkFailed: a command failed; everything made so far is deleted again.
    """
    if link.loopback:
        raise ValueError("open_link: a loopback link is not made")
    why = link_problem(link)
    if why:
        raise LinkUnavailable(why)
    sweep_stale()
    n = next(_counter)
    cname, rname, sname = (f"xl-{os.getpid()}-{n}-{k}" for k in "crs")
    caddr, saddr = str(CLIENT_SUBNET.network_address + 2), str(SUBNET.network_address + 2)
    r_c, r_s = str(CLIENT_SUBNET.network_address + 1), str(SUBNET.network_address + 1)
    net = LinkNet(link, LinkEnd(cname, f"{NETNS_DIR}/{cname}", CLIENT_DEV, caddr),
                  LinkEnd(sname, f"{NETNS_DIR}/{sname}", SERVER_DEV, saddr), router=rname,
                  owns_server_ns=server_pid is None)
    try:
        _run(["ip", "netns", "add", cname])
        _run(["ip", "netns", "add", rname])
        if server_pid is None:
            _run(["ip", "netns", "add", sname])
        else:
            _run(["ip", "netns", "attach", sname, str(server_pid)])
        for ns in (cname, rname, sname):
            _run(["ip", "-n", ns, "link", "set", "lo", "up"])
        _run(["ip", "-n", rname, "link", "add", "name", ROUTER_CLIENT_DEV, "type", "veth",
              "peer", "name", CLIENT_DEV, "netns", cname])
        _run(["ip", "-n", rname, "link", "add", "name", ROUTER_SERVER_DEV, "type", "veth",
              "peer", "name", SERVER_DEV, "netns", sname])
        for ns, dev, addr in ((cname, CLIENT_DEV, caddr), (rname, ROUTER_CLIENT_DEV, r_c),
                              (rname, ROUTER_SERVER_DEV, r_s), (sname, SERVER_DEV, saddr)):
            _run(["ip", "-n", ns, "addr", "add", f"{addr}/30", "dev", dev])
            _run(["ip", "-n", ns, "link", "set", dev, "up"])
        _run(["ip", "-n", cname, "route", "add", str(SUBNET), "via", r_c, "dev", CLIENT_DEV])
        _run(["ip", "-n", sname, "route", "add", str(CLIENT_SUBNET), "via", r_s, "dev", SERVER_DEV])
        _run(["ip", "netns", "exec", rname, "sh", "-c", "echo 1 > /proc/sys/net/ipv4/ip_forward"])
        if server_pid is None:  # the lab's own server namespace: SYN cookies off, as the docker backend's
            _run(["ip", "netns", "exec", sname, "sh", "-c", "echo 0 > /proc/sys/net/ipv4/tcp_syncookies"])
        for dev in (ROUTER_CLIENT_DEV, ROUTER_SERVER_DEV):
            for argv in qdisc_argvs(link, dev, rname):
                _run(argv)
                net.applied.append(argv)
        net.sysctls = {side: ns_sysctls(end.path) for side, end in (("client", net.client), ("server", net.server))}
    except BaseException:
        net.close()
        raise
    return net


@contextmanager
def link_net(link: LinkSpec, *, server_pid: int | None = None) -> Iterator[LinkNet]:
    """:func:`open_link` as a context manager: the link is deleted when the block ends,
    also when it raises."""
    net = open_link(link, server_pid=server_pid)
    try:
        yield net
    finally:
        net.close()


def phase_counters(before: dict[str, list[dict[str, Any]]],
                   after: dict[str, list[dict[str, Any]]]) -> dict[str, int]:
    """Per-phase qdisc figures from two :meth:`LinkNet.qdiscs` readings: for each side
    (``server`` first, then ``client``), the root qdisc's ``SIDE_sent_bytes``, ``SIDE_packets``,
    ``SIDE_drops``, ``SIDE_overlimits`` over the phase (after - before), plus drops of
    every qdisc of that side summed (a tbf under netem drops on its own).

    Raises:
        KeyError: a side missing from a reading.
    """
    out: dict[str, int] = {}
    for side in ("server", "client"):
        b = {(q["handle"], q["kind"]): q for q in before[side]}
        root = next((q for q in after[side] if q["parent"] == "root"), None)
        if root is None:
            continue
        r0 = b.get((root["handle"], root["kind"]), {})
        for k, name in (("bytes", "sent_bytes"), ("packets", "packets"), ("overlimits", "overlimits")):
            out[f"{side}_{name}"] = max(0, root[k] - int(r0.get(k, 0)))
        out[f"{side}_drops"] = sum(max(0, q["drops"] - int(b.get((q["handle"], q["kind"]), {}).get("drops", 0)))
                                   for q in after[side])
    return out


def attach_link(handle: Any, net: LinkNet) -> None:
    """Make ``handle`` (a ServerHandle with a ``link`` attribute that its stop() closes)
    reached over ``net``: its target's host the server end's address and its ``netns``
    the client namespace; ``build_info["link"]`` what was applied (LinkNet.record)."""
    handle.link = net
    handle.target = replace(handle.target, host=net.server.address, netns=net.client.path)
    handle.build_info["link"] = net.record()
