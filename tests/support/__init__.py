"""Helpers shared by the tests: small servers and peers run on 127.0.0.1 (pyftpdlib, an HTTP
server speaking the upload interface, fake and hostile FTP peers) and drivers registered by
tests only. Paths for tests that run a helper as a program or a command from the repository."""
from __future__ import annotations

from pathlib import Path

#: This folder (helpers run as programs: ``SUPPORT_DIR / "pyftpd_server.py"``).
SUPPORT_DIR = Path(__file__).resolve().parent
#: The repository's root (the working directory of commands a test runs).
REPO_ROOT = SUPPORT_DIR.parents[1]
