"""What ``xferlab check`` and ``xferlab bisect`` share: a spec pointed at one source ref,
run as a stored campaign, its samples read back per figure, and the verdict of a
comparison (Mann-Whitney U of runner.report.stats plus a minimum effect).

A regression of a figure is: the two-sided Mann-Whitney U p-value of the baseline's
and the candidate's raw samples below ``alpha`` (0.05), the candidate's median worse
(lower for a higher-is-better figure, higher otherwise), and the relative change of the
medians at least :func:`min_effect_for` of the figure.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from runner.campaign.loop import Reporter, resolve_backend, run_campaign
from runner.report.data import CampaignData, Series
from runner.report.reader import load_campaign
from runner.report.stats import ALPHA, compare
from runner.spec.model import CampaignSpec, parse_spec
from runner.store import campaigns as crud

#: The minimum relative effect a significant change must reach to count, when nothing
#: more specific is known (``--min-effect``'s default): 5%.
DEFAULT_MIN_EFFECT = 0.05


def min_effect_for(metric: str, env_class: str | None, default: float = DEFAULT_MIN_EFFECT, *,
                   engine: Engine | None = None) -> float:
    """The smallest relative change of ``metric``'s median (0.05 = 5%) that counts as a
    regression in environment class ``env_class`` (runner.store.models.Environment).

    With ``engine`` (the lab's database), the noise floor ``xferlab calibrate`` stored for
    this figure and class (runner.history.calibration.calibrated_min_effect: the largest
    A/A spread of the newest calibrations, at least 1%) replaces ``default`` when one is
    stored; without, or when none is, ``default``. A minimum effect the user gave
    (``--min-effect``) is passed as ``default`` with no ``engine``."""
    if engine is None:
        return default
    from runner.history.calibration import calibrated_min_effect

    with Session(engine) as s:
        found = calibrated_min_effect(metric, env_class, s)
    return default if found is None else found


#: A figure of a campaign: (server index in the spec, workload, parameters key, metric, memory checkpoint).
FigureKey = tuple[int, str, str, str, str | None]


def figure_name(data: CampaignData, key: FigureKey) -> str:
    """``"<workload title> <metric>[/<checkpoint>]"`` of ``key`` as a report names it."""
    _i, workload, params_key, metric, checkpoint = key
    title = next((s.title for s in data.series if s.workload == workload and s.params_key == params_key), workload)
    return f"{title} {metric}" + (f"/{checkpoint}" if checkpoint else "")


def figures(data: CampaignData) -> dict[FigureKey, Series]:
    """Every series of ``data`` keyed by the server's position in the spec (so campaigns of
    one spec at two refs line up although their labels differ), workload, parameters,
    metric and memory checkpoint."""
    index = {label: i for i, label in enumerate(data.servers)}
    return {(index.get(s.server, -1), s.workload, s.params_key, s.metric, s.checkpoint): s for s in data.series}


def at_source(spec: CampaignSpec, *, source: str | None = None, ref: str | None,
              name: str | None = None) -> CampaignSpec:
    """``spec`` with every server built from source set to ``ref`` (and ``source`` when given;
    ``ref=None`` takes a checkout as it is) and the campaign named ``name``. Raises
    ValueError when no server of ``spec`` has a ``source``; runner.spec.model.SpecError
    when the result is invalid (a ref that is not a ref)."""
    data: dict[str, Any] = spec.model_dump(mode="json", exclude_none=True)
    hit = False
    for server in data["servers"]:
        if server.get("source") is not None:
            if source is not None:
                server["source"] = source
            server.pop("ref", None)
            if ref is not None:
                server["ref"] = ref
            server.pop("label", None)
            hit = True
    if not hit:
        raise ValueError("no server of the spec has a 'source': name one (source: PATH_OR_URL) to check or bisect")
    if name:
        data["name"] = name
    return parse_spec(data, f"spec at {ref or 'the checkout'}")


def run_stored(engine: Engine, spec: CampaignSpec, reporter: Reporter,
               on_created: Callable[[int], None] | None = None) -> int:
    """Run ``spec`` in the foreground as a stored campaign (owned by this process) and
    return its id. Every cell is stored as it ends; a failed cell stays failed.
    ``on_created`` is called with the campaign's id once it is stored, before its first
    cell runs (a cancel made then or later is seen between cells, as for any campaign)."""
    backend = resolve_backend(spec.backend)
    with Session(engine, expire_on_commit=False) as session:
        camp = crud.create_campaign(session, spec=spec, backend=backend.name, owner=crud.worker_id())
        session.commit()
        cid = camp.id
    if on_created is not None:
        on_created(cid)
    run_campaign(engine, cid, reporter=reporter)
    return cid


def read(engine: Engine, campaign_id: int) -> CampaignData:
    """The stored campaign ``campaign_id`` as a report reads it (runner.report.reader)."""
    with Session(engine, expire_on_commit=False) as session:
        return load_campaign(session, campaign_id=campaign_id)


@dataclass(frozen=True)
class Verdict:
    """One figure, baseline vs candidate.

    Attributes:
        name: the figure's name (workload title, metric).
        unit: its unit.
        base_median, cand_median: medians of the raw samples.
        change: relative change of the median, candidate vs baseline (+0.10 = 10% higher).
        p_value: two-sided Mann-Whitney U p-value.
        q_value: ``p_value`` adjusted with Benjamini-Hochberg over every figure of one check
            (runner.campaign.check.run_check); ``p_value`` for a figure compared alone.
        min_effect: the minimum relative effect that counts (:func:`min_effect_for`).
        regression: significant (``q_value`` below alpha), worse, and at least ``min_effect``.
        improvement: significant, better, and at least ``min_effect``.
        n_base, n_cand: samples on each side.
    """

    name: str
    unit: str
    base_median: float
    cand_median: float
    change: float
    p_value: float
    min_effect: float
    regression: bool
    improvement: bool
    n_base: int
    n_cand: int
    q_value: float = 1.0


def verdict(name: str, base: Series, cand: Series, min_effect: float, alpha: float = ALPHA) -> Verdict:
    """Compare the raw samples of ``base`` and ``cand`` (runner.report.stats.compare: the
    Mann-Whitney U test) and apply ``min_effect`` (see the module docstring)."""
    c = compare(base.samples, cand.samples, base.higher_is_better, alpha=alpha)
    mb, mc = c.a.median, c.b.median
    change = (mc / mb - 1.0) if mb else (0.0 if mc == mb else math.inf)
    worse = (mc < mb) if base.higher_is_better else (mc > mb)
    big = abs(change) >= min_effect
    return Verdict(name, base.unit, mb, mc, change, c.p_value, min_effect, c.significant and worse and big,
                   c.significant and not worse and big, len(base.samples), len(cand.samples), c.p_value)


def samples_of(data: CampaignData, workload: str, metric: str, checkpoint: str | None = None) -> Series | None:
    """The first series of ``data`` of ``workload`` and ``metric`` (and memory ``checkpoint``),
    or None."""
    return next((s for s in data.series if s.workload == workload and s.metric == metric
                 and s.checkpoint == checkpoint), None)


def pooled(series: Sequence[Series]) -> Series:
    """One series with the samples of all of ``series`` (the same figure measured in several
    campaigns)."""
    first = series[0]
    return Series(first.server, first.workload, first.title, first.metric, first.unit, first.higher_is_better,
                  tuple(x for s in series for x in s.samples), first.params_key, first.checkpoint)
