"""The ``mixed`` workload (docs/methodology.md, "Mixed sessions"): N clients, each running
sessions one after another for ``duration`` seconds; a session logs in, then runs
operations drawn from the weights of ``mix`` (runner.catalogue.mixed.OpMix) until it has run
``session_ops`` of them or lasted ``session_seconds``, then QUITs (warp's ``mixed`` benchmark
for weighted operations, dkftpbench's user for the session).

* Operations: ``retr`` (a file of the size set, drawn by weight), ``stor`` (a new file of
  a drawn size into the phase's scratch directory), ``list`` / ``mlsd`` (the listing
  directory of ``dir_entries`` entries; the names are counted and must be all of them),
  ``cwd`` (``CWD`` into the listing directory and ``CDUP``), ``size`` / ``mdtm`` (of a drawn
  file; SIZE must equal its size), ``dele`` (the client's oldest uploaded file; a client
  with none first uploads one of the smallest size, untimed, and its schedule restarts
  after it), ``resume`` (``REST k`` + ``RETR`` of a drawn file, k uniform in 1..size-1; a
  1-byte file is read whole), ``noop``. Each session also counts its ``login`` (connect,
  greeting, USER/PASS, FTPS handshake and PBSZ/PROT, TYPE I) as an operation.
* Think time between operations (closed loop, ``rate`` unset): ``none``, ``fixed`` (``think_ms``) or ``exponential``
  (mean ``think_ms``). Randomness: client i has three generators, ``random.Random(f"{seed}:
  {i}:ops")`` (operation kinds), ``...:files`` (files, sizes, offsets) and ``...:think``, so
  its sequence of operation kinds depends only on the seed and i (:func:`op_sequence`).
* **Latency from the intended start**: operation k+1 of a session is due at the end of
  operation k plus the drawn think time; its latency counts from that due time, so a late
  timer, a busy event loop or a slow previous step shows in it (the coordinated-omission
  correction of runner.load.ftp.sustained applied to a closed loop with think times). A
  session's login is due when the client's previous session has quit (its QUIT is untimed).
  ``service`` counts from the actual start.
* **Open loop** (``rate`` set: operations/s over all clients): client i is a user with its
  own schedule, independent of the server. Its mean gap between two operations is
  ``g = clients / rate``; its first operation (a login) is due at ``t0 + g x i / clients``
  and each next one at the previous one's due time plus ``n x g / B`` s, n the payload
  bytes of that operation (a listing's bytes included) and B the mix's expected payload
  bytes per operation (runner.catalogue.mixed.mean_op_bytes): the user asks
  ``B x rate / clients`` bytes/s (a capacity search sets it to ``user_rate``), and an
  operation without payload is due right after the one before it. Think times are not
  used. Latency counts from the due time (wrk2's coordinated-omission correction, as
  runner.load.ftp.sustained's open loop). A failed operation ends its session; the next
  session's login is due one gap g later. Operations due before ``duration`` all run;
  a client still behind at ``2 x duration`` stops, and the operations it was due (about
  one per g) are ``backlog`` errors. Per user (``clients``): its bytes, and its span from
  its first due time to its last operation's end less one gap g (being at most one
  operation behind still keeps the rate), but never shorter than its schedule (the due
  time of its next, unrun operation less the first); so a user on schedule has exactly
  the rate it asked, and ``users_at_rate`` counts the users whose bytes / span reached
  ``user_rate``.
* The phase: no operation starts after ``duration``; a session whose next operation would
  be due after it ends there, and its client stops (no new session).
  Figures (runner.load.result.PhaseResult): ``elapsed_s`` from the phase start to the last
  operation's end; ``ops`` and ``bytes`` over all kinds; ``op_figures`` per kind and
  ``buckets`` per size bucket (runner.catalogue.mixed.SizeDist.bucket) of the transfers,
  both adding up to the totals exactly; ``sessions``; ``clients`` (per client: bytes, span,
  all ok) for the fairness figures; ``histograms`` over all operations.

Data connections are passive (PASV or EPSV, ``passive``); with FTPS each session keeps its
TLS control connection for all its operations (the TLS session is not resumed on the data
connections: runner.load.ftp.tls).
"""
from __future__ import annotations

