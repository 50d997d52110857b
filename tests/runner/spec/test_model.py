"""Campaign spec validation and expansion."""
from __future__ import annotations

import pytest

from runner.load.registry import get_driver
from runner.spec.model import SpecError, expand, load_spec, parse_spec


def _spec(**kw):
    d = {"servers": [{"name": "pyftpdlib", "version": "2.2.0"}], "workloads": [{"preset": "classic"}]}
    d.update(kw)
    return d


def test_classic_preset_expands_repeat_major():
    spec = parse_spec(_spec(servers=[{"name": "pyftpdlib", "version": "1.5.10"},
                                     {"name": "pyftpdlib", "version": "2.2.0"}], repeats=3))
    cells = expand(spec)
    assert len(cells) == 3 * 8 * 2
    assert [c.seq for c in cells] == list(range(48))
    # every (workload, server) pair runs once before any runs twice
    first = [(c.workload, c.server.display()) for c in cells[:16]]
    assert len(set(first)) == 16 and {c.repeat for c in cells[:16]} == {0}
    assert cells[0].workload == "stor" and cells[2].workload == "retr"


def test_defaults():
    spec = parse_spec(_spec())
    assert spec.repeats == 5 and spec.warmup and spec.backend == "auto"
    p = spec.workloads[0].params
    assert p.clients == 300 and p.file_size == 10 << 20 and p.login_mode == "concurrent"


def test_sizes_parse():
    spec = parse_spec(_spec(workloads=[{"name": "retr_concurrent", "params": {"file_size": "1.5M",
                                                                              "transfer_size": "1GiB"}}]))
    p = spec.workloads[0].params
    assert p.file_size == 1572864 and p.transfer_size == 1 << 30


def test_bad_spec_names_every_bad_field():
    with pytest.raises(SpecError) as ei:
        parse_spec({"servers": [{"name": "pyftpdlib", "versoin": "1"}, {"name": "ftpd9000"}],
                    "workloads": [{"name": "retr", "params": {"file_size": "10Q", "clients": 0}}],
                    "repeats": 0})
    paths = [p for p, _ in ei.value.errors]
    assert "servers.0.versoin" in paths
    assert "servers.1.name" in paths
    assert "workloads.0.params.file_size" in paths
    assert "workloads.0.params.clients" in paths
    assert "repeats" in paths
    msg = str(ei.value)
    assert "servers.0.versoin: unknown field" in msg
    assert "not a size: '10Q'" in msg


def test_unknown_workload_and_preset():
    with pytest.raises(SpecError, match="unknown workload 'retrr'"):
        parse_spec(_spec(workloads=[{"name": "retrr"}]))
    with pytest.raises(SpecError, match="unknown preset 'modern'"):
        parse_spec(_spec(workloads=[{"preset": "modern"}]))
    with pytest.raises(SpecError, match="exactly one of"):
        parse_spec(_spec(workloads=[{"preset": "classic", "name": "retr"}]))


def test_duplicate_servers_rejected():
    with pytest.raises(SpecError, match="duplicate server 'pyftpdlib 2.2.0'"):
        parse_spec(_spec(servers=[{"name": "pyftpdlib", "version": "2.2.0"}] * 2))
    spec = parse_spec(_spec(servers=[{"name": "pyftpdlib", "version": "2.2.0"},
                                     {"name": "pyftpdlib", "version": "2.2.0", "variant": {"use_sendfile": False}}]))
    assert spec.servers[1].display() == "pyftpdlib 2.2.0 [use_sendfile=False]"


def test_external_needs_target():
    with pytest.raises(SpecError, match="needs an 'external' block"):
        parse_spec(_spec(servers=[{"name": "external"}]))
    spec = parse_spec(_spec(servers=[{"name": "external", "external": {"host": "127.0.0.1", "port": 2121,
                                                                       "user": "u", "password": "p", "pid": 1}}]))
    assert spec.servers[0].request(2000).external["port"] == 2121


def test_pinning_checks_cpus():
    with pytest.raises(SpecError, match="pinning.server: .*not available here"):
        parse_spec(_spec(pinning={"server": [4096]}))


