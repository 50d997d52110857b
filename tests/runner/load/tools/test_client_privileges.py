"""Client tools never run as root: as root, clientspawn's children and run_child's tool
run as the lab user (XFERLAB_CLIENT_USER, runner.load.tools.labuser) with no supplementary
group and no descriptor but 0-2; the job list (passwords) is out of their reach; real
lftp, wget, curl, wrk and h2load runs still pass that way; a missing user is a clear
error. The drop tests need root (skipped otherwise: then no drop happens)."""
from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest

from runner.catalogue.workloads import WorkloadParams
from runner.load.registry import DriverUnavailable, get_driver
from runner.load.target import Target
from runner.load.tools.child import run_child
from runner.load.tools.labuser import client_user
from runner.load.tools.spawn import Job, build_spawner, run_clients
from tests.runner.load.tools.test_ftp_clients import MIB, check_result, pyftpd  # noqa: F401 - pyftpd: a fixture
from tests.runner.support import assert_gone, driver_or_skip
from tests.support.httpserver import HttpTestServer
from tests.support.pyftpd import PASSWORD, USER
from tests.support.skips import lacks_if, not_root

root_only = lacks_if(not_root(), "root: the drop to the lab user happens only as root")
IDS_AND_FDS = ["sh", "-c", "id -u; id -g; id -G; ls /proc/self/fd"]


@pytest.fixture
def lab():
    """The lab user's passwd entry; the test is skipped when it is not there (made by the
    install step: bash scripts/install.sh)."""
    try:
        return pwd.getpwnam("xferlab-client")
    except KeyError:
        pytest.skip("no user xferlab-client here: bash scripts/install.sh (as root) makes it")


@pytest.fixture
def shared():
    """A scratch folder under /tmp any user may write (sticky, like /tmp) and reach."""
    d = Path(tempfile.mkdtemp(prefix="xferlab-privtest-"))
    d.chmod(0o1777)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _jobs(folder: Path, argvs: list[list[str]]) -> list[Job]:
    out = []
    for i, argv in enumerate(argvs):
        (folder / f"c{i}").mkdir()
        out.append(Job(argv, str(folder / f"c{i}")))
    return out


def _check_ids_and_fds(text: str, lab) -> None:
    """The output of IDS_AND_FDS: the lab user's uid and gid, its group only, and only
    the descriptors 0-2 (plus the one ls opens to read the folder)."""
    uid, gid, groups, *fds = text.split()
    assert (int(uid), int(gid)) == (lab.pw_uid, lab.pw_gid)
    assert groups.split() == [str(lab.pw_gid)] and "0" not in text.splitlines()[2].split()
    assert sorted(fds, key=int) == ["0", "1", "2", "3"], fds


@root_only
def test_clientspawn_children_run_as_the_lab_user_with_only_fds_0_1_2(tmp_path, lab):
    run = run_clients(_jobs(tmp_path, [IDS_AND_FDS] * 3), folder=tmp_path, bound_s=30, spawner=build_spawner())
    for c in run.clients:
        assert c.returncode == 0, c.stderr_tail()
        _check_ids_and_fds(c.stdout.read_text(), lab)


@root_only
def test_client_cannot_read_the_job_list_or_other_clients_output(tmp_path, lab):
    secret = "s3cret-password-of-client-1"
    run = run_clients(_jobs(tmp_path, [["sh", "-c", "cat ../jobs.txt; cat ../1.out; ls .. && echo listed"],
                                       ["echo", secret]]), folder=tmp_path, bound_s=30, spawner=build_spawner())
    peek, other = run.clients
    assert other.returncode == 0 and other.stdout.read_text().strip() == secret
    out, err = peek.stdout.read_text(), peek.stderr.read_text()
    assert secret not in out and "listed" not in out
    assert err.count("Permission denied") == 3, err
    assert (tmp_path / "jobs.txt").stat().st_mode & 0o777 == 0o600


