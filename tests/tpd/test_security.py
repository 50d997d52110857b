"""tpd against hostile or unlucky clients: no header injection or open
redirect through Location, passive ports reused while in TIME_WAIT, no CPU
spin on EMFILE, bounded memory for unread listings, HTTP/1.0 with a chunked
body closed, and a failed upload keeps the old file.
"""
from __future__ import annotations

import ftplib
import http.client
import io
import os
import socket
import time

import psutil
import pytest

from tests.support.ports import free_range
from tests.tpd.conftest import BUILD
from tests.tpd.test_ftp import Raw, connect, retr
from tests.tpd.test_http import raw_connect, raw_exchange
from tests.tpd.test_http import raw_exchange as _raw_exchange
from tests.tpd.tls_support import https_conn


def head_of(resp: bytes) -> tuple[int, dict[str, str], list[str]]:
    """Parse a raw HTTP response head: (status, headers, raw header lines)."""
    head = resp.split(b"\r\n\r\n", 1)[0].decode("latin-1")
    lines = head.split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    return status, headers, lines[1:]


def pasv_port(reply: str) -> int:
    nums = reply[reply.index("(") + 1: reply.index(")")].split(",")
    return int(nums[4]) * 256 + int(nums[5])


# --------------------------------------------------------------------------
# 1. Location: header injection and open redirect
# --------------------------------------------------------------------------