import asyncio
import math
import os
import random
import time
from collections import Counter, deque
from contextlib import ExitStack
from typing import BinaryIO

from runner.catalogue.mixed import OPS, OpMix, mean_op_bytes
from runner.load import hdr
from runner.load.ftp.fixtures import client_source
from runner.load.ftp.fixtures_mixed import FileSet, ensure_file_set
from runner.load.ftp.listing import listing_names
from runner.load.ftp.phase import MAX_REPEATS, ClientSpan, Phase
from runner.load.ftp.session import FTPError, FTPSession, _with_timeout
from runner.load.result import ClientFigures, OpFigures, SessionFigures

#: Most uploaded files checked with SIZE after the phase (untimed).
MAX_STOR_CHECKS = 200
MAX_DELETED_KEPT = 1000
#: Open loop: operations due before ``duration`` but not started this many ``duration``s
#: after the phase start are ``backlog`` errors (as runner.load.ftp.sustained).
DRAIN_FACTOR = 2.0
#: Open loop: a user's span is never taken as shorter than (1 - this) x its schedule, so a
#: user exactly on schedule is not below its rate by a rounding error.
SCHEDULE_EPS = 1e-9


def op_sequence(mix: OpMix, seed: int, client: int, n: int) -> list[str]:
    """The first ``n`` operation kinds client ``client`` draws for ``seed`` (what the phase
    runs, failures included: a failed operation still used its draw)."""
    rng = random.Random(f"{seed}:{client}:ops")
    probs = mix.probabilities()
    kinds, weights = list(probs), list(probs.values())
    return [rng.choices(kinds, weights)[0] for _ in range(n)]


class _Kind:
    """Accumulating figures of one operation kind or size bucket."""

    __slots__ = ("ops", "bytes", "items", "errors", "latency", "service")

    def __init__(self) -> None:
        self.ops = 0
        self.bytes = 0
        self.items = 0
        self.errors: Counter[str] = Counter()
        self.latency = hdr.new_histogram()
        self.service = hdr.new_histogram()

    def figures(self) -> OpFigures:
        return OpFigures(self.ops, self.bytes, self.items, dict(self.errors),
                         hdr.encode(self.latency) if self.ops else "", hdr.encode(self.service) if self.ops else "")


class _Client(ClientSpan):
    __slots__ = ("i", "ops_rng", "file_rng", "think_rng", "uploads", "failed_uploads", "stored", "scheduled", "slack")

    def __init__(self, i: int, seed: int) -> None:
        super().__init__()
        self.i = i
        self.ops_rng = random.Random(f"{seed}:{i}:ops")
        self.file_rng = random.Random(f"{seed}:{i}:files")
        self.think_rng = random.Random(f"{seed}:{i}:think")
        self.uploads: deque[tuple[str, int]] = deque()
        self.failed_uploads: list[str] = []  # STORs that failed: a part of the file may be on the server
        self.stored = 0
        self.scheduled: float | None = None  # open loop: seconds of its schedule that it ran
        self.slack = 0.0  # open loop: one mean operation gap (s)

    def figures(self) -> ClientFigures:
        """Its bytes and span; in the open loop the span less one mean gap, and at least
        its schedule (module docstring)."""
        span = (self.last - self.first) if self.first is not None and self.last is not None else 0.0
        if self.scheduled is not None:
            span = max(span - self.slack, self.scheduled * (1.0 - SCHEDULE_EPS))
        return ClientFigures(self.bytes, span, self.ok)