@root_only
def test_parent_death_signal_survives_the_drop(tmp_path, lab):
    """A client that left clientspawn's process group (setsid: the group kill misses it)
    still dies with clientspawn: PR_SET_PDEATHSIG is set again after the change of user,
    which clears it."""
    jobs = _jobs(tmp_path, [["setsid", "sh", "-c", "echo $$ > pid; exec sleep 60"]])
    pid_file = tmp_path / "c0" / "pid"
    errors: list[BaseException] = []

    def runner() -> None:
        try:
            run_clients(jobs, folder=tmp_path, bound_s=60, spawner=build_spawner())
        except Exception as e:  # noqa: BLE001 - clientspawn is killed: LoadError expected
            errors.append(e)

    t = threading.Thread(target=runner, daemon=True)
    t.start()
    for _ in range(400):  # bounded: 20 s
        if pid_file.exists() and pid_file.read_text().strip():
            break
        time.sleep(0.05)
    pid = int(pid_file.read_text())
    assert Path(f"/proc/{pid}/status").read_text().split("Uid:")[1].split()[0] == str(lab.pw_uid)
    spawner_pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    assert os.getpgid(pid) != os.getpgid(spawner_pid)
    os.kill(spawner_pid, signal.SIGKILL)
    assert_gone([pid], within_s=3.0)
    t.join(30)


@root_only
def test_a_failed_drop_refuses_to_exec(shared, lab):
    """clientspawn run by the lab user itself cannot drop to another user: setgroups fails,
    the client is not started (exit 125, the reason on its stderr)."""
    exe = shared / "clientspawn"
    shutil.copy(build_spawner(), exe)
    exe.chmod(0o755)
    cwd = shared / "c0"
    cwd.mkdir()
    os.chown(cwd, lab.pw_uid, lab.pw_gid)
    jobs = shared / "jobs.txt"
    jobs.write_text(f"{cwd}\t{shared}/0.out\t{shared}/0.err\ttouch\t{cwd}/ran\n")
    os.chown(jobs, lab.pw_uid, lab.pw_gid)
    p = subprocess.run([str(exe), "-u", "1", "-g", "1", "5000", str(jobs)], capture_output=True, text=True,
                       timeout=30, user=lab.pw_uid, group=lab.pw_gid, extra_groups=[])
    assert p.returncode == 0, p.stderr
    status = int(p.stdout.split("\n")[1].split()[5])
    assert os.waitstatus_to_exitcode(status) == 125
    assert "setgroups" in (shared / "0.err").read_text() and not (cwd / "ran").exists()


