"""Launching a campaign: the launch form's fields turned into a spec, spec errors mapped back
to the form's fields, and queueing a parsed spec.

The form is built from the same pydantic spec the CLI uses
(:class:`runner.spec.model.CampaignSpec`): its fields are named after the spec's field
paths (``servers.0.version``, ``params.clients``...), and the errors of
:func:`runner.spec.model.parse_spec` are shown beside the field they name. Launching only
inserts the campaign and its cells (status ``queued``); ``xferlab worker`` runs them.
"""
from __future__ import annotations

from typing import Any

import yaml
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from runner.catalogue.mixed import OPS
from runner.catalogue.variants import parse_variant_text as parse_variant
from runner.spec.model import CampaignSpec, SpecError, parse_spec
from runner.spec.safe_yaml import load_yaml

SERVER_ROWS = 4
PARAM_FIELDS = ("clients", "file_size", "transfer_size", "duration", "login_mode", "passive", "op_timeout",
                "phase_timeout")
#: The parameters of the sustained workloads (``retr_sustained``, ``stor_sustained``:
#: runner.catalogue.workloads.WorkloadParams): session reuse, open-loop rate, the rate R of
#: "users at rate R".
SUSTAINED_FIELDS = ("session", "rate", "user_rate")
#: The capacity search's fields (runner.spec.capacity.CapacitySpec): a search is asked for
#: when ``user_rate`` is given.
CAPACITY_FIELDS = ("user_rate", "p99_ms", "min_jain", "start", "max_users", "resolution")
#: The capacity search's yes/no fields (select ``on``/``off``; blank or ``on``: the spec's default, true).
CAPACITY_FLAGS = ("check_rate", "confirm")
#: The ``mixed`` workload's scalar parameters (runner.catalogue.workloads.WorkloadParams):
#: session length (K operations, T seconds), think time, seed, listing directory size.
MIXED_FIELDS = ("session_ops", "session_seconds", "think", "think_ms", "seed", "dir_entries")
#: The operations of a session and their labels on the form (runner.catalogue.mixed.OPS order).
MIX_OPS: tuple[tuple[str, str], ...] = tuple(zip(OPS, ("RETR", "STOR", "LIST", "MLSD", "CWD", "SIZE", "MDTM",
                                                       "DELE", "REST+RETR", "NOOP"), strict=True))
#: The fields of each kind of size distribution (runner.catalogue.mixed.SizeDist) the form
#: sends; the other kinds' fields, hidden on the page, are left out of the spec.
SIZE_KIND_FIELDS: dict[str, tuple[str, ...]] = {"fixed": ("size",), "uniform": ("min", "max", "files"),
                                                "log2": ("min", "max", "files"), "buckets": (),
                                                "storm": ("size", "count")}
#: Rows of (size, weight) of a ``buckets`` size distribution on the form.
BUCKET_ROWS = 6
#: Rows of shaped links (rate, delay, loss, queue and its discipline) on the form, beside the loopback box.
LINK_ROWS = 2
LINK_PARTS = ("rate", "delay", "loss", "queue", "qdisc")


def _split(text: str) -> list[str]:
    """The items of a comma- or space-separated form field, stripped, empty ones dropped."""
    return [x for x in text.replace(",", " ").split() if x]


def _sweep(text: str) -> list[int | str]:
    """The client counts of the sweep field: each item as an int when it is decimal digits,
    else as given (the spec's validation names it: runner.spec.workloads.check_sweep)."""
    return [int(x) if x.isdecimal() and len(x) <= 9 else x for x in _split(text)]


