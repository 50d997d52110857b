"""The capacity search's steps in a campaign (docs/methodology.md, "Capacity"): after each
stored cell of a ``capacity`` entry, judge it, then queue the next step's cell or store the
answer. The search itself is runner.metrics.capacity; the service level and the step
parameters are runner.spec.capacity.

A search is the cells of one campaign, server label and workload whose parameter key,
without ``clients`` and ``rate``, is its entry's. Each step is ``repeats`` cells at one N
(the confirmation one more cell at the answer), queued after every other cell of the
campaign and counted in ``cells_total``. Each judged cell gets a ``capacity_step`` sample
(``ok``: 1 or 0, raw: the missed criteria); the cell that ends the search gets the
``capacity`` sample (``users``: the answer, raw: runner.metrics.capacity.summary)."""
from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING

from sqlalchemy import func, select

from runner.catalogue.workloads import WorkloadParams, params_key
from runner.metrics.capacity import MAX_STEPS, Slo, StepFigures, Verdict, judge, next_step, summary
from runner.net.conditions import LinkError, parse_link
from runner.store.models import Campaign, Cell, Sample

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from runner.spec.capacity import CapacitySpec
    from runner.spec.model import CampaignSpec
    from runner.spec.workloads import WorkloadSpec

_STRIP_RE = re.compile(r"(?:^|,)(?:clients|rate)=[^,]*")


def search_key(key: str) -> str:
    """A parameter key without ``clients`` and ``rate`` (what every step of a search shares):
    ``"clients=4,file_size=1,rate=2.0"`` -> ``"file_size=1"``."""
    return _STRIP_RE.sub("", key).strip(",")


def entry_of(spec: CampaignSpec, cell: Cell) -> WorkloadSpec | None:
    """The capacity entry of ``spec`` that ``cell`` is a step of, or None."""
    for w in spec.workloads:
        if w.capacity is None or cell.workload not in w.names():
            continue
        first = w.param_sets()[0]
        if search_key(params_key(cell.workload, first)) == search_key(cell.params_key):
            return w
    return None


def slo_of(cap: CapacitySpec) -> Slo:
    """The runner.metrics.capacity.Slo of a spec's capacity block."""
    return Slo(cap.user_rate, cap.check_rate, cap.p99_ms, cap.min_jain)


def _values(session: Session, cell_id: int) -> dict[tuple[str, str], float]:
    rows = session.execute(select(Sample.metric, Sample.stat, Sample.value).where(Sample.cell_id == cell_id))
    return {(m, s): float(v) for m, s, v in rows}


def figures(session: Session, cell: Cell, spec: CampaignSpec) -> StepFigures:
    """What ``cell`` measured, as the search reads it (runner.metrics.capacity.StepFigures);
    the slowest user's rate of a one-client cell is its throughput (no fairness figures)."""
    v = _values(session, cell.id)
    cpu = [v[("server_cpu", k)] for k in ("user", "system") if ("server_cpu", k) in v]
    try:
        link = parse_link(str(cell.variant.get("link", "loopback")))
        link_rate = int(link.rate_bytes_s) if link.rate_bytes_s else None
    except LinkError:
        link_rate = None
    cores = len(spec.pinning.server) if spec.pinning.server else (os.cpu_count() or 1)
    p = WorkloadParams.model_validate(cell.params)
    busier, total = busier_direction(v), v.get(("throughput", "value"))
    demand = p.clients * p.user_rate if p.rate is not None else None
    return StepFigures(
        clients=p.clients, status=cell.status, users_at_rate=v.get(("users_at_rate", "value")),
        p99_ms=v.get(("latency", "p99")), jain=v.get(("fairness", "jain")), errors=v.get(("errors", "total"), 0.0),
        throughput=v.get(("throughput", "value")),
        # one client has no fairness figures: its rate is the phase's
        min_rate=v.get(("fairness", "min_rate"), v.get(("throughput", "value")) if p.clients == 1 else None),
        server_cpu_s=sum(cpu) if cpu else None, elapsed_s=v.get(("elapsed", "value")), server_cores=cores,
        client_util=v.get(("client_cpu", "utilization")), client_wait=v.get(("client_cpu", "runqueue_wait")),
        client_steal=v.get(("client_cpu", "steal")),
        cpu_pressure=v.get(("machine_cpu", "pressure")),
        listen_drops=max(v.get(("tcp", "ListenOverflows"), 0.0), v.get(("tcp", "ListenDrops"), 0.0)),
        link_rate=link_rate, link_throughput=busier, demand=demand,
        link_demand=demand * busier / total if demand is not None and busier is not None and total else None)


