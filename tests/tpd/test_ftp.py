"""FTP behaviour of tpd, driven by Python's ftplib and raw sockets."""
from __future__ import annotations

import ftplib
import io
import os
import socket
import ssl
import threading
import time

import pytest

from tests.tpd.conftest import PASSWORD_HASH_SECRET, raise_nofile
from tests.tpd.tls_support import ftps_connect

TLS_IDS = ["plain", "tls"]


def connect(srv, user="alice", pw="secret", tls=False) -> ftplib.FTP:
    """Log in with ftplib; tls: explicit FTPS with PROT P (tls_support)."""
    if tls:
        return ftps_connect(srv, user, pw)
    f = ftplib.FTP(timeout=20)
    f.connect("127.0.0.1", srv.ftp_port)
    f.login(user, pw)
    return f


def retr(f: ftplib.FTP, name: str, rest=None) -> bytes:
    b = io.BytesIO()
    f.retrbinary(f"RETR {name}", b.write, rest=rest)
    return b.getvalue()


class Raw:
    """A raw control connection for protocol-level checks."""

    def __init__(self, port: int):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.buf = b""
        self.greeting = self.reply()

    def send(self, data: bytes) -> None:
        self.s.sendall(data)

    def reply(self) -> str:
        """Read one (possibly multi-line) reply."""
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            lines = self.buf.split(b"\r\n")
            for i, line in enumerate(lines[:-1]):
                if len(line) >= 4 and line[3:4] == b" " and line[:3].isdigit():
                    if i == 0 or lines[0][:3] == line[:3]:
                        out = b"\r\n".join(lines[: i + 1]).decode("utf-8", "replace")
                        self.buf = b"\r\n".join(lines[i + 1:])
                        return out
            chunk = self.s.recv(65536)
            if not chunk:
                raise ConnectionError("closed; buffered=%r" % self.buf)
            self.buf += chunk
        raise TimeoutError(self.buf)

    def cmd(self, line: str) -> str:
        self.send(line.encode() + b"\r\n")
        return self.reply()

    def expect(self, *exchanges: tuple[str, str]) -> None:
        """Send each ``(command line, reply code)`` in turn and check the reply starts
        with the code (the assertion names the command and the reply)."""
        for line, code in exchanges:
            reply = self.cmd(line)
            assert reply.startswith(code), (line, reply)

    def login(self, user="alice", pw="secret") -> None:
        assert self.cmd(f"USER {user}").startswith("331")
        assert self.cmd(f"PASS {pw}").startswith("230")

    def close(self) -> None:
        self.s.close()


# --------------------------------------------------------------------------
# login and basic commands
# --------------------------------------------------------------------------

def test_login_plain_hash_and_failures(server):
    f = connect(server)
    assert f.pwd() == "/"
    f.quit()
    f = connect(server, "carol", PASSWORD_HASH_SECRET)
    f.quit()
    with pytest.raises(ftplib.error_perm, match="530"):
        connect(server, "alice", "wrong")
    with pytest.raises(ftplib.error_perm, match="530"):
        connect(server, "nobody", "x")


def test_commands_need_login(server):
    r = Raw(server.ftp_port)
    assert r.greeting.startswith("220")
    assert r.cmd("PWD").startswith("530")
    assert r.cmd("RETR x").startswith("530")
    assert r.cmd("PASS x").startswith("503")
    assert r.cmd("SYST").startswith("215")
    feat = r.cmd("FEAT")
    for word in ("EPSV", "MLST", "SIZE", "MDTM", "REST STREAM", "UTF8"):
        assert word in feat
    assert r.cmd("OPTS UTF8 ON").startswith("200")
    assert r.cmd("NOOP").startswith("200")
    assert r.cmd("QUIT").startswith("221")
    assert r.s.recv(10) == b""


def test_three_failed_logins_close(server):
    r = Raw(server.ftp_port)
    for _ in range(3):
        r.cmd("USER alice")
        assert r.cmd("PASS bad").startswith("530")
    r.s.settimeout(5)
    assert r.s.recv(100) == b""


def test_settings_commands(server):
    r = Raw(server.ftp_port)
    r.login()
    r.expect(("TYPE I", "200"), ("TYPE A", "200"), ("TYPE L 8", "200"), ("TYPE X", "504"),
             ("MODE S", "200"), ("MODE B", "504"), ("STRU F", "200"), ("STRU R", "504"),
             ("REST abc", "501"), ("REST 10", "350"), ("ALLO 100", "202"), ("HELP", "214"),
             ("STAT", "211"), ("XYZZY", "500"), ("USER bob", "530"), ("QUIT", "221"))


