"""A registered-for-the-test driver that runs only ``login`` (spec validation tests)."""
from __future__ import annotations

from runner.load.ftp.driver import XferlabFtpDriver


class LoginOnly(XferlabFtpDriver):
    """xferlab's FTP client restricted to the login workload."""

    name = "login-only"
    workloads = ("login",)


DRIVER = LoginOnly()
