"""``xferlab bisect``: find the first commit where a figure regressed, in git's own bisect
order (``git rev-list --bisect``), each commit measured as a stored campaign.

The loop:

1. The good and the bad ref are measured (``repeats`` each); their figures must differ
   (runner.campaign.gate.verdict: a significant regression of at least the minimum effect),
   else there is nothing to bisect.
2. While more than one commit is left in ``bad --not good...``, the commit
   ``git rev-list --bisect`` names is measured and classed: **bad** when its samples differ
   significantly (two-sided Mann-Whitney U, alpha 0.05) from the good ones and not from the
   bad ones, **good** the other way round; when both or neither differ, the nearer median
   (on a log scale) decides if both differ, and if neither differs the commit is measured
   again (another campaign, samples pooled), at most ``max_rounds`` times, then the bisect
   stops undecided. A commit whose cells measured nothing (it does not build) is skipped,
   as ``git bisect skip`` does: the next commit is the best other one of ``git rev-list
   --bisect-all``; when skipped commits are left next to the first bad one, the bisect
   names them all.
3. The first bad commit and its first parent are measured once more and classed again:
   the result is confirmed only if the parent is good and the commit bad.

Before the first measurement the range's commits are listed once in the repository's
order (:func:`repo_order`: the good end, then ``git rev-list --topo-order --reverse
good..bad``, so the bad end last and every parent before its children): the axis the
steps are shown on (:func:`in_repo_order`). A ``should_stop`` callback checked before
and after every measurement ends the loop with :class:`Cancelled`.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from sqlalchemy.engine import Engine

from runner.backends.base import ServerFailed
from runner.backends.source import git, resolve
from runner.campaign.gate import at_source, pooled, read, run_stored, samples_of, verdict
from runner.campaign.loop import Reporter
from runner.report.data import Series
from runner.report.stats import ALPHA, mann_whitney_p, summarize
from runner.spec.model import CampaignSpec


class BisectError(Exception):
    """The bisect cannot go on: good and bad do not differ, a good or bad end has no
    samples, a commit stays undecided, every commit left failed to measure, or the refs
    are not ordered."""


class Cancelled(BisectError):
    """The bisect was cancelled (``should_stop`` of :class:`Bisector` gave a reason): the
    steps measured before it stay; the campaign in flight keeps the cells it stored."""


class NotMeasured(BisectError):
    """A commit's campaign measured nothing (its cells failed: the message has their
    reason, e.g. the build's last lines). In the middle of the range the commit is skipped,
    as ``git bisect skip`` does."""


@dataclass
class Step:
    """One measured commit.

    Attributes:
        role: ``good``/``bad`` (the refs given), ``step`` (a midpoint), ``confirm``.
        commit: 40 hex digits; subject: its subject line.
        campaigns: the stored campaigns that measured it (more than one when re-measured).
        median: median of the figure over all its samples.
        verdict: ``good`` or ``bad`` (the refs given are that by definition).
        p_good, p_bad: Mann-Whitney U p-values against the good and the bad samples.
        left: commits still in the range when it was chosen (steps); 0 otherwise.
        n, ci_low, ci_high, unit: the samples pooled, the confidence interval of their
            median (runner.report.stats.summarize; None below 2 samples) and its unit.
    """

    role: Literal["good", "bad", "step", "confirm"]
    commit: str
    subject: str
    campaigns: list[int]
    median: float
    verdict: Literal["good", "bad"]
    p_good: float | None = None
    p_bad: float | None = None
    left: int = 0
    n: int = 0
    ci_low: float | None = None
    ci_high: float | None = None
    unit: str = ""

    def with_samples(self, s: Series) -> Step:
        """This step with ``n``, the median's CI and the unit of the pooled samples ``s``."""
        sm = summarize(s.samples)
        self.n, self.ci_low, self.ci_high, self.unit = sm.n, sm.ci_low, sm.ci_high, s.unit
        return self


@dataclass
class BisectResult:
    """The outcome: ``first_bad`` (40 hex digits) and its subject, whether the re-measure
    confirmed it, every step in the order measured, and ``commits``, the range in the
    repository's order (:func:`repo_order`)."""

    first_bad: str
    subject: str
    confirmed: bool
    steps: list[Step] = field(default_factory=list)
    commits: list[str] = field(default_factory=list)


