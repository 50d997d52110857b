"""Secret fields of a campaign spec, and how every read path hides them.

A spec field is *secret* when its pydantic ``Field`` carries ``json_schema_extra={"secret":
True}`` (:data:`SECRET_KEY`; the JSON schema then shows ``"secret": true`` and
``"writeOnly": true``). Which fields those are is derived from the models
(:func:`secret_paths`), never listed by hand elsewhere. Today they are:

* ``servers[].external.password``: the FTP password of an external server;
* ``hosts.inventory``: the path of the Ansible inventory, the file that holds the SSH
  users, private key paths and any ``ansible_password`` / become password of the hosts.

The stored spec (``campaigns.spec``, ``cells.server_spec``) keeps the real values: the
worker parses it to run the cells. Everything that shows a spec or text derived from a
campaign's cells (the dashboard's pages and API, the exports, ``xferlab show``, the
worker's log) goes through :func:`runner.spec.model.redacted` (a spec: each secret value becomes
:data:`REDACTED`) or :func:`scrub` / :func:`scrub_data` (text: each of the campaign's
secret values, and the password of any ``scheme://user:password@host`` URL, becomes
:data:`REDACTED`), for every reader, token holders included.
"""
from __future__ import annotations

import logging
import re
import typing
from collections.abc import Iterable, Mapping
from functools import cache
from typing import Any
from urllib.parse import quote

from pydantic import BaseModel
from pydantic.json_schema import JsonDict

#: What a secret value is replaced with, wherever it is shown.
REDACTED = "********"
#: The ``json_schema_extra`` key that marks a field secret.
SECRET_KEY = "secret"
#: Secret values shorter than this are not searched for in text (:func:`scrub`): replacing
#: every ``ftp`` or ``1`` in a message would garble it and hide nothing worth hiding.
MIN_SCRUB_LEN = 4
#: The password of a URL's user info (``ftp://user:PASSWORD@host``), whatever the password.
URL_PASSWORD_RE = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.-]*://[^\s/@:]*:)[^\s/@]+@")

SECRET_FIELD: JsonDict = {SECRET_KEY: True, "writeOnly": True}
"""``json_schema_extra`` of a secret field: ``Field(json_schema_extra=SECRET_FIELD)``."""


