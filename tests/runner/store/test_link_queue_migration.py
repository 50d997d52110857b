"""Migration 0011 (link_queue_explicit) on a real PostgreSQL: the stored texts of rated
links without a queue, which meant tbf's 50 ms before the default became 250 ms
(runner.net.conditions), get ``queue=50ms`` written in, everywhere a series key or a
re-read spec takes them from; the migrated rows agree with what the application computes
from them (points, build keys, the spec's labels), and the old cells' series is not the
series of new cells on the default link."""
from __future__ import annotations

import random

from alembic import command
from alembic.config import Config
from sqlalchemy import select, text
from sqlalchemy.orm import Session

from runner.config import get_settings
from runner.net.conditions import DEFAULT_QUEUE_S, LEGACY_QUEUE_S, parse_link
from runner.spec.model import CampaignSpec, parse_spec
from runner.store import campaigns as crud
from runner.store.models import Campaign, Cell, Sample, SeriesPoint, ServerBuild
from runner.store.points import rebuild_points

PARAMS = {"transfer_size": "4M", "duration": 0.2}


def _alembic(engine, target: str, down: bool) -> None:
    cfg = Config()
    cfg.set_main_option("script_location", str(get_settings().migrations_dir))
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        (command.downgrade if down else command.upgrade)(cfg, target)


def _campaign(engine, servers: list[dict], link: list[str]) -> int:
    """A campaign of ``servers`` x retr over ``link``, every cell done with one throughput
    sample and a build row carrying its variant, as runner.campaign.loop stores them."""
    spec = parse_spec({"name": "q", "repeats": 2, "servers": servers, "backend": "local", "link": link,
                       "workloads": [{"name": "retr", "params": PARAMS}]})
    rnd = random.Random(1)
    with Session(engine, expire_on_commit=False) as s:
        camp = crud.create_campaign(s, spec=spec, backend="local")
        s.commit()
        for c in s.scalars(select(Cell).where(Cell.campaign_id == camp.id).order_by(Cell.seq)).all():
            c.status, c.started_at = "running", crud.now()
            s.commit()
            build = crud.get_or_create_build(s, info={"name": c.server, "version": "1", "variant": c.variant,
                                                       "config_hash": "h"})
            crud.finish_cell(s, cell=c, status="done", build=build, samples=[
                Sample(metric="throughput", stat="value", value=100 * rnd.gauss(1, 0.02), unit="MiB/s")])
        return camp.id


def _state(engine) -> dict:
    """What the migration rewrites, read back: per cell (variant link, spec label, server
    label), the series points' (campaign, server, track, label, samples), the builds'
    (variant link, variant_key) and the campaigns' specs."""
    with Session(engine) as s:
        cells = sorted((c.id, c.variant.get("link"), c.server_spec.get("label"), c.server_label)
                       for c in s.scalars(select(Cell)))
        points = sorted((p.campaign_id, p.server, p.track, p.label, tuple(p.samples))
                        for p in s.scalars(select(SeriesPoint)))
        builds = sorted((b.variant.get("link"), b.variant_key) for b in s.scalars(select(ServerBuild)))
        specs = {c.id: c.spec for c in s.scalars(select(Campaign))}
    return {"cells": cells, "points": points, "builds": builds, "specs": specs}


