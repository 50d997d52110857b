"""The capacity API (``/api/campaigns/ID/capacity``, built by dashboard.services.capacity) on
the real test PostgreSQL: a search run by runner.campaign.capacity over stored cells of a
server that keeps exactly 3 users at the service level; a campaign without one; ids validated."""
from __future__ import annotations

import pytest


def test_capacity_search_and_its_curve(client, capacity_campaign):
    cid = capacity_campaign()
    r = client.get(f"/api/campaigns/{cid}/capacity")
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/json")
    [s] = r.json()["searches"]
    assert (s["server"], s["workload"], s["users"], s["lo"], s["hi"]) == ("tpd", "retr_sustained", 3, 3, 4)
    assert s["slo_text"] == "each user >= 1024 KiB/s, Jain >= 0.9" and s["reason"] == "server"
    assert [p["clients"] for p in s["points"]] == [1, 2, 3, 4]
    assert [p["ok"] for p in s["points"]] == [True, True, True, False]
    assert [p["runs"] for p in s["points"]] == [1, 1, 2, 1]  # the answer confirmed
    # the slowest user: 1.2 MiB/s up to 3 users, 3.3 MiB/s / 4 above
    assert [p["min_rate_kib_s"] for p in s["points"]] == pytest.approx([1228.8] * 3 + [844.8], abs=0.1)
    assert s["points"][3]["p99_ms"] == pytest.approx(50.0, rel=1e-2)
    assert "clients=" not in s["params_key"] and s["headline"].startswith("tpd, retr_sustained: 3 users")


def test_campaign_page_has_the_capacity_tables(client, capacity_campaign):
    """The campaign page (and its figures fragment) shows runner.report.capacity's tables as the
    exports do: the headline with the bracket and the steps of the search, each N's verdict."""
    import html

    cid = capacity_campaign()
    for url in (f"/campaigns/{cid}", f"/campaigns/{cid}/figures"):
        page = html.unescape(client.get(url).text)
        assert "Capacity: sustainable users at the service level" in page
        head = page.split('data-kind="capacity"', 1)[1].split("</table>", 1)[0]
        assert ">tpd</td>" in head and ">3</td>" in head and "[3, 3]" in head
        steps = page.split('data-kind="capacity_curve"', 1)[1].split("</table>", 1)[0]
        assert steps.count("<tr data-key") == 5  # N = 1, 2, 4, 3 and the confirmation of 3
        assert steps.count(">yes</td>") == 4 and steps.count(">no</td>") == 1


def test_campaign_without_search_and_unknown_ids(client, sweep_campaign):
    cid = sweep_campaign()
    assert client.get(f"/api/campaigns/{cid}/capacity").json()["searches"] == []
    assert client.get("/api/campaigns/999999/capacity").status_code == 404
    assert client.get("/api/campaigns/abc/capacity").status_code == 422


def test_compare_shows_sustainable_users_side_by_side(engine, capacity_campaign):
    """``xferlab compare A B`` of two campaigns' searches: the sustainable users of each and their ratio."""
    from sqlalchemy.orm import Session

    from runner.report.render import compare_report

    a, b = capacity_campaign(), capacity_campaign()
    with Session(engine) as s:
        text = compare_report(s, f"{a}:tpd", f"{b}:tpd")
    assert f"Sustainable users: tpd (#{a}) vs. tpd (#{b})" in text, text
    row = next(line for line in text.splitlines() if "each user >= 1024 KiB/s" in line and "1.00x" in line)
    assert row.count(" 3 ") >= 2, row
