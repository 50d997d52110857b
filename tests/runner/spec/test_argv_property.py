"""Property tests: any spec ``parse_spec`` accepts, whatever text its fields hold, gives the
real clients' argv and lftp script exactly the arguments and commands the drivers intend,
and the docker backend's container an environment and options with no injected item.

Fields covered: ``client_options`` (lftp, curl, wget), the ``external`` block's host,
port, user and password (every client's argv and URL, lftp's ``open``), the variant keys
reaching the container (``sysctls``, ``tmpfs_size``, ``memory``, ``masquerade_address``,
``pasv_ports``), ``version`` (a venv path component), ``hosts`` names."""
from __future__ import annotations

import re
from urllib.parse import urlsplit

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from runner.backends.docker.container import ContainerSettings, container_spec
from runner.load.registry import get_driver
from runner.load.target import Target
from runner.load.tools.curl import OPTIONS as CURL
from runner.load.tools.lftp import SETTINGS
from runner.load.tools.wget import OPTIONS as WGET
from runner.spec.model import SpecError, parse_spec

PROPERTY = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
HOSTILE = list("aZ09 -;\"'\\/.:,!$`|&#%*?<>(){}=\n\t\r\x00") + ["..", "--", "; !sh", "$(id)", "\" ; \"", "-o"]
TABLES = {"lftp": SETTINGS, "curl": CURL, "wget": WGET}
GOOD = ["", "yes", "no", "on", "0", "1", "3", "30", "2.5", "0x20000", "131072", "1400", "nocwd", "IPv4", "lo",
        "127.0.0.1", "::1", "40000-40010", "none"]
#: Characters lftp treats specially outside double quotes (command end, shell, pipes, comments).
LFTP_SPECIAL = set(";!|&>#`$\n\r\\'")

text = st.one_of(st.lists(st.sampled_from(HOSTILE), max_size=8).map("".join), st.text(max_size=20),
                 st.sampled_from(GOOD), st.integers(-5, 1 << 31).map(str))


def lftp_commands(script: str) -> list[list[str]]:
    """The script split as lftp splits it: words on spaces, commands on ``;``, both
    outside double quotes, where a backslash escapes the next character. Asserts that no
    special character stands outside quotes."""
    cmds: list[list[str]] = [[]]
    word: str | None = None
    quoted = escaped = False
    for c in script:
        if escaped:
            word, escaped = (word or "") + c, False
        elif quoted and c == "\\":
            escaped = True
        elif c == '"':
            quoted, word = not quoted, word or ""
        elif quoted:
            word += c  # type: ignore[operator]
        elif c in " ;":
            if word is not None:
                cmds[-1].append(word)
                word = None
            if c == ";":
                cmds.append([])
        else:
            assert c not in LFTP_SPECIAL, (c, script)
            word = (word or "") + c
    assert not quoted and not escaped, script
    if word is not None:
        cmds[-1].append(word)
    return cmds


def _parses(option, value: str) -> bool:
    try:
        option.kind.parse(value)
    except ValueError:
        return False
    return True


def check_argvs(driver: str, params, target: Target, workload: str) -> None:
    """Build ``driver``'s argv for ``params`` and ``target``; assert its exact shape."""
    d = get_driver(driver)
    remote, local = "xferlab-1.bin", "/dev/null"
    argv = d.argv(driver, workload, target, params, remote, local)
    opts = params.client_options
    canon = {k: TABLES[driver][k].kind.parse(v) for k, v in opts.items()}
    if driver == "lftp":
        assert argv[:3] == ["lftp", "--norc", "-c"] and len(argv) == 4
        cmds = lftp_commands(argv[3])
        assert [c[0] for c in cmds] == ["set"] * (7 + len(opts)) + ["open", "put" if workload.startswith("stor")
                                                                     else "get"]
        assert all(len(c) == 3 for c in cmds[:-2])
        assert [c[1:] for c in cmds[7:-2]] == [[k, v] for k, v in canon.items()]
        assert cmds[-2] == ["open", "-u", f"{target.user},{target.password}", "-p", str(target.port), target.host]
        return
    head = 5 if driver == "curl" else 7
    tail = argv[head:-1]
    if driver == "curl":
        assert argv[:head] == ["curl", "-q", "-sS", "--user", f"{target.user}:{target.password}"]
        assert argv[4].split(":", 1)[0] == target.user
        if params.passive == "pasv":
            assert tail[0] == "--disable-epsv"
            tail = tail[1:]
        want = [x for k, v in canon.items() for x in ([k] if CURL[k].kind.flag else [k, v])]
        assert tail[:len(want)] == want and tail[len(want):][0] in ("-o", "-T") and len(tail) == len(want) + 4
    else:
        assert argv[:head] == ["wget", "--no-config", "-nv", "--tries=1", "-O", local, f"--user={target.user}"]
        assert tail == [f"--password={target.password}"] + [k if WGET[k].kind.flag else f"{k}={v}"
                                                            for k, v in canon.items()]
    for v in canon.values():
        assert re.fullmatch(r"[A-Za-z0-9.:_-]*", v) and not v.startswith("-"), v
    url = urlsplit(argv[-1])
    assert (url.scheme, url.hostname, url.port, url.path) == ("ftp", target.host.lower(), target.port, "/" + remote)


