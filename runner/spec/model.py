"""Campaign spec: the validated description of what to run, and its expansion into cells.

A spec is YAML or JSON (or a web form, or the API), validated by pydantic before
anything runs; a bad spec is rejected with the path of the bad field and why::

    name: pyftpdlib versions
    repeats: 5
    servers:
      - {name: pyftpdlib, version: "1.5.10"}
      - {name: pyftpdlib, version: "2.2.0"}
      - {name: pyftpdlib, version: "2.2.0", variant: {use_sendfile: false}}
    workloads:
      - preset: classic          # the eight benchmarks of seed 000
        params: {clients: 300, file_size: 10M}
      - name: retr
        params: {duration: 10}
    pinning: {server: [0], client: [1]}
    driver: xferlab-ftp          # what makes the load (runner.load.registry); default: per protocol

Repeats: ``repeats: N``, or ``repeats: auto`` (3 to 10, stopping when the figure is
steady: runner.campaign.repeats). Bounds: a spec expands to ``repeats x workloads x servers`` cells
(:func:`count_cells`); more than ``XFERLAB_MAX_CELLS`` (default 100,000) is refused.
YAML is read by :func:`runner.spec.safe_yaml.load_yaml`, which refuses documents whose
aliases and merge keys would expand to more than ``MAX_YAML_NODES`` nodes. Values a server would only refuse at run
time are refused here: ``max_clients`` above 1,000,000, a version for a server that
has one version per install or image, a version that is not a plain version string;
variant values outside the server's own limits (runner.catalogue.variants).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from runner.catalogue.pairing import no_valid_pair
from runner.catalogue.servers import ONE_VERSION_SERVERS, ServerName
from runner.catalogue.variants import check_variant
from runner.catalogue.workloads import WorkloadParams, params_key
from runner.load.registry import default_driver, driver_names, driver_refuses, get_driver
from runner.spec.axes import check_link_list, expand_axes
from runner.spec.external import ExternalTarget
from runner.spec.placement import HostsSpec, Pinning
from runner.spec.profile import ProfileField, ProfileSpec, resolve
from runner.spec.redaction import REDACTED, SECRET_FIELD, model_secret_values, redact_model_data  # noqa: F401  (REDACTED)
from runner.spec.request import ServerRequest
from runner.spec.safe_yaml import control_characters, load_yaml
from runner.spec.source import check_ref, check_source, source_problem
from runner.spec.workloads import PRESETS, WorkloadSpec  # noqa: F401  (PRESETS: the dashboard imports it from here)

#: A version string as pip and the image build take it (runner.backends.local.venvs): digits and
#: dots, then letters, digits, ``.``, ``_`` and ``-``; no shell metacharacter. Written with one
#: greedy class after the release part, so matching is linear: an optional separator inside a
#: starred group (``([._-]?[A-Za-z0-9]+)*``) backtracks exponentially on ``1aaaa...a!``.
VERSION_RE = re.compile(r"^[0-9]+(?:\.[0-9]+)*[A-Za-z0-9._-]*$")
#: Largest ``max_clients``: tpd's ``--max-conns`` maximum (servers/tpd/src/config.c), and below
#: the kernel's default per-process descriptor ceiling (fs.nr_open = 1,048,576).
MAX_CLIENTS = 1_000_000


class SpecError(ValueError):
    """The spec is invalid. ``errors`` lists ``(field path, message)`` pairs; ``str()`` is
    one line per error, e.g. ``servers.1.version: pyftpdlib needs a version string``."""

    def __init__(self, errors: list[tuple[str, str]], source: str = "spec"):
        self.errors = errors
        self.source = source
        super().__init__("\n".join(f"{source}: {path}: {msg}" if path else f"{source}: {msg}"
                                   for path, msg in errors))


class ServerSpec(BaseModel):
    """One server build to benchmark: name, version, variant options."""

    model_config = ConfigDict(extra="forbid")
    name: ServerName
    version: str | None = Field(None, description="version to install (pyftpdlib, twisted); None = latest/installed")
    variant: dict[str, bool | int | float | str | dict[str, int | str]] = Field(
        default_factory=dict, description="variant options (runner.catalogue.variants), e.g. use_sendfile: false")
    external: ExternalTarget | None = None
    label: str | None = Field(None, min_length=1, max_length=200,
                              description="display name; default 'name version [variant]'")
    profile: ProfileField = Field(None, description="profile this server's cells (runner.spec.profile): true, "
                                                    "false or {rate_hz, off_cpu, syscalls}; None inherits")
    source: str | None = Field(None, description="build from source (runner.spec.source): a git checkout's "
                                                 "directory or a git URL (https, ssh, file)")
    ref: str | None = Field(None, description="with source: the commit, branch or tag to build; none: the "
                                              "checkout as it is, uncommitted edits included")

    @field_validator("source")
    @classmethod
    def _source(cls, v: str | None) -> str | None:
        return None if v is None else check_source(v)

    @field_validator("ref")
    @classmethod
    def _ref(cls, v: str | None) -> str | None:
        return None if v is None else check_ref(v)

    @model_validator(mode="after")
    def _source_fits(self) -> ServerSpec:
        problem = source_problem(self.name, self.source, self.ref, self.version, self.external is not None)
        if problem:
            raise ValueError(problem)
        return self

    @field_validator("version")
    @classmethod
    def _version(cls, v: str | None, info: Any) -> str | None:
        name = info.data.get("name")
        if v is None or name is None:
            return v
        if name in ONE_VERSION_SERVERS:
            raise ValueError(f"{name} has one version per install or image (Debian's package; tpd: the source "
                             "tree), so a version cannot be requested; remove 'version' (the version that ran "
                             "is recorded with each cell)")
        if len(v) > 64 or not VERSION_RE.fullmatch(v):
            raise ValueError(f"not a version string: {v[:80]!r} (want e.g. 2.2.0 or 1.5.10rc1: digits, dots, "
                             "letters, - and _)")
        return v

    @field_validator("variant")
    @classmethod
    def _variant_keys(cls, v: dict[str, Any], info: Any) -> dict[str, Any]:
        name = info.data.get("name")
        if name is None:  # the name itself is invalid; that error is reported
            return v
        problems = check_variant(name, v)
        if problems:
            raise ValueError("; ".join(f"{key}: {msg}" for key, msg in problems))
        return v

    @model_validator(mode="after")
    def _external(self) -> ServerSpec:
        if self.name == "external" and self.external is None:
            raise ValueError("server 'external' needs an 'external' block with host, port, user, password")
        if self.name != "external" and self.external is not None:
            raise ValueError(f"'external' is only valid for name: external, not {self.name}")
        return self

    def request(self, max_clients: int) -> ServerRequest:
        """The backend request for this server."""
        return ServerRequest(name=self.name, version=self.version, variant=dict(self.variant),
                             external=self.external.model_dump() if self.external else {},
                             max_clients=max_clients, source=self.source, ref=self.ref)

    def display(self) -> str:
        """Label used in tables: ``label`` or ``ServerRequest.label``."""
        return self.label or self.request(2000).label


def _default_storage() -> list[Literal["disk", "tmpfs"]]:
    return ["disk"]


LinkEntry = str | dict[str, str | int | float]


def _default_link() -> list[LinkEntry]:
    return ["loopback"]


def _default_tls() -> list[Literal["none", "explicit", "implicit", "https"]]:
    return ["none"]


#: ``repeats: auto``: at least 3 repeats of each cell group, at most 10 (runner.campaign.repeats).
AUTO_REPEATS = (3, 10)


#: Most client processes a spec may ask for (``client_processes``).
MAX_CLIENT_PROCESSES = 64


class CampaignSpec(BaseModel):
    """A whole campaign. See the module docstring for an example."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field("campaign", min_length=1, max_length=200)
    servers: list[ServerSpec] = Field(min_length=1)
    workloads: list[WorkloadSpec] = Field(min_length=1)
    repeats: int = Field(5, ge=1, le=1000, description="repeats per cell; the minimum with max_repeats")
    max_repeats: int | None = Field(None, ge=2, le=1000, description="adaptive repeats: more repeats until the "
                                    "figure's 95% CI is within target_ci of the median, at most this many")
    target_ci: float = Field(0.025, gt=0, lt=1, description="adaptive repeats: wanted relative CI half-width")
    warmup: bool = Field(True, description="run a short unrecorded pass of each workload after server start")
    server_reuse: Literal["none", "repeats", "workloads"] = Field(
        "none", description="when one running server serves several cells (runner.cell.server_reuse): none = a fresh "
                            "server per cell; repeats = one per cell group, its repeats back to back; workloads = "
                            "one per server and repeat. Cells on a reused server record no memory figures")
    backend: Literal["auto", "local", "docker"] = "auto"
    pinning: Pinning = Field(default_factory=Pinning)
    max_clients: int = Field(2000, ge=1, le=MAX_CLIENTS,
                             description="connection limit configured in each server (seed: 2000; at most "
                                         "1,000,000, tpd's --max-conns limit)")
    skip_unavailable: bool = Field(True, description="record servers that cannot run as skipped instead of failing")
    hosts: HostsSpec | None = Field(None, description="run across hosts (runner.multihost); None = this machine")
    client_processes: int | Literal["auto"] = Field(
        "auto", description="load-generator processes on this machine for the N-client workloads, each pinned to "
                            "a client CPU, merged as client hosts are (runner.multihost.processes); auto: one per "
                            "pinned client CPU, 1 when the client is not pinned")
    driver: str | None = Field(None, description="what makes the load (runner.load.registry), for every cell of "
                                                 "the campaign; default (None): xferlab's own client of each "
                                                 "workload's protocol, xferlab-ftp for FTP, xferlab-http for HTTP")
    storage: list[Literal["disk", "tmpfs"]] = Field(
        default_factory=_default_storage, min_length=1,
        description="storage axis (seed 002: SSD vs tmpfs): each server without its own variant storage "
                    "runs once per kind listed; disk is the default and adds nothing to a label")

    link: list[LinkEntry] = Field(
        default_factory=_default_link, min_length=1,
        description="link axis (runner.net.conditions): each server without its own variant link runs once per "
                    "link listed, e.g. [loopback, 100mbit] or {rate: 100mbit, delay: 1ms, loss: 0}; loopback (the "
                    "default) shapes nothing and adds nothing to a label")
    tls: list[Literal["none", "explicit", "implicit", "https"]] = Field(
        default_factory=_default_tls, min_length=1,
        description="TLS axis: none (plain), explicit (AUTH TLS) or implicit FTPS, https (HTTP "
                    "workloads); each server without its own variant tls runs once per mode listed "
                    "(runner.spec.axes)")
    tls_key: Literal["ecdsa-p256", "rsa-2048"] = Field(
        "ecdsa-p256", description="key type of the campaign's TLS certificates (runner.tls.certs)")
    profile: ProfileField = Field(None, description="profile every cell's measured phase (runner.spec.profile, "
                                                    "runner.metrics.profile): true, false or {rate_hz, off_cpu, "
                                                    "syscalls}; a workload or server entry's own profile wins")

    def profile_of(self, server: ServerSpec, workload: str, params: WorkloadParams) -> ProfileSpec | None:
        """The profile of the cell of ``server`` x ``workload`` with ``params``: the server
        entry's ``profile``, else that of the first workload entry that expands to this
        workload and parameters, else the spec's (runner.spec.profile.resolve); None: not profiled."""
        entry = next((w.profile for w in self.workloads if workload in w.names() and params in w.param_sets()
                      and w.profile is not None), None)
        return resolve(server.profile, entry, self.profile)

    @model_validator(mode="before")
    @classmethod
    def _axes(cls, data: Any) -> Any:
        """Expand the storage, TLS and link axes into the servers list (runner.spec.axes)."""
        return expand_axes(data)

    @field_validator("link")
    @classmethod
    def _links(cls, v: list[Any]) -> list[str]:
        return check_link_list(v)

    @model_validator(mode="after")
    def _link_here(self) -> CampaignSpec:
        if self.hosts is not None and any(str(s.variant.get("link", "loopback")) != "loopback"
                                          for s in self.servers):
            raise ValueError("link: a shaped link is made between namespaces of one machine; a campaign across "
                             "hosts (hosts:) cannot use it (shape the hosts' own network instead)")
        return self

    @model_validator(mode="before")
    @classmethod
    def _auto_repeats(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("repeats") == "auto":
            data = {**data, "repeats": AUTO_REPEATS[0], "max_repeats": data.get("max_repeats") or AUTO_REPEATS[1]}
        return data

    @model_validator(mode="after")
    def _repeats_range(self) -> CampaignSpec:
        if self.max_repeats is not None and self.max_repeats < self.repeats:
            raise ValueError(f"max_repeats ({self.max_repeats}) is below repeats ({self.repeats})")
        return self

    @field_validator("client_processes")
    @classmethod
    def _client_processes(cls, v: int | str) -> int | str:
        if v != "auto" and not (isinstance(v, int) and 1 <= v <= MAX_CLIENT_PROCESSES):
            raise ValueError(f"want 'auto' or a number of processes 1..{MAX_CLIENT_PROCESSES}, got {v!r}")
        return v

    def client_process_count(self) -> int:
        """The client processes of this campaign on this machine: ``client_processes``,
        or for ``"auto"`` the number of client CPUs the pinning gives (its ``client``
        list's length); 1 when the client is not pinned (the load generator then shares
        the machine's CPUs with the server, and more processes would only compete)."""
        if self.client_processes != "auto":
            return int(self.client_processes)
        return len(self.pinning.client) if self.pinning.client else 1

    @field_validator("driver")
    @classmethod
    def _known_driver(cls, v: str | None) -> str | None:
        if v is not None and v not in driver_names():
            raise ValueError(f"unknown driver {v!r}; known: {', '.join(driver_names())}")
        return v

    @model_validator(mode="after")
    def _driver_runs_workloads(self) -> CampaignSpec:
        for i, w in enumerate(self.workloads):
            by_driver: dict[str, list[str]] = {}
            for n in w.names():
                by_driver.setdefault(self.driver_of(w.params, n), []).append(n)
            for name, names in by_driver.items():
                if name not in driver_names():
                    raise ValueError(f"workloads.{i}.params.driver: unknown driver {name!r}; known: "
                                     f"{', '.join(driver_names())}")
                driver = get_driver(name)
                bad = [n for n in names if n not in driver.workloads]
                if bad:
                    others = [d for d in driver_names() if all(n in get_driver(d).workloads for n in bad)]
                    raise ValueError(f"workloads.{i}: driver {name!r} cannot run {', '.join(bad)} "
                                     f"(it runs: {', '.join(driver.workloads)}); drivers that can: "
                                     f"{', '.join(others) or 'none'}")
                for why in filter(None, (driver_refuses(driver, n, w.params) for n in names)):
                    raise ValueError(f"workloads.{i}: driver {name!r}: {why}")
        return self

    def driver_of(self, params: WorkloadParams, workload: str) -> str:
        """Name of the driver that makes the load of a cell of ``workload`` with ``params``:
        the workload's own ``driver`` parameter when set, else the campaign's ``driver``,
        else xferlab's own client of the workload's protocol
        (runner.load.registry.default_driver: ``xferlab-ftp`` or ``xferlab-http``).
        Raises KeyError for a workload not in the catalogue."""
        return params.driver or self.driver or default_driver(workload)

    @model_validator(mode="after")
    def _unique_labels(self) -> CampaignSpec:
        seen: dict[str, int] = {}
        for i, s in enumerate(self.servers):
            lab = s.display()
            if lab in seen:
                raise ValueError(f"servers.{i}: duplicate server {lab!r} (same as servers.{seen[lab]}); "
                                 "give one a different version, variant or label")
            seen[lab] = i
        return self


@dataclass(frozen=True)
class CellPlan:
    """One cell to run: a server, a workload with its parameters, a repeat index, and
    whether it is the extra repeat that runs under the profilers (``profiled``)."""

    seq: int
    server: ServerSpec
    workload: str
    params: WorkloadParams
    repeat: int
    profiled: bool = False

    @property
    def params_key(self) -> str:
        """Canonical parameter string (runner.catalogue.workloads.params_key)."""
        return params_key(self.workload, self.params)


def count_cells(spec: CampaignSpec) -> int:
    """Number of cells ``spec`` expands to, by arithmetic (no cell is made):
    ``repeats x (workload names, presets counted by their members, sweeps by their client
    counts) x servers``, with
    ``max_repeats`` as the repeats when the campaign adds repeats (the most it can make),
    plus one profiled cell per profiled family (:func:`expand`)."""
    return _measured_cells(spec) + len(_profiled(spec))


def _measured_cells(spec: CampaignSpec) -> int:
    return (max(spec.repeats, spec.max_repeats or 0) * len(spec.servers)
            * sum(len(w.names()) * len(w.param_sets()) for w in spec.workloads))


def _pairs(spec: CampaignSpec) -> list[tuple[str, WorkloadParams]]:
    return [(name, params) for w in spec.workloads for name in w.names() for params in w.param_sets()]


def _profiled(spec: CampaignSpec) -> list[tuple[str, WorkloadParams, ServerSpec]]:
    """The cell families whose spec, workload or server entry asks for a profile, in
    expansion order (as :meth:`CampaignSpec.profile_of` decides, in one pass over the
    workload entries)."""
    if spec.profile is None and all(s.profile is None for s in spec.servers) \
            and all(w.profile is None for w in spec.workloads):
        return []
    first: dict[str, ProfileField] = {}  # params key -> the first entry's profile that names it
    for w in spec.workloads:
        if w.profile is not None:
            for name in w.names():
                for params in w.param_sets():
                    first.setdefault(params_key(name, params), w.profile)
    return [(name, params, srv) for name, params in _pairs(spec)
            for entry in (first.get(params_key(name, params)),) for srv in spec.servers
            if resolve(srv.profile, entry, spec.profile) is not None]


def max_cells() -> int:
    """The configured maximum of cells per campaign (``XFERLAB_MAX_CELLS``, default 100,000)."""
    from runner.config import get_settings

    return get_settings().max_cells


def check_cells(spec: CampaignSpec, maximum: int | None = None, source: str = "spec") -> int:
    """Return :func:`count_cells` of ``spec``; raise SpecError naming the count, how it
    arises and the maximum when it exceeds ``maximum`` (default :func:`max_cells`)."""
    limit = max_cells() if maximum is None else maximum
    n = _measured_cells(spec)  # arithmetic only: a spec of a billion cells is refused before any is looked at
    if n <= limit:
        n += len(_profiled(spec))
    if n > limit:
        names = sum(len(w.names()) * len(w.param_sets()) for w in spec.workloads)
        reps = max(spec.repeats, spec.max_repeats or 0)
        raise SpecError([("", f"the spec expands to {n:,} cells ({reps} repeats x {names} workloads x "
                              f"{len(spec.servers)} servers); the maximum is {limit:,} cells (XFERLAB_MAX_CELLS)")],
                        source)
    return n


def expand(spec: CampaignSpec, *, maximum: int | None = None) -> list[CellPlan]:
    """Expand a spec into cells, repeat-major: every (workload, server) pair runs once
    before any runs twice, so slow drift of the machine spreads over all servers
    instead of biasing one. Returns ``repeats x workloads x servers`` CellPlans, then one
    ``profiled`` cell per family whose spec asks for a profile (runner.spec.profile): the
    profilers cost the server time, so the profile runs in its own extra repeat, numbered
    after every repeat the campaign may add (``max(repeats, max_repeats)``), and its
    figures stay out of the primary ones (docs/methodology.md, "CPU profiles").

    Raises SpecError, before making any cell, when there would be more than
    ``maximum`` (default :func:`max_cells`) cells."""
    check_cells(spec, maximum)
    pairs = _pairs(spec)
    cells = []
    seq = 0
    for rep in range(spec.repeats):
        for name, params in pairs:
            for srv in spec.servers:
                cells.append(CellPlan(seq, srv, name, params, rep))
                seq += 1
    extra = max(spec.repeats, spec.max_repeats or 0)
    for name, params, srv in _profiled(spec):
        cells.append(CellPlan(seq, srv, name, params, extra, profiled=True))
        seq += 1
    return cells


def _errors(exc: ValidationError) -> list[tuple[str, str]]:
    out = []
    for e in exc.errors():
        path = ".".join(str(p) for p in e["loc"])
        msg = e["msg"].removeprefix("Value error, ")
        if e["type"] == "extra_forbidden":
            msg = "unknown field"
        out.append((path, msg))
    return out


def parse_spec(data: Any, source: str = "spec", *, maximum_cells: int | None = None,
               from_dashboard: bool = False) -> CampaignSpec:
    """Validate a spec given as a dict. Raises SpecError with every bad field's path, or
    naming the cell count when it expands to more than ``maximum_cells`` (default
    :func:`max_cells`) cells (:func:`check_cells`), when no server can run any workload
    (runner.catalogue.pairing), or when ``hosts.inventory`` is not allowed (runner.spec.inventory_policy);
    with ``from_dashboard`` (a spec anyone holding the dashboard's token sent), also when a
    server's ``source`` is not allowed (runner.spec.source_policy)."""
    if not isinstance(data, dict):
        raise SpecError([("", f"expected a mapping at the top level, got {type(data).__name__}")], source)
    bad = control_characters(data)
    if bad:
        raise SpecError(bad, source)
    try:
        spec = CampaignSpec.model_validate(data)
    except ValidationError as exc:
        raise SpecError(_errors(exc), source) from None
    check_cells(spec, maximum_cells, source)
    if why := no_valid_pair(spec.servers, spec.workloads):  # some pairs may be skipped cells (runner.catalogue.pairing)
        raise SpecError([("workloads", why)], source)
    if spec.hosts is not None and spec.hosts.inventory:
        from runner.spec.inventory_policy import InventoryError, allowed_inventory

        try:
            allowed_inventory(spec.hosts.inventory)
        except InventoryError as exc:
            raise SpecError([("hosts.inventory", str(exc))], source) from None
    if from_dashboard:
        from runner.spec.source_policy import SourcePolicyError, allowed_source

        refused = []
        for i, srv in enumerate(spec.servers):
            if srv.source is not None:
                try:
                    allowed_source(srv.source)
                except SourcePolicyError as exc:
                    refused.append((f"servers.{i}.source", str(exc)))
        if refused:
            raise SpecError(refused, source)
    return spec


def load_spec(path: str | Path) -> CampaignSpec:
    """Read and validate a YAML or JSON spec file. Raises SpecError (bad content or
    unreadable file), naming the file and the field path."""
    return parse_spec(read_spec_data(path), str(path))


def read_spec_data(path: str | Path) -> Any:
    """The parsed but not yet validated content of a YAML or JSON spec file (what
    :func:`parse_spec` takes). Raises SpecError for an unreadable file or bad syntax."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise SpecError([("", f"cannot read: {exc.strerror}")], str(p)) from None
    try:
        data = json.loads(text) if p.suffix == ".json" else load_yaml(text)
    except RecursionError:
        raise SpecError([("", "nested too deeply")], str(p)) from None
    except (yaml.YAMLError, json.JSONDecodeError) as exc:
        raise SpecError([("", f"not valid {'JSON' if p.suffix == '.json' else 'YAML'}: {exc}")], str(p)) from None
    return data


def redacted(data: Any, model: type[BaseModel] | None = None) -> dict[str, Any]:
    """A copy of the stored spec dict ``data`` (``model``: default :class:`CampaignSpec`;
    :class:`ServerSpec` for a cell's ``server_spec``) with each field marked secret
    (``json_schema_extra`` ``{"secret": True}``: :data:`runner.spec.redaction.SECRET_FIELD`)
    replaced by :data:`REDACTED` (``"********"``) when set; ``None`` gives ``{}``. For display only."""
    return redact_model_data(data, model or CampaignSpec)


def secret_values(data: Any, model: type[BaseModel] | None = None) -> frozenset[str]:
    """The non-empty strings at the secret fields of the stored spec dict ``data`` (as
    :func:`redacted`): what runner.spec.redaction.scrub hides in text."""
    return model_secret_values(data, model or CampaignSpec)
