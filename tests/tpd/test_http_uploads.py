"""tpd's upload lab behaviour (issue 14): POST to a folder stores the body under a
name tpd picks, ``--max-body`` answers 413, a ``..`` segment in an upload target is
400, all on one keep-alive connection."""
from __future__ import annotations

import http.client
import os
import socket


def _req(c: http.client.HTTPConnection, method: str, path: str, body: bytes | None = None,
         headers: dict | None = None) -> tuple[int, dict, bytes]:
    c.request(method, path, body=body, headers=headers or {})
    r = c.getresponse()
    return r.status, dict(r.headers), r.read()


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
    c = http.client.HTTPConnection("127.0.0.1", srv.http_port, timeout=10)
    c.request("PUT", "/uploads/chunked.bin", body=iter([b"y" * 600, b"y" * 600]), encode_chunked=True,
              headers={"Transfer-Encoding": "chunked"})
    r = c.getresponse()
    r.read()
    assert r.status == 413
    c.close()
    assert sorted(f.name for f in (srv.home / "uploads").iterdir()) == ["ok.bin"]
    # 100-continue: refused before the body is sent
    s = socket.create_connection(("127.0.0.1", srv.http_port), timeout=10)
    s.sendall(b"PUT /uploads/e.bin HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\nExpect: 100-continue\r\n\r\n")
    assert s.recv(200).startswith(b"HTTP/1.1 413 ")
    s.close()
