"""``client_options`` as typed allow-lists (runner.load.tools.options) and the ``external``
block's host/user/password (runner.spec.external), through ``parse_spec``; and lftp, curl
and wget run for real against pyftpdlib on 127.0.0.1 with hostile but accepted values."""
from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from runner.backends.external import external_target
from runner.load.registry import get_driver
from runner.load.target import Target
from runner.load.tools.curl import OPTIONS as CURL
from runner.load.tools.lftp import SETTINGS
from runner.load.tools.wget import OPTIONS as WGET
from runner.spec.model import SpecError, parse_spec
from tests.runner.support import driver_or_skip
from tests.support import SUPPORT_DIR
from tests.support.pyftpd import stop

SERVER = SUPPORT_DIR / "pyftpd_server.py"


def _spec(driver: str, options: dict, workload: str = "retr_concurrent"):
    return parse_spec({"servers": [{"name": "pyftpdlib"}], "driver": driver,
                       "workloads": [{"name": workload, "params": {"client_options": options}}]})


def _argv(driver: str, options: dict, workload: str = "retr_concurrent") -> list[str]:
    params = _spec(driver, options, workload).workloads[0].params
    return get_driver(driver).argv(driver, workload, Target("127.0.0.1", 2121, "u", "p"), params, "f.bin",
                                   "/dev/null")


@pytest.mark.parametrize(("driver", "options", "written"), [
    ("lftp", {"xfer:buffer-size": "0x20000"}, "set xfer:buffer-size 131072"),
    ("lftp", {"xfer:buffer-size": 131072}, "set xfer:buffer-size 131072"),
    ("lftp", {"net:socket-buffer": "0", "net:timeout": 30}, "set net:socket-buffer 0; set net:timeout 30"),
    ("lftp", {"ftp:sync-mode": "OFF", "ftp:use-feat": True}, "set ftp:sync-mode no; set ftp:use-feat yes"),
    ("lftp", {"net:limit-rate": "1048576", "net:socket-maxseg": "1400"}, "set net:limit-rate 1048576"),
    ("curl", {"--ftp-method": "nocwd", "--local-port": "40000-40010"}, "--ftp-method nocwd --local-port 40000-40010"),
    ("curl", {"--connect-timeout": "2.50", "--interface": "lo", "--tcp-nodelay": ""},
     "--connect-timeout 2.5 --interface lo --tcp-nodelay"),
    ("curl", {"--interface": "::1", "--keepalive-time": 60}, "--interface ::1 --keepalive-time 60"),
    ("wget", {"--prefer-family": "IPv4", "--bind-address": "127.0.0.1", "--tries": "3"},
     "--prefer-family=IPv4 --bind-address=127.0.0.1 --tries=3"),
    ("wget", {"--read-timeout": 30, "--no-dns-cache": True}, "--read-timeout=30 --no-dns-cache"),
])
def test_accepted_values_are_written_in_canonical_form(driver, options, written):
    argv = _argv(driver, options)
    assert written in (argv[-1] if driver == "lftp" else " ".join(argv))


@pytest.mark.parametrize(("driver", "options", "message"), [
    # the attack: lftp runs xfer:verify-command after each download; log:file creates any file
    ("lftp", {"xfer:verify": "yes", "xfer:verify-command": "/tmp/x"}, "unknown lftp option 'xfer:verify'; lftp "
                                                                       "takes: xfer:buffer-size, net:socket-buffer"),
    ("lftp", {"xfer:verify-command": "/tmp/x"}, "unknown lftp option 'xfer:verify-command'"),
    ("lftp", {"log:enabled": "yes", "log:file": "/etc/x"}, "unknown lftp option 'log:enabled'"),
    ("lftp", {"cmd:shell": "/bin/sh"}, "unknown lftp option 'cmd:shell'"),
    ("lftp", {"xfer:buffer-size/host": "1024"}, "unknown lftp option 'xfer:buffer-size/host'"),
    ("lftp", {"net:max-retries": "5"}, "net:max-retries is set by the lftp driver itself"),
    ("lftp", {"ftp:passive-mode": "off"}, "ftp:passive-mode is set by the lftp driver itself"),
    ("lftp", {"xfer:buffer-size": "1; !sh"}, "xfer:buffer-size: value '1; !sh': not a whole number (decimal or 0x "
                                             "hex); want integer 512..67108864"),
    ("lftp", {"xfer:buffer-size": "010"}, "not a whole number"),
    ("lftp", {"xfer:buffer-size": "0x8000000"}, "134217728 is outside 512..67108864"),
    ("lftp", {"net:socket-buffer": "-1"}, "not a whole number"),
    ("lftp", {"ftp:use-feat": "maybe"}, "ftp:use-feat: value 'maybe': not a boolean; want boolean yes/no"),
    ("lftp", {"net:timeout": "5m"}, "not a number of seconds"),
    ("curl", {"--ftp-method": "nocwd --output /etc/passwd"}, "want one of multicwd/nocwd/singlecwd"),
    ("curl", {"--local-port": "-1"}, "not a port N or a range N-M"),
    ("curl", {"--local-port": "50000-40000"}, "low first"),
    ("curl", {"--interface": "-K/etc/x"}, "not an IP address nor an interface name"),
    ("curl", {"--interface": "eth0 x"}, "not an IP address nor an interface name"),
    ("curl", {"--connect-timeout": "1e9"}, "not a number of seconds"),
    ("curl", {"--config": "/tmp/x"}, "unknown curl option '--config'; curl takes: --tcp-nodelay"),
    ("wget", {"--tries": "0"}, "0 is outside 1..20"),
    ("wget", {"--bind-address": "localhost"}, "not an IP address"),
    ("wget", {"--prefer-family": "ipv4;x"}, "want one of IPv4/IPv6/none"),
    ("wget", {"--execute": "x"}, "unknown wget option '--execute'"),
    ("wget", {"--no-glob": "no"}, "takes no value"),
])
def test_refused_values_name_the_option_and_what_is_allowed(driver, options, message):
    with pytest.raises(SpecError, match="client_options: ") as e:
        _spec(driver, options)
    assert message in str(e.value)