def test_old_links_name_their_50ms_queue(empty_db_url):
    from runner.store.db import get_engine

    engine = get_engine(url=empty_db_url)
    servers = [{"name": "pyftpdlib", "version": "2.2.0"}, {"name": "tpd", "label": "axis"},
               {"name": "tpd", "label": "mine", "variant": {"link": "100mbit/queue=50ms"}}]
    cid = _campaign(engine, servers, ["loopback", "100mbit/queue=50ms", "100mbit/1ms/queue=50ms/pfifo",
                                      "100mbit/queue=1mb"])
    written = _state(engine)

    # back to 0010: the texts as the code before it wrote them (the 50 ms queue left out)
    _alembic(engine, "0010", down=True)
    old = _state(engine)
    links = {c[1] for c in old["cells"]}
    assert links == {"loopback", "100mbit", "100mbit/1ms/pfifo", "100mbit/queue=1mb"}, links
    labels = {c[3] for c in old["cells"]}
    assert {"pyftpdlib 2.2.0 [link=100mbit]", "axis [100mbit/1ms/pfifo]", "axis [100mbit/queue=1mb]",
            "pyftpdlib 2.2.0 [link=loopback]"} <= labels, labels
    assert {b[0] for b in old["builds"]} == links
    assert old["specs"][cid]["link"] == ["loopback", "100mbit", "100mbit/1ms/pfifo", "100mbit/queue=1mb"]
    # the old code wrote a spec's own label as given ("mine", no link in it): its history track
    with engine.begin() as conn:
        conn.execute(text("UPDATE cell SET server_label = 'mine', server_spec = jsonb_set(server_spec, '{label}', "
                          "'\"mine\"') WHERE server_spec ->> 'label' = 'mine [100mbit]'"))
        conn.execute(text("UPDATE series_point SET track = 'mine', label = 'mine' WHERE track = 'mine [100mbit]'"))
        at = next(i for i, s in enumerate(old["specs"][cid]["servers"]) if s.get("label") == "mine [100mbit]")
        conn.execute(text(f"UPDATE campaign SET spec = jsonb_set(spec, '{{servers,{at},label}}', '\"mine\"')"))
    assert "mine" in {c[3] for c in _state(engine)["cells"]}

    _alembic(engine, "head", down=False)
    new = _state(engine)
    assert {c[1] for c in new["cells"]} == {"loopback", "100mbit/queue=50ms", "100mbit/1ms/queue=50ms/pfifo",
                                            "100mbit/queue=1mb"}
    for link in {c[1] for c in new["cells"]} - {"loopback"}:
        spec = parse_link(link)  # the application reads each as the queue it ran with
        assert spec.text() == link
        assert spec.queue_s == LEGACY_QUEUE_S or spec.queue_bytes == 1 << 20, link
    # everything but the own label is back as the application wrote it before the downgrade
    assert new["builds"] == written["builds"]
    def others(cells):
        return [c for c in cells if not (c[2] or "").startswith("mine")]

    assert others(new["cells"]) == others(written["cells"])
    # the own label (the series' track) is marked with the link, as the link axis marks it
    assert {c[2:] for c in new["cells"] if (c[2] or "").startswith("mine")} == \
        {("mine [100mbit/queue=50ms]", "mine [100mbit/queue=50ms]")}
    # the builds' keys and the series points are what the application computes from the rows
    with Session(engine) as s:
        for b in s.scalars(select(ServerBuild)):
            assert crud.build_key({"name": b.name, "version": b.version, "variant": b.variant,
                                   "config_hash": b.config_hash})[2] == b.variant_key
        camp = s.get(Campaign, cid)
        spec = CampaignSpec.model_validate(camp.spec)  # the stored spec reads back, labels as the cells'
        assert {srv.display() for srv in spec.servers} == {c[3] for c in new["cells"]}
        rebuild_points(s)
        s.commit()
    assert _state(engine)["points"] == new["points"]
    assert len(new["points"]) == len(written["points"]) == 9  # 2 servers x 4 links and "mine"

    # a new campaign on the default link: its series is none of the old ones
    cid2 = _campaign(engine, servers[:2], ["100mbit"])
    with Session(engine) as s:
        tracks = {(p.server, p.track, p.campaign_id) for p in s.scalars(select(SeriesPoint))}
    fresh = {(srv, track) for srv, track, c in tracks if c == cid2}
    stored = {(srv, track) for srv, track, c in tracks if c == cid}
    assert fresh and not fresh & stored, (fresh, stored)
    assert all(f"queue={round(DEFAULT_QUEUE_S * 1000)}ms" in track for _srv, track in fresh), fresh

    # and down again: the old texts, the new default's untouched (it names its queue)
    _alembic(engine, "0010", down=True)
    links = {c[1] for c in _state(engine)["cells"]}
    assert links == {"loopback", "100mbit", "100mbit/1ms/pfifo", "100mbit/queue=1mb", "100mbit/queue=250ms"}
