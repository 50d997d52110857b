"""Launch: queue a campaign from the web form, a YAML upload, or the JSON API.

The form is built from the same pydantic spec the CLI uses
(:class:`runner.spec.model.CampaignSpec`): its fields are named after the spec's field
paths (``servers.0.version``, ``params.clients``...), and the errors of
:func:`runner.spec.model.parse_spec` are shown beside the field they name. Launching only
inserts the campaign and its cells (status ``queued``); ``xferlab worker`` runs them.
Also the login page, which stores the token in an HTTP-only cookie.
"""
from __future__ import annotations

import hmac
import json
from typing import Any

import yaml
from fastapi import APIRouter, Depends, Form, HTTPException, Request
from fastapi.responses import JSONResponse, RedirectResponse
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile

from dashboard.deps import (
    TOKEN_COOKIE,
    check_csrf,
    get_session,
    get_settings,
    render,
    require_read,
    require_token,
    same_origin,
    token_ok,
)
from runner.catalogue.servers import SERVER_NAMES
from runner.catalogue.variants import parse_variant_text as parse_variant
from runner.catalogue.workloads import WORKLOADS, WorkloadParams
from runner.spec.model import PRESETS, CampaignSpec, SpecError, parse_spec
from runner.spec.safe_yaml import load_yaml

router = APIRouter()

SERVER_ROWS = 4
PARAM_FIELDS = ("clients", "file_size", "transfer_size", "duration", "login_mode", "passive", "op_timeout",
                "phase_timeout")
# Content types the JSON API parses (anything else is 415: a cross-site "simple" request can
# only send text/plain, multipart/form-data, application/x-www-form-urlencoded or none)
JSON_TYPES = ("application/json",)
YAML_TYPES = ("application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml")


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
            variant = parse_variant(form.get(f"servers.{i}.variant", ""))
            if variant:
                s["variant"] = variant
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
    link = [k.strip() for k in form.get("link", "").split(",") if k.strip()]
    if link:
        spec["link"] = link
    tls = [k.strip() for k in form.get("tls", "").split(",") if k.strip()]
    if tls:
        spec["tls"] = tls
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
    if parts[0] in ("name", "repeats", "backend", "max_clients", "warmup", "storage", "link", "tls"):
        return parts[0]
    return ""


def queue(session: Session, spec: CampaignSpec) -> int:
    """Insert the campaign and its cells as ``queued``; commits; returns the campaign id.
    The backend stays as the spec says (``auto`` is resolved by the worker).

    Blocking (expanding and inserting thousands of cells takes seconds): the routes call it
    through :func:`launch_in_thread`. Raises SpecError when the expansion refuses the spec
    (e.g. more cells than the runner's bound); nothing is stored then."""
    from runner.store import campaigns as crud

    try:
        camp = crud.create_campaign(session, spec=spec, backend=spec.backend)
    except SpecError:
        session.rollback()
        raise
    session.commit()
    return camp.id


def _parse_and_queue(session: Session, data: Any, text: str | None, source: str) -> tuple[int, int]:
    """Parse (YAML ``text`` when given, else the decoded ``data``), validate and queue.
    Returns ``(campaign id, cells_total)``; raises SpecError."""
    from runner.store.models import Campaign

    spec = _spec_from_text(text, source) if text is not None else parse_spec(data, source)
    cid = queue(session, spec)
    camp = session.get(Campaign, cid)
    assert camp is not None  # queue() just stored it in this session
    return cid, camp.cells_total


async def launch_in_thread(session: Session, *, data: Any = None, text: str | None = None,
                           source: str = "body") -> tuple[int, int]:
    """:func:`_parse_and_queue` in the threadpool, so that parsing, expanding and inserting a
    large campaign never blocks the event loop (other requests are answered meanwhile).
    Returns ``(campaign id, cells_total)``; raises SpecError."""
    return await run_in_threadpool(_parse_and_queue, session, data, text, source)