def test_retr_stor_size_mdtm(server):
    data = os.urandom(3 * 1024 * 1024 + 17)
    (server.home / "big.bin").write_bytes(data)
    f = connect(server)
    assert f.size("big.bin") == len(data)
    assert retr(f, "big.bin") == data
    assert retr(f, "big.bin", rest=1000) == data[1000:]
    up = os.urandom(2 * 1024 * 1024 + 5)
    f.storbinary("STOR up.bin", io.BytesIO(up))
    assert (server.home / "up.bin").read_bytes() == up
    f.storbinary("APPE up.bin", io.BytesIO(b"tail"))
    assert (server.home / "up.bin").read_bytes() == up + b"tail"
    # STOR with REST overwrites from the offset
    f.storbinary("STOR up.bin", io.BytesIO(b"HEAD"), rest=0)
    assert (server.home / "up.bin").read_bytes()[:4] == b"HEAD"
    mdtm = f.sendcmd("MDTM big.bin")
    assert mdtm.startswith("213 ") and len(mdtm.split()[1]) == 14
    with pytest.raises(ftplib.error_perm, match="550"):
        f.size("missing")
    with pytest.raises(ftplib.error_perm, match="550"):
        retr(f, "missing")
    f.quit()


def test_empty_file_and_no_data_connection(server):
    (server.home / "empty").write_bytes(b"")
    f = connect(server)
    assert retr(f, "empty") == b""
    with pytest.raises(ftplib.error_temp, match="425"):
        f.sendcmd("RETR empty")
    f.quit()


def test_directories_and_listings(server):
    f = connect(server)
    assert f.mkd("d1") == "/d1"
    f.cwd("d1")
    assert f.pwd() == "/d1"
    f.storbinary("STOR x.txt", io.BytesIO(b"12345"))
    assert f.nlst() == ["x.txt"]
    lines = []
    f.retrlines("LIST", lines.append)
    assert len(lines) == 1 and lines[0].startswith("-rw") and lines[0].endswith(" x.txt")
    lines = []
    f.retrlines("LIST -la", lines.append)
    assert lines[0].endswith(" x.txt")
    facts = dict(f.mlsd())
    assert facts["x.txt"]["type"] == "file" and facts["x.txt"]["size"] == "5"
    mlst = f.sendcmd("MLST x.txt")
    assert mlst.startswith("250-") and "size=5;" in mlst and "/d1/x.txt" in mlst
    f.sendcmd("CDUP")
    assert f.pwd() == "/"
    f.rename("d1/x.txt", "d1/y.txt")
    assert f.nlst("d1") == ["y.txt"]
    with pytest.raises(ftplib.error_perm, match="550"):
        f.rmd("d1")                      # not empty
    f.delete("d1/y.txt")
    f.rmd("d1")
    assert "d1" not in f.nlst()
    with pytest.raises(ftplib.error_perm, match="550"):
        f.cwd("nonexistent")
    with pytest.raises(ftplib.error_perm, match="503"):
        f.sendcmd("RNTO z")
    f.quit()


def test_pwd_quotes(server):
    (server.home / 'we"ird').mkdir()
    r = Raw(server.ftp_port)
    r.login()
    assert r.cmd('CWD we"ird').startswith("250")
    assert r.cmd("PWD") == '257 "/we""ird" is the current directory'


def test_passive_extended_and_active_modes(server):
    (server.home / "f.txt").write_bytes(b"payload" * 1000)
    f = connect(server)
    f.set_pasv(True)
    assert retr(f, "f.txt") == b"payload" * 1000      # ftplib uses PASV on IPv4
    f.af = socket.AF_INET6                            # forces EPSV in ftplib
    assert retr(f, "f.txt") == b"payload" * 1000
    f.af = socket.AF_INET
    f.set_pasv(False)                                  # PORT
    assert retr(f, "f.txt") == b"payload" * 1000
    f.af = socket.AF_INET6                             # EPRT (with IPv4 address)
    with pytest.raises(ftplib.error_perm):
        f.sendcmd("EPRT |2|::1|5000|")                 # wrong protocol
    f.af = socket.AF_INET
    f.sendcmd("EPRT |1|127.0.0.1|5000|")
    with pytest.raises(ftplib.error_perm, match="500"):
        f.sendcmd("PORT 10,1,2,3,4,5")                 # bounce attempt
    with pytest.raises(ftplib.error_perm, match="501"):
        f.sendcmd("PORT 1,2,3")
    f.quit()


