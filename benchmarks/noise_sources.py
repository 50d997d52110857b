"""Where the noise of a throughput row comes from: within a phase, between phases on
one running server, between server restarts, and what moves with it.

    .venv/bin/python benchmarks/noise_sources.py [--servers tpd,pyftpdlib:2.2.0]
        [--backend docker] [--workloads retr,stor] [--lives 4] [--phases 4] [--duration 3]

A *life* is one server start. Each life runs the cell's unrecorded warm-up pass
(runner.cell.outcome.warmup_params) and then ``--phases`` measured phases of each workload
(single-stream STOR/RETR of a 256 MiB file repeated for ``--duration`` s, as the
classic rows), back to back on the same server; servers are interleaved life by life
so slow drift hits them alike. Server pinned to CPU 0, load generator to CPU 1.

For every (server, workload) it prints, as a percentage of the median phase figure:

* ``within phase``: the coefficient of variation of the single transfers inside a
  phase (median over phases): how steady one stream is;
* ``phase to phase``: the standard deviation between phases of one life, and
  ``life to life``: the extra standard deviation between lives, from a one-way
  random-effects analysis of variance (Searle, Casella & McCulloch, *Variance
  Components*, 1992, ch. 3: ``var_between = (MSB - MSW) / k``, floored at 0);
* ``first/later``: the median first phase of a life over the median later phase
  (a restart's cold state: fixture just written, caches, a fresh heap);
* the 95% CI half-width relative to the median (runner.campaign.repeats.relative_half_width,
  the adaptive-repeats stopping rule) of ``--lives`` fresh-server figures (each life's
  first phase: what a campaign with a fresh server per repeat sees) and of all phases
  of the median life (what repeats on one running server see);
* Spearman's rank correlation (scipy.stats.spearmanr) of the phase figures with the
  interrupts that hit the two pinned CPUs during the phase (/proc/interrupts), with
  the CPU clock (/proc/cpuinfo ``cpu MHz``, mean of the pinned CPUs, where the
  hypervisor exposes it), with ``Dirty`` page-cache bytes (/proc/meminfo) at the
  phase's start (writeback of a just-written fixture), and with the CPU time the
  hypervisor stole from the pinned CPUs during the phase (``steal`` of /proc/stat);
  ``steal`` is its median share of the two CPUs' phase time; and with the CPU time of
  every other process on the machine during the phase (``r other``: not the server's
  tree, not the load generator; each phase's top three are printed by name).

Traffic stays on this machine (loopback, or the containers' own namespaces).
"""
from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _interrupts(cpus: list[int]) -> int:
    """Sum of /proc/interrupts counts on ``cpus`` (all interrupt lines), 0 if unreadable."""
    try:
        with open("/proc/interrupts") as f:
            header = f.readline().split()
            cols = [header.index(f"CPU{c}") for c in cpus if f"CPU{c}" in header]
            total = 0
            for line in f:
                parts = line.split()
                for c in cols:
                    if len(parts) > c + 1 and parts[c + 1].isdigit():
                        total += int(parts[c + 1])
            return total
    except OSError:
        return 0


def _mhz(cpus: list[int]) -> float:
    """Mean ``cpu MHz`` of ``cpus`` from /proc/cpuinfo, NaN when not shown."""
    vals: dict[int, float] = {}
    cur = None
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("processor"):
                    cur = int(line.split(":")[1])
                elif line.startswith("cpu MHz") and cur is not None:
                    vals[cur] = float(line.split(":")[1])
    except OSError:
        pass
    got = [vals[c] for c in cpus if c in vals]
    return statistics.fmean(got) if got else float("nan")


def _steal(cpus: list[int]) -> float:
    """Seconds of CPU time the hypervisor took from ``cpus`` so far (``steal`` of
    /proc/stat, USER_HZ ticks), 0.0 if unreadable."""
    hz = os.sysconf("SC_CLK_TCK")
    names = {f"cpu{c}" for c in cpus}
    total = 0
    try:
        with open("/proc/stat") as f:
            for line in f:
                parts = line.split()
                if parts and parts[0] in names and len(parts) > 8:
                    total += int(parts[8])
    except OSError:
        return 0.0
    return total / hz


def _process_cpu() -> dict[int, tuple[str, float]]:
    """pid -> (name, user+system CPU seconds so far) of every process (psutil), for
    naming what else ran during a phase."""
    import psutil

    out = {}
    for p in psutil.process_iter(["name", "cpu_times"]):
        ct = p.info.get("cpu_times")
        if ct is not None:
            out[p.pid] = (p.info.get("name") or "?", ct.user + ct.system)
    return out


