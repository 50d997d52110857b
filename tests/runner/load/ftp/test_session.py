"""FTP session tests: reply parsing (RFC 959), PASV/EPSV parsing, failure kinds against
scripted fake peers, PASV and EPSV transfers against the real pyftpdlib server."""
from __future__ import annotations

import asyncio
import time

import pytest

from runner.load.ftp.fixtures import server_name, write_fixture
from runner.load.ftp.session import FTPError, FTPSession, ReplyParser, open_session, parse_epsv, parse_pasv
from tests.support.fakeftp import FakeFTP
from tests.support.pyftpd import PASSWORD, USER

pytestmark = pytest.mark.timeout(30)


def test_single_line_replies_split_across_feeds():
    p = ReplyParser()
    assert p.feed(b"220 hel") == []
    out = p.feed(b"lo\r\n331 pass\r\n2")
    assert [(r.code, r.text) for r in out] == [(220, "hello"), (331, "pass")]
    assert [(r.code, r.text) for r in p.feed(b"30 ok\n")] == [(230, "ok")]  # bare LF accepted


def test_multi_line_reply_rfc959():
    p = ReplyParser()
    data = (b"220-first line\r\n"
            b"200 another code is not the end\r\n"
            b"220-still going\r\n"
            b" 220 leading space is not the end\r\n"
            b"220 last line\r\n"
            b"331 next\r\n")
    out = p.feed(data)
    assert [r.code for r in out] == [220, 331]
    assert out[0].text.splitlines() == ["first line", "200 another code is not the end",
                                        "220-still going", " 220 leading space is not the end",
                                        "last line"]


def test_multi_line_reply_byte_by_byte():
    p = ReplyParser()
    data = b"230-Welcome\r\n230-more\r\n230 done\r\n"
    out = []
    for i in range(len(data)):
        out += p.feed(data[i:i + 1])
    assert [(r.code, r.text) for r in out] == [(230, "Welcome\n230-more\ndone")]


def test_malformed_reply_is_protocol_error():
    with pytest.raises(FTPError) as e:
        ReplyParser().feed(b"hello there\r\n")
    assert e.value.kind == "protocol"


def test_parse_pasv_and_epsv():
    assert parse_pasv("Entering Passive Mode (127,0,0,1,195,80).") == 195 * 256 + 80
    assert parse_epsv("Entering Extended Passive Mode (|||6446|)") == 6446
    assert parse_epsv("ok (!!!2121!)") == 2121
    for bad in ("no address", "(1,2,3)"):
        with pytest.raises(FTPError):
            parse_pasv(bad)
    with pytest.raises(FTPError):
        parse_epsv("(|||x|)")


def test_multi_line_greeting_and_login_against_fake():
    async def go():
        greet = b"220-Welcome to fake\r\n220-It says 331 inside\r\n230 not end either\r\n220 ready\r\n"
        async with FakeFTP(greeting=greet, login_reply=b"230-hi\r\n230 logged in\r\n") as srv:
            s = FTPSession("127.0.0.1", srv.port, op_timeout=5)
            r = await s.connect()
            assert r.code == 220 and r.text.endswith("ready") and "331 inside" in r.text
            await s.login("u", "p")
            await s.type_binary()
            assert await s.size("f") == 1 << 20
            await s.quit()
    asyncio.run(go())


@pytest.mark.parametrize("passive", ["pasv", "epsv"])
@pytest.mark.parametrize("mode", ["protocol", "recv_into", "reader", "splice"])
def test_retr_short_transfer_detected(passive, mode):
    async def go():
        async with FakeFTP(file_size=300_000, retr_send=100_000) as srv:
            s = await open_session("127.0.0.1", srv.port, "u", "p", op_timeout=5,
                                   passive=passive, retr_mode=mode)
            with pytest.raises(FTPError) as e:
                await s.retr("f", 300_000)
            assert e.value.kind == "short_transfer"
            assert "100000 of 300000" in str(e.value)
            s.close()
    asyncio.run(go())


def test_stor_short_size_detected(tmp_path):
    src = write_fixture(tmp_path / "src.bin", 200_000)

    async def go():
        async with FakeFTP(stor_size=150_000) as srv:
            s = await open_session("127.0.0.1", srv.port, "u", "p", op_timeout=5)
            with open(src, "rb") as f:
                with pytest.raises(FTPError) as e:
                    await s.stor("up.bin", f, 200_000)
            assert e.value.kind == "short_transfer"
            assert srv.received["up.bin"] == 200_000  # all sent; the server's SIZE disagrees
            s.close()
    asyncio.run(go())


def test_silent_server_times_out():
    async def go():
        async with FakeFTP(greeting=None) as srv:
            s = FTPSession("127.0.0.1", srv.port, op_timeout=0.3)
            t0 = time.perf_counter()
            with pytest.raises(FTPError) as e:
                await s.connect()
            assert e.value.kind == "timeout"
            assert time.perf_counter() - t0 < 2
            s.close()
    asyncio.run(go())


def test_reply_5xx_kind():
    async def go():
        async with FakeFTP(login_reply=b"530 Login incorrect.\r\n") as srv:
            s = FTPSession("127.0.0.1", srv.port, op_timeout=5)
            await s.connect()
            with pytest.raises(FTPError) as e:
                await s.login("u", "bad")
            assert e.value.kind == "reply_5xx" and e.value.code == 530
            s.close()
    asyncio.run(go())


def test_refused_kind(free_port):
    async def go():
        s = FTPSession("127.0.0.1", free_port, op_timeout=5)
        with pytest.raises(FTPError) as e:
            await s.connect()
        assert e.value.kind == "refused"
        assert f"127.0.0.1:{free_port}" in str(e.value)
    asyncio.run(go())


@pytest.mark.parametrize("passive", ["pasv", "epsv"])
@pytest.mark.parametrize("mode", ["protocol", "recv_into", "reader", "splice"])
def test_real_retr_stor_size_dele(pyftpd, passive, mode, tmp_path):
    host, port, home = pyftpd
    size = 3 * (1 << 20) + 17
    name = server_name(size)
    write_fixture(home / name, size)
    src = write_fixture(tmp_path / "src.bin", size)

    async def go():
        s = await open_session(host, port, USER, PASSWORD, op_timeout=10, passive=passive,
                               retr_mode=mode, buffer_size=64 * 1024)
        assert await s.retr(name, size) == size
        up = f"up-{passive}-{mode}.bin"
        with open(src, "rb") as f:
            assert await s.stor(up, f, size) == size
        assert (home / up).read_bytes() == src.read_bytes()
        await s.dele(up)
        assert not (home / up).exists()
        with pytest.raises(FTPError) as e:
            await s.size("missing.bin")
        assert e.value.kind == "reply_5xx"
        await s.quit()
    asyncio.run(go())
