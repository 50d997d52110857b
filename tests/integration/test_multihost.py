"""Multi-host lab on real hosts made of network namespaces (tests/integration/netns_hosts.py).

1. ``ansible/site.yml`` over SSH tunes a server and two client hosts: the per-namespace
   sysctls are checked inside each namespace afterwards (and the root namespace is
   untouched), the tuning record and limits files are written, and a second run
   reports ``changed=0`` on every host. Host-wide keys (fs.file-max, fs.nr_open) are set
   to the machine's current values, so the test never changes the real host; the files
   the role writes go to a scratch folder (role variables).
2. A campaign across the hosts: the server runs on ``srv`` (``xferlab serve`` over SSH),
   load comes from ``cli1`` and ``cli2`` (``xferlab loadgen`` over SSH, common start
   time), and each cell is stored once with both hosts' contributions: 300 clients
   connect+login (150 per host) and 4 clients RETR a 10 MiB file.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.netns_hosts import NetnsLab, make_lab, missing_requirements
from tests.support.skips import machine_lacks

ROOT = Path(__file__).resolve().parents[2]
ANSIBLE_DIR = ROOT / "ansible"
VENV_BIN = Path(sys.executable).parent

pytestmark = [pytest.mark.integration, pytest.mark.slow]

WANTED = {
    "net.ipv4.tcp_tw_reuse": "1",
    "net.ipv4.tcp_fin_timeout": "1",
    "net.ipv4.ip_local_port_range": "1024 65535",
    "net.core.somaxconn": "65535",
    "net.ipv4.tcp_max_syn_backlog": "65535",
    "net.ipv4.tcp_syncookies": "0",
}
HOST_WIDE = ("fs.file-max", "fs.nr_open")


def _sysctl_root(key: str) -> str:
    return " ".join(Path("/proc/sys/" + key.replace(".", "/")).read_text().split())


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory):
    """Three SSH-reachable namespace hosts (srv, cli1, cli2); torn down even on failure."""
    why = missing_requirements()
    if why and (os.geteuid() != 0 or why.startswith("ip netns add fails")):
        machine_lacks(f"what a netns lab needs: {why}")
    if why:
        pytest.skip(f"netns lab: {why}")
    if not (VENV_BIN / "ansible-playbook").exists():
        pytest.skip(f"ansible-playbook not in {VENV_BIN} (pip install -e '.[test]')")
    tmp = tmp_path_factory.mktemp("netns-lab")
    os.chmod(tmp, 0o755)
    built = make_lab(tmp)
    try:
        yield built
    finally:
        built.close()


@pytest.fixture(scope="module")
def inventory(lab: NetnsLab) -> Path:
    """The lab's inventory: xferlab on every host is this checkout's venv, and each host
    records its tuning in its own file (the hosts share this machine's filesystem)."""
    host_vars = {h.name: {"xferlab_env": {"XFERLAB_TUNING_FILE": str(lab.tmp / "hosts" / h.name / "tuning.json")}}
                 for h in lab.hosts}
    return lab.write_inventory(lab.tmp / "inventory.yml", host_vars=host_vars,
                               all_vars={"ansible_become": False,
                                         "xferlab_command": str(VENV_BIN / "xferlab")})


def _playbook(lab: NetnsLab, inventory: Path, extra: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, ANSIBLE_CONFIG=str(ANSIBLE_DIR / "ansible.cfg"), ANSIBLE_FORCE_COLOR="0",
               ANSIBLE_NOCOLOR="1", ANSIBLE_HOME=str(lab.tmp / "ansible-home"),
               ANSIBLE_LOCAL_TEMP=str(lab.tmp / "ansible-tmp"),
               ANSIBLE_SSH_CONTROL_PATH=f"{lab.control_dir}/%%h", PATH=f"{VENV_BIN}:{os.environ['PATH']}")
    return subprocess.run([str(VENV_BIN / "ansible-playbook"), "-i", str(inventory), "site.yml",
                           "-e", f"@{extra}"], cwd=ANSIBLE_DIR, env=env, capture_output=True, text=True,
                          timeout=600)


def _recap(out: str) -> dict[str, dict[str, int]]:
    rec = {}
    for m in re.finditer(r"^(\S+)\s+:\s+((?:\w+=\d+\s*)+)$", out, re.M):
        rec[m.group(1)] = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", m.group(2))}
    return rec


@pytest.fixture(scope="module")
def tuned(lab: NetnsLab, inventory: Path) -> dict:
    """Run site.yml twice against the lab; returns both runs' output and recaps."""
    scratch = lab.tmp / "hosts"
    roots = {k: _sysctl_root(k) for k in [*WANTED, *HOST_WIDE]}
    extra = {
        "xferlab_server_backend": "local",
        "xl_scratch": str(scratch),
        "tuning_sysctl_file": "{{ xl_scratch }}/{{ inventory_hostname }}/sysctl.d/60-xferlab.conf",
        "tuning_limits_file": "{{ xl_scratch }}/{{ inventory_hostname }}/limits.d/60-xferlab.conf",
        "tuning_systemd_conf_dir": "{{ xl_scratch }}/{{ inventory_hostname }}/system.conf.d",
        "tuning_record_path": "{{ xl_scratch }}/{{ inventory_hostname }}/tuning.json",
        # host-wide: the machine's own values, so the real host is not changed
        "tuning_sysctls_host_wide": {k: int(roots[k]) for k in HOST_WIDE},
        "tuning_cpu_governor": "",
        # xferlab is this checkout, installed in this venv
        "loadgen_venv": str(VENV_BIN.parent),
        "loadgen_source": str(ROOT),
        "loadgen_install_system_packages": False,
    }
    extra_file = lab.tmp / "extra-vars.json"
    extra_file.write_text(json.dumps(extra))
    first = _playbook(lab, inventory, extra_file)
    assert first.returncode == 0, f"site.yml failed:\n{first.stdout[-6000:]}\n{first.stderr[-3000:]}"
    second = _playbook(lab, inventory, extra_file)
    assert second.returncode == 0, f"site.yml (second run) failed:\n{second.stdout[-6000:]}\n{second.stderr[-3000:]}"
    return {"first": first.stdout, "second": second.stdout, "roots": roots, "scratch": scratch}


def test_site_applies_tuning_in_each_namespace(lab: NetnsLab, tuned: dict) -> None:
    rec = _recap(tuned["first"])
    assert set(rec) == {"srv", "cli1", "cli2"}, tuned["first"][-3000:]
    for host, counts in rec.items():
        assert counts["failed"] == 0 and counts["unreachable"] == 0, (host, counts)
        assert counts["changed"] > 0, f"{host}: the first run changed nothing"
    for h in lab.hosts:
        got = {k: h.sysctl(k) for k in WANTED}
        assert got == WANTED, f"{h.name} ({h.netns}): {got}"
        for k in HOST_WIDE:
            assert h.sysctl(k) == tuned["roots"][k]
        d = tuned["scratch"] / h.name
        record = json.loads((d / "tuning.json").read_text())
        assert {k: str(v) for k, v in record["sysctls"].items()} == WANTED
        assert record["host"] == h.name and record["nofile"] == 1048576
        assert record["sysctls_host_wide"] == {k: int(tuned["roots"][k]) for k in HOST_WIDE}
        limits = (d / "limits.d" / "60-xferlab.conf").read_text()
        assert re.search(r"^\*\s+soft\s+nofile\s+1048576", limits, re.M), limits
        assert re.search(r"^root\s+hard\s+nofile\s+1048576", limits, re.M), limits
        assert "DefaultLimitNOFILE=1048576" in (d / "system.conf.d" / "60-xferlab.conf").read_text()
        conf = (d / "sysctl.d" / "60-xferlab.conf").read_text()
        assert "net.core.somaxconn=65535" in conf.replace(" ", "")
    # per-namespace keys: the control host (root namespace) keeps its own values
    for k in WANTED:
        assert _sysctl_root(k) == tuned["roots"][k], f"{k} changed in the root namespace"


def test_site_second_run_changes_nothing(tuned: dict) -> None:
    rec = _recap(tuned["second"])
    assert set(rec) == {"srv", "cli1", "cli2"}, tuned["second"][-3000:]
    for host, counts in rec.items():
        assert counts["changed"] == 0 and counts["failed"] == 0, (host, counts, tuned["second"][-4000:])


def test_tuning_record_in_environment_snapshot(tuned: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    from runner.metrics.environment import snapshot

    monkeypatch.setenv("XFERLAB_TUNING_FILE", str(tuned["scratch"] / "srv" / "tuning.json"))
    snap = snapshot()
    assert snap["tuning"]["applied_by"] == "ansible role tuning"
    assert snap["tuning"]["sysctls"]["net.core.somaxconn"] == 65535
    monkeypatch.setenv("XFERLAB_TUNING_FILE", str(tuned["scratch"] / "nowhere.json"))
    assert "tuning" not in snapshot()


def test_ansible_available() -> None:
    assert shutil.which("ansible-playbook", path=str(VENV_BIN)), "ansible-playbook missing from the venv"


# ----------------------------------------------------------------------------- campaign across hosts


def _warm_server_cache(server: dict) -> None:
    """Make the server's venv/build on the control host (which may reach the package
    index); the namespace hosts share the cache and have no route out."""
    from runner.backends.local import LocalBackend
    from runner.spec.model import ServerSpec
    from tests.runner.support import check_or_skip

    check_or_skip(LocalBackend(), ServerSpec.model_validate(server).request(2000))


def _run_across_hosts(lab: NetnsLab, inventory: Path, db_url: str, spec: dict) -> subprocess.CompletedProcess:
    """``xferlab run`` of ``spec`` (its servers' builds made first on this host) across the
    lab's hosts of ``inventory``, stored in ``db_url``; the finished run (exit status 0)."""
    import yaml

    for server in spec["servers"]:
        _warm_server_cache(server)
    spec_file = lab.tmp / "multihost.yaml"
    spec_file.write_text(yaml.safe_dump(spec))
    env = dict(os.environ, XFERLAB_DATABASE_URL=db_url, PATH=f"{VENV_BIN}:{os.environ['PATH']}",
               XFERLAB_INVENTORY_DIRS=str(inventory.parent))
    r = subprocess.run([str(VENV_BIN / "xferlab"), "run", str(spec_file), "--inventory", str(inventory),
                        "--format", "md"], env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, f"xferlab run failed ({r.returncode}):\n{r.stdout[-5000:]}\n{r.stderr[-5000:]}"
    return r


def test_campaign_across_hosts(lab: NetnsLab, inventory: Path, tuned: dict, db_url: str) -> None:
    from sqlalchemy import select
    from sqlalchemy.orm import Session

    from runner.store.db import get_engine
    from runner.store.models import Campaign, Cell, Environment, Sample

    server = {"name": "pyftpdlib"}
    _run_across_hosts(lab, inventory, db_url, {
        "name": "multi-host netns", "repeats": 1, "warmup": False, "backend": "local", "servers": [server],
        "workloads": [{"name": "login", "params": {"clients": 300, "phase_timeout": 120}},
                      {"name": "retr_concurrent", "params": {"clients": 4, "file_size": "10M", "phase_timeout": 120}}],
        "hosts": {"start_delay": 3.0}})

    engine = get_engine(url=db_url)
    with Session(engine) as s:
        camp = s.scalars(select(Campaign).where(Campaign.name == "multi-host netns")).one()
        assert camp.spec["hosts"]["inventory"] == str(inventory)
        cells = {c.workload: c for c in s.scalars(select(Cell).where(Cell.campaign_id == camp.id))}
        assert set(cells) == {"login", "retr_concurrent"}
        for c in cells.values():
            assert c.status == "done", (c.workload, c.error)

        def samples(cell: Cell) -> dict[tuple[str, str], Sample]:
            return {(x.metric, x.stat): x for x in s.scalars(select(Sample).where(Sample.cell_id == cell.id))}

        # 300 concurrent connect+login: 150 from each client host, one stored cell
        login = samples(cells["login"])
        assert login[("errors", "total")].value == 0
        assert login[("ops_rate", "value")].value * login[("elapsed", "value")].value == pytest.approx(300)
        assert len(login[("latency", "p50")].raw) == 300  # merged latency distribution
        hosts = {k[1]: v for k, v in login.items() if k[0] == "client_host"}
        assert set(hosts) == {"cli1", "cli2"}
        assert [hosts[h].value for h in ("cli1", "cli2")] == [150, 150]
        # elapsed spans both hosts' phases (earliest start to latest end)
        raws = [h.raw for h in hosts.values()]
        assert login[("elapsed", "value")].value == pytest.approx(
            max(x["ended_at"] for x in raws) - min(x["started_at"] for x in raws))
        assert all(abs(x["late_s"]) < 2.0 for x in raws), raws
        assert login[("client_cpu", "user")].value > 0
        assert ("server_mem_uss", "peak") in login and login[("server_mem_uss", "peak")].value > 0

        # 4 clients RETR a 10 MiB file: 2 per host; bytes summed, fairness over all 4
        retr = samples(cells["retr_concurrent"])
        assert retr[("bytes", "value")].value == 4 * 10 * (1 << 20)
        assert retr[("errors", "total")].value == 0
        fair = retr[("fairness", "jain")]
        assert len(fair.raw) == 4 and 0 < fair.value <= 1
        hosts = {k[1]: v for k, v in retr.items() if k[0] == "client_host"}
        assert {h: v.raw["clients"] for h, v in hosts.items()} == {"cli1": 2, "cli2": 2}
        assert {h: v.raw["bytes"] for h, v in hosts.items()} == {"cli1": 20 << 20, "cli2": 20 << 20}
        tput = retr[("throughput", "value")].value
        assert tput == pytest.approx(retr[("bytes", "value")].value / (1 << 20) / retr[("elapsed", "value")].value)

        # environment: the server host's snapshot, with every host's tuning record
        envrow = s.get(Environment, cells["login"].environment_id)
        data = envrow.data
        assert data["backend"] == "local+multihost"
        assert data["tuning"]["host"] == "srv"
        assert data["sysctls"]["net.core.somaxconn"] == "65535"  # read inside the server's namespace
        assert set(data["hosts"]["clients"]) == {"cli1", "cli2"}
        for name, snap in data["hosts"]["clients"].items():
            assert snap["tuning"]["host"] == name
            assert snap["sysctls"]["net.ipv4.ip_local_port_range"] == "1024 65535"
    # nothing left running on the hosts but their sshd
    for h in lab.hosts:
        pids = subprocess.run(["ip", "netns", "pids", h.netns], capture_output=True, text=True).stdout.split()
        cmds = [Path(f"/proc/{p}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                for p in pids if Path(f"/proc/{p}/cmdline").exists()]
        assert all("sshd" in c for c in cmds), (h.name, cmds)


def test_profiled_cell_across_hosts(lab: NetnsLab, inventory: Path, tuned: dict, db_url: str) -> None:
    """A profiled campaign across the hosts: ``xferlab serve`` records the server's profile
    on the server host (perf on tpd's cgroup there) and hands it back with the cell. tpd's
    RETR shows its sendfile path, and the on-CPU seconds the samples stand for are within
    the server CPU the cell measured (the same phase, read by the sampler on that host)
    give or take half and two samples' quantization."""
    from sqlalchemy import select
    from sqlalchemy.orm import Session

    from runner.store.db import get_engine
    from runner.store.models import Campaign, Cell, Sample
    from runner.store.profiles import load_profile
    from tests.runner.cell.test_profile_cell import _needs_perf

    _needs_perf()
    r = _run_across_hosts(lab, inventory, db_url, {
        "name": "multi-host profile", "repeats": 1, "warmup": False, "backend": "local", "profile": True,
        "servers": [{"name": "tpd"}],
        "workloads": [{"name": "retr_concurrent", "params": {"clients": 4, "file_size": "256M", "phase_timeout": 120}}],
        "hosts": {"start_delay": 1.0}})
    engine = get_engine(url=db_url)
    with Session(engine) as s:
        camp = s.scalars(select(Campaign).where(Campaign.name == "multi-host profile")).one()
        cells = s.scalars(select(Cell).where(Cell.campaign_id == camp.id)).all()
        assert [c.profiled for c in cells] == [False, True] and all(c.status == "done" for c in cells)
        prof = load_profile(s, cell_id=cells[1].id)
        assert prof is not None and prof.profiler == "perf", (r.stdout[-3000:], r.stderr[-3000:])
        lines = prof.on_cpu.splitlines()
        assert lines and all(line.startswith("tpd;") for line in lines), lines[:3]
        assert any("do_sendfile" in line for line in lines), lines[:5]
        assert any(row["name"] == "sendfile" and row["count"] > 0 for row in prof.syscalls)
        cpu = {x.stat: x.value for x in s.scalars(select(Sample).where(Sample.cell_id == cells[1].id,
                                                                       Sample.metric == "server_cpu"))}
        server_s = cpu["usage"]  # the server's cgroup on srv, read there
        assert cells[1].server_cpu_source == "cgroup" and server_s > 0.05, cpu
        assert abs(cpu["tree"] - server_s) <= 0.2 * server_s + 0.02, cpu  # tpd is one process: the tree agrees
        assert server_s * 0.5 - 2 / prof.rate_hz <= prof.on_cpu_s <= server_s * 1.5 + 2 / prof.rate_hz, \
            (prof.on_cpu_s, server_s)