@PROPERTY
@given(driver=st.sampled_from(["lftp", "curl", "wget"]), upload=st.booleans(),
       passive=st.sampled_from(["pasv", "epsv"]),
       data=st.data())
def test_client_options_add_no_argument_or_command(driver, upload, passive, data):
    table = TABLES[driver]
    valid = st.sampled_from([(k, g) for k, o in table.items() for g in GOOD if _parses(o, g)])
    hostile = st.tuples(st.one_of(st.sampled_from(list(table)), text), text)
    options = dict(data.draw(st.lists(st.one_of(valid, valid, valid, valid, hostile), max_size=3)))
    workload = "stor_concurrent" if upload and driver != "wget" else "retr_concurrent"
    try:
        spec = parse_spec({"servers": [{"name": "pyftpdlib"}], "driver": driver, "workloads": [
            {"name": workload, "params": {"client_options": options, "passive": passive}}]})
    except SpecError:
        event("refused")
        return
    event("accepted")
    check_argvs(driver, spec.workloads[0].params, Target("127.0.0.1", 2121, "u", "p"), workload)


@PROPERTY
@given(host=st.one_of(text, st.sampled_from(["127.0.0.1", "::1", "ftp.example.org", "a-b.c"])),
       user=text, password=text, port=st.integers(1, 65535))
def test_external_credentials_and_host_add_no_argument_or_command(host, user, password, port):
    try:
        spec = parse_spec({"servers": [{"name": "external", "external": {"host": host, "port": port, "user": user,
                                                                          "password": password}}],
                           "workloads": [{"name": "retr_concurrent"}], "driver": "lftp"})
    except SpecError:
        event("refused")
        return
    event("accepted")
    ext = spec.servers[0].external
    assert ext is not None and "\n" not in ext.user + ext.password and not ext.host.startswith("-")
    target = Target(ext.host, ext.port, ext.user, ext.password)
    for driver in ("lftp", "curl", "wget"):
        check_argvs(driver, spec.workloads[0].params, target, "retr_concurrent")


SYSCTL = st.one_of(text, st.sampled_from(["net.core.somaxconn", "net.ipv4.tcp_syncookies", "net.ipv4.a/../b"]))


@PROPERTY
@given(variant=st.fixed_dictionaries({"storage": st.just("tmpfs")}, optional={
    "sysctls": st.dictionaries(SYSCTL, st.one_of(text, st.integers(-1, 1 << 20), st.just("32768 60999")),
                               min_size=1, max_size=2),
    "tmpfs_size": st.one_of(text, *[st.sampled_from(["512m", "2g"])] * 3),
    "memory": st.one_of(text, *[st.sampled_from(["512m", "2g"])] * 3),
    "masquerade_address": st.one_of(text, *[st.just("192.0.2.1")] * 3),
    "pasv_ports": st.one_of(text, *[st.just("30000-30010")] * 3)}), version=st.one_of(text, *[st.just("2.2.0")] * 3))
def test_variant_values_reach_the_container_as_typed_values(variant, version):
    try:
        spec = parse_spec({"servers": [{"name": "pyftpdlib", "version": version, "variant": variant}],
                           "workloads": [{"name": "retr_concurrent"}], "backend": "docker"})
    except SpecError:
        event("refused")
        return
    event("accepted")
    srv = spec.servers[0]
    # one path component of the venv folder, <package>-<version> (runner.backends.local.venvs)
    assert srv.version is not None and "/" not in srv.version and srv.version[0].isdigit()
    c = container_spec(srv.request(spec.max_clients), ContainerSettings(), image_id="sha256:0", image_tag="t",
                       built=False, name="xl-prop", password="pw", pick_port=lambda: 2121)
    for k, v in c.env.items():
        assert re.fullmatch(r"[A-Za-z0-9_.:/=-]*", v), (k, v)
    for k, v in c.kwargs["sysctls"].items():
        assert re.fullmatch(r"net(\.[a-z0-9_]+)+", k) and re.fullmatch(r"[A-Za-z0-9_. -]+", v), (k, v)
    assert c.kwargs["tmpfs"]["/srv/ftp"].split(",")[1:] == ["mode=0755"]
    assert re.fullmatch(r"[0-9]+[kKmMgG]?", c.kwargs["mem_limit"])


@PROPERTY
@given(server=text, clients=st.lists(text, min_size=1, max_size=3))
def test_inventory_host_names_are_plain_names(server, clients):
    try:
        spec = parse_spec({"servers": [{"name": "pyftpdlib"}], "workloads": [{"name": "retr_concurrent"}],
                           "hosts": {"server": server, "clients": clients}})
    except SpecError:
        event("refused")
        return
    event("accepted")
    assert spec.hosts is not None
    for name in [spec.hosts.server, *(spec.hosts.clients or [])]:
        assert re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name or "")
