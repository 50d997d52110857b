"""The ``profile:`` field (runner.spec.profile): levels, precedence, bounds and --profile."""
from __future__ import annotations

import argparse

import pytest

from runner.spec.model import SpecError, parse_spec


def _spec(**kw):
    return parse_spec({"servers": [{"name": "tpd"}, {"name": "pyftpdlib"}], "workloads": [{"name": "retr"}], **kw})


def test_most_specific_entry_wins():
    s = parse_spec({"profile": True,
                    "servers": [{"name": "tpd", "profile": {"rate_hz": 49, "syscalls": False}},
                                {"name": "pyftpdlib", "profile": False}, {"name": "vsftpd"}],
                    "workloads": [{"name": "retr", "profile": {"rate_hz": 199}}, {"name": "login"}]})
    got = {(srv.name, w.name): s.profile_of(srv, w.name, w.params) for srv in s.servers for w in s.workloads}
    assert got[("tpd", "retr")].rate_hz == 49 and got[("tpd", "retr")].syscalls is False
    assert got[("pyftpdlib", "retr")] is None and got[("pyftpdlib", "login")] is None
    assert got[("vsftpd", "retr")].rate_hz == 199
    assert got[("vsftpd", "login")].rate_hz == 99 and got[("vsftpd", "login")].off_cpu is True


def test_unprofiled_by_default():
    s = _spec()
    assert all(s.profile_of(srv, "retr", s.workloads[0].params) is None for srv in s.servers)


@pytest.mark.parametrize("bad, where", [({"rate_hz": 0}, "rate_hz"), ({"rate_hz": 1000}, "rate_hz"),
                                        ({"rate_hz": 99, "cmd": "x"}, "cmd"), ("yes", "profile")])
def test_bad_profile_named(bad, where):
    with pytest.raises(SpecError) as e:
        _spec(profile=bad)
    assert "profile" in str(e.value) and where in str(e.value)


def test_run_profile_flag_profiles_every_cell():
    from runner.cli.campaign import _build_spec

    ns = argparse.Namespace(spec=None, preset="classic", repeats=1, backend=None, driver=None, name=None,
                            servers="tpd,pyftpdlib", workloads="retr,login", clients=None, file_size=None,
                            duration=None, transfer_size=None, login_mode=None, passive=None, storage=None, link=None,
                            tls=None, tls_key=None, no_pin=True, inventory=None, profile=True)
    s = _build_spec(ns)
    assert all(s.profile_of(srv, w.name, w.params) is not None for srv in s.servers for w in s.workloads)


def test_a_profiled_family_gets_one_extra_profiled_repeat_after_every_measured_one():
    from runner.spec.model import count_cells, expand

    s = parse_spec({"repeats": 3, "max_repeats": 5,
                    "servers": [{"name": "tpd", "profile": True}, {"name": "pyftpdlib"}],
                    "workloads": [{"name": "retr"}, {"name": "login"}]})
    cells = expand(s)
    assert len(cells) == 3 * 2 * 2 + 2
    assert count_cells(s) == 5 * 2 * 2 + 2     # the most the campaign can make: max_repeats counted
    profiled = [c for c in cells if c.profiled]
    assert [(c.server.name, c.workload, c.repeat) for c in profiled] == [("tpd", "retr", 5), ("tpd", "login", 5)]
    assert [c.seq for c in profiled] == [12, 13]   # after the 3 x 2 x 2 measured cells
    assert not any(c.profiled for c in cells[:12]) and all(c.repeat < 3 for c in cells[:12])
    assert not any(c.profiled for c in expand(_spec()))
