"""The workload catalogue: names, titles in the seed's wording, parameters, primary metric,
and the facts the rest of the lab needs about each workload (single stream or not,
which parameter sizes the RETR fixture, how clients are split across load hosts, the
protocol spoken). Plain data: it imports nothing from the runner.

The classic suite is seed 000's ``ftpbench -b all``: eight benchmarks, each a
separate workload here, so each runs as its own cell against a freshly started server.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from runner.catalogue.mixed import MAX_DIR_ENTRIES, OpMix, SizeDist, default_mix, size_label

KIB = 1 << 10
MIB = 1 << 20


#: ``login_mode: window``: sessions connecting and logging in at once. 32 is the
#: shortest listen backlog among the servers here (vsftpd's, fixed in its source), so a
#: window never overflows an accept queue by itself.
LOGIN_WINDOW = 32


class WorkloadParams(BaseModel):
    """Parameters of one workload (all have defaults; unknown keys are rejected).

    Attributes:
        clients: concurrent sessions for the N-client workloads (seed: 300). A spec may
            give a list instead, a saturation sweep: one cell family per count
            (runner.spec.workloads).
        file_size: bytes of the file each client transfers in the concurrent
            workloads (seed: 10 MiB).
        transfer_size: bytes of the fixture file for single-stream STOR/RETR; the
            stream is repeated until ``duration`` has passed (at least once).
        duration: minimum seconds of single-stream transfer (STOR/RETR workloads);
            longer than ftpbench's 1-second windows, which swing by 60% run to run.
            HTTP workloads: how long the clients keep sending requests (seed 002: 10 s).
            Sustained workloads: how long the clients keep starting operations.
        login_mode: ``concurrent`` (all sessions connect and log in at once, the
            default), ``sequential`` (one after another, as ftpbench really does) or
            ``window`` (at most :data:`LOGIN_WINDOW` sessions connecting and logging in
            at once, a slot taking the next session as soon as one is in: the classic
            preset's setup of the idle, concurrent-transfer and QUIT workloads, which
            do not measure their logins, so a server with a short listen backlog is not
            made to wait out SYN retransmits before the phase; docs/methodology.md).
        passive: data-connection mode, ``pasv`` (RFC 959) or ``epsv`` (RFC 2428).
        op_timeout: bound on any one operation after the greeting: one reply, one
            transfer, one HTTP request and its response (s).
        connect_timeout: bound on connect + greeting of a session (s). Long by default
            (130 s), as ftpbench waits: a server whose accept queue overflowed under a
            burst of connects completes the handshake only after the kernel retransmits
            (SYN-ACK up to 63 s with ``tcp_synack_retries=5``; the client's SYN up to
            127 s with ``tcp_syn_retries=6``), so a slow server gets a figure, not a
            failure (docs/methodology.md, "Slow is a figure"). Not part of the cell key:
            it changes nothing a completed cell measured.
        phase_timeout: bound on the whole phase (s); past it the phase is aborted and
            the unfinished operations are counted as ``timeout`` errors.
        buffer_size: receive buffer of the load generator (bytes).
        same_file: concurrent STOR: all clients write one file (ftpbench) instead of
            one file each (default, so servers that lock a file are not penalised).
        body_size: bytes of the request body of each HTTP upload (``http_upload``;
            seed 002: about 8 KiB, its own source file), 1 byte .. 1 GiB.
        method: HTTP upload method: ``put`` (``PUT /uploads/<unique name>``, every HTTP
            server under test takes it) or ``post`` (``POST /uploads/``, the server
            picks the name; optional per server).
        keepalive: HTTP clients reuse one connection for all their requests (seed 002's
            ``gobench -k=true``); False: one connection per request.
        session: sustained workloads (``retr_sustained``, ``stor_sustained``): ``per_op``
            (every operation is connect, login, TYPE I, transfer, QUIT on a new session:
            dkftpbench's user) or ``reuse`` (each client logs in once, untimed, and loops
            transfers on that session; after a failed operation its next one logs in again,
            timed).
        rate: sustained workloads and ``mixed``: None (default) for a **closed loop** (each client starts
            its next operation when its last ended), or the target operations per second
            over all clients for an **open loop**: operation k is due at ``k / rate`` s
            after the phase start, the next free client takes it, and its latency counts
            from that intended start (docs/methodology.md, "Open and closed loop").
            ``mixed``: each user has its own schedule paced by the payload bytes of its
            operations, ``rate / clients`` operations/s on average (runner.load.ftp.mixed).
        user_rate: sustained workloads and ``mixed``: the rate R (bytes/s) of the figure "users at rate
            R" (dkftpbench's: the clients each of which moved at least R bytes/s over the
            phase); default 1 MiB/s.
        client_options: options of a real-client driver (lftp, wget, curl:
            runner.load.tools.ftp_tool), ``{name: value}`` as strings (a number becomes its decimal
            text: quote a hex value; ``true``/``false`` become ``yes``/``no``), e.g. lftp's
            ``{"xfer:buffer-size": "0x20000"}`` or curl's ``{"--tcp-nodelay": ""}``; each
            driver names those it takes (the spec refuses the others, and refuses any for a
            driver that takes none). At most 32 items; names and values up to 100 characters.
            Part of the cell key (and the row title) only when not empty.
        driver: the driver of this workload's cells (runner.load.registry), overriding the
            campaign's ``driver``, so one campaign can put two drivers side by side (seed
            004: ``wget`` beside ``xferlab-ftp``). None (default): the campaign's driver.
            Part of the cell key (and the row title, ``[wget]``) only when set.

    The ``mixed`` workload (runner.load.ftp.mixed; docs/methodology.md, "Mixed sessions")
    also reads:

    Attributes:
        mix: the operation weights of a session (runner.catalogue.mixed.OpMix).
        sizes: the file-size distribution of its transfers (runner.catalogue.mixed.SizeDist).
        session_ops: a session ends after this many operations (K; login not counted), 1 .. 100,000.
        session_seconds: ... or after this many seconds (T), whichever comes first; None: no limit.
        think: the pause between two operations of a session: ``none``, ``fixed``
            (``think_ms``) or ``exponential`` (mean ``think_ms``, drawn from the session's
            seeded generator).
        think_ms: the think time (ms), 0 .. 600,000.
        seed: the seed of every random draw of the phase (operations, sizes, think times,
            offsets); client i's generator is ``random.Random(f"{seed}:{i}")``, so a phase
            is reproducible.
        dir_entries: entries of the directory LIST, MLSD and CWD work on (10, 1,000,
            100,000 ...), 1 .. 100,000; made once and checked before the phase.
    """

    model_config = ConfigDict(extra="forbid")

    clients: int = Field(300, ge=1, le=20000)
    file_size: int = Field(10 * MIB, ge=1, le=1 << 40)
    transfer_size: int = Field(256 * MIB, ge=1, le=1 << 40)
    duration: float = Field(3.0, gt=0, le=3600)
    login_mode: Literal["concurrent", "sequential", "window"] = "concurrent"
    passive: Literal["pasv", "epsv"] = "pasv"
    op_timeout: float = Field(30.0, gt=0, le=3600)
    connect_timeout: float = Field(130.0, gt=0, le=3600)
    phase_timeout: float = Field(300.0, gt=0, le=24 * 3600)
    buffer_size: int = Field(256 * 1024, ge=4096, le=64 * MIB)
    same_file: bool = False
    body_size: int = Field(8 * KIB, ge=1, le=1 << 30)
    method: Literal["put", "post"] = "put"
    keepalive: bool = True
    session: Literal["per_op", "reuse"] = "per_op"
    rate: float | None = Field(None, gt=0, le=1_000_000)
    user_rate: int = Field(MIB, ge=1, le=1 << 40)
    client_options: dict[str, str] = Field(default_factory=dict, max_length=32)
    driver: str | None = Field(None, min_length=1, max_length=40)
    mix: OpMix = Field(default_factory=default_mix)
    sizes: SizeDist = Field(default_factory=SizeDist)
    session_ops: int = Field(20, ge=1, le=100_000)
    session_seconds: float | None = Field(None, gt=0, le=3600)
    think: Literal["none", "fixed", "exponential"] = "none"
    think_ms: float = Field(0.0, ge=0, le=600_000)
    seed: int = Field(1, ge=0, le=(1 << 63) - 1)
    dir_entries: int = Field(10, ge=1, le=MAX_DIR_ENTRIES)

    @field_validator("client_options", mode="before")
    @classmethod
    def _option_text(cls, v: object) -> object:
        if not isinstance(v, dict):
            return v
        out = {}
        for k, x in v.items():
            x = ("yes" if x else "no") if isinstance(x, bool) else "" if x is None else x
            out[k] = str(x) if isinstance(x, (int, float)) else x
            if (isinstance(k, str) and not 0 < len(k) <= 100) or (isinstance(out[k], str) and len(out[k]) > 100):
                raise ValueError(f"client option {k!r}: names and values are 1..100 and 0..100 characters")
        return out

    @model_validator(mode="after")
    def _think(self) -> WorkloadParams:
        if self.think == "none" and self.think_ms > 0:
            raise ValueError(f"think_ms is {self.think_ms:g} but think is none: give think: fixed or exponential")
        if self.think != "none" and self.think_ms <= 0:
            raise ValueError(f"think is {self.think}: give think_ms > 0 (the think time in ms)")
        return self

    @field_validator("file_size", "transfer_size", "buffer_size", "body_size", "user_rate", mode="before")
    @classmethod
    def _sizes(cls, v: object) -> object:
        return parse_size(v) if isinstance(v, str) else v


#: How a workload's clients are spread over several load-generator hosts (runner.multihost):
#: ``split``: the N clients (or idle sessions) are divided among the hosts (150 + 150 for 300);
#: ``per_host``: every host runs the whole workload (one transfer stream per host).
ClientSplit = Literal["split", "per_host"]
#: Protocols a workload can be run over (a driver names those it speaks).
ProtocolName = Literal["ftp", "http"]


@dataclass(frozen=True)
class WorkloadInfo:
    """Static description of a workload.

    Attributes:
        name: identifier used in specs, the store and the CLI.
        title: row title template in seed 000's wording; ``{clients}``, ``{size}``
            (``file_size``), ``{body}`` (``body_size``), ``{duration}``, ``{session}`` and
            ``{loop}`` (``closed loop`` or ``open loop R/s``) are filled from the parameters.
        primary: the metric the comparison table shows (``throughput``, ``elapsed`` or,
            for HTTP, ``requests_rate``: successful requests per second).
        unit: unit of the primary metric.
        higher_is_better: direction of the primary metric.
        uses: which WorkloadParams fields change what is measured (for the cell key).
        single_stream: one transfer stream repeated for ``duration`` (STOR/RETR and the
            ``*_idle`` variants); across hosts the throughput is the sum of the hosts'.
        fixture_param: the WorkloadParams field giving the size (bytes) of the file the
            server must hold before the phase (RETR workloads), or None.
        client_split: how clients are spread over several load hosts (:data:`ClientSplit`).
        protocol: protocol the workload is defined over (``ftp`` or ``http``).
        sustained: N clients loop operations for ``duration`` s (runner.load.ftp.sustained);
            a sweep of its client counts is reported as a saturation curve.
    """

    name: str
    title: str
    primary: str
    unit: str
    higher_is_better: bool
    uses: tuple[str, ...]
    single_stream: bool = False
    fixture_param: str | None = None
    client_split: ClientSplit = "split"
    protocol: ProtocolName = "ftp"
    sustained: bool = False

    def fixture_size(self, params: WorkloadParams) -> int | None:
        """Bytes of the fixture file the server must hold for this workload with
        ``params`` (``params.<fixture_param>``), or None when it needs none."""
        return None if self.fixture_param is None else int(getattr(params, self.fixture_param))

    def generic_title(self) -> str:
        """The row title with placeholders for its parameters (``N``, ``SIZE``, ``BODY``,
        ``D``, ``SESSION``, ``LOOP``), e.g. ``N concurrent clients (RETR SIZE file)``: the
        launch form's list of workloads."""
        return self.title.format(clients="N", size="SIZE", body="BODY", duration="D", session="SESSION",
                                 loop="LOOP", mix="MIX")

    def title_for(self, params: WorkloadParams) -> str:
        """Row title with parameters filled in, e.g. ``300 concurrent clients (RETR 10M file)``."""
        title = self.title.format(clients=params.clients, size=human_size(params.file_size),
                                  body=human_size(params.body_size), duration=f"{params.duration:g}",
                                  session=params.session.replace("_", " "),
                                  loop=f"open loop {params.rate:g}/s" if params.rate else "closed loop",
                                  mix=mix_summary(params))
        if params.client_options and "client_options" in self.uses:
            title += " [" + ", ".join(f"{k}={v}" if v else k for k, v in params.client_options.items()) + "]"
        if params.driver:
            title += f" [{params.driver}]"
        return title