def _mixed_params(form: dict[str, str], errors: dict[str, str]) -> dict[str, Any]:
    """The ``mixed`` workload's parameters from the form, as typed text (the spec model converts
    and bounds them): the scalars of :data:`MIXED_FIELDS` given; ``mix``, the weights given
    (an operation left blank weighs 0; every weight blank: the default mix, no ``mix`` key);
    ``sizes``, when a kind is chosen: ``kind``, that kind's fields of :data:`SIZE_KIND_FIELDS`
    given and, for ``buckets``, ``{size text: weight text}`` of the rows with a value. A
    bucket row with a weight but no size, or a size written twice, is put in ``errors``
    under ``params.sizes.buckets``."""
    params: dict[str, Any] = {}
    for f in MIXED_FIELDS:
        v = form.get(f"params.{f}", "").strip()
        if v:
            params[f] = v
    mix = {op: form[f"params.mix.{op}"].strip() for op in OPS if form.get(f"params.mix.{op}", "").strip()}
    if mix:
        params["mix"] = mix
    kind = form.get("params.sizes.kind", "").strip()
    if not kind:
        return params
    sizes: dict[str, Any] = {"kind": kind}
    for f in SIZE_KIND_FIELDS.get(kind, ()):
        v = form.get(f"params.sizes.{f}", "").strip()
        if v:
            sizes[f] = v
    if kind == "buckets":
        buckets: dict[str, str] = {}
        for i in range(BUCKET_ROWS):
            size = form.get(f"params.sizes.buckets.{i}.size", "").strip()
            weight = form.get(f"params.sizes.buckets.{i}.weight", "").strip()
            if not size and weight:
                errors.setdefault("params.sizes.buckets", f"bucket {i + 1}: give its size (e.g. 4K, 1M)")
            elif size in buckets:
                errors.setdefault("params.sizes.buckets", f"bucket {i + 1}: size {size} is given twice")
            elif size:
                buckets[size] = weight
        sizes["buckets"] = buckets
    params["sizes"] = sizes
    return params


def _links(form: dict[str, str]) -> list[Any] | None:
    """The spec's ``link`` list from the loopback box and the shaped-link rows: each row
    with a value is a mapping ``{rate, delay, loss, queue, qdisc}`` (validated by runner.net.conditions
    through the spec), after ``loopback`` when the box is ticked. None (the spec's default,
    loopback alone) without a shaped link."""
    shaped = []
    for i in range(LINK_ROWS):
        row = {k: form.get(f"link.{i}.{k}", "").strip() for k in LINK_PARTS}
        if any(row.values()):
            shaped.append({k: v for k, v in row.items() if v})
    if not shaped:
        return None
    return (["loopback"] if form.get("link.loopback") == "on" else []) + shaped


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
    for f in PARAM_FIELDS + SUSTAINED_FIELDS:
        v = form.get(f"params.{f}", "").strip()
        if v:
            params[f] = v
    if "mixed" in workloads:  # the mixed fields are shown, and sent, for the mixed workload only
        params.update(_mixed_params(form, errors))
    sweep = _sweep(form.get("sweep", ""))
    capacity: dict[str, Any] = {f: form[f"capacity.{f}"].strip() for f in CAPACITY_FIELDS
                                if form.get(f"capacity.{f}", "").strip()}
    if capacity:
        for f in CAPACITY_FLAGS:
            flag = form.get(f"capacity.{f}", "on").strip()
            if flag != "on":
                capacity[f] = False if flag == "off" else flag  # anything else: the model names it
    wl: list[dict[str, Any]] = []
    for w in workloads:
        entry: dict[str, Any] = {"preset": w.split(":", 1)[1]} if w.startswith("preset:") else {"name": w}
        entry["params"] = params
        if sweep:
            entry["sweep"] = sweep
        if capacity:
            entry["capacity"] = capacity
        wl.append(entry)
    spec: dict[str, Any] = {"name": form.get("name", "").strip() or "campaign", "servers": servers, "workloads": wl,
                            "backend": form.get("backend", "auto"), "warmup": form.get("warmup") == "on"}
    for f in ("repeats", "max_clients"):
        if form.get(f, "").strip():
            spec[f] = form[f].strip()
    storage = [k.strip() for k in form.get("storage", "").split(",") if k.strip()]
    if storage:
        spec["storage"] = storage
    link = _links(form)
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


