"""``xferlab history`` (one series by campaign or by commit, or the list of series) and
``xferlab regressions`` (the significant changes of every series), each change with the
environment facts that differ between its two sides and, where calibrated, the
expected false-alarm rate."""
from __future__ import annotations

import argparse

from runner.cli import common
from runner.cli.common import CliError


def add_history_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of ``xferlab history``."""
    p.add_argument("series", nargs="?", help="SERVER:WORKLOAD (e.g. tpd:retr); none: list every series")
    p.add_argument("--metric", default="", help="series metric: '' (the workload's figure, default), "
                                                "server_mem_uss, server_mem_rss_minus_shared, server_cpu_per_gib, ...")
    p.add_argument("--track", help="the series' track (a spec label, or variant JSON); needed when several")
    p.add_argument("--params", help="the series' params_key; needed when several")
    p.add_argument("--by", choices=("time", "commit"), default="time",
                   help="order points by campaign (time) or by the server's source commit")
    p.add_argument("--alpha", type=float, help="false-discovery rate (default 0.05)")
    p.add_argument("--min-effect", type=float, help="minimum relative effect (default 0.05)")
    p.add_argument("--json", action="store_true", help="print JSON")


def add_regressions_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of ``xferlab regressions``."""
    p.add_argument("--alpha", type=float, help="false-discovery rate (default 0.05)")
    p.add_argument("--min-effect", type=float, help="minimum relative effect (default 0.05)")
    p.add_argument("--window", type=int, default=50, help="campaigns examined per series (default 50)")
    p.add_argument("--no-improvements", action="store_true", help="list regressions (and environment changes) only")
    p.add_argument("--json", action="store_true", help="print JSON")


def _thresholds(args: argparse.Namespace) -> tuple[float, float]:
    from runner.history import DEFAULT_ALPHA, DEFAULT_MIN_EFFECT

    alpha = DEFAULT_ALPHA if args.alpha is None else args.alpha
    min_effect = DEFAULT_MIN_EFFECT if args.min_effect is None else args.min_effect
    if not 0 < alpha <= 1:
        raise CliError(f"--alpha must be in (0, 1], got {alpha}")
    if min_effect < 0:
        raise CliError(f"--min-effect must be >= 0, got {min_effect}")
    return alpha, min_effect


def _find_key(session, args: argparse.Namespace):
    """The SeriesKey named by ``args`` (CliError naming the choices when ambiguous or absent)."""
    from runner.history import SERIES_METRICS, SeriesKey, list_series

    server, sep, workload = (args.series or "").partition(":")
    if not sep or not server or not workload:
        raise CliError(f"series {args.series!r}: give SERVER:WORKLOAD, e.g. tpd:retr")
    if args.metric not in SERIES_METRICS:
        raise CliError(f"--metric {args.metric!r}: use one of {list(SERIES_METRICS)}")
    rows = [r for r in list_series(session) if r["server"] == server and r["workload"] == workload
            and r["metric"] == args.metric and (args.track is None or r["track"] == args.track)
            and (args.params is None or r["params_key"] == args.params)]
    if not rows:
        raise CliError(f"no series {args.series} (metric {args.metric!r}): see `xferlab history`")
    if len(rows) > 1:
        choices = "; ".join(f"--track '{r['track']}' --params '{r['params_key']}'" for r in rows)
        raise CliError(f"series {args.series} is ambiguous: {choices}")
    r = rows[0]
    return SeriesKey(r["server"], r["track"], r["workload"], r["params_key"], r["metric"])


def _verdict(c) -> str:
    if c.kind in ("regression", "improvement"):
        return f"{c.kind} {c.effect * 100:+.1f}% (q={c.q_value:.3g})"
    if c.kind == "env_changed":
        return "environment changed: not compared"
    return ""