class _Mixed:
    """The measured loop of one mixed phase."""

    def __init__(self, ph: Phase, fs: FileSet, scratch: str, sources: ExitStack) -> None:
        self.ph = ph
        self.fs = fs
        self.scratch = scratch
        self._sources = sources
        self._open: dict[int, BinaryIO] = {}
        probs = ph.p.mix.probabilities()
        self.kinds_drawn, self.kind_weights = list(probs), list(probs.values())
        self.file_weights = [w for _, _, w in fs.files]
        self.kinds: dict[str, _Kind] = {k: _Kind() for k in ("login", *OPS)}
        self.buckets: dict[str, _Kind] = {}
        self.latency = hdr.new_histogram()
        self.service = hdr.new_histogram()
        self.sessions: list[SessionFigures] = []
        self.deleted: list[str] = []
        self.backlog_ops = 0

    def source(self, size: int) -> BinaryIO:
        f = self._open.get(size)
        if f is None:
            f = self._open[size] = self._sources.enter_context(open(client_source(size), "rb"))
        return f

    def think_s(self, c: _Client) -> float:
        p = self.ph.p
        if p.think == "none" or p.think_ms <= 0:
            return 0.0
        if p.think == "fixed":
            return p.think_ms / 1000.0
        return c.think_rng.expovariate(1000.0 / p.think_ms)

    def draw_file(self, c: _Client) -> tuple[str, int]:
        name, size, _ = c.file_rng.choices(self.fs.files, self.file_weights)[0]
        return name, size

    async def login(self) -> FTPSession:
        s, _seconds = await self.ph.open_session()
        try:
            await s.type_binary()
        except BaseException:
            s.close()
            self.ph.sessions.discard(s)
            raise
        return s

    async def _draw(self, s: FTPSession, c: _Client) -> tuple[str, bool] | None:
        """The next operation kind of ``c``'s session, drawn by the mix's weights; a DELE
        with nothing of the client's to delete first STORs the smallest fixture, untimed.
        Returns (kind, whether that STOR ran), or None when it failed (a ``stor`` error)."""
        kind = c.ops_rng.choices(self.kinds_drawn, self.kind_weights)[0]
        if kind != "dele" or c.uploads:
            return kind, False
        try:
            await self._stor(s, c, min(sz for _, sz, _ in self.fs.files))
        except FTPError as e:
            self.failed("stor", e)
            return None
        return kind, True

    async def _stor(self, s: FTPSession, c: _Client, size: int) -> int:
        name = f"{self.scratch}/c{c.i}-{c.stored}.bin"
        c.stored += 1
        try:
            n = await _with_timeout(s.stor_transfer(name, self.source(size), size), self.ph.p.op_timeout,
                                    f"STOR {name}")
        except FTPError:
            c.failed_uploads.append(name)
            raise
        c.uploads.append((name, size))
        return n

    async def run_op(self, s: FTPSession, c: _Client, kind: str) -> tuple[int, bytes | None, int | None]:
        """Run one operation; returns (payload bytes, the listing of LIST/MLSD or None, file
        size of a transfer or None). Raises FTPError."""
        if kind in ("retr", "resume"):
            name, size = self.draw_file(c)
            offset = c.file_rng.randint(1, size - 1) if kind == "resume" and size > 1 else 0
            return await s.retr(name, size - offset, offset=offset), None, size
        if kind == "stor":
            _, size = self.draw_file(c)
            return await self._stor(s, c, size), None, size
        if kind in ("list", "mlsd"):
            data = await s.listing(kind.upper(), self.fs.list_dir)
            return len(data), data, None
        if kind == "cwd":
            await s.cwd_and_back(self.fs.list_dir)
        elif kind in ("size", "mdtm"):
            name, size = self.draw_file(c)
            if kind == "mdtm":
                await s.mdtm(name)
            elif (got := await s.size(name)) != size:
                raise FTPError("protocol", f"SIZE {name}: {got}, the file holds {size}")
        elif kind == "dele":
            name, _ = c.uploads.popleft()
            await s.dele(name)
            if len(self.deleted) < MAX_DELETED_KEPT:
                self.deleted.append(name)
        else:
            await s.noop()
        return 0, None, None

    def names_in(self, kind: str, data: bytes) -> int:
        """The names of a LIST/MLSD listing (untimed: counted after the operation's end).
        Raises FTPError(kind="protocol") unless they are all the listing directory's entries."""
        verb = kind.upper()
        names = len(listing_names(data, verb))
        if names != self.fs.list_entries:
            raise FTPError("protocol", f"{verb} {self.fs.list_dir}: {names} names, "
                                       f"the directory holds {self.fs.list_entries}")
        return names

    def record(self, kind: str, intended: float, start: float, end: float, n: int, items: int,
               size: int | None) -> None:
        k = self.kinds[kind]
        targets = [k]
        if size is not None:
            label = self.ph.p.sizes.bucket(size)
            targets.append(self.buckets.setdefault(label, _Kind()))
        for t in targets:
            t.ops += 1
            t.bytes += n
            t.items += items
            hdr.record_s(t.latency, end - intended)
            hdr.record_s(t.service, end - start)
        hdr.record_s(self.latency, end - intended)
        hdr.record_s(self.service, end - start)
        self.ph.ops += 1
        self.ph.bytes += n

    def failed(self, kind: str, e: FTPError) -> None:
        self.kinds[kind].errors[self.ph.error(e)] += 1

    async def _wait_until(self, t: float) -> None:
        for _ in range(1000):  # a timer may fire early (uvloop's resolution is 1 ms): sleep again
            wait = t - time.perf_counter()
            if wait <= 0:
                return
            await asyncio.sleep(wait)

    async def client(self, c: _Client, stop: float) -> None:
        ph = self.ph
        p = ph.p
        intended = time.perf_counter()
        for _ in range(MAX_REPEATS):
            if intended >= stop:
                return
            sess_start, sess_bytes, sess_ops, sess_ok, finished = intended, 0, 0, True, False
            if c.first is None:
                c.first = intended
            ph.pending += 1
            try:
                s = await self.login()
            except FTPError as e:
                ph.pending -= 1
                self.failed("login", e)
                c.ok = False
                intended = c.last = time.perf_counter()
                self.sessions.append(SessionFigures(intended - sess_start, 0, 0, False))
                continue
            ph.pending -= 1
            end = c.last = time.perf_counter()
            self.record("login", intended, sess_start, end, 0, 0, None)
            sess_ops += 1
            for _ in range(p.session_ops):
                if p.session_seconds is not None and end - sess_start >= p.session_seconds:
                    break
                drawn = await self._draw(s, c)
                if drawn is None:
                    sess_ok = False
                    break
                kind, stored = drawn
                if stored:
                    end = time.perf_counter()
                intended = end + self.think_s(c)
                if intended >= stop:  # the client's schedule has passed the end: its last session
                    finished = True
                    break
                await self._wait_until(intended)
                start = time.perf_counter()
                ph.pending += 1
                try:
                    n, listing, size = await self.run_op(s, c, kind)
                    end = time.perf_counter()
                    items = 0 if listing is None else self.names_in(kind, listing)
                except FTPError as e:
                    ph.pending -= 1
                    self.failed(kind, e)
                    sess_ok = False
                    end = c.last = time.perf_counter()
                    break
                ph.pending -= 1
                c.last = end
                self.record(kind, intended, start, end, n, items, size)
                sess_ops += 1
                sess_bytes += n
                c.bytes += n
            self.sessions.append(SessionFigures(end - sess_start, sess_bytes, sess_ops, sess_ok))
            c.ok = c.ok and sess_ok
            if sess_ok:
                try:
                    await s.quit()
                except FTPError:
                    pass
            s.close()
            ph.sessions.discard(s)
            if finished:
                return
            intended = time.perf_counter()  # the next session is due once this one has quit

    async def client_open(self, c: _Client, t0: float, stop: float) -> None:
        """Client ``c`` in the open loop (``rate`` set; module docstring): its operations
        are due on its own schedule, whatever the server does."""
        ph = self.ph
        p = ph.p
        assert p.rate is not None
        gap = p.clients / p.rate  # the user's mean seconds between two operations
        per_op = mean_op_bytes(p.mix, p.sizes, p.seed)
        scale = gap / per_op if per_op > 0 else 0.0  # seconds of schedule per payload byte
        drain = t0 + DRAIN_FACTOR * p.duration
        due = t0 + gap * c.i / p.clients
        c.first, c.slack = due, gap
        for _ in range(MAX_REPEATS):
            if due >= stop:
                break
            if time.perf_counter() >= drain:
                self.backlog(c, due, stop, gap)
                break
            await self._wait_until(due)
            sess_start, sess_bytes, sess_ops, sess_ok, finished = due, 0, 0, True, False
            start = time.perf_counter()
            ph.pending += 1
            try:
                s = await self.login()
            except FTPError as e:
                ph.pending -= 1
                self.failed("login", e)
                c.ok = False
                c.last = time.perf_counter()
                self.sessions.append(SessionFigures(c.last - sess_start, 0, 0, False))
                due += gap
                continue
            ph.pending -= 1
            end = c.last = time.perf_counter()
            self.record("login", due, start, end, 0, 0, None)
            sess_ops += 1
            for _ in range(p.session_ops):
                if p.session_seconds is not None and end - sess_start >= p.session_seconds:
                    break
                drawn = await self._draw(s, c)
                if drawn is None:
                    sess_ok = False
                    break
                kind = drawn[0]
                if due >= stop:
                    finished = True
                    break
                if time.perf_counter() >= drain:
                    self.backlog(c, due, stop, gap)
                    finished = True
                    break
                await self._wait_until(due)
                start = time.perf_counter()
                ph.pending += 1
                try:
                    n, listing, size = await self.run_op(s, c, kind)
                    end = time.perf_counter()
                    items = 0 if listing is None else self.names_in(kind, listing)
                except FTPError as e:
                    ph.pending -= 1
                    self.failed(kind, e)
                    sess_ok = False
                    end = c.last = time.perf_counter()
                    due += gap
                    break
                ph.pending -= 1
                c.last = end
                self.record(kind, due, start, end, n, items, size)
                sess_ops += 1
                sess_bytes += n
                c.bytes += n
                due += n * scale if scale else gap
            self.sessions.append(SessionFigures(end - sess_start, sess_bytes, sess_ops, sess_ok))
            c.ok = c.ok and sess_ok
            if sess_ok:
                try:
                    await s.quit()
                except FTPError:
                    pass
            s.close()
            ph.sessions.discard(s)
            if finished:
                break
        c.scheduled = due - c.first

    def backlog(self, c: _Client, due: float, stop: float, gap: float) -> None:
        """Count client ``c``'s operations due from ``due`` to ``stop`` (about one per mean
        ``gap``) that did not start within DRAIN_FACTOR x duration as ``backlog`` errors."""
        n = max(1, math.ceil((stop - due) / gap))
        c.ok = False
        self.backlog_ops += n


