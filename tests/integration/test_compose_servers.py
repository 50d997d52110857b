"""compose/servers.yml end to end: the six servers as standing services (images as
runner.backends.docker.images builds them, reused by tag), each answering a login, a STOR and a RETR of
the same bytes through its published control port and passive range on 127.0.0.1; then
a short campaign against two of them as ``external`` servers (``xferlab
compose-targets``), stored in the test database.

Skipped (with the reason) only when no Docker engine answers or no Compose is installed.
The compose project is unique per session and torn down (volumes included) afterwards;
its ports are moved (FTP_PORT_PREFIX, PASV_PORT_PREFIX) to ones free here."""
from __future__ import annotations

import ftplib
import io
import os
import random
import secrets
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from sqlalchemy import create_engine, select
from sqlalchemy.orm import Session

from runner.backends.probe import ProbeError, wait_ready
from runner.store.models import Campaign
from tests.docker_support import engine_and_compose, ensure_base, ensure_images
from tests.support.ports import is_free

# Cold machine: the fixture may bootstrap the base and build the six images (bounded by
# each build's own timeout); with the images present the module takes well under a minute.
pytestmark = [pytest.mark.docker, pytest.mark.integration, pytest.mark.timeout(2700)]

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "compose" / "servers.yml"
XFERLAB = [sys.executable, "-m", "runner.cli"]
#: compose/servers.yml's services in file order: service i (0-based) has control port
#: FTP_PORT_PREFIX + str(i + 1) and passive range PASV_PORT_PREFIX + f"{i}00" .. f"{i}49".
SERVICES = list(yaml.safe_load(COMPOSE_FILE.read_text())["services"])


def _ports(ftp_prefix: int, pasv_prefix: int) -> dict[str, tuple[int, range]]:
    """service -> (control port, passive range) for the given prefixes."""
    return {name: (int(f"{ftp_prefix}{i + 1}"), range(int(f"{pasv_prefix}{i}00"), int(f"{pasv_prefix}{i}49") + 1))
            for i, name in enumerate(SERVICES)}


def _pick_prefixes() -> tuple[int, int]:
    """FTP and passive port prefixes whose ports are all free on 127.0.0.1 and do not overlap
    (at most 40 tries; control ports 1001-31996, passive ranges 10000-31549: below the
    ephemeral range)."""
    rnd = random.Random()
    for _ in range(40):
        ftp, pasv = rnd.randrange(100, 3200), rnd.randrange(10, 32)
        ports = _ports(ftp, pasv)
        control = {c for c, _ in ports.values()}
        if any(c in r for c in control for _, r in ports.values()):
            continue  # a control port inside a passive range: compose cannot publish both
        if all(is_free(c) and all(is_free(p) for p in r) for c, r in ports.values()):
            return ftp, pasv
    raise AssertionError("no free set of ports for compose/servers.yml on 127.0.0.1 after 40 tries")


class _FTP(ftplib.FTP):
    """ftplib's client connecting where each 227 reply says (as clients do; ftplib's default
    uses the control connection's peer instead), keeping the (host, port) of every reply."""

    trust_server_pasv_ipv4_address = True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.announced: list[tuple[str, int]] = []

    def makepasv(self):
        host, port = super().makepasv()
        self.announced.append((host, port))
        return host, port