#: Most commits a bisected range may hold (the stored axis of its chart; about 17 steps).
MAX_RANGE = 100_000


def repo_order(repo: Path, good: str, bad: str) -> list[str]:
    """The commits of ``good..bad`` in the repository's order, oldest first: ``good``, then
    ``git rev-list --topo-order --reverse good..bad`` (every commit git's bisect may pick,
    side branches included; a parent always before its children, so ``bad`` is last).
    ``good`` and ``bad`` are commits (40 hex); ``good`` an ancestor of ``bad``. Raises
    BisectError when the range holds more than :data:`MAX_RANGE` commits, ServerFailed when
    git fails."""
    order = [good, *_lines(repo, ["rev-list", "--topo-order", "--reverse", "--end-of-options", bad, f"^{good}"])]
    if len(order) > MAX_RANGE + 1:
        raise BisectError(f"{len(order) - 1} commits between good and bad: at most {MAX_RANGE} (narrow the range)")
    return order


def in_repo_order(commits: list[str], steps: list[Step]) -> list[tuple[int, Step]]:
    """``steps`` with each one's position on ``commits`` (the range in repository order,
    :func:`repo_order`), sorted by it, the order measured kept among the steps of one commit
    (a step, then its confirmation). A commit outside the range (a first parent that is an
    ancestor of the good end, on a side branch) gets -1: before the good end."""
    index = {c: i for i, c in enumerate(commits)}
    placed = [(index.get(st.commit, -1), k, st) for k, st in enumerate(steps)]
    return [(pos, st) for pos, _k, st in sorted(placed, key=lambda t: (t[0], t[1]))]


def _lines(repo: Path, args: list[str]) -> list[str]:
    return git(args, cwd=repo, what="git " + args[0]).decode().split()


def bisect_steps(repo: Path, bad: str, goods: list[str], skipped: frozenset[str] = frozenset()
                 ) -> tuple[str | None, int, int]:
    """git's next bisect commit of ``bad --not goods`` (``git rev-list --bisect-vars``), or,
    when that one is in ``skipped``, the best other one of ``git rev-list --bisect-all``
    (git's order by how evenly each splits the range): (the commit, or None when every
    commit left but ``bad`` is skipped or none is; commits left; steps left)."""
    revs = [bad, *(f"^{g}" for g in goods)]
    left = _lines(repo, ["rev-list", "--end-of-options", *revs])
    if len(left) <= 1:
        return None, len(left), 0
    out = git(["rev-list", "--bisect-vars", "--end-of-options", *revs], cwd=repo,
              what="git rev-list --bisect-vars").decode()
    values = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    steps = int(values.get("bisect_steps", "0"))
    mid = values["bisect_rev"].strip("'")
    if mid in skipped:
        order = [line.split()[0] for line in git(["rev-list", "--bisect-all", "--end-of-options", *revs], cwd=repo,
                                                 what="git rev-list --bisect-all").decode().splitlines() if line]
        mid = next((c for c in order if c not in skipped and c != bad), None)  # type: ignore[assignment]
    return mid, len(left), steps


