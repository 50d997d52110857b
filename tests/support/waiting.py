"""Waiting on an event in tests instead of sleeping a fixed time."""
from __future__ import annotations

import time
from collections.abc import Callable


def wait_for(check: Callable[[], object], seconds: float, what: str) -> None:
    """Poll ``check()`` every 10 ms until it is true; raise AssertionError naming ``what``
    when it is still false after ``seconds``."""
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not within {seconds:g} s")
        time.sleep(0.01)
