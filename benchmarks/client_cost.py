"""What the load generator itself costs: client CPU per login and per GiB, on each event
loop, against one server in one run (part of ``xferlab selftest``; issue: the client must
not be what a table measures).

For each of ``rounds`` rounds, each event loop of :data:`runner.load.loop.EVENT_LOOPS`
(interleaved, so drift hits both alike) runs, through :func:`runner.load.run.run_workload`:

* ``login``: N concurrent sessions connect and log in; client CPU (user+system of this
  process over the phase, ``PhaseResult.client_cpu_*``) divided by the logins: **us/login**;
* ``retr``: one stream reads the fixture repeatedly for ``retr_seconds``: client CPU per
  GiB received, **s/GiB**, and the throughput;
* ``stor``: one 256 MiB upload (``os.sendfile``): client CPU per GiB sent, **s/GiB**.

Medians over the rounds are printed with the asyncio/uvloop ratio (how many times less
CPU uvloop needs). CPU times are the kernel's per-process accounting (``os.times``,
10 ms ticks): the phases are long enough (hundreds of ms of CPU) for that to be fine.
"""
from __future__ import annotations

import statistics
from typing import Any

from runner.backends.base import Target
from runner.load import loop as event_loop
from runner.load.run import run_workload
from runner.workloads import WorkloadParams

GIB = 1 << 30


def _cpu(r) -> float:
    return r.client_cpu_user_s + r.client_cpu_system_s


def measure_once(target: Target, loop: str, *, clients: int, retr_seconds: float) -> dict[str, float]:
    """One round on event loop ``loop``: ``{"login_us", "retr_s_gib", "retr_mib_s",
    "stor_s_gib"}``. Raises RuntimeError when a phase had errors (named)."""
    out: dict[str, float] = {}

    def phase(workload: str, params: WorkloadParams):
        r = event_loop.run(run_workload(workload, target, params), wanted=loop)
        if r.error_count:
            raise RuntimeError(f"client cost, {loop}, {workload}: errors {r.errors}")
        return r

    r = phase("login", WorkloadParams(clients=clients, login_mode="concurrent"))
    out["login_us"] = _cpu(r) / r.ops * 1e6
    r = phase("retr", WorkloadParams(duration=retr_seconds, transfer_size=256 << 20))
    out["retr_s_gib"] = _cpu(r) / (r.bytes / GIB)
    out["retr_mib_s"] = r.throughput_mib_s
    r = phase("stor", WorkloadParams(transfer_size=256 << 20))
    out["stor_s_gib"] = _cpu(r) / (r.bytes / GIB)
    return out


def client_cost(target: Target, *, rounds: int = 3, clients: int = 300, retr_seconds: float = 2.0,
                progress=print) -> dict[str, dict[str, list[float]]]:
    """``{loop: {figure: [value per round]}}`` for every usable event loop (uvloop is
    left out, with a progress line, when it is not installed)."""
    loops = [name for name in event_loop.EVENT_LOOPS if event_loop.loop_name(name) == name]
    if len(loops) < len(event_loop.EVENT_LOOPS):
        progress("client cost: uvloop is not installed: asyncio only")
    res: dict[str, dict[str, list[float]]] = {name: {} for name in loops}
    for rnd in range(rounds):
        for name in loops:
            for k, v in measure_once(target, name, clients=clients, retr_seconds=retr_seconds).items():
                res[name].setdefault(k, []).append(v)
        progress(f"client cost round {rnd + 1}/{rounds}: " + ", ".join(
            f"{n} {res[n]['login_us'][-1]:.0f} us/login, {res[n]['retr_s_gib'][-1]:.3f} s/GiB" for n in loops))
    return res


def format_client_cost(res: dict[str, dict[str, list[float]]], clients: int) -> list[str]:
    """The table of :func:`client_cost` results as lines: medians per loop, and the
    asyncio/uvloop ratio when both ran."""
    rows: list[tuple[str, str, str]] = [
        (f"client CPU per login ({clients} concurrent), us", "login_us", "{:.0f}"),
        ("client CPU per GiB received (RETR), s/GiB", "retr_s_gib", "{:.3f}"),
        ("RETR throughput, MiB/s", "retr_mib_s", "{:,.0f}"),
        ("client CPU per GiB sent (STOR, sendfile), s/GiB", "stor_s_gib", "{:.3f}"),
    ]
    loops = list(res)
    med: dict[str, dict[str, Any]] = {n: {k: statistics.median(v) for k, v in res[n].items()} for n in loops}
    both = "asyncio" in med and "uvloop" in med
    head = f"{'median of ' + str(len(next(iter(res.values()))['login_us'])) + ' rounds':50}" + "".join(
        f"{n:>12}" for n in loops) + (f"{'asyncio/uvloop':>16}" if both else "")
    lines = [head]
    for label, k, fmt in rows:
        line = f"{label:50}" + "".join(f"{fmt.format(med[n][k]):>12}" for n in loops)
        if both:
            ratio = med["asyncio"][k] / med["uvloop"][k] if med["uvloop"][k] else float("nan")
            line += f"{ratio:>15.2f}x"
        lines.append(line)
    return lines
