"""The saturation curve of a sustained-load sweep (docs/methodology.md,
"Saturation curve"): throughput and p99 latency against the number of clients N, the
knee, and dkftpbench's "users at rate R".

Plain data, from :class:`runner.report.data.CampaignData` alone: a curve is one server's
cells of one sustained workload (``WorkloadFacts.sustained``) whose parameter keys differ
only in ``clients``; each point is one N, its figures the medians over the repeats.

Rules (stated in docs/methodology.md):

* **throughput** of a point: the median of its ``throughput`` series (MiB/s); a curve
  whose points have none (no payload) uses ``ops_rate`` (operations/s) instead;
* **p99** of a point: the median of its ``latency_p99`` series (ms; for the sustained
  workloads, from each operation's intended start);
* the **knee**: the largest N whose throughput is at least 95% of the best throughput of
  the curve and whose p99 is below twice the p99 at the smallest N of the curve. A point
  without a p99 never qualifies; a curve of fewer than two points, or whose smallest N has
  no p99, has no knee. When the knee is the largest N swept, the sweep may not have reached
  saturation (``knee_at_end``);
* **users at rate R**: for each N, the clients whose bytes / span reached R (the median
  over the repeats of the ``users_at_rate`` series); **all at rate**: the largest N at
  which every client reached R in every repeat (the smallest repeat's count equals N).
"""
from __future__ import annotations

import re
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from runner.report import fmt
from runner.report.data import CampaignData, Series
from runner.report.model import Cell, Column, Row, Table

#: Knee rule: throughput within this share of the best, p99 below this factor of the first point's.
KNEE_THROUGHPUT_SHARE = 0.95
KNEE_P99_FACTOR = 2.0

_CLIENTS_RE = re.compile(r"(?:^|,)clients=(\d+)(?=,|$)")
_USER_RATE_RE = re.compile(r"(?:^|,)user_rate=(\d+)(?=,|$)")


@dataclass(frozen=True)
class CurvePoint:
    """One N of a saturation curve.

    Attributes:
        clients: N.
        throughput: median throughput over the repeats (``unit`` of the curve).
        p99_ms: median p99 latency (ms), None when not measured.
        users_at_rate: median count of clients at rate R or more, None when not measured.
        min_users_at_rate: the smallest repeat's count, None when not measured.
        repeats: repeats (samples) behind ``throughput``.
    """

    clients: int
    throughput: float
    p99_ms: float | None
    users_at_rate: float | None = None
    min_users_at_rate: float | None = None
    repeats: int = 0


