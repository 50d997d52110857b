"""Pair the profiled cells of two compare operands, for differential flame graphs.

Two sides (``ID``, ``ID:SERVER`` or ``SERVER``, as ``xferlab compare`` resolves them) are
paired per workload and parameter set (``params_key``): each side's profiled cells of that
workload and parameters, every repeat, are merged into one folded profile (counts of the
same stack added), and one :class:`ProfilePair` is made wherever both sides have one. The
differential graph (runner.report.flamegraph.diff_svg) then normalises the first side's
total to the second's, so the sides' shares are compared whatever their sample counts.
When the two sides are different servers (proftpd against pure-ftpd), every stack's root
frame (the process name the profilers put first) is replaced by ``server`` on both sides,
so that the libraries' and the kernel's frames below it line up instead of every stack
being "only in one side".
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from sqlalchemy.orm import Session

from runner.catalogue.workloads import WORKLOADS, WorkloadParams
from runner.report.flamegraph import folded_total
from runner.report.render import resolve_operand
from runner.store.profiles import side_profiles


@dataclass(frozen=True)
class ProfilePair:
    """The merged profiles of both sides for one workload and parameter set.

    Attributes:
        workload, params_key, title: the workload, its parameters, its row title.
        a, b: the sides' server labels (``a`` the reference, the graph's "before").
        a_campaign, b_campaign: their campaign ids.
        a_cells, b_cells: the ids of the profiled cells merged on each side, in seq order.
        a_folded, b_folded: each side's merged on-CPU folded stacks.
        a_samples, b_samples: the sample counts of each side (sum of the folded counts).
        rates: the sampling rates (Hz) seen on the two sides, each once.
    """

    workload: str
    params_key: str
    title: str
    a: str
    b: str
    a_campaign: int
    b_campaign: int
    a_cells: tuple[int, ...]
    b_cells: tuple[int, ...]
    a_folded: str
    b_folded: str
    a_samples: int
    b_samples: int
    rates: tuple[int, ...]


def merge_folded(profiles: list[str]) -> str:
    """Folded stacks of several profiles as one: counts of identical stacks added, lines
    sorted by stack. Lines without a trailing integer count are dropped."""
    total: Counter[str] = Counter()
    for text in profiles:
        for line in text.splitlines():
            stack, _, n = line.rstrip().rpartition(" ")
            if stack and n.isdigit():
                total[stack] += int(n)
    return "".join(f"{s} {n}\n" for s, n in sorted(total.items()))


#: The root frame both sides' stacks get when the two sides are different servers.
COMMON_ROOT = "server"


def common_root(folded: str, root: str = COMMON_ROOT) -> str:
    """``folded`` with each stack's first frame replaced by ``root`` (stacks that become
    identical are merged, as :func:`merge_folded`)."""
    out = []
    for line in folded.splitlines():
        stack, _, n = line.rstrip().rpartition(" ")
        if stack and n.isdigit():
            _first, sep, rest = stack.partition(";")
            out.append(f"{root}{sep}{rest} {n}")
    return merge_folded(["\n".join(out)])


def profile_pairs(session: Session, a: str, b: str, *, campaign: int | None = None, workload: str | None = None,
                  params_key: str | None = None) -> list[ProfilePair]:
    """The profile pairs of operands ``a`` and ``b`` (module docstring), in the order of
    ``b``'s first profiled cell of each workload and parameters; only ``workload`` /
    ``params_key`` when given. Empty when no workload was profiled on both sides.
    Raises runner.report.render.CompareError when an operand does not resolve."""
    (ca, la), (cb, lb) = resolve_operand(session, a, campaign=campaign), resolve_operand(session, b, campaign=campaign)
    sides = []
    for cid, label in ((ca, la), (cb, lb)):
        groups: dict[tuple[str, str], list] = {}
        for cell, prof in side_profiles(session, campaign_id=cid, server_label=label, workload=workload,
                                        params_key=params_key):
            groups.setdefault((cell.workload, cell.params_key), []).append((cell, prof))
        sides.append(groups)
    out = []
    for key, bs in sides[1].items():
        as_ = sides[0].get(key)
        if not as_:
            continue
        fa, fb = merge_folded([p.on_cpu for _, p in as_]), merge_folded([p.on_cpu for _, p in bs])
        if {c.server for c, _ in as_} != {c.server for c, _ in bs}:  # different programs: align below the root
            fa, fb = common_root(fa), common_root(fb)
        title = WORKLOADS[key[0]].title_for(WorkloadParams.model_validate(bs[0][0].params))
        out.append(ProfilePair(workload=key[0], params_key=key[1], title=title, a=la, b=lb, a_campaign=ca,
                               b_campaign=cb, a_cells=tuple(c.id for c, _ in as_), b_cells=tuple(c.id for c, _ in bs),
                               a_folded=fa, b_folded=fb, a_samples=folded_total(fa), b_samples=folded_total(fb),
                               rates=tuple(dict.fromkeys(p.rate_hz for _, p in as_ + bs))))
    return out
