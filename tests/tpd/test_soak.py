"""Bounded soak of tpd's ASan build: mixed FTP + HTTP clients for
TPD_SOAK_SECONDS (default 12 s in the test suite; ``make soak`` runs
600 s), some of them misbehaving:
half-sent requests, slowloris heads, unread directory listings, uploads cut
off mid-body, STORs aborted or dropped with the session.

Passes when: the server answers well-behaved clients throughout (each kind
completes work and no well-behaved request fails), the sanitizers report
nothing (checked on teardown by conftest), no temporary upload file is
left, the old file survives every aborted upload, and RSS grows by less
than SOAK_RSS_BOUND between the end of the first quarter of the run and
the end (ASan quarantine limited to 16 MiB so freed memory does not count
as growth).
"""
from __future__ import annotations

import asyncio
import os
import random
import time

import pytest

from tests.tpd.test_security import _no_temp_files

pytestmark = pytest.mark.slow

SOAK_RSS_BOUND = 48 << 20


async def _ftp_cmd(reader, writer, line: bytes) -> bytes:
    writer.write(line + b"\r\n")
    await writer.drain()
    while True:
        rep = await asyncio.wait_for(reader.readline(), 20)
        if not rep:
            raise ConnectionError("closed")
        if rep[3:4] == b" ":
            return rep


async def _ftp_login(port):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    assert (await asyncio.wait_for(reader.readline(), 20)).startswith(b"220")
    assert (await _ftp_cmd(reader, writer, b"USER alice")).startswith(b"331")
    assert (await _ftp_cmd(reader, writer, b"PASS secret")).startswith(b"230")
    return reader, writer


async def _pasv(reader, writer) -> int:
    rep = (await _ftp_cmd(reader, writer, b"PASV")).decode()
    nums = rep[rep.index("(") + 1: rep.index(")")].split(",")
    return int(nums[4]) * 256 + int(nums[5])


async def _ftp_transfer(reader, writer, cmd: bytes, upload: bytes | None = None) -> bytes:
    port = await _pasv(reader, writer)
    dr, dw = await asyncio.open_connection("127.0.0.1", port)
    rep = await _ftp_cmd(reader, writer, cmd)
    assert rep.startswith(b"150"), rep
    data = b""
    if upload is not None:
        dw.write(upload)
        await dw.drain()
        dw.close()
    else:
        while chunk := await asyncio.wait_for(dr.read(65536), 20):
            data += chunk
        dw.close()
    rep = await asyncio.wait_for(reader.readline(), 20)
    assert rep.startswith(b"226"), rep
    return data


async def _http(port, req: bytes) -> bytes:
    r, w = await asyncio.open_connection("127.0.0.1", port)
    w.write(req)
    await w.drain()
    out = b""
    while chunk := await asyncio.wait_for(r.read(65536), 20):
        out += chunk
    w.close()
    return out


async def _write_and_close(port, data: bytes, hold_s: float) -> None:
    """Connect to ``port``, send ``data``, wait ``hold_s`` seconds without reading, close."""
    _r, w = await asyncio.open_connection("127.0.0.1", port)
    w.write(data)
    await w.drain()
    await asyncio.sleep(hold_s)
    w.close()