def field_of(path: str, rows: list[int], msg: str = "") -> str:
    """The form field a spec error path belongs to (``workloads.0.params.clients`` ->
    ``params.clients``; ``workloads.0.capacity.p99_ms`` -> ``capacity.p99_ms``; an entry's
    own error whose message ``msg`` is about its capacity search -> ``capacity``;
    ``servers.1.variant.x`` -> ``servers.<row>.variant``); ``""`` when none."""
    parts = path.split(".")
    if parts[0] == "workloads":
        if len(parts) >= 4 and parts[2] == "params":
            return _param_field(parts[3:], msg)
        if len(parts) == 3 and parts[2] == "params" and "think" in msg:
            return "params.think"
        if len(parts) >= 3 and parts[2] == "sweep":
            return "sweep"
        if len(parts) >= 3 and parts[2] == "capacity":
            known = len(parts) >= 4 and parts[3] in CAPACITY_FIELDS + CAPACITY_FLAGS
            return f"capacity.{parts[3]}" if known else "capacity"
        if "capacity" in msg:
            return "capacity"
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


def _param_field(parts: list[str], msg: str) -> str:
    """The form field of an error at ``workloads.N.params.<parts>``: ``mix`` and ``mix.<op>``
    as they are; ``sizes.buckets...`` (a bucket's size or weight) and an error of the whole
    distribution about its buckets -> ``params.sizes.buckets``; ``sizes.<field>``; another
    error of the whole distribution -> ``params.sizes``; else ``params.<parts[0]>``."""
    if parts[0] == "mix":
        return "params." + ".".join(parts[:2])
    if parts[0] == "sizes":
        if len(parts) >= 2 and parts[1] == "buckets" or len(parts) == 1 and "buckets" in msg:
            return "params.sizes.buckets"
        return "params." + ".".join(parts[:2])
    return f"params.{parts[0]}"


def field_message(path: str, msg: str) -> str:
    """The message shown beside a form field for the spec error ``(path, msg)``: a sweep
    item's error names the item (``workloads.0.sweep.2`` -> ``client count 3: ...``), as
    the form has one field for the whole list; so does a size bucket's weight
    (``workloads.0.params.sizes.buckets.4096`` -> ``bucket of 4096 bytes: ...``); any other
    message as it is."""
    parts = path.split(".")
    if len(parts) == 4 and parts[0] == "workloads" and parts[2] == "sweep" and parts[3].isdigit():
        return f"client count {int(parts[3]) + 1}: {msg}"
    if len(parts) == 6 and parts[0] == "workloads" and parts[2:5] == ["params", "sizes", "buckets"]:
        return f"bucket of {parts[5]} bytes: {msg}"
    return msg


def queue(session: Session, spec: CampaignSpec) -> tuple[int, int]:
    """Insert the campaign and its cells as ``queued``; commits; returns ``(campaign id,
    cells_total)``. The backend stays as the spec says (``auto`` is resolved by the worker).

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
    return camp.id, camp.cells_total


def spec_from_text(text: str, source: str) -> CampaignSpec:
    """The spec in YAML ``text`` (bounded against alias and merge-key bombs:
    runner.spec.safe_yaml.load_yaml), validated. Raises SpecError, also for text that is not YAML."""
    try:
        data = load_yaml(text)
    except yaml.YAMLError as exc:
        raise SpecError([("", f"not valid YAML: {exc}")], source) from None
    return parse_spec(data, source, from_dashboard=True)


def _parse_and_queue(session: Session, data: Any, text: str | None, source: str) -> tuple[int, int]:
    """Parse (YAML ``text`` when given, else the decoded ``data``), validate and queue.
    Returns ``(campaign id, cells_total)``; raises SpecError."""
    return queue(session, spec_from_text(text, source) if text is not None
                 else parse_spec(data, source, from_dashboard=True))


async def launch_in_thread(session: Session, *, data: Any = None, text: str | None = None,
                           source: str = "body") -> tuple[int, int]:
    """:func:`_parse_and_queue` in the threadpool, so that parsing, expanding and inserting a
    large campaign never blocks the event loop (other requests are answered meanwhile).
    Returns ``(campaign id, cells_total)``; raises SpecError."""
    return await run_in_threadpool(_parse_and_queue, session, data, text, source)
