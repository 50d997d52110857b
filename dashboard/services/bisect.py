"""The bisect form's fields turned into a request (runner.campaign.bisect_job.BisectRequest,
validated like ``xferlab bisect``'s options), and a stored bisect as the result page shows it.
"""
from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from runner.campaign.bisect import Step, in_repo_order
from runner.campaign.bisect_job import BisectRequest, validate
from runner.store.models import BisectJob

#: The form's workload parameter fields (runner.catalogue.workloads.WorkloadParams).
PARAM_FIELDS = ("clients", "file_size", "transfer_size", "duration", "passive", "session")
#: The form's own fields, with their defaults.
DEFAULTS = {"server": "pyftpdlib", "source": "", "good": "", "bad": "", "workload": "retr_concurrent",
            "metric": "elapsed", "repeats": "5", "max_rounds": "3", "min_effect": "5%", "backend": "auto",
            "warmup": "on"}


def _effect(text: str) -> float | str:
    """``5%`` -> 0.05, ``0.05`` -> 0.05; anything else as given (the model names it)."""
    t = text.strip()
    try:
        return float(t[:-1]) / 100 if t.endswith("%") else float(t)
    except ValueError:
        return t


def form_to_request(form: dict[str, str]) -> tuple[BisectRequest | None, dict[str, str]]:
    """The form's values as a validated request, or None and {field name: message} (the
    field names of the form: ``source``, ``good``, ``params.clients``...; ``""`` for a
    message of no field)."""
    data: dict[str, Any] = {k: form.get(k, "").strip() for k in ("server", "source", "good", "bad", "workload",
                                                                  "metric", "repeats", "max_rounds", "backend")}
    data["min_effect"] = _effect(form.get("min_effect", ""))
    data["warmup"] = form.get("warmup") == "on"
    data["params"] = {f: form[f"params.{f}"].strip() for f in PARAM_FIELDS if form.get(f"params.{f}", "").strip()}
    return validate(data)


def list_jobs(session: Session, limit: int = 50) -> list[BisectJob]:
    """The newest ``limit`` bisects, newest first."""
    return list(session.scalars(select(BisectJob).order_by(BisectJob.id.desc()).limit(limit)))


def _step(d: dict[str, Any]) -> Step:
    """A stored step (runner.campaign.bisect_job.step_json) back as a Step."""
    return Step(**{k: d[k] for k in Step.__dataclass_fields__ if k in d})


def chart_data(job: BisectJob) -> dict[str, Any]:
    """The result chart's data: the x-axis is the bisected range in the repository's order
    (``job.commits``, good end at 0, bad end at ``n - 1``; runner.campaign.bisect.repo_order),
    one point per measured step at its commit's position, sorted by it: ``x``, ``commit``,
    ``short`` (10 hex), ``role``, ``median``, ``ci`` ([low, high] or None), ``verdict``,
    ``subject``, ``campaigns``; a confirmation re-measure is a point of its own (role
    ``confirm``) at the same ``x``. ``marks``: the good end, the bad end and, once found, the
    first bad commit (``x``, ``label``, ``commit``). ``n``: commits on the axis; ``order``:
    ``repo``, or ``measured`` for a bisect stored before its range was (x: the step's
    index in the order measured). Also the figure's name and unit."""
    req = job.request
    stored = job.steps or []
    steps = [_step(d) for d in stored]
    if job.commits:
        order, commits = "repo", list(job.commits)
        placed = in_repo_order(commits, steps)
    else:
        order, commits = "measured", [st.commit for st in steps]
        placed = list(enumerate(steps))
    points = [{"x": pos, "commit": st.commit, "short": st.commit[:10], "role": st.role, "median": st.median,
               "verdict": st.verdict, "subject": st.subject, "campaigns": st.campaigns,
               "ci": [st.ci_low, st.ci_high] if st.ci_low is not None else None} for pos, st in placed]
    marks = []
    if order == "repo":
        marks += [{"x": 0, "label": "good", "commit": commits[0]},
                  {"x": len(commits) - 1, "label": "bad", "commit": commits[-1]}]
        if job.first_bad in commits:
            marks.append({"x": commits.index(job.first_bad), "label": "first bad", "commit": job.first_bad})
    return {"metric": req.get("metric"), "workload": req.get("workload"),
            "unit": next((st.unit for st in steps if st.unit), ""), "order": order, "n": len(commits),
            "points": points, "marks": marks}


def repo_positions(job: BisectJob) -> dict[str, int]:
    """Each measured commit of the bisected range -> its 1-based position in the
    repository's order (good end 1); empty for a bisect whose range is not stored yet."""
    measured = {d["commit"] for d in job.steps or []}
    return {c: i + 1 for i, c in enumerate(job.commits or []) if c in measured}