_T = ("passive", "op_timeout", "buffer_size")
WORKLOADS: dict[str, WorkloadInfo] = {
    w.name: w
    for w in (
        WorkloadInfo("stor", "STOR (client -> server)", "throughput", "MiB/s", True,
                     ("transfer_size", "duration", "client_options") + _T, single_stream=True,
                     client_split="per_host"),
        WorkloadInfo("retr", "RETR (server -> client)", "throughput", "MiB/s", True,
                     ("transfer_size", "duration", "client_options") + _T, single_stream=True,
                     fixture_param="transfer_size", client_split="per_host"),
        WorkloadInfo("login", "{clients} concurrent clients (connect, login)", "elapsed", "s", False,
                     ("clients", "login_mode", "op_timeout")),
        WorkloadInfo("stor_idle", "STOR (1 file with {clients} idle clients)", "throughput", "MiB/s",
                     True, ("clients", "transfer_size", "duration", "login_mode") + _T, single_stream=True),
        WorkloadInfo("retr_idle", "RETR (1 file with {clients} idle clients)", "throughput", "MiB/s",
                     True, ("clients", "transfer_size", "duration", "login_mode") + _T, single_stream=True,
                     fixture_param="transfer_size"),
        WorkloadInfo("retr_concurrent", "{clients} concurrent clients (RETR {size} file)", "elapsed",
                     "s", False, ("clients", "file_size", "login_mode", "client_options") + _T,
                     fixture_param="file_size"),
        WorkloadInfo("stor_concurrent", "{clients} concurrent clients (STOR {size} file)", "elapsed",
                     "s", False, ("clients", "file_size", "login_mode", "same_file", "client_options") + _T),
        WorkloadInfo("quit", "{clients} concurrent clients (QUIT)", "elapsed", "s", False,
                     ("clients", "login_mode", "op_timeout")),
        # sustained load: N clients loop transfers for ``duration`` s (runner.load.ftp.sustained)
        WorkloadInfo("retr_sustained", "{clients} clients RETR {size} for {duration} s ({session}, {loop})",
                     "throughput", "MiB/s", True, ("clients", "file_size", "duration", "session", "rate", "user_rate")
                     + _T, fixture_param="file_size", sustained=True),
        WorkloadInfo("stor_sustained", "{clients} clients STOR {size} for {duration} s ({session}, {loop})",
                     "throughput", "MiB/s", True, ("clients", "file_size", "duration", "session", "rate", "user_rate")
                     + _T, sustained=True),
        # mixed FTP sessions: weighted operations, size distributions, think times (runner.load.ftp.mixed)
        WorkloadInfo("mixed", "{clients} clients mixed sessions for {duration} s ({mix})", "ops_rate", "1/s", True,
                     ("clients", "duration", "mix", "sizes", "session_ops", "session_seconds", "think", "think_ms",
                      "seed", "dir_entries", "login_mode", "rate", "user_rate") + _T),
        # HTTP (seed 002): N keep-alive clients, each one request after another for ``duration`` s
        WorkloadInfo("http_upload", "{clients} HTTP clients (upload {body} body)", "requests_rate", "req/s", True,
                     ("clients", "duration", "body_size", "method", "keepalive", "op_timeout"), protocol="http"),
        WorkloadInfo("http_download", "{clients} HTTP clients (GET {size} file)", "requests_rate", "req/s", True,
                     ("clients", "duration", "file_size", "keepalive", "op_timeout"), fixture_param="file_size",
                     protocol="http"),
    )
}


