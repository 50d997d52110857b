"""Environment snapshot: what a benchmark result depends on besides the server.

``snapshot()`` returns a JSON-friendly dict; ``environment_class()`` hashes the part of
it that makes two results comparable.
"""
from __future__ import annotations

import hashlib
import json
import os
import platform
import resource
import socket
from pathlib import Path
from typing import Any

#: sysctls recorded (name -> value as the kernel prints it, whitespace-normalised).
SYSCTLS = (
    "net.core.somaxconn", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_tw_reuse",
    "net.ipv4.ip_local_port_range", "net.ipv4.tcp_max_syn_backlog", "fs.file-max",
    "fs.nr_open", "net.core.rmem_max", "net.core.wmem_max", "net.ipv4.tcp_syncookies",
)

#: snapshot keys that define the environment class (see environment_class).
CLASS_FIELDS = ("kernel", "cpu_model", "cores", "sysctls", "backend")
#: Fields that enter the class only when the snapshot has them (so snapshots taken
#: before they existed keep their class): the docker backend's network mode, and the
#: campaign's server reuse policy when it reuses servers (runner.cell.server_reuse).
OPTIONAL_CLASS_FIELDS = ("docker_network", "server_reuse")


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def read_sysctl(name: str) -> str | None:
    """Value of sysctl ``name`` (e.g. ``"net.core.somaxconn"`` -> ``"4096"``) read from
    /proc/sys, tabs/spaces collapsed to one space; None when absent or unreadable."""
    v = _read("/proc/sys/" + name.replace(".", "/"))
    return " ".join(v.split()) if v is not None else None


def cpu_model() -> str | None:
    """CPU model name from /proc/cpuinfo (first "model name"), else platform.processor()."""
    info = _read("/proc/cpuinfo") or ""
    for line in info.splitlines():
        if line.lower().startswith(("model name", "hardware", "cpu model")):
            return line.split(":", 1)[1].strip()
    return platform.processor() or None


def cpu_governors() -> list[str]:
    """Distinct cpufreq scaling governors of all CPUs (e.g. ``["performance"]``);
    empty when the machine exposes none (VMs, containers)."""
    out = set()
    for f in sorted(Path("/sys/devices/system/cpu").glob("cpu[0-9]*/cpufreq/scaling_governor")):
        v = _read(str(f))
        if v:
            out.add(v)
    return sorted(out)


def mem_total() -> int | None:
    """Physical memory in bytes (/proc/meminfo MemTotal), None if unknown."""
    for line in (_read("/proc/meminfo") or "").splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) * 1024
    return None


def xferlab_version() -> str | None:
    """Installed xferlab distribution version (importlib.metadata), None if not installed."""
    try:
        from importlib.metadata import version
        return version("xferlab")
    except Exception:
        return None


def read_tuning_record() -> dict[str, Any] | None:
    """The tuning the Ansible ``tuning`` role applied to this host, as it recorded it in
    ``Settings.tuning_file`` (``XFERLAB_TUNING_FILE``, default ``/etc/xferlab/tuning.json``): a dict with keys
    ``sysctls``, ``sysctls_host_wide``, ``nofile``, ``cpu_governor``, ... None when the
    file is absent; ``{"error": "..."}`` when it is unreadable or not a JSON object."""
    from runner.config import get_settings

    path = get_settings().tuning_file
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        return None
    except OSError as exc:
        return {"error": f"{path}: {exc.strerror}"}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        return {"error": f"{path}: not JSON: {exc}"}
    return data if isinstance(data, dict) else {"error": f"{path}: not a JSON object"}


def snapshot(extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """Describe this machine now.

    Returns a dict with keys: ``kernel`` (uname release), ``kernel_version`` (uname
    version), ``os`` (uname system), ``machine`` (arch), ``hostname``, ``cpu_model``,
    ``cores`` (logical CPUs, os.cpu_count), ``cores_usable`` (this process's affinity),
    ``mem_total`` (bytes), ``sysctls`` ({name: value or None} for SYSCTLS),
    ``rlimit_nofile`` ({"soft", "hard"}; -1 = unlimited), ``cpu_governor`` (list, may be
    empty), ``python`` (version), ``python_implementation``, ``xferlab_version``, and
    ``tuning`` (:func:`read_tuning_record`) when the tuning role's record is present; then the
    items of ``extra`` (e.g. ``{"backend": "local"}``), which override same-named keys.
    """
    u = os.uname()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    snap: dict[str, Any] = {
        "kernel": u.release,
        "kernel_version": u.version,
        "os": u.sysname,
        "machine": u.machine,
        "hostname": socket.gethostname(),
        "cpu_model": cpu_model(),
        "cores": os.cpu_count(),
        "cores_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "mem_total": mem_total(),
        "sysctls": {name: read_sysctl(name) for name in SYSCTLS},
        "rlimit_nofile": {"soft": soft if soft != resource.RLIM_INFINITY else -1,
                          "hard": hard if hard != resource.RLIM_INFINITY else -1},
        "cpu_governor": cpu_governors(),
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "xferlab_version": xferlab_version(),
    }
    tuning = read_tuning_record()
    if tuning is not None:
        snap["tuning"] = tuning
    if extra:
        snap.update(extra)
    return snap


def environment_class(snap: dict[str, Any]) -> str:
    """Short id (12 hex chars of a sha256) of the fields that make results comparable:
    kernel, cpu_model, cores, sysctls and backend (``snap.get("backend")``, set through
    ``snapshot(extra={"backend": ...})``), plus the docker backend's network mode
    (``docker_network``) when the snapshot has one. Two snapshots with the same class
    ran on equivalent machines; hostname, memory, Python and governor do not enter it."""
    key = {f: snap.get(f) for f in CLASS_FIELDS}
    key.update({f: snap[f] for f in OPTIONAL_CLASS_FIELDS if snap.get(f) is not None})
    blob = json.dumps(key, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]
