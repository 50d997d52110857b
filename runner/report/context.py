"""Report context, as seeds 000 and 001 give it: where the figures were measured
("Conducted on": machine, CPU and cores, memory, kernel, OS, Python, backend, link) and
how each server ran ("Setup": version, how it was obtained, configuration hash,
variant, storage, network); and, for a comparison across two campaigns, every
environment difference between them.

Input is plain data (:class:`runner.report.data.CampaignData`: its ``environment``
snapshot, runner.metrics.environment.snapshot, and its ``setups``); output is
export-neutral :class:`runner.report.tables.Table` objects (kind ``context``,
``setup``, ``environment_diff``) that every export draws like the others.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runner.report import fmt
from runner.report.tables import Cell, Column, Row, Table

_TWO = (Column("item", "item"), Column("value", "value"))
#: Environment keys that identify one machine run rather than describe it: left out of
#: the differences of two campaigns (every run has its own).
_NOT_A_DIFFERENCE = ("env_class",)


def _text(v: Any) -> str:
    if v is None or v == "" or v == [] or v == {}:
        return fmt.NA
    if isinstance(v, Mapping):
        return ", ".join(f"{k}={_text(x)}" for k, x in v.items())
    if isinstance(v, (list, tuple)):
        return ", ".join(_text(x) for x in v)
    return str(v)


#: How the load generator reached a container, by the docker backend's network mode.
_DOCKER_LINKS = {"netns": "loopback in each server container's network namespace (the load generator joins it)",
                 "bridge": "docker bridge: veth pair and bridge to the container's address",
                 "host": "host network namespace, loopback"}


def _link(env: Mapping[str, Any], setups: Mapping[str, Mapping[str, Any]]) -> str:
    if env.get("hosts"):
        return f"across hosts: {_text(env.get('hosts'))}"
    shaped = sorted({str(v["link"]) for s in setups.values() if isinstance(v := s.get("variant"), Mapping)
                     and v.get("link") not in (None, "loopback")})
    also = (f"; servers with variant link {', '.join(shaped)}: a veth pair between two lab network namespaces, "
            "shaped by tc on both ends (docs/methodology.md, \"Link conditions\")") if shaped else ""
    nets = sorted({str(s.get("network")) for s in setups.values() if s.get("network")})
    if env.get("backend") == "docker" and nets:
        return "; ".join(_DOCKER_LINKS.get(n, n) for n in nets) + also
    return "loopback (127.0.0.1), one machine" + also


def _cpus(role: str, cpus: Any) -> str:
    """``"server CPU 0"``, ``"client CPUs 1, 2"``."""
    return f"{role} CPU{'s' if len(cpus) > 1 else ''} {', '.join(str(c) for c in cpus)}"


def cpu_text(env: Mapping[str, Any]) -> str:
    """The "CPU" item of "Conducted on": model, logical CPUs, and what was usable for
    what. With a pinning (``env["pinning"]``: ``{"server": [0], "client": [1]}``) it
    names the server's and the client's CPUs (``"2 logical CPUs: server CPU 0, client
    CPU 1"``); a side not pinned is said so, the client's with the CPUs it could use
    (``cores_usable``: the affinity of the process that ran the load). Without a
    pinning, ``cores_usable`` is given only when it is below ``cores`` (``"4 logical
    CPUs (2 usable by server and client, not pinned)"``). ``"n/a"`` when none is recorded."""
    cores, usable = env.get("cores"), env.get("cores_usable")
    head = ", ".join(x for x in (env.get("cpu_model"), f"{cores} logical CPUs" if cores else None) if x)
    raw = env.get("pinning")
    pin: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    server, client = pin.get("server"), pin.get("client")
    if server or client:
        srv = _cpus("server", server) if server else "server not pinned"
        cli = _cpus("client", client) if client else "client not pinned" + (
            f" ({usable} CPU{'s' if usable != 1 else ''} usable)" if usable else "")
        return f"{head}: {srv}, {cli}" if head else f"{srv}, {cli}"
    if usable and cores and usable != cores:
        return f"{head} ({usable} usable by server and client, not pinned)"
    return head or fmt.NA


def context_table(env: Mapping[str, Any], setups: Mapping[str, Mapping[str, Any]] | None = None) -> Table | None:
    """The "Conducted on" table of an environment snapshot: machine, CPU (model, logical
    CPUs, which were usable for the server and which for the client: :func:`cpu_text`),
    memory, kernel and OS, CPU governor, Python, xferlab, backend, link,
    pinning, driver and the recorded sysctls; items not recorded are left out. None when
    ``env`` is empty. Records: ``{"item", "value"}`` with the raw value."""
    if not env:
        return None
    setups = setups or {}
    cpu = cpu_text(env)
    kernel = " ".join(str(x) for x in (env.get("os"), env.get("kernel")) if x) + \
        (f" ({env['machine']})" if env.get("machine") else "")
    python = " ".join(str(x) for x in (env.get("python_implementation"), env.get("python")) if x)
    driver = env.get("driver")
    drivers = env.get("drivers")  # several: the workloads named their own (runner.report.reader.load_campaign)
    if isinstance(drivers, list) and drivers:
        driver = ", ".join(f"{d.get('name')} {d.get('version', '')}".strip() if isinstance(d, Mapping) else str(d)
                           for d in drivers)
    items: list[tuple[str, str, Any]] = [
        ("machine", _text(env.get("hostname")), env.get("hostname")),
        ("CPU", cpu, env.get("cpu_model")),
        ("memory", fmt.bytes2human(env["mem_total"]) if env.get("mem_total") else fmt.NA, env.get("mem_total")),
        ("kernel", kernel or fmt.NA, env.get("kernel")),
        ("CPU governor", _text(sorted(set(env.get("cpu_governor") or []))), env.get("cpu_governor")),
        ("Python", python or fmt.NA, env.get("python")),
        ("xferlab", _text(env.get("xferlab_version")), env.get("xferlab_version")),
        ("backend", _text(env.get("backend")), env.get("backend")),
        ("link", _link(env, setups), None),
        ("pinning", _text(env.get("pinning")), env.get("pinning")),
        ("driver", _text(driver.get("name") if isinstance(driver, Mapping) else driver), driver),
        ("sysctls", _text(env.get("sysctls")), env.get("sysctls")),
    ]
    items = [i for i in items if i[1] != fmt.NA]  # what was recorded
    rows = [Row(f"context:{k}", (Cell(k), Cell(text))) for k, text, _ in items]
    records = [{"item": k, "value": raw if raw is not None else text} for k, text, raw in items]
    return Table("context", "Conducted on", _TWO, rows, "", records)


_SETUP_COLUMNS = (Column("server", "server"), Column("version", "version"), Column("obtained", "obtained"),
                  Column("config", "config"), Column("variant", "variant"), Column("storage", "storage"),
                  Column("network", "network"))


def setup_table(servers: list[str], setups: Mapping[str, Mapping[str, Any]]) -> Table | None:
    """The "Setup" table: one row per server (in ``servers`` order) that has a setup:
    its version, how it was obtained (image or binary), the first 12 hex digits of its
    configuration hash, its variant, storage (kind and filesystem) and network. None
    when no server has one."""
    rows, records = [], []
    for name in servers:
        s = setups.get(name)
        if not s:
            continue
        storage = _text(s.get("storage")) + (f" ({s['storage_fs']})" if s.get("storage_fs") else "")
        vals = (name, _text(s.get("version")), _text(s.get("obtained")),
                _text((s.get("config_hash") or "")[:12]), _text(s.get("variant")), storage,
                _text(s.get("network") or ("loopback" if s.get("backend") == "local" else None)))
        rows.append(Row(f"setup:{name}", tuple(Cell(v) for v in vals)))
        records.append({c.key: v for c, v in zip(_SETUP_COLUMNS, vals, strict=True)})
    if not rows:
        return None
    return Table("setup", "Setup", _SETUP_COLUMNS, rows, "", records)


def _flat(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping) and v:
            out.update(_flat(v, key + "."))
        else:
            out[key] = v
    return out


def environment_diff_table(a: Mapping[str, Any], b: Mapping[str, Any], label_a: str, label_b: str) -> Table | None:
    """Every difference between two environment snapshots, nested keys flattened
    (``sysctls.net.core.somaxconn``), sorted by key: columns item, ``label_a``,
    ``label_b``. None when they do not differ (or either is empty)."""
    if not a or not b:
        return None
    fa, fb = _flat(a), _flat(b)
    keys = sorted(k for k in set(fa) | set(fb) if k not in _NOT_A_DIFFERENCE and fa.get(k) != fb.get(k))
    if not keys:
        return None
    cols = (Column("item", "item"), Column("a", label_a), Column("b", label_b))
    rows = [Row(f"env:{k}", (Cell(k), Cell(_text(fa.get(k))), Cell(_text(fb.get(k))))) for k in keys]
    records = [{"item": k, "a": fa.get(k), "b": fb.get(k)} for k in keys]
    return Table("environment_diff", "Environment differences", cols, rows, "", records)
