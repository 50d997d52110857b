"""HTTP/1.1 behaviour of tpd, driven by urllib, http.client and raw sockets."""
from __future__ import annotations

import http.client
import os
import socket
import time
import urllib.error
import urllib.request

import pytest

from tests.tpd.tls_support import https_conn


def url(srv, path):
    return f"http://127.0.0.1:{srv.http_port}{path}"


def raw_connect(srv, timeout: float = 10, tls: bool = False) -> socket.socket:
    """A socket to srv's HTTP port, or with tls to its HTTPS port (TLS
    handshake done, certificate verified)."""
    if not tls:
        return socket.create_connection(("127.0.0.1", srv.http_port), timeout=timeout)
    s = socket.create_connection(("127.0.0.1", srv.https_port), timeout=timeout)
    return srv.tls.client_context().wrap_socket(s, server_hostname="127.0.0.1")


def raw_exchange(srv, data: bytes, timeout=10, tls: bool = False) -> bytes:
    """Send raw bytes (over HTTPS with tls), read until the server closes
    (or timeout)."""
    s = raw_connect(srv, timeout, tls)
    s.sendall(data)
    out = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            chunk = s.recv(65536)
        except socket.timeout:
            break
        if not chunk:
            break
        out += chunk
    s.close()
    return out


def test_get_head_and_errors(server):
    data = os.urandom(1_000_003)
    (server.home / "f.bin").write_bytes(data)
    (server.home / "page.html").write_text("<p>hi</p>")
    with urllib.request.urlopen(url(server, "/f.bin")) as r:
        assert r.status == 200 and r.read() == data
        assert r.headers["Content-Length"] == str(len(data))
        assert r.headers["Accept-Ranges"] == "bytes"
    with urllib.request.urlopen(url(server, "/page.html")) as r:
        assert r.headers["Content-Type"].startswith("text/html")
    req = urllib.request.Request(url(server, "/f.bin"), method="HEAD")
    with urllib.request.urlopen(req) as r:
        assert r.headers["Content-Length"] == str(len(data)) and r.read() == b""
    for path, code in (("/missing", 404), ("/%2e%2e/outside/secret.txt", 404),
                       ("/bad%zz", 400), ("/a%00b", 400)):
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(url(server, path))
        assert e.value.code == code, path


def test_directory_listing_and_redirect(server):
    (server.home / "d").mkdir()
    (server.home / "d" / "x.txt").write_text("x")
    c = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=10)
    c.request("GET", "/d")
    r = c.getresponse()
    r.read()
    assert r.status == 301 and r.headers["Location"] == "/d/"
    c.request("GET", "/d/")
    r = c.getresponse()
    assert r.status == 200 and r.read() == b"x.txt\r\n"


@pytest.mark.parametrize("tls", [False, True], ids=["plain", "tls"])
def test_symlink_escape_forbidden(make_server, tls):
    server = make_server(tls=tls)
    os.symlink(server.outside / "secret.txt", server.home / "leak")
    (server.home / "ok.txt").write_text("ok")
    if tls:
        c = https_conn(server)
        for path, code in (("/leak", 403), ("/%2e%2e/outside/secret.txt", 404),
                           ("/../outside/secret.txt", 404), ("/ok.txt", 200)):
            c.request("GET", path)
            r = c.getresponse()
            body = r.read()
            assert r.status == code, path
            assert b"top secret" not in body
        c.close()
        return
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(url(server, "/leak"))
    assert e.value.code == 403


def test_ranges(server):
    data = bytes(range(256)) * 40
    (server.home / "r.bin").write_bytes(data)
    c = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=10)
    for rng, body, cr in (("bytes=0-9", data[:10], f"bytes 0-9/{len(data)}"),
                          ("bytes=100-", data[100:], f"bytes 100-{len(data)-1}/{len(data)}"),
                          ("bytes=-5", data[-5:], f"bytes {len(data)-5}-{len(data)-1}/{len(data)}"),
                          ("bytes=10-999999", data[10:], f"bytes 10-{len(data)-1}/{len(data)}")):
        c.request("GET", "/r.bin", headers={"Range": rng})
        r = c.getresponse()
        assert r.status == 206, rng
        assert r.read() == body
        assert r.headers["Content-Range"] == cr
    c.request("GET", "/r.bin", headers={"Range": f"bytes={len(data)}-"})
    r = c.getresponse()
    r.read()
    assert r.status == 416 and r.headers["Content-Range"] == f"bytes */{len(data)}"
    c.request("GET", "/r.bin", headers={"Range": "bytes=0-1,5-6"})   # ignored
    r = c.getresponse()
    assert r.status == 200 and r.read() == data