def _others(before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]],
            exclude: set[int]) -> list[tuple[str, float]]:
    """CPU seconds each process not in ``exclude`` used between the snapshots, by name,
    largest first (processes that started in between count from 0)."""
    by: dict[str, float] = {}
    for pid, (name, cpu) in after.items():
        if pid in exclude:
            continue
        d = cpu - before.get(pid, (name, 0.0))[1]
        if d > 0:
            by[name] = by.get(name, 0.0) + d
    return sorted(by.items(), key=lambda kv: -kv[1])


def _dirty_bytes() -> int:
    """``Dirty:`` of /proc/meminfo in bytes (0 if unreadable)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("Dirty:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _tree(pid: int | None) -> set[int]:
    """``pid`` and its descendants (empty for None or a process that is gone)."""
    import psutil

    if pid is None:
        return set()
    try:
        root = psutil.Process(pid)
        return {pid} | {c.pid for c in root.children(recursive=True)}
    except psutil.Error:
        return set()


def components(values: list[list[float]]) -> tuple[float, float]:
    """One-way random-effects variance components of ``values`` (one list per life, equal
    lengths k >= 2, at least two lives): (sd between phases of a life, sd between lives),
    in the values' unit. Raises ValueError for fewer than two lives or phases."""
    a = len(values)
    k = min(len(v) for v in values)
    if a < 2 or k < 2:
        raise ValueError("need at least two lives of at least two phases")
    rows = [v[:k] for v in values]
    grand = statistics.fmean(x for r in rows for x in r)
    means = [statistics.fmean(r) for r in rows]
    msb = k * sum((m - grand) ** 2 for m in means) / (a - 1)
    msw = sum((x - m) ** 2 for r, m in zip(rows, means) for x in r) / (a * (k - 1))
    return math.sqrt(msw), math.sqrt(max(0.0, (msb - msw) / k))


