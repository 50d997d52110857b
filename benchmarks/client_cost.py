"""What the load generator itself costs: client CPU per login and per GiB, before and
after (the client of 2026-11-22: asyncio's loop, RETR by ``recv_into``; today's default:
uvloop, RETR by splice), against one server in one run (part of ``xferlab selftest``).

For each of ``rounds`` rounds, each configuration of :data:`CONFIGS` (interleaved, so
drift hits both alike) runs on its event loop:

* ``login`` (:func:`runner.load.ftp.workloads.run_workload`): N concurrent sessions connect and
  log in; client CPU (user+system of this process over the phase,
  ``PhaseResult.client_cpu_*``) divided by the logins: **us/login**;
* RETR: one session reads the fixture ``fixture`` repeatedly for ``retr_seconds`` with the
  configuration's receive mode (runner.load.ftp.retr): client CPU (``os.times``) per GiB
  received, **s/GiB**, and the throughput;
* ``stor`` (run_workload): one 256 MiB upload (``os.sendfile``): client CPU per GiB sent.

Medians over the rounds are printed with the before/after ratio (how many times less
CPU today's client needs). CPU times are the kernel's per-process accounting (10 ms
ticks): the phases take hundreds of ms of CPU, so the tick is not the limit.
"""
from __future__ import annotations

import statistics
from typing import Any

from runner.catalogue.workloads import WorkloadParams
from runner.load import loop as event_loop
from runner.load.ftp.workloads import run_workload
from runner.load.target import Target

GIB = 1 << 30
#: label -> (event loop, RETR receive mode): the client before and after.
CONFIGS = {"before": ("asyncio", "reader"), "after": ("uvloop", "splice")}


def _cpu(r) -> float:
    return r.client_cpu_user_s + r.client_cpu_system_s


async def retr_for(host: str, port: int, user: str, password: str, name: str, size: int, seconds: float,
                   **session: Any) -> tuple[int, float, float]:
    """RETR ``name`` (``size`` bytes) over one session (runner.load.ftp.session.open_session with
    the keyword arguments ``session``: ``retr_mode``, ``buffer_size``, ``rcvlowat``)
    repeatedly for at least ``seconds`` of transfer time. Returns (bytes, transfer
    seconds, client CPU s of this process over the transfers). Raises FTPError as the
    session does."""
    import os
    import time

    from runner.load.ftp.session import open_session

    s = await open_session(host, port, user, password, **session)
    total, spent = 0, 0.0
    t = os.times()
    c0 = t.user + t.system
    try:
        for _ in range(100_000):
            t0 = time.perf_counter()
            total += await s.retr(name, size)
            spent += time.perf_counter() - t0
            if spent >= seconds:
                break
        t = os.times()
        cpu = t.user + t.system - c0
        await s.quit()
    finally:
        s.close()
    return total, spent, cpu


def measure_once(target: Target, config: str, fixture: tuple[str, int], *, clients: int,
                 retr_seconds: float) -> dict[str, float]:
    """One round of configuration ``config`` (:data:`CONFIGS`): ``{"login_us",
    "retr_s_gib", "retr_mib_s", "stor_s_gib"}``. ``fixture`` is (name, size) of a file in
    the server's home. Raises RuntimeError when a phase had errors (named)."""
    import time

    loop, mode = CONFIGS[config]
    out: dict[str, float] = {}

    def phase(workload: str, params: WorkloadParams):
        r = event_loop.run(run_workload(workload, target, params), wanted=loop)
        if r.error_count:
            raise RuntimeError(f"client cost, {config}, {workload}: errors {r.errors}")
        return r

    r = phase("login", WorkloadParams(clients=clients, login_mode="concurrent"))
    out["login_us"] = _cpu(r) / r.ops * 1e6
    t0 = time.perf_counter()
    n, _, cpu = event_loop.run(retr_for(target.host, target.port, target.user, target.password, fixture[0],
                                        fixture[1], retr_seconds, retr_mode=mode), wanted=loop)
    wall = time.perf_counter() - t0
    out["retr_s_gib"] = cpu / (n / GIB)
    out["retr_mib_s"] = n / (1 << 20) / wall
    r = phase("stor", WorkloadParams(transfer_size=256 << 20))
    out["stor_s_gib"] = _cpu(r) / (r.bytes / GIB)
    return out


def client_cost(target: Target, fixture: tuple[str, int], *, rounds: int = 3, clients: int = 300,
                retr_seconds: float = 2.0, progress=print) -> dict[str, dict[str, list[float]]]:
    """``{config: {figure: [value per round]}}`` for each configuration of
    :data:`CONFIGS` whose event loop can run here (uvloop missing: "after" is left out,
    with a progress line)."""
    configs = [c for c, (loop, _) in CONFIGS.items() if event_loop.loop_name(loop) == loop]
    if len(configs) < len(CONFIGS):
        progress("client cost: uvloop is not installed: 'after' cannot be measured")
    res: dict[str, dict[str, list[float]]] = {c: {} for c in configs}
    for rnd in range(rounds):
        for c in configs:
            for k, v in measure_once(target, c, fixture, clients=clients, retr_seconds=retr_seconds).items():
                res[c].setdefault(k, []).append(v)
        progress(f"client cost round {rnd + 1}/{rounds}: " + ", ".join(
            f"{c} {res[c]['login_us'][-1]:.0f} us/login, {res[c]['retr_s_gib'][-1]:.3f} s/GiB" for c in configs))
    return res


def format_client_cost(res: dict[str, dict[str, list[float]]], clients: int) -> list[str]:
    """The table of :func:`client_cost` results as lines: medians per configuration, and
    the before/after ratio when both ran."""
    rows: list[tuple[str, str, str]] = [
        (f"client CPU per login ({clients} concurrent), us", "login_us", "{:.0f}"),
        ("client CPU per GiB received (RETR), s/GiB", "retr_s_gib", "{:.3f}"),
        ("RETR throughput, MiB/s", "retr_mib_s", "{:,.0f}"),
        ("client CPU per GiB sent (STOR, sendfile), s/GiB", "stor_s_gib", "{:.3f}"),
    ]
    loops = list(res)
    med: dict[str, dict[str, Any]] = {n: {k: statistics.median(v) for k, v in res[n].items()} for n in loops}
    both = "before" in med and "after" in med
    names = {c: f"{c}: {CONFIGS[c][0]}, {CONFIGS[c][1]}" for c in loops}
    head = f"{'median of ' + str(len(next(iter(res.values()))['login_us'])) + ' rounds':50}" + "".join(
        f"{names[n]:>26}" for n in loops) + (f"{'before/after':>14}" if both else "")
    lines = [head]
    for label, k, fmt in rows:
        line = f"{label:50}" + "".join(f"{fmt.format(med[n][k]):>26}" for n in loops)
        if both:
            ratio = med["before"][k] / med["after"][k] if med["after"][k] else float("nan")
            line += f"{ratio:>13.2f}x"
        lines.append(line)
    return lines