def test_every_lftp_setting_is_lftps_and_takes_its_canonical_value():
    """Each allowed name is among this lftp's settings, and lftp
    accepts a canonical value of each (``set`` exits 1 on a bad value)."""
    driver_or_skip("lftp")
    out = subprocess.run(["lftp", "--norc", "-c", "set -a"], capture_output=True, text=True, timeout=10).stdout
    known = {line.split()[1] for line in out.splitlines() if line.startswith("set ")}
    assert not set(SETTINGS) - known
    samples = {"integer": "1024", "seconds": "30", "boolean": "no"}
    values = {n: "64" if n == "net:connection-limit" else samples[o.kind.what.split()[0]] for n, o in SETTINGS.items()}
    script = "; ".join(f"set {n} {o.kind.parse(values[n])}" for n, o in SETTINGS.items())
    r = subprocess.run(["lftp", "--norc", "-c", script + "; set -a"], capture_output=True, text=True, timeout=10)
    assert r.returncode == 0, r.stderr
    assert "set ftp:use-feat no" in r.stdout and "set xfer:buffer-size 1024" in r.stdout


def test_tables_have_meanings_and_no_value_escapes():
    for table in (SETTINGS, CURL, WGET):
        for name, opt in table.items():
            assert opt.meaning and opt.kind.what and name == opt.name


# -- the external block ---------------------------------------------------------------

def _external(**ext) -> dict:
    return {"servers": [{"name": "external", "external": {"user": "u", "password": "p", **ext}}],
            "driver": "lftp", "workloads": [{"name": "retr_concurrent"}]}


@pytest.mark.parametrize(("ext", "message"), [
    ({"host": "127.0.0.1; !touch /tmp/x"}, "want an IP address"),
    ({"host": "-oProxyCommand=x"}, "want an IP address"),
    ({"host": "a b"}, "want an IP address"),
    ({"host": "fe80::1%eth0"}, "want an IP address"),
    ({"host": "1.2.3.999"}, "want an IP address"),
    ({"host": "x" * 64 + ".example"}, "want an IP address"),
    ({"user": "a:b"}, "user: : not allowed"),
    ({"user": "a,b"}, "user: , not allowed"),
    ({"user": ""}, "user: 1..128 characters"),
    ({"password": "p" * 129}, "password: 0..128 characters"),
])
def test_external_values_refused(ext, message):
    with pytest.raises(SpecError, match="servers.0.external") as e:
        parse_spec(_external(**ext))
    assert message in str(e.value)


@pytest.mark.parametrize("host", ["127.0.0.1", "::1", "localhost", "ftp.example.org", "a-1.b2.example."])
def test_external_hosts_accepted(host):
    assert parse_spec(_external(host=host)).servers[0].external.host == host


# -- for real: lftp, curl, wget against pyftpdlib ----------------------------------------

def _hostile(marker: Path) -> list[tuple[str, str]]:
    """User/password pairs the spec accepts, each trying to run ``touch marker``."""
    return [("bench", f'"; !touch {marker}; "'),
            ("be\"n;ch", f"\\\"; !touch {marker}; \\"),
            ("bench", f"$(touch {marker})`touch {marker}` 'x' #; !touch {marker}"),
            ("-bench", f"-x,y;z!touch {marker}")]