@pytest.mark.parametrize("tls", [False, True], ids=["plain", "tls"])
def test_location_cannot_inject_headers_or_redirect_off_site(make_server, tls):
    server = make_server(tls=tls)

    def raw_exchange(srv, data: bytes, timeout=10) -> bytes:
        return _raw_exchange(srv, data, timeout, tls=tls)
    (server.home / "a b%c").mkdir()
    # CR LF in the decoded path: refused with 400, nothing injected
    out = raw_exchange(server, b"GET /%0d%0aSet-Cookie:%20x=1%0d%0aX:/.. HTTP/1.1\r\n"
                               b"Host: x\r\nConnection: close\r\n\r\n")
    status, headers, lines = head_of(out)
    assert status == 400, out[:300]
    assert "set-cookie" not in headers and not any(l.startswith("X:") for l in lines)
    for bad in (b"/%01x", b"/a%7fb", b"/%0ax"):
        status, _, _ = head_of(raw_exchange(
            server, b"GET " + bad + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"))
        assert status == 400, bad
    # "//evil.example.com/.." is the root: redirect stays on this site
    out = raw_exchange(server, b"GET /%2fevil.example.com%2f%2e%2e HTTP/1.1\r\n"
                               b"Host: x\r\nConnection: close\r\n\r\n")
    status, headers, _ = head_of(out)
    assert status == 301 and headers["location"] == "/", out[:300]
    out = raw_exchange(server, b"GET //evil.example.com HTTP/1.1\r\nHost: x\r\n"
                               b"Connection: close\r\n\r\n")
    status, headers, _ = head_of(out)
    assert status == 404 or not headers.get("location", "").startswith("//"), out[:300]
    # directory redirect and PUT 201 carry the percent-encoded path
    c = (https_conn(server) if tls
         else http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=10))
    c.request("GET", "/a%20b%25c")
    r = c.getresponse()
    r.read()
    assert r.status == 301 and r.getheader("Location") == "/a%20b%25c/"
    c.request("PUT", "/a%20b%25c/new%3Ffile%23x%20%C3%A9", body=b"data")
    r = c.getresponse()
    r.read()
    assert r.status == 201
    assert r.getheader("Location") == "/a%20b%25c/new%3Ffile%23x%20%C3%A9"
    assert (server.home / "a b%c" / "new?file#x é").read_bytes() == b"data"
    c.close()


# --------------------------------------------------------------------------
# 2. passive ports left in TIME_WAIT
# --------------------------------------------------------------------------

def test_quick_retrs_do_not_exhaust_a_small_passive_range(make_server):
    """200 RETRs through a 20-port range: every passive port is reused while
    its previous data connection is in TIME_WAIT (tpd closes first)."""
    lo = free_range(20)[0]
    srv = make_server(extra=["--pasv-ports", f"{lo}-{lo + 19}", "--log-level", "warn"])
    (srv.home / "tiny").write_bytes(b"x" * 100)
    f = connect(srv)
    codes = []
    deadline = time.monotonic() + 60
    for _ in range(200):
        assert time.monotonic() < deadline, "200 RETRs took over 60 s"
        try:
            assert retr(f, "tiny") == b"x" * 100
            codes.append(226)
        except ftplib.error_temp as e:          # 425 Could not open passive port
            codes.append(int(str(e)[:3]))
    f.quit()
    assert codes.count(226) == 200, {c: codes.count(c) for c in set(codes)}


# --------------------------------------------------------------------------
# 3. CPU spin when accept() fails with EMFILE
# --------------------------------------------------------------------------

def test_emfile_on_passive_accept_does_not_spin(make_server):
    srv = make_server(prefix=["prlimit", "--nofile=40:40", "--"],
                      extra=["--log-level", "warn"])
    (srv.home / "f").write_bytes(b"y" * 1000)
    ctl = Raw(srv.ftp_port)
    ctl.login()
    port = pasv_port(ctl.cmd("PASV"))
    assert ctl.cmd("RETR f").startswith("150")
    # exhaust the server's descriptors with idle control connections
    fillers = []
    deadline = time.monotonic() + 20
    for _ in range(60):
        if time.monotonic() > deadline or srv.fd_count() >= 40:
            break
        s = socket.create_connection(("127.0.0.1", srv.ftp_port), timeout=5)
        try:
            s.recv(100)
        except OSError:
            pass
        fillers.append(s)
    assert srv.fd_count() >= 39, srv.fd_count()
    # the data connection completes in the kernel; accept4() gets EMFILE
    data = socket.socket()
    try:
        data.connect(("127.0.0.1", port))
    except ConnectionResetError:
        pass                      # tpd gives up the listener at once
    proc = psutil.Process(srv.proc.pid)
    t0 = proc.cpu_times()
    time.sleep(3)
    t1 = proc.cpu_times()
    cpu = (t1.user + t1.system) - (t0.user + t0.system)
    assert cpu < 0.5, f"server used {cpu:.2f} s CPU in 3 s with descriptors exhausted"
    assert ctl.reply().startswith("425")          # the waiting RETR is refused
    # more connections queue on the main listener at EMFILE: no spin either
    extra = [socket.create_connection(("127.0.0.1", srv.ftp_port), timeout=5)
             for _ in range(5)]
    t0 = proc.cpu_times()
    time.sleep(2)
    t1 = proc.cpu_times()
    cpu = (t1.user + t1.system) - (t0.user + t0.system)
    assert cpu < 0.4, f"main listener: {cpu:.2f} s CPU in 2 s"
    for s in fillers + extra + [data]:
        s.close()
    ctl.close()
    # the server recovers once descriptors are free
    deadline = time.monotonic() + 10
    while srv.fd_count() > 20 and time.monotonic() < deadline:
        time.sleep(0.1)
    f = connect(srv)
    assert retr(f, "f") == b"y" * 1000
    f.quit()


# --------------------------------------------------------------------------
# 4. memory amplification from listings
# --------------------------------------------------------------------------

MANY = 20_000
RSS_BOUND = 24 << 20      # growth allowed for 60 unread 5 MB listings (each held whole: > 140 MiB)


@pytest.fixture
def many_server(make_server):
    # plain build: ASan's shadow memory and quarantine would hide what tpd holds
    srv = make_server(binary=BUILD / "tpd", extra=["--log-level", "warn"])
    d = srv.home / "many"
    d.mkdir()
    # 20,000 names of 246 bytes: a ~5 MB listing, more than the kernel's
    # socket send buffer takes (tcp_wmem max is 4 MiB by default), so an
    # unread listing is held by the server, not the kernel
    pad = "n" * 240
    for i in range(MANY):
        (d / f"{pad}{i:06d}").touch()
    return srv


def test_unread_http_listings_do_not_grow_rss(many_server):
    srv = many_server
    # warm up: one full listing, read (chunked) and checked
    c = http.client.HTTPConnection("127.0.0.1", srv.http_port, timeout=30)
    c.request("GET", "/many/")
    r = c.getresponse()
    body = r.read()
    assert r.status == 200 and len(body.splitlines()) == MANY
    c.request("HEAD", "/many/")                   # keep-alive after the chunked body
    r = c.getresponse()
    r.read()
    assert r.status == 200
    c.close()
    srv.wait_no_clients()                         # the warm-up connection is gone
    before = srv.rss_bytes()
    socks = []
    for _ in range(60):
        s = socket.create_connection(("127.0.0.1", srv.http_port), timeout=10)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.sendall(b"GET /many/ HTTP/1.1\r\nHost: x\r\n\r\n")
        socks.append(s)
    time.sleep(4)
    grown = srv.rss_bytes() - before
    for s in socks:
        s.close()
    assert grown < RSS_BOUND, f"RSS grew {grown / 2**20:.1f} MiB for 60 unread listings"
    # HTTP/1.0: close-delimited listing
    out = raw_exchange(srv, b"GET /many/ HTTP/1.0\r\n\r\n", timeout=30)
    status, headers, _ = head_of(out)
    assert status == 200 and headers["connection"] == "close"
    assert len(out.split(b"\r\n\r\n", 1)[1].splitlines()) == MANY


def test_unread_ftp_listings_do_not_grow_rss(many_server):
    srv = many_server
    f = connect(srv)
    assert len(f.nlst("many")) == MANY
    lines = []
    f.retrlines("LIST many", lines.append)
    assert len(lines) == MANY
    f.quit()
    srv.wait_no_clients()                         # the warm-up session is gone
    before = srv.rss_bytes()
    held = []
    for _ in range(30):
        ctl = Raw(srv.ftp_port)
        ctl.login()
        port = pasv_port(ctl.cmd("PASV"))
        d = socket.socket()
        d.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        d.connect(("127.0.0.1", port))
        assert ctl.cmd("LIST many").startswith("150")
        held.append((ctl, d))
    time.sleep(3)
    grown = srv.rss_bytes() - before
    for ctl, d in held:
        d.close()
        ctl.close()
    # a session holding its whole ~4 MB LIST text would pass the bound
    assert grown < RSS_BOUND, f"RSS grew {grown / 2**20:.1f} MiB for 30 unread LISTs"


# --------------------------------------------------------------------------
# 5. HTTP/1.0 + chunked closes; failed uploads keep the old file
# --------------------------------------------------------------------------

def test_http10_chunked_request_closes(server):
    t0 = time.monotonic()
    out = raw_exchange(server, b"PUT /c.txt HTTP/1.0\r\nTransfer-Encoding: chunked\r\n"
                               b"Connection: keep-alive\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
                       timeout=8)
    status, headers, _ = head_of(out)
    assert status == 201 and headers["connection"] == "close", out[:300]
    assert time.monotonic() - t0 < 5, "connection was kept alive"
    assert (server.home / "c.txt").read_bytes() == b"hello"


def _no_temp_files(d) -> bool:
    return not [p for p in os.listdir(d) if p.startswith(".tpd-up")]


@pytest.mark.parallel  # what the disk holds after failed uploads; the TLS case waits out a 10 s client timeout
@pytest.mark.parametrize("tls", [False, True], ids=["plain", "tls"])
def test_failed_http_put_keeps_old_file(make_server, tls):
    server = make_server(tls=tls)

    def raw_exchange(srv, data: bytes, timeout=10) -> bytes:
        return _raw_exchange(srv, data, timeout, tls=tls)
    target = server.home / "keep.txt"
    target.write_bytes(b"old content\n")
    s = raw_connect(server, 10, tls)
    s.sendall(b"PUT /keep.txt HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n"
              + b"z" * 5000)
    time.sleep(0.5)
    assert target.read_bytes() == b"old content\n"     # not truncated meanwhile
    s.close()                                          # upload fails: body cut short
    deadline = time.monotonic() + 10
    while not _no_temp_files(server.home) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert target.read_bytes() == b"old content\n"
    assert _no_temp_files(server.home), os.listdir(server.home)
    # a chunked body cut short inside a chunk is a failure too
    cut = b"PUT /keep.txt HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab"
    if tls:
        # TLS has no half-close short of close_notify: wait out the 10 s for an answer that
        # must not be a success, then close
        out = raw_exchange(server, cut)
    else:
        # the client shuts its side mid-chunk: the server sees the body end there, and
        # answers (400) or closes at once; awaited for at most 10 s
        c = raw_connect(server, 10)
        c.sendall(cut)
        c.shutdown(socket.SHUT_WR)
        out, t0 = b"", time.monotonic()
        while (chunk := c.recv(65536)) and time.monotonic() - t0 < 10:
            out += chunk
        c.close()
    assert out == b"" or head_of(out)[0] == 400
    out = raw_exchange(server, b"PUT /keep.txt HTTP/1.1\r\nHost: x\r\n"
                               b"Transfer-Encoding: chunked\r\n\r\nzz\r\nab\r\n")
    assert head_of(out)[0] == 400
    assert target.read_bytes() == b"old content\n"
    assert _no_temp_files(server.home), os.listdir(server.home)
    # a complete PUT replaces it (and keeps its mode)
    target.chmod(0o600)
    out = raw_exchange(server, b"PUT /keep.txt HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n"
                               b"Connection: close\r\n\r\nnew")
    assert head_of(out)[0] == 204
    assert target.read_bytes() == b"new" and (target.stat().st_mode & 0o777) == 0o600
    assert _no_temp_files(server.home)


def _stor_under_way(server, name: str) -> tuple[Raw, socket.socket]:
    """A logged-in control connection to ``server`` with a passive STOR of ``name`` under
    way (its 150 asserted) and 20000 bytes sent on its data connection, both left open:
    (control, data)."""
    ctl = Raw(server.ftp_port)
    ctl.login()
    port = pasv_port(ctl.cmd("PASV"))
    data = socket.create_connection(("127.0.0.1", port), timeout=10)
    assert ctl.cmd(f"STOR {name}").startswith("150")
    data.sendall(b"q" * 20000)
    return ctl, data


def test_failed_ftp_stor_keeps_old_file(server):
    target = server.home / "keep.bin"
    target.write_bytes(b"old ftp content\n")
    for how in ("abor", "quit-control"):
        ctl, data = _stor_under_way(server, "keep.bin")
        time.sleep(0.3)
        assert target.read_bytes() == b"old ftp content\n", how
        if how == "abor":
            assert ctl.cmd("ABOR").startswith("426")
            ctl.close()
        else:
            ctl.close()                                # session dies mid-upload
            server.wait_no_clients()                   # the server dropped the session (and its data connection)
        data.close()
        deadline = time.monotonic() + 10
        while not _no_temp_files(server.home) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert target.read_bytes() == b"old ftp content\n", how
        assert _no_temp_files(server.home), (how, os.listdir(server.home))
    f = connect(server)
    f.storbinary("STOR keep.bin", io.BytesIO(b"replaced"))
    assert retr(f, "keep.bin") == b"replaced"
    f.storbinary("APPE keep.bin", io.BytesIO(b"+more"))
    assert retr(f, "keep.bin") == b"replaced+more"
    f.quit()
    assert _no_temp_files(server.home)


def _nested_dirs(root, name: str, depth: int) -> str:
    """Make root/name/name/... (depth levels) without passing PATH_MAX on the
    host side; returns the virtual path "/name/name/..."."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir(name, dir_fd=fd)
            nfd = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = nfd
    finally:
        os.close(fd)
    return ("/" + name) * depth


def test_long_location_is_whole_and_pipelining_stays_in_step(server):
    # A 3.9 KB path of raw UTF-8 bytes percent-encodes to an 11.6 KB Location,
    # more than 8 KiB: a response head cut there would lose its rest and its
    # blank line, and the next pipelined response would be read as part of
    # this one.
    name = "é" * 120                                   # 240 bytes -> 720 encoded
    vpath = _nested_dirs(server.home, name, 16)
    raw_target = vpath.encode()
    assert len(raw_target) < 8000
    encoded = "".join("/" + "%C3%A9" * 120 for _ in range(16)) + "/"
    assert len(encoded) > 11_000
    (server.home / "after.txt").write_bytes(b"second")
    out = raw_exchange(server, b"GET " + raw_target + b" HTTP/1.1\r\nHost: x\r\n\r\n"
                               b"GET /after.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    first, _, rest = out.partition(b"\r\n\r\n")
    status, headers, _ = head_of(first + b"\r\n\r\n")
    assert status == 301, out[:200]
    assert headers["location"] == encoded
    assert int(headers["content-length"]) == 0
    status, headers, _ = head_of(rest)
    assert status == 200 and rest.endswith(b"\r\n\r\nsecond"), rest[:300]
    # the PUT 201 Location too
    out = raw_exchange(server, b"PUT " + raw_target + b"/new HTTP/1.1\r\nHost: x\r\n"
                               b"Content-Length: 2\r\n\r\nok"
                               b"GET /after.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    first, _, rest = out.partition(b"\r\n\r\n")
    status, headers, _ = head_of(first + b"\r\n\r\n")
    assert status == 201 and headers["location"] == encoded + "new", out[:200]
    assert head_of(rest)[0] == 200 and rest.endswith(b"second")


def test_unfinished_uploads_are_invisible_and_reserved_names_refused(server):
    # An upload in progress leaves no name in the directory (O_TMPFILE): it
    # cannot be listed, fetched, renamed or deleted by another client.
    s = socket.create_connection(("127.0.0.1", server.http_port), timeout=10)
    s.sendall(b"PUT /big.bin HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n" + b"z" * 5000)
    ctl, data = _stor_under_way(server, "other.bin")
    time.sleep(0.5)
    assert os.listdir(server.home) == [], os.listdir(server.home)
    assert b"tpd-up" not in raw_exchange(server, b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    s.close()
    data.close()
    assert ctl.reply().startswith("226")
    ctl.close()
    assert sorted(os.listdir(server.home)) == ["other.bin"]
    # names with the reserved prefix (left by a filesystem without O_TMPFILE)
    # are neither listed nor reachable, and cannot be created
    (server.home / ".tpd-up.0123456789abcdef").write_bytes(b"partial")
    (server.home / "sub").mkdir()
    (server.home / "sub" / ".tpd-up.x").write_bytes(b"partial")
    for path in (b"/.tpd-up.0123456789abcdef", b"/sub/.tpd-up.x", b"/.tpd-up.new"):
        out = raw_exchange(server, b"GET " + path + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert head_of(out)[0] == 403, (path, out[:200])
        out = raw_exchange(server, b"PUT " + path + b" HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n"
                                                    b"Connection: close\r\n\r\nx")
        assert head_of(out)[0] == 403, (path, out[:200])
    f = connect(server)
    assert f.nlst() == ["other.bin", "sub"] or sorted(f.nlst()) == ["other.bin", "sub"]
    assert f.nlst("sub") == []
    for cmd in ("RETR .tpd-up.0123456789abcdef", "DELE sub/.tpd-up.x", "RNFR .tpd-up.0123456789abcdef"):
        with pytest.raises(ftplib.error_perm):
            f.sendcmd(cmd) if not cmd.startswith("RETR") else retr(f, cmd.split()[1])
    f.quit()
    assert (server.home / "sub" / ".tpd-up.x").read_bytes() == b"partial"
