"""The real-client drivers lftp, wget and curl against real FTP servers on loopback
(pyftpdlib here; tpd in test_ftp_clients_tpd.py): 4 processes, 1 MiB each."""
from __future__ import annotations

import os
import select
import shutil
import socket
import subprocess
import sys
import threading

import psutil
import pytest

from runner.catalogue.workloads import WorkloadParams
from runner.load.registry import DriverUnavailable, get_driver
from runner.load.target import Target
from tests.runner.support import driver_or_skip
from tests.support import SUPPORT_DIR
from tests.support.pyftpd import PASSWORD, USER, start_pyftpd, stop
from tests.support.skips import lacks_if, not_root

MIB = 1 << 20
SERVER = SUPPORT_DIR / "pyftpd_server.py"
RUNS = [("wget", "retr_concurrent"), ("curl", "retr_concurrent"), ("curl", "stor_concurrent"),
        ("lftp", "retr_concurrent"), ("lftp", "stor_concurrent")]


@pytest.fixture(scope="module")
def pyftpd(tmp_path_factory):
    home = tmp_path_factory.mktemp("clienthome")
    proc, port = start_pyftpd(home)
    try:
        yield port, home
    finally:
        stop(proc)


def check_result(r, workload: str, n: int, size: int) -> None:
    """Shared checks of a clean run of ``n`` clients of ``size`` bytes."""
    assert r.errors == {}, r.notes
    assert r.workload == workload and r.ops == n and r.bytes == n * size
    assert len(r.clients) == n and len(r.latencies_ms) == n
    for c in r.clients:
        assert c.ok and c.bytes == size and 0 < c.seconds <= r.elapsed_s + 1e-6
        assert c.max_rss > 1 << 20 and c.minor_faults > 0
    assert r.client_cpu_user_s + r.client_cpu_system_s > 0
    assert r.started_at is not None and r.ended_at == pytest.approx(r.started_at + r.elapsed_s)


@pytest.mark.parametrize(("name", "workload"), RUNS)
def test_pyftpdlib(pyftpd, name, workload):
    d = driver_or_skip(name)
    port, home = pyftpd
    before = set(os.listdir(home))
    r = d.run(workload, Target("127.0.0.1", port, USER, PASSWORD, root=home), WorkloadParams(clients=4, file_size=MIB))
    check_result(r, workload, 4, MIB)
    assert not {f for f in os.listdir(home) if f.startswith("xferlab-stor-")} - before  # uploads deleted
    assert d.version() not in ("", "unknown")


@pytest.mark.parametrize(("name", "workload"), [("wget", "retr"), ("curl", "retr"), ("curl", "stor"),
                                               ("lftp", "retr"), ("lftp", "stor")])
def test_single_stream_one_process_per_transfer(pyftpd, name, workload):
    """``retr`` / ``stor``: one process per transfer of transfer_size, in a row for duration s."""
    d = driver_or_skip(name)
    port, home = pyftpd
    r = d.run(workload, Target("127.0.0.1", port, USER, PASSWORD, root=home),
              WorkloadParams(transfer_size=MIB, duration=0.3))
    assert r.errors == {}, r.notes
    assert r.ops >= 2 and r.bytes == r.ops * MIB and len(r.clients) == r.ops == len(r.latencies_ms)
    assert r.elapsed_s == pytest.approx(sum(c.seconds for c in r.clients))
    assert r.ended_at - r.started_at >= r.elapsed_s * 0.99  # the processes ran one after another
    assert all(c.max_rss > 1 << 20 for c in r.clients) and r.client_cpu_user_s + r.client_cpu_system_s > 0
    assert not [f for f in os.listdir(home) if f.startswith("xferlab-stor-")]
    from runner.cell.samples import phase_samples

    metrics = {(s.metric, s.stat) for s in phase_samples(r)}
    assert ("client_max_rss", "max") in metrics and ("fairness", "jain") not in metrics  # one process per repeat


def test_single_stream_stops_at_the_first_failure(pyftpd):
    port, home = pyftpd
    r = driver_or_skip("curl").run("retr", Target("127.0.0.1", port, USER, "wrong", root=home),
                            WorkloadParams(transfer_size=1000, duration=5))
    assert r.errors == {"client_exit": 1} and r.ops == 0 and len(r.clients) == 1


@pytest.mark.parametrize("name", ["curl", "lftp"])
def test_without_a_local_root(pyftpd, name):
    """Fixture uploaded by STOR, uploads checked by SIZE and deleted by DELE over FTP."""
    d = driver_or_skip(name)
    port, home = pyftpd
    t = Target("127.0.0.1", port, USER, PASSWORD, root=None)
    check_result(d.run("retr_concurrent", t, WorkloadParams(clients=2, file_size=5000)), "retr_concurrent", 2, 5000)
    check_result(d.run("stor_concurrent", t, WorkloadParams(clients=2, file_size=5000)), "stor_concurrent", 2, 5000)
    assert not [f for f in os.listdir(home) if f.startswith("xferlab-stor-")]


