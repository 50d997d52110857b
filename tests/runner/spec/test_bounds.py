"""Spec bounds: the cell count is bounded before any cell
is made, YAML alias / merge-key bombs are refused while parsing, and values a server
would only refuse at run time are refused with the spec."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from runner.spec.model import SpecError, expand, load_spec, parse_spec
from tests.support import REPO_ROOT

ROOT = REPO_ROOT


def _spec(**kw):
    d = {"servers": [{"name": "pyftpdlib", "version": "2.2.0"}], "workloads": [{"preset": "classic"}]}
    d.update(kw)
    return d


def _alias_spec(n_aliases: int) -> str:
    """A valid spec: one workload entry repeated by alias, 1000 repeats, two storage kinds."""
    return ("name: bomb\nrepeats: 1000\nstorage: [disk, tmpfs]\n"
            "servers: [{name: pyftpdlib, version: '2.2.0'}]\n"
            "workloads: [&w {preset: classic}" + ", *w" * n_aliases + "]\n")


# Loads a spec file with load_spec (the real function) in a child process, reporting the
# outcome, the time taken and the child's peak RSS; its address space is capped so an
# unbounded expansion fails there instead of swapping the machine. The peak is VmHWM of
# /proc/self/status (the high-water mark of this process image's own memory), not
# getrusage's ru_maxrss: Linux carries ru_maxrss across execve, and subprocess forks
# (or vforks) from pytest, so ru_maxrss reported pytest's own size (415 MiB in CI
# after the dashboard and integration tests) instead of the loader's.
_CHILD = textwrap.dedent("""
    import json, resource, sys, time
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
    from runner.spec.model import SpecError, expand, load_spec
    t = time.perf_counter()
    try:
        cells = expand(load_spec(sys.argv[1]))
        out = {"ok": True, "cells": len(cells)}
    except SpecError as e:
        out = {"ok": False, "error": str(e)}
    except MemoryError:
        out = {"ok": False, "error": "MemoryError"}
    out["seconds"] = time.perf_counter() - t
    hwm = next(line for line in open("/proc/self/status") if line.startswith("VmHWM:"))
    out["maxrss_mib"] = int(hwm.split()[1]) / 1024
    print(json.dumps(out))