class Bisector:
    """Runs the loop of the module docstring.

    Args:
        engine: the store.
        spec: a campaign spec with one server built from source (its ``ref`` is replaced per
            commit) and the workload to run.
        workload, metric: the figure that regressed (a workload name of ``spec`` and a
            metric of it, e.g. ``retr_concurrent``/``elapsed``).
        reporter: progress of each campaign's cells (runner.cell.outcome.Reporter).
        say: one line of progress (steps left, each verdict).
        min_effect: the good/bad difference must reach this relative change.
        max_rounds: most measurements of one commit before it is called undecided.
        on_step: called with every Step as soon as it is measured (good, bad, each
            midpoint, the two confirmations), e.g. to store progress.
        on_progress: called when a midpoint is chosen with (commits left in the range,
            git's estimate of the steps to go after this one).
        on_order: called once, before the first measurement, with the range's commits in
            the repository's order (:func:`repo_order`).
        on_campaign: called with each step's campaign id once it is stored, before its
            first cell runs (runner.campaign.gate.run_stored).
        should_stop: checked before and after every measurement; a reason (str) ends the
            bisect with :class:`Cancelled`, None goes on.
    """

    def __init__(self, engine: Engine, spec: CampaignSpec, *, workload: str, metric: str, reporter: Reporter,
                 say: Callable[[str], None], min_effect: float, max_rounds: int = 3,
                 on_step: Callable[[Step], None] | None = None,
                 on_progress: Callable[[int, int], None] | None = None,
                 on_order: Callable[[list[str]], None] | None = None,
                 on_campaign: Callable[[int], None] | None = None,
                 should_stop: Callable[[], str | None] | None = None):
        servers = [s for s in spec.servers if s.source is not None]
        if len(servers) != 1 or len(spec.servers) != 1:
            raise BisectError("bisect needs a spec with exactly one server, built from source")
        self.engine, self.spec, self.workload, self.metric = engine, spec, workload, metric
        self.source = servers[0].source or ""
        self.reporter, self.say, self.min_effect, self.max_rounds = reporter, say, min_effect, max_rounds
        self.on_step = on_step or (lambda _st: None)
        self.on_progress = on_progress or (lambda _left, _steps: None)
        self.on_order = on_order or (lambda _commits: None)
        self.on_campaign = on_campaign
        self.should_stop = should_stop or (lambda: None)

    def _check_stop(self, what: str) -> None:
        why = self.should_stop()
        if why is not None:
            raise Cancelled(f"{why} ({what})")

    def measure(self, commit: str, role: str) -> tuple[int, Series]:
        """Run the spec at ``commit`` as a stored campaign; (its id, the figure's series).
        Raises BisectError with the cells' failure when the figure has no samples, Cancelled
        when ``should_stop`` gives a reason before or after the campaign runs."""
        self._check_stop(f"before measuring {commit[:12]}")
        spec = at_source(self.spec, ref=commit, name=f"bisect {self.spec.servers[0].name} {commit[:12]} ({role})")
        cid = run_stored(self.engine, spec, self.reporter, on_created=self.on_campaign)
        self._check_stop(f"campaign {cid} at {commit[:12]} cancelled; its finished cells are stored")
        data = read(self.engine, cid)
        s = samples_of(data, self.workload, self.metric)
        if s is None:
            why = "; ".join(sorted({(e or "").strip().splitlines()[0] for *_x, e in data.failures if e})) or \
                f"no {self.workload} {self.metric} samples"
            raise NotMeasured(f"campaign {cid} at {commit[:12]} measured nothing: {why}")
        return cid, s

    def classify(self, commit: str, role: str, good: Series, bad: Series) -> Step:
        """Measure ``commit`` (again, up to ``max_rounds`` times) until it is good or bad."""
        cids: list[int] = []
        runs: list[Series] = []
        for _round in range(self.max_rounds):
            cid, s = self.measure(commit, role)
            cids.append(cid)
            runs.append(s)
            m = pooled(runs)
            pg, pb = mann_whitney_p(good.samples, m.samples), mann_whitney_p(bad.samples, m.samples)
            med = _median(m)
            if pg < ALPHA and pb >= ALPHA:
                kind: Literal["good", "bad"] | None = "bad"
            elif pb < ALPHA and pg >= ALPHA:
                kind = "good"
            elif pg < ALPHA and pb < ALPHA:
                kind = "bad" if _log_dist(med, _median(bad)) < _log_dist(med, _median(good)) else "good"
            else:
                kind = None
            if kind is not None:
                return Step("confirm" if role == "confirm" else "step", commit, "", cids, med, kind, pg,
                            pb).with_samples(m)
            self.say(f"  {commit[:12]}: undecided (p vs good {pg:.3g}, vs bad {pb:.3g}); measuring again")
        raise BisectError(f"{commit[:12]} stays undecided after {self.max_rounds} measurements "
                          "(add repeats, or a larger effect)")

    def run(self, good_ref: str, bad_ref: str) -> BisectResult:
        """Bisect ``good_ref``..``bad_ref`` (see the module docstring). Raises BisectError
        or ServerFailed (a ref that does not resolve)."""
        g, b = resolve(self.source, good_ref), resolve(self.source, bad_ref)
        repo = g.repo
        try:
            git(["merge-base", "--is-ancestor", g.commit, b.commit], cwd=repo, what="git merge-base")
        except ServerFailed as e:
            raise BisectError(f"good {good_ref} ({g.commit[:12]}) is not an ancestor of bad {bad_ref}") from e
        commits = repo_order(repo, g.commit, b.commit)
        self.on_order(commits)
        self.say(f"measuring good {good_ref} ({g.commit[:12]}) and bad {bad_ref} ({b.commit[:12]})")
        gcid, gs = self.measure(g.commit, "good")
        bcid, bs = self.measure(b.commit, "bad")
        v = verdict(self.metric, gs, bs, self.min_effect)
        steps = [Step("good", g.commit, g.subject, [gcid], _median(gs), "good").with_samples(gs),
                 Step("bad", b.commit, b.subject, [bcid], _median(bs), "bad").with_samples(bs)]
        for st in steps:
            self.on_step(st)
        self.say(f"good {_median(gs):.4g}, bad {_median(bs):.4g} {gs.unit} ({v.change * 100:+.1f}%, "
                 f"p={v.p_value:.3g})")
        if not v.regression:
            raise BisectError(f"good and bad do not differ by a significant regression of {self.metric}: "
                              f"{v.change * 100:+.1f}%, p={v.p_value:.3g} (min effect {self.min_effect * 100:.0f}%)")
        goods, bad = [g.commit], b.commit
        skipped: set[str] = set()
        for n in range(1, 10_000):
            mid, left, steps_left = bisect_steps(repo, bad, goods, frozenset(skipped))
            if mid is None:
                break
            subject = _subject(repo, mid)
            self.on_progress(left, steps_left)
            self.say(f"step {n}: {mid[:12]} {subject[:60]!r} ({left} commits left, "
                     f"about {steps_left + 1} step{'s' if steps_left else ''} to go)")
            try:
                st = self.classify(mid, "step", gs, bs)
            except NotMeasured as e:
                self.say(f"  {mid[:12]} skipped: {e}")
                skipped.add(mid)
                continue
            st.subject, st.left = subject, left
            steps.append(st)
            self.on_step(st)
            self.say(f"  {mid[:12]} is {st.verdict}: median {st.median:.4g} (p vs good {st.p_good:.3g}, "
                     f"vs bad {st.p_bad:.3g})")
            if st.verdict == "bad":
                bad = mid
            else:
                goods.append(mid)
        first = bad
        unsure = [c for c in _lines(repo, ["rev-list", "--end-of-options", bad, *(f"^{x}" for x in goods)])
                  if c in skipped]
        if unsure:
            raise BisectError(f"the first bad commit is {bad[:12]} or one of the commits that could not be "
                              f"measured before it: {', '.join(c[:12] for c in unsure)}")
        parent = git(["rev-parse", "--verify", "--end-of-options", f"{first}^1"], cwd=repo,
                     what="git rev-parse").decode().strip()
        self.say(f"first bad commit {first[:12]}; confirming: re-measuring it and its parent {parent[:12]}")
        cp = self.classify(parent, "confirm", gs, bs)
        cb = self.classify(first, "confirm", gs, bs)
        cp.subject, cb.subject = _subject(repo, parent), _subject(repo, first)
        steps += [cp, cb]
        self.on_step(cp)
        self.on_step(cb)
        return BisectResult(first, cb.subject, cp.verdict == "good" and cb.verdict == "bad", steps, commits)


def _median(s: Series) -> float:
    xs = sorted(s.samples)
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


def _log_dist(a: float, b: float) -> float:
    if a <= 0 or b <= 0:
        return abs(a - b)
    return abs(math.log(a / b))


def _subject(repo: Path, commit: str) -> str:
    return git(["log", "-1", "--format=%s", "--end-of-options", commit], cwd=repo, what="git log").decode().strip()