def test_pasv_range_and_masquerade(make_server):
    srv = make_server(extra=["--pasv-ports", "45000-45009", "--masquerade", "10.9.8.7"])
    r = Raw(srv.ftp_port)
    r.login()
    rep = r.cmd("PASV")
    assert rep.startswith("227") and "10,9,8,7," in rep
    nums = rep[rep.index("(") + 1: rep.index(")")].split(",")
    port = int(nums[4]) * 256 + int(nums[5])
    assert 45000 <= port <= 45009
    rep = r.cmd("EPSV")
    port = int(rep.split("|||")[1].rstrip("|)"))
    assert 45000 <= port <= 45009
    assert r.cmd("EPSV ALL").startswith("200")
    assert r.cmd("PASV").startswith("501")


def test_abort_during_transfer(server):
    (server.home / "huge.bin").write_bytes(b"\0" * (64 * 1024 * 1024))
    f = connect(server)
    conn = f.transfercmd("RETR huge.bin")
    conn.recv(1024)
    resp = f.abort()
    assert resp[:3] in ("426", "225", "226")
    if resp.startswith("426"):
        assert f.getresp().startswith("226")
    conn.close()
    assert f.sendcmd("NOOP").startswith("200")
    f.quit()


def test_read_only_user(server):
    (server.rohome / "r.txt").write_bytes(b"ro")
    f = connect(server, "bob", "builder")
    assert retr(f, "r.txt") == b"ro"
    for cmd in ("STOR n.txt", "APPE r.txt", "DELE r.txt", "MKD x", "RMD x", "RNFR r.txt"):
        with pytest.raises(ftplib.error_perm, match="550"):
            f.sendcmd(cmd)
    f.quit()
    assert sorted(os.listdir(server.rohome)) == ["r.txt"]


# --------------------------------------------------------------------------
# confinement
# --------------------------------------------------------------------------

@pytest.mark.parametrize("tls", [False, True], ids=TLS_IDS)
def test_paths_cannot_leave_home(make_server, tls):
    server = make_server(tls=tls)
    (server.home / "in.txt").write_text("inside")
    os.symlink(server.outside / "secret.txt", server.home / "abs_link")
    os.symlink("../outside/secret.txt", server.home / "rel_link")
    os.symlink(str(server.outside), server.home / "dir_link")
    os.symlink("in.txt", server.home / "good_link")
    f = connect(server, tls=tls)
    f.cwd("../../..")
    assert f.pwd() == "/"
    assert retr(f, "../../../in.txt") == b"inside"      # clamped at the root
    assert retr(f, "good_link") == b"inside"
    for name in ("abs_link", "rel_link", "dir_link/secret.txt",
                 "../outside/secret.txt", "/../outside/secret.txt"):
        with pytest.raises(ftplib.error_perm, match="550"):
            retr(f, name)
    with pytest.raises(ftplib.error_perm, match="550"):
        f.cwd("dir_link")
    with pytest.raises(ftplib.error_perm):
        f.storbinary("STOR dir_link/evil.txt", io.BytesIO(b"x"))
    with pytest.raises(ftplib.error_perm):
        f.storbinary("STOR abs_link", io.BytesIO(b"x"))
    assert (server.outside / "secret.txt").read_text() == "top secret\n"
    assert not (server.outside / "evil.txt").exists()
    f.delete("abs_link")                                  # removes the link only
    assert (server.outside / "secret.txt").exists()
    f.quit()


# --------------------------------------------------------------------------
# hostile and malformed input
# --------------------------------------------------------------------------

