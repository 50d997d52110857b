"""A stored campaign whose cells carry kernel TCP counters as a run stores them
(runner.cell.samples.tcp_samples): one ``login`` cell of 300 clients per repeat on a server
with backlog 32; repeat 0 failed with 148 listen overflows, repeat 1 done with 3 SYN-ACK
retransmits, repeat 2 done with every counter zero."""
from __future__ import annotations

from sqlalchemy.orm import Session

SERVER = "vsftpd-small-backlog"
ZERO = {"ListenOverflows": 0, "ListenDrops": 0, "TCPSynRetrans": 0, "RetransSegs": 0}
COUNTERS = [{**ZERO, "ListenOverflows": 148, "ListenDrops": 148, "TCPSynRetrans": 296},  # repeat 0: failed
            {**ZERO, "TCPSynRetrans": 3},                                               # repeat 1: done
            dict(ZERO)]                                                                  # repeat 2: nothing


def store_tcp_campaign(engine) -> int:
    """Store the campaign (see the module docstring) through the store helpers; return its id."""
    from runner.cell.samples import tcp_samples
    from runner.spec.model import parse_spec
    from runner.store import campaigns as crud
    from runner.store.models import Cell, Sample

    spec = parse_spec({"name": "tcp counters cli", "repeats": 3, "backend": "local",
                       "servers": [{"name": "vsftpd", "label": SERVER}],
                       "workloads": [{"name": "login", "params": {"clients": 300}}]})
    with Session(engine, expire_on_commit=False) as s:
        camp = crud.create_campaign(s, spec=spec, backend="local")
        s.commit()
        for c in s.query(Cell).filter(Cell.campaign_id == camp.id).order_by(Cell.seq):
            c.status, c.started_at = "running", crud.now()
            delta = COUNTERS[c.repeat]
            samples = [Sample(metric="elapsed", stat="value", value=3.5, unit="s"),
                       Sample(metric="late_sessions", stat="value", value=154.0 if c.repeat == 0 else 0.0,
                              unit="count")]
            samples += tcp_samples(delta, [("0.0.0.0:21", 32)], "net:[4026532000]")
            if c.repeat == 0:
                crud.finish_cell(s, cell=c, status="failed", samples=samples,
                                 error="154 of 300 sessions waited > 3 s")
            else:
                crud.finish_cell(s, cell=c, status="done", samples=samples)
        return camp.id