def _form_context(values: dict[str, str] | None = None, workloads: list[str] | None = None,
                  errors: dict[str, str] | None = None, general: list[str] | None = None,
                  yaml_error: str | None = None, preset_error: str | None = None) -> dict[str, Any]:
    from runner.spec.presets import preset_names

    defaults = WorkloadParams()
    values = values if values is not None else {"name": "campaign", "repeats": "5", "backend": "auto",
                                                "warmup": "on", "servers.0.name": "pyftpdlib",
                                                "servers.0.version": "2.2.0"}
    return {"values": values, "workloads_checked": workloads if workloads is not None else ["preset:classic"],
            "errors": errors or {}, "general": general or [], "yaml_error": yaml_error,
            "server_names": [n for n in SERVER_NAMES if n != "external"], "server_rows": range(SERVER_ROWS),
            "workloads": [(n, w.generic_title()) for n, w in WORKLOADS.items()],
            "presets": list(PRESETS), "campaign_presets": preset_names(), "preset_error": preset_error,
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
    cid = None
    try:
        if not errors:
            cid, _ = await launch_in_thread(session, data=spec_dict, source="form")
        else:  # still validate, to show every problem at once
            await run_in_threadpool(parse_spec, spec_dict, "form")
    except SpecError as exc:
        for path, msg in exc.errors:
            f = field_of(path, rows)
            if f:
                errors.setdefault(f, msg)
            else:
                general.append(f"{path}: {msg}" if path else msg)
    if errors or general or cid is None:
        return render(request, "launch.html", status_code=422,
                      **_form_context(values, workloads, errors, general or ["fix the fields marked below"]))
    return RedirectResponse(f"/campaigns/{cid}", status_code=303)


def _spec_from_text(text: str, source: str) -> CampaignSpec:
    try:
        data = load_yaml(text)  # bounded against alias and merge-key bombs
    except yaml.YAMLError as exc:
        raise SpecError([("", f"not valid YAML: {exc}")], source) from None
    return parse_spec(data, source)


@router.post("/launch/preset", include_in_schema=False, dependencies=[Depends(require_token)])
async def page_launch_preset(request: Request, session: Session = Depends(get_session)):
    """Queue a built-in campaign preset (runner/spec/preset_specs/, as ``xferlab run --preset NAME``),
    with optional ``repeats`` (N or auto) and ``backend`` (auto, local, docker) replacing
    the preset's. 303 to the campaign; 422 with the reason for an unknown preset or a bad
    value."""
    from runner.spec.presets import preset_data

    form = await request.form(max_files=0, max_fields=10)
    name = str(form.get("preset", ""))
    try:
        data = preset_data(name)
    except LookupError as exc:
        return render(request, "launch.html", status_code=422, **_form_context(preset_error=str(exc)))
    for key in ("repeats", "backend"):
        value = str(form.get(key, "")).strip()
        if value:
            data[key] = value
            if key == "repeats" and value != "auto":
                data["max_repeats"] = None  # a fixed number replaces the preset's adaptive repeats
    try:
        cid, _ = await launch_in_thread(session, data=data, source=f"preset {name}")
    except SpecError as exc:
        return render(request, "launch.html", status_code=422, **_form_context(preset_error=str(exc)))
    return RedirectResponse(f"/campaigns/{cid}", status_code=303)


@router.post("/launch/yaml", include_in_schema=False, dependencies=[Depends(require_token)])
async def page_launch_yaml(request: Request, session: Session = Depends(get_session)):
    # The body is parsed here, after require_token (token, Content-Length, CSRF): declaring
    # ``file: UploadFile`` would make FastAPI read the whole upload before any check.
    form = await request.form(max_files=1, max_fields=20)
    file = form.get("file")
    if not isinstance(file, UploadFile):
        return render(request, "launch.html", status_code=422,
                      **_form_context(yaml_error="no file: choose a YAML spec file to upload (form field 'file')"))
    raw = await file.read()
    source = file.filename or "upload"
    try:
        cid, _ = await launch_in_thread(session, text=raw.decode("utf-8", errors="replace"), source=source)
    except SpecError as exc:
        return render(request, "launch.html", status_code=422, **_form_context(yaml_error=str(exc)))
    return RedirectResponse(f"/campaigns/{cid}", status_code=303)


@router.post("/api/campaigns", status_code=201, tags=["campaigns"], dependencies=[Depends(require_token)],
             openapi_extra={"requestBody": {"required": True, "content": {
                 "application/json": {
                     "schema": CampaignSpec.model_json_schema(ref_template="#/components/schemas/{model}")},
                 "application/yaml": {"schema": {"type": "string"}}}}})
async def api_launch(request: Request, session: Session = Depends(get_session)):
    """Queue a campaign. Body: the spec as JSON (``application/json``) or YAML
    (``application/yaml``, ``application/x-yaml``, ``text/yaml``), the same spec as
    ``xferlab run SPEC``. Returns 201 ``{"id", "url", "cells_total"}``; 415 for any other
    ``Content-Type`` (``text/plain`` included: cross-site forms can send it); 413 for a body
    over the limit; 422 ``{"detail", "errors": [{"field", "message"}]}`` for an invalid spec
    (the cell bound included). Needs the token."""
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype not in JSON_TYPES + YAML_TYPES:
        raise HTTPException(415, f"Content-Type {ctype or '(none)'!r} is not accepted: send the spec as "
                                 "application/json or application/yaml")
    body = await request.body()
    try:
        if ctype in YAML_TYPES:
            cid, cells = await launch_in_thread(session, text=body.decode("utf-8", errors="replace"))
        else:
            try:
                data = json.loads(body or b"null")
            except ValueError as exc:
                raise SpecError([("", f"not valid JSON: {exc}")], "body") from None
            except RecursionError:  # e.g. 100,000 nested "[": under the body limit, past json's recursion
                raise SpecError([("", "not valid JSON: nested too deeply")], "body") from None
            cid, cells = await launch_in_thread(session, data=data)
    except SpecError as exc:
        return JSONResponse({"detail": str(exc), "errors": [{"field": p, "message": m} for p, m in exc.errors]},
                            status_code=422)
    return {"id": cid, "url": f"/campaigns/{cid}", "cells_total": cells}


# -- login ---------------------------------------------------------------------

@router.get("/login", include_in_schema=False)
def page_login(request: Request, next: str = "/"):
    return render(request, "login.html", next=next if next.startswith("/") else "/", error=None)


async def _login_origin(request: Request) -> None:
    """Login CSRF: a browser's cross-site POST of the login form is refused (403)."""
    if not same_origin(request):
        raise HTTPException(403, "cross-site request refused: the Origin of this form is not the dashboard's")


@router.post("/login", include_in_schema=False, dependencies=[Depends(_login_origin)])
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


async def _logout_csrf(request: Request) -> None:
    if token_ok(request):
        await check_csrf(request)


@router.post("/logout", include_in_schema=False, dependencies=[Depends(_logout_csrf)])
def page_logout():
    resp = RedirectResponse("/", status_code=303)
    resp.delete_cookie(TOKEN_COOKIE)
    return resp
