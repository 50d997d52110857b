"""Which skips a run accepts.

A test is skipped for one of two reasons. Either the machine genuinely lacks something no
install step provides (root, a kernel feature such as netem, an IPv6 loopback, a memory
cgroup visible to this process): the test calls :func:`machine_lacks` (or is marked with
:func:`lacks_if`), and that skip stays a skip everywhere. Or something the install step
(``scripts/install.sh``, ``scripts/apt-packages.txt``, the Docker images) should have put
there is missing: a plain ``pytest.skip`` with the reason, which is a skip on a
developer's machine and a failure under CI.

Under CI (``CI=true``, as CI runners set it) or with ``XFERLAB_REQUIRE_ALL=1``,
``tests/conftest.py`` turns every skip whose reason does not start with
:data:`MACHINE_LACKS` into a failure that names what is missing.
"""
from __future__ import annotations

import os
from typing import NoReturn

import pytest

#: The start of every skip reason that stays a skip under CI.
MACHINE_LACKS = "this machine lacks "
#: The variable that makes every other skip a failure (besides ``CI=true``).
REQUIRE_ALL_ENV = "XFERLAB_REQUIRE_ALL"


def require_all(environ: dict[str, str] | None = None) -> bool:
    """Whether a skip of something the install step provides fails the run: ``CI`` is
    ``true`` or ``1`` (any case), or ``XFERLAB_REQUIRE_ALL`` is ``1``. ``environ``:
    the environment to read (default ``os.environ``)."""
    env = os.environ if environ is None else environ
    return env.get("CI", "").strip().lower() in ("true", "1") or env.get(REQUIRE_ALL_ENV, "").strip() == "1"


def machine_lacks(reason: str) -> NoReturn:
    """Skip the running test because the machine lacks ``reason`` (e.g. ``"root: ip netns
    add needs CAP_SYS_ADMIN"``); a skip even under CI. Only for what no install step
    provides: a tool the install step installs is a plain ``pytest.skip``."""
    __tracebackhide__ = True  # the skip is reported at the test's line, not here
    pytest.skip(MACHINE_LACKS + reason)


def lacks_if(condition: bool, reason: str) -> pytest.MarkDecorator:
    """A ``skipif`` mark with :func:`machine_lacks`' reason: the test is skipped, even
    under CI, when ``condition`` holds (e.g. ``lacks_if(not_root(), "root")``)."""
    return pytest.mark.skipif(condition, reason=MACHINE_LACKS + reason)


def skip_if_problem(problem: str | None, *, machine: bool) -> pytest.MarkDecorator:
    """A ``skipif`` mark that skips when ``problem`` (a reason, or None) is set: a skip
    everywhere when ``machine`` (the machine lacks it: e.g. not root), else a plain skip
    that fails under CI (e.g. ``ip`` missing, which the install step provides)."""
    return pytest.mark.skipif(problem is not None, reason=(MACHINE_LACKS if machine else "") + str(problem))


def not_root() -> bool:
    """True when this process does not run as root (uid 0)."""
    return os.geteuid() != 0


def is_machine_skip(message: str) -> bool:
    """Whether a skip's message (with or without pytest's ``"Skipped: "`` prefix) comes
    from :func:`machine_lacks` or :func:`lacks_if`."""
    return message.removeprefix("Skipped: ").startswith(MACHINE_LACKS)


def refusal(message: str) -> str:
    """The failure text of a skip that CI refuses: the skip's reason and what to do."""
    reason = message.removeprefix("Skipped: ")
    return (f"skipped under CI/{REQUIRE_ALL_ENV}=1, where only what the machine lacks may be skipped: {reason}\n"
            "The install step (scripts/install.sh, scripts/apt-packages.txt, the Docker images) should provide "
            "this; a test whose cause is the machine itself calls tests.support.skips.machine_lacks().")
