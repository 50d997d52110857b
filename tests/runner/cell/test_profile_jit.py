"""Profiled cells of the JIT servers under the docker backend: perf names the code V8 and
the JVM compile at run time from the perf map in the container (node-http started with
--perf-basic-prof for its profiled cell, netty's map written by jcmd Compiler.perfmap
after the phase). Needs root, /usr/bin/perf, tracefs and the node-http and netty images
(built when missing)."""
from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runner.cell.local import run_local_cell
from runner.metrics.profile import perf_maps
from runner.spec.model import parse_spec
from runner.spec.request import ServerRequest
from runner.store.models import Cell
from tests.runner.cell.test_profile_cell import _needs_perf
from tests.runner.support import check_or_skip
from tests.support.cpu_cgroup import CpuCgroup

pytestmark = [pytest.mark.integration, pytest.mark.docker, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[3]
#: V8's perf map entries (--perf-basic-prof): a code kind, an optimisation marker, the
#: function's name and its source position, e.g. ``LazyCompile:*emit node:events:464``.
V8_FRAME = re.compile(r"^(LazyCompile|Function|JS|Script|Eval):[*~^+-]?\S* (node:\S+|/\S+\.js):\d+$")


def _profiled_cell(server: str):
    spec = parse_spec({"name": "jit", "repeats": 1, "backend": "docker", "profile": True,
                       "servers": [{"name": server}],
                       "workloads": [{"name": "http_upload", "params": {"clients": 16, "body_size": "256K",
                                                                        "duration": 3.0}}]})
    srv = spec.servers[0]
    cell = Cell(id=1, seq=0, server=server, server_label=srv.display(), server_spec=srv.model_dump(mode="json"),
                workload="http_upload", params=spec.workloads[0].params.model_dump(mode="json"), params_key="",
                repeat=1, profiled=True)
    return cell, spec


def _frames(folded: str) -> dict[str, int]:
    """Samples per frame (inclusive: every stack the frame is in)."""
    out: dict[str, int] = {}
    for line in folded.splitlines():
        stack, _, n = line.rpartition(" ")
        for frame in set(stack.split(";")):
            out[frame] = out.get(frame, 0) + int(n)
    return out


def _check_cpu(out, prof) -> None:
    usage = {(s.metric, s.stat): s.value for s in out.samples}[("server_cpu", "usage")]
    assert usage > 0.05
    assert abs(prof.on_cpu_s - usage) <= 0.35 * usage + 3 / prof.rate_hz, (prof.on_cpu_s, usage)


def _profile_of(dbackend, server: str, maps_note: str):
    """The profiled cell of ``server`` run on ``dbackend``: its outcome and profile (perf),
    checked against the cgroup's CPU and for the note ``maps_note`` starts; also its
    frames with their inclusive sample counts and its total of samples."""
    _needs_perf()
    check_or_skip(dbackend, ServerRequest(server))
    cell, spec = _profiled_cell(server)
    out = run_local_cell(cell, spec, dbackend)
    assert out.status == "done", out.error
    prof = out.profile
    assert prof is not None and prof.profiler == "perf"
    _check_cpu(out, prof)
    assert any(n.startswith(maps_note) for n in prof.notes), prof.notes
    total = sum(int(line.rpartition(" ")[2]) for line in prof.on_cpu.splitlines())
    return prof, _frames(prof.on_cpu), total


def test_node_http_profile_names_v8_jit_frames(dbackend):
    _prof, frames, total = _profile_of(dbackend, "node-http", "JIT frames named from the perf maps of 1 process")
    jit = {f: n for f, n in frames.items() if V8_FRAME.match(f)}
    assert jit, sorted(frames)[:40]
    assert 0 < max(jit.values()) <= total


def test_netty_profile_names_the_servers_java_methods(dbackend):
    prof, frames, total = _profile_of(dbackend, "netty", "JIT frames named from the perf maps of")
    # Java methods the JIT compiled, named from the map: netty's own (the server's handler is
    # small and usually inlined into netty's frames or still interpreted in a 3 s phase, so
    # its frames are not asked for; when they show, they name classes the source declares)
    java = {f for f in frames if re.search(r"\bio\.netty\.\S+\.\w+\(", f)}
    assert java, sorted(frames)[:40]
    declared = set(re.findall(r"\bclass (\w+)", (ROOT / "servers/netty/NettyServer.java").read_text()))
    named = {m.group(1) for f in frames for m in [re.search(r"\bNettyServer\$(\w+)\.\w+\(", f)] if m}
    assert named <= declared, (named, declared)
    # what stays unnamed is a small share of the samples (the profile's note counts them)
    unnamed = next((int(m.group(1)) for n in prof.notes
                    for m in [re.match(r"(\d+) of \d+ samples have frames without a symbol", n)] if m), 0)
    assert unnamed <= 0.25 * total, (unnamed, total, prof.notes)


def test_perf_maps_says_unresolved_without_a_map():
    with CpuCgroup() as cg:
        proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
        try:
            cg.add(proc.pid)
            time.sleep(0.2)
            note = perf_maps(cg.path, dump=False)
            assert note.startswith("JIT frames unresolved: no process of the server has a perf map"), note
            Path(f"/tmp/perf-{proc.pid}.map").write_text("7f0000000000 10 fake_jit_function\n")
            try:
                note = perf_maps(cg.path, dump=False)
            finally:
                Path(f"/tmp/perf-{proc.pid}.map").unlink()
            assert note == f"JIT frames named from the perf maps of 1 process(es) (pid {proc.pid})", note
        finally:
            proc.kill()
            proc.wait(5)


def _cell(server: str, profiled: bool) -> Cell:
    return Cell(id=1, campaign_id=7, seq=0, server=server, server_label=server, server_spec={"name": server},
                workload="http_upload", params={}, params_key="k", repeat=1, profiled=profiled)


def test_a_profiled_node_cell_gets_its_own_server_started_with_the_perf_map():
    from runner.cell.server_reuse import needs_perf_map, reuse_key
    from tests.runner.backends.test_docker_spec import spec

    assert needs_perf_map(_cell("node-http", True))
    assert not needs_perf_map(_cell("node-http", False))
    assert not needs_perf_map(_cell("netty", True))  # its map is asked for after the phase
    assert not needs_perf_map(_cell("tpd", True))
    for policy in ("repeats", "workloads"):
        plain, prof = reuse_key(policy, _cell("node-http", False)), reuse_key(policy, _cell("node-http", True))
        assert prof == {**plain, "profiled": True}
        assert reuse_key(policy, _cell("tpd", True)) == reuse_key(policy, _cell("tpd", False))
    assert spec(ServerRequest("node-http", perf_map=True)).env["PERF_MAP"] == "1"
    assert "PERF_MAP" not in spec(ServerRequest("node-http")).env
    entry = (ROOT / "servers/node-http/container/entrypoint.sh").read_text()
    assert 'exec /usr/bin/node --perf-basic-prof /opt/xferlab/server.js "$@"' in entry