def test_put_post_chunked_and_keepalive(server):
    c = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=10)
    body = os.urandom(700_000)
    c.request("PUT", "/up.bin", body=body)
    r = c.getresponse()
    r.read()
    assert r.status == 201 and r.headers["Location"] == "/up.bin"
    assert (server.home / "up.bin").read_bytes() == body
    c.request("PUT", "/up.bin", body=b"second")
    r = c.getresponse()
    r.read()
    assert r.status == 204
    assert (server.home / "up.bin").read_bytes() == b"second"

    def gen():
        for i in range(50):
            yield os.urandom(1000 + i)
    chunks = list(gen())
    c.request("POST", "/chunked.bin", body=iter(chunks),
              headers={"Transfer-Encoding": "chunked"}, encode_chunked=True)
    r = c.getresponse()
    r.read()
    assert r.status == 201
    assert (server.home / "chunked.bin").read_bytes() == b"".join(chunks)
    c.request("PUT", "/empty.bin", body=b"")
    r = c.getresponse()
    r.read()
    assert r.status == 201 and (server.home / "empty.bin").read_bytes() == b""
    c.request("PUT", "/nodir/x.bin", body=b"abc")
    r = c.getresponse()
    r.read()
    assert r.status == 404
    c.request("GET", "/up.bin")                     # same connection still alive
    assert c.getresponse().read() == b"second"


def test_urllib_upload(server):
    req = urllib.request.Request(url(server, "/u.txt"), data=b"hello", method="PUT")
    with urllib.request.urlopen(req) as r:
        assert r.status == 201
    assert (server.home / "u.txt").read_bytes() == b"hello"


def test_pipelining_and_http10(server):
    (server.home / "a.txt").write_text("AAA")
    out = raw_exchange(server, b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n"
                               b"PUT /p.txt HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nxyz"
                               b"GET /p.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert out.count(b"HTTP/1.1 200 OK") == 2 and out.count(b"HTTP/1.1 201") == 1
    assert out.endswith(b"xyz")
    out = raw_exchange(server, b"GET /a.txt HTTP/1.0\r\n\r\n")
    assert out.startswith(b"HTTP/1.1 200") and b"Connection: close" in out
    assert out.endswith(b"AAA")


def test_bad_requests(server):
    cases = [
        (b"GARBAGE\r\n\r\n", 400),
        (b"GET / HTTP/2.0\r\n\r\n", 505),
        (b"GET nopath HTTP/1.1\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nBad Header\r\n\r\n", 400),
        (b"PUT /x HTTP/1.1\r\nHost: a\r\n\r\n", 411),
        (b"PUT /x HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", 501),
        (b"PUT /x HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
        (b"PUT /x HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400),
        (b"PUT /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nZZ\r\n", 400),
        (b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\n\r\n", 414),
        (b"GET / HTTP/1.1\r\n" + b"X-A: b\r\n" * 2000 + b"\r\n", 431),
        (b"GET / HTTP/1.1\r\n" + b"X: y\r\n" * 150 + b"\r\n", 431),
        (b"BREW /pot HTTP/1.1\r\nConnection: close\r\n\r\n", 501),
        (b"DELETE /a HTTP/1.1\r\nConnection: close\r\n\r\n", 405),
    ]
    for req, code in cases:
        out = raw_exchange(server, req)
        assert out.startswith(f"HTTP/1.1 {code}".encode()), (req[:60], out[:80])
    with urllib.request.urlopen(url(server, "/")) as r:   # still serving
        assert r.status == 200


def test_read_only_http(make_server):
    srv = make_server(first_user_ro=True)
    out = raw_exchange(srv, b"PUT /x HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc"
                            b"GET /x HTTP/1.1\r\nConnection: close\r\n\r\n")
    assert out.startswith(b"HTTP/1.1 403") and b"HTTP/1.1 404" in out
    assert not (srv.rohome / "x").exists()


def test_slow_header_client_does_not_block(server):
    (server.home / "b.bin").write_bytes(b"b" * 5_000_000)
    slow = socket.create_connection(("127.0.0.1", server.http_port))
    slow.sendall(b"GET /b.bin HTT")
    stalled = socket.create_connection(("127.0.0.1", server.http_port))
    stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    stalled.sendall(b"GET /b.bin HTTP/1.1\r\n\r\n")        # never reads
    t0 = time.monotonic()
    with urllib.request.urlopen(url(server, "/b.bin")) as r:
        assert len(r.read()) == 5_000_000
    assert time.monotonic() - t0 < 10
    slow.close()
    stalled.close()


def test_http_no_fd_leak(server):
    (server.home / "f").write_bytes(b"f" * 100_000)
    base = server.fd_count()             # the fixture waited for the readiness probe's close
    for _ in range(30):
        s = socket.create_connection(("127.0.0.1", server.http_port))
        s.sendall(b"GET /f HTTP/1.1\r\n\r\n")
        s.recv(100)
        s.close()                                       # mid-response
        s = socket.create_connection(("127.0.0.1", server.http_port))
        s.sendall(b"PUT /g HTTP/1.1\r\nContent-Length: 100000\r\n\r\npartial")
        s.close()                                       # mid-upload
    # every count at or below base for 0.5 s: the count rose again (12 after 11) right after
    # it first fell back, in 2 of 9 runs here (likely a connection tpd accepted late)
    deadline = time.monotonic() + 10
    settled = 0
    while settled < 5 and time.monotonic() < deadline:
        settled = settled + 1 if server.fd_count() <= base else 0
        time.sleep(0.1)
    assert server.fd_count() <= base