def test_lftp_options_reach_lftp(pyftpd):
    d = driver_or_skip("lftp")
    port, home = pyftpd
    p = WorkloadParams(clients=2, file_size=MIB, client_options={"xfer:buffer-size": "0x20000", "net:socket-buffer": 0})
    argv = d.argv("lftp", "retr_concurrent", Target("127.0.0.1", port, USER, PASSWORD), p, "x.bin", "/dev/null")
    assert "set xfer:buffer-size 131072; set net:socket-buffer 0;" in argv[-1]  # canonical: decimal
    r = d.run("retr_concurrent", Target("127.0.0.1", port, USER, PASSWORD, root=home), p)
    check_result(r, "retr_concurrent", 2, MIB)
    assert "lftp options: xfer:buffer-size=0x20000, net:socket-buffer=0" in r.notes


@pytest.mark.parametrize("name", ["wget", "curl", "lftp"])
def test_wrong_password_is_client_exit_with_stderr(pyftpd, name):
    """Each client on its own: a missing wget skips (fails under CI) its own case only."""
    port, home = pyftpd
    d = driver_or_skip(name)
    r = d.run("retr_concurrent", Target("127.0.0.1", port, USER, "wrong", root=home),
              WorkloadParams(clients=2, file_size=1000))
    assert r.errors == {"client_exit": 2} and r.ops == 0 and r.bytes == 0, (name, r.notes)
    assert all(not c.ok and c.bytes == 0 for c in r.clients)
    note = next(n for n in r.notes if n.startswith("first client_exit"))
    assert f"{name} client" in note and "exit status" in note and "stderr: " in note, note
    assert "530" in note or "Login incorrect" in note or "Access denied" in note, note


@pytest.mark.parametrize("name", ["wget", "curl", "lftp"])
def test_refused_connection_fails_fast(free_port, tmp_path, name):
    """Nothing listens: every client exits non-zero at once (lftp does not retry), and
    the note says why."""
    r = driver_or_skip(name).run("retr_concurrent", Target("127.0.0.1", free_port, USER, PASSWORD, root=tmp_path),
                          WorkloadParams(clients=2, file_size=10))
    assert r.errors == {"client_exit": 2} and r.elapsed_s < 20, r.notes
    note = next(n for n in r.notes if n.startswith("first client_exit")).lower()
    assert "refused" in note or "connect" in note, note


@pytest.mark.parametrize("name", ["wget", "curl", "lftp"])
def test_silent_server_clients_killed_at_the_bound(tmp_path, name):
    """A server that accepts and never greets: every client hangs, is killed at
    phase_timeout and counted as a timeout; no client process is left."""
    d = driver_or_skip(name)
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    held: list[socket.socket] = []
    stop_evt = threading.Event()

    def accept() -> None:
        srv.settimeout(0.2)
        for _ in range(200):  # bounded: 40 s at most
            if stop_evt.is_set():
                return
            try:
                held.append(srv.accept()[0])
            except OSError:
                pass

    th = threading.Thread(target=accept, daemon=True)
    th.start()
    mine = {p.pid for p in psutil.Process().children(recursive=True)}
    try:
        r = d.run("retr_concurrent", Target("127.0.0.1", srv.getsockname()[1], USER, PASSWORD, root=tmp_path),
                  WorkloadParams(clients=3, file_size=10, phase_timeout=1.0))
    finally:
        stop_evt.set()
        th.join(5)
        for s in held:
            s.close()
        srv.close()
    assert r.errors == {"timeout": 3} and r.ops == 0, r.notes
    assert any(n.startswith("first timeout") for n in r.notes)
    assert all(0.9 < c.seconds < 10 for c in r.clients)
    left = [p for p in psutil.Process().children(recursive=True) if p.pid not in mine and p.status() != "zombie"]
    assert not left, left


