"""Seed 002's table of an HTTP upload campaign: one row per server, its requests/s on
disk and on tmpfs (median and best of the repeats), the tmpfs/disk ratio and gobench's
failure counters, as ``xferlab run --preset seed002`` prints it.

Servers are told apart from their storage by their label: the storage axis
(runner.spec.model, ``storage: [disk, tmpfs]``) gives ``"go-http [storage=tmpfs]"``; the
``storage`` item is taken out of the bracket and what is left names the row
(``"go-http"``, ``"node-http [workers=4]"``). A label without a storage item is a
``disk`` server (the backends' default).
"""
from __future__ import annotations

import re
import statistics

from runner.report import fmt
from runner.report.data import CampaignData, Series
from runner.report.model import Cell, Column, Row, Table

#: The workload the table is made of and its row metric (runner.catalogue.workloads, "HTTP figures").
WORKLOAD = "http_upload"
METRIC = "requests_rate"
STORAGES = ("disk", "tmpfs")

_BRACKET = re.compile(r"^(?P<base>.*?) \[(?P<items>[^\]]*)\]$")


def split_label(label: str) -> tuple[str, str]:
    """``(row name, storage)`` of a server label: ``"go-http [storage=tmpfs]"`` ->
    ``("go-http", "tmpfs")``; ``"node-http [storage=disk,workers=4]"`` -> ``("node-http
    [workers=4]", "disk")``; ``"tpd"`` -> ``("tpd", "disk")``."""
    m = _BRACKET.match(label)
    if not m:
        return label, "disk"
    items = [i for i in m.group("items").split(",") if i]
    storage = next((i.partition("=")[2] for i in items if i.startswith("storage=")), "disk")
    rest = [i for i in items if not i.startswith("storage=")]
    return (f"{m.group('base')} [{','.join(rest)}]" if rest else m.group("base")), storage


def _series(data: CampaignData, label: str, metric: str, pkey: str) -> Series | None:
    for s in data.series:
        if (s.server, s.workload, s.metric, s.params_key, s.checkpoint) == (label, WORKLOAD, metric, pkey, None):
            return s
    return None


def upload_tables(data: CampaignData) -> list[Table]:
    """One :func:`upload_table` per parameter set of ``http_upload`` in ``data`` (most
    campaigns have one), [] when the campaign has no ``http_upload`` cell."""
    keys = list(dict.fromkeys(s.params_key for s in data.series if s.workload == WORKLOAD and s.metric == METRIC))
    if not keys and any(f[1] == WORKLOAD for f in data.failures):
        keys = [""]
    return [upload_table(data, k, numbered=len(keys) > 1) for k in keys]


def upload_table(data: CampaignData, params_key: str = "", *, numbered: bool = False) -> Table:
    """Seed 002's table of the ``http_upload`` cells of ``params_key`` (kind
    ``"uploads"``).

    Columns: ``server``; ``disk`` and ``tmpfs``: median requests/s of the repeats
    (``req/s``, successful requests per second, runner.cell.samples); ``disk_best`` and
    ``tmpfs_best``: the best repeat (seed 002's "best of 3"); ``ratio``: tmpfs median /
    disk median (``"1.23x"``); ``network_failed`` and ``non_2xx``: summed over every
    repeat of both storages. A server without a figure (every cell skipped or failed)
    keeps its row, ``n/a`` figures, and the first reason in the ``note`` column.

    Records (CSV/JSON): per row ``server, disk_median, disk_best, disk_n, tmpfs_median,
    tmpfs_best, tmpfs_n, ratio, network_failed, non_2xx, note`` (req/s and counts, raw).
    """
    rows_of: dict[str, dict[str, str]] = {}
    for label in data.servers:
        name, storage = split_label(label)
        rows_of.setdefault(name, {})[storage] = label
    columns = (Column("server", "server"), Column("disk", "disk req/s", True), Column("tmpfs", "tmpfs req/s", True),
               Column("ratio", "tmpfs/disk", True), Column("network_failed", "network failed", True),
               Column("non_2xx", "non-2xx", True), Column("disk_best", "disk best", True),
               Column("tmpfs_best", "tmpfs best", True), Column("note", "note"))
    rows: list[Row] = []
    records: list[dict] = []
    n_max = 0
    for name, labels in rows_of.items():
        med: dict[str, float | None] = {}
        best: dict[str, float | None] = {}
        count: dict[str, int] = {}
        failed = non2xx = 0
        seen = False
        for storage in STORAGES:
            lab = labels.get(storage)
            s = _series(data, lab, METRIC, params_key) if lab else None
            med[storage] = statistics.median(s.samples) if s else None
            best[storage] = max(s.samples) if s else None
            count[storage] = len(s.samples) if s else 0
            n_max = max(n_max, count[storage])
            for metric in ("http_requests_network_failed", "http_requests_non_2xx"):
                c = _series(data, lab, metric, params_key) if lab else None
                if c is not None:
                    seen = True
                    if metric.endswith("network_failed"):
                        failed += int(sum(c.samples))
                    else:
                        non2xx += int(sum(c.samples))
        reasons = [f[3] for f in data.failures if f[0] in labels.values() and f[1] == WORKLOAD]
        note = reasons[0].removeprefix("skipped: ")[:120] if reasons and not any(count.values()) else ""
        if reasons and not note:
            note = f"{len(reasons)} cells failed or skipped"
        d, t = med["disk"], med["tmpfs"]
        ratio = t / d if d and t is not None else None
        rows.append(Row(name, (Cell(name), Cell(fmt.value(d, "req/s") if d is not None else fmt.NA),
                               Cell(fmt.value(t, "req/s") if t is not None else fmt.NA),
                               Cell(f"{ratio:.2f}x" if ratio is not None else fmt.NA),
                               Cell(str(failed) if seen else fmt.NA), Cell(str(non2xx) if seen else fmt.NA),
                               Cell(fmt.value(best["disk"], "req/s") if best["disk"] is not None else fmt.NA),
                               Cell(fmt.value(best["tmpfs"], "req/s") if best["tmpfs"] is not None else fmt.NA),
                               Cell(note)), unit="req/s"))
        records.append({"server": name, "disk_median": d, "disk_best": best["disk"], "disk_n": count["disk"],
                        "tmpfs_median": t, "tmpfs_best": best["tmpfs"], "tmpfs_n": count["tmpfs"], "ratio": ratio,
                        "network_failed": failed if seen else None, "non_2xx": non2xx if seen else None,
                        "note": note})
    title = "HTTP uploads: disk vs. tmpfs (seed 002)" + (f" [{params_key}]" if numbered and params_key else "")
    caption = (f"Successful uploads per second, median of {n_max} repeats (best: the best repeat); "
               "network failed and non-2xx summed over every repeat of both storages.")
    return Table("uploads", title, columns, rows, caption, records)
