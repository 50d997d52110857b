"""Typed client options: the allow-lists of the real-client drivers (lftp settings, wget
and curl command-line options; runner.load.tools.lftp, .wget, .curl).

Each driver lists the options a spec's ``client_options`` may give as one table of
:class:`Option` (name, :class:`Kind` of value, one-line meaning). A value is checked by
its kind and turned into its *canonical text* (a decimal integer, ``yes``/``no``, one of
a few words, an IP literal, ...), which is the only thing written into the client's
argv or lftp script. No canonical text holds whitespace, a quote, ``;``, ``\\``, ``!``,
a newline, or starts with ``-``, so it can neither add an argument nor end an lftp
command. Anything not in a table is refused with a message naming the option and
listing the allowed ones.
"""
from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from dataclasses import dataclass

_DECIMAL = re.compile(r"^(0|[1-9][0-9]{0,14})$")
_HEX = re.compile(r"^0[xX][0-9a-fA-F]{1,12}$")
_SECONDS = re.compile(r"^(0|[1-9][0-9]{0,5})(\.[0-9]{1,3})?$")
_IFNAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.]{0,14}$")
_TRUE, _FALSE = ("yes", "on", "true", "1"), ("no", "off", "false", "0")


@dataclass(frozen=True)
class Kind:
    """The type of one option's value.

    Attributes:
        what: the accepted values in words, e.g. ``integer 0..65535``.
        parse: the canonical text of a value; raises ValueError when it is not of this kind.
        flag: the option takes no value (a command-line switch).
    """

    what: str
    parse: Callable[[str], str]
    flag: bool = False


@dataclass(frozen=True)
class Option:
    """One allowed option: ``name`` (lftp setting or ``--option``), its :class:`Kind`,
    and ``meaning`` (one line, for the docs and error messages)."""

    name: str
    kind: Kind
    meaning: str


def integer(lo: int, hi: int, *, hex_ok: bool = False) -> Kind:
    """A whole number ``lo..hi``, written in decimal (no sign, no leading zero), or with
    ``hex_ok`` also as ``0x`` hex (lftp's ``0x20000``); canonical text: decimal."""
    def parse(v: str) -> str:
        if not (_DECIMAL.match(v) or (hex_ok and _HEX.match(v))):
            raise ValueError("not a whole number" + (" (decimal or 0x hex)" if hex_ok else ""))
        n = int(v, 0) if hex_ok else int(v)
        if not lo <= n <= hi:
            raise ValueError(f"{n} is outside {lo}..{hi}")
        return str(n)
    return Kind(f"integer {lo}..{hi}" + (" (decimal or 0x hex)" if hex_ok else ""), parse)


def seconds(lo: float, hi: float, *, whole: bool = False) -> Kind:
    """A number of seconds ``lo..hi`` (``whole``: no fraction; else up to 3 decimals)."""
    def parse(v: str) -> str:
        m = _SECONDS.match(v)
        if not m or (whole and m.group(2)):
            raise ValueError("not a number of seconds" + (" (whole)" if whole else ""))
        x = float(v)
        if not lo <= x <= hi:
            raise ValueError(f"{v} is outside {lo:g}..{hi:g} s")
        return f"{x:g}"
    return Kind(f"seconds {lo:g}..{hi:g}" + (" (whole)" if whole else ""), parse)


def _boolean(v: str) -> str:
    low = v.lower()
    if low in _TRUE:
        return "yes"
    if low in _FALSE:
        return "no"
    raise ValueError("not a boolean")


#: yes/on/true/1 or no/off/false/0 (any case); canonical text ``yes`` / ``no``.
BOOLEAN = Kind("boolean yes/no (on/off, true/false)", _boolean)


def _flag(v: str) -> str:
    if v not in ("", "yes"):
        raise ValueError('takes no value (give "" or yes)')
    return ""


