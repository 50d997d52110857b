"""JSON export: a versioned results format (style of pyperf's ``_bench.py``).

Campaign document (``render(CampaignData)``), round-trip loadable by :func:`load_json`::

    {"format": "xferlab-results", "version": 1,
     "campaign": {"id": 7, "name": "nightly", "servers": ["a", "b"],
                  "environment": {...},
                  "setups": {"a": {"version": ..., ...}},   # when recorded (optional)
                  "failures": [{"server": "a", "workload": "stor", "repeat": 2,
                                "error": "421 Timeout"}]},
     "series": [{"server": "a", "workload": "retr", "title": "RETR (server -> client)",
                 "metric": "throughput", "unit": "MiB/s", "higher_is_better": true,
                 "params_key": "...", "checkpoint": null,
                 "samples": [1652.72, ...],                 # every raw sample
                 "summary": {"n": 5, "median": ..., ...}}],# derived; ignored on load
     "saturation": [{"server": ..., "workload": ..., "knee": 16, "points": [...], ...}],
                                          # only with a sweep of a sustained workload
                                          # (runner.report.saturation); derived, ignored on load
     "capacity": [{"server": ..., "workload": ..., "title": ..., "params_key": ..., "users": 12,
                   "record": {"slo": ..., "lo": 12, "hi": 13, "reason": ..., "steps": [...]}}],
                                          # only with a capacity search (runner.report.data.
                                          # CapacityResult); ignored on load
     "tcp": [{"server": "a", "workload": "login", "title": ..., "params_key": ..., "repeat": 0,
              "status": "failed", "counters": {"ListenOverflows": 148, ...},
              "listen_backlog": 32}],     # only when a cell stored kernel TCP counters or a
                                          # backlog (runner.report.data.CellTcp): non-zero
                                          # counters only; loaded back
     "profiles": [{"cell_id": 12, "server": "a", "workload": "retr", "title": ..., "params_key": ...,
                   "repeat": 0, "status": "done", "profiler": "perf", "profiler_version": "6.1.187",
                   "rate_hz": 99, "duration_s": 3.0, "on_cpu_s": 2.9, "off_cpu_s": null,
                   "on_cpu": "tpd;main;... 42\n...", "off_cpu": null,
                   "syscalls": [{"name": "sendfile", "count": 300, "total_s": 0.4, "errors": 0}],
                   "notes": [...]}],
                                          # only when a cell stored a server CPU profile
                                          # (runner.report.data.CellProfileData): the folded
                                          # stacks as stored; loaded back
     "mixed": [{"server": ..., "workload": "mixed", "title": ..., "params_key": ..., "group": "op",
                "name": "retr", "repeats": 3, "ops": 258.0, "ops_rate": 128.8, "mib_s": 14.2,
                "p50": 1.1, "p99": 9.8, "p999": 20.1, "errors": 0, "service_p99": 4.2}]}
                                          # only with mixed cells (runner.report.data.MixedRow),
                                          # per operation and per size bucket; loaded back

Table document (``render(Table or [Table, ...])``; not loadable, derived data)::

    {"format": "xferlab-tables", "version": 1,
     "tables": [{"kind": ..., "title": ..., "caption": ..., "columns": [...],
                 "rows": [[{"text": ..., "mark": ...}, ...]], "records": [...]}]}

Output is strict JSON (``allow_nan=False``): a NaN or inf sample raises ValueError.
"""
from __future__ import annotations

import dataclasses
import json as _json
from collections.abc import Sequence

from runner.report.data import CampaignData, CellProfileData, CellTcp, MixedRow, Series
from runner.report.saturation import curves
from runner.report.stats import summarize
from runner.report.tables import Table, as_tables

FORMAT = "xferlab-results"
TABLES_FORMAT = "xferlab-tables"
VERSION = 1


def _series(s: Series) -> dict:
    d = {"server": s.server, "workload": s.workload, "title": s.title, "metric": s.metric,
         "unit": s.unit, "higher_is_better": s.higher_is_better, "params_key": s.params_key,
         "checkpoint": s.checkpoint, "samples": list(s.samples)}
    if s.samples:
        d["summary"] = dataclasses.asdict(summarize(s.samples))
    return d


def to_dict(data: CampaignData) -> dict:
    """The version-1 campaign document as a dict (see module docstring)."""
    return {
        "format": FORMAT,
        "version": VERSION,
        "campaign": {
            "id": data.campaign_id, "name": data.name, "servers": list(data.servers),
            "environment": data.environment,
            **({"setups": data.setups} if data.setups else {}),
            "failures": [{"server": f[0], "workload": f[1], "repeat": f[2], "error": f[3]}
                         for f in data.failures],
        },
        "series": [_series(s) for s in data.series],
        **({"saturation": sat} if (sat := [c.as_dict() for c in curves(data)]) else {}),
        **({"tcp": [dataclasses.asdict(c) for c in data.tcp]} if data.tcp else {}),
        **({"profiles": [_profile(p) for p in data.profiles]} if data.profiles else {}),
        **({"mixed": [dataclasses.asdict(r) for r in data.mixed]} if data.mixed else {}),
        **({"capacity": [dataclasses.asdict(c) for c in data.capacity]} if data.capacity else {}),
    }


def _profile(p: CellProfileData) -> dict:
    d = dataclasses.asdict(p)
    d["syscalls"], d["notes"] = [dict(r) for r in p.syscalls], list(p.notes)
    return d


