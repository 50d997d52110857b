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
