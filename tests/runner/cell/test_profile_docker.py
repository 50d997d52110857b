"""A profiled cell under the docker backend: perf on the host follows the container's cgroup
(vsftpd forks a process per session, all of them inside it), reads the container's
binaries through /proc/PID/root, and its on-CPU seconds match the container cgroup's CPU.
Needs root, /usr/bin/perf, tracefs and the xferlab/vsftpd image (built when missing)."""
from __future__ import annotations

import pytest

from runner.cell.local import run_local_cell
from runner.spec.model import parse_spec
from runner.spec.request import ServerRequest
from runner.store.models import Cell
from tests.runner.cell.test_profile_cell import _needs_perf
from tests.runner.support import check_or_skip
from tests.support.steal import Steal, assert_on_cpu_matches

pytestmark = [pytest.mark.integration, pytest.mark.docker, pytest.mark.timeout(600)]

MIB = 1 << 20


def _profiled_retr(dbackend, server: str, version: str | None = None):
    """The profiled RETR cell (32 MiB fixture, 3 s) of ``server`` in its container: the
    cell's outcome, done."""
    _needs_perf()
    check_or_skip(dbackend, ServerRequest(server, version))
    entry = {"name": server} | ({"version": version} if version else {})
    spec = parse_spec({"name": "profile", "repeats": 1, "backend": "docker", "profile": True, "servers": [entry],
                       "workloads": [{"name": "retr", "params": {"clients": 4, "transfer_size": 32 * MIB,
                                                                 "duration": 3.0}}]})
    srv = spec.servers[0]
    cell = Cell(id=1, seq=0, server=server, server_label=srv.display(), server_spec=srv.model_dump(mode="json"),
                workload="retr", params=spec.workloads[0].params.model_dump(mode="json"), params_key="",
                repeat=1, profiled=True)
    out = run_local_cell(cell, spec, dbackend)
    assert out.status == "done", out.error
    return out


def test_vsftpd_container_profile_follows_forked_sessions(dbackend):
    with Steal() as steal:
        out = _profiled_retr(dbackend, "vsftpd")
    prof = out.profile
    assert prof is not None and prof.profiler == "perf"
    usage = {(s.metric, s.stat): s.value for s in out.samples}[("server_cpu", "usage")]
    assert usage > 0.1
    assert_on_cpu_matches(prof, usage, steal, 0.3, 2)
    lines = prof.on_cpu.splitlines()
    # The container's cgroup holds its init (docker-init) beside vsftpd's processes: at
    # least 95% of the samples are vsftpd's processes'.
    # (One CI run had a stack of another process; its name was not printed then.)
    counts = {line: int(line.rpartition(" ")[2]) for line in lines}
    others = {line: n for line, n in counts.items() if not line.startswith("vsftpd;")}
    assert sum(others.values()) <= 0.05 * sum(counts.values()), [line[:120] for line in others]
    assert any("[k] do_sendfile" in line and "[k] tcp_sendmsg" in line for line in lines)
    assert any("[vsftpd]" in n for n in prof.notes), prof.notes  # stripped binary: said so
    assert any(r.name == "sendfile" and r.count > 0 for r in prof.syscalls)


def test_pyftpdlib_container_profile_has_python_frames(dbackend):
    """py-spy on a containerised Python server (without --native, whose unwinder fails on
    the container's interpreter): the handler's Python frames; its on-CPU seconds (samples
    outside the event loop's wait call) near the container's CPU over the phase."""
    out = _profiled_retr(dbackend, "pyftpdlib", "2.2.0")
    prof = out.profile
    assert prof is not None and prof.profiler == "py-spy", prof and prof.notes
    assert any("without --native" in n for n in prof.notes), prof.notes
    # the samples' CPU against the container's cpu.stat over the phase (py-spy records the whole
    # phase): the wait calls of the event loop left out, within 30%; and no more than one sample
    # per tick of the recording (one single-threaded process)
    usage = {(s.metric, s.stat): s.value for s in out.samples}[("server_cpu", "phase")]
    assert abs(prof.on_cpu_s - usage) <= 0.3 * usage + 2 / prof.rate_hz, (prof.on_cpu_s, usage, prof.notes)
    assert prof.on_cpu_s <= prof.duration_s * 1.05 + 2 / prof.rate_hz, (prof.on_cpu_s, prof.duration_s)
    lines = prof.on_cpu.splitlines()
    assert any("(pyftpdlib/handlers/ftp/data.py:" in line for line in lines), lines[:5]
