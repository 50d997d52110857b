"""A pyftpdlib server for the load-generator tests (run as a subprocess).

Usage: python pyftpd_server.py HOME USER PASSWORD [HOST [dropthird]]
Binds HOST (default 127.0.0.1) on a free port, prints ``PORT <n>`` on stdout, serves
until killed. max_cons=0 (unlimited), sendfile on, full permissions for USER.
``dropthird``: every third file received by STOR is deleted once received (the
client got its ``226`` all the same): a server that loses some uploads.
"""
import itertools
import logging
import os
import sys

from pyftpdlib.authorizers import DummyAuthorizer
from pyftpdlib.handlers import FTPHandler
from pyftpdlib.servers import FTPServer


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
    handler.authorizer = auth
    handler.use_sendfile = True
    handler.timeout = 120
    handler.auth_failed_timeout = 0.1
    handler.permit_foreign_addresses = False
    server = FTPServer((host, 0), handler, backlog=1024)
    server.max_cons = 0
    server.max_cons_per_ip = 0
    print("PORT", server.address[1], flush=True)
    server.serve_forever(handle_exit=True)


if __name__ == "__main__":
    main()
