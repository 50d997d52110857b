"""A driver for the cell watchdog's test, registered by the test only: a workload of 2
clients asks the server a command it never answers and waits for the reply with no
timeout (a stage no inner bound catches); any other runs xferlab-ftp's workload."""
from __future__ import annotations

import socket
from typing import Any

from runner.load.ftp.driver import XferlabFtpDriver


class HangDriver(XferlabFtpDriver):
    """xferlab-ftp, except that 2 clients hang on an unanswered command."""

    name = "test-hang"

    def run(self, workload: str, target: Any, params: Any, **kwargs: Any) -> Any:
        if params.clients == 2:
            with socket.create_connection((target.host, target.port)) as s:  # no timeout: blocks
                s.recv(100)                 # the greeting
                s.sendall(b"HANG\r\n")
                s.recv(100)                 # never answered: returns when the server closes
        return super().run(workload, target, params, **kwargs)


DRIVER = HangDriver()
