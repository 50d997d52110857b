"""Fixtures for the tpd tests: build the server with make, run it on free
loopback ports against a temporary home, and check on teardown that it
exits 0 on SIGTERM and that the sanitizers reported nothing.

The tests run the AddressSanitizer + UBSan build (build/tpd-asan) unless
TPD_TEST_BINARY=plain is set.
"""
from __future__ import annotations

import os
import resource
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from tests.support.ports import free_ports
from tests.tpd.tls_support import TlsFiles, make_tls_files

REPO = Path(__file__).resolve().parents[2]
TPD_DIR = REPO / "servers" / "tpd"
BUILD = TPD_DIR / "build"
PASSWORD_HASH_SECRET = "hashpw"
PASSWORD_HASH = ("$6$tpdtestsalt$fd.cIRmqhFaTewY2ZkMJ0XhYtWcc3GUQr5yg2IoGVXkOzArnd1"
                 "ZKOC0BQfi4TM8mUQp8U5alfqz/x./RK9XAC0")


def raise_nofile(target: int = 20000) -> int:
    """Raise this process's RLIMIT_NOFILE soft limit (bounded by hard)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(target, hard) if hard != resource.RLIM_INFINITY else target
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


@pytest.fixture(scope="session")
def tpd_binary() -> Path:
    """Build tpd (and tpd-asan) once per session and return the binary."""
    subprocess.run(["make", "-C", str(TPD_DIR), "all", "asan"], check=True,
                   capture_output=True, timeout=300)
    if os.environ.get("TPD_TEST_BINARY") == "plain":
        return BUILD / "tpd"
    return BUILD / "tpd-asan"


class TpdServer:
    """A running tpd instance with its ports, home and log."""

    def __init__(self, binary: Path, tmp: Path, *, http: bool = True,
                 extra: list[str] | None = None, first_user_ro: bool = False,
                 prefix: list[str] | None = None, asan_options: str = "",
                 tls: TlsFiles | None = None):
        """Start tpd from `binary` with its home under `tmp`.

        tls: certificate files; with them tpd gets --tls-cert/--tls-key and
        an implicit-FTPS (``ftps_port``) and an HTTPS (``https_port``, with
        http) listener; ``self.tls`` keeps them (None: no TLS).
        extra: more tpd options; asan_options: appended to ASAN_OPTIONS;
        prefix: a command the server is run under
        that execs it (e.g. ``["prlimit", "--nofile=40:40", "--"]``), so
        ``self.proc.pid`` is the server's pid.  Raises RuntimeError if the
        server does not accept FTP connections within 15 s.
        """
        self.tmp = tmp
        self.home = tmp / "home"
        self.home.mkdir(exist_ok=True)
        self.rohome = tmp / "rohome"
        self.rohome.mkdir(exist_ok=True)
        self.outside = tmp / "outside"
        self.outside.mkdir(exist_ok=True)
        (self.outside / "secret.txt").write_text("top secret\n")
        hashed = PASSWORD_HASH  # crypt(3) SHA-512 of PASSWORD_HASH_SECRET
        lines = [
            f"alice:{{plain}}secret:{self.home}:rw",
            f"bob:{{plain}}builder:{self.rohome}:r",
            f"carol:{hashed}:{self.home}:rw",
        ]
        if first_user_ro:
            lines.insert(0, lines.pop(1))
        self.users = tmp / "users.txt"
        self.users.write_text("\n".join(lines) + "\n")
        self.tls = tls
        # a port found free may be taken before tpd binds it (other tests and
        # programs on this host): start again with new ports, at most 3 times
        for attempt in range(3):
            self._start(binary, http, tls, extra, prefix, asan_options)
            try:
                self._wait_ready()
                return
            except RuntimeError as e:
                if attempt == 2 or "Address already in use" not in str(e):
                    raise
                self.log.close()

    def _start(self, binary: Path, http: bool, tls: TlsFiles | None,
               extra: list[str] | None, prefix: list[str] | None,
               asan_options: str) -> None:
        """Pick ports and start the tpd process (see __init__)."""
        ports = free_ports(4)
        self.ftp_port = ports[0]
        self.http_port = ports[1] if http else None
        self.ftps_port = ports[2] if tls else None
        self.https_port = ports[3] if tls and http else None
        self.log_path = self.tmp / f"tpd-{self.ftp_port}.log"
        args = [str(binary), "--ftp-listen", f"127.0.0.1:{self.ftp_port}",
                "--users", str(self.users), "--pasv-ports", "40000-44999",
                "--max-conns", "5000", "--idle-timeout", "60",
                "--log-level", "info"]
        if http:
            args += ["--http-listen", f"127.0.0.1:{self.http_port}"]
        if tls:
            args += ["--tls-cert", str(tls.cert), "--tls-key", str(tls.key),
                     "--ftps-listen", f"127.0.0.1:{self.ftps_port}"]
            if http:
                args += ["--https-listen", f"127.0.0.1:{self.https_port}"]
        args += extra or []
        args = list(prefix or []) + args
        self.args = args
        self.log = open(self.log_path, "wb")
        env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:exitcode=23"
                   + (":" + asan_options if asan_options else ""),
                   UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT,
                                     env=env)

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("tpd exited early:\n" + self.log_text())
            try:
                with socket.create_connection(("127.0.0.1", self.ftp_port), timeout=1) as s:
                    s.recv(100)
                self.wait_no_clients()       # the probe's close has landed: tests start from no client
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("tpd did not start:\n" + self.log_text())

    def log_text(self) -> str:
        self.log.flush()
        return self.log_path.read_text(errors="replace")

    def rss_bytes(self) -> int:
        """Resident set size of the server process (VmRSS), in bytes."""
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        raise RuntimeError("no VmRSS for pid %d" % self.proc.pid)

    def fd_count(self) -> int:
        return len(os.listdir(f"/proc/{self.proc.pid}/fd"))

    def socket_count(self) -> int:
        """Sockets the server process holds (its listeners and its connections)."""
        n = 0
        for fd in os.listdir(f"/proc/{self.proc.pid}/fd"):
            try:
                n += os.readlink(f"/proc/{self.proc.pid}/fd/{fd}").startswith("socket:")
            except OSError:
                pass                     # closed while listed
        return n

    def wait_no_clients(self, timeout: float = 10.0) -> None:
        """Wait until the server holds no socket but its listeners (FTP, and HTTP, FTPS and
        HTTPS when started with them): every client's close has been seen and answered by
        the server's own close. Polls every 10 ms for at most ``timeout`` seconds; raises
        AssertionError with the count of sockets still open after that."""
        listeners = sum(p is not None for p in (self.ftp_port, self.http_port, self.ftps_port, self.https_port))
        deadline = time.monotonic() + timeout
        while (n := self.socket_count()) > listeners and time.monotonic() < deadline:
            time.sleep(0.01)
        assert n <= listeners, f"tpd still holds {n - listeners} client sockets after {timeout} s"

    def stop(self) -> int:
        """SIGTERM the server; return its exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.log.close()
        return self.proc.returncode