def main(argv: list[str] | None = None) -> int:
    """Run the lives and print the table. Returns 0; raises RuntimeError when a phase
    has errors (the figure would not be a throughput), SystemExit(2) on bad arguments."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--servers", default="tpd,pyftpdlib:2.2.0", help="NAME or NAME:VERSION, comma-separated")
    ap.add_argument("--backend", default="docker", choices=("docker", "local"))
    ap.add_argument("--workloads", default="retr,stor")
    ap.add_argument("--lives", type=int, default=4)
    ap.add_argument("--phases", type=int, default=4)
    ap.add_argument("--duration", type=float, default=3.0)
    ap.add_argument("--no-sync", action="store_true",
                    help="do not flush dirty page cache (sync) before each phase, as cells do (runner.cell.local)")
    ap.add_argument("--storage", choices=("disk", "tmpfs"), default="disk",
                    help="the server's home (variant storage): disk (the classic's) or tmpfs")
    a = ap.parse_args(argv)
    if a.lives < 2 or a.phases < 2:
        ap.error("--lives and --phases must be at least 2")
    workloads = [w.strip() for w in a.workloads.split(",") if w.strip()]
    if any(w not in ("retr", "stor") for w in workloads):
        ap.error("--workloads: retr and/or stor (the single-stream throughput rows)")

    from scipy import stats as sstats

    from runner.backends import ServerRequest, get_backend
    from runner.campaign.repeats import relative_half_width
    from runner.catalogue.workloads import WorkloadParams
    from runner.cell.outcome import warmup_params
    from runner.load.ftp.workloads import run_workload_sync

    servers = []
    for item in a.servers.split(","):
        name, _, version = item.strip().partition(":")
        servers.append(ServerRequest(name, version=version or None,
                                     variant={"storage": a.storage} if a.storage != "disk" else {}))
    cpus = sorted(os.sched_getaffinity(0))
    server_cpu = [cpus[0]] if len(cpus) >= 2 else None
    if len(cpus) >= 2:
        os.sched_setaffinity(0, [cpus[1]])
    pinned = cpus[:2]
    backend = get_backend(a.backend, progress=lambda m: print(f"  [{a.backend}] {m}", file=sys.stderr))
    params = WorkloadParams(duration=a.duration, transfer_size=256 << 20)
    # (server label, workload) -> per life: list of (phase figure, transfer figures, irq, mhz, dirty)
    runs: dict[tuple[str, str], list[list[tuple[float, list[float], int, float, int, float, float]]]] = {}
    labels: dict[int, str] = {}
    t_start = time.monotonic()
    print(f"{a.backend} backend, home on {a.storage}, {'no sync' if a.no_sync else 'sync'} before each phase; "
          f"{a.lives} lives x {a.phases} phases x {', '.join(workloads)}, "
          f"{a.duration:g} s each; server CPU {server_cpu}, client CPU {cpus[1] if len(cpus) >= 2 else 'any'}")
    for life in range(a.lives):
        for j, req in enumerate(servers):
            h = backend.start(req, cpu=server_cpu)
            label = labels.setdefault(j, f"{req.name} {h.build_info.get('version') or ''}".strip())
            try:
                for w in workloads:
                    run_workload_sync(w, h.target, warmup_params(params))
                for k in range(a.phases):
                    for w in workloads:
                        if not a.no_sync:
                            os.sync()
                        dirty = _dirty_bytes()
                        exclude = _tree(h.pid) | {os.getpid()}
                        p0 = _process_cpu()
                        i0, m0, s0 = _interrupts(pinned), _mhz(pinned), _steal(pinned)
                        r = run_workload_sync(w, h.target, params)
                        i1, m1, s1 = _interrupts(pinned), _mhz(pinned), _steal(pinned)
                        others = _others(p0, _process_cpu(), exclude)
                        if r.error_count or not r.bytes:
                            raise RuntimeError(f"{label} {w}: errors {r.errors} {r.notes}")
                        per = [params.transfer_size / (1 << 20) / (ms / 1000.0) for ms in r.latencies_ms if ms > 0]
                        runs.setdefault((label, w), [[] for _ in range(a.lives)])[life].append(
                            (r.throughput_mib_s, per, i1 - i0, (m0 + m1) / 2, dirty, s1 - s0,
                             sum(c for _, c in others)))
                        top = ", ".join(f"{n} {c:.2f} s" for n, c in others[:3])
                        print(f"  life {life + 1} phase {k + 1} {label:18} {w}: {r.throughput_mib_s:8.1f} MiB/s "
                              f"({len(per)} transfers, {i1 - i0} irqs, {s1 - s0:.2f} s stolen; others: {top})",
                              file=sys.stderr, flush=True)
            finally:
                h.stop()

    print(f"\n{'server · workload':34}{'median':>9} {'within':>7} {'phase':>7} {'life':>7} {'first/':>7} "
          f"{'CI fresh':>9} {'CI reuse':>9} {'r irq':>6} {'r MHz':>6} {'r dirty':>7} {'r steal':>7} {'steal':>6} "
          f"{'r other':>7}")
    print(f"{'':34}{'MiB/s':>9} {'phase':>7} {'sd %':>7} {'sd %':>7} {'later':>7} "
          f"{'n=' + str(a.lives):>9} {'n=' + str(a.phases):>9}")
    raw = {}
    stolen = {}
    for (label, w), lives in runs.items():
        figs = [[p[0] for p in lf] for lf in lives]
        flat = [x for lf in figs for x in lf]
        med = statistics.median(flat)
        within = statistics.median(statistics.stdev(p[1]) / statistics.fmean(p[1]) for lf in lives for p in lf
                                   if len(p[1]) >= 2) if any(len(p[1]) >= 2 for lf in lives for p in lf) else math.nan
        sd_phase, sd_life = components(figs)
        first = statistics.median(lf[0] for lf in figs)
        later = statistics.median(x for lf in figs for x in lf[1:])
        fresh = relative_half_width([lf[0] for lf in figs]) or 0.0
        mid = sorted(figs, key=statistics.median)[len(figs) // 2]
        steal = statistics.median(p[5] for lf in lives for p in lf) / (len(pinned) * a.duration)
        reuse = relative_half_width(mid) or 0.0

        def rho(i: int, lives=lives, flat=flat) -> str:
            xs = [p[i] for lf in lives for p in lf]
            if len(set(xs)) < 2 or any(isinstance(x, float) and math.isnan(x) for x in xs):
                return "n/a"
            return f"{sstats.spearmanr(flat, xs).statistic:+.2f}"

        print(f"{label + ' · ' + w:34}{med:9.1f} {within * 100:6.1f}% {sd_phase / med * 100:6.1f}% "
              f"{sd_life / med * 100:6.1f}% {first / later:6.2f}x {fresh * 100:8.1f}% {reuse * 100:8.1f}% "
              f"{rho(2):>6} {rho(3):>6} {rho(4):>7} {rho(5):>7} {steal * 100:5.1f}% {rho(6):>7}")
        raw[f"{label} {w}"] = [[round(x, 1) for x in lf] for lf in figs]
        stolen[f"{label} {w}"] = [[round(p[5], 2) for p in lf] for lf in lives]
    print(f"\nraw MiB/s per life: {raw}")
    print(f"CPU seconds stolen by the hypervisor from the two pinned CPUs, per phase: {stolen}")
    print(f"took {time.monotonic() - t_start:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