def cmd_history(args: argparse.Namespace) -> int:
    """``xferlab history``: the list of series, or one series by campaign or by commit."""
    import json

    from runner.history import list_series, series_changes, series_points
    from runner.history.provenance import fact_diff, point_contexts

    alpha, min_effect = _thresholds(args)
    with common.session(common.engine()) as session:
        if not args.series:
            rows = list_series(session)
            if args.json:
                print(json.dumps(rows, indent=1))
                return 0
            for r in rows:
                print(f"{r['server']}:{r['workload']}  metric={r['metric'] or 'primary'!s:<20} "
                      f"track={r['track']}  params={r['params_key']}  points={r['points']}")
            return 0
        key = _find_key(session, args)
        points = series_points(session, key=key)
        if args.by == "commit":
            return _print_by_commit(session, key, points, alpha, min_effect, args.json)
        changes = series_changes(key, points, alpha=alpha, min_effect=min_effect)
        contexts = point_contexts(session, key=key, points=points)
        diffs = [fact_diff(contexts[i].facts, contexts[i + 1].facts) for i in range(len(changes))]
        if args.json:
            print(json.dumps({"series": key.as_dict(), "points": [p.as_dict() for p in points],
                              "changes": [{**c.as_dict(), "env_diff": [d.as_dict() for d in diff]}
                                          for c, diff in zip(changes, diffs)]}, indent=1))
            return 0
        print(f"{key.title} [{key.params_key}] by campaign")
        for i, p in enumerate(points):
            print(f"  #{p.campaign_id:<5} {p.version:<12} n={len(p.samples):<3} median {p.median:.4g} {p.unit}"
                  + (f"  {_verdict(changes[i - 1])}" if i and _verdict(changes[i - 1]) else ""))
            if i and changes[i - 1].kind != "same" and diffs[i - 1]:
                print("         environment moved: " + "; ".join(str(d) for d in diffs[i - 1]))
    return 0


def _print_by_commit(session, key, points, alpha: float, min_effect: float, as_json: bool) -> int:
    import json

    from runner.history.bycommit import series_by_commit

    cs = series_by_commit(session, key=key, points=points, alpha=alpha, min_effect=min_effect)
    if as_json:
        print(json.dumps(cs.as_dict(), indent=1))
        return 0
    if not cs.points:
        raise CliError(f"{key.title}: no point of this series was built from a source (no commit to order by)")
    print(f"{key.title} [{key.params_key}] by commit ({cs.order})"
          + (f"; {cs.left_out} point(s) without a source left out" if cs.left_out else ""))
    for i, (p, s) in enumerate(zip(cs.points, cs.sources)):
        date = s.author_date[:10] if s.author_date else "?"
        print(f"  {s.short:<13} {date}  {s.subject[:50]:<50} #{p.campaign_id:<5} n={len(p.samples):<3} "
              f"median {p.median:.4g} {p.unit}")
        if i and cs.changes[i - 1].kind != "same":
            c = cs.changes[i - 1]
            print(f"      ^ {_verdict(c)}: first commit after the change: {s.short} {s.subject}")
            if cs.diffs[i - 1]:
                print("        environment moved: " + "; ".join(str(d) for d in cs.diffs[i - 1]))
    return 0


def _rate_text(rate: float | None) -> str:
    return "uncalibrated" if rate is None else f"{rate * 100:.1f}%"


def cmd_regressions(args: argparse.Namespace) -> int:
    """``xferlab regressions``: every significant change (and environment change)."""
    import json

    from runner.history import find_regressions
    from runner.history.alerts import annotate

    alpha, min_effect = _thresholds(args)
    if args.window < 2:
        raise CliError(f"--window must be >= 2, got {args.window}")
    with common.session(common.engine()) as session:
        changes = find_regressions(session, alpha=alpha, min_effect=min_effect,
                                   include_improvements=not args.no_improvements, window=args.window)
        alerts = annotate(session, changes, alpha=alpha, min_effect=min_effect)
    if args.json:
        print(json.dumps([a.as_dict() for a in alerts], indent=1))
        return 0
    if not alerts:
        print("no significant change")
    for a in alerts:
        c = a.change
        print(f"{c.kind:<12} {c.key.title} [{c.key.params_key}]: #{c.before.campaign_id} "
              f"{c.before.median:.4g} -> #{c.after.campaign_id} {c.after.median:.4g} {c.unit}"
              + (f"  {_verdict(c)}  expected false-alarm rate {_rate_text(a.false_alarm_rate)}"
                 if c.kind != "env_changed" else ""))
        if a.env_diff:
            print("    environment moved: " + "; ".join(str(d) for d in a.env_diff))
    return 0
