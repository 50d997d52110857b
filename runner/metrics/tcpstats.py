"""Kernel TCP counters of a process's network namespace, per phase, and its listen backlogs.

Why: a burst of concurrent connects that overflows a server's accept queue shows up
as clients waiting for a greeting (docs/methodology.md, "Listen backlog"). The kernel
counts what happened; this module reads those counters in the *server's* network
namespace before and after a phase and gives the difference, plus the backlog of the
server's listening sockets, so a report can say "148 listen overflows, 148 listen
drops; backlog 32".

Sources (Linux):

* ``/proc/<pid>/net/netstat`` (``TcpExt:`` lines) and ``/proc/<pid>/net/snmp``
  (``Tcp:`` lines): pairs of lines, a header of names and a line of values, for the
  network namespace of ``<pid>`` (procfs resolves ``/proc/<pid>/net`` in the task's
  namespace). Meanings from the kernel's ``Documentation/networking/snmp_counter.rst``
  and ``include/uapi/linux/snmp.h``; see :data:`COUNTERS`.
* SYN-ACK retransmits have no counter of their own: ``TcpExt:TCPSynRetrans`` is
  incremented both for a retransmitted SYN (``__tcp_retransmit_skb`` when the segment
  carries SYN) and for a retransmitted SYN-ACK (``tcp_rtx_synack``), in the namespace
  of the socket that sends it (checked in net/ipv4/tcp_output.c; the counter exists
  since Linux 3.x and is present on this lab's 6.x kernels). In a server namespace
  that holds no client (docker bridge) it therefore counts the server's SYN-ACK
  retransmits only; when clients and server share a namespace (local backend,
  loopback) it is the sum of both.
* Listen backlog: the ``Send-Q`` column of ``ss -ltn`` for a socket in LISTEN state
  is the socket's ``sk_max_ack_backlog`` (the ``listen()`` argument capped by
  ``net.core.somaxconn``), ``Recv-Q`` the connections waiting in its accept queue.
  Neither ``/proc/net/tcp`` nor any procfs file gives the maximum, so ``ss``
  (iproute2, sock_diag netlink) is run in the pid's namespace: directly when the
  caller already is in it, else under ``nsenter --net=/proc/<pid>/ns/net`` (needs
  CAP_SYS_ADMIN). ``ss -e`` prints each socket's inode (``ino:N``), which is matched
  with the ``socket:[N]`` links of ``/proc/<pid>/fd`` of the process and its
  descendants, so only the server's own listeners are reported, never another
  process's that shares the namespace.

Counters are namespace-wide: under the local backend the server shares the host's
namespace, so the delta also includes the load generator's side and any other TCP
traffic of the machine during the phase (the report should say which namespace it
was: :attr:`TcpCounters.netns`).

Errors: :class:`TcpStatsError` (a ``RuntimeError``) with a message naming the pid, the
file or command and the cause (no such process, /proc not mounted, permission, ss or
nsenter missing, unparsable output).
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

#: Counters read, in display order: ``name -> (file section, human label)``. Names
#: are the kernel's. All are monotonically increasing event counts.
COUNTERS: dict[str, tuple[str, str]] = {
    # accept queue full when the final ACK of a handshake arrived (tcp_v4_syn_recv_sock)
    # or when a SYN arrived (tcp_conn_request): the connection is not accepted
    "ListenOverflows": ("TcpExt", "listen overflows"),
    # every drop on a listening socket, overflows included
    "ListenDrops": ("TcpExt", "listen drops"),
    # SYN-queue full, request dropped / answered with a SYN cookie instead
    "TCPReqQFullDrop": ("TcpExt", "SYN queue full drops"),
    "TCPReqQFullDoCookies": ("TcpExt", "SYN queue full cookies"),
    "SyncookiesSent": ("TcpExt", "SYN cookies sent"),
    # SYN and SYN-ACK retransmits (one counter for both, see the module docstring)
    "TCPSynRetrans": ("TcpExt", "SYN/SYN-ACK retransmits"),
    # segments retransmitted (all kinds, SYN/SYN-ACK included)
    "RetransSegs": ("Tcp", "TCP retransmits"),
    "TCPTimeouts": ("TcpExt", "retransmission timeouts"),
    # segments sent with RST set
    "OutRsts": ("Tcp", "resets sent"),
    # ESTABLISHED/CLOSE_WAIT -> CLOSED directly (a reset sent or received)
    "EstabResets": ("Tcp", "established connections reset"),
    # SYN_SENT/SYN_RECV -> CLOSED, or SYN_RECV -> LISTEN (e.g. a reset during the handshake)
    "AttemptFails": ("Tcp", "failed connection attempts"),
    # resets sent because of the application: data left unread at close(), linger 0, ...
    "TCPAbortOnData": ("TcpExt", "aborts on unread data"),
    "TCPAbortOnClose": ("TcpExt", "aborts on close"),
    "TCPAbortOnTimeout": ("TcpExt", "aborts on timeout"),
    # segments received with errors (bad checksum, ...)
    "InErrs": ("Tcp", "segments received in error"),
    "TCPBacklogDrop": ("TcpExt", "socket backlog drops"),
}


class TcpStatsError(RuntimeError):
    """The counters or backlogs of a process cannot be read (message says why)."""


@dataclass(frozen=True)
class TcpCounters:
    """One reading of the TCP counters of a network namespace.

    Attributes:
        pid: the process whose namespace was read.
        netns: the namespace's identity, e.g. ``"net:[4026531840]"`` (readlink of
            ``/proc/<pid>/ns/net``; ``""`` when that link cannot be read).
        values: counter name (:data:`COUNTERS` keys the kernel exposes; counters the
            kernel lacks are absent) -> count since the namespace was created.
        taken_at: ``time.monotonic()`` of the reading, s.
    """

    pid: int
    netns: str
    values: dict[str, int] = field(default_factory=dict)
    taken_at: float = 0.0


@dataclass(frozen=True)
class ListenSocket:
    """A listening TCP socket of the server.

    Attributes:
        local: local address and port as ``ss -n`` prints it (``0.0.0.0:21``, ``[::]:21``).
        backlog: maximum accept-queue length (``sk_max_ack_backlog``; ``ss`` Send-Q).
        queued: connections waiting in the accept queue at the reading (``ss`` Recv-Q).
        inode: the socket's inode.
    """

    local: str
    backlog: int
    queued: int
    inode: int


def _proc(pid: int) -> Path:
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        raise ValueError(f"pid must be a positive int, got {pid!r}")
    root = Path("/proc")
    if not (root / "self").exists():
        raise TcpStatsError("/proc is not mounted: kernel TCP counters need procfs")
    p = root / str(pid)
    if not p.exists():
        raise TcpStatsError(f"no process {pid}: /proc/{pid} does not exist")
    return p


def _read(path: Path, pid: int) -> str:
    try:
        return path.read_text()
    except FileNotFoundError as e:
        raise TcpStatsError(f"cannot read {path} (process {pid} exited, or the kernel has no such file): {e}") from e
    except PermissionError as e:
        raise TcpStatsError(f"permission denied reading {path}: run as the server's user or root") from e
    except OSError as e:
        raise TcpStatsError(f"cannot read {path}: {e}") from e


def parse_proc_net(text: str, source: str = "") -> dict[str, dict[str, int]]:
    """Parse a ``/proc/net/netstat`` or ``/proc/net/snmp`` text.

    The format is pairs of lines ``Section: Name1 Name2 ...`` / ``Section: v1 v2 ...``.
    Returns ``{section: {name: value}}`` (values as int; ``Tcp: MaxConn`` is -1 on
    Linux, kept as is). Raises TcpStatsError (naming ``source``) when a header and its
    value line do not match."""
    out: dict[str, dict[str, int]] = {}
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if len(lines) % 2:
        raise TcpStatsError(f"{source or 'proc net file'}: odd number of lines ({len(lines)}): not header/value pairs")
    for head, vals in zip(lines[::2], lines[1::2]):
        hs, _, names = head.partition(":")
        vs, _, values = vals.partition(":")
        if hs != vs:
            raise TcpStatsError(f"{source or 'proc net file'}: header {hs!r} followed by values of {vs!r}")
        n, v = names.split(), values.split()
        if len(n) != len(v):
            raise TcpStatsError(f"{source or 'proc net file'}: {hs}: {len(n)} names but {len(v)} values")
        try:
            out[hs.strip()] = {k: int(x) for k, x in zip(n, v)}
        except ValueError as e:
            raise TcpStatsError(f"{source or 'proc net file'}: {hs}: non-integer value: {e}") from e
    return out


def netns_id(pid: int) -> str:
    """``readlink /proc/<pid>/ns/net`` (``"net:[4026531840]"``); ``""`` when unreadable
    (another user's process without CAP_SYS_PTRACE). Raises TcpStatsError when the
    process does not exist."""
    p = _proc(pid)
    try:
        return os.readlink(p / "ns" / "net")
    except OSError:
        return ""


def read_counters(pid: int) -> TcpCounters:
    """Read :data:`COUNTERS` from the network namespace of process ``pid``.

    Returns a :class:`TcpCounters`. Raises ValueError for a bad pid, TcpStatsError when
    /proc, the process or its net files cannot be read, or their format is unknown."""
    p = _proc(pid)
    ns = netns_id(pid)
    sections: dict[str, dict[str, int]] = {}
    for name in ("netstat", "snmp"):
        f = p / "net" / name
        sections.update(parse_proc_net(_read(f, pid), str(f)))
    if "Tcp" not in sections:
        raise TcpStatsError(f"/proc/{pid}/net/snmp has no Tcp: section (kernel without IPv4?)")
    values = {}
    for name, (section, _label) in COUNTERS.items():
        v = sections.get(section, {}).get(name)
        if v is not None:
            values[name] = v
    return TcpCounters(pid=pid, netns=ns, values=values, taken_at=time.monotonic())


def counters_delta(before: TcpCounters, after: TcpCounters) -> dict[str, int]:
    """Per-phase counts: ``after - before`` for every counter present in both readings,
    in :data:`COUNTERS` order. Returns a plain ``{name: count}`` dict.

    Raises TcpStatsError when the readings come from different network namespaces (the
    server was restarted into another one: the difference would mean nothing) or when a
    counter went down (a namespace was recreated under the same name)."""
    if before.netns and after.netns and before.netns != after.netns:
        raise TcpStatsError(f"readings from different network namespaces ({before.netns} of pid {before.pid}, "
                            f"{after.netns} of pid {after.pid}): no per-phase difference")
    out = {}
    for name in COUNTERS:
        if name in before.values and name in after.values:
            d = after.values[name] - before.values[name]
            if d < 0:
                raise TcpStatsError(f"counter {name} went down ({before.values[name]} -> {after.values[name]}): "
                                    "not the same namespace")
            out[name] = d
    return out


class PhaseCounters:
    """Context manager reading the counters of ``pid``'s namespace before and after a phase.

    ``with PhaseCounters(pid) as pc: run_phase()`` then ``pc.delta`` is the
    :func:`counters_delta` dict and ``pc.before`` / ``pc.after`` the readings. The
    reading after the phase is taken even when the phase raises (the exception then
    propagates; a failure of that second reading does not mask it: ``pc.error`` holds it).
    """

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.before: TcpCounters | None = None
        self.after: TcpCounters | None = None
        self.delta: dict[str, int] = {}
        self.error: TcpStatsError | None = None

    def __enter__(self) -> PhaseCounters:
        self.before = read_counters(self.pid)
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            self.after = read_counters(self.pid)
            self.delta = counters_delta(self.before, self.after)  # type: ignore[arg-type]
        except TcpStatsError as e:
            self.error = e
            if exc_type is None:
                raise


def _descendants(pid: int, limit: int = 10_000) -> list[int]:
    """pid and its descendants (``/proc/<pid>/task/*/children``), breadth first, at most ``limit``."""
    seen, queue = [pid], [pid]
    while queue and len(seen) < limit:
        p = queue.pop(0)
        try:
            tasks = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for t in tasks:
            try:
                kids = Path(f"/proc/{p}/task/{t}/children").read_text().split()
            except OSError:
                continue
            for kid in kids:
                k = int(kid)
                if k not in seen:
                    seen.append(k)
                    queue.append(k)
    return seen


def socket_inodes(pid: int, *, children: bool = True) -> set[int]:
    """Inodes of the sockets open in process ``pid`` (and its descendants when
    ``children``), from the ``socket:[N]`` links of ``/proc/<p>/fd``.

    Raises TcpStatsError when ``pid``'s own fd directory cannot be listed (permission:
    another user's process needs root or CAP_SYS_PTRACE). Descendants that exit
    meanwhile are skipped."""
    _proc(pid)
    out: set[int] = set()
    for p in (_descendants(pid) if children else [pid]):
        fd_dir = f"/proc/{p}/fd"
        try:
            fds = os.listdir(fd_dir)
        except PermissionError as e:
            if p == pid:
                raise TcpStatsError(f"permission denied listing {fd_dir}: the server's sockets can be "
                                    "identified only as its user or root") from e
            continue
        except OSError:
            if p == pid:
                raise TcpStatsError(f"cannot list {fd_dir}: process {pid} exited") from None
            continue
        for fd in fds:
            try:
                target = os.readlink(f"{fd_dir}/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                out.add(int(target[8:-1]))
    return out


_SS_LINE = re.compile(r"^(?:LISTEN\s+)?(\d+)\s+(\d+)\s+(\S+)\s+(\S+)(.*)$")
_INO = re.compile(r"\bino:(\d+)\b")


def parse_ss_listen(text: str) -> list[ListenSocket]:
    """Parse ``ss -ltnHe`` output: one line per listening socket
    ``[LISTEN] Recv-Q Send-Q Local Peer ... ino:N ...``. Returns the sockets with their
    inode; lines without an inode are skipped. Raises TcpStatsError on a line that is
    not of that form."""
    out = []
    for line in text.splitlines():
        if not line.strip():
            continue
        m = _SS_LINE.match(line.strip())
        if not m:
            raise TcpStatsError(f"unexpected ss output line: {line!r}")
        ino = _INO.search(m.group(5))
        if not ino:
            continue
        out.append(ListenSocket(local=m.group(3), backlog=int(m.group(2)), queued=int(m.group(1)),
                                inode=int(ino.group(1))))
    return out


def _ss_command(pid: int) -> list[str]:
    ss = shutil.which("ss") or next((p for p in ("/usr/bin/ss", "/usr/sbin/ss", "/bin/ss", "/sbin/ss")
                                     if os.path.exists(p)), None)
    if ss is None:
        raise TcpStatsError("ss (iproute2) not found: it is needed to read listen backlogs")
    mine = netns_id(os.getpid())
    theirs = netns_id(pid)
    if mine and theirs and mine == theirs:
        return [ss, "-ltnHe"]
    nsenter = shutil.which("nsenter") or ("/usr/bin/nsenter" if os.path.exists("/usr/bin/nsenter") else None)
    if nsenter is None:
        raise TcpStatsError(f"process {pid} is in another network namespace and nsenter (util-linux) is not found")
    if os.geteuid() != 0:
        raise TcpStatsError(f"process {pid} is in another network namespace ({theirs or 'unreadable'}); "
                            "entering it with nsenter needs root (CAP_SYS_ADMIN)")
    return [nsenter, f"--net=/proc/{pid}/ns/net", ss, "-ltnHe"]


def listen_backlogs(pid: int, *, children: bool = True, timeout: float = 10.0) -> list[ListenSocket]:
    """The TCP listening sockets of process ``pid`` (and of its descendants when
    ``children``: a forking server's listener may live in its master), with their
    backlog, read with ``ss -ltnHe`` in ``pid``'s network namespace (see the module
    docstring). Returns them sorted by local address; [] when the process listens on
    nothing.

    Raises TcpStatsError when ss/nsenter are missing, the namespace cannot be entered
    (not root), ss fails or times out (``timeout`` s), or the fds cannot be read."""
    cmd = _ss_command(pid)
    inodes = socket_inodes(pid, children=children)
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as e:
        raise TcpStatsError(f"{' '.join(cmd)} took more than {timeout} s") from e
    except OSError as e:
        raise TcpStatsError(f"cannot run {' '.join(cmd)}: {e}") from e
    if r.returncode != 0:
        raise TcpStatsError(f"{' '.join(cmd)} exited with {r.returncode}: {r.stderr.strip()[:300]}")
    return sorted((s for s in parse_ss_listen(r.stdout) if s.inode in inodes), key=lambda s: s.local)


def _n(x: int) -> str:
    return f"{x:,}"


def format_tcp_counters(delta: Mapping[str, int], backlogs: Iterable[ListenSocket | int] | None = None, *,
                        server: str | None = None, always: bool = False) -> str:
    """The human sentence of a phase's counters, non-zero ones only, in :data:`COUNTERS`
    order, then the backlog(s): ``"148 listen overflows, 148 listen drops; backlog 32"``
    (with ``server``: ``"vsftpd: 148 listen overflows, ...; backlog 32"``).

    Args:
        delta: ``{counter name: count}`` as :func:`counters_delta` returns; unknown names
            are shown by their kernel name.
        backlogs: the server's :class:`ListenSocket` list or plain backlog ints; several
            distinct values print as ``backlogs 32, 128``.
        always: also return the backlog part when every counter is zero (default: a phase
            with nothing to explain gives ``""``).

    Raises ValueError on a negative count."""
    parts = []
    for name, count in sorted(delta.items(), key=lambda kv: list(COUNTERS).index(kv[0]) if kv[0] in COUNTERS
                              else len(COUNTERS)):
        if count < 0:
            raise ValueError(f"counter {name} is negative ({count}): not a per-phase count")
        if count:
            parts.append(f"{_n(count)} {COUNTERS[name][1] if name in COUNTERS else name}")
    if not parts and not always:
        return ""
    text = ", ".join(parts)
    values = sorted({b.backlog if isinstance(b, ListenSocket) else int(b) for b in (backlogs or [])})
    if values:
        bl = ("backlog " if len(values) == 1 else "backlogs ") + ", ".join(_n(v) for v in values)
        text = f"{text}; {bl}" if text else bl
    if server:
        text = f"{server}: {text}"
    return text