async def run_mixed(ph: Phase) -> None:
    """The phase of the ``mixed`` workload on ``ph`` (module docstring). Errors are counted
    in ``ph``, never raised; a server that admits no setup session leaves ``ph`` without a
    login (runner.load.ftp.workloads then raises LoadError)."""
    p = ph.p
    n = p.clients
    loop = "closed loop" if p.rate is None else (
        f"open loop, {p.rate:g} operations/s ({mean_op_bytes(p.mix, p.sizes, p.seed) * p.rate / n / 1024:,.0f} KiB/s "
        "per user)")
    ph.notes.append(f"mixed: {n} clients, seed {p.seed}, {p.duration:g} s, {loop}")
    setup, _ = await ph.login_one(binary=True)
    if setup is None:
        return
    scratch = f"xferlab-mix-{os.getpid()}"
    try:
        w = p.mix.weights()
        fs = await ensure_file_set(setup if ph.target.root is None else None, ph.target.root, p.sizes, p.seed,
                                   p.dir_entries, ph.progress,
                                   files_needed=any(w[k] > 0 for k in ("retr", "resume", "size", "mdtm")),
                                   dir_needed=any(w[k] > 0 for k in ("list", "mlsd", "cwd")))
        await setup.mkd(scratch)
    except (FTPError, OSError) as e:
        ph.error(e)
        ph.notes.append(f"setup: cannot place the mixed fixtures: {e}")
        await ph.teardown([setup])
        return
    await _quit_quietly(ph, setup)  # it would sit idle through the phase (a server may time it out)
    clients = [_Client(i, p.seed) for i in range(n)]
    with ExitStack() as sources:
        m = _Mixed(ph, fs, scratch, sources)
        for _, size, _ in fs.files:
            if p.mix.stor > 0 or p.mix.dele > 0:
                m.source(size)  # untimed: every client-side source file made before the phase
        ph.checkpoint("loaded")
        ph.progress(f"{n} clients, mixed sessions for {p.duration:g} s")
        ph.begin()
        t0 = ph.t0
        assert t0 is not None
        try:
            if p.rate is None:
                await asyncio.gather(*(m.client(c, t0 + p.duration) for c in clients))
            else:
                await asyncio.gather(*(m.client_open(c, t0, t0 + p.duration) for c in clients))
        finally:
            ends = [c.last for c in clients if c.last is not None]
            ph.t1 = max(ends) if ends and ph.pending == 0 else time.perf_counter()
            ph.clients = [c.figures() for c in clients]
            ph.histograms = {"latency": hdr.encode(m.latency), "service": hdr.encode(m.service)}
            ph.op_figures = {k: v.figures() for k, v in m.kinds.items() if v.ops or v.errors}
            ph.buckets = {k: v.figures() for k, v in sorted(m.buckets.items(), key=lambda kv: _bucket_order(kv[0]))}
            ph.mixed_sessions = list(m.sessions)
            ph.deleted = list(m.deleted)
            if m.backlog_ops:
                ph.errors["backlog"] += m.backlog_ops
                ph.first_error.setdefault("backlog", f"about {m.backlog_ops} operations due in the open loop were "
                                                     f"not started within {DRAIN_FACTOR:g} x duration")
            ph.end()
        ph.progress(f"{ph.ops} operations in {ph.elapsed_s():.3f} s, {len(m.sessions)} sessions")
        left = [u for c in clients for u in c.uploads]
        check, _ = await ph.login_one(binary=True)
        if check is None:
            ph.notes.append("teardown: no session to check and delete the uploaded files")
            return
        await _check_uploads(ph, check, left[:MAX_STOR_CHECKS])
        await _clean_scratch(ph, check, scratch, [name for name, _ in left] + [n for c in clients
                                                                               for n in c.failed_uploads])
        await ph.teardown([check])


