"""Profiled cells on this machine (runner.metrics.profile through run_local_cell): a tpd
RETR cell under perf and a pyftpdlib RETR cell under py-spy, checked against references
the profilers do not produce: the cgroup's own CPU counters, tpd's sendfile budget per
call, and a separate ``perf stat`` count of the sendfile tracepoint over the server's life.
Needs root, /usr/bin/perf, tracefs and a cgroup v2 for the server (skipped otherwise)."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import tempfile

import pytest

from runner.cell.local import run_local_cell
from runner.metrics.profile import PERF, cgroup_name, ensure_tracefs
from runner.spec.model import parse_spec
from runner.spec.request import ServerRequest
from runner.store.models import Cell
from tests.runner.support import check_or_skip
from tests.support.skips import machine_lacks
from tests.support.steal import Steal, assert_on_cpu_matches

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

MIB = 1 << 20
#: tpd sends at most this many bytes per sendfile call (SEND_BUDGET, servers/tpd/src/tpd.h).
TPD_SEND_BUDGET = 4 << 20


def _needs_perf() -> None:
    if os.geteuid() != 0:
        machine_lacks("root (perf -a on a cgroup)")
    if not os.access(PERF, os.X_OK):
        pytest.skip(f"{PERF} missing: apt-get install linux-perf (scripts/apt-packages.txt)")
    why = ensure_tracefs()
    if why:
        machine_lacks(f"tracepoints: {why}")


class _StatHandle:
    """The backend's handle, with this test's own ``perf stat`` of the sendfile tracepoint
    on the server's cgroup from start to stop."""

    def __init__(self, inner) -> None:
        self._inner = inner
        cg = inner.cgroup_cpu()
        name = cgroup_name(cg.where) if cg is not None else None
        if name is None:
            inner.stop()
            machine_lacks("a cgroup v2 for the local server")
        self.out = tempfile.NamedTemporaryFile(suffix=".csv", delete=False).name
        self.proc = subprocess.Popen([PERF, "stat", "-a", "-x,", "-e", "syscalls:sys_enter_sendfile64", "-G", name,
                                      "-o", self.out], stdin=subprocess.DEVNULL)
        self.sendfiles: int | None = None

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(30)
        text = open(self.out).read()
        os.unlink(self.out)
        m = re.search(r"^(\d+),,syscalls:sys_enter_sendfile64", text, re.M)
        self.sendfiles = int(m.group(1)) if m else 0
        self._inner.stop()

    def __getattr__(self, name: str):
        return getattr(self._inner, name)


class _StatBackend:
    def __init__(self, inner) -> None:
        self._inner = inner
        self.name = inner.name
        self.handles: list[_StatHandle] = []

    def check(self, req):
        return self._inner.check(req)

    def start(self, req, *, cpu=None):
        h = _StatHandle(self._inner.start(req, cpu=cpu))
        self.handles.append(h)
        return h


def _cell(backend, server: str, **params):
    check_or_skip(backend, ServerRequest(server))
    spec = parse_spec({"name": "profile", "repeats": 1, "warmup": True, "backend": "local", "profile": True,
                       "servers": [{"name": server}], "workloads": [{"name": "retr", "params": params}]})
    srv = spec.servers[0]
    cell = Cell(id=1, seq=0, server=server, server_label=srv.display(), server_spec=srv.model_dump(mode="json"),
                workload="retr", params=spec.workloads[0].params.model_dump(mode="json"), params_key="",
                repeat=1, profiled=True)
    return run_local_cell(cell, spec, backend)


def _rows(out):
    return {(s.metric, s.stat): s.value for s in out.samples}


def test_tpd_retr_profile_names_tpd_and_the_kernel_sendfile_path(backend):
    _needs_perf()
    spy = _StatBackend(backend)
    with Steal() as steal:
        out = _cell(spy, "tpd", clients=4, transfer_size=64 * MIB, duration=4.0)
    assert out.status == "done", out.error
    prof = out.profile
    assert prof is not None and prof.profiler == "perf" and prof.rate_hz == 99
    # tpd's own functions by name, and the kernel's sendfile path under them
    for frame in ("main", "ev_run", "ftp_data_event", "io_send_file", "[k] do_sendfile", "[k] tcp_sendmsg"):
        assert f";{frame};" in prof.on_cpu or f";{frame} " in prof.on_cpu, frame
    assert any("io_send_file" in line and "[k] do_sendfile" in line for line in prof.on_cpu.splitlines())
    # on-CPU seconds from the samples against the cgroup's own counter (30% plus two samples;
    # above it also the host's steal over the cell, tests/support/steal.py)
    usage = _rows(out)[("server_cpu", "usage")]
    assert usage > 0.1
    assert_on_cpu_matches(prof, usage, steal, 0.3, 2)
    # sendfile calls: at least bytes / SEND_BUDGET, at most the sendfile tracepoint's own count
    # over the server's whole life (warm-up included)
    calls = {r.name: r for r in prof.syscalls}
    assert "sendfile" in calls, [r.name for r in prof.syscalls]
    sendfile = calls["sendfile"]
    assert out.result is not None
    lower = out.result.bytes // TPD_SEND_BUDGET
    upper = spy.handles[0].sendfiles
    assert upper is not None and lower <= sendfile.count <= upper, (lower, sendfile.count, upper)
    assert sendfile.total_s is not None and 0 < sendfile.total_s <= prof.duration_s * 2
    # off-CPU: a single-threaded server's time is on CPU, asleep or waiting for a CPU: at most the phase
    assert prof.off_cpu_s is not None and 0 < prof.off_cpu_s <= prof.duration_s * 1.05
    # one thread is on a CPU at most the wall time (samples / rate: two samples of
    # quantization). On + off is not bounded by the phase: the recording also spans the
    # untimed teardown, and a switch-out not seen coming back counts to its end (notes)
    assert prof.on_cpu_s <= prof.duration_s * 1.1 + 2 / prof.rate_hz
    assert prof.off_cpu and "[k] __schedule" in prof.off_cpu


def test_pyftpdlib_retr_profile_has_python_handler_frames(backend):
    _needs_perf()
    out = _cell(backend, "pyftpdlib", clients=4, transfer_size=32 * MIB, duration=3.0)
    assert out.status == "done", out.error
    prof = out.profile
    assert prof is not None and prof.profiler == "py-spy", prof
    assert "handle_write" in prof.on_cpu and "pyftpdlib/" in prof.on_cpu
    assert "initiate_sendfile" in prof.on_cpu or "ftp_RETR" in prof.on_cpu
    assert "--password" not in prof.on_cpu  # the command line is not stored
    # py-spy counts samples of running threads: never more than one thread's wall time here
    assert 0 < prof.on_cpu_s <= prof.duration_s * 1.1
    assert any(r.name == "sendfile" for r in prof.syscalls)
