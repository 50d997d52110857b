"""The ``external`` block of a spec's server (:class:`ExternalTarget`): a server xferlab
did not start, reached at ``host:port`` with ``user``/``password``. Part of the campaign
spec (runner.spec.model, which re-exports it).

These values reach the real clients' command lines and lftp scripts (runner.load.registry:
``open -u "USER,PASSWORD" -p PORT "HOST"``, wget's ``--user=``, curl's ``--user U:P`` and
its URL) and ftplib, all run as the worker's user, so each is typed here: the host an IP
literal or a DNS host name, the user and password bounded and free of control characters
(which would end an lftp command or an FTP line); the drivers quote them.
"""
from __future__ import annotations

import ipaddress
import re

from pydantic import BaseModel, ConfigDict, Field, field_validator

from runner.spec.redaction import SECRET_FIELD

#: One DNS label (RFC 1123): letters, digits and inner hyphens, 1..63 characters.
_LABEL = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
#: Longest user name and password taken (RFC 959 sets none; servers' own limits are lower).
MAX_CREDENTIAL = 128


def check_host(v: str) -> str:
    """``v`` when it is an IPv4/IPv6 literal (no zone index, no brackets) or a DNS host
    name of RFC 1123 labels (at most 253 characters, not all-numeric at the end).
    Raises ValueError naming what is wrong."""
    try:
        if "%" not in v:
            return str(ipaddress.ip_address(v))
    except ValueError:
        pass
    labels = v.removesuffix(".").split(".")
    if not 0 < len(v) <= 253 or not all(_LABEL.match(x) for x in labels) or labels[-1].isdigit():
        raise ValueError(f"host {v[:80]!r}: want an IP address (192.0.2.10, 2001:db8::1) or a DNS host name "
                         "(letters, digits, inner hyphens, dots between labels)")
    return v


def check_credential(v: str, what: str, *, forbid: str = "", empty: bool = False) -> str:
    """``v`` when it is 1..:data:`MAX_CREDENTIAL` characters (0.. with ``empty``) with no
    control character and none of ``forbid``. Raises ValueError naming ``what`` is wrong."""
    if not (0 if empty else 1) <= len(v) <= MAX_CREDENTIAL:
        raise ValueError(f"{what}: {'0' if empty else '1'}..{MAX_CREDENTIAL} characters, got {len(v)}")
    if m := _CONTROL.search(v):
        raise ValueError(f"{what}: control character U+{ord(m.group()):04X} at position {m.start()}")
    if bad := sorted({c for c in v if c in forbid}):
        raise ValueError(f"{what}: {' '.join(bad)} not allowed (the clients' user/password separators)")
    return v


class ExternalTarget(BaseModel):
    """A server already running somewhere (as ``ftpbench -H -P -k``): no process is started.

    Attributes:
        host: IP literal or DNS host name (:func:`check_host`).
        port: its FTP control port, 1..65535.
        user: 1..128 characters, no control character, no ``:`` (curl's separator) or
            ``,`` (lftp's).
        password: 0..128 characters, no control character (quotes, ``;``, ``\\`` are
            passed as they are, quoted by each driver).
        pid: the server's PID, whose process tree's memory is followed (optional).
    """

    model_config = ConfigDict(extra="forbid")
    host: str = "127.0.0.1"
    port: int = Field(21, ge=1, le=65535)
    user: str
    password: str = Field(json_schema_extra=SECRET_FIELD)  # runner.spec.redaction: hidden on every read path
    pid: int | None = Field(None, ge=1, description="server PID whose process tree memory is followed")

    @field_validator("host")
    @classmethod
    def _host(cls, v: str) -> str:
        return check_host(v)

    @field_validator("user")
    @classmethod
    def _user(cls, v: str) -> str:
        return check_credential(v, "user", forbid=":,")

    @field_validator("password")
    @classmethod
    def _password(cls, v: str) -> str:
        return check_credential(v, "password", empty=True)
