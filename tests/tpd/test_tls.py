"""TLS in tpd: explicit FTPS (AUTH TLS, PBSZ, PROT, RFC 4217),
implicit FTPS, HTTPS, the kernel-TLS probe and --tls-info, start-up errors,
failed and stalled handshakes, a large RETR and many concurrent sessions.
Clients verify tpd's certificate against a CA the tests make (tls_support).
Run against the ASan build like the other tpd tests."""
from __future__ import annotations

import errno
import ftplib
import hashlib
import io
import json
import os
import shutil
import socket
import ssl
import subprocess
import threading
import time

import pytest

from tests.tpd.test_ftp import Raw
from tests.tpd.tls_support import client_hello, ftps_connect, https_conn

TCP_ULP = 31          # linux/tcp.h; Python's socket module has no name for it


def kernel_has_tls_ulp() -> tuple[bool, int]:
    """Probe the kernel the way tpd does: setsockopt(TCP_ULP, "tls") on a
    connected loopback socket.  Returns (available, errno)."""
    with socket.socket() as lst:
        lst.bind(("127.0.0.1", 0))
        lst.listen(1)
        with socket.create_connection(lst.getsockname()) as c:
            acc, _ = lst.accept()
            try:
                c.setsockopt(socket.SOL_TCP, TCP_ULP, b"tls")
                return True, 0
            except OSError as e:
                return False, e.errno or 0
            finally:
                acc.close()


def retr(f, name: str) -> bytes:
    b = io.BytesIO()
    f.retrbinary(f"RETR {name}", b.write)
    return b.getvalue()


# --------------------------------------------------------------------------
# --tls-info, start-up log and errors
# --------------------------------------------------------------------------

def test_tls_info_reports_what_the_kernel_offers(tpd_binary):
    p = subprocess.run([str(tpd_binary), "--tls-info"], capture_output=True, timeout=30)
    assert p.returncode == 0, p.stderr
    info = json.loads(p.stdout.decode().strip().splitlines()[-1])
    assert info["tls"] is True
    assert info["openssl"].startswith("OpenSSL 3."), info
    have, err = kernel_has_tls_ulp()
    assert info["ktls_send"] is have, info
    if not have:
        name = errno.errorcode.get(err, str(err))
        assert f'TCP_ULP "tls": {name}' in info["ktls_reason"], info
        if err == errno.ENOENT:             # this lab's kernel: no CONFIG_TLS
            assert info["ktls_reason"].startswith("kernel has no TLS ULP"), info


def test_startup_logs_ktls_and_per_connection_check(make_server):
    srv = make_server(tls=True, extra=["--log-level", "debug"])
    (srv.home / "a.bin").write_bytes(os.urandom(100_000))
    f = ftps_connect(srv)
    assert retr(f, "a.bin") == (srv.home / "a.bin").read_bytes()
    f.quit()
    c = https_conn(srv)
    c.request("GET", "/a.bin")
    assert len(c.getresponse().read()) == 100_000
    c.close()
    log = srv.log_text()
    have, _ = kernel_has_tls_ulp()
    assert ("kTLS send available" if have else "kTLS send not available") in log, log[:2000]
    # each TLS connection (control, data, HTTPS) asks OpenSSL whether kTLS
    # took its send side (BIO_get_ktls_send) and says so
    for what in ("ftp", "ftp-data", "https"):
        lines = [l for l in log.splitlines() if f"] {what} 127.0.0.1:" in l and "kTLS send" in l]
        assert lines, (what, log[-3000:])
        assert "TLSv1.3" in lines[0]
        if not have:
            assert "kTLS send off (kernel)" in lines[0], lines[0]