def _sizes_key(d: SizeDist) -> list[tuple[str, object]]:
    """The fields of a size distribution that its kind uses, for :func:`params_key`."""
    used = {"fixed": ("size",), "storm": ("size", "count"), "uniform": ("min", "max", "files"),
            "log2": ("min", "max", "files"), "buckets": ("buckets",)}[d.kind]
    out: list[tuple[str, object]] = [("kind", d.kind)]
    for f in used:
        v = getattr(d, f)
        out.append((f, "/".join(f"{size_label(s)}x{w:g}" for s, w in sorted(v.items())) if f == "buckets" else v))
    return out


def mix_summary(params: WorkloadParams) -> str:
    """A mixed workload's script in a few words, e.g. ``retr 40% stor 10% ...; sizes fixed 1M;
    20 ops/session; think exp 100 ms; dir 1000``."""
    probs = params.mix.probabilities()
    ops = " ".join(f"{k} {v * 100:.0f}%" for k, v in probs.items())
    d = params.sizes
    sizes = {"fixed": f"fixed {human_size(d.size)}", "storm": f"storm {d.count}x{human_size(d.size)}",
             "buckets": "buckets " + "/".join(human_size(s) for s in sorted(d.buckets)),
             "uniform": f"uniform {human_size(d.min or 0)}-{human_size(d.max or 0)}",
             "log2": f"log2 {human_size(d.min or 0)}-{human_size(d.max or 0)}"}[d.kind]
    think = "no think" if params.think == "none" or not params.think_ms else (
        f"think {'exp ' if params.think == 'exponential' else ''}{params.think_ms:g} ms")
    limit = f"{params.session_ops} ops" + (f"/{params.session_seconds:g} s" if params.session_seconds else "")
    return f"{ops}; {sizes}; {limit}/session; {think}; dir {params.dir_entries}; seed {params.seed}"


