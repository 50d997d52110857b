"""The launch form (``/launch``): queue a campaign from the form's fields, a built-in preset,
or an uploaded YAML spec; a spec error is shown beside the field it names."""
from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile

from dashboard.deps import SessionDep
from dashboard.security import TokenRequired
from dashboard.services.launch import (
    BUCKET_ROWS,
    LINK_ROWS,
    MIX_OPS,
    PARAM_FIELDS,
    SERVER_ROWS,
    SIZE_KIND_FIELDS,
    field_message,
    field_of,
    form_to_spec,
    launch_in_thread,
)
from dashboard.templating import render
from runner.catalogue.mixed import default_mix
from runner.catalogue.servers import SERVER_NAMES
from runner.catalogue.workloads import WORKLOADS, WorkloadParams
from runner.spec.model import PRESETS, SpecError, parse_spec
from runner.spec.workloads import capacity_ready

router = APIRouter(prefix="/launch")


def _workload_tags(name: str) -> str:
    """The space-separated tags of workload ``name`` that show the form's parts for it
    (dashboard/static/app.js, ``launchDisclosure``): ``sustained`` (session reuse),
    ``openloop`` (it takes an open-loop ``rate`` and the user rate R), ``capacity`` (it can be
    a capacity search's profile: runner.spec.workloads.capacity_ready) and ``mixed``."""
    w = WORKLOADS[name]
    tags = [t for t, on in (("sustained", w.sustained), ("openloop", "rate" in w.uses),
                            ("capacity", capacity_ready(name)), ("mixed", name == "mixed")) if on]
    return " ".join(tags)


def _first_values() -> dict[str, str]:
    """The fields of a fresh form: a one-server classic campaign on loopback, and the default
    operation weights of a mixed session (runner.catalogue.mixed.default_mix) written out."""
    values = {"name": "campaign", "repeats": "5", "backend": "auto", "warmup": "on", "servers.0.name": "pyftpdlib",
              "servers.0.version": "2.2.0", "link.loopback": "on"}
    values.update({f"params.mix.{op}": f"{w:g}" for op, w in default_mix().weights().items() if w})
    return values


def _form_context(values: dict[str, str] | None = None, workloads: list[str] | None = None,
                  errors: dict[str, str] | None = None, general: list[str] | None = None,
                  yaml_error: str | None = None, preset_error: str | None = None) -> dict[str, Any]:
    from runner.spec.presets import preset_facts, preset_names, preset_summary

    defaults = WorkloadParams()
    values = values if values is not None else _first_values()
    return {"values": values, "workloads_checked": workloads if workloads is not None else ["preset:classic"],
            "errors": errors or {}, "general": general or [], "yaml_error": yaml_error,
            "server_names": [n for n in SERVER_NAMES if n != "external"], "server_rows": range(SERVER_ROWS),
            "workloads": [(n, w.generic_title(), w.sustained, _workload_tags(n)) for n, w in WORKLOADS.items()],
            "presets": {p: ", ".join(names) for p, names in PRESETS.items()},
            "campaign_presets": [(n, preset_summary(n), preset_facts(n)) for n in preset_names()],
            "preset_error": preset_error, "param_fields": PARAM_FIELDS, "link_rows": range(LINK_ROWS),
            "defaults": defaults.model_dump(), "mix_ops": MIX_OPS, "size_kinds": SIZE_KIND_FIELDS,
            "bucket_rows": range(BUCKET_ROWS)}


def _refused(request: Request, **problem: Any):
    """The form again, status 422, with ``problem`` (``preset_error=`` or ``yaml_error=``)."""
    return render(request, "launch.html", status_code=422, **_form_context(**problem))


def _to_campaign(cid: int) -> RedirectResponse:
    return RedirectResponse(f"/campaigns/{cid}", status_code=303)


@router.get("")
def page_launch(request: Request):
    return render(request, "launch.html", **_form_context())


@router.post("", dependencies=[TokenRequired])
async def page_launch_post(request: Request, session: SessionDep):
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
            await run_in_threadpool(parse_spec, spec_dict, "form", from_dashboard=True)
    except SpecError as exc:
        for path, msg in exc.errors:
            f = field_of(path, rows, msg)
            if f:
                errors.setdefault(f, field_message(path, msg))
            else:
                general.append(f"{path}: {msg}" if path else msg)
    if errors or general or cid is None:
        return render(request, "launch.html", status_code=422,
                      **_form_context(values, workloads, errors, general or ["fix the fields marked below"]))
    return _to_campaign(cid)


@router.post("/preset", dependencies=[TokenRequired])
async def page_launch_preset(request: Request, session: SessionDep):
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
        return _refused(request, preset_error=str(exc))
    for key in ("repeats", "backend"):
        value = str(form.get(key, "")).strip()
        if value:
            data[key] = value
            if key == "repeats" and value != "auto":
                data["max_repeats"] = None  # a fixed number replaces the preset's adaptive repeats
    try:
        cid, _ = await launch_in_thread(session, data=data, source=f"preset {name}")
    except SpecError as exc:
        return _refused(request, preset_error=str(exc))
    return _to_campaign(cid)


@router.post("/yaml", dependencies=[TokenRequired])
async def page_launch_yaml(request: Request, session: SessionDep):
    # The body is parsed here, after require_token (token, Content-Length, CSRF): declaring
    # ``file: UploadFile`` would make FastAPI read the whole upload before any check.
    form = await request.form(max_files=1, max_fields=20)
    file = form.get("file")
    if not isinstance(file, UploadFile):
        return _refused(request, yaml_error="no file: choose a YAML spec file to upload (form field 'file')")
    raw = await file.read()
    source = file.filename or "upload"
    try:
        cid, _ = await launch_in_thread(session, text=raw.decode("utf-8", errors="replace"), source=source)
    except SpecError as exc:
        return _refused(request, yaml_error=str(exc))
    return _to_campaign(cid)
