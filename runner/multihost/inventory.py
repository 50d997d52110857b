"""Multi-host inventory: the hosts of a campaign from its Ansible inventory
(``ansible-inventory --list``, groups ``servers`` and ``clients``; host variables as in
runner.multihost's docstring)."""
from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runner.multihost import MultiHostError

if TYPE_CHECKING:
    from runner.spec.model import CampaignSpec



@dataclass
class RemoteHost:
    """One inventory host as the runner reaches it over SSH.

    Attributes:
        name: inventory name (e.g. ``cli1``).
        address: address the server binds / the clients connect to (``xferlab_address``
            or ``ansible_host``).
        ssh: ssh argv up to and including ``user@host`` (no remote command).
        command: the remote ``xferlab`` command (``xferlab_command``).
        env: environment variables set for it (``xferlab_env``).
    """

    name: str
    address: str
    ssh: list[str]
    command: str = "xferlab"
    env: dict[str, str] = field(default_factory=dict)

    def argv(self, *args: str) -> list[str]:
        """Local argv that runs ``xferlab ARGS...`` on this host over SSH."""
        remote = ["env", *(f"{k}={v}" for k, v in sorted(self.env.items())), self.command, *args]
        return [*self.ssh, shlex.join(remote)]


@dataclass
class Inventory:
    """The hosts of one multi-host campaign: one server host, one or more client hosts."""

    server: RemoteHost
    clients: list[RemoteHost]


def _ansible_inventory() -> str:
    for cand in (Path(sys.executable).parent / "ansible-inventory", shutil.which("ansible-inventory")):
        if cand and Path(cand).exists():
            return str(cand)
    raise MultiHostError("ansible-inventory not found (pip install ansible-core): it reads the multi-host inventory")


def _remote_host(name: str, hv: dict[str, Any]) -> RemoteHost:
    addr = str(hv.get("ansible_host") or name)
    ssh = ["ssh", "-T", "-o", "BatchMode=yes", "-o", "ConnectTimeout=15", "-o", "ServerAliveInterval=15"]
    if hv.get("ansible_port"):
        ssh += ["-p", str(hv["ansible_port"])]
    if hv.get("ansible_ssh_private_key_file"):
        ssh += ["-i", os.path.expanduser(str(hv["ansible_ssh_private_key_file"]))]
    for key in ("ansible_ssh_common_args", "ansible_ssh_extra_args"):
        if hv.get(key):
            ssh += shlex.split(str(hv[key]))
    user = hv.get("ansible_user")
    ssh.append(f"{user}@{addr}" if user else addr)
    env = hv.get("xferlab_env") or {}
    if not isinstance(env, dict):
        raise MultiHostError(f"host {name}: xferlab_env must be a mapping of environment variables, got {env!r}")
    return RemoteHost(name=name, address=str(hv.get("xferlab_address") or addr), ssh=ssh,
                      command=str(hv.get("xferlab_command") or "xferlab"),
                      env={str(k): str(v) for k, v in env.items()})


def load_inventory(path: str | Path, *, server: str | None = None, clients: list[str] | None = None) -> Inventory:
    """Read an Ansible inventory (any format ``ansible-inventory`` reads).

    Args:
        path: inventory file.
        server: host of group ``servers`` to run the server on (default: the first).
        clients: hosts of group ``clients`` to run load from (default: all of them).

    Raises:
        MultiHostError: the inventory not allowed (runner.spec.inventory_policy.allowed_inventory),
            ansible-inventory missing or failing (the message names the command and its exit
            status, never its output, which quotes the inventory's lines), a group empty, a
            named host not in its group.
    """
    from runner.spec.inventory_policy import InventoryError, allowed_inventory, ansible_env

    try:  # only static inventories under the allowed directories (runner.spec.inventory_policy)
        p = allowed_inventory(path)
    except InventoryError as exc:
        raise MultiHostError(str(exc)) from None
    r = subprocess.run([_ansible_inventory(), "-i", str(p), "--list"], capture_output=True, text=True, timeout=120,
                       env=ansible_env())
    if r.returncode != 0:
        # Its stderr is not repeated: Ansible quotes the lines it cannot parse, passwords included.
        raise MultiHostError(f"ansible-inventory -i {p} --list failed (exit status {r.returncode}); its output is "
                             "not shown, as it may quote the inventory's secrets: run that command to see it")
    data = json.loads(r.stdout)
    hostvars = data.get("_meta", {}).get("hostvars", {})

    def members(group: str) -> list[str]:
        out: list[str] = []
        todo = [group]
        for _ in range(100):  # groups nest; bounded walk
            if not todo:
                break
            g = data.get(todo.pop(0), {})
            out += [h for h in g.get("hosts", []) if h not in out]
            todo += g.get("children", [])
        return out

    srv_hosts, cli_hosts = members("servers"), members("clients")
    if not srv_hosts:
        raise MultiHostError(f"inventory {p}: group 'servers' has no host")
    if not cli_hosts:
        raise MultiHostError(f"inventory {p}: group 'clients' has no host")
    s = server or srv_hosts[0]
    if s not in srv_hosts:
        raise MultiHostError(f"inventory {p}: server host {s!r} is not in group 'servers' ({', '.join(srv_hosts)})")
    cl = clients or cli_hosts
    bad = [c for c in cl if c not in cli_hosts]
    if bad:
        raise MultiHostError(f"inventory {p}: client hosts {bad} are not in group 'clients' ({', '.join(cli_hosts)})")
    return Inventory(_remote_host(s, hostvars.get(s, {})), [_remote_host(c, hostvars.get(c, {})) for c in cl])



_INVENTORIES: dict[tuple[str, float, str | None, tuple[str, ...] | None], Inventory] = {}


def inventory_for(spec: CampaignSpec) -> Inventory:
    """The Inventory of ``spec.hosts`` (cached per file and modification time)."""
    h = spec.hosts
    if h is None:
        raise MultiHostError("the spec has no hosts block: it runs on this machine")
    if not h.inventory:
        raise MultiHostError("hosts.inventory is not set: give it in the spec or as xferlab run --inventory")
    from runner.spec.inventory_policy import InventoryError, allowed_inventory

    try:  # checked before anything is looked at: says nothing of files outside the allowed directories
        p = allowed_inventory(h.inventory)
    except InventoryError as exc:
        raise MultiHostError(str(exc)) from None
    try:
        mtime = p.stat().st_mtime
    except OSError as exc:
        raise MultiHostError(f"inventory {p}: {exc.strerror}") from None
    key = (str(p.resolve()), mtime, h.server, tuple(h.clients) if h.clients else None)
    if key not in _INVENTORIES:
        _INVENTORIES[key] = load_inventory(p, server=h.server, clients=h.clients)
    return _INVENTORIES[key]

