"""Test hosts made of Linux network namespaces, each with its own sshd.

:func:`make_lab` builds a small lab on this machine and returns a :class:`NetnsLab`:

* a "switch" namespace holding a bridge: the bridge lives there, not in the root
  namespace, so the machine's own firewall (e.g. Docker's ``FORWARD DROP`` policy with
  br_netfilter) never sees the lab's traffic;
* the control host is the root namespace, joined to the bridge by a veth pair with
  ``<subnet>.1/24``, where the subnet is a free ``10.213.N.0/24`` (a private range used
  only inside this lab);
* one namespace per host (``servers``: ``srv``; ``clients``: ``cli1``, ``cli2``), each
  joined to the bridge by a veth pair, with ``lo`` up and ``<subnet>.(10+i)/24``;
* an sshd in each namespace (Debian's openssh-server) with its own config: it listens
  on the namespace's address only, uses a temporary host key and authorized key, no
  PAM; so Ansible and the multi-host runner connect over SSH for real. ``ip netns exec``
  gives sshd a mount namespace with the namespace's own ``/sys``, where no cgroup
  hierarchy is mounted; the cgroup v2 hierarchy is mounted at ``/sys/fs/cgroup`` there
  (:data:`CGROUP_MOUNT`), as on a real host, so a server started through it gets a
  cgroup of its own (its CPU figures and profiles as on one machine).

:meth:`NetnsLab.close` tears everything down (processes in the namespaces, the
namespaces, the bridge) and is safe to call on a half-built lab. Needs root, ``ip``
(iproute2), ``/usr/sbin/sshd`` and ``ssh-keygen``; :func:`missing_requirements` says
what is absent.
"""
from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

SSHD = "/usr/sbin/sshd"
#: Run ``"$@"`` with the cgroup v2 hierarchy mounted at /sys/fs/cgroup of its mount
#: namespace (the one ``ip netns exec`` made); without it when the mount fails.
CGROUP_MOUNT = ["sh", "-c", 'mount -t cgroup2 cgroup2 /sys/fs/cgroup 2>/dev/null; exec "$@"', "sh"]
SUBNET_PREFIX = "10.213"
HOSTS = (("srv", "servers"), ("cli1", "clients"), ("cli2", "clients"))


def _run(*argv: str, check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), capture_output=True, text=True, check=check, timeout=timeout)


def missing_requirements() -> str | None:
    """Why a netns lab cannot be built here (None when it can)."""
    if os.geteuid() != 0:
        return "needs root (ip netns, sshd)"
    for tool in ("ip", "ssh", "ssh-keygen"):
        if shutil.which(tool) is None:
            return f"{tool} not found"
    if not os.access(SSHD, os.X_OK):
        return f"{SSHD} not found (apt-get install openssh-server)"
    probe = f"xlprobe{secrets.token_hex(3)}"
    r = _run("ip", "netns", "add", probe, check=False)
    if r.returncode != 0:
        return f"ip netns add fails here: {r.stderr.strip()}"
    _run("ip", "netns", "del", probe, check=False)
    return None


def _free_subnet() -> str:
    routes = _run("ip", "-4", "route", "show", "table", "all").stdout + _run("ip", "-4", "addr").stdout
    for n in list(range(1, 250)):
        cand = f"{SUBNET_PREFIX}.{n}"
        if f"{cand}." not in routes:
            return cand
    raise RuntimeError(f"no free {SUBNET_PREFIX}.N.0/24 subnet for the test lab")


@dataclass
class NetnsHost:
    """One test host: inventory name, Ansible group, namespace, address, sshd process."""

    name: str
    group: str
    netns: str
    address: str
    sshd: subprocess.Popen | None = None
    veth: str = ""

    def exec(self, *argv: str, timeout: float = 30) -> subprocess.CompletedProcess:
        """Run ``argv`` inside this host's namespace (``ip netns exec``); returns the result."""
        return _run("ip", "netns", "exec", self.netns, *argv, check=False, timeout=timeout)

    def sysctl(self, key: str) -> str:
        """Value of sysctl ``key`` as seen inside this host's namespace (whitespace collapsed)."""
        r = self.exec("sysctl", "-n", key)
        if r.returncode != 0:
            raise RuntimeError(f"sysctl {key} in {self.netns}: {r.stderr.strip()}")
        return " ".join(r.stdout.split())