@pytest.fixture
def marker():
    """A short path (passwords are at most 128 characters) no test program creates."""
    folder = Path(tempfile.mkdtemp(prefix="xl"))
    yield folder / "PWNED"
    shutil.rmtree(folder)


def _serve(home: Path, user: str, password: str):
    proc = subprocess.Popen([sys.executable, str(SERVER), str(home), user, password], stdout=subprocess.PIPE,
                            text=True)
    line = proc.stdout.readline() if proc.stdout else ""
    if not line.startswith("PORT "):
        stop(proc)
        pytest.fail(f"pyftpd_server did not start: {line!r}")
    return proc, int(line.split()[1])


def _run_spec_for_real(data: dict, home: Path, user: str, password: str) -> None:
    """``data`` through parse_spec; when accepted, its first workload run by its driver
    against a pyftpdlib with ``user``/``password`` at the spec's external host, as the
    worker would run it (the Target from the spec's ServerRequest)."""
    try:
        spec = parse_spec(data)
    except SpecError:
        return  # refused before anything ran
    proc, port = _serve(home, user, password)
    try:
        srv = spec.servers[0]
        req = srv.request(spec.max_clients)
        req.external.update(port=port, root=str(home))  # the fixture written there: lftp runs the script
        target = external_target(req)
        w = spec.workloads[0]
        get_driver(spec.driver_of(w.params, w.names()[0])).run(w.names()[0], target, w.params)
    finally:
        stop(proc)


def test_the_old_attack_spec_is_refused_and_runs_nothing(tmp_path, marker):
    """lftp's ``xfer:verify-command`` ran any program after each download, ``log:file``
    created any file: both refused by parse_spec (nothing runs)."""
    driver_or_skip("lftp")
    script = tmp_path / "evil.sh"
    script.write_text(f"#!/bin/sh\ntouch {marker}\n")
    script.chmod(0o755)
    log = tmp_path / "created-by-lftp.log"
    (tmp_path / "home").mkdir()
    opts = {"xfer:verify": "yes", "xfer:verify-command": str(script), "log:enabled": "yes", "log:file": str(log)}
    data = {"servers": [{"name": "external", "external": {"host": "127.0.0.1", "user": "bench", "password": "pw"}}],
            "driver": "lftp", "workloads": [{"name": "retr_concurrent",
                                             "params": {"clients": 1, "file_size": 1000, "client_options": opts}}]}
    _run_spec_for_real(data, tmp_path / "home", "bench", "pw")
    assert not marker.exists() and not log.exists()
    with pytest.raises(SpecError, match="unknown lftp option 'xfer:verify'"):
        parse_spec(data)


def test_hostile_external_host_is_refused_and_runs_nothing(tmp_path, marker):
    driver_or_skip("lftp")
    (tmp_path / "home").mkdir()
    data = {"servers": [{"name": "external", "external": {"host": f"127.0.0.1; !touch {marker}", "user": "bench",
                                                          "password": "pw"}}],
            "driver": "lftp", "workloads": [{"name": "retr_concurrent", "params": {"clients": 1, "file_size": 1000}}]}
    _run_spec_for_real(data, tmp_path / "home", "bench", "pw")
    assert not marker.exists()
    with pytest.raises(SpecError, match="servers.0.external.host"):
        parse_spec(data)


@pytest.mark.parametrize("name", ["lftp", "curl", "wget"])
def test_hostile_credentials_log_in_and_run_nothing(tmp_path, marker, name):
    """Accepted users and passwords holding quotes, ``;``, ``!``, ``\\``, ``$( )`` and
    backquotes reach the server as they are (the transfer succeeds: the login was exact)
    and run no program."""
    d = driver_or_skip(name)
    for k, (user, password) in enumerate(_hostile(marker)):
        home = tmp_path / f"h{k}"
        home.mkdir()
        data = {"servers": [{"name": "external", "external": {"host": "127.0.0.1", "user": user,
                                                              "password": password}}],
                "driver": name, "workloads": [{"name": "retr_concurrent", "params": {"clients": 1,
                                                                                       "file_size": 1000}}]}
        spec = parse_spec(data)  # accepted
        proc, port = _serve(home, user, password)
        try:
            req = spec.servers[0].request(spec.max_clients)
            req.external.update(port=port, root=str(home))
            r = d.run("retr_concurrent", external_target(req), spec.workloads[0].params)
        finally:
            stop(proc)
        assert r.errors == {} and r.bytes == 1000, (user, password, r.notes)
        assert not marker.exists(), (user, password)