def test_load_spec_file_errors(tmp_path):
    p = tmp_path / "s.yaml"
    p.write_text("servers: [\n")
    with pytest.raises(SpecError, match="not valid YAML"):
        load_spec(p)
    with pytest.raises(SpecError, match="cannot read"):
        load_spec(tmp_path / "missing.yaml")
    p.write_text("- just\n- a list\n")
    with pytest.raises(SpecError, match="expected a mapping"):
        load_spec(p)
    j = tmp_path / "s.json"
    j.write_text('{"servers": [{"name": "tpd"}], "workloads": [{"name": "login"}], "repeats": 2}')
    assert load_spec(j).repeats == 2


def test_variant_keys_checked_before_anything_runs():
    with pytest.raises(SpecError) as ei:
        parse_spec(_spec(servers=[{"name": "pyftpdlib", "version": "2.2.0", "variant": {"use_sendfle": False}},
                                  {"name": "vsftpd", "variant": {"backlog": 64, "storage": "floppy"}},
                                  {"name": "tpd", "variant": {"use_sendfile": "no", "pasv_ports": "10-20"}}]))
    errs = dict(ei.value.errors)
    assert errs["servers.0.variant"].startswith("use_sendfle: unknown variant option; pyftpdlib takes: ")
    assert "use_sendfile" in errs["servers.0.variant"]
    assert errs["servers.1.variant"] == ("backlog: vsftpd does not honour it (servers that do: pyftpdlib, twisted); "
                                         "storage: want 'disk' or 'tmpfs', got 'floppy'")
    assert errs["servers.2.variant"] == ("use_sendfile: want true or false, got 'no'; "
                                         "pasv_ports: want LO-HI within 1024-65535, got '10-20'")


def test_storage_axis_expands_servers_once():
    spec = parse_spec(_spec(servers=[{"name": "pyftpdlib", "version": "2.2.0"},
                                     {"name": "tpd", "variant": {"storage": "disk"}},
                                     {"name": "twisted", "label": "tw"}],
                            storage=["disk", "tmpfs"], repeats=1))
    labels = [s.display() for s in spec.servers]
    assert labels == ["pyftpdlib 2.2.0 [storage=disk]", "pyftpdlib 2.2.0 [storage=tmpfs]",
                      "tpd [storage=disk]", "tw [disk]", "tw [tmpfs]"]
    assert len(expand(spec)) == 8 * 5
    # stored and parsed again (the worker does): no second expansion
    again = parse_spec(spec.model_dump(mode="json"))
    assert [s.display() for s in again.servers] == labels
    # disk alone (the default) changes nothing; tmpfs alone marks every server
    assert [s.display() for s in parse_spec(_spec()).servers] == ["pyftpdlib 2.2.0"]
    assert [s.display() for s in parse_spec(_spec(storage=["tmpfs"])).servers] == ["pyftpdlib 2.2.0 [storage=tmpfs]"]
    with pytest.raises(SpecError, match="storage.0: Input should be 'disk' or 'tmpfs'"):
        parse_spec(_spec(storage=["ssd"]))


def test_variant_catalogue_per_server():
    from runner.catalogue.variants import backend_problem, options_for, parse_variant_text

    assert options_for("twisted") == ["storage", "tls", "pasv_ports", "masquerade_address", "backlog", "tmpfs_size*",
                                      "memory*", "network*", "sysctls*", "link"]
    assert "idle_timeout" in options_for("tpd") and "idle_timeout" not in options_for("pyftpdlib")
    assert backend_problem("pyftpdlib", {"network": "host"}, "local").endswith(
        "variant option 'network' needs the docker backend (this cell runs under local)")
    assert backend_problem("pyftpdlib", {"network": "host", "storage": "tmpfs"}, "docker") is None
    assert parse_variant_text("use_sendfile=false; backlog=512, memory=1g") == {
        "use_sendfile": False, "backlog": 512, "memory": "1g"}
    with pytest.raises(ValueError, match="expected key=value, got 'oops'"):
        parse_variant_text("oops")