def test_bad_certificate_or_key_exit_2(tpd_binary, tmp_path, tls_files):
    users = tmp_path / "users"
    users.write_text(f"alice:{{plain}}x:{tmp_path}:rw\n")
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate\n")
    other_key = tmp_path / "other.pem"
    subprocess.run(["openssl", "genpkey", "-algorithm", "EC", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-out", str(other_key)],
                   check=True, capture_output=True, timeout=30)
    base = [str(tpd_binary), "--users", str(users), "--ftp-listen", "127.0.0.1:0"]
    cases = [
        (["--tls-cert", str(tmp_path / "missing.pem"), "--tls-key", str(tls_files.key)],
         ["missing.pem", "No such file or directory"]),
        (["--tls-cert", str(garbage), "--tls-key", str(tls_files.key)],
         ["tls-cert", "garbage.pem", "no start line"]),
        (["--tls-cert", str(tls_files.cert), "--tls-key", str(garbage)],
         ["tls-key", "garbage.pem"]),
        (["--tls-cert", str(tls_files.cert), "--tls-key", str(other_key)],
         ["tls-key", "other.pem", "mismatch"]),
        (["--tls-cert", str(tls_files.cert)], ["--tls-cert and --tls-key"]),
        (["--ftps-listen", "127.0.0.1:0"], ["--ftps-listen needs --tls-cert"]),
        (["--https-listen", "127.0.0.1:0"], ["--https-listen needs --tls-cert"]),
    ]
    for args, words in cases:
        p = subprocess.run(base + args, capture_output=True, timeout=30)
        err = p.stderr.decode(errors="replace")
        assert p.returncode == 2, (args, err)
        for w in words:
            assert w in err, (args, w, err)
        assert "AddressSanitizer" not in err and "LeakSanitizer" not in err, err


# --------------------------------------------------------------------------
# explicit and implicit FTPS
# --------------------------------------------------------------------------

@pytest.mark.parametrize("sendfile", [True, False], ids=["sendfile", "no-sendfile"])
def test_explicit_ftps_login_list_retr_stor(make_server, sendfile):
    srv = make_server(tls=True, extra=[] if sendfile else ["--no-sendfile"])
    data = os.urandom(3 * 1024 * 1024 + 17)
    (srv.home / "big.bin").write_bytes(data)
    (srv.home / "d").mkdir()
    f = ftps_connect(srv)
    assert isinstance(f.sock, ssl.SSLSocket)
    assert f.sock.version() in ("TLSv1.2", "TLSv1.3")
    assert sorted(f.nlst()) == ["big.bin", "d"]
    lines: list[str] = []
    f.retrlines("LIST", lines.append)
    assert any(l.endswith(" big.bin") and str(len(data)) in l for l in lines), lines
    assert retr(f, "big.bin") == data
    b = io.BytesIO()
    f.retrbinary("RETR big.bin", b.write, rest=1_000_000)      # REST + RETR
    assert b.getvalue() == data[1_000_000:]
    up = os.urandom(2 * 1024 * 1024 + 5)
    f.storbinary("STOR d/up.bin", io.BytesIO(up))
    assert (srv.home / "d" / "up.bin").read_bytes() == up
    f.storbinary("APPE d/up.bin", io.BytesIO(b"tail"))
    assert (srv.home / "d" / "up.bin").read_bytes() == up + b"tail"
    f.storbinary("STOR empty", io.BytesIO(b""))
    assert (srv.home / "empty").read_bytes() == b""
    assert retr(f, "empty") == b""
    f.set_pasv(False)                            # PORT: tpd connects, TLS server
    assert retr(f, "big.bin") == data
    f.storbinary("STOR d/active.bin", io.BytesIO(up[:100_000]))
    assert (srv.home / "d" / "active.bin").read_bytes() == up[:100_000]
    f.set_pasv(True)
    f.prot_c()                                   # clear data, TLS control
    assert retr(f, "big.bin") == data
    f.quit()


def test_implicit_ftps(make_server):
    srv = make_server(tls=True)
    data = os.urandom(700_001)
    (srv.home / "x.bin").write_bytes(data)
    # implicit: protected data without PBSZ/PROT
    f = ftps_connect(srv, implicit=True, prot_p=False)
    f._prot_p = True                      # ftplib's flag: wrap data connections
    assert retr(f, "x.bin") == data
    f.storbinary("STOR y.bin", io.BytesIO(data[::-1]))
    assert (srv.home / "y.bin").read_bytes() == data[::-1]
    with pytest.raises(ftplib.error_perm, match="503"):         # already TLS
        f.sendcmd("AUTH TLS")
    f.quit()
    # a plaintext client on the implicit port gets no greeting, only a close
    s = socket.create_connection(("127.0.0.1", srv.ftps_port), timeout=10)
    s.sendall(b"USER alice\r\n")
    got = b""
    try:
        while chunk := s.recv(4096):
            got += chunk
    except ConnectionResetError:
        pass
    s.close()
    assert b"220" not in got


def test_auth_tls_refused_without_certificate(server):
    r = Raw(server.ftp_port)
    assert r.cmd("AUTH TLS").startswith("502")
    assert r.cmd("PBSZ 0").startswith("502")
    assert r.cmd("PROT P").startswith("502")
    assert "AUTH TLS" not in r.cmd("FEAT")
    r.login()
    assert r.cmd("NOOP").startswith("200")
    r.close()


def _wrap(raw: Raw, srv) -> None:
    """Switch Raw's socket to TLS after a 234 (verifying the certificate)."""
    raw.s = srv.tls.client_context().wrap_socket(raw.s, server_hostname="127.0.0.1")


def test_rfc4217_command_order(make_server):
    srv = make_server(tls=True)
    r = Raw(srv.ftp_port)
    feat = r.cmd("FEAT")
    assert "AUTH TLS" in feat and "PBSZ" in feat and "PROT" in feat
    r.expect(("PBSZ 0", "503"), ("PROT P", "503"),  # before AUTH
             ("AUTH GSSAPI", "504"), ("AUTH", "501"))
    # a command pipelined behind AUTH TLS in plaintext is discarded, not run
    # as if it had come over TLS (STARTTLS command injection)
    r.send(b"AUTH TLS\r\nUSER alice\r\n")
    assert r.reply().startswith("234")
    assert r.buf == b""
    _wrap(r, srv)
    r.expect(("PASS secret", "503"),  # USER was dropped
             ("PROT P", "503"),  # PROT before PBSZ
             ("PBSZ x", "501"), ("PBSZ 1024", "200 PBSZ=0"), ("PROT S", "536"), ("PROT Q", "504"),
             ("PROT P", "200"), ("AUTH TLS", "503"))
    r.login()
    # a passive port opened before PROT is dropped by it: no data connection
    # runs at a protection level other than the one in force
    r.expect(("PASV", "227"), ("PROT C", "200"), ("LIST", "425"), ("PWD", "257"), ("QUIT", "221"))
    r.close()
    # AUTH after login is refused (the session would have to restart)
    r = Raw(srv.ftp_port)
    r.login()
    assert r.cmd("AUTH TLS").startswith("503")
    r.close()


def test_user_sent_in_clear_does_not_survive_auth_tls(make_server):
    """AUTH resets the login state (RFC 4217 section 4, RFC 2228): a USER answered 331
    in plaintext before AUTH TLS, then PASS over TLS, is 503 and logs nobody in; a USER
    and PASS over TLS then log in. The same for a second user after a REST refused before
    login (530: REST, RNFR and data commands need a login, so only USER can cross AUTH).
    Implicit FTPS has no plaintext phase: nothing to carry over."""
    srv = make_server(tls=True)
    r = Raw(srv.ftp_port)
    assert r.cmd("USER alice").startswith("331")            # its own round trip: not discarded
    assert r.cmd("AUTH TLS").startswith("234")
    _wrap(r, srv)
    assert r.cmd("PASS secret").startswith("503")           # the plaintext USER is gone
    assert r.cmd("PWD").startswith("530")                   # not logged in
    assert r.cmd("PBSZ 0").startswith("200")
    assert r.cmd("PROT P").startswith("200")
    r.login()                                               # USER + PASS over TLS
    assert r.cmd("PWD").startswith("257")
    assert r.cmd("QUIT").startswith("221")
    r.close()
    # the same through a client library: ftplib's FTP_TLS sends USER itself after AUTH,
    # so only a client that sent USER first is affected; a normal login still works
    f = ftps_connect(srv)
    assert f.pwd() == "/"
    f.quit()
    # a REST sent before login is refused (530), so no offset can cross AUTH either
    r = Raw(srv.ftp_port)
    assert r.cmd("REST 100").startswith("530")
    assert r.cmd("USER bob").startswith("331")
    assert r.cmd("AUTH TLS").startswith("234")
    _wrap(r, srv)
    assert r.cmd("PASS builder").startswith("503")
    r.login("bob", "builder")
    assert r.cmd("PWD").startswith("257")
    r.close()


def test_stor_cut_without_close_notify_is_426(make_server):
    """A TLS upload whose TCP connection ends without close_notify may be
    truncated: 426, and the old file stays."""
    srv = make_server(tls=True)
    target = srv.home / "keep.bin"
    target.write_bytes(b"old\n")
    f = ftps_connect(srv)
    f.voidcmd("TYPE I")
    conn = f.transfercmd("STOR keep.bin")
    conn.sendall(os.urandom(300_000))
    raw = socket.socket(fileno=os.dup(conn.fileno()))
    raw.shutdown(socket.SHUT_RDWR)                 # FIN under TLS's feet
    raw.close()
    conn.close()
    with pytest.raises(Exception, match="426"):
        f.voidresp()
    assert target.read_bytes() == b"old\n"
    f.sendcmd("NOOP")
    f.quit()


def test_data_connections_send_nothing_an_uploader_would_not_read(make_server):
    """TLS 1.3 servers send session tickets after the handshake; a client
    uploading on a data connection never reads them, and its close() with
    unread bytes sends a TCP RST that can destroy the end of the upload
    (lftp lost 3 of 15 STORs that way).  tpd sends no tickets on data
    connections: after the handshake the client has nothing to read."""
    srv = make_server(tls=True)
    f = ftps_connect(srv)
    f.voidcmd("TYPE I")
    conn = f.transfercmd("STOR t.bin")
    assert conn.version() == "TLSv1.3"
    time.sleep(0.3)
    raw = socket.socket(fileno=os.dup(conn.fileno()))
    with pytest.raises(BlockingIOError):
        raw.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
    raw.detach()
    conn.sendall(b"z" * 100_000)
    conn.unwrap()
    conn.close()
    assert f.voidresp().startswith("226")
    assert (srv.home / "t.bin").read_bytes() == b"z" * 100_000
    f.quit()


def test_large_retr_over_tls_byte_exact(make_server):
    srv = make_server(tls=True, extra=["--log-level", "warn"])
    size = 256 * 1024 * 1024
    path = srv.home / "large.bin"
    want = hashlib.sha256()
    block = os.urandom(1 << 20)
    with open(path, "wb") as out:
        for i in range(size >> 20):
            chunk = block[i:] + block[:i]               # distinct 1 MiB blocks
            want.update(chunk)
            out.write(chunk)
    got = hashlib.sha256()
    n = 0

    def take(b: bytes) -> None:
        nonlocal n
        n += len(b)
        got.update(b)
    f = ftps_connect(srv)
    f.sock.settimeout(120)
    t0 = time.monotonic()
    f.retrbinary("RETR large.bin", take, blocksize=1 << 18)
    secs = time.monotonic() - t0
    f.quit()
    path.unlink()
    assert n == size
    assert got.hexdigest() == want.hexdigest()
    print(f"256 MiB RETR over TLS (ASan build, Python client): {secs:.1f} s")


def test_fifty_concurrent_tls_sessions(make_server):
    srv = make_server(tls=True, extra=["--log-level", "warn"])
    data = os.urandom(200_000)
    (srv.home / "f.bin").write_bytes(data)
    errors: list[str] = []
    start = threading.Barrier(50, timeout=60)

    def worker(i: int) -> None:
        try:
            f = ftps_connect(srv, implicit=bool(i % 2))
            if i % 2:
                f._prot_p = True
            start.wait()
            assert retr(f, "f.bin") == data
            f.storbinary(f"STOR u{i}.bin", io.BytesIO(data[i:]))
            f.quit()
        except Exception as e:               # reported below with the index
            errors.append(f"{i}: {e!r}")

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(50)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors[:5]
    for i in range(50):
        assert (srv.home / f"u{i}.bin").read_bytes() == data[i:], i


def test_plaintext_buffered_in_openssl_is_served(make_server):
    """More plaintext in one TLS record than the server's buffer takes (FTP
    command buffer 2 KiB, HTTP head buffer 8 KiB): the rest waits inside
    OpenSSL (SSL_pending) with no socket readiness, and must still be served
    without any further traffic from the client."""
    srv = make_server(tls=True, extra=["--log-level", "warn"])
    (srv.home / "p.txt").write_bytes(b"pipelined")
    f = ftps_connect(srv)
    f.sock.sendall(b"NOOP\r\n" * 1000)               # 6000 bytes: one record
    f.sock.settimeout(5)
    replies = b""
    while replies.count(b"\r\n") < 1000:
        chunk = f.sock.recv(65536)
        assert chunk, replies[-200:]
        replies += chunk
    assert replies == b"200 NOOP ok.\r\n" * 1000
    f.quit()
    s = srv.tls.client_context().wrap_socket(
        socket.create_connection(("127.0.0.1", srv.https_port), timeout=5),
        server_hostname="127.0.0.1")
    req = b"GET /p.txt HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"y" * 60 + b"\r\n\r\n"
    s.sendall(req * 99 + b"GET /p.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    out = b""
    while chunk := s.recv(65536):
        out += chunk
    s.close()
    assert out.count(b"HTTP/1.1 200 OK") == 100 and out.count(b"pipelined") == 100


def test_stor_with_records_across_buffer_ends(make_server):
    """A 20 MiB STOR in 10,000-byte records: the 256 KiB upload buffer fills
    in the middle of records, leaving plaintext in OpenSSL; byte-exact."""
    srv = make_server(tls=True, extra=["--log-level", "warn"])
    data = os.urandom(20 * 1024 * 1024 + 3)
    f = ftps_connect(srv)
    f.storbinary("STOR s.bin", io.BytesIO(data), blocksize=10_000)
    assert hashlib.sha256((srv.home / "s.bin").read_bytes()).digest() == \
        hashlib.sha256(data).digest()
    f.quit()


# --------------------------------------------------------------------------
# handshakes that stall or fail
# --------------------------------------------------------------------------

def _wait_closed(s: socket.socket, limit: float) -> float:
    """Read (and drop) until the server closes s; seconds it took."""
    t0 = time.monotonic()
    s.settimeout(0.5)
    while time.monotonic() - t0 < limit:
        try:
            if not s.recv(65536):
                return time.monotonic() - t0
        except socket.timeout:
            continue
        except ConnectionResetError:
            return time.monotonic() - t0
    raise AssertionError(f"server kept the stalled connection open for {limit} s")


def test_stalled_client_hello_is_timed_out_while_others_are_served(make_server):
    srv = make_server(tls=True, extra=["--idle-timeout", "2", "--log-level", "info"])
    data = os.urandom(2_000_000)
    (srv.home / "f.bin").write_bytes(data)
    hello = client_hello()
    stalled = []
    for port in (srv.ftps_port, srv.https_port):          # implicit FTPS, HTTPS
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        s.sendall(hello)
        stalled.append(s)
    s = socket.create_connection(("127.0.0.1", srv.ftp_port), timeout=5)   # explicit
    s.recv(100)
    s.sendall(b"AUTH TLS\r\n")
    assert s.recv(100).startswith(b"234")
    s.sendall(hello)
    stalled.append(s)
    s = socket.create_connection(("127.0.0.1", srv.ftps_port), timeout=5)  # nothing at all
    stalled.append(s)
    # others are served meanwhile, well within the idle timeout
    t0 = time.monotonic()
    f = ftps_connect(srv)
    assert retr(f, "f.bin") == data
    c = https_conn(srv)
    c.request("GET", "/f.bin")
    assert c.getresponse().read() == data
    c.close()
    assert time.monotonic() - t0 < 2
    f.quit()
    for s in stalled:
        assert _wait_closed(s, 8) < 8
        s.close()
    assert srv.log_text().count("idle timeout (during the TLS handshake)") >= 3


def test_stalled_data_connection_handshake_times_out(make_server):
    """A client that opens the PROT P data connection and never starts its
    TLS handshake: the session is closed at the idle timeout (the 421 comes
    over the TLS control connection), and another session meanwhile works."""
    srv = make_server(tls=True, extra=["--idle-timeout", "2"])
    (srv.home / "f.bin").write_bytes(b"q" * 100_000)
    f = ftps_connect(srv)
    port = int(f.sendcmd("EPSV").split("|||")[1].rstrip("|)"))
    data = socket.create_connection(("127.0.0.1", port), timeout=5)
    assert f.sendcmd("RETR f.bin").startswith("150")
    g = ftps_connect(srv)
    assert retr(g, "f.bin") == b"q" * 100_000
    g.quit()
    t0 = time.monotonic()
    with pytest.raises(ftplib.error_temp, match="421"):
        f.voidresp()
    assert time.monotonic() - t0 < 6
    assert _wait_closed(data, 5) < 5
    data.close()
    f.close()


def test_failed_handshakes_close_only_that_connection(make_server):
    srv = make_server(tls=True, extra=["--log-level", "info"])
    (srv.home / "f.txt").write_bytes(b"still here")
    # garbage instead of a ClientHello, plain HTTP to HTTPS, a client that
    # rejects the certificate (no CA), a ClientHello cut short
    for port, payload in ((srv.ftps_port, os.urandom(3000)),
                          (srv.https_port, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
                          (srv.https_port, b"\x16\x03\x01\x02\x00" + os.urandom(50))):
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        s.sendall(payload)
        if payload[:1] != b"\x16":
            _wait_closed(s, 5)
        s.close()
    with pytest.raises(ssl.SSLCertVerificationError):
        ssl.create_default_context().wrap_socket(
            socket.create_connection(("127.0.0.1", srv.https_port), timeout=5),
            server_hostname="127.0.0.1")
    c = https_conn(srv)
    c.request("GET", "/f.txt")
    assert c.getresponse().read() == b"still here"
    c.close()
    assert "TLS handshake failed" in srv.log_text()
    assert srv.proc.poll() is None


# --------------------------------------------------------------------------
# HTTPS
# --------------------------------------------------------------------------

def test_https_get_put_keepalive_and_close(make_server):
    srv = make_server(tls=True)
    data = os.urandom(5_000_003)
    (srv.home / "g.bin").write_bytes(data)
    c = https_conn(srv)
    c.request("GET", "/g.bin")
    r = c.getresponse()
    assert r.status == 200 and r.read() == data
    c.request("GET", "/g.bin", headers={"Range": "bytes=100-199"})   # same connection
    r = c.getresponse()
    assert r.status == 206 and r.read() == data[100:200]
    body = os.urandom(3_000_000)
    c.request("PUT", "/up.bin", body=body)
    r = c.getresponse()
    r.read()
    assert r.status == 201
    assert (srv.home / "up.bin").read_bytes() == body
    c.request("POST", "/", body=b"chunky", headers={"Transfer-Encoding": "chunked"},
              encode_chunked=True)
    r = c.getresponse()
    r.read()
    assert r.status == 201
    c.request("GET", "/")                                   # streamed listing
    r = c.getresponse()
    assert b"up.bin" in r.read()
    c.request("GET", "/g.bin", headers={"Connection": "close"})
    r = c.getresponse()
    assert r.read() == data and r.getheader("Connection") == "close"
    c.close()


def test_https_with_curl(make_server):
    if not shutil.which("curl"):
        pytest.skip("curl not installed")
    srv = make_server(tls=True)
    data = os.urandom(1_234_567)
    (srv.home / "c.bin").write_bytes(data)
    url = f"https://127.0.0.1:{srv.https_port}"
    p = subprocess.run(["curl", "-sS", "--fail", "--cacert", str(srv.tls.ca), f"{url}/c.bin"],
                       capture_output=True, timeout=60)
    assert p.returncode == 0 and p.stdout == data, p.stderr
    up = srv.tmp / "upload.bin"
    up.write_bytes(data[::-1])
    p = subprocess.run(["curl", "-sS", "--fail", "--cacert", str(srv.tls.ca), "-T", str(up),
                        f"{url}/put.bin"], capture_output=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert (srv.home / "put.bin").read_bytes() == data[::-1]