def test_malformed_and_long_lines(server):
    r = Raw(server.ftp_port)
    r.login()
    r.send(b"A" * 5000 + b"\r\n")
    assert r.reply().startswith("500")
    assert r.cmd("NOOP").startswith("200")
    assert r.cmd("NO\x00OP").startswith("500")
    assert r.cmd("12345 x").startswith("500")
    assert r.cmd("NOOPX").startswith("500")
    r.send(b"\xff\xf4\xff\xf2NOOP\r\n")                 # telnet IP + DM
    assert r.reply().startswith("200")
    r.send(b"noop\n")                                    # bare LF, lower case
    assert r.reply().startswith("200")
    r.send(b"\r\n")                                       # empty line ignored
    assert r.cmd("CWD " + "x/" * 3000).startswith(("500", "550", "553"))
    r.send(b"NOOP\r\nNOOP\r\nPWD\r\n")                   # pipelined
    assert r.reply().startswith("200")
    assert r.reply().startswith("200")
    assert r.reply().startswith("257")
    assert r.cmd("QUIT").startswith("221")


def test_garbage_never_crashes(server):
    import random
    rnd = random.Random(1234)
    for _ in range(30):
        s = socket.create_connection(("127.0.0.1", server.ftp_port), timeout=5)
        s.recv(100)
        s.sendall(bytes(rnd.randrange(256) for _ in range(rnd.randrange(1, 3000))))
        s.close()
    f = connect(server)
    f.quit()


def test_slow_and_stalled_clients_do_not_block_others(server):
    (server.home / "big.bin").write_bytes(b"z" * (32 * 1024 * 1024))
    # a client that sends half a command and stops
    half = socket.create_connection(("127.0.0.1", server.ftp_port), timeout=5)
    half.recv(100)
    half.sendall(b"USER ali")
    # a client that starts a download and never reads it
    stalled = connect(server)
    sock = stalled.transfercmd("RETR big.bin")
    # a client that never reads replies but keeps sending commands
    spam = socket.create_connection(("127.0.0.1", server.ftp_port), timeout=5)
    spam.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    spam.setblocking(False)
    sent = 0
    try:
        for _ in range(2000):
            sent += spam.send(b"HELP\r\n" * 100)
    except (BlockingIOError, ConnectionError):
        pass
    t0 = time.monotonic()
    f = connect(server)
    assert len(retr(f, "big.bin")) == 32 * 1024 * 1024
    f.quit()
    assert time.monotonic() - t0 < 20
    for s in (half, sock, spam):
        s.close()
    stalled.close()


@pytest.mark.parametrize("tls", [False, True], ids=TLS_IDS)
def test_max_conns(make_server, tls):
    srv = make_server(extra=["--max-conns", "3"], tls=tls)
    time.sleep(0.3)                     # let the readiness probe's close land
    if tls:
        # TLS sessions count; over the limit the implicit-FTPS listener
        # closes at once (no plaintext reply can precede the handshake)
        conns = [connect(srv, tls=True) for _ in range(3)]
        with pytest.raises((ssl.SSLError, OSError, EOFError)):
            ftps_connect(srv, implicit=True)
    else:
        conns = [Raw(srv.ftp_port) for _ in range(3)]
        assert all(c.greeting.startswith("220") for c in conns)
    s = socket.create_connection(("127.0.0.1", srv.ftp_port), timeout=5)
    assert s.recv(100).startswith(b"421")
    s.close()
    for c in conns:
        c.close()
    time.sleep(0.3)
    Raw(srv.ftp_port).close()
    if tls:
        ftps_connect(srv, implicit=True).quit()


@pytest.mark.parametrize("tls", [False, True], ids=TLS_IDS)
def test_idle_timeout(make_server, tls):
    srv = make_server(extra=["--idle-timeout", "1"], tls=tls)
    if tls:
        # a logged-in FTPS session gets its 421 over TLS, then the close
        f = connect(srv, tls=True)
        time.sleep(2.5)
        with pytest.raises(ftplib.error_temp, match="421"):
            f.voidresp()
        f.close()
        return
    r = Raw(srv.ftp_port)
    time.sleep(2.5)
    r.s.settimeout(5)
    data = r.s.recv(100)
    assert data.startswith(b"421")


def test_no_descriptor_leak(server):
    (server.home / "f.bin").write_bytes(b"q" * 200000)
    time.sleep(0.3)                      # let the readiness probe close
    base = server.fd_count()
    for i in range(20):
        f = connect(server)
        retr(f, "f.bin")
        f.storbinary(f"STOR u{i}.bin", io.BytesIO(b"x" * 1000))
        f.nlst()
        f.sendcmd("PASV")                 # listener left open, then dropped
        conn = f.transfercmd("RETR f.bin")
        conn.close()                       # client aborts mid-transfer
        f.close()                          # no QUIT
    deadline = time.monotonic() + 10
    while server.fd_count() > base and time.monotonic() < deadline:
        time.sleep(0.1)
    # <= : the start-up readiness probe may still have been open at `base`
    assert server.fd_count() <= base