def _models_in(annotation: Any) -> list[tuple[bool, type[BaseModel]]]:
    """``(inside a list or dict, model)`` for every pydantic model a field's annotation holds."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [(False, annotation)]
    origin = typing.get_origin(annotation)
    nested = origin in (list, tuple, set, frozenset, dict) or (isinstance(origin, type) and issubclass(
        origin, (list, tuple, dict)))
    out = []
    for arg in typing.get_args(annotation):
        for inner, model in _models_in(arg):
            out.append((inner or nested, model))
    return out


@cache
def secret_paths(model: type[BaseModel]) -> tuple[tuple[str, ...], ...]:
    """The paths of the secret fields of ``model`` (e.g. :class:`runner.spec.model.CampaignSpec`),
    as stored (``model_dump(mode="json")``): tuples of keys, ``"*"`` standing for every item
    of a list (or value of a mapping), e.g. ``(("servers", "*", "external", "password"),
    ("hosts", "inventory"))``."""
    out: list[tuple[str, ...]] = []
    seen: set[type[BaseModel]] = set()

    def walk(m: type[BaseModel], prefix: tuple[str, ...]) -> None:
        if m in seen:  # a recursive model: its secret paths are those found the first time
            return
        seen.add(m)
        for name, info in m.model_fields.items():
            extra = info.json_schema_extra
            if isinstance(extra, dict) and extra.get(SECRET_KEY):
                out.append((*prefix, name))
                continue
            for nested, sub in _models_in(info.annotation):
                walk(sub, (*prefix, name, "*") if nested else (*prefix, name))
        seen.discard(m)

    walk(model, ())
    return tuple(out)


def _visit(data: Any, path: tuple[str, ...], found: list[tuple[Any, Any]]) -> None:
    """Append ``(container, key)`` for each place of ``path`` present in ``data``."""
    if not path:
        return
    head, rest = path[0], path[1:]
    if head == "*":
        keys: Iterable[Any] = range(len(data)) if isinstance(data, list) else (
            list(data) if isinstance(data, dict) else ())
    else:
        keys = (head,) if isinstance(data, dict) and head in data else ()
    for k in keys:
        if rest:
            _visit(data[k], rest, found)
        else:
            found.append((data, k))


def redact_model_data(spec: Mapping[str, Any] | None, model: type[BaseModel]) -> dict[str, Any]:
    """A copy of the stored dict ``spec`` of ``model`` (:func:`runner.spec.model.redacted` gives the
    campaign spec's default) in which every secret field (:func:`secret_paths`) that is present and
    not None holds :data:`REDACTED`. Anything else is unchanged; ``None`` gives ``{}``.
    The input is not modified; the result is not a valid spec to run (its secrets are gone)."""
    import copy

    out = copy.deepcopy(dict(spec or {}))
    for path in secret_paths(model):
        found: list[tuple[Any, Any]] = []
        _visit(out, path, found)
        for container, key in found:
            if container[key] is not None:
                container[key] = REDACTED
    return out


def model_secret_values(spec: Mapping[str, Any] | None, model: type[BaseModel]) -> frozenset[str]:
    """The secret strings of the stored dict ``spec`` of ``model`` (as :func:`redact_model_data`):
    every non-empty string at a secret path, what :func:`scrub` hides in text."""
    values: set[str] = set()
    for path in secret_paths(model):
        found: list[tuple[Any, Any]] = []
        _visit(dict(spec or {}), path, found)
        values.update(str(c[k]) for c, k in found if isinstance(c[k], str) and c[k])
    return frozenset(values)


def scrub(text: str | None, secrets: Iterable[str] = ()) -> str | None:
    """``text`` with each of ``secrets`` (at least :data:`MIN_SCRUB_LEN` characters; in any
    letter case, as a server may echo it folded; also percent-encoded, as in a URL) and the password of every ``scheme://user:password@``
    URL replaced by :data:`REDACTED`. None stays None."""
    if not text:
        return text
    text = URL_PASSWORD_RE.sub(lambda m: m.group("head") + REDACTED + "@", text)
    for s in sorted(secrets, key=len, reverse=True):  # longest first: a secret may contain another
        if len(s) < MIN_SCRUB_LEN:
            continue
        for form in dict.fromkeys((s, quote(s, safe=""))):
            text = re.sub(re.escape(form), REDACTED, text, flags=re.IGNORECASE)
    return text


def scrub_data(data: Any, secrets: Iterable[str] = ()) -> Any:
    """A copy of JSON-like ``data`` (dicts, lists, tuples, strings, numbers) with every
    string, keys included, passed through :func:`scrub`."""
    secrets = tuple(secrets)
    if isinstance(data, str):
        return scrub(data, secrets)
    if isinstance(data, Mapping):
        return {scrub(k, secrets) if isinstance(k, str) else k: scrub_data(v, secrets) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return type(data)(scrub_data(v, secrets) for v in data)
    return data


class ScrubFilter(logging.Filter):
    """A logging filter (put it on a handler) that scrubs each record's message
    (:func:`scrub`) of the URL passwords and of the secrets added with :meth:`add`: the
    secrets of every campaign this process has run (runner.campaign.loop adds them)."""

    def __init__(self) -> None:
        super().__init__()
        self.secrets: set[str] = set()

    def add(self, secrets: Iterable[str]) -> None:
        """Hide ``secrets`` from now on."""
        self.secrets.update(secrets)

    def filter(self, record: logging.LogRecord) -> bool:
        """Replace the record's message by its scrubbed form; always keeps the record."""
        msg = record.getMessage()
        clean = scrub(msg, self.secrets)
        if clean != msg:
            record.msg, record.args = clean, None
        return True


#: The process's log filter (:func:`install_log_filter`).
LOG_FILTER = ScrubFilter()


def install_log_filter(logger: logging.Logger | None = None) -> ScrubFilter:
    """Put :data:`LOG_FILTER` on every handler of ``logger`` (default the root logger),
    once; returns it. Records of every logger that reach those handlers are scrubbed."""
    for h in (logger or logging.getLogger()).handlers:
        if LOG_FILTER not in h.filters:
            h.addFilter(LOG_FILTER)
    return LOG_FILTER