def test_driver_default_unknown_and_unsupported_workload(monkeypatch):
    from runner.load import registry as drivers

    base = {"servers": [{"name": "pyftpdlib"}], "workloads": [{"name": "login"}, {"preset": "classic"}]}
    spec = parse_spec(base)
    assert spec.driver is None
    assert {spec.driver_of(w.params, n) for w in spec.workloads for n in w.names()} == {"xferlab-ftp"}
    with pytest.raises(SpecError) as e:
        parse_spec({**base, "driver": "ab"})
    assert "driver: unknown driver 'ab'; known: xferlab-ftp, xferlab-http, wrk, h2load, lftp, wget, curl" \
        in str(e.value)
    monkeypatch.setitem(drivers.DRIVER_MODULES, "login-only", "tests.support.login_only")
    assert parse_spec({**base, "workloads": [{"name": "login"}], "driver": "login-only"}).driver == "login-only"
    with pytest.raises(SpecError) as e:
        parse_spec({**base, "driver": "login-only"})
    msg = str(e.value)
    assert "workloads.1: driver 'login-only' cannot run stor, retr" in msg
    assert "drivers that can: xferlab-ftp" in msg


def test_http_workloads_pair_only_with_http_drivers():
    # tpd speaks FTP and HTTP: these specs fail or pass on the driver alone (pairs: runner.catalogue.pairing)
    srv = [{"name": "tpd"}]
    ok = parse_spec({"servers": srv, "driver": "wrk",
                     "workloads": [{"name": "http_upload", "params": {"clients": 500, "duration": 10,
                                                                       "body_size": "8K", "method": "post"}}]})
    assert ok.workloads[0].params.body_size == 8192
    with pytest.raises(SpecError) as e:  # a named FTP driver cannot run an HTTP workload
        parse_spec({"servers": srv, "driver": "xferlab-ftp", "workloads": [{"name": "http_upload"}]})
    assert "driver 'xferlab-ftp' cannot run http_upload" in str(e.value)
    assert "drivers that can: xferlab-http, wrk, h2load" in str(e.value)
    with pytest.raises(SpecError) as e:
        parse_spec({"servers": srv, "driver": "xferlab-http", "workloads": [{"name": "retr"}]})
    assert "driver 'xferlab-http' cannot run retr" in str(e.value) and "drivers that can: xferlab-ftp" in str(e.value)
    with pytest.raises(SpecError) as e:  # h2load cannot name each PUT
        parse_spec({"servers": srv, "driver": "h2load", "workloads": [{"name": "http_upload"}]})
    assert "workloads.0: driver 'h2load': h2load cannot give each PUT its own name" in str(e.value)
    for bad, words in (({"method": "patch"}, "method"), ({"body_size": 0}, "body_size"),
                       ({"body_size": "2G"}, "body_size")):
        with pytest.raises(SpecError) as e:
            parse_spec({"servers": srv, "driver": "wrk", "workloads": [{"name": "http_upload", "params": bad}]})
        assert words in str(e.value)


def test_default_driver_follows_the_workload_protocol():
    # no driver named: each workload gets xferlab's own client of its protocol, in one campaign
    spec = parse_spec({"servers": [{"name": "tpd"}], "workloads": [
        {"name": "http_upload"}, {"name": "retr"}, {"name": "http_download"}, {"name": "login"}]})
    assert spec.driver is None
    assert [spec.driver_of(w.params, w.name) for w in spec.workloads] == [
        "xferlab-http", "xferlab-ftp", "xferlab-http", "xferlab-ftp"]
    assert {c.workload: spec.driver_of(c.params, c.workload) for c in expand(spec)} == {
        "http_upload": "xferlab-http", "retr": "xferlab-ftp", "http_download": "xferlab-http", "login": "xferlab-ftp"}
    # a preset mixing both protocols expands per workload: each name gets its own default
    from runner.catalogue.workloads import WORKLOADS
    from runner.load.registry import DEFAULT_DRIVERS, default_driver
    assert {default_driver(n) for n in WORKLOADS} == set(DEFAULT_DRIVERS.values())
    assert all(n in get_driver(default_driver(n)).workloads for n in WORKLOADS)
    # a campaign driver still wins over the default, and a workload's own over both
    wrk = parse_spec({"servers": [{"name": "tpd"}], "driver": "wrk", "workloads": [
        {"name": "http_download"}, {"name": "http_download", "params": {"driver": "xferlab-http"}}]})
    assert [wrk.driver_of(w.params, w.name) for w in wrk.workloads] == ["wrk", "xferlab-http"]


