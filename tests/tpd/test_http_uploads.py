"""tpd's upload lab behaviour: POST to a folder stores the body under a
name tpd picks, ``--max-body`` (default 1 GiB) answers 413, for a declared length before
the body and for a chunked body as soon as a chunk would pass it, a ``..`` segment in an
upload target is 400, all on one keep-alive connection."""
from __future__ import annotations

import http.client
import os
import socket
import subprocess
import time

import pytest

from tests.runner.backends.http_checks import declared_body_answer, read_until_close

#: tpd's bound on an upload body without --max-body: 1 GiB, as catalogue.DEFAULT_MAX_BODY.
DEFAULT_BOUND = 1 << 30


def _req(c: http.client.HTTPConnection, method: str, path: str, body: bytes | None = None,
         headers: dict | None = None) -> tuple[int, dict, bytes]:
    c.request(method, path, body=body, headers=headers or {})
    r = c.getresponse()
    return r.status, dict(r.headers), r.read()


def _put_chunked(port: int, path: str, chunks: list[bytes]) -> http.client.HTTPResponse:
    """PUT ``chunks`` to ``path`` on 127.0.0.1:``port`` with chunked transfer encoding, on a
    connection of its own; returns the response, its body read and the connection closed."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("PUT", path, body=iter(chunks), encode_chunked=True, headers={"Transfer-Encoding": "chunked"})
    r = c.getresponse()
    r.read()
    c.close()
    return r


def test_post_to_folder_picks_unique_names(server):
    (server.home / "uploads").mkdir()
    c = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=10)
    bodies = [os.urandom(8192 + i) for i in range(5)]
    locations = []
    for b in bodies:
        status, headers, _ = _req(c, "POST", "/uploads/", b)
        assert status == 201
        locations.append(headers["Location"])
    assert len(set(locations)) == 5 and all(loc.startswith("/uploads/p-") for loc in locations)
    stored = {f.name: f.read_bytes() for f in (server.home / "uploads").iterdir()}
    assert sorted(stored.values()) == sorted(bodies)
    assert sorted("/uploads/" + n for n in stored) == sorted(locations)
    # a chunked POST too, then a GET on the same connection (keep-alive)
    c.request("POST", "/uploads/", body=iter([b"a" * 100, b"b" * 50]), encode_chunked=True,
              headers={"Transfer-Encoding": "chunked"})
    r = c.getresponse()
    r.read()
    assert r.status == 201 and r.headers["Connection"] == "keep-alive"
    status, _, body = _req(c, "GET", r.headers["Location"])
    assert status == 200 and body == b"a" * 100 + b"b" * 50


def test_dotdot_upload_refused(server):
    (server.home / "uploads").mkdir()
    c = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=10)
    for path in ("/uploads/../x.bin", "/uploads/%2e%2e/x.bin", "/../x.bin"):
        status, headers, _ = _req(c, "PUT", path, b"data")
        assert status == 400, path
        assert headers["Connection"] == "keep-alive"  # the body was read: the connection stays
    assert not (server.home / "x.bin").exists()
    assert list((server.home / "uploads").iterdir()) == []


def test_max_body_413(make_server):
    srv = make_server(extra=["--max-body", "1000"])
    (srv.home / "uploads").mkdir()
    c = http.client.HTTPConnection("127.0.0.1", srv.http_port, timeout=10)
    status, _, _ = _req(c, "PUT", "/uploads/ok.bin", b"x" * 1000)
    assert status == 201
    status, headers, _ = _req(c, "PUT", "/uploads/big.bin", b"x" * 1001)
    assert status == 413 and headers["Connection"] == "close"
    c.close()
    # chunked: the limit is checked on the decoded body, the partial upload leaves nothing
    r = _put_chunked(srv.http_port, "/uploads/chunked.bin", [b"y" * 600, b"y" * 600])
    assert r.status == 413
    assert sorted(f.name for f in (srv.home / "uploads").iterdir()) == ["ok.bin"]
    # 100-continue: refused before the body is sent
    s = socket.create_connection(("127.0.0.1", srv.http_port), timeout=10)
    s.sendall(b"PUT /uploads/e.bin HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\nExpect: 100-continue\r\n\r\n")
    assert s.recv(200).startswith(b"HTTP/1.1 413 ")
    s.close()


@pytest.mark.parametrize("method, path", [("PUT", "/uploads/huge.bin"), ("POST", "/uploads/")])
def test_default_bound_refuses_a_terabyte_before_the_body(make_server, method, path):
    """Without --max-body tpd still bounds uploads at 1 GiB (the lab's default for every
    HTTP server): a Content-Length of 1 TiB is 413 at once, with or without
    Expect: 100-continue, and never a 100 Continue that would invite the body."""
    srv = make_server()                                   # no --max-body
    (srv.home / "uploads").mkdir()
    for length in (1 << 40, DEFAULT_BOUND + 1):
        for expect in (True, False):
            got = declared_body_answer("127.0.0.1", srv.http_port, method, path, length, expect)
            assert got.startswith(b"HTTP/1.1 413 "), (length, expect, got[:200])
            assert b"100 Continue" not in got
    # a body of exactly the bound is invited (then abandoned: nothing is stored)
    s = socket.create_connection(("127.0.0.1", srv.http_port), timeout=10)
    s.sendall(f"{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {DEFAULT_BOUND}\r\n"
              "Expect: 100-continue\r\n\r\n".encode())
    assert s.recv(200).startswith(b"HTTP/1.1 100 Continue")
    s.sendall(b"z" * 5000)
    s.close()
    deadline = time.monotonic() + 10
    while any((srv.home / "uploads").iterdir()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert list((srv.home / "uploads").iterdir()) == []


def test_chunk_announced_past_the_default_bound_is_413_at_once(make_server):
    """A chunked upload is bounded too: a chunk whose size line announces more than the
    default 1 GiB bound is 413 before its data arrives, and the bytes already written
    (an earlier chunk) are not left behind."""
    srv = make_server()                                   # no --max-body
    (srv.home / "uploads").mkdir()
    for path in ("/uploads/chunked.bin", "/uploads/"):
        method = "PUT" if path.endswith(".bin") else "POST"
        s = socket.create_connection(("127.0.0.1", srv.http_port), timeout=10)
        s.sendall(f"{method} {path} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n".encode()
                  + b"1000\r\n" + b"a" * 4096 + b"\r\n"
                  + f"{DEFAULT_BOUND - 4096 + 1:x}\r\n".encode() + b"b" * 100)
        got = read_until_close(s)
        s.close()
        assert got.startswith(b"HTTP/1.1 413 "), got[:200]
    assert list((srv.home / "uploads").iterdir()) == []


def test_small_bound_chunked_exact_and_over(make_server):
    """With --max-body 1000: a chunked body of exactly 1000 bytes is stored; one whose
    next chunk would pass the bound is 413 as soon as that chunk is announced (the
    first chunk's bytes, already written, are discarded); 0 is not a bound."""
    srv = make_server(extra=["--max-body", "1000"])
    (srv.home / "uploads").mkdir()
    r = _put_chunked(srv.http_port, "/uploads/exact.bin", [b"e" * 400, b"e" * 600])
    assert r.status == 201
    s = socket.create_connection(("127.0.0.1", srv.http_port), timeout=10)
    s.sendall(b"PUT /uploads/over.bin HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
              b"258\r\n" + b"o" * 600 + b"\r\n191\r\n")        # 600 bytes, then 401 announced
    got = read_until_close(s)
    s.close()
    assert got.startswith(b"HTTP/1.1 413 "), got[:200]
    assert sorted(f.name for f in (srv.home / "uploads").iterdir()) == ["exact.bin"]
    assert (srv.home / "uploads" / "exact.bin").read_bytes() == b"e" * 1000


@pytest.mark.parametrize("value", ["0", "-1", "4611686018427387905", "1g"])
def test_max_body_zero_or_out_of_range_refused(tpd_binary, tmp_path, value):
    """--max-body has no 'no limit' value: 0 (and anything outside 1..2^62) is a bad
    value, exit status 2 with the option named."""
    users = tmp_path / "users"
    users.write_text(f"alice:{{plain}}secret:{tmp_path}:rw\n")
    r = subprocess.run([str(tpd_binary), "--users", str(users), "--max-body", value,
                        "--ftp-listen", "127.0.0.1:1"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "--max-body" in r.stderr, (r.returncode, r.stderr)