def _load_profile(p: dict, i: int) -> CellProfileData:
    where = f"profiles[{i}]"
    off = p.get("off_cpu_s")
    return CellProfileData(
        cell_id=int(_need(p, "cell_id", where)), server=_need(p, "server", where),
        workload=_need(p, "workload", where), title=p.get("title", ""), params_key=p.get("params_key", ""),
        repeat=int(_need(p, "repeat", where)), status=p.get("status", ""), profiler=_need(p, "profiler", where),
        profiler_version=_need(p, "profiler_version", where), rate_hz=int(_need(p, "rate_hz", where)),
        duration_s=float(_need(p, "duration_s", where)), on_cpu=_need(p, "on_cpu", where), off_cpu=p.get("off_cpu"),
        on_cpu_s=float(p.get("on_cpu_s", 0.0)), off_cpu_s=None if off is None else float(off),
        syscalls=tuple(dict(r) for r in p.get("syscalls") or ()), notes=tuple(str(n) for n in p.get("notes") or ()))


def _table(t: Table) -> dict:
    return {"kind": t.kind, "title": t.title, "caption": t.caption,
            "columns": [dataclasses.asdict(c) for c in t.columns],
            "rows": [[{"text": c.text, "mark": c.mark} for c in r.cells] for r in t.rows],
            "records": t.records}


def render(obj: CampaignData | Table | Sequence[Table], *, indent: int | None = 2) -> str:
    """JSON text ending with ``\\n``: the campaign document for CampaignData (every raw
    sample included), the tables document for Table(s).

    Raises: ValueError for NaN/inf values (strict JSON); TypeError for other inputs.
    """
    if isinstance(obj, CampaignData):
        doc = to_dict(obj)
    else:
        doc = {"format": TABLES_FORMAT, "version": VERSION,
               "tables": [_table(t) for t in as_tables(obj)]}
    return _json.dumps(doc, indent=indent, allow_nan=False, ensure_ascii=False) + "\n"


def _need(d: dict, key: str, where: str):
    if not isinstance(d, dict) or key not in d:
        raise ValueError(f"xferlab-results: missing {key!r} in {where}")
    return d[key]


def from_dict(doc: dict) -> CampaignData:
    """Build CampaignData from a parsed campaign document.

    Raises:
        ValueError: not an ``xferlab-results`` document, an unsupported version
            (this code reads version 1 only), or a missing field (named).
    """
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        found = doc.get("format") if isinstance(doc, dict) else type(doc).__name__
        raise ValueError(f"not an {FORMAT} document (format: {found!r})")
    version = doc.get("version")
    if version != VERSION:
        raise ValueError(f"unsupported {FORMAT} version {version!r}: this xferlab reads "
                         f"version {VERSION} only")
    c = _need(doc, "campaign", "document")
    series = []
    for i, s in enumerate(_need(doc, "series", "document")):
        where = f"series[{i}]"
        series.append(Series(
            server=_need(s, "server", where), workload=_need(s, "workload", where),
            title=_need(s, "title", where), metric=_need(s, "metric", where),
            unit=_need(s, "unit", where), higher_is_better=bool(_need(s, "higher_is_better", where)),
            samples=tuple(float(v) for v in _need(s, "samples", where)),
            params_key=s.get("params_key", ""), checkpoint=s.get("checkpoint")))
    failures = [(_need(f, "server", "failure"), _need(f, "workload", "failure"),
                 int(_need(f, "repeat", "failure")), _need(f, "error", "failure"))
                for f in c.get("failures", [])]
    tcp = [CellTcp(server=_need(t, "server", "tcp"), workload=_need(t, "workload", "tcp"),
                   title=t.get("title", ""), params_key=t.get("params_key", ""), repeat=int(_need(t, "repeat", "tcp")),
                   status=t.get("status", ""), counters={str(k): int(v) for k, v in (t.get("counters") or {}).items()},
                   listen_backlog=None if t.get("listen_backlog") is None else int(t["listen_backlog"]))
           for t in doc.get("tcp") or []]
    needed = [f.name for f in dataclasses.fields(MixedRow) if f.name != "service_p99"]  # optional: later field
    mixed = [MixedRow(**{k: _need(m, k, "mixed") for k in needed}, service_p99=m.get("service_p99"))
             for m in doc.get("mixed") or []]
    return CampaignData(campaign_id=_need(c, "id", "campaign"), name=_need(c, "name", "campaign"),
                        servers=list(_need(c, "servers", "campaign")), series=series,
                        environment=dict(c.get("environment") or {}), failures=failures,
                        setups=dict(c.get("setups") or {}), tcp=tcp, mixed=mixed,
                        profiles=[_load_profile(p, i) for i, p in enumerate(doc.get("profiles") or [])])


def load_json(text: str | bytes) -> CampaignData:
    """Parse a campaign document written by :func:`render` back into CampaignData
    (``load_json(render(data)) == data``).

    Raises:
        ValueError: invalid JSON, not an ``xferlab-results`` document, an
            unsupported ``version`` (message says which version was found and which
            is supported), or a missing field.
    """
    try:
        doc = _json.loads(text)
    except _json.JSONDecodeError as e:
        raise ValueError(f"invalid {FORMAT} JSON: {e}") from e
    return from_dict(doc)
