"""The HTTP upload-lab interface (runner.catalogue.servers), checked against one running
server with plain http.client and sockets: shared by the local and docker backend tests."""
from __future__ import annotations

import ftplib
import http.client
import io
import os
import re
import socket
import time

from runner.catalogue.servers import HTTP_UPLOAD_METHODS


def request(c: http.client.HTTPConnection, method: str, path: str, body: bytes | None = None,
            headers: dict | None = None) -> tuple[int, dict, bytes]:
    """One request on ``c``: (status, headers, body)."""
    c.request(method, path, body=body, headers=headers or {})
    r = c.getresponse()
    return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()


def check_interface(name: str, handle, connect) -> None:
    """PUT (file under uploads/ with the right size), POST where the server takes it,
    GET of a placed file, 400 on bad names, keep-alive (every request on one
    connection) and ``handle.stored_files()``. ``connect()`` returns a new
    http.client.HTTPConnection to the server."""
    t = handle.target
    assert t.http_port and not t.speaks_ftp or name == "tpd"
    payload = os.urandom(8192)
    placed = os.urandom(300_001)
    if t.root is not None:
        (t.root / "fixture.bin").write_bytes(placed)
    else:  # an FTP server in a container (tpd): its home is reached over FTP, as the drivers do
        assert t.speaks_ftp, "the home must be reachable for fixtures: a root or an FTP listener"
        with ftplib.FTP() as ftp:
            ftp.connect(t.host, t.port, timeout=10)
            ftp.login(t.user, t.password)
            ftp.storbinary("STOR fixture.bin", io.BytesIO(placed))
    c = connect()
    sock_ids = set()

    def req(method, path, body=None):
        out = request(c, method, path, body)
        sock_ids.add(id(c.sock))
        return out

    status, _, _ = req("PUT", "/uploads/put.bin", payload)
    assert status == 201, status
    expected = {"put.bin": len(payload)}
    if "POST" in HTTP_UPLOAD_METHODS[name]:
        status, headers, _ = req("POST", "/uploads/", payload[:1000])
        assert status == 201, status
        got = headers["location"].rpartition("/uploads/")[2]
        assert got and got != "put.bin"
        expected[got] = 1000
    status, _, body = req("GET", "/fixture.bin")
    assert status == 200 and body == placed
    status, _, body = req("GET", "/uploads/put.bin")
    assert status == 200 and body == payload
    assert len(sock_ids) == 1 and c.sock is not None, "keep-alive: every request on one connection"
    c.close()
    for bad in ("/uploads/../escape.bin", "/uploads/%2e%2e/escape.bin", "/uploads/..%2fescape.bin"):
        c = connect()
        status, _, _ = request(c, "PUT", bad, b"bad")
        c.close()
        assert status == 400, (bad, status)
    c = connect()
    status, _, _ = request(c, "PUT", "/uploads/a%2fb.bin", b"nested")
    c.close()
    assert status == (404 if name == "tpd" else 400), status  # tpd: a path whose folder is missing
    assert t.root is None or not (t.root / "escape.bin").exists()
    assert "escape.bin" not in dict(handle.stored_files(""))
    assert dict(handle.stored_files("uploads")) == expected
    assert ("fixture.bin", len(placed)) in handle.stored_files("")


def check_413(handle, connect, limit: int) -> None:
    """With ``max_body: limit``: a body of ``limit`` bytes is stored, one byte more is 413
    and stores nothing."""
    c = connect()
    status, _, _ = request(c, "PUT", "/uploads/ok.bin", b"k" * limit)
    assert status == 201, status
    c.close()
    c = connect()
    try:
        status, _, _ = request(c, "PUT", "/uploads/big.bin", b"b" * (limit + 1))
    except (ConnectionError, http.client.RemoteDisconnected):  # closed while the body was sent
        status = 413
    c.close()
    assert status == 413, status
    assert dict(handle.stored_files()) == {"ok.bin": limit}


def raw_two_requests(host: str, port: int) -> bytes:
    """Two pipelined GETs of / on one socket; the bytes answered (bounded: 5 s)."""
    s = socket.create_connection((host, port), timeout=5)
    try:
        s.sendall(b"GET /fixture.bin HTTP/1.1\r\nHost: x\r\n\r\n" * 2)
        out = b""
        for _ in range(1000):
            try:
                chunk = s.recv(65536)
            except TimeoutError:
                break
            if not chunk:
                break
            out += chunk
            if out.count(b"HTTP/1.1 200") >= 2 and len(out) > 600_000:
                break
        return out
    finally:
        s.close()


def max_body_of(argv: list[str], config_text: str = "") -> int | None:
    """The upload bound a server is started with: the value after ``--max-body`` /
    ``-max-body`` in ``argv``, else nginx's ``client_max_body_size N;`` in
    ``config_text``; None when neither is there."""
    for flag, value in zip(argv, argv[1:], strict=False):
        if flag.lstrip("-") == "max-body":
            return int(value)
    m = re.search(r"client_max_body_size\s+(\d+);", config_text)
    return int(m.group(1)) if m else None


def read_until_close(s: socket.socket, limit: float = 10) -> bytes:
    """Everything the server sends on ``s`` until it closes (a reset ends it too), at
    most ``limit`` s and 1 MiB. Raises TimeoutError when it neither closes nor resets
    within ``limit`` s (e.g. a server still waiting for a body)."""
    got = b""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline and len(got) < 1 << 20:
        s.settimeout(max(0.1, deadline - time.monotonic()))
        try:
            chunk = s.recv(65536)
        except ConnectionResetError:
            break
        except TimeoutError:
            raise TimeoutError(f"no close within {limit} s; got {got[:200]!r}") from None
        if not chunk:
            break
        got += chunk
    return got


def declared_body_answer(host: str, port: int, method: str, path: str, length: int,
                         expect_continue: bool = True) -> bytes:
    """Send only the head of ``method path`` with ``Content-Length: length`` (and
    ``Expect: 100-continue`` when asked), no body; what the server answers before it
    closes (read_until_close; TimeoutError when it waits for the body instead)."""
    s = socket.create_connection((host, port), timeout=10)
    try:
        s.sendall(f"{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {length}\r\n".encode()
                  + (b"Expect: 100-continue\r\n" if expect_continue else b"") + b"\r\n")
        return read_until_close(s)
    finally:
        s.close()
