"""The per-client fairness API (``/api/campaigns/ID/fairness``, built by
dashboard.services.fairness) on the real test PostgreSQL: curves sorted from the fastest
client, figures as runner.metrics.fairness computes them, cells stored with only ``jain`` and its
per-client list included, ids validated."""
from __future__ import annotations

import pytest

from tests.dashboard.conftest import EVIL


def test_curve_and_figures_of_every_repeat(client, fair_campaign):
    cid = fair_campaign()
    r = client.get(f"/api/campaigns/{cid}/fairness")
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/json")
    d = r.json()
    assert d["campaign"] == cid
    assert len(d["groups"]) == 1  # the login cells have no per-client list
    g = d["groups"][0]
    assert (g["server"], g["workload"], g["rate_unit"]) == ("pyftpdlib 2.2.0", "retr_concurrent", "MiB/s")
    assert g["title"] == "4 concurrent clients (RETR 4M file)"
    old, new = g["repeats"]
    assert (old["repeat"], new["repeat"]) == (0, 1)
    # the old cell: sorted from the fastest client; figures derived from its stored list
    assert old["curve"] == [[1, 4.0], [2, 2.0], [3, 1.0], [4, 1.0]]
    assert old["figures"]["jain"] == pytest.approx(64 / 88)
    assert old["figures"]["cv"] == pytest.approx(1.5 ** 0.5 / 2)
    assert old["figures"]["p95_rate"] == pytest.approx(3.7) and old["figures"]["max_time"] == 8.0
    assert new["curve"] == [[i, 2.0] for i in (1, 2, 3, 4)]
    assert new["figures"]["jain"] == 1.0 and new["figures"]["cv"] == 0.0 and new["clients"] == 4


def test_filters(client, fair_campaign):
    cid = fair_campaign()
    assert len(client.get(f"/api/campaigns/{cid}/fairness", params={"server": "pyftpdlib 2.2.0"}).json()["groups"]) == 1
    assert client.get(f"/api/campaigns/{cid}/fairness", params={"server": "nope"}).json()["groups"] == []
    assert client.get(f"/api/campaigns/{cid}/fairness", params={"workload": "login"}).json()["groups"] == []
    got = client.get(f"/api/campaigns/{cid}/fairness", params={"workload": "retr_concurrent"}).json()["groups"]
    pkey = got[0]["params_key"]
    assert client.get(f"/api/campaigns/{cid}/fairness", params={"params_key": pkey}).json()["groups"] == got


def test_ids_are_validated(client, fair_campaign):
    cid = fair_campaign()
    assert client.get(f"/api/campaigns/{cid + 1000}/fairness").status_code == 404
    assert "no campaign" in client.get(f"/api/campaigns/{cid + 1000}/fairness").json()["detail"]
    for bad in ("0", "-1", "2147483648", "abc", "1.5"):
        assert client.get(f"/api/campaigns/{bad}/fairness").status_code == 422, bad
    assert client.get(f"/api/campaigns/{cid}/fairness", params={"server": ""}).status_code == 422
    assert client.get(f"/api/campaigns/{cid}/fairness", params={"workload": "x" * 41}).status_code == 422
    r = client.get(f"/api/campaigns/{cid}/fairness?server=%00")  # PostgreSQL refuses NUL in text: 422, not 500
    assert r.status_code == 422 and r.json()["detail"]


def test_curve_is_thinned_but_figures_use_every_client():
    from dashboard.services.fairness import MAX_CURVE_POINTS, _thin

    curve = [float(5000 - i) for i in range(5000)]
    thin = _thin(curve)
    assert len(thin) <= MAX_CURVE_POINTS and thin[0] == [1, 5000.0] and thin[-1] == [5000, 1.0]
    assert [p[0] for p in thin] == sorted({p[0] for p in thin})
    assert _thin([3.0, 2.0]) == [[1, 3.0], [2, 2.0]]


def test_markup_in_a_label_stays_text(client, fair_campaign):
    cid = fair_campaign(label=EVIL)
    d = client.get(f"/api/campaigns/{cid}/fairness").json()
    assert d["groups"][0]["server"] == EVIL  # JSON text; the page's script sets it as textContent
    page = client.get(f"/campaigns/{cid}").text
    assert 'id="fairness"' in page and 'id="fairness-chart"' in page
    assert EVIL not in page and "&lt;img src=x" in page


def test_compare_shows_a_vs_b_fairness(client, fair_campaign):
    c1, c2 = fair_campaign(label="fair-a"), fair_campaign(label="fair-b")
    d = client.get("/api/compare", params={"a": str(c1), "b": str(c2)}).json()
    t = d["fairness"]
    assert t["title"] == "Fairness (Jain's index over the clients): fair-a vs. fair-b"
    assert [r[0] for r in t["rows"]] == ["4 concurrent clients (RETR 4M file)"]
    assert t["records"][0]["a_median"] == pytest.approx((64 / 88 + 1) / 2)
    page = client.get("/compare", params={"a": str(c1), "b": str(c2)}).text
    assert 'id="fairness-table"' in page and "<h2>Fairness</h2>" in page


def test_campaign_page_shows_the_real_client_table(client, fair_campaign, engine):
    """A campaign with real-client cells (a client_max_rss row) gets the real-client
    table on its page, as the exports do (runner.report.clients)."""
    from sqlalchemy.orm import Session

    from runner.store.models import Cell, Sample

    cid = fair_campaign()
    assert "Real clients:" not in client.get(f"/campaigns/{cid}").text
    with Session(engine) as s:
        for c in s.query(Cell).filter(Cell.campaign_id == cid, Cell.workload == "retr_concurrent"):
            s.add(Sample(cell_id=c.id, metric="client_max_rss", stat="max", value=5.25 * 2 ** 20, unit="bytes"))
        s.commit()
    page = client.get(f"/campaigns/{cid}").text
    assert "Real clients: 4 concurrent clients (RETR 4M file)" in page and "5.2M" in page