@root_only
def test_clientspawn_refuses_root_ids(tmp_path):
    p = subprocess.run([str(build_spawner()), "-u", "0", "-g", "0", "1000", str(tmp_path / "none")],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 2 and "bad -u 0" in p.stderr


@root_only
def test_run_child_runs_the_tool_as_the_lab_user(lab):
    run = run_child(IDS_AND_FDS, netns=None, timeout_s=30)
    assert run.returncode == 0, run.stderr
    _check_ids_and_fds(run.stdout, lab)


@root_only
def test_missing_lab_user_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("XFERLAB_CLIENT_USER", "xferlab-no-such-user")
    with pytest.raises(DriverUnavailable, match=r"XFERLAB_CLIENT_USER='xferlab-no-such-user'.*make install"):
        run_clients(_jobs(tmp_path, [["true"]]), folder=tmp_path, bound_s=5, spawner=build_spawner())
    with pytest.raises(DriverUnavailable, match="XFERLAB_CLIENT_USER"):
        run_child(["true"], netns=None, timeout_s=5)
    for name in ("wget", "lftp", "curl", "wrk", "h2load"):
        d = get_driver(name)
        if shutil.which(d.binary if hasattr(d, "binary") else name):
            with pytest.raises(DriverUnavailable, match="XFERLAB_CLIENT_USER"):
                d.check()
    monkeypatch.setenv("XFERLAB_CLIENT_USER", "root")
    with pytest.raises(DriverUnavailable, match="must not run as root"):
        client_user()


def test_no_drop_when_not_root():
    if os.geteuid() == 0:
        assert client_user() is not None
    else:
        assert client_user() is None


def _wrappers(folder: Path, log: Path, tools: list[str]) -> str:
    """Scripts named like ``tools`` in ``folder`` that log ``TOOL UID GID GROUPS`` to
    ``log`` and exec the real tool; returns a PATH with ``folder`` first."""
    for tool in tools:
        real = shutil.which(tool)
        if real is None:
            pytest.skip(f"{tool} not installed")
        w = folder / tool
        w.write_text(f'#!/bin/sh\necho "{tool} $(id -u) $(id -g) $(id -G)" >> {log}\nexec {real} "$@"\n')
        w.chmod(0o755)
    return f"{folder}:{os.environ['PATH']}"


def _logged(log: Path, lab) -> list[str]:
    lines = log.read_text().splitlines()
    assert lines
    for line in lines:
        _, uid, gid, *groups = line.split()
        assert (int(uid), int(gid), groups) == (lab.pw_uid, lab.pw_gid, [str(lab.pw_gid)]), line
    return [line.split()[0] for line in lines]


@root_only
@pytest.mark.parametrize(("name", "workload"), [("wget", "retr_concurrent"), ("curl", "stor_concurrent"),
                                               ("lftp", "stor_concurrent"), ("lftp", "retr")])
def test_real_ftp_clients_run_as_the_lab_user(pyftpd, shared, lab, monkeypatch, name, workload):  # noqa: F811
    monkeypatch.setenv("PATH", _wrappers(shared, shared / "ids.log", [name]))
    d = driver_or_skip(name)
    port, home = pyftpd
    target = Target("127.0.0.1", port, USER, PASSWORD, root=home)
    if workload == "retr":
        r = d.run(workload, target, WorkloadParams(transfer_size=MIB, duration=0.2))
        assert r.errors == {} and r.ops >= 1 and r.bytes == r.ops * MIB, r.notes
    else:
        r = d.run(workload, target, WorkloadParams(clients=3, file_size=MIB))
        check_result(r, workload, 3, MIB)
    assert _logged(shared / "ids.log", lab).count(name) == r.ops


@root_only
def test_wrk_and_h2load_run_as_the_lab_user(tmp_path, shared, lab, monkeypatch):
    monkeypatch.setenv("PATH", _wrappers(shared, shared / "ids.log", ["wrk", "h2load"]))
    with HttpTestServer(tmp_path) as srv:
        target = Target(host="127.0.0.1", port=1, user="-", password="-", http_port=srv.port)
        w = driver_or_skip("wrk").run("http_upload", target, WorkloadParams(clients=2, duration=1, body_size=1000,
                                                                             method="put"))
        h = driver_or_skip("h2load").run("http_upload", target, WorkloadParams(clients=2, duration=0.5,
                                                                                body_size=1000, method="post"))
    assert w.successful > 0 and w.network_failed == 0 and h.successful > 0 and h.network_failed == 0
    assert sorted(_logged(shared / "ids.log", lab)) == ["h2load", "wrk"]


@root_only
def test_client_reads_the_ca_certificate_not_the_private_keys(shared, lab):
    """A campaign's certificate folder reachable by the lab user (as a client verifying
    FTPS/HTTPS would need): the CA and server certificates are readable, the keys (0600,
    root's) are not."""
    from runner.tls.certs import make_certificates

    tls = make_certificates(shared / "tls")
    (shared / "tls").chmod(0o755)
    names = ["ca.pem", "server.pem", "ca.key", "server.key", "server-chain.pem"]
    run = run_clients(_jobs(shared, [["cat", str(tls.ca_cert.parent / n)] for n in names]), folder=shared,
                      bound_s=30, spawner=build_spawner())
    assert [c.returncode for c in run.clients] == [0, 0, 1, 1, 1]
    assert "BEGIN CERTIFICATE" in run.clients[0].stdout.read_text()
    assert all("Permission denied" in c.stderr.read_text() for c in run.clients[2:])
