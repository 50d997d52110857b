"""The dashboard's campaign page and its JSON export carry the kernel TCP counters of each
cell where one is non-zero (tests/support/tcp_campaign.py: a failed
cell with 148 listen overflows, a done one with 3 SYN-ACK retransmits)."""
from __future__ import annotations

from tests.support.tcp_campaign import store_tcp_campaign


def test_campaign_page_and_export_carry_the_tcp_counters(engine, client):
    cid = store_tcp_campaign(engine)
    page = client.get(f"/campaigns/{cid}/figures")
    assert page.status_code == 200
    assert "Kernel TCP counters" in page.text
    assert "148 listen overflows, 148 listen drops, 296 SYN/SYN-ACK retransmits" in page.text
    assert "3 SYN/SYN-ACK retransmits" in page.text
    doc = client.get(f"/api/campaigns/{cid}/export", params={"format": "json"}).json()
    assert [(t["repeat"], t["counters"].get("ListenOverflows", 0), t["listen_backlog"]) for t in doc["tcp"]] == [
        (0, 148, 32), (1, 0, 32), (2, 0, 32)]
