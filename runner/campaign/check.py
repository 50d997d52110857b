"""``xferlab check``: a spec run against a candidate (a ref or a checkout) and a baseline (a
ref or a stored campaign), every figure compared (runner.campaign.gate.verdict), the
outcome as a Markdown summary (a CI job's step summary, a pull-request comment) and JUnit
XML (one test case per figure, a failure per regression)."""
from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from scipy.stats import false_discovery_control
from sqlalchemy.engine import Engine

from runner.campaign.gate import FigureKey, Verdict, figure_name, figures, min_effect_for, verdict
from runner.report.data import CampaignData
from runner.report.stats import ALPHA


@dataclass
class CheckResult:
    """The outcome of a check.

    Attributes:
        baseline, candidate: the two campaigns' ids.
        baseline_what, candidate_what: what each side ran (a ref, a checkout, a campaign).
        verdicts: one per compared figure, in the campaign's order.
        missing: figures of the baseline with no samples in the candidate (its cells failed),
            with the candidate's failure messages.
        env_classes: the environment classes (runner.store.models.Environment) of the
            baseline and the candidate: figures of different classes are compared, and
            the summary says so.
    """

    baseline: int
    candidate: int
    baseline_what: str
    candidate_what: str
    verdicts: list[Verdict] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    env_classes: tuple[str, str] = ("", "")

    @property
    def regressions(self) -> list[Verdict]:
        """The verdicts that are regressions."""
        return [v for v in self.verdicts if v.regression]

    @property
    def failed(self) -> bool:
        """True on a significant regression or a figure the candidate could not measure."""
        return bool(self.regressions or self.missing)


def primary_keys(data: CampaignData, metrics: Iterable[str] = ()) -> list[FigureKey]:
    """The figures a check compares: each workload's row metric (``CampaignData.workloads``)
    and every metric named in ``metrics``, in campaign order."""
    wanted = set(metrics)
    keys = []
    for key, s in figures(data).items():
        facts = data.workloads.get(s.workload)
        if s.metric in wanted or (facts is not None and s.metric == facts.primary and s.checkpoint is None):
            keys.append(key)
    return keys


def run_check(base: CampaignData, cand: CampaignData, *, baseline_what: str, candidate_what: str,
              min_effect: float, metrics: Iterable[str] = (), calibration: Engine | None = None) -> CheckResult:
    """Compare every figure of :func:`primary_keys` of ``base`` with the same figure of
    ``cand`` (the same server position, workload, parameters, metric). The minimum effect
    of a figure is ``min_effect_for(metric, env_class of the candidate, min_effect,
    engine=calibration)``: the calibrated noise floor when ``calibration`` (the lab's
    database) holds one for it, else ``min_effect``; with
    more than one figure their p-values are adjusted with Benjamini-Hochberg
    (``scipy.stats.false_discovery_control``) and a figure is significant when its q-value
    is below 0.05. Raises ValueError when the two campaigns share no figure."""
    env_class = str(cand.environment.get("env_class") or "") or None
    res = CheckResult(base.campaign_id, cand.campaign_id, baseline_what, candidate_what,
                      env_classes=(str(base.environment.get("env_class") or ""), env_class or ""))
    cf = figures(cand)
    bf = figures(base)
    if bf and cf and not set(bf) & set(cf):
        raise ValueError(f"campaign {base.campaign_id} and campaign {cand.campaign_id} share no figure (same server "
                         "position, workload, parameters, metric): the baseline must be a campaign of the same spec")
    for key in primary_keys(base, metrics):
        name = figure_name(base, key)
        other = cf.get(key)
        if other is None:
            why = "; ".join(sorted({(err or "").splitlines()[0] for _s, w, _r, err in cand.failures
                                    if w == key[1] and err})) or "no samples"
            res.missing.append(f"{name}: {why}")
            continue
        res.verdicts.append(verdict(name, bf[key], other, min_effect_for(key[3], env_class, min_effect,
                                                                         engine=calibration)))
    if len(res.verdicts) > 1:  # many figures, one decision: Benjamini-Hochberg, as runner.history does
        qs = false_discovery_control([v.p_value for v in res.verdicts], method="bh")
        res.verdicts = [replace(v, q_value=float(q), regression=v.regression and q < ALPHA,
                                improvement=v.improvement and q < ALPHA) for v, q in zip(res.verdicts, qs, strict=True)]
    return res


def _pct(x: float) -> str:
    return f"{x * 100:+.1f}%"


def _num(x: float) -> str:
    return f"{x:.4g}"


def markdown(res: CheckResult) -> str:
    """The check as Markdown: a headline (regression or not), then a table of every figure
    with both medians, the change, the p-value, the minimum effect and the verdict."""
    head = ("## :x: xferlab check: regression" if res.failed else "## :white_check_mark: xferlab check: no regression")
    lines = [head, "",
             f"Candidate **{res.candidate_what}** (campaign {res.candidate}) vs baseline **{res.baseline_what}** "
             f"(campaign {res.baseline}); Mann-Whitney U, Benjamini-Hochberg over the figures, alpha 0.05, plus a "
             "minimum effect.", "",
             *([f"Note: the two sides ran in different environment classes ({res.env_classes[0]} vs "
                f"{res.env_classes[1]}: kernel, CPU, cores, sysctls or backend differ).", ""]
               if res.env_classes[0] != res.env_classes[1] else []),
             "| figure | baseline | candidate | change | p | q (BH) | min effect | verdict |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    for v in res.verdicts:
        word = "**regression**" if v.regression else ("improvement" if v.improvement else "same")
        lines.append(f"| {v.name} | {_num(v.base_median)} {v.unit} (n={v.n_base}) | {_num(v.cand_median)} {v.unit} "
                     f"(n={v.n_cand}) | {_pct(v.change)} | {v.p_value:.3g} | {v.q_value:.3g} "
                     f"| {v.min_effect * 100:.1f}% | {word} |")
    for m in res.missing:
        lines.append(f"| {m} | | | | | | | **not measured** |")
    lines.append("")
    return "\n".join(lines)


def junit(res: CheckResult) -> str:
    """The check as JUnit XML: one ``testsuite`` ``xferlab check``, one ``testcase`` per
    figure; a regression or a figure not measured is a ``failure`` with its figures."""
    suite = ET.Element("testsuite", name="xferlab check", tests=str(len(res.verdicts) + len(res.missing)),
                       failures=str(len(res.regressions) + len(res.missing)), errors="0")
    for v in res.verdicts:
        case = ET.SubElement(suite, "testcase", classname="xferlab.check", name=v.name)
        text = (f"baseline {_num(v.base_median)} {v.unit}, candidate {_num(v.cand_median)} {v.unit}, change "
                f"{_pct(v.change)}, p={v.p_value:.3g}, q={v.q_value:.3g}, min effect {v.min_effect * 100:.1f}%")
        if v.regression:
            ET.SubElement(case, "failure", message=f"regression: {_pct(v.change)}").text = text
        else:
            ET.SubElement(case, "system-out").text = text
    for m in res.missing:
        case = ET.SubElement(suite, "testcase", classname="xferlab.check", name=m.split(":")[0])
        ET.SubElement(case, "failure", message="not measured").text = m
    root = ET.Element("testsuites")
    root.append(suite)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