@dataclass(frozen=True)
class Saturation:
    """The saturation curve of one server and one sweep.

    Attributes:
        server, workload: the cells' server label and workload.
        title: the row title of the smallest N's cells.
        params_key: the cells' parameter key without ``clients``.
        unit: ``MiB/s`` (throughput) or ``1/s`` (operations/s).
        user_rate: R in bytes/s, None when the key has none.
        points: ascending N.
        knee: N of the knee, None when there is none (module docstring).
        knee_at_end: the knee is the largest N swept.
        all_at_rate: the largest N at which every client reached R, None when no N did.
    """

    server: str
    workload: str
    title: str
    params_key: str
    unit: str
    user_rate: int | None
    points: tuple[CurvePoint, ...]
    knee: int | None = None
    knee_at_end: bool = False
    all_at_rate: int | None = None

    def point(self, clients: int) -> CurvePoint:
        """The point of N = ``clients``. Raises KeyError when the curve has none."""
        for p in self.points:
            if p.clients == clients:
                return p
        raise KeyError(f"no point at {clients} clients")

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict: the fields, points as dicts."""
        return asdict(self)


def knee(points: Sequence[CurvePoint]) -> int | None:
    """The knee of a curve (module docstring): the largest N with throughput >=
    :data:`KNEE_THROUGHPUT_SHARE` x the best and p99 < :data:`KNEE_P99_FACTOR` x the p99
    at the smallest N; None for fewer than two points, a first point without p99, or no
    qualifying N. ``points`` in any order; raises ValueError for a repeated N."""
    pts = sorted(points, key=lambda p: p.clients)
    if len({p.clients for p in pts}) != len(pts):
        raise ValueError(f"repeated client counts in {[p.clients for p in pts]}")
    if len(pts) < 2 or pts[0].p99_ms is None:
        return None
    best = max(p.throughput for p in pts)
    limit = KNEE_P99_FACTOR * pts[0].p99_ms
    ok = [p.clients for p in pts
          if p.throughput >= KNEE_THROUGHPUT_SHARE * best and p.p99_ms is not None and p.p99_ms < limit]
    return max(ok) if ok else None


def all_at_rate(points: Sequence[CurvePoint]) -> int | None:
    """The largest N whose every repeat had all N clients at rate R or more
    (``min_users_at_rate >= N``); None when no N did or the counts are missing."""
    ok = [p.clients for p in points if p.min_users_at_rate is not None and p.min_users_at_rate >= p.clients]
    return max(ok) if ok else None


def curve_key(params_key: str) -> tuple[str, int] | None:
    """``(params_key without clients, N)`` of a cell family, None when the key has no
    ``clients=N``: ``"clients=4,duration=1.0"`` -> ``("duration=1.0", 4)``."""
    m = _CLIENTS_RE.search(params_key)
    if m is None:
        return None
    rest = (params_key[:m.start()] + ("," if m.start() else "") + params_key[m.end():].lstrip(",")).strip(",")
    return rest, int(m.group(1))


def _median(s: Series | None) -> float | None:
    return float(statistics.median(s.samples)) if s is not None and s.samples else None


def curves(data: CampaignData) -> list[Saturation]:
    """The saturation curves of a campaign: one per (server, sustained workload,
    parameters without ``clients``) with at least two client counts, in series order."""
    sustained = {w for w, f in data.workloads.items() if f.sustained}
    groups: dict[tuple[str, str, str], dict[int, dict[str, Series]]] = {}
    titles: dict[tuple[str, str, str, int], str] = {}
    for s in data.series:
        if s.workload not in sustained or s.checkpoint is not None:
            continue
        ck = curve_key(s.params_key)
        if ck is None:
            continue
        key = (s.server, s.workload, ck[0])
        groups.setdefault(key, {}).setdefault(ck[1], {})[s.metric] = s
        titles[(*key, ck[1])] = s.title
    out = []
    for (server, workload, rest), per_n in groups.items():
        if len(per_n) < 2:
            continue
        metric = "throughput" if all("throughput" in m for m in per_n.values()) else "ops_rate"
        pts = []
        for n in sorted(per_n):
            m = per_n[n]
            tp = _median(m.get(metric))
            if tp is None:
                continue
            users = m.get("users_at_rate")
            pts.append(CurvePoint(n, tp, _median(m.get("latency_p99")), _median(users),
                                  float(min(users.samples)) if users is not None and users.samples else None,
                                  len(m[metric].samples)))
        if len(pts) < 2:
            continue
        k = knee(pts)
        rate = _USER_RATE_RE.search(rest)
        out.append(Saturation(server, workload, titles[(server, workload, rest, pts[0].clients)], rest,
                              "MiB/s" if metric == "throughput" else "1/s", int(rate.group(1)) if rate else None,
                              tuple(pts), k, k is not None and k == pts[-1].clients, all_at_rate(pts)))
    return out


def knee_text(sat: Saturation) -> str:
    """One curve's knee in a few words: ``tpd, retr_sustained: N = 16 (412.0 MiB/s, p99
    3.1 ms)``, ``... no knee``, or ``... N = 512, the largest swept``."""
    head = f"{sat.server}, {sat.workload}"
    if sat.knee is None:
        return f"{head}: no knee"
    p = sat.point(sat.knee)
    p99 = f", p99 {p.p99_ms:.3g} ms" if p.p99_ms is not None else ""
    return (f"{head}: N = {sat.knee} ({p.throughput:,.1f} {sat.unit}{p99})"
            + (", the largest swept" if sat.knee_at_end else ""))


def summary_lines(sat: Saturation) -> list[str]:
    """The human summary of one curve (``xferlab show``): the knee with its throughput and
    p99, and users at rate R."""
    head = f"{sat.server}: {sat.title.split(' clients ', 1)[-1]}"
    lines = [head]
    if sat.knee is None:
        lines.append("  knee: none (no N within 5% of the best throughput with p99 below 2x the first N's)")
    else:
        p = sat.point(sat.knee)
        p99 = f"{p.p99_ms:.3g} ms" if p.p99_ms is not None else "-"
        lines.append(f"  knee: N = {sat.knee}: {p.throughput:,.1f} {sat.unit}, p99 {p99}"
                     + (" (the largest N swept: saturation may lie beyond)" if sat.knee_at_end else ""))
    if sat.user_rate is not None and any(p.users_at_rate is not None for p in sat.points):
        counts = ", ".join(f"{p.clients}: {p.users_at_rate:g}" for p in sat.points if p.users_at_rate is not None)
        lines.append(f"  users at rate {_rate_text(sat.user_rate)} (N: clients at or above it): {counts}")
        lines.append("  every client at that rate up to N = "
                     + (str(sat.all_at_rate) if sat.all_at_rate is not None else "none"))
    return lines


def _rate_text(rate: int) -> str:
    return f"{rate / 1024:g} KiB/s" if rate < 1 << 20 else f"{rate / (1 << 20):g} MiB/s"


def saturation_table(sat: Saturation) -> Table:
    """The curve as a table (kind ``"saturation"``): one row per N with its throughput,
    p99, users at rate R, and ``knee`` marked on the knee's row; the caption states the
    knee and the largest N with every client at R.

    Records (CSV/JSON): per N ``server, workload, params_key, clients, throughput, unit,
    p99_ms, users_at_rate, min_users_at_rate, user_rate, knee`` (raw values; ``knee`` a
    bool)."""
    rate = _rate_text(sat.user_rate) if sat.user_rate is not None else None
    columns = (Column("clients", "clients", True), Column("throughput", sat.unit if sat.unit != "1/s" else "ops/s",
                                                              True),
               Column("p99", "p99", True), Column("users", f"users at {rate}" if rate else "users at R", True),
               Column("knee", "knee"))
    rows, records = [], []
    for p in sat.points:
        is_knee = p.clients == sat.knee
        rows.append(Row(f"{sat.workload}[clients={p.clients}]", (
            Cell(str(p.clients)), Cell(fmt.value(p.throughput, sat.unit)),
            Cell(fmt.value(p.p99_ms, "ms") if p.p99_ms is not None else fmt.NA),
            Cell(f"{p.users_at_rate:g} of {p.clients}" if p.users_at_rate is not None else fmt.NA),
            Cell("knee" if is_knee else "", "win" if is_knee else "")), unit=sat.unit))
        records.append({"server": sat.server, "workload": sat.workload, "params_key": sat.params_key,
                        "clients": p.clients, "throughput": p.throughput, "unit": sat.unit, "p99_ms": p.p99_ms,
                        "users_at_rate": p.users_at_rate, "min_users_at_rate": p.min_users_at_rate,
                        "user_rate": sat.user_rate, "knee": is_knee})
    knee_text = (f"knee at N = {sat.knee}" + (" (the largest N swept)" if sat.knee_at_end else "")
                 if sat.knee is not None else "no knee")
    caption = (f"Median of the repeats; {knee_text} (the largest N within 5% of the best throughput whose p99 is "
               "below twice the p99 at the smallest N)")
    if rate:
        caption += (f"; every client at {rate} or more up to N = "
                    + (str(sat.all_at_rate) if sat.all_at_rate is not None else "none"))
    title = f"Saturation: {sat.server}, {sat.title.split(' clients ', 1)[-1]}"
    return Table("saturation", title, columns, rows, caption + ".", records)


def saturation_tables(data: CampaignData) -> list[Table]:
    """One :func:`saturation_table` per curve of ``data`` (:func:`curves`); [] without one."""
    return [saturation_table(c) for c in curves(data)]