#: A command-line switch: value ``""`` or ``yes`` (YAML ``true``); nothing is written but the name.
FLAG = Kind('flag ("" or yes)', _flag, flag=True)


def choice(*words: str) -> Kind:
    """One of ``words``, exactly."""
    def parse(v: str) -> str:
        if v not in words:
            raise ValueError("not one of the choices")
        return v
    return Kind("one of " + "/".join(words), parse)


def _ip(v: str) -> str:
    if "%" in v:
        raise ValueError("a scoped address (with %) is not taken")
    try:
        return str(ipaddress.ip_address(v))
    except ValueError:
        raise ValueError("not an IP address") from None


#: An IPv4 or IPv6 literal (no zone index); canonical text: Python's compressed form.
IP_ADDRESS = Kind("IP address (v4 or v6 literal)", _ip)


def _ip_or_ifname(v: str) -> str:
    if _IFNAME.match(v):
        return v
    try:
        return _ip(v)
    except ValueError:
        raise ValueError("not an IP address nor an interface name (a letter, then up to 14 letters, digits, "
                         "_ or .)") from None


#: An IP literal or a network interface name (``eth0``, ``veth1.2``).
IP_OR_INTERFACE = Kind("IP address or interface name", _ip_or_ifname)


def port_range(lo: int = 1024, hi: int = 65535) -> Kind:
    """A port ``N`` or a range ``N-M`` within ``lo..hi``; canonical text ``N`` or ``N-M``."""
    def parse(v: str) -> str:
        parts = v.split("-")
        if not 1 <= len(parts) <= 2 or not all(_DECIMAL.match(p) for p in parts):
            raise ValueError("not a port N or a range N-M")
        ns = [int(p) for p in parts]
        if not all(lo <= n <= hi for n in ns) or ns != sorted(ns):
            raise ValueError(f"want ports within {lo}..{hi}, low first")
        return "-".join(str(n) for n in ns)
    return Kind(f"port or range N-M within {lo}..{hi}", parse)


def table(*options: Option) -> dict[str, Option]:
    """The options by name (a driver's allow-list)."""
    return {o.name: o for o in options}


def option_error(allowed: dict[str, Option], client: str, key: str, value: str,
                 reserved: tuple[str, ...] = ()) -> str | None:
    """Why ``key: value`` cannot be given to ``client`` (not in ``allowed``, naming the
    allowed ones; one of the ``reserved`` the driver sets itself; a value not of the
    option's kind, naming the kind), else None."""
    names = ", ".join(allowed)
    if key in reserved:
        return f"{key} is set by the {client} driver itself; {client} takes: {names}"
    opt = allowed.get(key)
    if opt is None:
        return f"unknown {client} option {key[:100]!r}; {client} takes: {names}"
    try:
        opt.kind.parse(value)
    except ValueError as e:
        return f"{key}: value {value[:100]!r}: {e}; want {opt.kind.what}"
    return None


def canonical(allowed: dict[str, Option], options: dict[str, str]) -> list[tuple[str, str, bool]]:
    """``(name, canonical text, is a flag)`` of each item of ``options``, in order.
    Raises ValueError for an option :func:`option_error` refuses (the drivers check first)."""
    out = []
    for key, value in options.items():
        opt = allowed.get(key)
        if opt is None:
            raise ValueError(f"unknown option {key!r}")
        out.append((key, opt.kind.parse(value), opt.kind.flag))
    return out


def flag_argv(allowed: dict[str, Option], options: dict[str, str], *, joined: bool) -> list[str]:
    """``options`` as command-line arguments: ``--flag``, then ``--opt=VALUE`` (``joined``)
    or ``--opt VALUE``, each VALUE canonical. Raises ValueError as :func:`canonical`."""
    out: list[str] = []
    for key, text, flag in canonical(allowed, options):
        if flag:
            out.append(key)
        elif joined:
            out.append(f"{key}={text}")
        else:
            out += [key, text]
    return out