def _check_clean(srv: TpdServer) -> None:
    rc = srv.stop()
    text = srv.log_path.read_text(errors="replace")
    assert "ERROR: AddressSanitizer" not in text, text[-5000:]
    assert "ERROR: LeakSanitizer" not in text, text[-5000:]
    assert "runtime error:" not in text, text[-5000:]
    assert rc == 0, f"tpd exit status {rc}\n{text[-3000:]}"


@pytest.fixture(scope="session")
def tls_files(tmp_path_factory) -> TlsFiles:
    """A test CA and a server certificate for 127.0.0.1 / localhost (once
    per session)."""
    return make_tls_files(tmp_path_factory.mktemp("tls"))


@pytest.fixture
def make_server(tpd_binary, tmp_path, tls_files):
    """Factory: start extra servers (with options); all are checked on exit.
    ``binary=`` overrides the session's binary (e.g. BUILD / "tpd" for RSS
    measurements, which ASan's quarantine and shadow memory would distort);
    ``tls=True`` gives the server the session's certificate (TpdServer)."""
    servers: list[TpdServer] = []

    def factory(binary: Path | None = None, tls: bool = False, **kw) -> TpdServer:
        d = tmp_path / f"srv{len(servers)}"
        d.mkdir()
        srv = TpdServer(binary or tpd_binary, d, tls=tls_files if tls else None, **kw)
        servers.append(srv)
        return srv

    yield factory
    for srv in servers:
        _check_clean(srv)


@pytest.fixture
def server(make_server) -> TpdServer:
    """A default server: FTP + HTTP, alice (rw) first."""
    return make_server()