def test_soak_mixed_clients(make_server):
    secs = float(os.environ.get("TPD_SOAK_SECONDS", "12"))
    srv = make_server(extra=["--log-level", "warn", "--idle-timeout", "5"],
                      asan_options="quarantine_size_mb=16")
    idle_fds = srv.fd_count()                 # listeners and log: no client yet
    payload = os.urandom(200_000)
    (srv.home / "f.bin").write_bytes(payload)
    (srv.home / "keep.txt").write_bytes(b"keep me\n")
    (srv.home / "many").mkdir()
    for i in range(3000):
        (srv.home / "many" / f"{'m' * 200}{i:05d}").touch()
    counts: dict[str, int] = {}
    failures: list[str] = []
    rss: list[tuple[float, int]] = []

    def bump(k):
        counts[k] = counts.get(k, 0) + 1

    async def good_ftp(i, stop):
        while time.monotonic() < stop:
            reader, writer = await _ftp_login(srv.ftp_port)
            for _ in range(5):
                assert await _ftp_transfer(reader, writer, b"RETR f.bin") == payload
                listing = await _ftp_transfer(reader, writer, b"NLST many")
                assert listing.count(b"\r\n") == 3000
                await _ftp_transfer(reader, writer, f"STOR up{i}.bin".encode(), payload[:5000])
                bump("ftp_ok")
            await _ftp_cmd(reader, writer, b"QUIT")
            writer.close()

    async def good_http(i, stop):
        while time.monotonic() < stop:
            out = await _http(srv.http_port, b"GET /f.bin HTTP/1.1\r\nHost: x\r\n"
                                             b"Connection: close\r\n\r\n")
            assert out.startswith(b"HTTP/1.1 200") and out.endswith(payload)
            out = await _http(srv.http_port, b"GET /many/ HTTP/1.0\r\n\r\n")
            assert out.startswith(b"HTTP/1.1 200") and out.count(b"\r\n") >= 3000
            out = await _http(srv.http_port, f"PUT /h{i}.bin HTTP/1.1\r\nHost: x\r\n"
                              "Content-Length: 5\r\nConnection: close\r\n\r\nhello".encode())
            assert out.split(b" ")[1] in (b"201", b"204")
            bump("http_ok")

    async def bad(i, stop):
        rnd = random.Random(i)
        while time.monotonic() < stop:
            kind = rnd.choice(["half", "slowloris", "unread", "cut_put", "abort_stor",
                               "drop_stor", "garbage"])
            try:
                if kind == "half":
                    await _write_and_close(srv.http_port, b"GET /f.bin HTTP/1.1\r\nHo", 0.2)
                elif kind == "slowloris":
                    r, w = await asyncio.open_connection("127.0.0.1", srv.http_port)
                    for b in b"GET /f.bin HTTP/1.1\r\nX-a: b":
                        w.write(bytes([b]))
                        await asyncio.sleep(0.1)
                        if time.monotonic() > stop:
                            break
                    w.close()
                elif kind == "unread":
                    await _write_and_close(srv.http_port, b"GET /many/ HTTP/1.1\r\nHost: x\r\n\r\n", 1.5)
                elif kind == "cut_put":
                    await _write_and_close(srv.http_port, b"PUT /keep.txt HTTP/1.1\r\nHost: x\r\n"
                                           b"Content-Length: 99999\r\n\r\n" + b"z" * 3000, 0.1)
                elif kind in ("abort_stor", "drop_stor"):
                    reader, writer = await _ftp_login(srv.ftp_port)
                    port = await _pasv(reader, writer)
                    dr, dw = await asyncio.open_connection("127.0.0.1", port)
                    assert (await _ftp_cmd(reader, writer, b"STOR keep.txt")).startswith(b"150")
                    dw.write(b"q" * 4000)
                    await dw.drain()
                    if kind == "abort_stor":
                        await _ftp_cmd(reader, writer, b"ABOR")
                    writer.close()
                    # a data EOF means "complete" in stream mode: close the
                    # data side only well after the session is gone
                    await asyncio.sleep(1.0)
                    dw.close()
                else:
                    r, w = await asyncio.open_connection("127.0.0.1", srv.ftp_port)
                    w.write(bytes(rnd.randrange(256) for _ in range(300)) + b"\r\n")
                    await asyncio.sleep(0.05)
                    w.close()
                bump("bad_" + kind)
            except (ConnectionError, asyncio.TimeoutError):
                bump("bad_refused")     # a misbehaving client may be cut off

    async def sample(stop):
        t0 = time.monotonic()
        while time.monotonic() < stop:
            rss.append((time.monotonic() - t0, srv.rss_bytes()))
            await asyncio.sleep(0.5)

    async def guarded(coro, name):
        try:
            await coro
        except Exception as e:  # noqa: BLE001 - reported below
            failures.append(f"{name}: {e!r}")

    async def main():
        stop = time.monotonic() + secs
        tasks = [guarded(good_ftp(i, stop), f"ftp{i}") for i in range(4)]
        tasks += [guarded(good_http(i, stop), f"http{i}") for i in range(4)]
        tasks += [guarded(bad(i, stop), f"bad{i}") for i in range(8)]
        tasks.append(sample(stop))
        await asyncio.wait_for(asyncio.gather(*tasks), secs + 60)

    asyncio.run(main())
    assert not failures, failures[:5]
    assert counts.get("ftp_ok", 0) >= 4 and counts.get("http_ok", 0) >= 4, counts
    assert sum(v for k, v in counts.items() if k.startswith("bad_")) >= 20, counts
    # RSS: from the end of the first quarter to the end
    quarter = [v for t, v in rss if t >= secs / 4]
    growth = quarter[-1] - quarter[0]
    print(f"soak {secs:.0f}s counts={counts} rss {quarter[0] >> 20} -> {quarter[-1] >> 20} MiB")
    assert growth < SOAK_RSS_BOUND, f"RSS grew {growth >> 20} MiB (bound {SOAK_RSS_BOUND >> 20})"
    # every client has closed: wait (at most 10 s) until the server has closed its side of
    # every connection too, so the last aborted uploads have been dealt with
    deadline = time.monotonic() + 10
    while srv.fd_count() > idle_fds and time.monotonic() < deadline:
        time.sleep(0.05)
    assert srv.fd_count() <= idle_fds, f"{srv.fd_count() - idle_fds} descriptors still open 10 s after the clients"
    kept = (srv.home / "keep.txt").read_bytes()
    assert kept == b"keep me\n", f"an aborted upload replaced keep.txt: {len(kept)} bytes {kept[:20]!r}"
    assert _no_temp_files(srv.home), [p for p in os.listdir(srv.home) if p.startswith(".tpd")]
