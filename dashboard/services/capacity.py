"""Capacity: the sustainable users of each capacity search of a campaign and the curve behind
it (the slowest user's rate and the p99 latency against N), from runner.report.capacity's
input (runner.report.reader.load_campaign), the same figures ``xferlab show`` prints."""
from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from runner.report.capacity import headline, users_text
from runner.report.reader import load_campaign
from runner.store import queries


def campaign_capacity(session: Session, *, campaign_id: int) -> list[dict[str, Any]]:
    """The ended capacity searches of a campaign, in cell order: ``{"server", "workload",
    "title", "params_key", "users", "users_text", "capped", "lo", "hi", "slo_text", "reason",
    "reason_text", "headline", "points": [{"clients", "min_rate_kib_s", "p99_ms", "ok",
    "runs"}]}``; per N the slowest run (smallest rate of its slowest user, largest p99),
    ``ok`` when every run kept the level. Raises LookupError for an unknown campaign."""
    queries.get_campaign(session, campaign_id=campaign_id)
    out = []
    for r in load_campaign(session, campaign_id=campaign_id).capacity:
        rec = r.record
        per_n: dict[int, dict[str, Any]] = {}
        for st in rec.get("steps", []):
            n = int(st["clients"])
            p = per_n.setdefault(n, {"clients": n, "min_rate_kib_s": None, "p99_ms": None, "ok": True, "runs": 0})
            p["runs"] += 1
            p["ok"] = p["ok"] and bool(st.get("ok"))
            if st.get("min_rate") is not None:
                kib = st["min_rate"] * 1024
                p["min_rate_kib_s"] = kib if p["min_rate_kib_s"] is None else min(p["min_rate_kib_s"], kib)
            if st.get("p99_ms") is not None:
                p["p99_ms"] = st["p99_ms"] if p["p99_ms"] is None else max(p["p99_ms"], st["p99_ms"])
        out.append({"server": r.server, "workload": r.workload, "title": r.title, "params_key": r.params_key,
                    "users": r.users, "users_text": users_text(r), "capped": bool(rec.get("capped")),
                    "lo": rec.get("lo"), "hi": rec.get("hi"), "slo_text": rec.get("slo_text"),
                    "user_rate": (rec.get("slo") or {}).get("user_rate"), "reason": rec.get("reason"),
                    "reason_text": rec.get("reason_text"), "headline": headline(r),
                    "points": [per_n[n] for n in sorted(per_n)]})
    return out
