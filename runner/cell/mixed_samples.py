"""Sample rows of a ``mixed`` phase (runner.load.ftp.mixed): its figures per operation kind,
per size bucket and per session (metric names and units of docs/methodology.md, "Mixed
sessions").

Per operation kind ``OP`` (``login``, ``retr``, ``stor``, ``list``, ``mlsd``, ``cwd``,
``size``, ``mdtm``, ``dele``, ``resume``, ``noop``):

* ``op_count`` stat ``OP``: completed operations (count);
* ``ops_rate`` stat ``OP``: completed operations / phase elapsed (1/s);
* ``bytes`` stat ``OP`` (bytes) and ``throughput`` stat ``OP`` (MiB/s, 2**20 bytes/s);
* ``latency`` stats ``OP:p50``, ``OP:p99``, ``OP:p99.9``, ``OP:max`` (ms, from the intended
  start; the encoded HDR histogram in the ``raw`` of ``OP:p50``); ``service_time`` the same
  from the actual start;
* ``op_errors`` stat ``OP:KIND`` (count; the stat cut to 20 characters);
* ``listing_names`` stat ``OP`` for ``list``/``mlsd``: names per listing (count, mean).

Per size bucket ``B`` (runner.catalogue.mixed.SizeDist.bucket: ``4K``, ``64K-128K``):
``bucket_ops`` and ``bucket_bytes`` stat ``B`` (count, bytes), ``bucket_latency`` stats
``B:p50`` and ``B:p99`` (ms, intended start). Per session: ``session_time`` stats ``p50``,
``p99``, ``max`` (s; ``raw`` of ``p50``: the first 10,000 sessions as ``[seconds, bytes,
ops, ok]``), ``session_bytes`` stats ``p50``, ``max`` (bytes), ``sessions`` stats ``total``
and ``failed`` (count). ``mixed`` stat ``seed`` (value: the seed as a float; ``raw``: ``{"seed": the exact integer}``).

The overall ``ops_rate``, ``bytes``, ``latency`` and ``errors`` rows of the phase stay as
for every workload (runner.cell.samples.phase_samples) with stat ``value``, ``p50`` ...
"""
from __future__ import annotations

import numpy as np

from runner.load import hdr
from runner.load.result import PhaseResult
from runner.store.models import Sample

MAX_RAW_SESSIONS = 10_000
MIB = 1 << 20


def _pcts(text: str) -> dict[str, float]:
    """p50, p99, p99.9 and max of an encoded histogram (ms)."""
    h = hdr.decode(text)
    return {"p50": h.get_value_at_percentile(50.0) / 1000.0, "p99": h.get_value_at_percentile(99.0) / 1000.0,
            "p99.9": h.get_value_at_percentile(99.9) / 1000.0, "max": h.get_max_value() / 1000.0}


def mixed_samples(result: PhaseResult) -> list[Sample]:
    """The rows of the module docstring for one mixed phase (none for a phase without
    ``op_figures``). Returns unsaved Sample objects."""
    if not result.op_figures:
        return []
    el = result.elapsed_s
    out: list[Sample] = []
    for op, f in result.op_figures.items():
        out += [Sample(metric="op_count", stat=op, value=float(f.ops), unit="count"),
                Sample(metric="ops_rate", stat=op, value=f.ops / el if el > 0 else 0.0, unit="1/s"),
                Sample(metric="bytes", stat=op, value=float(f.bytes), unit="bytes"),
                Sample(metric="throughput", stat=op, value=f.bytes / MIB / el if el > 0 else 0.0, unit="MiB/s")]
        for metric, text in (("latency", f.latency), ("service_time", f.service)):
            if text:
                for stat, v in _pcts(text).items():
                    out.append(Sample(metric=metric, stat=f"{op}:{stat}", value=v, unit="ms",
                                      raw={"hdr": text, "unit": "us", "digits": hdr.SIGNIFICANT_DIGITS}
                                      if stat == "p50" else None))
        for kind, n in sorted(f.errors.items()):
            out.append(Sample(metric="op_errors", stat=f"{op}:{kind}"[:20], value=float(n), unit="count"))
        if op in ("list", "mlsd") and f.ops:
            out.append(Sample(metric="listing_names", stat=op, value=f.items / f.ops, unit="count"))
    for label, f in result.buckets.items():
        out += [Sample(metric="bucket_ops", stat=label[:20], value=float(f.ops), unit="count"),
                Sample(metric="bucket_bytes", stat=label[:20], value=float(f.bytes), unit="bytes")]
        if f.latency:
            p = _pcts(f.latency)
            out += [Sample(metric="bucket_latency", stat=f"{label}:{k}"[:20], value=p[k], unit="ms")
                    for k in ("p50", "p99")]
    if result.sessions:
        secs = np.asarray([s.seconds for s in result.sessions], dtype=float)
        byts = np.asarray([s.bytes for s in result.sessions], dtype=float)
        raw = [[round(s.seconds, 6), s.bytes, s.ops, s.ok] for s in result.sessions[:MAX_RAW_SESSIONS]]
        out += [Sample(metric="session_time", stat="p50", value=float(np.percentile(secs, 50)), unit="s", raw=raw),
                Sample(metric="session_time", stat="p99", value=float(np.percentile(secs, 99)), unit="s"),
                Sample(metric="session_time", stat="max", value=float(secs.max()), unit="s"),
                Sample(metric="session_bytes", stat="p50", value=float(np.percentile(byts, 50)), unit="bytes"),
                Sample(metric="session_bytes", stat="max", value=float(byts.max()), unit="bytes"),
                Sample(metric="sessions", stat="total", value=float(len(result.sessions)), unit="count"),
                Sample(metric="sessions", stat="failed", value=float(sum(not s.ok for s in result.sessions)),
                       unit="count")]
    if result.seed is not None:
        out.append(Sample(metric="mixed", stat="seed", value=float(result.seed), unit="seed",
                          raw={"seed": result.seed}))
    return out
