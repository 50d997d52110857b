"""The bisect form's fields turned into a request (runner.campaign.bisect_job.BisectRequest,
validated like ``xferlab bisect``'s options), and a stored bisect as the result page shows it.
"""
from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

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


def chart_data(job: BisectJob) -> dict[str, Any]:
    """The result chart's data: one point per measured step in bisect order, ``label``
    (short SHA and role), ``median``, ``ci`` ([low, high] or None), ``verdict``; the unit
    and the figure's name."""
    req = job.request
    steps = job.steps or []
    return {"metric": req.get("metric"), "workload": req.get("workload"),
            "unit": next((s.get("unit") for s in steps if s.get("unit")), ""),
            "points": [{"label": f"{s['commit'][:10]} ({s['role']})", "commit": s["commit"], "role": s["role"],
                        "median": s["median"], "verdict": s["verdict"], "subject": s.get("subject", ""),
                        "ci": [s["ci_low"], s["ci_high"]] if s.get("ci_low") is not None else None}
                       for s in steps]}