@pytest.fixture(scope="module")
def servers():
    """`docker-compose -f compose/servers.yml up -d` (unique project, images by tag, no build);
    yields a dict: env, project, password, ports (service -> (control port, passive range))."""
    client, compose = engine_and_compose()
    ensure_base(client)
    ensure_images(client, servers=SERVICES)  # the tags compose uses; up-to-date images are reused
    ftp_prefix, pasv_prefix = _pick_prefixes()
    project = f"xflsrv{os.getpid()}"
    password = secrets.token_hex(12)
    env = {**os.environ, "FTP_PASSWORD": password, "FTP_PORT_PREFIX": str(ftp_prefix),
           "PASV_PORT_PREFIX": str(pasv_prefix), "COMPOSE_PROJECT_NAME": project}
    base = [*compose, "-f", str(COMPOSE_FILE), "-p", project]
    ports = _ports(ftp_prefix, pasv_prefix)
    try:
        r = subprocess.run([*base, "up", "-d", "--no-build"], env=env, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr
        for name, (port, _) in ports.items():  # every service answers its greeting and a login
            try:
                wait_ready("127.0.0.1", port, "xferlab", password, timeout=60)
            except ProbeError as e:
                logs = subprocess.run([*base, "logs", "--tail", "30", name], env=env, capture_output=True,
                                      text=True, timeout=60).stdout
                raise AssertionError(f"compose service {name} on 127.0.0.1:{port}: {e}\n{logs}") from e
        yield {"env": env, "project": project, "password": password, "ports": ports}
    finally:
        r = subprocess.run([*base, "down", "-v", "--remove-orphans"], env=env, capture_output=True, text=True,
                           timeout=300)
        left = client.containers.list(all=True, filters={"label": f"com.docker.compose.project={project}"})
        assert r.returncode == 0 and not left, (r.stdout + r.stderr, left)


@pytest.mark.parametrize("service", SERVICES)
def test_service_answers_login_stor_retr(servers, service):
    """A real FTP session through the published ports: login, PASV announcing 127.0.0.1 and
    a port of the service's published range, STOR of random bytes, RETR of the same bytes."""
    port, pasv = servers["ports"][service]
    data = os.urandom(300_001)
    ftp = _FTP(timeout=20)
    try:
        ftp.connect("127.0.0.1", port)
        ftp.login("xferlab", servers["password"])
        ftp.storbinary("STOR compose-check.bin", io.BytesIO(data))
        got = io.BytesIO()
        ftp.retrbinary("RETR compose-check.bin", got.write)
        assert got.getvalue() == data, (service, len(got.getvalue()))
        assert ftp.size("compose-check.bin") == len(data)
        ftp.delete("compose-check.bin")
        ftp.quit()
    finally:
        ftp.close()
    assert len(ftp.announced) == 2 and all(h == "127.0.0.1" and p in pasv for h, p in ftp.announced), \
        (ftp.announced, pasv)


def test_campaign_against_compose_services(servers, xferlab_env, tmp_path):
    """`xferlab compose-targets` turns two running services into external servers (with
    their server PIDs); a 1-repeat login + RETR campaign against them is done and stored,
    with the servers' process-tree memory."""
    spec_file = tmp_path / "compose.yaml"
    env = {**xferlab_env, "FTP_PASSWORD": servers["password"]}
    t0 = time.monotonic()
    p = subprocess.run([*XFERLAB, "compose-targets", "-p", servers["project"], "--services", "vsftpd,tpd",
                        "-o", str(spec_file)], env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert stat.S_IMODE(spec_file.stat().st_mode) == 0o600
    spec = yaml.safe_load(spec_file.read_text())
    ext = {s["label"]: s["external"] for s in spec["servers"]}
    assert [s["name"] for s in spec["servers"]] == ["external", "external"]
    for service in ("vsftpd", "tpd"):
        (label,) = [lab for lab in ext if lab.startswith(service + " ") and lab.endswith("(compose)")]
        assert ext[label]["port"] == servers["ports"][service][0] and ext[label]["host"] == "127.0.0.1"
        assert ext[label]["pid"] > 1, p.stderr  # the server's host PID: memory is sampled
    p = subprocess.run([*XFERLAB, "run", str(spec_file), "--workloads", "login,retr", "--clients", "5",
                        "--transfer-size", "4M", "--duration", "0.5", "--repeats", "1", "--name", "compose-ext"],
                       env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    print(f"compose-targets + campaign: {time.monotonic() - t0:.1f} s; servers {sorted(ext)}")
    eng = create_engine(xferlab_env["XFERLAB_DATABASE_URL"])
    try:
        with Session(eng) as s:
            camp = s.scalars(select(Campaign).where(Campaign.name == "compose-ext")).one()
            bad = [(c.server_label, c.workload, c.status, c.error) for c in camp.cells if c.status != "done"]
            assert camp.status == "done" and not bad, bad
            assert camp.cells_total == 4
            assert {c.server_label for c in camp.cells} == set(ext)
            for cell in camp.cells:
                metrics = {(x.metric, x.stat): x.value for x in cell.samples}
                assert cell.build.info["obtained"] == "external" and cell.build.info["pid"] in \
                    {e["pid"] for e in ext.values()}
                assert metrics.get(("server_mem_rss_minus_shared", "peak"), 0) > 0, sorted(metrics)
                if cell.workload == "retr":
                    assert metrics[("throughput", "value")] > 0, sorted(metrics)
    finally:
        eng.dispose()
