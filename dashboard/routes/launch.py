"""Launch: queue a campaign from the web form, a YAML upload, or the JSON API.

The form is built from the same pydantic spec the CLI uses
(:class:`runner.spec.CampaignSpec`): its fields are named after the spec's field
paths (``servers.0.version``, ``params.clients``...), and the errors of
:func:`runner.spec.parse_spec` are shown beside the field they name. Launching only
inserts the campaign and its cells (status ``queued``); ``xferlab worker`` runs them.
Also the login page, which stores the token in an HTTP-only cookie.
"""
from __future__ import annotations

import hmac
import json
from typing import Any

import yaml
from fastapi import APIRouter, Depends, Form, HTTPException, Request, UploadFile
from fastapi.responses import JSONResponse, RedirectResponse
from sqlalchemy.orm import Session

from dashboard.deps import TOKEN_COOKIE, get_session, get_settings, render, require_read, require_token
from runner.backends.variants import parse_variant_text as parse_variant
from runner.load.workloads import WORKLOADS, WorkloadParams
from runner.spec import PRESETS, SERVER_NAMES, CampaignSpec, SpecError, parse_spec

router = APIRouter()

SERVER_ROWS = 4
PARAM_FIELDS = ("clients", "file_size", "transfer_size", "duration", "login_mode", "passive", "op_timeout",
                "phase_timeout")
MAX_UPLOAD = 256 * 1024


def form_to_spec(form: dict[str, str], workloads: list[str]) -> tuple[dict[str, Any], dict[str, str], list[int]]:
    """Turn the form's fields into a spec dict.

    Returns ``(spec dict, field errors found while converting, form row of each spec server)``."""
    errors: dict[str, str] = {}
    servers, rows = [], []
    for i in range(SERVER_ROWS):
        name = form.get(f"servers.{i}.name", "").strip()
        if not name:
            continue
        s: dict[str, Any] = {"name": name}
        if form.get(f"servers.{i}.version", "").strip():
            s["version"] = form[f"servers.{i}.version"].strip()
        if form.get(f"servers.{i}.label", "").strip():
            s["label"] = form[f"servers.{i}.label"].strip()
        try:
            v = parse_variant(form.get(f"servers.{i}.variant", ""))
            if v:
                s["variant"] = v
        except ValueError as exc:
            errors[f"servers.{i}.variant"] = str(exc)
        servers.append(s)
        rows.append(i)
    params: dict[str, Any] = {}
    for f in PARAM_FIELDS:
        v = form.get(f"params.{f}", "").strip()
        if v:
            params[f] = v
    wl: list[dict[str, Any]] = []
    for w in workloads:
        if w.startswith("preset:"):
            wl.append({"preset": w.split(":", 1)[1], "params": params})
        else:
            wl.append({"name": w, "params": params})
    spec: dict[str, Any] = {"name": form.get("name", "").strip() or "campaign", "servers": servers, "workloads": wl,
                            "backend": form.get("backend", "auto"), "warmup": form.get("warmup") == "on"}
    for f in ("repeats", "max_clients"):
        if form.get(f, "").strip():
            spec[f] = form[f].strip()
    storage = [k.strip() for k in form.get("storage", "").split(",") if k.strip()]
    if storage:
        spec["storage"] = storage
    pin = {}
    for f in ("server", "client"):
        text = form.get(f"pinning.{f}", "").strip()
        if text:
            try:
                pin[f] = [int(x) for x in text.replace(" ", ",").split(",") if x]
            except ValueError:
                errors[f"pinning.{f}"] = "CPU numbers separated by commas, e.g. 0 or 0,1"
    if pin:
        spec["pinning"] = pin
    return spec, errors, rows


def field_of(path: str, rows: list[int]) -> str:
    """The form field a spec error path belongs to (``workloads.0.params.clients`` ->
    ``params.clients``; ``servers.1.variant.x`` -> ``servers.<row>.variant``); ``""`` when none."""
    parts = path.split(".")
    if parts[0] == "workloads":
        if len(parts) >= 4 and parts[2] == "params":
            return f"params.{parts[3]}"
        return "workloads"
    if parts[0] == "servers":
        if len(parts) >= 2 and parts[1].isdigit() and int(parts[1]) < len(rows):
            row = rows[int(parts[1])]
            sub = parts[2] if len(parts) > 2 else "name"
            if sub not in ("name", "version", "variant", "label"):
                sub = "name"
            return f"servers.{row}.{sub}"
        return "servers"
    if parts[0] == "pinning" and len(parts) >= 2:
        return f"pinning.{parts[1]}"
    if parts[0] in ("name", "repeats", "backend", "max_clients", "warmup", "storage"):
        return parts[0]
    return ""


def queue(session: Session, spec: CampaignSpec) -> int:
    """Insert the campaign and its cells as ``queued``; commits; returns the campaign id.
    The backend stays as the spec says (``auto`` is resolved by the worker)."""
    from runner.store import campaigns as crud

    camp = crud.create_campaign(session, spec=spec, backend=spec.backend)
    session.commit()
    return camp.id


def _form_context(values: dict[str, str] | None = None, workloads: list[str] | None = None,
                  errors: dict[str, str] | None = None, general: list[str] | None = None,
                  yaml_error: str | None = None) -> dict[str, Any]:
    defaults = WorkloadParams()
    values = values if values is not None else {"name": "campaign", "repeats": "5", "backend": "auto",
                                                "warmup": "on", "servers.0.name": "pyftpdlib",
                                                "servers.0.version": "2.2.0"}
    return {"values": values, "workloads_checked": workloads if workloads is not None else ["preset:classic"],
            "errors": errors or {}, "general": general or [], "yaml_error": yaml_error,
            "server_names": [n for n in SERVER_NAMES if n != "external"], "server_rows": range(SERVER_ROWS),
            "workloads": [(n, w.title.format(clients="N", size="SIZE")) for n, w in WORKLOADS.items()], "presets": list(PRESETS),
            "param_fields": PARAM_FIELDS, "defaults": defaults.model_dump()}