@dataclass
class NetnsLab:
    """A built lab: hosts, the bridge, the SSH key, the scratch folder."""

    tmp: Path
    tag: str
    subnet: str = ""
    switch: str = ""  # namespace holding the bridge
    uplink: str = ""  # the control host's veth end
    hosts: list[NetnsHost] = field(default_factory=list)
    key: Path | None = None

    @property
    def control_address(self) -> str:
        """The root namespace's address on the lab's switch."""
        return f"{self.subnet}.1"

    def host(self, name: str) -> NetnsHost:
        """The host called ``name``; KeyError when there is none."""
        for h in self.hosts:
            if h.name == name:
                return h
        raise KeyError(name)

    def ssh_common_args(self) -> str:
        """ssh options for the lab's throwaway host keys."""
        return "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR"

    def write_inventory(self, path: Path, host_vars: dict[str, dict] | None = None,
                        all_vars: dict | None = None) -> Path:
        """Write an Ansible YAML inventory of the lab (groups servers, clients, db)."""
        import yaml

        groups: dict[str, dict] = {"servers": {"hosts": {}}, "clients": {"hosts": {}}, "db": {"hosts": {}}}
        for h in self.hosts:
            hv = {"ansible_host": h.address}
            hv.update((host_vars or {}).get(h.name, {}))
            groups[h.group]["hosts"][h.name] = hv
        vars_ = {"ansible_user": "root", "ansible_ssh_private_key_file": str(self.key),
                 "ansible_ssh_common_args": self.ssh_common_args(),
                 "ansible_python_interpreter": "/usr/bin/python3"}
        vars_.update(all_vars or {})
        inv = {"all": {"vars": vars_, "children": groups}}
        path.write_text(yaml.safe_dump(inv, sort_keys=False))
        return path

    @property
    def control_dir(self) -> Path:
        """Folder of the SSH connection-sharing sockets of clients that use the lab
        (``ControlPath <control_dir>/<address>``); :meth:`close` ends those masters."""
        return self.tmp / "cp"

    def close(self) -> None:
        """Tear the lab down: end SSH connection-sharing masters of :attr:`control_dir`,
        stop every process in its namespaces (sshd and what ran through it), delete the
        veth pairs, the namespaces and the bridge. Never raises."""
        for h in self.hosts:
            sock = self.control_dir / h.address
            if sock.exists():
                _run("ssh", "-o", f"ControlPath={sock}", "-O", "exit", f"root@{h.address}", check=False, timeout=10)
        for h in self.hosts:
            if h.sshd is not None and h.sshd.poll() is None:
                h.sshd.terminate()
        for h in self.hosts:
            pids = _run("ip", "netns", "pids", h.netns, check=False).stdout.split()
            for pid in pids:
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass
            if h.sshd is not None:
                try:
                    h.sshd.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    h.sshd.kill()
            if h.veth:
                _run("ip", "-n", self.switch, "link", "del", h.veth, check=False)
            _run("ip", "netns", "del", h.netns, check=False)
        if self.uplink:
            _run("ip", "link", "del", self.uplink, check=False)
        if self.switch:
            _run("ip", "netns", "del", self.switch, check=False)


def _wait_port(addr: str, port: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    for _ in range(int(timeout / 0.1) + 1):
        if time.monotonic() > deadline:
            break
        try:
            with socket.create_connection((addr, port), timeout=1):
                return
        except OSError as e:
            last = e
            time.sleep(0.1)
    raise RuntimeError(f"sshd on {addr}:{port} did not answer within {timeout:g} s: {last}")


def make_lab(tmp: Path) -> NetnsLab:
    """Build the lab under scratch folder ``tmp`` (keys, sshd configs and logs go
    there). On any failure the half-built lab is torn down and the error re-raised.
    The caller must call :meth:`NetnsLab.close`."""
    tag = secrets.token_hex(2)
    lab = NetnsLab(tmp=tmp, tag=tag)
    try:
        lab.subnet = _free_subnet()
        lab.switch = f"xl{tag}-sw"
        _run("ip", "netns", "add", lab.switch)
        _run("ip", "-n", lab.switch, "link", "add", "br0", "type", "bridge")
        _run("ip", "-n", lab.switch, "link", "set", "br0", "up")
        lab.uplink = f"xlc{tag}"
        _run("ip", "link", "add", lab.uplink, "type", "veth", "peer", "name", f"xlu{tag}")
        _run("ip", "link", "set", f"xlu{tag}", "netns", lab.switch)
        _run("ip", "-n", lab.switch, "link", "set", f"xlu{tag}", "master", "br0", "up")
        _run("ip", "addr", "add", f"{lab.control_address}/24", "dev", lab.uplink)
        _run("ip", "link", "set", lab.uplink, "up")
        lab.control_dir.mkdir(exist_ok=True)
        lab.key = tmp / "id_ed25519"
        _run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(lab.key))
        hostkey = tmp / "ssh_host_ed25519_key"
        _run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(hostkey))
        auth = tmp / "authorized_keys"
        auth.write_text(Path(str(lab.key) + ".pub").read_text())
        os.chmod(auth, 0o600)
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation dir
        for i, (name, group) in enumerate(HOSTS):
            ns = f"xl{tag}-{name}"
            outer, inner = f"xlv{tag}{i}", f"xlp{tag}{i}"
            h = NetnsHost(name, group, ns, f"{lab.subnet}.{10 + i}")
            lab.hosts.append(h)
            _run("ip", "netns", "add", ns)
            _run("ip", "link", "add", outer, "type", "veth", "peer", "name", inner)
            h.veth = outer
            _run("ip", "link", "set", outer, "netns", lab.switch)
            _run("ip", "-n", lab.switch, "link", "set", outer, "master", "br0", "up")
            _run("ip", "link", "set", inner, "netns", ns)
            _run("ip", "-n", ns, "link", "set", "lo", "up")
            _run("ip", "-n", ns, "link", "set", inner, "name", "eth0")
            _run("ip", "-n", ns, "addr", "add", f"{h.address}/24", "dev", "eth0")
            _run("ip", "-n", ns, "link", "set", "eth0", "up")
            cfg = tmp / f"sshd_{name}.conf"
            cfg.write_text(f"""ListenAddress {h.address}
Port 22
HostKey {hostkey}
AuthorizedKeysFile {auth}
PidFile {tmp}/sshd_{name}.pid
UsePAM no
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
StrictModes no
MaxStartups 100:30:200
MaxSessions 50
Subsystem sftp internal-sftp
""")
            log = open(tmp / f"sshd_{name}.log", "wb")  # noqa: SIM115 - kept open for the child
            h.sshd = subprocess.Popen(["ip", "netns", "exec", ns, *CGROUP_MOUNT, SSHD, "-D", "-e", "-f", str(cfg)],
                                      stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            log.close()
        for h in lab.hosts:
            _wait_port(h.address, 22, 15)
    except BaseException:
        lab.close()
        raise
    return lab