""")


def _load_in_child(path: Path, timeout: float = 120) -> dict:
    p = subprocess.run([sys.executable, "-c", _CHILD, str(path)], capture_output=True, text=True,
                       timeout=timeout, cwd=ROOT)
    assert p.returncode == 0, p.stderr[-2000:]
    return json.loads(p.stdout)


def test_alias_bomb_spec_refused_quickly_with_low_memory(tmp_path):
    spec = tmp_path / "bomb.yaml"
    spec.write_text(_alias_spec(45_000))  # 180 KB, 720,016,000 cells
    assert 170_000 < spec.stat().st_size < 190_000
    out = _load_in_child(spec)
    assert out["ok"] is False, out
    assert "720,016,000 cells" in out["error"] and "maximum is 100,000" in out["error"], out
    assert "1000 repeats x 360008 workloads x 2 servers" in out["error"]
    # Noisy shared machine: generous bounds (measured ~1 s and ~90 MiB when idle).
    assert out["seconds"] < 20 and out["maxrss_mib"] < 400, out


def test_merge_key_bomb_refused_while_parsing(tmp_path):
    # 10^9 keys once merged, from ~600 bytes; PyYAML's safe_load copies merged pairs.
    lines = ["name: &a0 {k: 1}"]
    for i in range(1, 10):
        lines.append(f"a{i}: &a{i} {{<<: [" + ", ".join([f"*a{i - 1}"] * 10) + "]}")
    spec = tmp_path / "laughs.yaml"
    spec.write_text("\n".join(lines) + "\n")
    assert spec.stat().st_size < 700
    out = _load_in_child(spec, timeout=60)
    assert out["ok"] is False and "more than 1,000,000 nodes" in out["error"], out
    assert out["seconds"] < 10, out


def test_recursive_and_deep_yaml_refused(tmp_path):
    p = tmp_path / "rec.yaml"
    p.write_text("servers: &s [*s]\n")
    with pytest.raises(SpecError, match="refers to itself"):
        load_spec(p)
    p.write_text("servers: " + "[" * 3000 + "]" * 3000 + "\n")
    with pytest.raises(SpecError, match="nests too deeply"):
        load_spec(p)


def test_ordinary_aliases_and_merge_keys_still_work(tmp_path):
    p = tmp_path / "ok.yaml"
    p.write_text(textwrap.dedent("""
        repeats: 2
        servers: [{name: pyftpdlib, version: "2.2.0"}, {name: tpd}]
        workloads:
          - &small {name: login, params: &p {clients: 10, file_size: 1M}}
          - {name: retr, params: {<<: *p, duration: 1}}
          - *small
    """))
    spec = load_spec(p)
    assert spec.workloads[1].params.clients == 10 and spec.workloads[1].params.duration == 1
    assert len(expand(spec)) == 2 * 3 * 2


def test_cell_maximum_is_configurable_and_exact(monkeypatch):
    from runner.config import get_settings

    spec = parse_spec(_spec(repeats=10))  # 10 x 8 x 1 = 80 cells
    assert len(expand(spec, maximum=80)) == 80
    with pytest.raises(SpecError, match=r"160 cells .* the maximum is 159 cells"):
        parse_spec(_spec(repeats=10, servers=[{"name": "pyftpdlib", "version": "2.2.0"},
                                              {"name": "tpd"}]), maximum_cells=159)
    monkeypatch.setenv("XFERLAB_MAX_CELLS", "79")
    get_settings.cache_clear()
    try:
        with pytest.raises(SpecError, match="80 cells .* the maximum is 79 cells"):
            parse_spec(_spec(repeats=10))
        with pytest.raises(SpecError, match="the maximum is 79"):
            expand(spec)
    finally:
        monkeypatch.delenv("XFERLAB_MAX_CELLS")
        get_settings.cache_clear()


@pytest.mark.parametrize("field,value,needle", [
    ("max_clients", 10**12, "max_clients"),
    ("backlog", 10**12, "servers.0.variant"),
    ("idle_timeout", 10**9, "servers.0.variant"),
])
def test_run_time_limits_refused_with_the_spec(field, value, needle):
    if field == "max_clients":
        data = _spec(max_clients=value)
    elif field == "backlog":
        data = _spec(servers=[{"name": "pyftpdlib", "version": "2.2.0", "variant": {"backlog": value}}])
    else:
        data = _spec(servers=[{"name": "tpd", "variant": {"idle_timeout": value}}])
    with pytest.raises(SpecError) as ei:
        parse_spec(data)
    assert any(p.startswith(needle) for p, _ in ei.value.errors), ei.value.errors


def test_limits_at_the_edge_are_accepted():
    parse_spec(_spec(max_clients=1_000_000))
    parse_spec(_spec(servers=[{"name": "pyftpdlib", "version": "2.2.0", "variant": {"backlog": 65535}}]))
    parse_spec(_spec(servers=[{"name": "tpd", "variant": {"idle_timeout": 604800}}]))
    with pytest.raises(SpecError, match="from 1 to 604800"):
        parse_spec(_spec(servers=[{"name": "tpd", "variant": {"idle_timeout": 604801}}]))
    with pytest.raises(SpecError, match="from 1 to 65535"):
        parse_spec(_spec(servers=[{"name": "twisted", "variant": {"backlog": 65536}}]))


@pytest.mark.parametrize("name", ["vsftpd", "proftpd", "pureftpd", "tpd"])
def test_version_refused_for_one_version_servers(name):
    with pytest.raises(SpecError) as ei:
        parse_spec(_spec(servers=[{"name": name, "version": "3.0.3"}]))
    assert ei.value.errors[0][0] == "servers.0.version"
    assert "one version per install or image" in ei.value.errors[0][1]
    parse_spec(_spec(servers=[{"name": name}]))


@pytest.mark.parametrize("version", ["2.2.0; rm -rf /", "$(id)", "1.0`x`", "1.0 && true", "1|x", "../1",
                                     "1.0\n", "2" * 65])
def test_version_with_shell_metacharacters_refused(version):
    with pytest.raises(SpecError) as ei:
        parse_spec(_spec(servers=[{"name": "pyftpdlib", "version": version}]))
    path, msg = ei.value.errors[0]  # a line break is caught first as a control character
    assert path == "servers.0.version" and ("not a version string" in msg or "control character" in msg)


@pytest.mark.parametrize("version", ["2.2.0", "1.5.10", "22.10.0", "2.0.0rc1", "1.0.post1", "24.3.0-dev"])
def test_plain_versions_accepted(version):
    assert parse_spec(_spec(servers=[{"name": "twisted", "version": version}])).servers[0].version == version


@pytest.mark.parametrize("where, data", [
    ("name", {"name": "a\x00b"}),
    ("servers.0.label", {"servers": [{"name": "tpd", "label": "x\r\nSet-Cookie: y"}]}),
    ("servers.0.variant.use_sendfile", {"servers": [{"name": "pyftpdlib", "version": "2.2.0",
                                                     "variant": {"use_sendfile": "\x1b[31m"}}]}),
])
def test_control_characters_are_refused_with_their_path(where, data):
    """NUL and other control characters anywhere in a spec are a spec error naming the field
    (a NUL reached PostgreSQL before and failed there; CR/LF would reach labels in exports)."""
    spec = {"name": "c", "servers": [{"name": "tpd"}], "workloads": [{"name": "login"}], **data}
    with pytest.raises(SpecError) as ei:
        parse_spec(spec)
    assert any(path == where and "U+00" in msg for path, msg in ei.value.errors), ei.value.errors
    assert "\x00" not in str(ei.value) and "\x1b" not in str(ei.value)


def test_version_check_is_linear_time():
    """A version like '1' + 'a' * 40 + '!' made the old pattern backtrack exponentially
    (26 letters took 4.3 s; each letter doubles it) while holding the GIL: the whole
    dashboard stalled. Now it is refused at once. Run in a child with a deadline, so a
    regression fails in seconds instead of hanging the suite."""
    code = textwrap.dedent("""
        from runner.spec.model import SpecError, parse_spec
        for n in (26, 40, 60):
            spec = {"servers": [{"name": "pyftpdlib", "version": "1" + "a" * n + "!"}],
                    "workloads": [{"name": "login"}]}
            try:
                parse_spec(spec)
            except SpecError as e:
                assert "not a version string" in str(e), e
            else:
                raise SystemExit("accepted")
        print("refused")
    """)
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=20)
    assert r.returncode == 0 and r.stdout.strip() == "refused", r.stderr[-500:]
    assert time.perf_counter() - t0 < 10.0
