"""The capacity tables (docs/methodology.md, "Capacity"): the headline, sustainable users
per server at its service level with where the search broke, and the curve behind each
answer (per-user rate and p99 against N). Plain data, from
:class:`runner.report.data.CampaignData` alone (its ``capacity`` list)."""
from __future__ import annotations

from runner.report import fmt
from runner.report.data import CampaignData, CapacityResult
from runner.report.model import Cell, Column, Mark, Row, Table


def users_text(r: CapacityResult) -> str:
    """``"12"``, ``"at least 64"`` (the search reached ``max_users``) or ``"0"``."""
    return f"at least {r.users}" if r.record.get("capped") else str(r.users)


def headline(r: CapacityResult) -> str:
    """One search in a few words: ``tpd, retr_sustained: 12 users at each user >= 256 KiB/s,
    Jain >= 0.9; broke at 13: server CPU 0.97 of 1 cores busy``."""
    rec = r.record
    broke = (f"; broke at {rec['hi']}: {rec.get('reason_text') or rec.get('reason')}"
             if rec.get("hi") is not None else "")
    return f"{r.server}, {r.workload}: {users_text(r)} users at {rec.get('slo_text', '?')}{broke}"


def capacity_table(data: CampaignData) -> Table | None:
    """The headline table (kind ``"capacity"``): one row per search, most users first; None
    without one. Records: ``server, workload, params_key, users, capped, lo, hi, slo, reason,
    reason_text``."""
    if not data.capacity:
        return None
    columns = (Column("server", "server"), Column("profile", "profile"), Column("users", "sustainable users", True),
                Column("slo", "service level"), Column("bracket", "capacity in"), Column("reason", "why it broke"))
    rows, records = [], []
    best = max(r.users for r in data.capacity)
    for r in sorted(data.capacity, key=lambda r: -r.users):
        rec = r.record
        hi = rec.get("hi")
        bracket = f"[{rec.get('lo')}, {hi - 1}]" if hi is not None else f">= {rec.get('lo')}"
        reason = (f"{rec.get('reason')}: {rec.get('reason_text')}" if rec.get("reason")
                  else "the search reached max_users" if rec.get("capped") else fmt.NA)
        rows.append(Row(f"{r.server}/{r.workload}/{r.params_key}", (
            Cell(r.server), Cell(r.title.split(" clients ", 1)[-1]),
            Cell(users_text(r), "win" if r.users == best and len(data.capacity) > 1 else ""),
            Cell(rec.get("slo_text", fmt.NA)), Cell(bracket), Cell(reason)), unit="users"))
        records.append({"server": r.server, "workload": r.workload, "params_key": r.params_key, "users": r.users,
                        "capped": bool(rec.get("capped")), "lo": rec.get("lo"), "hi": hi, "slo": rec.get("slo"),
                        "reason": rec.get("reason"), "reason_text": rec.get("reason_text")})
    caption = ("Sustainable users: the largest N whose every run kept the service level (ramp by doubling, "
               "bisection, confirmation at the answer); the true capacity lies in the bracket.")
    return Table("capacity", "Capacity: sustainable users at the service level", columns, rows, caption, records)


def curve_table(r: CapacityResult) -> Table:
    """The steps of one search (kind ``"capacity_curve"``), ascending N, each run a row: the
    verdict, the slowest user's rate (KiB/s), users at the rate, p99 (ms), Jain's index,
    the throughput (MiB/s), the server's busy cores and the missed criteria. Records: the
    stored step figures with ``server`` and ``workload``."""
    columns = (Column("clients", "N", True), Column("ok", "level kept"), Column("min_rate", "slowest user", True),
               Column("users", "users at rate", True), Column("p99", "p99", True), Column("jain", "Jain", True),
               Column("throughput", "MiB/s", True), Column("cpu", "server cores busy", True),
               Column("missed", "missed"))
    rows, records = [], []
    for st in sorted(r.record.get("steps", []), key=lambda s: s.get("clients", 0)):
        busy = (st["server_cpu_s"] / st["elapsed_s"] if st.get("server_cpu_s") is not None and st.get("elapsed_s")
                else None)
        rows.append(Row(f"{r.workload}[clients={st.get('clients')}]", (
            Cell(str(st.get("clients"))), Cell("yes" if st.get("ok") else "no", "win" if st.get("ok") else "loss"),
            Cell(f"{st['min_rate'] * 1024:,.1f} KiB/s" if st.get("min_rate") is not None else fmt.NA),
            Cell(f"{st['users_at_rate']:g}" if st.get("users_at_rate") is not None else fmt.NA),
            Cell(fmt.value(st["p99_ms"], "ms") if st.get("p99_ms") is not None else fmt.NA),
            Cell(f"{st['jain']:.3f}" if st.get("jain") is not None else fmt.NA),
            Cell(fmt.value(st["throughput"], "MiB/s") if st.get("throughput") is not None else fmt.NA),
            Cell(f"{busy:.2f}" if busy is not None else fmt.NA),
            Cell("; ".join(st.get("missed", [])))), unit="users"))
        records.append({"server": r.server, "workload": r.workload, **st})
    title = f"Capacity steps: {r.server}, {r.title.split(' clients ', 1)[-1]}"
    return Table("capacity_curve", title, columns, rows, f"{headline(r)}.", records)


def capacity_tables(data: CampaignData) -> list[Table]:
    """The headline table and one steps table per search; [] without a search."""
    head = capacity_table(data)
    return [head, *(curve_table(r) for r in data.capacity)] if head is not None else []


def capacity_comparison(data: CampaignData, a: str, b: str) -> Table | None:
    """Sustainable users of servers ``a`` (the reference) and ``b`` side by side (kind
    ``"capacity_comparison"``): one row per search both ran (same workload, parameters and
    service level), with ``b / a`` (``n/a`` when ``a`` sustained no user); None when they
    share no search. Records: ``workload, params_key, slo, users_a, users_b, ratio``."""
    def key(r: CapacityResult) -> tuple[str, str, str]:
        return r.workload, r.params_key, str(r.record.get("slo_text"))

    left = {key(r): r for r in data.capacity if r.server == a}
    pairs = [(left[key(r)], r) for r in data.capacity if r.server == b and key(r) in left]
    if not pairs:
        return None
    columns = (Column("profile", "profile"), Column("slo", "service level"), Column("a", a, True),
               Column("b", b, True), Column("ratio", f"{b} / {a}", True))
    rows, records = [], []
    for ra, rb in pairs:
        ratio = rb.users / ra.users if ra.users else None
        mark: Mark = "" if ratio is None or ratio == 1 else "win" if ratio > 1 else "loss"
        rows.append(Row(f"{ra.workload}/{ra.params_key}", (
            Cell(ra.title.split(" clients ", 1)[-1]), Cell(str(ra.record.get("slo_text"))), Cell(users_text(ra)),
            Cell(users_text(rb)), Cell(f"{ratio:.2f}x" if ratio is not None else fmt.NA, mark)), unit="users"))
        records.append({"workload": ra.workload, "params_key": ra.params_key, "slo": ra.record.get("slo"),
                        "users_a": ra.users, "users_b": rb.users, "ratio": ratio})
    return Table("capacity_comparison", f"Sustainable users: {a} vs. {b}", columns, rows,
                 "Each server's capacity search at the same service level (docs/methodology.md, \"Capacity\").",
                 records)
