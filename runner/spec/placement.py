"""Where a campaign runs, as its spec says: CPU pinning on this machine
(:class:`Pinning`) and the hosts of a multi-host campaign (:class:`HostsSpec`). Part of
the campaign spec (runner.spec.model, which re-exports both)."""
from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from runner.spec.redaction import SECRET_FIELD


class Pinning(BaseModel):
    """CPU pinning: server process tree and load generator on separate cores
    (seed 000's advice, and DESIGN.md: server on CPU 0, client on CPU 1)."""

    model_config = ConfigDict(extra="forbid")
    server: list[int] | None = None
    client: list[int] | None = None

    @field_validator("server", "client")
    @classmethod
    def _cpus(cls, v: list[int] | None) -> list[int] | None:
        if v is not None:
            import os

            # The machine's CPUs, not this process's affinity (the runner pins itself).
            have = list(range(os.cpu_count() or 1))
            bad = [c for c in v if c not in have]
            if bad or not v:
                raise ValueError(f"CPUs {bad or v} not available here (have {have})")
        return v


#: An inventory host name (Ansible's): a letter or digit, then letters, digits, ``.``, ``_``, ``-``.
HOST_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$")


class HostsSpec(BaseModel):
    """Run the campaign across hosts (runner.multihost, docs/multi-host.md): the server on
    a host of the inventory's ``servers`` group, load from its ``clients`` hosts."""

    model_config = ConfigDict(extra="forbid")
    inventory: str | None = Field(None, description="Ansible inventory file (groups servers, clients) under an "
                                                    "allowed inventory directory (runner.spec.inventory_policy); "
                                                    "needed, may be given as xferlab run --inventory; secret "
                                                    "(runner.spec.redaction: it names the hosts' credentials)",
                                        json_schema_extra=SECRET_FIELD)
    server: str | None = Field(None, description="host of group servers to use; default the first")
    clients: list[str] | None = Field(None, min_length=1, description="hosts of group clients; default all")
    start_delay: float = Field(3.0, ge=0.5, le=120, description="s from dispatch to the common start time")
    server_backend: Literal["local", "docker"] = Field(
        "local", description="how xferlab serve starts the server there: local (a child process) or docker "
                             "(a container with host networking, bound to the host's address)")

    @field_validator("server", "clients")
    @classmethod
    def _host_names(cls, v: str | list[str] | None) -> str | list[str] | None:
        for name in [v] if isinstance(v, str) else v or []:
            if not HOST_NAME_RE.match(name):
                raise ValueError(f"host {name[:80]!r}: want an inventory host name (letters, digits, . _ -; "
                                 "not starting with - or .)")
        return v