def workloads_of(protocol: ProtocolName) -> tuple[str, ...]:
    """The names of :data:`WORKLOADS` run over ``protocol`` (``"ftp"`` or ``"http"``), in
    catalogue order: what a driver speaking only that protocol runs."""
    return tuple(n for n, w in WORKLOADS.items() if w.protocol == protocol)


#: The sustained-load workloads (runner.load.ftp.sustained): a closed or open loop of transfers.
SUSTAINED: tuple[str, ...] = tuple(n for n, w in WORKLOADS.items() if w.sustained)
#: Seed 000's eight FTP benchmarks (``--preset classic``), in its order.
CLASSIC_SUITE: tuple[str, ...] = tuple(n for n in workloads_of("ftp") if n not in SUSTAINED and n != "mixed")


_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(i?B)?\s*$", re.IGNORECASE)


def parse_size(text: str) -> int:
    """Parse a byte size: ``"10M"``, ``"10MiB"``, ``"1.5G"``, ``"4096"`` (K/M/G/T are binary
    multiples, 2**10 ...). Raises ValueError naming the bad text."""
    m = _SIZE_RE.match(text)
    if not m:
        raise ValueError(f"not a size: {text!r} (use e.g. 4096, 512K, 10M, 10MiB, 1G)")
    mult = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}[m.group(2).upper()]
    return int(float(m.group(1)) * mult)