@router.get("/launch", include_in_schema=False, dependencies=[Depends(require_read)])
def page_launch(request: Request):
    return render(request, "launch.html", **_form_context())


@router.post("/launch", include_in_schema=False, dependencies=[Depends(require_token)])
async def page_launch_post(request: Request, session: Session = Depends(get_session)):
    form = await request.form()
    values = {k: str(v) for k, v in form.items() if isinstance(v, str)}
    workloads = [str(w) for w in form.getlist("workloads")]
    spec_dict, errors, rows = form_to_spec(values, workloads)
    general: list[str] = []
    if not workloads:
        errors["workloads"] = "choose at least one workload or preset"
    if not rows:
        errors["servers"] = "choose at least one server"
    spec = None
    try:
        spec = parse_spec(spec_dict, "form")
    except SpecError as exc:
        for path, msg in exc.errors:
            f = field_of(path, rows)
            if f:
                errors.setdefault(f, msg)
            else:
                general.append(f"{path}: {msg}" if path else msg)
    if errors or general or spec is None:
        return render(request, "launch.html", status_code=422,
                      **_form_context(values, workloads, errors, general or ["fix the fields marked below"]))
    cid = queue(session, spec)
    return RedirectResponse(f"/campaigns/{cid}", status_code=303)


def _spec_from_text(text: str, source: str) -> CampaignSpec:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise SpecError([("", f"not valid YAML: {exc}")], source) from None
    return parse_spec(data, source)


@router.post("/launch/yaml", include_in_schema=False, dependencies=[Depends(require_token)])
async def page_launch_yaml(request: Request, file: UploadFile, session: Session = Depends(get_session)):
    raw = await file.read(MAX_UPLOAD + 1)
    try:
        if len(raw) > MAX_UPLOAD:
            raise SpecError([("", f"file larger than {MAX_UPLOAD // 1024} KiB")], file.filename or "upload")
        spec = _spec_from_text(raw.decode("utf-8", errors="replace"), file.filename or "upload")
    except SpecError as exc:
        return render(request, "launch.html", status_code=422, **_form_context(yaml_error=str(exc)))
    cid = queue(session, spec)
    return RedirectResponse(f"/campaigns/{cid}", status_code=303)


@router.post("/api/campaigns", status_code=201, tags=["campaigns"], dependencies=[Depends(require_token)],
             openapi_extra={"requestBody": {"required": True, "content": {
                 "application/json": {"schema": CampaignSpec.model_json_schema(ref_template="#/components/schemas/{model}")},
                 "application/yaml": {"schema": {"type": "string"}}}}})
async def api_launch(request: Request, session: Session = Depends(get_session)):
    """Queue a campaign. Body: the spec as JSON (``application/json``) or YAML
    (``application/yaml`` / ``text/yaml``), the same spec as ``xferlab run SPEC``.
    Returns 201 ``{"id", "url", "cells_total"}``; 422 ``{"detail", "errors": [{"field", "message"}]}``
    for an invalid spec. Needs the token."""
    body = await request.body()
    if len(body) > MAX_UPLOAD:
        raise HTTPException(413, f"spec larger than {MAX_UPLOAD // 1024} KiB")
    ctype = request.headers.get("content-type", "application/json").split(";")[0].strip().lower()
    try:
        if "yaml" in ctype:
            spec = _spec_from_text(body.decode("utf-8", errors="replace"), "body")
        else:
            try:
                data = json.loads(body or b"null")
            except ValueError as exc:
                raise SpecError([("", f"not valid JSON: {exc}")], "body") from None
            spec = parse_spec(data, "body")
    except SpecError as exc:
        return JSONResponse({"detail": str(exc), "errors": [{"field": p, "message": m} for p, m in exc.errors]},
                            status_code=422)
    cid = queue(session, spec)
    from runner.store.models import Campaign

    return {"id": cid, "url": f"/campaigns/{cid}", "cells_total": session.get(Campaign, cid).cells_total}


# -- login ---------------------------------------------------------------------

@router.get("/login", include_in_schema=False)
def page_login(request: Request, next: str = "/"):
    return render(request, "login.html", next=next if next.startswith("/") else "/", error=None)


@router.post("/login", include_in_schema=False)
def page_login_post(request: Request, token: str = Form(..., max_length=500), next: str = Form("/")):
    configured = get_settings(request).api_token
    target = next if next.startswith("/") and not next.startswith("//") else "/"
    if not configured:
        return render(request, "login.html", status_code=403, next=target,
                      error="no token is configured: start the dashboard with XFERLAB_API_TOKEN set")
    if not hmac.compare_digest(token.encode(), configured.encode()):
        return render(request, "login.html", status_code=401, next=target, error="wrong token")
    resp = RedirectResponse(target, status_code=303)
    resp.set_cookie(TOKEN_COOKIE, token, httponly=True, samesite="strict", max_age=30 * 24 * 3600)
    return resp


@router.post("/logout", include_in_schema=False)
def page_logout():
    resp = RedirectResponse("/", status_code=303)
    resp.delete_cookie(TOKEN_COOKIE)
    return resp
