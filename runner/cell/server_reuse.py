"""Server reuse: one running server for several consecutive cells of a campaign.

A cell's own cost beyond its measured phase is mostly the server's life cycle
(container or process start, readiness probe, fixture, warm-up, stop: ``xferlab show
ID --timing``). The spec's ``server_reuse`` says when a server may serve more than one
cell (:data:`REUSE_POLICIES`):

``none``
    A fresh server for every cell (the default for a spec that does not say).
``repeats``
    One server for all the repeats of a cell group (same server, workload and
    parameters): the campaign loop claims the group's next repeat while its server
    runs (runner.store.campaigns.claim_next_cell ``prefer``), so the repeats run back
    to back; the warm-up pass runs once per server, the RETR fixture is made once.
    With adaptive repeats the repeat queued for an unsteady group runs next, on the
    same server.
``workloads``
    One server per (server, repeat): every workload of one repeat runs on it, one
    after another; each repeat starts a fresh server.

When a restart is required, the lab restarts:

* **Memory rows need a fresh server.** A server that has served a cell is not in a
  fresh server's state (its heap's high-water mark, its caches), so a cell on a
  reused server records no memory checkpoint (start, loaded, end, peak) and no
  memory timeline; the memory tables and their history come only from cells that
  started their server. Server CPU, throughput, latencies and the kernel TCP counters
  are deltas over the cell's own phase and are recorded for every cell. So only the
  cell that starts a server runs the memory sampler's helper process; a cell on a
  reused server reads the process tree's CPU times in the runner itself
  (runner.metrics.sampler.TreeSampler without ``start``).
* **What does not change during a server's life is read once:** its listen sockets'
  backlog (``ss`` in its namespace) is kept with the server (:attr:`LiveServer.facts`)
  and stored again for each cell it serves.
* **Sessions that are not what a row measures are kept** (the idle rows' and the
  concurrent transfers' logged-in sessions: runner.load.ftp.session_pool): the pool is
  kept in :attr:`LiveServer.facts` (``"sessions"``) and ended by :func:`end_sessions`
  before its server stops.
* **A cell that did not end ``done``** (failed operations, a server that died, a
  crash) stops its server: the next cell starts a fresh one, so one failure never
  leaks into the next figure.
* Multi-host cells (``hosts:``) always start a fresh server.

Whether reuse loses independence is a measured question: ``benchmarks/
noise_sources.py`` separates the variance between phases on one running server from
the variance between server starts (docs/methodology.md, "Server reuse and noise").
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from runner.catalogue.servers import JIT_SERVERS

if TYPE_CHECKING:
    from runner.backends.base import ServerHandle
    from runner.store.models import Cell

log = logging.getLogger(__name__)

ReusePolicy = Literal["none", "repeats", "workloads"]
#: The ``server_reuse`` values of a campaign spec, in order of growing reuse.
REUSE_POLICIES: tuple[str, ...] = ("none", "repeats", "workloads")


def reuse_key(policy: str, cell: Cell) -> dict[str, Any] | None:
    """The Cell columns a cell must share with the cell that started a server for that
    server to serve it under ``policy``: ``repeats``: campaign, server label, workload
    and parameter key; ``workloads``: campaign, server label and repeat; ``none``: None.
    A profiled cell of a server started with its perf map (:func:`needs_perf_map`) adds
    ``profiled: True``: such a server serves only profiled cells, and they only it.
    Raises ValueError for an unknown policy."""
    if policy == "none":
        return None
    key: dict[str, Any]
    if policy == "repeats":
        key = {"campaign_id": cell.campaign_id, "server_label": cell.server_label, "workload": cell.workload,
               "params_key": cell.params_key}
    elif policy == "workloads":
        key = {"campaign_id": cell.campaign_id, "server_label": cell.server_label, "repeat": cell.repeat}
    else:
        raise ValueError(f"unknown server_reuse {policy!r}; known: {', '.join(REUSE_POLICIES)}")
    if needs_perf_map(cell):  # started with its perf map: serves the profiled cells only
        key["profiled"] = True
    return key


def needs_perf_map(cell: Cell) -> bool:
    """Whether ``cell`` is a profiled cell of a server whose JIT-code perf map must be asked
    for at its start (``node`` in runner.catalogue.servers.JIT_SERVERS)."""
    if not getattr(cell, "profiled", False):  # a Cell-like without the column: not profiled
        return False
    name = (getattr(cell, "server_spec", None) or {}).get("name")
    return JIT_SERVERS.get(str(name)) == "node"


@dataclass
class LiveServer:
    """A server kept running between cells: its handle, the columns of the cells it may
    serve (:func:`reuse_key`), how many cells it has served and ``facts``, what the cell
    runner read once for the server's whole life (name -> value; e.g. ``"backlogs"``,
    runner.cell.local)."""

    handle: ServerHandle
    key: dict[str, Any]
    cells: int = 1
    facts: dict[str, Any] = field(default_factory=dict)


class ServerPool:
    """At most one server kept running between the cells of a campaign loop
    (runner.campaign.loop.run_campaign), under one :data:`REUSE_POLICIES` policy.

    The loop asks :meth:`prefer` which cell to claim next, the cell runner asks
    :meth:`take` for a running server that may serve its cell and, after a ``done``
    cell, hands the server back with :meth:`keep`; :meth:`close` stops what is left
    (the loop's ``finally``). Not thread-safe (one loop, one cell at a time)."""

    def __init__(self, policy: str) -> None:
        if policy not in REUSE_POLICIES:
            raise ValueError(f"unknown server_reuse {policy!r}; known: {', '.join(REUSE_POLICIES)}")
        self.policy = policy
        self.live: LiveServer | None = None
        #: seconds the last :meth:`take` spent stopping a server that could not serve its cell
        self.last_stop_s = 0.0

    def prefer(self) -> dict[str, Any] | None:
        """Columns of the cell to claim first (the live server can serve it), or None."""
        return dict(self.live.key) if self.live is not None else None

    def take(self, cell: Cell) -> LiveServer | None:
        """The live server (its handle, the number of cells it has served, its facts),
        when it may serve ``cell`` and still runs; else None, after stopping a live server
        that may not (the caller starts a fresh one); :attr:`last_stop_s` says how long
        that stop took."""
        self.last_stop_s = 0.0
        live = self.live
        if live is None:
            return None
        key = reuse_key(self.policy, cell)
        if key == live.key:
            try:
                running = live.handle.alive()
            except Exception as exc:  # noqa: BLE001 - a probe that fails means: do not reuse
                log.info("live server probe failed: %s", exc)
                running = False
            if running:
                self.live = None
                return live
            log.info("the kept server is no longer running (%s): starting a fresh one",
                     live.handle.exit_reason() or "exited")
        self.last_stop_s = self.close()
        return None

    def keep(self, cell: Cell, handle: ServerHandle, served: int, facts: dict[str, Any] | None = None) -> bool:
        """Keep ``handle`` running after ``cell`` (its ``served``-th cell, 1 for the cell
        that started it), with the ``facts`` read once for its life, when the policy reuses
        servers; returns False when it does not (the caller stops the server). Raises
        RuntimeError when a server is already kept."""
        key = reuse_key(self.policy, cell)
        if key is None:
            return False
        if self.live is not None:
            raise RuntimeError("a server is already kept; take() or close() it first")
        self.live = LiveServer(handle, key, served, dict(facts or {}))
        return True

    def close(self) -> float:
        """Stop the kept server, if any; returns the seconds the stop took (0.0 if none).
        Never raises (a failed stop is logged)."""
        live, self.live = self.live, None
        if live is None:
            return 0.0
        t = time.perf_counter()
        end_sessions(live.facts, stopping=True)
        try:
            live.handle.stop()
        except Exception as exc:  # noqa: BLE001 - cleanup must not end the campaign
            log.warning("stopping the kept server failed: %s", exc)
        return time.perf_counter() - t


def end_sessions(facts: dict[str, Any], *, stopping: bool = False) -> None:
    """End the logged-in sessions a server life kept (``facts["sessions"]``, a
    runner.load.ftp.session_pool.SessionPool). ``stopping``: the server stops next, so
    its 221 to each QUIT is enough; else (a later row runs without them) each
    connection's close by the server is waited for. Never raises."""
    pool = facts.pop("sessions", None)
    if pool is None:
        return
    try:
        pool.close(wait_close=not stopping)
    except Exception as exc:  # noqa: BLE001 - cleanup must not end the campaign
        log.warning("ending the kept sessions failed: %s", exc)
