"""Helpers shared by the ``xferlab`` subcommands: the console, the database, output."""
from __future__ import annotations

import sys
from pathlib import Path


class CliError(Exception):
    """A user error: printed as ``xferlab: error: ...`` with exit status 2."""


def console():
    """A rich Console; 160 columns when not a terminal (piped or captured output)."""
    from rich.console import Console

    out = Console(highlight=False)
    if not out.is_terminal:  # piped or captured: do not squeeze tables into 80 columns
        out = Console(highlight=False, width=160)
    return out


def engine():
    """The store's engine (connects and migrates)."""
    from runner.store.db import get_engine

    return get_engine()


def session(eng):
    """A Session on ``eng`` that keeps objects readable after commit."""
    from sqlalchemy.orm import Session

    return Session(eng, expire_on_commit=False)



def get_campaign(sess, cid: int):
    """The Campaign row ``cid``. Raises CliError naming it when there is none."""
    from runner.store.models import Campaign

    camp = sess.get(Campaign, cid)
    if camp is None:
        raise CliError(f"no campaign {cid} (see `xferlab campaigns`)")
    return camp



def emit(text: str, output: str | None) -> None:
    """Write ``text`` to the file ``output`` (saying so on stderr), else to stdout."""
    if output:
        Path(output).write_text(text)
        print(f"wrote {output} ({len(text.encode())} bytes)", file=sys.stderr)
    else:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")

