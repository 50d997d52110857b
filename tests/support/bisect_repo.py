"""A git repository made from pyftpdlib 2.2.0's source distribution, with harmless commits
around one that makes every RETR wait 50 ms (``time.sleep(0.05)`` in ``ftp_RETR``): the
subject of the bisect and check tests.

The reference for the figures: pyftpdlib serves every session from one thread, so 4
concurrent clients each retrieving one file wait at least 4 x 50 ms = 0.2 s in the slow
commits; without the sleep, 4 RETRs of 64 KiB over loopback take well under 0.1 s.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

SDIST = "pyftpdlib==2.2.0"
SLEEP = "        time.sleep(0.05)\n"
RETR_DOC = 'client).  On success return the file path else None.\n        """\n'


def git(repo: Path, *args: str) -> str:
    """Run git in ``repo`` with a fixed author and date; its stdout, stripped."""
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.org", "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
           "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z"}
    return subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True).stdout.strip()


def _append(repo: Path, rel: str, text: str, message: str) -> str:
    with open(repo / rel, "a") as f:
        f.write(text)
    git(repo, "commit", "-qam", message)
    return git(repo, "rev-parse", "HEAD")


def make_repo(tmp: Path) -> dict[str, object]:
    """Make the repository under ``tmp``: ``{"path": Path, "shas": {name: SHA}}`` with the
    commits base, readme, comment, slow (``RETR: wait 50 ms``), history, tip (branch
    ``main``). Fixed dates, so its SHAs (and the build cache keyed by them) are the same on
    every run. Skips the test when ``pip download`` cannot reach the package index."""
    r = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:", SDIST,
                        "-d", str(tmp / "dl")], capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        pytest.skip(f"pip download {SDIST} failed (the package index is needed): {r.stderr.strip()[-300:]}")
    path = tmp / "repo"
    with tarfile.open(next((tmp / "dl").glob("pyftpdlib-*.tar.gz"))) as tf:
        tf.extractall(tmp / "x", filter="data")
    (tmp / "x" / "pyftpdlib-2.2.0").rename(path)
    git(path, "init", "-q", "-b", "main")
    git(path, "add", "-A")
    git(path, "commit", "-qm", "pyftpdlib 2.2.0")
    shas = {"base": git(path, "rev-parse", "HEAD")}
    shas["readme"] = _append(path, "README.rst", "\nA note.\n", "docs: a README note")
    shas["comment"] = _append(path, "pyftpdlib/servers.py", "\n# a harmless comment\n", "servers: a comment")
    control = path / "pyftpdlib" / "handlers" / "ftp" / "control.py"
    text = control.read_text()
    assert text.count(RETR_DOC) == 1
    control.write_text(text.replace(RETR_DOC, RETR_DOC + SLEEP))
    git(path, "commit", "-qam", "RETR: wait 50 ms")
    shas["slow"] = git(path, "rev-parse", "HEAD")
    shas["history"] = _append(path, "HISTORY.rst", "\nA note.\n", "docs: a HISTORY note")
    shas["tip"] = _append(path, "pyftpdlib/log.py", "\n# another comment\n", "log: a comment")
    return {"path": path, "shas": shas}
