"""A pyftpdlib server for the load-generator tests (run as a subprocess).

Usage: python pyftpd_server.py HOME USER PASSWORD [HOST [dropthird | cap=BYTES_PER_S | loginlog=PATH idle=S]]
Binds HOST (default 127.0.0.1) on a free port, prints ``PORT <n>`` on stdout, serves
until killed. max_cons=0 (unlimited), sendfile on, full permissions for USER.
``dropthird``: every third file received by STOR is deleted once received (the
client got its ``226`` all the same): a server that loses some uploads.
``cap=R``: every data connection's sends share one token bucket of R bytes/s (a burst of
at most 50 ms of R), so the server's total RETR bandwidth is R however many clients
there are: a server that serves exactly floor(R / X) users at X bytes/s each.
``loginlog=PATH``: the server appends one line ``login <client ip>:<port>`` to PATH for
every successful login (pyftpdlib's ``on_login``): the server's own count of logins.
``idle=S``: the server ends a control connection idle for S seconds (pyftpdlib's
``timeout``, 120 by default; it answers ``421`` and closes).
"""
import itertools
import logging
import os
import sys
import time

from pyftpdlib.authorizers import DummyAuthorizer
from pyftpdlib.handlers import DTPHandler, FTPHandler
from pyftpdlib.servers import FTPServer


class Bucket:
    """A token bucket of ``rate`` bytes/s holding at most 50 ms of tokens; may go into debt."""

    def __init__(self, rate: int) -> None:
        self.rate = rate
        self.cap = rate * 0.05
        self.tokens = self.cap
        self.t = time.monotonic()

    def level(self) -> float:
        now = time.monotonic()
        self.tokens = min(self.cap, self.tokens + (now - self.t) * self.rate)
        self.t = now
        return self.tokens


def capped_dtp(rate: int) -> type:
    """A DTPHandler class whose sends draw on one shared :class:`Bucket` of ``rate``."""
    bucket = Bucket(rate)
    chunk = max(1024, min(65536, rate // 100))

    class CappedDTP(DTPHandler):
        ac_out_buffer_size = chunk

        def __init__(self, sock, cmd_channel):
            super().__init__(sock, cmd_channel)
            self._wake = None

        def use_sendfile(self):
            return False

        def _pause(self, seconds: float) -> None:
            def unsleep():
                self._wake = None
                if not self._closed:
                    self.add_channel(events=self.ioloop.WRITE)

            self.del_channel()
            self._wake = self.ioloop.call_later(seconds, unsleep, _errback=self.handle_error)

        def send(self, data):
            level = bucket.level()
            if level <= 0:
                self._pause(-level / rate + 0.001)
                return 0
            sent = super().send(data[:chunk])
            bucket.tokens -= sent
            if bucket.tokens < 0:
                self._pause(-bucket.tokens / rate)
            return sent

        def close(self):
            if self._wake is not None and not self._wake.cancelled:
                self._wake.cancel()
            super().close()

    return CappedDTP


def main() -> None:
    home, user, password = sys.argv[1:4]
    host = sys.argv[4] if len(sys.argv) > 4 else "127.0.0.1"
    logging.basicConfig(level=logging.ERROR)
    auth = DummyAuthorizer()
    auth.add_user(user, password, home, perm="elradfmwMT")
    handler = FTPHandler
    if sys.argv[5:6] == ["dropthird"]:
        received = itertools.count(1)

        class DropThird(FTPHandler):
            def on_file_received(self, file: str) -> None:
                if next(received) % 3 == 0:
                    os.remove(file)

        handler = DropThird
    if sys.argv[5:6] and sys.argv[5].startswith("cap="):
        handler = type("CappedFTP", (FTPHandler,), {"dtp_handler": capped_dtp(int(sys.argv[5][4:]))})
    opts = dict(a.split("=", 1) for a in sys.argv[5:] if a.split("=", 1)[0] in ("loginlog", "idle"))
    if "loginlog" in opts:
        log_path = opts["loginlog"]

        class LoginLog(FTPHandler):
            def on_login(self, username: str) -> None:
                with open(log_path, "a") as f:
                    f.write(f"login {self.remote_ip}:{self.remote_port}\n")

        handler = LoginLog
    handler.authorizer = auth
    handler.use_sendfile = True
    handler.timeout = float(opts.get("idle", 120))
    handler.auth_failed_timeout = 0.1
    handler.permit_foreign_addresses = False
    server = FTPServer((host, 0), handler, backlog=1024)
    server.max_cons = 0
    server.max_cons_per_ip = 0
    print("PORT", server.address[1], flush=True)
    server.serve_forever(handle_exit=True)


if __name__ == "__main__":
    main()