#: Operations of a mixed phase whose payload goes from the client to the server.
UPLOAD_OPS = frozenset({"stor"})


def busier_direction(v: dict[tuple[str, str], float]) -> float | None:
    """MiB/s in the busier direction of a mixed phase, from its per-operation
    ``throughput`` rows (uploads: :data:`UPLOAD_OPS`; downloads: every other operation
    with payload, RETR, resumed RETR and listings); None for a phase without them (it
    moved one way only)."""
    per_op = {stat: val for (metric, stat), val in v.items() if metric == "throughput" and stat != "value"}
    if not per_op:
        return None
    up = sum(val for op, val in per_op.items() if op in UPLOAD_OPS)
    return max(up, sum(per_op.values()) - up)


def _steps(session: Session, cell: Cell, entry: WorkloadSpec) -> list[Cell]:
    key = search_key(params_key(cell.workload, entry.param_sets()[0]))
    cells = session.scalars(select(Cell).where(
        Cell.campaign_id == cell.campaign_id, Cell.server_label == cell.server_label,
        Cell.workload == cell.workload).order_by(Cell.seq))
    return [c for c in cells if search_key(c.params_key) == key]


def after_step(session: Session, cell: Cell, spec: CampaignSpec) -> str | None:
    """After ``cell`` was stored (inside finish_cell's transaction, runner.store.campaigns):
    when it is a step of a capacity search and no other cell of the search is pending,
    judge it, then queue the next step or store the answer. Returns a message for the
    campaign's log, or None when ``cell`` is no step or a sibling is still pending."""
    entry = entry_of(spec, cell)
    if entry is None or entry.capacity is None:
        return None
    cap = entry.capacity
    slo = slo_of(cap)
    steps = _steps(session, cell, entry)
    if any(c.status in ("queued", "running") for c in steps):
        return None
    verdicts: list[Verdict] = []
    figs: list[StepFigures] = []
    runs: dict[int, list[bool]] = {}
    for c in steps:
        f = figures(session, c, spec)
        verdict = judge(f, slo)
        if c.id == cell.id:
            session.add(Sample(cell_id=c.id, metric="capacity_step", stat="ok", value=float(verdict.ok),
                               unit="bool", raw={"clients": f.clients, "missed": list(verdict.missed)}))
        figs.append(f)
        verdicts.append(verdict)
        runs.setdefault(f.clients, []).append(verdict.ok)
    head = f"{cell.server_label} · {cell.workload} capacity"
    if cell.status == "skipped":
        return f"{head}: the server was skipped; search stopped"
    state = next_step(runs, start=cap.start, max_users=cap.max_users, resolution=cap.resolution, confirm=cap.confirm)
    if state.next_clients is not None and len(steps) >= MAX_STEPS:
        state = type(state)(state.lo, state.hi, None, answer=state.lo)
    if state.next_clients is None:
        record = summary(slo, verdicts, state, figs)
        session.add(Sample(cell_id=cell.id, metric="capacity", stat="users", value=float(state.answer or 0),
                           unit="users", raw=record))
        why = f"; broke at N = {state.hi}: {record['reason_text']}" if state.hi is not None else " (max_users)"
        return f"{head}: {state.answer} users at {slo.text()}{why}"
    n = state.next_clients
    copies = 1 if state.confirm else spec.repeats
    params = cap.step_params(WorkloadParams.model_validate(cell.params), n, cell.workload)
    last_seq = session.scalar(select(func.max(Cell.seq)).where(Cell.campaign_id == cell.campaign_id)) or 0
    done_at_n = len(runs.get(n, []))
    for i in range(copies):
        session.add(Cell(campaign_id=cell.campaign_id, seq=last_seq + 1 + i, server=cell.server,
                         server_version=cell.server_version, variant=dict(cell.variant),
                         server_label=cell.server_label, server_spec=dict(cell.server_spec), workload=cell.workload,
                         params=params.model_dump(mode="json"), params_key=params_key(cell.workload, params),
                         repeat=done_at_n + i, status="queued"))
    camp = session.get(Campaign, cell.campaign_id, with_for_update=True)
    if camp is not None:
        camp.cells_total += copies
    session.flush()
    last = verdicts[-1]
    said = "ok" if last.ok else "missed: " + "; ".join(last.missed)
    return f"{head}: N = {last.clients} {said}; next N = {n}" + (" (confirmation)" if state.confirm else "")