async def _quit_quietly(ph: Phase, s: FTPSession) -> None:
    try:
        await s.quit()
    except FTPError:
        pass
    finally:
        s.close()
        ph.sessions.discard(s)


async def _clean_scratch(ph: Phase, s: FTPSession, scratch: str, names: list[str]) -> None:
    """Untimed, best effort, bounded by ``op_timeout``: DELE the files the phase left, then
    ``RMD`` the scratch directory."""
    try:
        async with asyncio.timeout(max(1.0, ph.p.op_timeout)):
            for name in names:
                try:
                    await s.dele(name)
                except FTPError:
                    pass
            await s.command(f"RMD {scratch}", (250, 257))
    except (TimeoutError, FTPError) as e:
        ph.notes.append(f"teardown: scratch directory {scratch} not removed: {e}")


def _bucket_order(label: str) -> float:
    from runner.catalogue.workloads import parse_size

    try:
        return float(parse_size(label.split("-")[0]))
    except ValueError:
        return float("inf")


async def _check_uploads(ph: Phase, s: FTPSession, uploads: list[tuple[str, int]]) -> None:
    """Untimed: each file left by the phase's STORs holds its size on the server (SIZE); the
    first that does not is counted as an error of ``stor`` (and stops the check)."""
    try:
        async with asyncio.timeout(max(1.0, ph.p.op_timeout)):
            for name, size in uploads:
                try:
                    await s.verify_size(name, size)
                except FTPError as e:  # a STOR the server did not keep whole: a stor error
                    kind = ph.error(e)
                    figs = ph.op_figures.setdefault("stor", OpFigures())
                    figs.errors[kind] = figs.errors.get(kind, 0) + 1
                    ph.notes.append(f"after the phase: {e}")
                    return
    except TimeoutError:
        ph.notes.append("after the phase: the SIZE check of the uploaded files did not finish in time")