def test_workload_driver_overrides_the_campaign_driver():
    # seed 004: wget beside xferlab's own client in one campaign, told apart by key and title
    from runner.catalogue.workloads import WORKLOADS, params_key

    srv = [{"name": "tpd"}]
    spec = parse_spec({"servers": srv, "workloads": [
        {"name": "retr_concurrent", "params": {"clients": 8, "file_size": "1M", "driver": "wget"}},
        {"name": "retr_concurrent", "params": {"clients": 8, "file_size": "1M"}}]})
    own, wget = spec.workloads[1].params, spec.workloads[0].params
    assert (spec.driver_of(wget, "retr_concurrent"), spec.driver_of(own, "retr_concurrent")) == ("wget", "xferlab-ftp")
    assert params_key("retr_concurrent", wget) == params_key("retr_concurrent", own).replace(
        ",file_size=", ",driver=wget,file_size=")
    assert WORKLOADS["retr_concurrent"].title_for(wget) == "8 concurrent clients (RETR 1M file) [wget]"
    assert WORKLOADS["retr_concurrent"].title_for(own) == "8 concurrent clients (RETR 1M file)"
    assert len({c.params_key for c in expand(spec)}) == 2
    with pytest.raises(SpecError) as e:
        parse_spec({"servers": srv, "workloads": [{"name": "retr", "params": {"driver": "ab"}}]})
    assert "workloads.0.params.driver: unknown driver 'ab'" in str(e.value)
    with pytest.raises(SpecError) as e:  # the workload's driver is checked, not the campaign's
        parse_spec({"servers": srv, "workloads": [{"name": "login", "params": {"driver": "wget"}}]})
    assert "workloads.0: driver 'wget' cannot run login" in str(e.value)
    with pytest.raises(SpecError) as e:  # client_options belong to the workload's driver
        parse_spec({"servers": srv, "driver": "lftp", "workloads": [
            {"name": "retr", "params": {"driver": "xferlab-ftp", "client_options": {"xfer:buffer-size": "0x20000"}}}]})
    assert "driver 'xferlab-ftp': takes no client_options" in str(e.value)


def test_seed_presets_003_and_004():
    from runner.spec.presets import preset_data, preset_names

    assert {"classic", "seed002", "seed003", "seed004"} <= set(preset_names())
    s3 = parse_spec(preset_data("seed003"), "preset seed003")
    assert s3.driver == "lftp" and {w.name for w in s3.workloads} == {"retr"}
    assert [w.params.client_options["xfer:buffer-size"] for w in s3.workloads] == ["0x10000", "0x20000", "0x100000"]
    assert all(w.params.transfer_size == 1 << 30 for w in s3.workloads)
    s4 = parse_spec(preset_data("seed004"), "preset seed004")
    assert [s4.driver_of(w.params, w.name) for w in s4.workloads] == ["wget", "xferlab-ftp"]
    assert all((w.params.clients, w.params.file_size) == (512, 1 << 20) for w in s4.workloads)
    assert {"tpd", "vsftpd"} <= {s.name for s in s4.servers}
    queues = parse_spec(preset_data("seed004_queues"), "preset seed004_queues")
    assert [s.display() for s in queues.servers] == [f"tpd [link=100mbit/queue={q}]" for q in
                                                     ("64kb", "50ms", "1mb", "250ms", "4mb", "16mb")]
    assert [(w.params.clients, w.params.file_size, queues.driver_of(w.params, w.name)) for w in queues.workloads] \
        == [(512, 1 << 20, "wget")]


def test_realistic_preset_search_is_bounded_by_measured_limits():
    """The realistic preset: its capacity entry passes the step checks; the server and the
    load generator sit on separate cores (so a one-process server can reach "server CPU");
    its cap is above the 368 users one load-generator core drove against tpd on loopback,
    and its whole search (ramp, bisection to the resolution, confirmation) fits MAX_STEPS."""
    import math

    from runner.metrics.capacity import MAX_STEPS
    from runner.spec.presets import preset_data

    spec = parse_spec(preset_data("realistic"), "preset realistic")
    [w] = spec.workloads
    cap = w.capacity
    assert cap is not None
    cap.check(w.param_sets()[0], w.name)  # raises when a step is too short for its mix
    assert spec.pinning.server and spec.pinning.client and not set(spec.pinning.server) & set(spec.pinning.client)
    assert cap.max_users > 368
    ramp = math.ceil(math.log2(cap.max_users / cap.start)) + 1
    bisection = math.ceil(math.log2(max(cap.max_users // 2 / cap.resolution, 1)))
    assert ramp + bisection + 1 <= MAX_STEPS