def test_concurrent_ftplib_clients(server):
    data = os.urandom(1024 * 1024)
    (server.home / "c.bin").write_bytes(data)
    errors = []

    def worker(i):
        try:
            f = connect(server)
            assert retr(f, "c.bin") == data
            f.storbinary(f"STOR w{i}.bin", io.BytesIO(data[:10000]))
            f.quit()
        except Exception as e:  # noqa: BLE001
            errors.append(repr(e))

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(50)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 60
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    hung = [t.name for t in threads if t.is_alive()]
    assert not hung, f"{len(hung)} client threads still running after 60 s"
    assert not errors


def test_thousand_concurrent_sessions(make_server):
    """1,000 sessions logged in at once, each doing PWD; then one transfer."""
    import asyncio
    raise_nofile(8000)
    srv = make_server(extra=["--log-level", "warn"])
    (srv.home / "t.txt").write_bytes(b"ok")

    async def session(i, ready: asyncio.Event, sessions, logged_in: asyncio.Event):
        reader, writer = await asyncio.open_connection("127.0.0.1", srv.ftp_port)
        assert (await reader.readline()).startswith(b"220")
        writer.write(b"USER alice\r\nPASS secret\r\n")
        assert (await reader.readline()).startswith(b"331")
        assert (await reader.readline()).startswith(b"230")
        sessions.append((reader, writer))
        logged_in.set()
        await ready.wait()
        writer.write(b"PWD\r\n")
        assert (await reader.readline()).startswith(b"257")
        writer.write(b"QUIT\r\n")
        assert (await reader.readline()).startswith(b"221")
        writer.close()

    async def main():
        ready = asyncio.Event()
        sessions = []
        # at most 200 connects + logins in flight at once (the listen
        # backlog is not what this test measures); a session releases its
        # slot once logged in and then holds its connection until `ready`
        sem = asyncio.Semaphore(200)

        async def limited(i):
            logged_in = asyncio.Event()
            async with sem:
                task = asyncio.create_task(session(i, ready, sessions, logged_in))
                waiter = asyncio.create_task(logged_in.wait())
                done, _ = await asyncio.wait(
                    [task, waiter], timeout=30, return_when=asyncio.FIRST_COMPLETED)
                waiter.cancel()
                assert done, f"session {i}: no login within 30 s"
            await task

        tasks = [asyncio.create_task(limited(i)) for i in range(1000)]
        deadline = time.monotonic() + 60
        while len(sessions) < 1000 and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert len(sessions) == 1000
        # while all 1,000 are connected, a real client still gets service
        f = await asyncio.to_thread(connect, srv)
        assert await asyncio.to_thread(retr, f, "t.txt") == b"ok"
        await asyncio.to_thread(f.quit)
        ready.set()
        await asyncio.wait_for(asyncio.gather(*tasks), 60)

    asyncio.run(main())


def test_config_file_and_flag_override(tpd_binary, tmp_path):
    import subprocess
    from tests.support.ports import free_ports
    home = tmp_path / "h"
    home.mkdir()
    users = tmp_path / "users"
    users.write_text(f"# comment\nzed:{{plain}}pw:{home}:rw\n")
    p1, p2 = free_ports(2)
    conf = tmp_path / "tpd.conf"
    conf.write_text(f"# tpd config\nftp-listen = 127.0.0.1:{p1}\nusers = {users}\n"
                    "idle-timeout = 30\nlog-level = debug\nmax-conns = 10\n")
    proc = subprocess.Popen([str(tpd_binary), "--config", str(conf),
                             "--ftp-listen", f"127.0.0.1:{p2}"],
                            stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                f = ftplib.FTP()
                f.connect("127.0.0.1", p2, timeout=5)
                break
            except OSError:
                time.sleep(0.05)
        f.login("zed", "pw")
        f.quit()
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=20)
    assert proc.returncode == 0
    assert b"[debug]" in err
    bad = subprocess.run([str(tpd_binary), "--users", str(users), "--max-conns", "zero"],
                         capture_output=True, timeout=20)
    assert bad.returncode == 2