def test_missing_binary_message(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    for name in ("lftp", "wget", "curl"):
        with pytest.raises(DriverUnavailable, match=f"{name}: binary not found in PATH; apt-get install {name}"):
            get_driver(name).check()
        with pytest.raises(DriverUnavailable, match=f"apt-get install {name}"):
            get_driver(name).run("retr_concurrent", Target("127.0.0.1", 1, USER, PASSWORD), WorkloadParams())


def test_refusals():
    wget, curl, lftp = (get_driver(n) for n in ("wget", "curl", "lftp"))
    assert "cannot upload" in wget.refuses("stor_concurrent", WorkloadParams())
    assert "epsv" in wget.refuses("retr_concurrent", WorkloadParams(passive="epsv"))
    assert curl.refuses("retr_concurrent", WorkloadParams(passive="epsv")) is None
    assert "same_file" in curl.refuses("stor_concurrent", WorkloadParams(same_file=True))
    assert curl.refuses("retr_concurrent", WorkloadParams(login_mode="window")) is None
    assert "unknown lftp option 'xfer:no-such-thing'; lftp takes: xfer:buffer-size, " in lftp.refuses(
        "retr_concurrent", WorkloadParams(client_options={"xfer:no-such-thing": "1"}))
    assert "xfer:clobber is set by the lftp driver itself" in lftp.refuses(
        "retr_concurrent", WorkloadParams(client_options={"xfer:clobber": "off"}))
    assert "unknown lftp option '--x'" in lftp.refuses("retr_concurrent", WorkloadParams(client_options={"--x": ""}))
    assert "not a whole number (decimal or 0x hex)" in lftp.refuses(
        "retr_concurrent", WorkloadParams(client_options={"xfer:buffer-size": "1; !rm"}))
    assert lftp.refuses("retr_concurrent", WorkloadParams(client_options={"xfer:buffer-size": "0x20000"})) is None
    assert "unknown curl option '--limit-rate'" in curl.refuses(
        "retr_concurrent", WorkloadParams(client_options={"--limit-rate": "1M"}))
    assert "takes no value" in curl.refuses("retr_concurrent",
                                            WorkloadParams(client_options={"--tcp-nodelay": "3"}))
    assert "not a whole number" in wget.refuses("retr_concurrent", WorkloadParams(client_options={"--tries": ""}))
    assert curl.refuses("stor_concurrent", WorkloadParams(client_options={"--tcp-nodelay": ""})) is None
    with pytest.raises(ValueError, match="not 'login'"):
        curl.run("login", Target("127.0.0.1", 1, USER, PASSWORD), WorkloadParams())
    with pytest.raises(ValueError, match="driver wget runs retr, retr_concurrent, not 'stor_concurrent'"):
        wget.run("stor_concurrent", Target("127.0.0.1", 1, USER, PASSWORD), WorkloadParams())


def test_curl_options_are_known_to_this_curl():
    if shutil.which("curl") is None:
        pytest.skip("curl not installed")
    from runner.load.tools.curl import OPTIONS

    text = subprocess.run(["curl", "--help", "all"], capture_output=True, text=True, timeout=10).stdout
    assert not [o for o in OPTIONS if f" {o}" not in text]


def test_wget_options_are_known_to_this_wget():
    if shutil.which("wget") is None:
        pytest.skip("wget not installed")
    from runner.load.tools.wget import OPTIONS

    text = subprocess.run(["wget", "--help"], capture_output=True, text=True, timeout=10).stdout
    assert not [o for o in OPTIONS if o not in text]


@lacks_if(not_root(), "root: unshare --net needs CAP_SYS_ADMIN")
@pytest.mark.skipif(shutil.which("unshare") is None or shutil.which("ip") is None,
                    reason="unshare and ip not installed (util-linux, iproute2)")
def test_in_a_network_namespace(tmp_path):
    d = driver_or_skip("curl")
    proc = subprocess.Popen(["unshare", "--net", "sh", "-c", 'ip link set lo up && exec "$0" "$@"',
                             sys.executable, str(SERVER), str(tmp_path), USER, PASSWORD],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        r, _, _ = select.select([proc.stdout], [], [], 15)
        line = proc.stdout.readline() if r else ""
        assert line.startswith("PORT "), proc.stderr.read()[:2000] if proc.poll() is not None else line
        t = Target("127.0.0.1", int(line.split()[1]), USER, PASSWORD, root=tmp_path, netns=f"/proc/{proc.pid}/ns/net")
        check_result(d.run("retr_concurrent", t, WorkloadParams(clients=2, file_size=MIB)), "retr_concurrent", 2, MIB)
        check_result(d.run("stor_concurrent", t, WorkloadParams(clients=2, file_size=MIB)), "stor_concurrent", 2, MIB)
        # without joining it: nothing listens on that port here
        out = d.run("retr_concurrent", Target("127.0.0.1", t.port, USER, PASSWORD, root=tmp_path),
                    WorkloadParams(clients=2, file_size=MIB))
        assert out.errors == {"client_exit": 2}
    finally:
        proc.kill()
        proc.wait(10)


def test_loadgen_carries_the_process_figures(pyftpd, capsys):
    """``xferlab loadgen --driver curl`` (a client process of a split phase, or a client
    host) hands each process's max RSS and page faults over in its JSON document."""
    import argparse
    import json

    from runner.multihost.loadgen import add_arguments, main, result_from_json

    driver_or_skip("curl")
    port, _ = pyftpd
    p = argparse.ArgumentParser()
    add_arguments(p)
    rc = main(p.parse_args(["--host", "127.0.0.1", "--port", str(port), "--user", USER, "--password", PASSWORD,
                            "--workload", "retr_concurrent", "--driver", "curl",
                            "--params", json.dumps({"clients": 2, "file_size": 4096})]))
    doc = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert rc == 0 and doc["driver"] == "curl", doc
    r = result_from_json(doc["result"])
    assert r.bytes == 2 * 4096 and all(c.max_rss > 1 << 20 and c.minor_faults > 0 for c in r.clients)


@pytest.mark.parametrize(("name", "prefix"), [("lftp", "LFTP | Version "), ("wget", "GNU Wget "),
                                             ("curl", "curl ")])
def test_versions_recorded_like_wrk(name, prefix):
    from runner.load.registry import driver_record

    driver_or_skip(name)
    rec = driver_record(name)
    assert rec["name"] == name and rec["version"].startswith(prefix), rec
    assert "Copyright" not in rec["version"]
