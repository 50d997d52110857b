"""The saturation API (``/api/campaigns/ID/saturation``, built by
dashboard.services.saturation) on the real test PostgreSQL: the curve of a stored sweep
(figures from the sample rows runner.cell.samples makes), its knee and users at rate R; a
campaign without a sweep; ids validated."""
from __future__ import annotations

import pytest


def test_curve_knee_and_users_at_rate(client, sweep_campaign):
    cid = sweep_campaign()
    r = client.get(f"/api/campaigns/{cid}/saturation")
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/json")
    d = r.json()
    assert d["campaign"] == cid and d["knee_rule"] == {"throughput_share": 0.95, "p99_factor": 2.0}
    [c] = d["curves"]
    assert (c["server"], c["workload"], c["unit"], c["user_rate"]) == ("tpd", "retr_sustained", "MiB/s", 1 << 20)
    assert [p["clients"] for p in c["points"]] == [1, 2, 4, 8]
    assert [p["throughput"] for p in c["points"]] == pytest.approx([10, 20, 40, 41])
    assert [p["p99_ms"] for p in c["points"]] == pytest.approx([2.0, 2.0, 2.0, 5.0], rel=1e-3)  # HDR: 3 digits
    assert c["knee"] == 4 and c["knee_at_end"] is False  # N=8 is within 5% but its p99 is 2.5x
    assert [p["users_at_rate"] for p in c["points"]] == [1, 2, 4, 5]
    assert c["all_at_rate"] == 4
    assert "clients=" not in c["params_key"]


def test_campaign_without_sweep_and_unknown_ids(client, fair_campaign):
    cid = fair_campaign()
    assert client.get(f"/api/campaigns/{cid}/saturation").json()["curves"] == []
    assert client.get("/api/campaigns/999999/saturation").status_code == 404
    assert client.get("/api/campaigns/0/saturation").status_code in (404, 422)
    assert client.get("/api/campaigns/abc/saturation").status_code == 422


def test_a_sweep_spec_is_queued_as_one_cell_per_count(client, auth):
    """POST /api/campaigns with a YAML spec sweeping ``clients``: one queued cell per count
    (and server and repeat); a bad sweep is a 422 naming the field."""
    body = ("name: sweep\nrepeats: 1\nservers: [{name: tpd}]\nworkloads:\n"
            "  - name: retr_sustained\n    params: {clients: [1, 2, 4], duration: 1, rate: 50}\n")
    r = client.post("/api/campaigns", content=body, headers={**auth, "Content-Type": "application/yaml"})
    assert r.status_code == 201, r.text
    assert r.json()["cells_total"] == 3
    assert client.post(f"/api/campaigns/{r.json()['id']}/cancel", headers=auth).json()["cells_cancelled"] == 3
    bad = body.replace("[1, 2, 4]", "[1, 1]")
    r = client.post("/api/campaigns", content=bad, headers={**auth, "Content-Type": "application/yaml"})
    assert r.status_code == 422 and "sweep" in r.text and "repeated" in r.text
