"""Capacity ("sustainable users", docs/methodology.md, "Capacity"): the largest number of
concurrent users N a server keeps at a service level, found by a search over sustained
cells. Plain data: no import of the rest of ``runner``.

The measure is dkftpbench's (Dan Kegel, http://www.kegel.com/dkftpbench/: "the number of
users that each keep a target bandwidth"), with the service level widened to latency and
fairness:

* **demand**: each of the N users asks for ``user_rate`` bytes/s: the step is an open-loop
  sustained cell (runner.load.ftp.sustained) with ``rate = N x user_rate / file_size``
  operations/s, so the offered load grows with N and each operation's latency counts from
  its intended start;
* a step **passes** (:func:`judge`) when the cell is done, no operation failed, every
  client moved at least ``user_rate`` bytes/s over its span (``users_at_rate == N``, when
  ``check_rate``), the p99 latency is at most ``p99_ms`` (when given) and Jain's index over
  the per-client rates is at least ``min_jain`` (for N >= 2);
* the **search** (:func:`next_step`): the ramp doubles N from ``start`` until a step fails
  or ``max_users`` passes; then bisection between the largest passing N (``lo``) and the
  smallest failing one (``hi``) until ``hi - lo <= resolution`` (while no N passed, down to
  one user); then a confirmation run at ``lo``. A failed confirmation makes ``lo`` failing
  and the bisection goes on below it.
  The answer is ``lo`` (0 when no N passed), exact to ``resolution`` users: the true
  capacity lies in ``[lo, hi - 1]``.
* **why it broke** (:func:`break_reason`): the figures of the first failing step above the
  answer, tested in this order: the client (runnable, running, waiting on a run queue or
  stolen from by the hypervisor, for at least ``CLIENT_BOUND`` of the phase: the lab
  measured its own limit, or the CPU time other processes took from it;
  runner.metrics.runqueue.saturation), listen drops
  (ListenOverflows or ListenDrops), the link (the rate moved in its busier direction,
  or the users' demand N x ``user_rate``, at or above ``LINK_SHARE`` of a shaped link's
  rate, which each direction has: tbf on both ends of the veth pair), the server
  CPU (at or above ``CPU_SHARE`` of the cores it may use); otherwise ``server`` (none of
  those: a limit of the server's own, e.g. a bandwidth cap, a lock or a per-session cost, or
  CPU time it waited for while other processes held the cores, which its own CPU figure
  does not show; its text gives the machine's CPU pressure, the share of the phase in
  which some runnable task waited for a CPU, when it was measured).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from runner.metrics.runqueue import CLIENT_BOUND, saturation, steal_shown

#: Share of a shaped link's rate at or above which the link is the bound.
LINK_SHARE = 0.9
#: Share of the server's cores at or above which its CPU is saturated.
CPU_SHARE = 0.9
#: Most steps (cells) of one search: the ramp from 1 to 20,000 users is 15 steps, its
#: bisection 15 more, and a few confirmations.
MAX_STEPS = 40


@dataclass(frozen=True)
class Slo:
    """A service level.

    Attributes:
        user_rate: each user's demand and floor, bytes/s (> 0).
        check_rate: whether a user below ``user_rate`` fails the step.
        p99_ms: the largest p99 operation latency (ms, from the intended start), None for no bound.
        min_jain: the smallest Jain's index over the per-client rates (0..1).
    """

    user_rate: int
    check_rate: bool = True
    p99_ms: float | None = None
    min_jain: float = 0.9

    def text(self) -> str:
        """``each user >= 256 KiB/s, p99 <= 500 ms, Jain >= 0.9``."""
        parts = [f"each user >= {self.user_rate / 1024:g} KiB/s" if self.check_rate
                 else f"demand {self.user_rate / 1024:g} KiB/s per user"]
        if self.p99_ms is not None:
            parts.append(f"p99 <= {self.p99_ms:g} ms")
        parts.append(f"Jain >= {self.min_jain:g}")
        return ", ".join(parts)


@dataclass(frozen=True)
class StepFigures:
    """What one step (cell) measured, as the search reads it.

    Attributes:
        clients: N.
        status: the cell's status (``done``, ``failed``, ``skipped``).
        users_at_rate: clients at ``user_rate`` or more; None when not stored.
        p99_ms: p99 latency from the intended start (ms), None when not stored.
        jain: Jain's index, None when not stored (N = 1).
        errors: failed operations.
        throughput: MiB/s moved, None when not stored.
        min_rate: the slowest client's rate, MiB/s, None when not stored.
        server_cpu_s: server CPU seconds (user + system) in the phase, None when not stored.
        elapsed_s: the phase's seconds, None when not stored.
        server_cores: cores the server may use (its pinning, else the machine's).
        client_util: client CPU, share of one core; None when not stored.
        client_wait: the client's run-queue wait, share of the phase (runnable but kept off
            a CPU: runner.metrics.runqueue); None when not measured.
        client_steal: the share of the client's CPUs' time the hypervisor stole over the
            phase (runner.metrics.runqueue.cpu_steal_s); None when not measured.
        cpu_pressure: the share of the phase in which the load generator's machine had a
            runnable task waiting for a CPU (Linux PSI, runner.metrics.runqueue); None when
            not measured.
        listen_drops: ListenOverflows + ListenDrops of the phase.
        link_rate: a shaped link's rate in bytes/s (each direction: the link is shaped on
            both ends, so it is full duplex), None on loopback.
        link_throughput: MiB/s in the busier direction of the link (a mixed phase's
            downloads, RETR, resumed RETR and listings, or its uploads, STOR), None when
            the phase moved one way only (then ``throughput`` is that direction's).
        link_demand: the users' demand in that busier direction, bytes/s: ``demand``
            times that direction's share of the bytes moved; None when not known (then
            ``demand`` is taken as one direction's).
        demand: the users' demand, N x user_rate in bytes/s, None when not known.
    """

    clients: int
    status: str = "done"
    users_at_rate: float | None = None
    p99_ms: float | None = None
    jain: float | None = None
    errors: float = 0.0
    throughput: float | None = None
    min_rate: float | None = None
    server_cpu_s: float | None = None
    elapsed_s: float | None = None
    server_cores: int = 1
    client_util: float | None = None
    client_wait: float | None = None
    client_steal: float | None = None
    cpu_pressure: float | None = None
    listen_drops: float = 0.0
    link_rate: int | None = None
    link_throughput: float | None = None
    link_demand: float | None = None
    demand: int | None = None


@dataclass(frozen=True)
class Verdict:
    """A step's verdict: ``ok`` and, when not, the criteria it missed (readable text)."""

    clients: int
    ok: bool
    missed: tuple[str, ...] = field(default=())


def judge(f: StepFigures, slo: Slo) -> Verdict:
    """Whether step ``f`` met ``slo`` (module docstring). A criterion whose figure was not
    stored fails the step (a level that was not measured is not met), except Jain's index
    at N = 1."""
    missed: list[str] = []
    if f.status != "done":
        missed.append(f"cell {f.status}")
    if f.errors > 0:
        missed.append(f"{f.errors:g} failed operations")
    if slo.check_rate:
        if f.users_at_rate is None:
            missed.append("users at rate not measured")
        elif f.users_at_rate < f.clients:
            missed.append(f"{f.users_at_rate:g} of {f.clients} users at {slo.user_rate / 1024:g} KiB/s")
    if slo.p99_ms is not None:
        if f.p99_ms is None:
            missed.append("p99 not measured")
        elif f.p99_ms > slo.p99_ms:
            missed.append(f"p99 {f.p99_ms:.4g} ms > {slo.p99_ms:g} ms")
    if f.clients >= 2:
        if f.jain is None:
            missed.append("Jain's index not measured")
        elif f.jain < slo.min_jain:
            missed.append(f"Jain {f.jain:.3f} < {slo.min_jain:g}")
    return Verdict(f.clients, not missed, tuple(missed))


@dataclass(frozen=True)
class SearchState:
    """Where a search stands.

    Attributes:
        lo: the largest N that passed every run, below every failing N (0: none).
        hi: the smallest N that failed a run, None while the ramp has not failed.
        next_clients: N of the next step, None when the search is over.
        confirm: the next step is the confirmation run at ``lo``.
        answer: the sustainable users when the search is over, else None.
        capped: the answer is ``max_users`` (the server may sustain more).
    """

    lo: int
    hi: int | None
    next_clients: int | None
    confirm: bool = False
    answer: int | None = None
    capped: bool = False


def next_step(runs: Mapping[int, Sequence[bool]], *, start: int, max_users: int, resolution: int,
              confirm: bool = True) -> SearchState:
    """The next step of a search given the verdicts so far, ``runs``: N -> the ``ok`` of each
    run at N, in run order (module docstring). N passes when every run at N passed.
    Raises ValueError for ``start`` outside ``1..max_users`` or ``resolution`` < 1."""
    if not 1 <= start <= max_users or resolution < 1:
        raise ValueError(f"start {start}, max_users {max_users}, resolution {resolution}: "
                         "need 1 <= start <= max_users and resolution >= 1")
    if not runs:
        return SearchState(0, None, start)
    failing = [n for n, oks in runs.items() if not all(oks)]
    hi = min(failing) if failing else None
    passing = [n for n, oks in runs.items() if oks and all(oks) and (hi is None or n < hi)]
    lo = max(passing) if passing else 0
    if hi is None:
        if lo >= max_users:
            return _confirmed(runs, lo, hi, confirm, capped=True)
        return SearchState(lo, hi, min(2 * lo, max_users) if lo else start)
    if hi - lo <= resolution and (lo > 0 or hi == 1):  # no N passed yet: bisect down to one user
        return _confirmed(runs, lo, hi, confirm)
    mid = (lo + hi) // 2
    if mid in runs:  # an N measured before (a non-monotonic curve): move towards hi
        free = [n for n in range(mid + 1, hi) if n not in runs]
        if not free:
            return _confirmed(runs, lo, hi, confirm)
        mid = free[0]
    return SearchState(lo, hi, mid)


def _confirmed(runs: Mapping[int, Sequence[bool]], lo: int, hi: int | None, confirm: bool,
               capped: bool = False) -> SearchState:
    if lo == 0 or not confirm or len(runs.get(lo, ())) >= 2:
        return SearchState(lo, hi, None, answer=lo, capped=capped)
    return SearchState(lo, hi, lo, confirm=True)


def break_reason(f: StepFigures) -> tuple[str, str]:
    """Why the step ``f`` (the first failing one above the answer) broke: ``(kind, text)``,
    kind one of ``client``, ``listen_drops``, ``link``, ``server_cpu``, ``server``
    (module docstring for the order and thresholds), text the evidence in numbers."""
    if f.client_util is not None and (runnable := saturation(f.client_util, f.client_wait,
                                                             f.client_steal)) >= CLIENT_BOUND:
        stolen = (f", {f.client_steal * 100:.0f}% of its CPUs' time stolen by the hypervisor"
                  if steal_shown(f.client_steal) else "")
        if not f.client_wait:
            return "client", f"the load generator used {f.client_util * 100:.0f}% of a core{stolen} (client-bound)"
        return "client", (f"the load generator was runnable {runnable * 100:.0f}% of the "
                          f"phase: it ran {f.client_util * 100:.0f}% and waited {f.client_wait * 100:.0f}% for a "
                          f"CPU{stolen} (client-bound)")
    if f.listen_drops > 0:
        return "listen_drops", f"{f.listen_drops:g} listen overflows/drops in the server's namespace"
    one_way = f.link_throughput if f.link_throughput is not None else f.throughput
    if f.link_rate and one_way is not None and one_way * (1 << 20) >= LINK_SHARE * f.link_rate:
        where = " in its busier direction" if f.link_throughput is not None else ""
        return "link", (f"{one_way:,.2f} MiB/s moved{where} on a {f.link_rate * 8 / 1e6:g} Mbit/s link "
                        f"(>= {LINK_SHARE:.0%} of it)")
    asked = f.link_demand if f.link_demand is not None else f.demand
    if f.link_rate and asked is not None and asked >= LINK_SHARE * f.link_rate:
        where = " in its busier direction" if f.link_demand is not None else ""
        return "link", (f"the users asked {asked / (1 << 20):,.2f} MiB/s{where} of a {f.link_rate * 8 / 1e6:g} "
                        f"Mbit/s link (>= {LINK_SHARE:.0%} of it)")
    if f.server_cpu_s is not None and f.elapsed_s:
        busy = f.server_cpu_s / f.elapsed_s
        if busy >= CPU_SHARE * f.server_cores:
            return "server_cpu", f"server CPU {busy:.2f} of {f.server_cores} cores busy"
        cpu = f"server CPU {busy:.2f} of {f.server_cores} cores"
    else:
        cpu = "server CPU not measured"
    if f.status != "done":
        return "server", f"the cell {f.status}"
    if f.cpu_pressure is not None:
        return "server", (f"not client, drops, link or CPU ({cpu}; the machine had a task waiting for a CPU "
                          f"{f.cpu_pressure * 100:.0f}% of the phase): a limit of the server's own, or CPU time "
                          "it waited for")
    return "server", (f"not client, drops, link or CPU ({cpu}): a limit of the server's own "
                      "(or CPU time it waited for on a busy machine)")


def summary(slo: Slo, verdicts: Sequence[Verdict], state: SearchState,
            figures: Sequence[StepFigures]) -> dict[str, Any]:
    """The JSON-ready record of a finished search: the SLO, the answer, the resolution
    bracket, the verdicts and figures of every step in run order, and why it broke
    (:func:`break_reason` of the first failing run at ``hi``; None when capped)."""
    reason: tuple[str, str] | None = None
    if state.hi is not None:
        at_hi = [f for f, v in zip(figures, verdicts) if f.clients == state.hi and not v.ok]
        reason = break_reason(at_hi[0]) if at_hi else None
    return {"slo": asdict(slo), "slo_text": slo.text(), "users": state.answer, "lo": state.lo, "hi": state.hi,
            "capped": state.capped, "reason": reason[0] if reason else None,
            "reason_text": reason[1] if reason else None,
            "steps": [{**asdict(f), "ok": v.ok, "missed": list(v.missed)} for f, v in zip(figures, verdicts)]}