def human_size(n: int) -> str:
    """Bytes as the seed writes them: ``10M``, ``1G``, ``512K``, ``1.5M``, ``100`` (binary units)."""
    for unit, div in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= div:
            v = n / div
            return f"{v:.0f}{unit}" if v == int(v) else f"{v:.1f}{unit}"
    return str(n)


def params_key(workload: str, params: WorkloadParams) -> str:
    """Canonical string of the parameters that matter for ``workload``: cells with the
    same key are comparable. E.g. ``clients=300,file_size=10485760,login_mode=concurrent``.
    ``client_options`` counts only when not empty (so the keys of cells stored before it
    existed are unchanged), sorted, as ``client_options=k1=v1;k2=v2``; ``driver`` likewise
    only when set (``driver=wget``); ``mixed`` has ``rate`` and ``user_rate`` only in its
    open loop (``rate`` set)."""
    info = WORKLOADS[workload]
    d = params.model_dump()
    parts = []
    for k in sorted(info.uses + (("driver",) if params.driver else ())):
        if k == "client_options":
            if d[k]:
                parts.append(f"{k}=" + ";".join(f"{a}={b}" for a, b in sorted(d[k].items())))
        elif k in ("rate", "user_rate") and workload == "mixed" and params.rate is None:
            continue  # the closed loop's key is as before the open loop existed
        elif k == "mix":
            parts.append("mix=" + ";".join(f"{a}:{b:g}" for a, b in params.mix.weights().items() if b > 0))
        elif k == "sizes":
            parts.append("sizes=" + ";".join(f"{a}:{b}" for a, b in _sizes_key(params.sizes)))
        else:
            parts.append(f"{k}={d[k]}")
    return ",".join(parts)
